package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/backend/redisconn/redistest"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// isolatedRedis is this package's own Redis database (index 7; the whole cluster on make
// test's Redis Cluster pass).
func isolatedRedis(t testing.TB) redis.UniversalClient { return redistest.Isolated(t, 7) }

type fixture struct {
	t      *testing.T
	db     *gorm.DB
	rdb    redis.UniversalClient
	clock  *clock.Fake
	sched  *Service
	intake *Intake
	builds *build.Service
	repos  *repo.Service
	user   *auth.User
	repoID int64
	orgID  int64
	orgs   *org.Service
	bare   string
	work   string
	log    *slog.Logger
}

// agentFinish is an agent's finish as the agent API makes it (build's Finish, under the lease);
// what follows the end is build's OnEnded hook, which newFixture subscribes the scheduler to.
func (f *fixture) agentFinish(ctx context.Context, a *Agent, leaseID string, req protocol.FinishRequest) error {
	_, _, err := f.builds.Finish(ctx, a.ID, leaseID, req)
	return err
}

func newFixture(t *testing.T, db *gorm.DB, cfg Config) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, db: db, rdb: isolatedRedis(t)}
	f.intake = NewIntake(f.rdb, nil)
	w := testworld.New(t, db, testworld.Options{Now: time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC), Redis: f.rdb,
		Build: build.Config{Queue: f.intake, Agents: f.intake}})
	users, orgs := w.Users, w.Orgs
	f.clock, f.log, f.repos, f.builds = w.Clock, w.Log, w.Repos, w.Builds
	if cfg.RegistrationToken == "" {
		cfg.RegistrationToken = "reg-secret"
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://nimbus.test"
	}
	f.sched = NewService(db, f.intake, f.builds, f.repos, nil, f.clock, f.log, cfg)
	// As app.New wires it; through f.sched, which tests may replace.
	f.builds.OnEnded(func(ctx context.Context, p *build.Pipeline) { f.sched.Ended(ctx, p) })
	var err error
	if f.user, err = users.Signup(ctx, "alice", "alice@example.com", "a long enough passphrase"); err != nil {
		t.Fatal(err)
	}
	o, _ := orgs.Create(ctx, f.user, "team")
	f.orgID, f.orgs = o.ID, orgs
	r, err := f.repos.Create(ctx, o, "trainer", repo.Private, "main", "")
	if err != nil {
		t.Fatal(err)
	}
	f.repos.PutSecret(ctx, r, "HF_TOKEN", "hf_123")
	f.repoID, f.bare, f.work = r.ID, f.repos.Path(r), t.TempDir()
	f.git("init", "-q", "-b", "main")
	return f
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=A", "-c", "user.email=a@x"}, args...)...)
	cmd.Dir = f.work
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+f.work)
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// push commits .cnb.yml on branch and runs the push trigger; it returns the builds.
func (f *fixture) push(branch, cnb string) []*build.Build {
	f.t.Helper()
	os.WriteFile(filepath.Join(f.work, ".cnb.yml"), []byte(cnb), 0o644)
	f.git("add", "-A")
	f.git("commit", "-q", "--allow-empty", "-m", "ci")
	old := git.ZeroSHA
	if sha, err := git.ResolveRef(context.Background(), f.bare, "refs/heads/"+branch); err == nil {
		old = sha
	}
	f.git("push", "-q", "--force", f.bare, "HEAD:refs/heads/"+branch)
	sha, _ := git.ResolveRef(context.Background(), f.bare, "refs/heads/"+branch)
	return f.builds.OnPush(context.Background(), f.repoID, f.user, []git.RefUpdate{{Old: old, New: sha, Ref: "refs/heads/" + branch}})
}

func (f *fixture) agent(name string, cpus int, tags ...string) *Agent {
	f.t.Helper()
	if len(tags) == 0 {
		tags = []string{"cnb:arch:amd64"}
	}
	resp, err := f.sched.Register(context.Background(), "reg-secret", protocol.RegisterRequest{Name: name, Tags: tags, CPUs: cpus, Concurrency: 4})
	if err != nil {
		f.t.Fatal(err)
	}
	a, err := f.sched.AgentByToken(context.Background(), resp.Token)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

func (f *fixture) pipeline(id int64) build.Pipeline {
	var p build.Pipeline
	f.db.Omit("plan").Take(&p, id)
	return p
}

func (f *fixture) buildStatus(id int64) string {
	var b build.Build
	f.db.Take(&b, id)
	return b.Status
}

const oneJob = `
main:
  push:
    - name: train
      runner: { tags: cnb:arch:amd64, cpus: 4 }
      stages:
        - name: train
          jobs:
            a: { script: echo a }
            b: { script: echo b }
`

func noDrain() <-chan struct{} { return make(chan struct{}) }

func (f *fixture) poll(a *Agent, free int) *protocol.Lease {
	f.t.Helper()
	l, err := f.sched.Poll(context.Background(), a, protocol.PollRequest{FreeCPUs: free}, noDrain())
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

func TestLeaseLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		bs := f.push("main", oneJob)
		a := f.agent("a1", 8)
		l := f.poll(a, 8)
		if l == nil {
			t.Fatal("no lease")
		}
		if l.Plan.Name != "train" || len(l.Jobs) != 2 || l.Commit != bs[0].CommitSHA || l.CloneURL != "http://nimbus.test/team/trainer.git" ||
			l.Secrets["HF_TOKEN"] != "hf_123" || l.Env["CNB_TOKEN"] != l.JobToken || !strings.HasPrefix(l.JobToken, auth.PrefixJob) {
			t.Fatalf("lease %+v", l)
		}
		p := f.pipeline(l.PipelineID)
		if p.Status != build.StatusRunning || p.StartedAt == nil || f.buildStatus(bs[0].ID) != build.StatusRunning {
			t.Fatalf("after lease: %s build %s", p.Status, f.buildStatus(bs[0].ID))
		}
		// The job token works while the pipeline runs, for its repo only.
		pr, err := f.builds.ResolveJobToken(ctx, l.JobToken)
		if err != nil || pr.RepoID != f.repoID || pr.Kind != auth.KindJob || pr.User == nil || pr.User.ID != f.user.ID {
			t.Fatalf("job token: %+v %v", pr, err)
		}
		if again := f.poll(a, 8); again != nil {
			t.Fatalf("the same pipeline leased twice: %+v", again)
		}
		f.clock.Advance(20 * time.Second)
		if r, err := f.sched.Renew(ctx, a, l.ID); err != nil || !r.ExpiresAt.Equal(f.clock.Now().Add(30*time.Second)) || r.Cancel {
			t.Fatalf("renew %+v %v", r, err)
		}
		code := 0
		for _, j := range l.Jobs {
			if err := f.builds.Event(ctx, a.ID, l.ID, protocol.Event{Kind: protocol.EventJobStarted, JobID: j.ID}); err != nil {
				t.Fatal(err)
			}
			if err := f.builds.Event(ctx, a.ID, l.ID, protocol.Event{Kind: protocol.EventJobFinished, JobID: j.ID, Status: "success", ExitCode: &code}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.builds.Event(ctx, a.ID, l.ID, protocol.Event{Kind: protocol.EventJobFinished, JobID: 999999, Status: "success"}); err == nil {
			t.Fatal("an event for a job of another pipeline was accepted")
		}
		if err := f.agentFinish(ctx, a, l.ID, protocol.FinishRequest{Status: "success"}); err != nil {
			t.Fatal(err)
		}
		if err := f.agentFinish(ctx, a, l.ID, protocol.FinishRequest{Status: "failed"}); err != nil {
			t.Fatalf("a repeated finish must be harmless: %v", err)
		}
		p = f.pipeline(l.PipelineID)
		var stages []build.Stage
		db.Where("pipeline_id = ?", p.ID).Find(&stages)
		if p.Status != build.StatusSuccess || f.buildStatus(bs[0].ID) != build.StatusSuccess || stages[0].Status != build.StatusSuccess {
			t.Fatalf("after finish: pipeline %s build %s stage %s", p.Status, f.buildStatus(bs[0].ID), stages[0].Status)
		}
		if _, err := f.builds.ResolveJobToken(ctx, l.JobToken); err == nil {
			t.Fatal("job token valid after the pipeline finished")
		}
		if _, err := f.sched.Renew(ctx, a, l.ID); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("renew after finish: %v", err)
		}
	})
}

func TestExpiredLeaseRequeuesOrFailsAndFencesTheOldAgent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		f.push("main", oneJob)
		a, b := f.agent("a", 8), f.agent("b", 8)
		first := f.poll(a, 8)
		// No job started: the expired lease puts the pipeline back in the queue.
		f.clock.Advance(31 * time.Second)
		if n, err := f.sched.Reap(ctx); err != nil || n != 1 {
			t.Fatalf("reap: %d %v", n, err)
		}
		if p := f.pipeline(first.PipelineID); p.Status != build.StatusQueued {
			t.Fatalf("status %s, want queued again", p.Status)
		}
		second := f.poll(b, 8)
		if second == nil || second.PipelineID != first.PipelineID || second.ID == first.ID {
			t.Fatalf("second lease %+v", second)
		}
		// The first agent is fenced off: every call about its old lease is refused, nothing moves.
		if _, err := f.sched.Renew(ctx, a, first.ID); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("renew of a stale lease: %v", err)
		}
		if err := f.agentFinish(ctx, a, first.ID, protocol.FinishRequest{Status: "failed"}); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("finish of a stale lease: %v", err)
		}
		if err := f.builds.Event(ctx, a.ID, first.ID, protocol.Event{Kind: protocol.EventJobStarted, JobID: second.Jobs[0].ID}); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("event of a stale lease: %v", err)
		}
		// A job starts, then the agent vanishes: the pipeline fails with agent_lost, never re-runs.
		f.builds.Event(ctx, b.ID, second.ID, protocol.Event{Kind: protocol.EventJobStarted, JobID: second.Jobs[0].ID})
		f.clock.Advance(31 * time.Second)
		if n, err := f.sched.Reap(ctx); err != nil || n != 1 {
			t.Fatalf("reap: %d %v", n, err)
		}
		p := f.pipeline(second.PipelineID)
		if p.Status != build.StatusFailed || p.Reason != build.ReasonAgentLost {
			t.Fatalf("status %s reason %q", p.Status, p.Reason)
		}
		if again := f.poll(a, 8); again != nil {
			t.Fatalf("a lost pipeline was handed out again: %+v", again)
		}
	})
}

func TestCancelQueuedAndRunning(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		queued := f.push("main", oneJob)[0]
		if err := f.builds.Cancel(ctx, queued.ID, build.ReasonCancelled); err != nil {
			t.Fatal(err)
		}
		if f.buildStatus(queued.ID) != build.StatusCancelled {
			t.Fatalf("queued build: %s", f.buildStatus(queued.ID))
		}
		a := f.agent("a", 8)
		if l := f.poll(a, 8); l != nil {
			t.Fatalf("a cancelled pipeline was leased: %+v", l)
		}
		running := f.push("main", oneJob)[0]
		l := f.poll(a, 8)
		if err := f.builds.Cancel(ctx, running.ID, build.ReasonCancelled); err != nil {
			t.Fatal(err)
		}
		r, err := f.sched.Renew(ctx, a, l.ID)
		if err != nil || !r.Cancel {
			t.Fatalf("renew after cancel: %+v %v", r, err)
		}
		f.agentFinish(ctx, a, l.ID, protocol.FinishRequest{Status: "cancelled"})
		if p := f.pipeline(l.PipelineID); p.Status != build.StatusCancelled || f.buildStatus(running.ID) != build.StatusCancelled {
			t.Fatalf("running pipeline after cancel: %s / %s", p.Status, f.buildStatus(running.ID))
		}
		// Cancelled while leased, and the agent vanishes before any job: it ends cancelled and is
		// not handed out again.
		lost := f.push("main", oneJob)[0]
		l = f.poll(a, 8)
		f.builds.Cancel(ctx, lost.ID, build.ReasonCancelled)
		f.clock.Advance(time.Minute)
		f.sched.Reap(ctx)
		if p := f.pipeline(l.PipelineID); p.Status != build.StatusCancelled {
			t.Fatalf("a cancelled pipeline whose agent vanished: %s", p.Status)
		}
		if again := f.poll(a, 8); again != nil {
			t.Fatalf("a cancelled pipeline was leased again: %+v", again)
		}
	})
}

func TestReconcileRestoresWhatRedisLost(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		for i := 0; i < 3; i++ {
			f.push("main", oneJob)
		}
		redisconn.FlushAll(ctx, f.rdb)
		a := f.agent("a", 64)
		if l := f.poll(a, 64); l != nil {
			t.Fatal("lease from an empty Redis")
		}
		if n, err := f.sched.Reconcile(ctx); err != nil || n != 3 {
			t.Fatalf("reconcile: %d %v", n, err)
		}
		if n, _ := f.sched.Reconcile(ctx); n != 0 {
			t.Fatalf("second reconcile re-queued %d", n)
		}
		for i := 0; i < 3; i++ {
			if l := f.poll(a, 64); l == nil {
				t.Fatalf("pipeline %d not back after reconcile", i)
			}
		}
	})
}

func TestLongPollWakesOnWorkAndReleasesOnDrain(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, Config{PollTimeout: 10 * time.Second})
	a := f.agent("a", 8)
	got := make(chan *protocol.Lease, 1)
	go func() {
		l, _ := f.sched.Poll(context.Background(), a, protocol.PollRequest{FreeCPUs: 8}, noDrain())
		got <- l
	}()
	time.Sleep(100 * time.Millisecond)
	f.push("main", oneJob)
	// Timed from the push (git and the build's creation are not the wake's business), and well
	// inside the 10 s poll timeout that an unwoken poll would wait out.
	start := time.Now()
	select {
	case l := <-got:
		if l == nil {
			t.Fatal("woke without a lease")
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Fatalf("lease after %v", waited)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the waiting poll was not woken by new work")
	}
	drain := make(chan struct{})
	done := make(chan struct{})
	go func() {
		f.sched.Poll(context.Background(), a, protocol.PollRequest{FreeCPUs: 8}, drain)
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	close(drain)
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("draining did not release the long-poll")
	}
}

func TestExplainWhyAPipelineWaits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond, Caps: map[string]int{"cnb:arch:amd64": 1}})
		ctx := context.Background()
		f.push("main", `
main:
  push:
    - name: big
      runner: { tags: cnb:arch:amd64, cpus: 64 }
      stages: [ { name: s, script: x } ]
    - name: small
      runner: { tags: cnb:arch:amd64, cpus: 2 }
      stages: [ { name: s, script: x } ]
    - name: gpu
      runner: { tags: cnb:arch:amd64:gpu }
      stages: [ { name: s, script: x } ]
`)
		why := func() map[string]string {
			var ps []build.Pipeline
			db.Omit("plan").Where("status = ?", build.StatusQueued).Find(&ps)
			out := map[string]string{}
			for id, r := range f.sched.Reasons(ctx, ps) {
				for _, p := range ps {
					if p.ID == id {
						out[p.Name] = r
					}
				}
			}
			return out
		}
		w := why()
		if !strings.Contains(w["small"], "no online agent serves cnb:arch:amd64") || !strings.Contains(w["gpu"], "no online agent serves cnb:arch:amd64:gpu") {
			t.Fatalf("without agents: %v", w)
		}
		a := f.agent("a", 8)
		w = why()
		if !strings.Contains(w["big"], "has 64 cores (the largest has 8)") || !strings.Contains(w["small"], "busy: #") {
			t.Fatalf("with an 8-core agent: %v", w)
		}
		if l := f.poll(a, 8); l == nil {
			t.Fatal("the small pipeline should be leased")
		}
		f.agent("b", 64)
		if w = why(); !strings.Contains(w["big"], "team concurrency cap reached: 1 of 1") {
			t.Fatalf("at the cap: %v", w)
		}
	})
}

func TestCronFiresOncePerTimeAcrossReplicas(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		f.push("dev/x", `
"dev/*":
  schedule:
    - cron: "0 2 * * *"
      name: nightly
      stages: [ { name: train, script: python train.py } ]
`)
		// A second replica on the same database and Redis.
		other := NewService(db, NewIntake(f.rdb, nil), f.builds, f.repos, nil, f.clock, f.log, Config{RegistrationToken: "x"})
		count := func() int64 {
			var n int64
			db.Model(&build.Build{}).Where("event = ?", "schedule").Count(&n)
			return n
		}
		// 10:00 UTC on June 1st is 18:00 in Shanghai: the first fire is at 02:00 local, 18:00 UTC.
		f.clock.Set(time.Date(2026, 6, 1, 17, 59, 0, 0, time.UTC))
		f.sched.FireSchedules(ctx)
		if count() != 0 {
			t.Fatal("fired early")
		}
		f.clock.Set(time.Date(2026, 6, 1, 18, 0, 30, 0, time.UTC))
		a, _ := f.sched.FireSchedules(ctx)
		b, _ := other.FireSchedules(ctx)
		if a+b != 1 || count() != 1 {
			t.Fatalf("fired %d + %d times, %d builds", a, b, count())
		}
		// Three days of downtime: one catch-up fire, not three.
		f.clock.Set(time.Date(2026, 6, 4, 19, 0, 0, 0, time.UTC))
		other.FireSchedules(ctx)
		f.sched.FireSchedules(ctx)
		if count() != 2 {
			t.Fatalf("after downtime: %d builds, want 2", count())
		}
		var b2 build.Build
		db.Where("event = ?", "schedule").Order("id DESC").Take(&b2)
		var p build.Pipeline
		db.Where("build_id = ?", b2.ID).Take(&p)
		if b2.Branch != "dev/x" || p.Name != "nightly" || !strings.Contains(p.Plan, `"CNB_IS_CRONEVENT":"true"`) {
			t.Fatalf("schedule build %+v pipeline %s", b2, p.Name)
		}
	})
}

// The platform admins' agent list: every agent, online or not, with the pipelines it runs.
func TestAgentsListsCapacityHeartbeatAndHeldPipelines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		f.push("main", oneJob)
		busy := f.agent("busy", 8)
		f.clock.Advance(time.Minute)
		idle := f.agent("idle", 2, "cnb:arch:amd64", "cnb:arch:default")
		l := f.poll(busy, 8)
		if l == nil {
			t.Fatal("no lease")
		}
		// Online means heard from within two poll timeouts and a heartbeat (10.1 s here).
		f.clock.Advance(5 * time.Second)
		got, err := f.sched.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != busy.ID || got[1].ID != idle.ID {
			t.Fatalf("agents %+v", got)
		}
		b, i := got[0], got[1]
		if !b.Online || b.CPUs != 8 || len(b.Pipelines) != 1 || b.Pipelines[0].ID != l.PipelineID ||
			b.Pipelines[0].Org != "team" || b.Pipelines[0].Repo != "trainer" || b.Pipelines[0].BuildNumber != 1 ||
			b.Pipelines[0].CPUs != 4 || b.Pipelines[0].StartedAt == nil || b.Pipelines[0].RunnerTag != "cnb:arch:amd64" {
			t.Fatalf("busy agent %+v", b)
		}
		if !i.Online || len(i.Pipelines) != 0 || len(i.Tags) != 2 || i.CPUs != 2 || i.GPUs == nil {
			t.Fatalf("idle agent %+v", i)
		}
		f.clock.Advance(2 * time.Minute)
		got, _ = f.sched.Agents(ctx)
		if got[0].Online || got[1].Online {
			t.Fatalf("agents quiet for minutes still online: %+v", got)
		}
	})
}

// refusingBilling starts every pipeline but the ones named in refuse, which it refuses for want
// of balance. Billing's own rules are tested in package billing; here only the refusal matters.
type refusingBilling struct{ refuse map[int64]bool }

func (b refusingBilling) Start(_ context.Context, r Run, _ time.Time) error {
	if b.refuse[r.PipelineID] {
		return &Refusal{Reason: build.ReasonInsufficientBalance}
	}
	return nil
}
func (b refusingBilling) CanStart(_ context.Context, r Run) error {
	if b.refuse[r.PipelineID] {
		return &Refusal{Reason: build.ReasonInsufficientBalance}
	}
	return nil
}

// A pipeline billing refuses at its claim waits for money (README, "Billing"): queued again,
// on no queue, naming no host, its reason saying so; the team's running count (what caps read)
// is given back once, not twice. Once the account can pay, the reconciler queues it again and
// an agent takes it.
func TestRefusedPipelineWaitsForMoney(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	refuse := map[int64]bool{}
	f.sched = NewService(db, f.intake, f.builds, f.repos, refusingBilling{refuse}, f.clock, f.log, Config{PollTimeout: 50 * time.Millisecond, RegistrationToken: "reg-secret"})
	a := f.agent("a", 8)
	f.push("main", oneJob)
	if l := f.poll(a, 8); l == nil {
		t.Fatal("the allowed pipeline was not leased")
	}
	refused := f.push("main", oneJob)[0]
	var ps []build.Pipeline
	db.Omit("plan").Where("build_id = ?", refused.ID).Find(&ps)
	refuse[ps[0].ID] = true
	if l := f.poll(a, 8); l != nil {
		t.Fatalf("a refused pipeline was leased: %+v", l)
	}
	p := f.pipeline(ps[0].ID)
	if p.Status != build.StatusQueued || !strings.HasPrefix(p.Reason, build.ReasonFundsWaitPrefix+build.ReasonInsufficientBalance) ||
		p.Host != "" || p.StartedAt != nil || p.AgentID != "" {
		t.Fatalf("refused pipeline: %s %q host %q started %v", p.Status, p.Reason, p.Host, p.StartedAt)
	}
	running, err := f.rdb.HGet(ctx, "{q:cnb:arch:amd64}:running", strconv.FormatInt(ps[0].OrgID, 10)).Int()
	if err != nil || running != 1 {
		t.Fatalf("the team's running count is %d (%v), want 1: the leased pipeline still runs", running, err)
	}
	// Still no money: the reconciler leaves it off the queue, and no poll takes it.
	if _, err := f.sched.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if l := f.poll(a, 8); l != nil {
		t.Fatalf("a pipeline waiting for money was leased: %+v", l)
	}
	// The money arrives (billing's CanStart says yes from now on).
	delete(refuse, ps[0].ID)
	if n, err := f.sched.Reconcile(ctx); err != nil || n != 1 {
		t.Fatalf("the reconciler re-queued %d (%v), want the pipeline that can be paid for now", n, err)
	}
	l := f.poll(a, 8)
	if l == nil || l.PipelineID != ps[0].ID {
		t.Fatalf("after the money came: %+v", l)
	}
	if p := f.pipeline(ps[0].ID); p.Status != build.StatusRunning || p.Reason != "" {
		t.Fatalf("the pipeline once paid for: %s %q", p.Status, p.Reason)
	}
}

// A build of a fork's proposed code (build.Build.Untrusted) gets no repo secret in its lease,
// and its docker.volumes caches move under its request's own group; data volumes stay as they
// are (they are the pipeline's own anyway).
func TestUntrustedLeaseHasNoSecretsAndItsOwnCaches(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		bs := f.push("main", `
main:
  push:
    - name: train
      runner: { tags: cnb:arch:amd64, cpus: 4 }
      docker:
        volumes:
          - /root/.cache/pip
          - ${CNB_BRANCH}:/data/set:read-only
          - /scratch:data
      stages:
        - name: train
          jobs:
            a: { script: echo a }
`)
		if err := buildtest.Untrusted(db, bs[0].ID, 7); err != nil {
			t.Fatal(err)
		}
		l := f.poll(f.agent("a1", 8), 8)
		if l == nil {
			t.Fatal("no lease")
		}
		if len(l.Secrets) != 0 {
			t.Errorf("an untrusted lease holds secrets: %v", l.Secrets)
		}
		var groups []string
		for _, v := range l.Plan.Volumes {
			groups = append(groups, v.Type+"="+v.Group)
		}
		want := []string{"copy-on-write=" + UntrustedCacheGroup(7, ""), "read-only=" + UntrustedCacheGroup(7, "main"), "data="}
		if !slices.Equal(groups, want) {
			t.Errorf("volumes %q, want %q", groups, want)
		}
	})
}

// An agent restates its facts at each start: the list shows the host as it runs now (it
// registered as "shell" with 64 cores; Docker was installed and the cores set to the host's).
func TestAgentFactsUpdateTheList(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		a := f.agent("builder", 64)
		facts := protocol.RegisterRequest{Name: "builder", Version: "v2", Tags: []string{"cnb:arch:amd64"}, CPUs: 2, Concurrency: 2,
			Executor: "docker", MemoryBytes: 8 << 30}
		if ignored, err := f.sched.UpdateFacts(ctx, a, facts); err != nil || len(ignored) != 0 {
			t.Fatalf("update facts: %v %v", ignored, err)
		}
		list, err := f.sched.Agents(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("agents: %+v %v", list, err)
		}
		if got := list[0]; got.Executor != "docker" || got.CPUs != 2 || got.Version != "v2" || got.Concurrency != 2 || got.MemoryBytes != 8<<30 {
			t.Fatalf("after the facts: %+v", got)
		}
		// The checks of registration hold: tags that name no class are refused, nothing changes.
		if _, err := f.sched.UpdateFacts(ctx, a, protocol.RegisterRequest{Name: "builder", Tags: []string{"nowhere"}, CPUs: 2, Concurrency: 2}); fault.KindOf(err) != fault.KindInvalid {
			t.Fatalf("facts naming no class: %v", err)
		}
		if list, _ := f.sched.Agents(ctx); list[0].Tags[0] != "cnb:arch:amd64" {
			t.Fatalf("a refused update changed the tags: %+v", list[0])
		}
	})
}

// A whole-host agent (the all-in-one's built-in one) says the cores its host has, and still
// takes a pipeline that asks for more, alone: when it runs nothing else, and never beside
// another pipeline. An agent without it leaves that pipeline waiting, and says why.
func TestWholeHostAgentTakesLargerPipelinesAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		f.push("main", `
main:
  push:
    - name: big
      runner: { tags: cnb:arch:amd64, cpus: 16 }
      stages: [ { name: s, script: x } ]
`)
		plain := f.agent("plain", 2)
		if l := f.poll(plain, 2); l != nil {
			t.Fatalf("a 2-core agent took a 16-core pipeline: %+v", l)
		}
		resp, err := f.sched.Register(ctx, "reg-secret", protocol.RegisterRequest{Name: "laptop", Tags: []string{"cnb:arch:amd64"}, CPUs: 2,
			Concurrency: 2, WholeHost: true})
		if err != nil {
			t.Fatal(err)
		}
		laptop, err := f.sched.AgentByToken(ctx, resp.Token)
		if err != nil {
			t.Fatal(err)
		}
		// Busy with another pipeline (one lease running, one core free): it waits.
		if l, err := f.sched.Poll(ctx, laptop, protocol.PollRequest{FreeCPUs: 1, Running: []string{"other"}}, noDrain()); err != nil || l != nil {
			t.Fatalf("a busy whole-host agent took the big pipeline: %+v %v", l, err)
		}
		l := f.poll(laptop, 2)
		if l == nil || l.Plan.Runner.Cpus != 16 {
			t.Fatalf("an idle whole-host agent should take the 16-core pipeline: %+v", l)
		}
		list, err := f.sched.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list {
			if a.Name == "laptop" && (!a.WholeHost || a.CPUs != 2) {
				t.Fatalf("the list says %+v; want 2 cores and whole_host", a)
			}
		}
	})
}

// A GPU host its operator lets serve CPU classes takes a CPU pipeline only after CPU agents
// had GPUSpillAfter to take it: CPU steps do not hold GPU time while a CPU agent is free, and
// the GPU host still helps when none is.
func TestGPUHostTakesCPUWorkOnlyWhenNoCPUAgentDoes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond, GPUSpillAfter: 10 * time.Second})
		ctx := context.Background()
		resp, err := f.sched.Register(ctx, "reg-secret", protocol.RegisterRequest{Name: "gpu-box", CPUs: 16, Concurrency: 2,
			Tags: []string{"cnb:arch:amd64", "cnb:arch:amd64:gpu"}, GPUs: []protocol.GPU{{Index: 0, Name: "L40"}}})
		if err != nil {
			t.Fatal(err)
		}
		gpuHost, err := f.sched.AgentByToken(ctx, resp.Token)
		if err != nil {
			t.Fatal(err)
		}
		cpuHost := f.agent("cpu-box", 8)
		gpuPoll := func() *protocol.Lease {
			t.Helper()
			l, err := f.sched.Poll(ctx, gpuHost, protocol.PollRequest{FreeCPUs: 16, FreeGPUs: []string{"0"}}, noDrain())
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		f.push("main", oneJob)
		if l := gpuPoll(); l != nil {
			t.Fatalf("the GPU host took a fresh CPU pipeline while a CPU agent is free: %+v", l)
		}
		if l := f.poll(cpuHost, 8); l == nil {
			t.Fatal("the CPU agent should take the CPU pipeline")
		}
		// No CPU agent takes the next one: after GPUSpillAfter the GPU host does.
		f.push("main", oneJob)
		if l := gpuPoll(); l != nil {
			t.Fatalf("the GPU host took it before the spill time: %+v", l)
		}
		f.clock.Advance(11 * time.Second)
		if l := gpuPoll(); l == nil || l.Plan.Runner.Cpus != 4 {
			t.Fatalf("the GPU host should take a CPU pipeline no CPU agent took: %+v", l)
		}
	})
}
