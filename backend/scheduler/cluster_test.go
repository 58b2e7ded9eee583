package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// On a Redis Cluster of three masters: every key of a class lives on one node (one hash slot,
// so the Lua dispatch is atomic there), the classes spread over the nodes, dispatch is FIFO and
// exactly once, a waiting agent is recorded and forgotten, one leader at a time, and work
// notifications published through one node reach a listener on another. (make test also runs
// this whole package with the cluster as its Redis.)
func TestOnRedisCluster(t *testing.T) {
	c, err := redisconn.Connect(context.Background(), testenv.RedisClusterURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cc, ok := c.Client.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("not a cluster client: %T", c.Client)
	}
	ctx := context.Background()
	q := NewQueue(cc)
	now := time.Now()
	run := fmt.Sprint(now.UnixNano())
	classes := make([]string, 12)
	for i := range classes {
		classes[i] = "cluster-" + run + "-" + fmt.Sprint(i)
		for id := int64(1); id <= 3; id++ {
			if _, err := q.Enqueue(ctx, Entry{PipelineID: id, OrgID: id%2 + 1, Class: classes[i], CPUs: 1, Enqueued: now.Add(time.Duration(id) * time.Millisecond), Cache: "7"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Waiting(ctx, classes[i], Poller{AgentID: "warm", Caches: []string{"7", "8"}}, big, now, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		d, err := q.Dispatch(ctx, classes[i], Poller{AgentID: "warm", Caches: []string{"7"}}, big, Rules{Depth: 5, StarveAfter: time.Hour, HandOver: time.Second}, now)
		if err != nil || d.PipelineID == 0 {
			t.Fatalf("class %s: dispatch %+v %v", classes[i], d, err)
		}
		if err := q.StopWaiting(ctx, classes[i:i+1], Poller{AgentID: "warm", Caches: []string{"7", "8"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Where the keys are: each class's on one master, the classes over more than one.
	nodeOf := map[string]map[string]bool{} // class → masters holding its keys
	var mu sync.Mutex                      // ForEachMaster asks the masters at once
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, "{q:cluster-"+run+"-*").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			class := strings.TrimPrefix(k[:strings.Index(k, "}")], "{q:")
			if nodeOf[class] == nil {
				nodeOf[class] = map[string]bool{}
			}
			nodeOf[class][m.Options().Addr] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	masters := map[string]bool{}
	for _, class := range classes {
		if len(nodeOf[class]) != 1 {
			t.Errorf("class %s has keys on %d masters, want 1", class, len(nodeOf[class]))
		}
		for m := range nodeOf[class] {
			masters[m] = true
		}
	}
	if len(masters) < 2 {
		t.Errorf("12 classes all on %v: the hash tags do not spread them", masters)
	}
	// The remaining entries come out once each, in their teams' order.
	for _, class := range classes {
		seen := map[int64]bool{}
		for {
			d, err := q.Dispatch(ctx, class, Poller{}, big, Rules{Depth: 5, StarveAfter: time.Hour}, now)
			if err != nil {
				break
			}
			if seen[d.PipelineID] {
				t.Fatalf("pipeline %d of %s dispatched twice", d.PipelineID, class)
			}
			seen[d.PipelineID] = true
		}
		if len(seen) != 2 {
			t.Errorf("class %s: %d more dispatched after the first, want 2", class, len(seen))
		}
		if in, err := q.Queued(ctx, class, []int64{1, 2, 3}); err != nil || in[1] || in[2] || in[3] {
			t.Errorf("class %s still holds entries: %v %v", class, in, err)
		}
	}

	// Leader election.
	key := "nimbus:leader:cluster-" + run
	a, b := redisconn.NewLeader(cc, key, time.Minute), redisconn.NewLeader(cc, key, time.Minute)
	if !a.Hold(ctx) || b.Hold(ctx) || !a.Hold(ctx) {
		t.Fatal("two leaders on the cluster, or a leader that lost its own lock")
	}
	cc.Del(ctx, key)
	if !b.Hold(ctx) || a.Hold(ctx) {
		t.Fatal("the leader lock was not taken over")
	}

	// Work notifications across nodes: two intakes (two replicas) on the cluster.
	c2, err := redisconn.Connect(ctx, testenv.RedisClusterURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	here, there := NewIntake(cc, nil), NewIntake(c2.Client, nil)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go there.listen(lctx)
	time.Sleep(200 * time.Millisecond) // the subscription is made
	woke := there.wake.queue("cnb:arch:amd64", "agt_there")
	here.notify(ctx, "cnb:arch:amd64")
	select {
	case <-woke.ch:
	case <-time.After(5 * time.Second):
		t.Fatal("a notification published on the cluster did not reach the other replica")
	}
}
