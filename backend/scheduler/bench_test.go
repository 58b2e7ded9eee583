package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// benchWorld is a PostgreSQL database and a Redis with teams, one repo each, and agents.
type benchWorld struct {
	db     *gorm.DB
	sched  *Service
	svc    *repo.Service // the repos' service, which replicas share
	agents []*Agent
	repos  []*repo.Repo
	orgIDs []int64
	plan   string
}

func newBenchWorld(b *testing.B, teams, agents int, cfg Config) *benchWorld {
	b.Helper()
	ctx := context.Background()
	db := storetest.Postgres(b)
	rdb := isolatedRedis(b)
	intake := NewIntake(rdb, nil)
	tw := testworld.New(b, db, testworld.Options{Clock: clock.Real{}, Redis: rdb, Build: build.Config{Queue: intake}})
	users, orgs, repos, builds, clk, log := tw.Users, tw.Orgs, tw.Repos, tw.Builds, clock.Real{}, tw.Log
	cfg.RegistrationToken = "reg"
	cfg.PublicURL = "http://nimbus.test"
	w := &benchWorld{db: db, svc: repos, sched: NewService(db, intake, builds, repos, nil, clk, log, cfg)}
	builds.OnEnded(w.sched.Ended)
	u, err := users.Signup(ctx, "bench", "bench@example.com", "a long enough passphrase")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < teams; i++ {
		o, err := orgs.Create(ctx, u, fmt.Sprintf("team-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		r, err := repos.Create(ctx, o, "r", repo.Private, "main", "")
		if err != nil {
			b.Fatal(err)
		}
		w.repos = append(w.repos, r)
		w.orgIDs = append(w.orgIDs, o.ID)
	}
	for i := 0; i < agents; i++ {
		resp, err := w.sched.Register(ctx, "reg", protocol.RegisterRequest{Name: fmt.Sprint("agent-", i), Tags: []string{"cnb:arch:amd64"}, CPUs: 8, Concurrency: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		a, _ := w.sched.AgentByToken(ctx, resp.Token)
		w.agents = append(w.agents, a)
	}
	raw, _ := json.Marshal(protocol.Plan{Key: "pipeline-0", Name: "p", Runner: protocol.Runner{Tags: []string{"cnb:arch:amd64"}, Cpus: 1, Class: "cnb:arch:amd64"},
		Stages: []protocol.Stage{{Name: "s", Jobs: []protocol.Job{{Key: "job-0", Name: "j", Kind: protocol.KindScript, Script: "true"}}}}})
	w.plan = string(raw)
	return w
}

// queue inserts n queued pipelines spread round robin over the teams and enqueues them.
func (w *benchWorld) queue(b *testing.B, n int) []*build.Pipeline {
	out := w.insert(b, n)
	for _, p := range out {
		if err := w.sched.in.Enqueue(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// insert stores n queued pipelines (with a build, a stage and a job each) without enqueueing.
func (w *benchWorld) insert(b *testing.B, n int) []*build.Pipeline {
	b.Helper()
	teams := make([]buildtest.Team, len(w.repos))
	for i, r := range w.repos {
		teams[i] = buildtest.Team{OrgID: w.orgIDs[i], RepoID: r.ID}
	}
	out, err := buildtest.Queued(w.db, teams, w.plan, n)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkDispatch drains 10,000 queued pipelines of 100 teams with 200 agents long-polling
// concurrently (real PostgreSQL and Redis) and reports leases per second.
func BenchmarkDispatch(b *testing.B) {
	w := newBenchWorld(b, 100, 200, Config{PollTimeout: 2 * time.Second})
	for i := 0; i < b.N; i++ {
		w.queue(b, 10000)
		// The 10,000 rows arrived a moment ago; a live database has had autovacuum analyze
		// them. Without fresh statistics the planner picks plans that halve the rate partway
		// through a run, whenever autovacuum happens to wake.
		if err := w.db.Exec("ANALYZE").Error; err != nil {
			b.Fatal(err)
		}
		var leased, last atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for _, a := range w.agents {
			wg.Add(1)
			go func(a *Agent) {
				defer wg.Done()
				for {
					l, err := w.sched.Poll(context.Background(), a, protocol.PollRequest{FreeCPUs: 8}, nil)
					if err != nil {
						b.Error(err)
						return
					}
					if l == nil {
						return // the 2 s poll timeout passed with nothing left
					}
					if leased.Add(1) == 10000 {
						last.Store(time.Now().UnixNano())
					}
				}
			}(a)
		}
		wg.Wait()
		// Timed to the last lease, not to the agents' return: their last empty polls wait out
		// the 2 s timeout, and subtracting it guessed wrong by up to a second.
		elapsed := time.Unix(0, last.Load()).Sub(start)
		if leased.Load() != 10000 {
			b.Fatalf("leased %d of 10000", leased.Load())
		}
		b.ReportMetric(float64(leased.Load())/elapsed.Seconds(), "leases/s")
	}
}

// BenchmarkEnqueueToLease measures how long a pipeline waits from enqueue to lease when 200
// agents are idle in long-polls.
func BenchmarkEnqueueToLease(b *testing.B) {
	w := newBenchWorld(b, 100, 200, Config{PollTimeout: time.Minute})
	const rounds = 500
	for i := 0; i < b.N; i++ {
		leases := make(chan time.Time, rounds)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, a := range w.agents {
			wg.Add(1)
			go func(a *Agent) {
				defer wg.Done()
				for ctx.Err() == nil {
					if l, _ := w.sched.Poll(ctx, a, protocol.PollRequest{FreeCPUs: 8}, nil); l != nil {
						leases <- time.Now()
					}
				}
			}(a)
		}
		time.Sleep(500 * time.Millisecond) // every agent is waiting
		lat := make([]time.Duration, 0, rounds)
		for r := 0; r < rounds; r++ {
			p := w.insert(b, 1)[0]
			start := time.Now()
			if err := w.sched.in.Enqueue(context.Background(), p); err != nil {
				b.Fatal(err)
			}
			got := <-leases
			lat = append(lat, got.Sub(start))
		}
		cancel()
		wg.Wait()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	}
}

// BenchmarkGPUHostsKeptForGPUWork streams CPU pipelines, one at a time, at 2 CPU agents and 2
// GPU hosts whose operators let them serve CPU classes too, all long-polling (real PostgreSQL
// and Redis). It reports the share of CPU pipelines that landed on a GPU host while CPU agents
// were free (target 0 %: CPU steps never hold GPU time) and their enqueue-to-lease latency;
// then, with the CPU agents gone, how long a CPU pipeline takes to spill over to a GPU host
// (GPUSpillAfter, 250 ms here).
func BenchmarkGPUHostsKeptForGPUWork(b *testing.B) {
	const spill = 250 * time.Millisecond
	w := newBenchWorld(b, 10, 2, Config{PollTimeout: time.Minute, GPUSpillAfter: spill})
	ctx := context.Background()
	var gpuHosts []*Agent
	for i := 0; i < 2; i++ {
		resp, err := w.sched.Register(ctx, "reg", protocol.RegisterRequest{Name: fmt.Sprint("gpu-", i), CPUs: 16, Concurrency: 1 << 20,
			Tags: []string{"cnb:arch:amd64", "cnb:arch:amd64:gpu"}, GPUs: []protocol.GPU{{Index: 0, Name: "L40"}}})
		if err != nil {
			b.Fatal(err)
		}
		a, _ := w.sched.AgentByToken(ctx, resp.Token)
		gpuHosts = append(gpuHosts, a)
	}
	type leased struct {
		at  time.Time
		gpu bool
	}
	// run long-polls with agents until stop, and streams rounds pipelines through them.
	run := func(agents []*Agent, rounds int) (onGPU int, lat []time.Duration) {
		leases := make(chan leased, rounds)
		pollCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Add(1)
			go func(a *Agent) {
				defer wg.Done()
				req := protocol.PollRequest{FreeCPUs: 8}
				if a.gpuCount() > 0 {
					req = protocol.PollRequest{FreeCPUs: 16, FreeGPUs: []string{"0"}}
				}
				for pollCtx.Err() == nil {
					if l, _ := w.sched.Poll(pollCtx, a, req, nil); l != nil {
						leases <- leased{time.Now(), a.gpuCount() > 0}
					}
				}
			}(a)
		}
		time.Sleep(500 * time.Millisecond) // every agent is waiting
		for r := 0; r < rounds; r++ {
			start := time.Now() // the pipeline's queue time is its insert's
			p := w.insert(b, 1)[0]
			if err := w.sched.in.Enqueue(ctx, p); err != nil {
				b.Fatal(err)
			}
			got := <-leases
			lat = append(lat, got.at.Sub(start))
			if got.gpu {
				onGPU++
			}
		}
		stop()
		wg.Wait()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return onGPU, lat
	}
	for i := 0; i < b.N; i++ {
		const rounds = 200
		onGPU, lat := run(append(append([]*Agent{}, w.agents...), gpuHosts...), rounds)
		b.ReportMetric(100*float64(onGPU)/rounds, "cpu_on_gpu_%")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		if onGPU > 0 {
			b.Errorf("%d of %d CPU pipelines held a GPU host while CPU agents were free", onGPU, rounds)
		}
		onGPU, lat = run(gpuHosts, 20)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "spill_p50_ms")
		if onGPU != 20 || lat[0] < spill {
			b.Errorf("without CPU agents: %d of 20 spilled, the first after %s (spill time %s)", onGPU, lat[0], spill)
		}
	}
}
