package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/testworld"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// BenchmarkReplicas measures what coordination costs when the scheduler runs as several
// replicas: 1 and then 3 scheduler services (each with its own intake, build service and
// pub/sub listener, as nimbus-server replicas have) on one PostgreSQL and one Redis, 100 teams
// and 1,000 agents spread over the replicas. Two figures per replica count:
//
//   - leases/s: 10,000 queued pipelines drained by the 1,000 agents long-polling;
//   - enqueue-to-lease p50/p99: with every agent idle in a long-poll, a pipeline enqueued on a
//     random replica until some agent (on any replica) holds its lease, 300 rounds.
//
// This machine has two cores, so replicas add no CPU: the figures measure coordination
// (cross-replica wake-ups, the shared Lua dispatch). Targets: three replicas hold ≥ 90 % of one
// replica's leases/s; p99 enqueue-to-lease < 20 ms.
//
// Alone: e2e/testenv.sh go test -run '^$' -bench Replicas -benchtime 1x -v ./backend/scheduler
func BenchmarkReplicas(b *testing.B) {
	w := newBenchWorld(b, 100, 1000, Config{PollTimeout: 2 * time.Second})
	rates := map[int]float64{}
	for i := 0; i < b.N; i++ {
		for _, n := range []int{1, 3} {
			reps, stop := w.replicas(b, n)
			rate := w.drainOn(b, reps, 10000)
			p50, p99 := w.enqueueToLeaseOn(b, reps, 300)
			stop()
			rates[n] = rate
			b.ReportMetric(rate, fmt.Sprintf("leases/s-%dr", n))
			b.ReportMetric(float64(p50.Microseconds())/1000, fmt.Sprintf("p50_ms-%dr", n))
			b.ReportMetric(float64(p99.Microseconds())/1000, fmt.Sprintf("p99_ms-%dr", n))
			b.Logf("%d replica(s), 1,000 agents, 100 teams: %.0f leases/s; enqueue→lease p50 %v p99 %v", n, rate,
				p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
		}
		b.ReportMetric(100*rates[3]/rates[1], "%-of-1r")
		b.Logf("three replicas hold %.0f %% of one replica's leases/s (target ≥ 90 %%)", 100*rates[3]/rates[1])
	}
}

// replicas makes n scheduler services over the world's database and Redis, each listening to
// the others' notifications; stop ends the listeners.
func (w *benchWorld) replicas(b *testing.B, n int) ([]*Service, func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rdb := w.sched.in.rdb
	var out []*Service
	for range n {
		in := NewIntake(rdb, nil)
		// Each replica has its own services over the shared database and Redis, as processes do.
		builds := testworld.New(b, w.db, testworld.Options{Clock: clock.Real{}, Redis: rdb, Log: log, Build: build.Config{Queue: in}}).Builds
		s := NewService(w.db, in, builds, w.svc, nil, clock.Real{}, log, w.sched.cfg)
		builds.OnEnded(s.Ended)
		go in.listen(ctx)
		out = append(out, s)
	}
	time.Sleep(300 * time.Millisecond) // the subscriptions are made
	return out, cancel
}

// drainOn queues total pipelines (enqueued round robin on the replicas) and lets every agent
// poll its replica until they are gone; it returns leases per second.
func (w *benchWorld) drainOn(b *testing.B, reps []*Service, total int) float64 {
	b.Helper()
	ps := w.insert(b, total)
	for i, p := range ps {
		if err := reps[i%len(reps)].in.Enqueue(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.db.Exec("ANALYZE").Error; err != nil {
		b.Fatal(err)
	}
	var leased, last atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i, a := range w.agents {
		wg.Add(1)
		go func(a *Agent, s *Service) {
			defer wg.Done()
			for {
				l, err := s.Poll(context.Background(), a, protocol.PollRequest{FreeCPUs: 8}, nil)
				if err != nil {
					b.Error(err)
					return
				}
				if l == nil {
					return
				}
				if leased.Add(1) == int64(total) {
					last.Store(time.Now().UnixNano())
				}
			}
		}(a, reps[i%len(reps)])
	}
	wg.Wait()
	if leased.Load() != int64(total) {
		b.Fatalf("leased %d of %d", leased.Load(), total)
	}
	return float64(total) / time.Unix(0, last.Load()).Sub(start).Seconds()
}

// enqueueToLeaseOn keeps every agent in a long-poll of its replica and enqueues one pipeline
// at a time on a random replica; it returns the p50 and p99 of enqueue → lease.
func (w *benchWorld) enqueueToLeaseOn(b *testing.B, reps []*Service, rounds int) (time.Duration, time.Duration) {
	b.Helper()
	leases := make(chan time.Time, rounds)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, a := range w.agents {
		wg.Add(1)
		go func(a *Agent, s *Service) {
			defer wg.Done()
			for ctx.Err() == nil {
				if l, _ := s.Poll(ctx, a, protocol.PollRequest{FreeCPUs: 8}, nil); l != nil {
					leases <- time.Now()
				}
			}
		}(a, reps[i%len(reps)])
	}
	time.Sleep(time.Second) // every agent is waiting
	lat := make([]time.Duration, 0, rounds)
	for range rounds {
		p := w.insert(b, 1)[0]
		start := time.Now()
		if err := reps[rand.IntN(len(reps))].in.Enqueue(context.Background(), p); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-leases).Sub(start))
	}
	cancel()
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100]
}
