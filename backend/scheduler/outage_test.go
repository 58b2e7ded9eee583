package scheduler

import (
	"context"
	"errors"
	"github.com/nimbus-build/nimbus/backend/redisconn"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// restart is the server coming back: a new scheduler on the same database and Redis.
func (f *fixture) restart(cfg Config) {
	cfg.RegistrationToken = "reg-secret"
	cfg.PublicURL = "http://nimbus.test"
	f.sched = NewService(f.db, f.intake, f.builds, f.repos, nil, f.clock, f.log, cfg)
}

// A server outage longer than the lease TTL used to fail every running pipeline agent_lost the
// moment the server came back, though its agent was healthy and only could not renew. The
// restarted server waits one TTL before it reaps: a live agent renews in that time and its
// pipeline goes on; one that does not renew is lost after that TTL.
func TestRestartDoesNotReapLeasesTheServerCouldNotHear(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		cfg := Config{PollTimeout: 50 * time.Millisecond, LeaseTTL: 30 * time.Second}
		f := newFixture(t, db, cfg)
		ctx := context.Background()
		f.push("main", oneJob)
		f.push("main", oneJob)
		a := f.agent("a", 8)
		live, gone := f.poll(a, 8), f.poll(a, 8)
		for _, l := range []*protocol.Lease{live, gone} {
			if err := f.builds.Event(ctx, a.ID, l.ID, protocol.Event{Kind: protocol.EventJobStarted, JobID: l.Jobs[0].ID}); err != nil {
				t.Fatal(err)
			}
		}
		// The server is down for 45 s, then starts again.
		f.clock.Advance(45 * time.Second)
		f.restart(cfg)
		if n, err := f.sched.Reap(ctx); err != nil || n != 0 {
			t.Fatalf("reap right after the restart: %d %v", n, err)
		}
		f.clock.Advance(5 * time.Second)
		if _, err := f.sched.Renew(ctx, a, live.ID); err != nil {
			t.Fatalf("renew after the outage: %v", err)
		}
		f.clock.Advance(26 * time.Second) // one TTL since the restart
		if n, err := f.sched.Reap(ctx); err != nil || n != 1 {
			t.Fatalf("reap one TTL after the restart: %d %v", n, err)
		}
		if p := f.pipeline(live.PipelineID); p.Status != build.StatusRunning {
			t.Fatalf("the renewed pipeline is %s %q", p.Status, p.Reason)
		}
		if p := f.pipeline(gone.PipelineID); p.Status != build.StatusFailed || p.Reason != build.ReasonAgentLost {
			t.Fatalf("the pipeline whose agent never came back is %s %q", p.Status, p.Reason)
		}
		// Reports that arrive late keep the time they happened: the job and the pipeline end
		// when the agent saw them end, not when the server heard of it.
		ended := f.clock.Now().Add(-20 * time.Second)
		code := 0
		if err := f.builds.Event(ctx, a.ID, live.ID, protocol.Event{Kind: protocol.EventJobFinished, JobID: live.Jobs[0].ID,
			Status: "success", ExitCode: &code, At: ended}); err != nil {
			t.Fatal(err)
		}
		if err := f.agentFinish(ctx, a, live.ID, protocol.FinishRequest{Status: "failed", FinishedAt: ended}); err != nil {
			t.Fatal(err)
		}
		p := f.pipeline(live.PipelineID)
		var job build.Job
		db.Take(&job, live.Jobs[0].ID)
		if p.FinishedAt == nil || !p.FinishedAt.Equal(ended) || job.FinishedAt == nil || !job.FinishedAt.Equal(ended) {
			t.Fatalf("finished at %v (job %v), the agent saw the end at %v", p.FinishedAt, job.FinishedAt, ended)
		}
		// A time the server cannot have seen (before the start, in the future) is bounded.
		f.push("main", oneJob)
		l := f.poll(a, 8)
		if err := f.agentFinish(ctx, a, l.ID, protocol.FinishRequest{Status: "failed", FinishedAt: f.clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if p := f.pipeline(l.PipelineID); !p.FinishedAt.Equal(f.clock.Now()) {
			t.Fatalf("a finish in the future was recorded at %v", p.FinishedAt)
		}
	})
}

// A database outage is an outage too: renewals failed while it lasted, so the reaper starts
// counting again once the database answers.
func TestDatabaseOutageRestartsTheReapersCount(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	f.push("main", oneJob)
	a := f.agent("a", 8)
	l := f.poll(a, 8)
	f.builds.Event(ctx, a.ID, l.ID, protocol.Event{Kind: protocol.EventJobStarted, JobID: l.Jobs[0].ID})
	f.clock.Advance(40 * time.Second)
	cancelled, cancel := context.WithCancel(ctx)
	cancel() // a reap whose queries fail, as with the database away
	if _, err := f.sched.Reap(cancelled); err == nil {
		t.Fatal("a reap without a database succeeded")
	}
	if n, err := f.sched.Reap(ctx); err != nil || n != 0 {
		t.Fatalf("reap right after the database came back: %d %v", n, err)
	}
	f.clock.Advance(31 * time.Second)
	if n, err := f.sched.Reap(ctx); err != nil || n != 1 {
		t.Fatalf("reap a TTL later: %d %v", n, err)
	}
}

// A lease TTL shorter than the heartbeat used to be accepted, and then every job longer than
// the TTL was killed: the heartbeat the server dictates is a third of the TTL.
func TestHeartbeatIsAThirdOfTheLeaseTTL(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, Config{LeaseTTL: 5 * time.Second, HeartbeatInterval: 10 * time.Second})
	resp, err := f.sched.Register(context.Background(), "reg-secret", protocol.RegisterRequest{Name: "a", Tags: []string{"cnb:arch:amd64"}, CPUs: 2, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if hb := resp.HeartbeatInterval.Std(); hb <= 0 || hb > 5*time.Second/3 {
		t.Fatalf("heartbeat %v with a 5 s lease TTL", hb)
	}
	if resp.LeaseTTL.Std() != 5*time.Second {
		t.Fatalf("lease TTL %v", resp.LeaseTTL.Std())
	}
}

// queueSpaced pushes n one-pipeline builds a second apart and returns their pipelines' ids.
func (f *fixture) queueSpaced(n int) []int64 {
	var ids []int64
	for i := 0; i < n; i++ {
		f.clock.Advance(time.Second)
		b := f.push("main", oneJob)[0]
		var p build.Pipeline
		f.db.Omit("plan").Where("build_id = ?", b.ID).Take(&p)
		ids = append(ids, p.ID)
	}
	return ids
}

// billWith makes the scheduler bill through b.
func (f *fixture) billWith(b Meter) {
	f.sched = NewService(f.db, f.intake, f.builds, f.repos, b, f.clock, f.log,
		Config{PollTimeout: 50 * time.Millisecond, RegistrationToken: "reg-secret", PublicURL: "http://nimbus.test"})
}

// flakyBilling fails the start of the pipelines in fail once, as a database hiccup would.
type flakyBilling struct{ fail map[int64]bool }

func (b flakyBilling) Start(_ context.Context, r Run, _ time.Time) error {
	if b.fail[r.PipelineID] {
		delete(b.fail, r.PipelineID)
		return errors.New("billing: connection reset")
	}
	return nil
}
func (flakyBilling) CanStart(context.Context, Run) error { return nil }

// A team's pipelines are handed out in the order they were queued, also after they come back to
// the queue out of order: a pipeline put back in its place (its start failed), and everything
// after Redis lost its queues. The reconciler's re-enqueue had no order, so build #7 could be
// leased before #6.
func TestQueueOrderSurvivesRequeueAndRedisRebuild(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		ids := f.queueSpaced(4)
		f.billWith(flakyBilling{map[int64]bool{ids[0]: true}})
		a := f.agent("a", 64)
		if _, err := f.sched.Poll(ctx, a, protocol.PollRequest{FreeCPUs: 64}, noDrain()); err == nil {
			t.Fatal("the failed billing start was not reported")
		}
		if p := f.pipeline(ids[0]); p.Status != build.StatusQueued {
			t.Fatalf("the pipeline whose start failed is %s", p.Status)
		}
		// Its row was written last now; its place in the queue is still the first.
		order := func(what string) {
			t.Helper()
			for i, want := range ids {
				l := f.poll(a, 64)
				if l == nil || l.PipelineID != want {
					t.Fatalf("%s: lease %d is %+v, want pipeline %d (order %v)", what, i, l, want, ids)
				}
				f.agentFinish(ctx, a, l.ID, protocol.FinishRequest{Status: "success"})
			}
		}
		// Redis loses everything; the reconciler rebuilds it from the database.
		redisconn.FlushAll(ctx, f.rdb)
		if n, err := f.sched.Reconcile(ctx); err != nil || n != 4 {
			t.Fatalf("reconcile: %d %v", n, err)
		}
		order("after a Redis rebuild")
	})
}

// Put back in its place, a pipeline goes before those queued after it, without a Redis loss.
func TestRequeueKeepsThePlaceInTheQueue(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	ids := f.queueSpaced(3)
	f.billWith(flakyBilling{map[int64]bool{ids[0]: true}})
	a := f.agent("a", 64)
	f.sched.Poll(ctx, a, protocol.PollRequest{FreeCPUs: 64}, noDrain())
	for _, want := range ids {
		if l := f.poll(a, 64); l == nil || l.PipelineID != want {
			t.Fatalf("lease %+v, want pipeline %d first (order %v)", l, want, ids)
		}
	}
}

// A pipeline billing refused at dispatch never ran: it used to show a start time equal to its
// end. It waits for money, with no start time.
func TestRefusedAtDispatchHasNoStartTime(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
	b := f.push("main", oneJob)[0]
	var p build.Pipeline
	db.Omit("plan").Where("build_id = ?", b.ID).Take(&p)
	f.sched = NewService(db, f.intake, f.builds, f.repos, refusingBilling{map[int64]bool{p.ID: true}}, f.clock, f.log,
		Config{PollTimeout: 50 * time.Millisecond, RegistrationToken: "reg-secret"})
	a := f.agent("a", 8)
	if l := f.poll(a, 8); l != nil {
		t.Fatalf("leased %+v", l)
	}
	got := f.pipeline(p.ID)
	if got.Status != build.StatusQueued || got.StartedAt != nil || got.FinishedAt != nil {
		t.Fatalf("refused pipeline: %s started %v finished %v", got.Status, got.StartedAt, got.FinishedAt)
	}
}

// An agent that stopped gracefully is offline at once, and a lost one after one lease TTL:
// queued pipelines used to say "all agents … are busy" for up to a minute with no agent online.
func TestStoppedAgentsAreOfflineAtOnce(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	a := f.agent("a", 8)
	f.poll(a, 8)
	b := f.push("main", oneJob)[0]
	var ps []build.Pipeline
	db.Omit("plan").Where("build_id = ?", b.ID).Find(&ps)
	why := func() string { return f.sched.Reasons(ctx, ps)[ps[0].ID] }
	if w := why(); !strings.Contains(w, "busy") {
		t.Fatalf("with the agent online: %q", w)
	}
	a = f.reload(a)
	if err := f.sched.Deregister(ctx, a); err != nil {
		t.Fatal(err)
	}
	if w := why(); !strings.Contains(w, "no online agent serves") {
		t.Fatalf("after a graceful stop: %q", w)
	}
	if list, _ := f.sched.Agents(ctx); list[0].Online {
		t.Fatal("a deregistered agent is listed online")
	}
	// It comes back: online again at its first call.
	a = f.reload(a)
	if _, err := f.sched.Control(ctx, a, protocol.ControlRequest{}, closed()); err != nil {
		t.Fatal(err)
	}
	if w := why(); !strings.Contains(w, "busy") {
		t.Fatalf("after the agent came back: %q", w)
	}
	// Then it vanishes without a word: offline once a lease TTL passed without hearing from it.
	f.clock.Advance(31 * time.Second)
	if w := why(); !strings.Contains(w, "no online agent serves") {
		t.Fatalf("31 s after the agent was last heard from: %q", w)
	}
}

// reload reads the agent's row again, as each API call authenticates it afresh.
func (f *fixture) reload(a *Agent) *Agent {
	var fresh Agent
	if err := f.db.Take(&fresh, "id = ?", a.ID).Error; err != nil {
		f.t.Fatal(err)
	}
	return &fresh
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// A cancel wakes the agent's control long-poll at once; it used to wait for the next renewal.
// The poll answers only the leases the agent says it runs.
func TestControlPollAnswersAStopAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		b := f.push("main", oneJob)[0]
		a := f.agent("a", 8)
		l := f.poll(a, 8)
		got := make(chan *protocol.ControlResponse, 1)
		go func() {
			r, err := f.sched.Control(ctx, a, protocol.ControlRequest{Running: []string{l.ID, "lease_unknown"}}, noDrain())
			if err != nil {
				t.Error(err)
			}
			got <- r
		}()
		time.Sleep(100 * time.Millisecond) // the poll is held
		begin := time.Now()
		if err := f.builds.Cancel(ctx, b.ID, build.ReasonCancelled); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if len(r.Stop) != 1 || r.Stop[0].LeaseID != l.ID || r.Stop[0].Reason != build.ReasonCancelled {
				t.Fatalf("control answered %+v", r)
			}
			t.Logf("cancel to control answer: %v", time.Since(begin))
		case <-time.After(2 * time.Second):
			t.Fatal("the control poll did not answer the cancel within 2 s")
		}
		// Billing's stop comes the same way.
		f.push("main", oneJob)
		l2 := f.poll(a, 8)
		go func() {
			r, _ := f.sched.Control(ctx, a, protocol.ControlRequest{Running: []string{l2.ID}}, noDrain())
			got <- r
		}()
		time.Sleep(100 * time.Millisecond)
		if err := f.builds.RequestStop(ctx, l2.PipelineID, build.ReasonInsufficientBalance); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if len(r.Stop) != 1 || r.Stop[0].Reason != build.ReasonInsufficientBalance {
				t.Fatalf("control answered %+v", r)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the control poll did not answer billing's stop within 2 s")
		}
		// Nothing to stop: the poll is held for one heartbeat, then answers empty.
		r, err := f.sched.Control(ctx, a, protocol.ControlRequest{Running: []string{"lease_unknown"}}, closed())
		if err != nil || len(r.Stop) != 0 {
			t.Fatalf("control with nothing to stop: %+v %v", r, err)
		}
	})
}
