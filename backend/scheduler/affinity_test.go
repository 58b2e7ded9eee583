package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

func TestCacheRepoOfAPipeline(t *testing.T) {
	plan := func(p protocol.Plan) string {
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	vols := []protocol.Volume{{Path: "/root/.cache", Type: protocol.VolumeCopyOnWrite}}
	builtins := map[string]string{"CNB_REPO_ID": "42"}
	tests := []struct {
		name string
		p    build.Pipeline
		want string
	}{
		{"volumes: the plan's repo id", build.Pipeline{RepoID: 7, Plan: plan(protocol.Plan{Volumes: vols, Builtins: builtins})}, "42"},
		{"no volumes", build.Pipeline{RepoID: 7, Plan: plan(protocol.Plan{Builtins: builtins})}, ""},
		{"data volumes only: no cache", build.Pipeline{RepoID: 7, Plan: plan(protocol.Plan{Builtins: builtins,
			Volumes: []protocol.Volume{{Path: "/data", Type: protocol.VolumeData}}})}, ""},
		{"a cache among data volumes", build.Pipeline{RepoID: 7, Plan: plan(protocol.Plan{Builtins: builtins,
			Volumes: []protocol.Volume{{Path: "/data", Type: protocol.VolumeData}, {Path: "/root/.m2", Type: protocol.VolumeReadWrite}}})}, "42"},
		{"no volumes, the word elsewhere", build.Pipeline{RepoID: 7, Plan: plan(protocol.Plan{Name: `"volumes"`, Builtins: builtins})}, ""},
		{"volumes, no built-in: the row's repo", build.Pipeline{RepoID: 7, Plan: plan(protocol.Plan{Volumes: vols})}, "7"},
		{"volumes, a built-in that is no id", build.Pipeline{RepoID: 7, Plan: plan(protocol.Plan{Volumes: vols, Builtins: map[string]string{"CNB_REPO_ID": "x}"}})}, "7"},
		{"loaded without its plan (reconciler, reaper)", build.Pipeline{RepoID: 7}, ""},
		{"a plan that does not decode", build.Pipeline{RepoID: 7, Plan: `{"volumes": [`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cacheRepo(&tt.p); got != tt.want {
				t.Fatalf("cacheRepo = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPollCachesKeepsRepoIDsOnly(t *testing.T) {
	many := make([]string, protocol.MaxPollCaches+10)
	for i := range many {
		many[i] = strconv.Itoa(i + 1)
	}
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"none", nil, nil},
		{"ids, each once, in order", []string{"3", "1", "3", "2"}, []string{"3", "1", "2"}},
		{"not ids", []string{"", "0", "01", "-1", "a", "1}", "12345678901234567890", "9"}, []string{"9"}},
		{"at most MaxPollCaches", many, many[:protocol.MaxPollCaches]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pollCaches(tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("pollCaches = %v, want %v", got, tt.want)
			}
		})
	}
}

// The dispatch rule 5 on the queue alone: when a cold agent's dispatch leaves a cache-bound
// pipeline to a waiting warm agent, and when it takes it.
func TestCacheAffinityDispatchRule(t *testing.T) {
	const handOver = time.Second
	type waiter struct {
		id    string
		repo  string
		cpus  int
		until time.Duration // from now
	}
	warm := waiter{id: "agt_warm", repo: "42", cpus: 8, until: 30 * time.Second}
	tests := []struct {
		name    string
		cache   string        // of the queued pipeline 1 (4 cores)
		waiters []waiter      // recorded as waiting
		cold    Poller        // who dispatches
		after   time.Duration // since the first cold dispatch left it (0: this is the first)
		want    int64
		wantFor []string // the warm agents it was left for
	}{
		{name: "warm agent waits: left to it", cache: "42", waiters: []waiter{warm}, want: 0, wantFor: []string{"agt_warm"}},
		{name: "no warm agent waits: taken", cache: "42", want: 1},
		{name: "no volumes: taken", cache: "", waiters: []waiter{warm}, want: 1},
		{name: "the warm agent holds another repo's: taken", cache: "43", waiters: []waiter{warm}, want: 1},
		{name: "the warm agent is too small: taken", cache: "42", waiters: []waiter{{id: "agt_warm", repo: "42", cpus: 2, until: time.Minute}}, want: 1},
		{name: "the warm agent's poll is over: taken", cache: "42", waiters: []waiter{{id: "agt_warm", repo: "42", cpus: 8, until: -time.Second}}, want: 1},
		{name: "the poller is warm itself: taken", cache: "42", waiters: []waiter{warm}, cold: Poller{AgentID: "agt_other", Caches: []string{"42"}}, want: 1},
		{name: "hand-over still running: left", cache: "42", waiters: []waiter{warm}, after: handOver - time.Millisecond, want: 0, wantFor: []string{"agt_warm"}},
		{name: "hand-over run out: taken", cache: "42", waiters: []waiter{warm}, after: handOver, want: 1},
		{name: "two warm agents: left to both", cache: "42", waiters: []waiter{warm, {id: "agt_warm2", repo: "42", cpus: 4, until: time.Minute}},
			want: 0, wantFor: []string{"agt_warm", "agt_warm2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			q := NewQueue(redisFor(t))
			class := freshClass(t)
			now := time.Now()
			rules := Rules{Depth: 10, StarveAfter: time.Hour, HandOver: handOver}
			if ok, err := q.Enqueue(ctx, Entry{PipelineID: 1, OrgID: 1, Class: class, CPUs: 4, Enqueued: now, Cache: tt.cache}); err != nil || !ok {
				t.Fatalf("enqueue: %v %v", ok, err)
			}
			for _, w := range tt.waiters {
				who := Poller{AgentID: w.id, Caches: []string{w.repo}}
				if err := q.Waiting(ctx, class, who, Capacity{FreeCPUs: w.cpus}, now, now.Add(w.until)); err != nil {
					t.Fatal(err)
				}
			}
			cold := tt.cold
			if cold.AgentID == "" {
				cold = Poller{AgentID: "agt_cold", Caches: []string{"7"}}
			}
			at := now
			if tt.after > 0 {
				// A first cold dispatch left it; this one comes later.
				if _, err := q.Dispatch(ctx, class, cold, big, rules, now); !errors.Is(err, ErrEmpty) {
					t.Fatalf("first dispatch: %v", err)
				}
				at = now.Add(tt.after)
			}
			d, err := q.Dispatch(ctx, class, cold, big, rules, at)
			if err != nil && !errors.Is(err, ErrEmpty) {
				t.Fatal(err)
			}
			slices.Sort(d.HandedOver)
			if d.PipelineID != tt.want || !slices.Equal(d.HandedOver, tt.wantFor) {
				t.Fatalf("dispatched %d, left for %v; want %d, %v", d.PipelineID, d.HandedOver, tt.want, tt.wantFor)
			}
			if len(tt.wantFor) > 0 {
				if want := handOver - tt.after; d.Recheck != want {
					t.Fatalf("recheck in %v, want %v", d.Recheck, want)
				}
				// The warm agent takes what was left to it.
				got, err := q.Dispatch(ctx, class, Poller{AgentID: "agt_warm", Caches: []string{"42"}}, big, rules, at)
				if err != nil || got.PipelineID != 1 {
					t.Fatalf("the warm agent got %d (%v)", got.PipelineID, err)
				}
			}
		})
	}
}

// A cold agent that leaves a cache-bound pipeline still takes other work in the same dispatch,
// and the bookkeeping is gone once the pipeline is taken.
func TestColdAgentTakesTheNextWorkAndStateIsCleared(t *testing.T) {
	ctx := context.Background()
	rdb := redisFor(t)
	q := NewQueue(rdb)
	class := freshClass(t)
	now := time.Now()
	rules := Rules{Depth: 10, StarveAfter: time.Hour, HandOver: time.Second}
	for _, e := range []Entry{
		{PipelineID: 1, OrgID: 1, Class: class, CPUs: 4, Enqueued: now, Cache: "42"},
		{PipelineID: 2, OrgID: 1, Class: class, CPUs: 4, Enqueued: now.Add(time.Millisecond)},
	} {
		if ok, err := q.Enqueue(ctx, e); err != nil || !ok {
			t.Fatalf("enqueue %d: %v %v", e.PipelineID, ok, err)
		}
	}
	warm := Poller{AgentID: "agt_warm", Caches: []string{"42"}}
	if err := q.Waiting(ctx, class, warm, Capacity{FreeCPUs: 8}, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	d, err := q.Dispatch(ctx, class, Poller{AgentID: "agt_cold"}, big, rules, now)
	if err != nil || d.PipelineID != 2 || !slices.Equal(d.HandedOver, []string{"agt_warm"}) {
		t.Fatalf("cold agent: %+v %v; want pipeline 2, pipeline 1 left for agt_warm", d, err)
	}
	if d, err := q.Dispatch(ctx, class, warm, big, rules, now); err != nil || d.PipelineID != 1 {
		t.Fatalf("warm agent: %+v %v", d, err)
	}
	p := prefix(class)
	if n, _ := rdb.Exists(ctx, p+":handover:1").Result(); n != 0 {
		t.Fatal("the hand-over mark outlived the pipeline's dispatch")
	}
	if n, _ := rdb.HLen(ctx, p+":cache").Result(); n != 0 {
		t.Fatal("the cache field outlived the pipeline's dispatch")
	}
	if err := q.StopWaiting(ctx, []string{class}, warm); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.HLen(ctx, warmKey(class, "42")).Result(); n != 0 {
		t.Fatal("the warm agent is still recorded as waiting")
	}
}

const cachedJob = `
main:
  push:
    - name: cached
      runner: { tags: cnb:arch:amd64, cpus: 4 }
      docker: { volumes: [ /root/.cache:cow ] }
      stages: [ { name: s, script: make } ]
`

const amd64 = "cnb:arch:amd64"

// pollAsync runs a poll and hands its lease over when it returns.
func pollAsync(ctx context.Context, t *testing.T, s *Service, a *Agent, req protocol.PollRequest) <-chan *protocol.Lease {
	out := make(chan *protocol.Lease, 1)
	go func() {
		l, err := s.Poll(ctx, a, req, noDrain())
		if err != nil && ctx.Err() == nil {
			t.Error(err)
		}
		out <- l
	}()
	return out
}

// waitFor polls cond until it holds, or fails the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting until %s", what)
}

// recordedWaiting says whether the agent is recorded in Redis as waiting with the repo's caches.
func (f *fixture) recordedWaiting(a *Agent) bool {
	ok, _ := f.rdb.HExists(context.Background(), warmKey(amd64, strconv.FormatInt(f.repoID, 10)), a.ID).Result()
	return ok
}

// replica is a second server on the same database and Redis. With listen, it relays the other
// replicas' wake-ups (Service.Run does that in production); it is ready when this returns.
func (f *fixture) replica(cfg Config, listen bool) *Service {
	f.t.Helper()
	cfg.RegistrationToken, cfg.PublicURL = "reg-secret", "http://nimbus.test"
	in := NewIntake(f.rdb, nil)
	s := NewService(f.db, in, f.builds, f.repos, nil, f.clock, f.log, cfg)
	if listen {
		ctx, cancel := context.WithCancel(context.Background())
		f.t.Cleanup(cancel)
		go in.listen(ctx)
		waitFor(f.t, "the replica hears the work channel", func() bool {
			probe := in.wake.queue("probe", "prober")
			f.rdb.Publish(ctx, workChannel, "probe")
			select {
			case <-probe.ch:
				return true
			case <-time.After(20 * time.Millisecond):
				in.wake.leave("probe", probe)
				return false
			}
		})
	}
	return s
}

func receive(t *testing.T, what string, ch <-chan *protocol.Lease, within time.Duration) *protocol.Lease {
	t.Helper()
	select {
	case l := <-ch:
		return l
	case <-time.After(within):
		t.Fatalf("%s: no answer within %v", what, within)
		return nil
	}
}

// A warm and a cold agent both wait; the pipeline that uses caches goes to the warm one, whether
// they poll the same server or two (the cold agent's server hears of the work first then: it
// is the one that must leave it).
func TestWarmAgentGetsTheCachePipeline(t *testing.T) {
	for _, replicas := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d replicas", replicas), func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *gorm.DB) {
				cfg := Config{PollTimeout: 10 * time.Second}
				f := newFixture(t, db, cfg)
				warmServer := f.sched
				if replicas == 2 {
					warmServer = f.replica(cfg, true)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cold, warm := f.agent("cold", 8), f.agent("warm", 8)
				coldLease := pollAsync(ctx, t, f.sched, cold, protocol.PollRequest{FreeCPUs: 8, Caches: []string{"999"}})
				warmLease := pollAsync(ctx, t, warmServer, warm, protocol.PollRequest{FreeCPUs: 8, Caches: []string{strconv.FormatInt(f.repoID, 10)}})
				waitFor(t, "the warm agent waits", func() bool { return f.recordedWaiting(warm) })
				time.Sleep(50 * time.Millisecond) // the cold agent, polling first, waits too

				f.push("main", cachedJob)
				l := receive(t, "warm agent", warmLease, 5*time.Second)
				if l == nil || l.Plan.Name != "cached" || len(l.Plan.Volumes) == 0 {
					t.Fatalf("the warm agent got %+v", l)
				}
				cancel()
				if l := receive(t, "cold agent", coldLease, 5*time.Second); l != nil {
					t.Fatalf("the cold agent got a lease too: %+v", l)
				}
				if f.recordedWaiting(warm) {
					t.Fatal("the warm agent is still recorded as waiting after its poll")
				}
			})
		})
	}
}

// With no warm agent free, the cold agent gets the pipeline at once: not after the hand-over
// (the clock is frozen here, so a hand-over would never run out and the cold poll would end
// empty), whatever other agents wait. Those wait on a replica that hears no wake-ups, so that
// only the cold agent can take the pipeline.
func TestColdAgentGetsTheCachePipelineWhenNoWarmAgentIsFree(t *testing.T) {
	tests := []struct {
		name string
		warm *protocol.PollRequest // the warm agent's poll; nil: it does not poll (busy)
	}{
		{"no warm agent polls", nil},
		{"the warm agent is too small for it", &protocol.PollRequest{FreeCPUs: 2}},
		{"the warm agent holds another repo's caches", &protocol.PollRequest{FreeCPUs: 8, Caches: []string{"999999"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *gorm.DB) {
				const handOver = 3 * time.Second
				cfg := Config{PollTimeout: 10 * time.Second, HandOver: handOver}
				f := newFixture(t, db, cfg)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cold, warm := f.agent("cold", 8), f.agent("warm", 8)
				var warmLease <-chan *protocol.Lease
				if tt.warm != nil {
					req := *tt.warm
					if req.Caches == nil {
						req.Caches = []string{strconv.FormatInt(f.repoID, 10)}
					}
					warmLease = pollAsync(ctx, t, f.replica(cfg, false), warm, req)
					waitFor(t, "the warm agent waits", func() bool {
						n, _ := f.rdb.Keys(ctx, prefix(amd64)+":warm:*").Result()
						return len(n) > 0
					})
				}
				coldLease := pollAsync(ctx, t, f.sched, cold, protocol.PollRequest{FreeCPUs: 8})
				time.Sleep(50 * time.Millisecond)
				f.push("main", cachedJob)
				start := time.Now()
				l := receive(t, "cold agent", coldLease, 8*time.Second)
				if l == nil || l.Plan.Name != "cached" {
					t.Fatalf("the cold agent got %+v", l)
				}
				// Timed from the push's end: git and the build's creation are not the scheduler's.
				if waited := time.Since(start); waited >= handOver {
					t.Fatalf("the cold agent waited %v for a pipeline no warm agent could take", waited)
				}
				if warmLease != nil {
					cancel()
					if l := receive(t, "warm agent", warmLease, 3*time.Second); l != nil {
						t.Fatalf("the warm agent got %+v", l)
					}
				}
			})
		})
	}
}

// A warm agent recorded as waiting that never comes (its server does not hear the hand-over:
// it died, or its pub/sub is cut) holds a cache-bound pipeline back from a cold agent for
// HandOver at most; pipelines without volumes are not held back at all.
func TestHandOverIsBoundedAndOnlyForCachePipelines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		const handOver = 300 * time.Millisecond
		cfg := Config{PollTimeout: 10 * time.Second, HandOver: handOver}
		f := newFixture(t, db, cfg)
		deaf := f.replica(cfg, false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cold, warm := f.agent("cold", 8), f.agent("warm", 8)
		warmLease := pollAsync(ctx, t, deaf, warm, protocol.PollRequest{FreeCPUs: 8, Caches: []string{strconv.FormatInt(f.repoID, 10)}})
		waitFor(t, "the warm agent waits", func() bool { return f.recordedWaiting(warm) })

		// Without volumes: the cold agent takes it at once.
		coldLease := pollAsync(ctx, t, f.sched, cold, protocol.PollRequest{FreeCPUs: 8})
		f.push("main", oneJob)
		if l := receive(t, "cold agent", coldLease, 2*time.Second); l == nil || l.Plan.Name != "train" {
			t.Fatalf("the cold agent got %+v for a pipeline without volumes", l)
		}

		// With volumes: left to the warm agent, which never comes; the cold agent takes it when
		// the hand-over runs out.
		coldLease = pollAsync(ctx, t, f.sched, cold, protocol.PollRequest{FreeCPUs: 8})
		time.Sleep(50 * time.Millisecond)
		f.push("main", cachedJob)
		waitFor(t, "the cold agent leaves the pipeline", func() bool {
			keys, _ := f.rdb.Keys(ctx, prefix(amd64)+":handover:*").Result()
			return len(keys) > 0
		})
		select {
		case l := <-coldLease:
			t.Fatalf("the cold agent took it during the hand-over: %+v", l)
		case <-time.After(handOver / 3):
		}
		// The scheduler's clock: the hand-over runs out, and the cold agent gets the pipeline
		// without waiting for anything else (its poll would otherwise last PollTimeout, 10 s).
		f.clock.Advance(handOver)
		l := receive(t, "cold agent", coldLease, 3*time.Second)
		if l == nil || l.Plan.Name != "cached" {
			t.Fatalf("the cold agent got %+v after the hand-over", l)
		}
		cancel()
		if l := receive(t, "warm agent", warmLease, 3*time.Second); l != nil {
			t.Fatalf("the deaf warm agent got %+v", l)
		}
	})
}
