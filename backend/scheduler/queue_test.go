package scheduler

import (
	"context"
	"errors"
	"fmt"
	"github.com/nimbus-build/nimbus/backend/redisconn/redistest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"
)

// redisFor returns the test Redis (shared: each test uses class names of its own), or an
// embedded one on a developer machine without it.
func redisFor(t testing.TB) redis.UniversalClient { return redistest.Shared(t) }

var classSeq int

// freshClass returns a class name no other test uses.
func freshClass(t testing.TB) string {
	classSeq++
	return fmt.Sprintf("test:%s:%d:%d", t.Name(), time.Now().UnixNano(), classSeq)
}

var big = Capacity{FreeCPUs: 64, TotalCPUs: 64, FreeGPUs: 8, TotalGPUs: 8}

// fataler is what testing.T and rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func enqueue(t fataler, q *Queue, class string, id, org int64, cpus int, at time.Time) {
	t.Helper()
	ok, err := q.Enqueue(context.Background(), Entry{PipelineID: id, OrgID: org, Class: class, CPUs: cpus, Enqueued: at})
	if err != nil || !ok {
		t.Fatalf("enqueue %d: %v %v", id, ok, err)
	}
}

func dispatch(t testing.TB, q *Queue, class string, c Capacity, r Rules, now time.Time) int64 {
	t.Helper()
	d, err := q.Dispatch(context.Background(), class, Poller{}, c, r, now)
	if errors.Is(err, ErrEmpty) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return d.PipelineID
}

func TestOneTeamsBacklogDelaysAnotherByOneDispatch(t *testing.T) {
	q := NewQueue(redisFor(t))
	class := freshClass(t)
	now := time.Now()
	for i := int64(1); i <= 1000; i++ {
		enqueue(t, q, class, i, 1, 1, now)
	}
	enqueue(t, q, class, 5000, 2, 1, now)
	first := dispatch(t, q, class, big, Rules{Depth: 10}, now)
	second := dispatch(t, q, class, big, Rules{Depth: 10}, now)
	if first != 1 || second != 5000 {
		t.Fatalf("dispatched %d then %d; team 2's only pipeline must come second", first, second)
	}
	if third := dispatch(t, q, class, big, Rules{Depth: 10}, now); third != 2 {
		t.Fatalf("FIFO inside team 1 broken: %d", third)
	}
}

func TestEnqueueIsIdempotentAndTracked(t *testing.T) {
	q := NewQueue(redisFor(t))
	class := freshClass(t)
	ctx := context.Background()
	enqueue(t, q, class, 7, 1, 2, time.Now())
	if ok, err := q.Enqueue(ctx, Entry{PipelineID: 7, OrgID: 1, Class: class, CPUs: 2}); ok || err != nil {
		t.Fatalf("second enqueue: %v %v", ok, err)
	}
	in, _ := q.Queued(ctx, class, []int64{7, 8})
	if !in[7] || in[8] {
		t.Fatalf("queued %v", in)
	}
	if pos, teams, _ := q.Position(ctx, class, 1, 7); pos != 1 || teams != 1 {
		t.Fatalf("position %d of %d teams", pos, teams)
	}
	if id := dispatch(t, q, class, big, Rules{Depth: 10}, time.Now()); id != 7 {
		t.Fatalf("dispatched %d", id)
	}
	if id := dispatch(t, q, class, big, Rules{Depth: 10}, time.Now()); id != 0 {
		t.Fatalf("dispatched %d twice", id)
	}
	if in, _ := q.Queued(ctx, class, []int64{7}); in[7] {
		t.Fatal("dispatched pipeline still a member")
	}
}

func TestBackfillAndReservation(t *testing.T) {
	q := NewQueue(redisFor(t))
	class := freshClass(t)
	start := time.Now()
	rules := Rules{Depth: 10, StarveAfter: time.Minute}
	enqueue(t, q, class, 1, 1, 32, start) // big: fits only a 32-core agent with all cores free
	enqueue(t, q, class, 2, 1, 4, start)
	enqueue(t, q, class, 3, 1, 4, start)
	agent32 := Capacity{FreeCPUs: 8, TotalCPUs: 32}
	agent8 := Capacity{FreeCPUs: 8, TotalCPUs: 8}

	// Backfill: the big one does not fit, the small one behind it is taken.
	if id := dispatch(t, q, class, agent32, rules, start); id != 2 {
		t.Fatalf("backfill took %d, want 2", id)
	}
	// After StarveAfter the big one is reserved: the 32-core agent drains (gets nothing) while
	// the 8-core agent, which could never hold it, still gets small work.
	later := start.Add(2 * time.Minute)
	enqueue(t, q, class, 4, 1, 4, later)
	if id := dispatch(t, q, class, agent8, rules, later); id != 3 {
		t.Fatalf("small agent got %d, want 3 (and the reservation set)", id)
	}
	if id := dispatch(t, q, class, agent32, rules, later); id != 0 {
		t.Fatalf("a draining agent got %d", id)
	}
	if id := dispatch(t, q, class, agent8, rules, later); id != 4 {
		t.Fatalf("small agent got %d, want 4", id)
	}
	// Once the big agent is free, the reservation goes first.
	if id := dispatch(t, q, class, Capacity{FreeCPUs: 32, TotalCPUs: 32}, rules, later); id != 1 {
		t.Fatalf("free big agent got %d, want the reserved 1", id)
	}
}

func TestTeamConcurrencyCap(t *testing.T) {
	q := NewQueue(redisFor(t))
	class := freshClass(t)
	ctx := context.Background()
	now := time.Now()
	for i := int64(1); i <= 3; i++ {
		enqueue(t, q, class, i, 1, 1, now)
	}
	r := Rules{Depth: 5, Cap: 2}
	if a, b := dispatch(t, q, class, big, r, now), dispatch(t, q, class, big, r, now); a != 1 || b != 2 {
		t.Fatalf("got %d %d", a, b)
	}
	if id := dispatch(t, q, class, big, r, now); id != 0 {
		t.Fatalf("cap exceeded: %d", id)
	}
	if err := q.Released(ctx, class, 1); err != nil {
		t.Fatal(err)
	}
	if id := dispatch(t, q, class, big, r, now); id != 3 {
		t.Fatalf("after release got %d", id)
	}
	if err := q.SetRunning(ctx, class, map[int64]int{1: 2}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, class, 9, 1, 1, now)
	if id := dispatch(t, q, class, big, r, now); id != 0 {
		t.Fatalf("SetRunning ignored: %d", id)
	}
}

// Property: with unlimited capacity, dispatch is round robin between waiting teams and FIFO
// within each team, for any sequence of enqueues and dispatches.
func TestFairnessProperty(t *testing.T) {
	rdb := redisFor(t)
	rapid.Check(t, func(rt *rapid.T) {
		q := NewQueue(rdb)
		class := freshClass(t)
		now := time.Now()
		var next int64 = 1
		waiting := map[int64][]int64{} // team → FIFO of its pipeline ids
		sinceServed := map[int64]int{} // dispatches since a waiting team was last served
		steps := rapid.IntRange(1, 200).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			if rapid.Bool().Draw(rt, "enqueue") {
				org := rapid.Int64Range(1, 5).Draw(rt, "org")
				if len(waiting[org]) == 0 {
					sinceServed[org] = 0
				}
				enqueue(rt, q, class, next, org, 1, now)
				waiting[org] = append(waiting[org], next)
				next++
				continue
			}
			d, err := q.Dispatch(context.Background(), class, Poller{}, big, Rules{Depth: 3}, now)
			if errors.Is(err, ErrEmpty) {
				for team, w := range waiting {
					if len(w) > 0 {
						rt.Fatalf("queue empty but team %d waits with %v", team, w)
					}
				}
				continue
			}
			if err != nil {
				rt.Fatal(err)
			}
			id, org := d.PipelineID, d.OrgID
			if len(waiting[org]) == 0 || waiting[org][0] != id {
				rt.Fatalf("team %d got %d, FIFO says %v", org, id, waiting[org])
			}
			waiting[org] = waiting[org][1:]
			teams := 0
			for _, w := range waiting {
				if len(w) > 0 {
					teams++
				}
			}
			for team, w := range waiting {
				if team == org {
					sinceServed[team] = 0
					continue
				}
				if len(w) > 0 {
					sinceServed[team]++
					if sinceServed[team] > 4 { // at most one dispatch per other team (5 teams)
						rt.Fatalf("team %d waited %d dispatches with %d teams waiting", team, sinceServed[team], teams)
					}
				}
			}
		}
	})
}

// Property: GPU slots are shared as fairly as cores. A four-GPU host frees and takes slots in
// any order while up to five teams queue GPU pipelines (16 cores, 1 GPU each): a dispatch with a
// free GPU always gives one when a pipeline waits, never with none free, FIFO within each team,
// and a waiting team waits for at most one grant to each other team.
func TestGPUSlotFairnessProperty(t *testing.T) {
	rdb := redisFor(t)
	rapid.Check(t, func(rt *rapid.T) {
		q := NewQueue(rdb)
		class := freshClass(t)
		now := time.Now()
		const gpus = 4
		var next int64 = 1
		running := 0
		waiting := map[int64][]int64{}
		sinceServed := map[int64]int{}
		steps := rapid.IntRange(1, 200).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 2).Draw(rt, "step") {
			case 0:
				org := rapid.Int64Range(1, 5).Draw(rt, "org")
				if len(waiting[org]) == 0 {
					sinceServed[org] = 0
				}
				if ok, err := q.Enqueue(context.Background(), Entry{PipelineID: next, OrgID: org, Class: class, CPUs: 16, GPUs: 1, Enqueued: now}); err != nil || !ok {
					rt.Fatalf("enqueue: %v %v", ok, err)
				}
				waiting[org] = append(waiting[org], next)
				next++
				continue
			case 1:
				if running > 0 {
					running-- // a GPU pipeline ended: its GPU is free
				}
				continue
			}
			free := gpus - running
			c := Capacity{FreeCPUs: 16 * free, TotalCPUs: 16 * gpus, FreeGPUs: free, TotalGPUs: gpus}
			d, err := q.Dispatch(context.Background(), class, Poller{}, c, Rules{Depth: 3, StarveAfter: time.Hour}, now)
			queued := 0
			for _, w := range waiting {
				queued += len(w)
			}
			if errors.Is(err, ErrEmpty) {
				if free > 0 && queued > 0 {
					rt.Fatalf("%d GPUs free and %d pipelines waiting, but nothing was dispatched", free, queued)
				}
				continue
			}
			if err != nil {
				rt.Fatal(err)
			}
			if free == 0 {
				rt.Fatalf("pipeline %d dispatched with no GPU free", d.PipelineID)
			}
			running++
			id, org := d.PipelineID, d.OrgID
			if len(waiting[org]) == 0 || waiting[org][0] != id {
				rt.Fatalf("team %d got %d, FIFO says %v", org, id, waiting[org])
			}
			waiting[org] = waiting[org][1:]
			for team, w := range waiting {
				if team == org {
					sinceServed[team] = 0
					continue
				}
				if len(w) > 0 {
					sinceServed[team]++
					if sinceServed[team] > 4 {
						rt.Fatalf("team %d waited %d GPU grants with 5 teams", team, sinceServed[team])
					}
				}
			}
		}
	})
}

// A class notification wakes the poller that has waited longest, one at a time; a turn passed
// on reaches each other poller once and then ends; a poller that leaves with an unused turn
// hands it back for passing.
func TestWakeupTurns(t *testing.T) {
	w := newWakeup()
	a, b, c := w.queue("k", "a"), w.queue("k", "b"), w.queue("k", "c")
	w.fireOne("k")
	var got *turn
	select {
	case got = <-a.ch:
	default:
		t.Fatal("the longest waiter got no turn")
	}
	for _, x := range []*waiter{b, c} {
		select {
		case <-x.ch:
			t.Fatal("a notification woke more than one poller")
		default:
		}
	}
	// a found nothing it could take and queues up again behind c: the turn goes to b, then c,
	// never back to a.
	a2 := w.queue("k", "a")
	if !w.pass(got) {
		t.Fatal("pass found no poller")
	}
	got = <-b.ch
	if !w.pass(got) {
		t.Fatal("pass found no poller")
	}
	got = <-c.ch
	if w.pass(got) {
		t.Fatal("the turn came back to a poller that had it")
	}
	// A poller leaving with a turn it did not use returns it.
	w.fireOne("k")
	if left := w.leave("k", a2); left == nil {
		t.Fatal("the unused turn was lost")
	}
	if w.leave("k", a2) != nil {
		t.Fatal("leave twice returned a turn twice")
	}
}
