package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

const teamTagFile = `
main:
  push:
    - name: mac
      runner: { tags: seele-macbook }
      stages: [ { name: s, script: x } ]
`

// teamRunner registers an agent with a runner token of the org.
func (f *fixture) teamRunner(orgID int64, name string, tags ...string) (*Agent, *protocol.RegisterResponse) {
	f.t.Helper()
	ctx := context.Background()
	tok, err := f.sched.CreateRunnerToken(ctx, orgID, f.user.ID, name+" token")
	if err != nil {
		f.t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Token, "nbr_") {
		f.t.Fatalf("runner token %q", tok.Token)
	}
	resp, err := f.sched.Register(ctx, tok.Token, protocol.RegisterRequest{Name: name, Tags: tags, CPUs: 8, Concurrency: 2})
	if err != nil {
		f.t.Fatal(err)
	}
	a, err := f.sched.AgentByToken(ctx, resp.Token)
	if err != nil {
		f.t.Fatal(err)
	}
	return a, resp
}

func (f *fixture) explainAll() map[string]string {
	var ps []build.Pipeline
	f.db.Omit("plan").Where("status = ?", build.StatusQueued).Find(&ps)
	out := map[string]string{}
	for id, r := range f.sched.Reasons(context.Background(), ps) {
		for _, p := range ps {
			if p.ID == id {
				out[p.Name] = r
			}
		}
	}
	return out
}

func TestTeamRunners(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 30 * time.Millisecond, TeamRunnerCNBTags: []string{"cnb:arch:amd64"}})
		ctx := context.Background()
		f.push("main", teamTagFile)
		if w := f.explainAll()["mac"]; w != "no runner of your team serves tag seele-macbook (it fails after 24 hours in the queue)" {
			t.Fatalf("without a runner: %q", w)
		}

		// A platform agent advertising the tag never takes it.
		platform := f.agent("platform", 8, "cnb:arch:amd64", "seele-macbook")
		if l := f.poll(platform, 8); l != nil {
			t.Fatalf("a platform agent took a team runner's pipeline: %+v", l)
		}
		// Another team's runner with the same tag neither.
		other, err := f.orgs.Create(ctx, f.user, "other-team")
		if err != nil {
			t.Fatal(err)
		}
		stranger, _ := f.teamRunner(other.ID, "stranger", "seele-macbook")
		if l := f.poll(stranger, 8); l != nil {
			t.Fatalf("another team's runner took the pipeline: %+v", l)
		}
		if w := f.explainAll()["mac"]; !strings.HasPrefix(w, "no runner of your team serves tag seele-macbook") {
			t.Fatalf("with only other teams' runners: %q", w)
		}

		// The team's runner: cnb: tags the operator did not allow are ignored and named.
		mine, resp := f.teamRunner(f.orgID, "mine", "seele-macbook", "cnb:arch:amd64:gpu", "cnb:arch:amd64")
		if strings.Join(resp.IgnoredTags, ",") != "cnb:arch:amd64:gpu" || mine.Tags != "seele-macbook cnb:arch:amd64" || mine.OrgID == nil || *mine.OrgID != f.orgID {
			t.Fatalf("registered %+v, ignored %v", mine, resp.IgnoredTags)
		}
		// Paused, it takes nothing and the reason says so.
		if _, err := f.sched.PauseAgent(ctx, f.orgID, mine.ID, true); err != nil {
			t.Fatal(err)
		}
		mine, _ = f.sched.AgentByToken(ctx, resp.Token)
		if l := f.poll(mine, 8); l != nil {
			t.Fatal("a paused runner took work")
		}
		if w := f.explainAll()["mac"]; !strings.Contains(w, "every runner of your team with tag seele-macbook is paused") {
			t.Fatalf("paused: %q", w)
		}
		if _, err := f.sched.PauseAgent(ctx, other.ID, mine.ID, false); !isNotFound(err) {
			t.Fatalf("another team resumed our runner: %v", err)
		}
		info, err := f.sched.PauseAgent(ctx, f.orgID, mine.ID, false)
		if err != nil || info.Paused {
			t.Fatalf("resume: %+v %v", info, err)
		}
		mine, _ = f.sched.AgentByToken(ctx, resp.Token)
		l := f.poll(mine, 8)
		if l == nil || l.Plan.Runner.Class != "seele-macbook" || !l.Plan.Runner.Team || l.Plan.Runner.Cpus != 1 {
			t.Fatalf("the team's runner got %+v", l)
		}
		list, err := f.sched.TeamAgents(ctx, f.orgID)
		if err != nil || len(list) != 1 || list[0].ID != mine.ID || len(list[0].Pipelines) != 1 || list[0].Pipelines[0].RunnerTag != "seele-macbook" {
			t.Fatalf("team agents: %+v %v", list, err)
		}
		if theirs, _ := f.sched.TeamAgents(ctx, other.ID); len(theirs) != 1 || theirs[0].ID != stranger.ID {
			t.Fatalf("the other team's agents: %+v", theirs)
		}

		// With the operator's leave, it takes its own team's cnb:arch:amd64 pipelines too.
		f.push("main", oneJob)
		if l := f.poll(mine, 7); l == nil || l.Plan.Runner.Class != "cnb:arch:amd64" {
			t.Fatalf("the allowed platform class: %+v", l)
		}

		// Revoked, its token is refused; a pipeline nobody serves fails after the wait.
		if err := f.sched.RevokeAgent(ctx, f.orgID, mine.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.sched.AgentByToken(ctx, resp.Token); err == nil {
			t.Fatal("a revoked runner's token still works")
		}
		f.push("main", strings.ReplaceAll(teamTagFile, "name: mac", "name: mac2"))
		if n, err := f.sched.FailUnserved(ctx); err != nil || n != 0 {
			t.Fatalf("before the wait: %d %v", n, err)
		}
		f.clock.Advance(24*time.Hour + time.Minute)
		n, err := f.sched.FailUnserved(ctx)
		if err != nil || n != 1 {
			t.Fatalf("after the wait: %d %v", n, err)
		}
		var p build.Pipeline
		db.Omit("plan").Where("name = ?", "mac2").Take(&p)
		if p.Status != build.StatusFailed || p.Reason != "no runner of your team serves tag seele-macbook (gave up after 24 hours in the queue)" {
			t.Fatalf("after the wait: %s %q", p.Status, p.Reason)
		}

		// Tokens: listed without the secret, deleted, then refused.
		toks, err := f.sched.RunnerTokens(ctx, f.orgID)
		if err != nil || len(toks) != 1 || toks[0].Token != "" || toks[0].LastUsedAt == nil {
			t.Fatalf("tokens: %+v %v", toks, err)
		}
		if err := f.sched.DeleteRunnerToken(ctx, other.ID, toks[0].ID); !isNotFound(err) {
			t.Fatalf("another team deleted our token: %v", err)
		}
		if err := f.sched.DeleteRunnerToken(ctx, f.orgID, toks[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.sched.Register(ctx, "nbr_nope", protocol.RegisterRequest{Name: "x", Tags: []string{"a"}, CPUs: 1, Concurrency: 1}); err == nil {
			t.Fatal("an unknown runner token registered")
		}
	})
}

func isNotFound(err error) bool {
	var e *fault.Error
	return errors.As(err, &e) && e.Kind == fault.KindNotFound
}

// A team runner on a platform class takes its own team's entries only, whatever the ring says.
func TestDispatchOnlyOrg(t *testing.T) {
	q := NewQueue(isolatedRedis(t))
	ctx := context.Background()
	now := time.Now()
	for i, org := range []int64{1, 2, 1, 2} {
		if _, err := q.Enqueue(ctx, Entry{PipelineID: int64(10 + i), OrgID: org, Class: "c", CPUs: 1, Enqueued: now.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	capacity := Capacity{FreeCPUs: 8, TotalCPUs: 8}
	var got []int64
	for range 3 {
		d, err := q.Dispatch(ctx, "c", Poller{AgentID: "team2", OnlyOrg: 2}, capacity, Rules{Depth: 10, StarveAfter: time.Hour}, now)
		if errors.Is(err, ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.PipelineID)
	}
	if len(got) != 2 || got[0] != 11 || got[1] != 13 {
		t.Fatalf("team 2's runner took %v, want [11 13]", got)
	}
	if _, err := q.Dispatch(ctx, "c", Poller{AgentID: "team3", OnlyOrg: 3}, capacity, Rules{Depth: 10}, now); !errors.Is(err, ErrEmpty) {
		t.Fatalf("a team with nothing queued got work: %v", err)
	}
	d, err := q.Dispatch(ctx, "c", Poller{AgentID: "platform"}, capacity, Rules{Depth: 10, StarveAfter: time.Hour}, now)
	if err != nil || d.PipelineID != 10 {
		t.Fatalf("the platform agent: %+v %v", d, err)
	}
}

// poorBilling says no account can pay for anything.
type poorBilling struct{ refusingBilling }

func (poorBilling) CanStart(context.Context, Run) error {
	return &Refusal{Reason: build.ReasonInsufficientBalance, Detail: "the first 5-minute window costs 0.6667 CNY, the balance is 0.0000 CNY"}
}

// A GPU pipeline that no agent serves on an account without money names both blockers at
// once, each with its remedy, and is waiting; past the queue timeout it fails with both.
func TestBlockersAllAtOnceAndQueueTimeout(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 30 * time.Millisecond})
		s := NewService(db, f.intake, f.builds, f.repos, poorBilling{}, f.clock, f.log,
			Config{RegistrationToken: "reg-secret", PublicURL: "http://nimbus.test", QueueTimeout: time.Hour})
		ctx := context.Background()
		f.push("main", "main:\n  push:\n    - name: gpu\n      runner: { tags: cnb:arch:amd64:gpu }\n      stages: [ { name: s, script: x } ]\n")
		var p build.Pipeline
		db.Omit("plan").Where("name = ?", "gpu").Take(&p)
		bs := s.Explain(ctx, []build.Pipeline{p})[p.ID]
		if len(bs) != 2 || bs[0].Code != build.BlockerNoAgent || bs[0].Remedy != build.RemedyPlatformAgents || bs[0].Message != "no online agent serves cnb:arch:amd64:gpu" ||
			bs[1].Code != build.BlockerBalance || bs[1].Remedy != build.RemedyTopUp || !strings.HasPrefix(bs[1].Message, "balance insufficient: the first 5-minute window") {
			t.Fatalf("blockers: %+v", bs)
		}
		if !build.Waiting(bs) || build.Waiting([]build.Blocker{{Code: build.BlockerBusy}}) {
			t.Fatal("Waiting: blockers hold it back, its turn does not")
		}
		if n, err := s.FailStale(ctx); err != nil || n != 0 {
			t.Fatalf("before the timeout: %d %v", n, err)
		}
		f.clock.Advance(time.Hour + time.Second)
		if n, err := s.FailStale(ctx); err != nil || n != 1 {
			t.Fatalf("after the timeout: %d %v", n, err)
		}
		db.Omit("plan").Take(&p, p.ID)
		want := "gave up after 1 hour in the queue: no online agent serves cnb:arch:amd64:gpu; balance insufficient: the first 5-minute window costs 0.6667 CNY, the balance is 0.0000 CNY"
		if p.Status != build.StatusFailed || p.Reason != want {
			t.Fatalf("after the timeout: %s %q", p.Status, p.Reason)
		}
	})
}

// cappedBilling says every window would pass the team's spending cap.
type cappedBilling struct{ refusingBilling }

func (cappedBilling) CanStart(context.Context, Run) error {
	return &Refusal{Reason: build.ReasonSpendingCap, Detail: "0.1467 paid this month and 0.0000 frozen, its first 5m0s window's 0.6667 would pass the cap of 0.1500 CNY"}
}

// A spending cap blocks with the figures: what was paid, and the window that would pass it
// (the cap itself is not reached: 0.1467 of 0.15).
func TestSpendingCapBlockerSaysWhatWouldPassIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 30 * time.Millisecond})
		s := NewService(db, f.intake, f.builds, f.repos, cappedBilling{}, f.clock, f.log,
			Config{RegistrationToken: "reg-secret", PublicURL: "http://nimbus.test", QueueTimeout: time.Hour})
		f.push("main", "main:\n  push:\n    - name: gpu\n      runner: { tags: cnb:arch:amd64:gpu }\n      stages: [ { name: s, script: x } ]\n")
		var p build.Pipeline
		db.Omit("plan").Where("name = ?", "gpu").Take(&p)
		bs := s.Explain(context.Background(), []build.Pipeline{p})[p.ID]
		want := "the team's monthly spending cap would be passed: 0.1467 paid this month and 0.0000 frozen, its first 5m0s window's 0.6667 would pass the cap of 0.1500 CNY"
		if len(bs) != 2 || bs[1].Code != build.BlockerSpendingCap || bs[1].Remedy != build.RemedySpendingCap || bs[1].Message != want {
			t.Fatalf("blockers: %+v", bs)
		}
	})
}

// A missing platform agent points at team runners only for a tag they may serve; otherwise at
// the platform's admins (the waiting card's link to "bring your own runner" for a GPU tag
// led to a refusal).
func TestAgentRemedyOnlyOffersTeamRunnersForWhatTheyServe(t *testing.T) {
	s := &Service{cfg: Config{TeamRunnerCNBTags: []string{"cnb:arch:amd64"}}}
	for tag, want := range map[string]string{
		"cnb:arch:amd64":         build.RemedyAgents,
		"cnb:arch:amd64:gpu":     build.RemedyPlatformAgents,
		"cnb:arch:amd64:gpu:L40": build.RemedyPlatformAgents,
	} {
		if got := s.agentRemedy(tag); got != want {
			t.Errorf("%s: remedy %q, want %q", tag, got, want)
		}
	}
	if got := (&Service{}).agentRemedy("cnb:arch:amd64"); got != build.RemedyPlatformAgents {
		t.Errorf("no cnb: tags for team runners: remedy %q", got)
	}
}
