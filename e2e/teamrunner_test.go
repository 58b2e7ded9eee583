package e2e

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// Issue 18's team runners, with real processes: a team registers its own agent with a runner
// token and a custom tag, and that agent runs the team's pipeline; another team's pipeline with
// the same tag waits with the reason shown (API and build page) and never runs there — neither
// on that runner nor on a platform agent that advertises the tag — then fails after the
// configured wait. Pause and resume act on the next pipeline; the run is in the usage at no
// cost under team:<tag>.
func TestTeamRunnerServesOnlyItsTeam(t *testing.T) {
	w := newWorld(t, "NIMBUS_TEAM_RUNNER_WAIT=25s")
	const tag = "seele-macbook"

	tok, err := w.alice.api.CreateRunnerToken(t.Context(), "ml", "alice's laptop")
	w.alice.check("runner token", err)
	if !strings.HasPrefix(tok.Token, "nbr_") {
		t.Fatalf("runner token %q", tok.Token)
	}
	// The team's runner, and a platform agent that also advertises the tag.
	w.agent("", "NIMBUS_AGENT_TOKEN="+tok.Token, "NIMBUS_AGENT_TAGS="+tag, "NIMBUS_AGENT_NAME=alice-laptop")
	w.agent("", "NIMBUS_AGENT_TAGS=cnb:arch:amd64,"+tag, "NIMBUS_AGENT_NAME=platform-box")
	var runners []apiclient.Agent
	deadline := time.Now().Add(30 * time.Second)
	for {
		runners, err = w.alice.api.TeamAgents(t.Context(), "ml")
		w.alice.check("the team's agents", err)
		if len(runners) == 1 && runners[0].Online {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the team's runner did not come online: %+v", runners)
		}
		time.Sleep(200 * time.Millisecond)
	}
	runner := runners[0]
	if runner.Name != "alice-laptop" || strings.Join(runner.Tags, ",") != tag {
		t.Fatalf("the team's runner: %+v", runner)
	}

	// Another team with a pipeline of the same tag.
	w.alice.createOrg("rivals")
	w.alice.createRepo("rivals", apiclient.NewRepo{Name: "trainer"})
	file := func(script string) string {
		return "main:\n  push:\n    - name: mac\n      runner: { tags: " + tag + " }\n      docker: { image: " + w.image +
			" }\n      stages:\n        - name: only\n          script: " + script + "\n"
	}
	rivals := t.TempDir()
	gitRun(t, rivals, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(rivals, ".cnb.yml"), []byte(file("echo never")), 0o644)
	gitRun(t, rivals, "add", ".")
	gitRun(t, rivals, "commit", "-q", "-m", "run")
	u, _ := url.Parse(w.base + "/rivals/trainer.git")
	u.User = url.UserPassword("alice", w.token)
	gitRun(t, rivals, "push", "-q", u.String(), "main")
	rivalBuild := func() apiclient.Build {
		return w.alice.build("rivals", "trainer", 1)
	}
	rivalQueuedAt := time.Now()

	// The team's own pipeline runs on its runner.
	n := w.pushFiles(map[string]string{".cnb.yml": file("echo on-my-laptop")})
	b := w.waitBuildSuccess(n, time.Minute)
	p := b.Pipelines[0]
	if p.RunnerTag != tag || p.CPUs != 1 {
		t.Errorf("the pipeline: %+v", p)
	}
	if log := w.jobLog(p.Stages[0].Jobs[0].ID); !strings.Contains(log, "on-my-laptop") {
		t.Errorf("log: %q", log)
	}
	rec := w.record(p.ID)
	if !strings.HasSuffix(rec.Predicate.RunDetails.Builder.ID, "/agents/"+runner.ID) {
		t.Errorf("the pipeline ran on %s, want the team's runner %s", rec.Predicate.RunDetails.Builder.ID, runner.ID)
	}
	// The other team's pipeline waits, with the reason, and never runs.
	rb := rivalBuild()
	if rb.Status != "queued" || rb.Pipelines[0].Status != "queued" ||
		!strings.HasPrefix(rb.Pipelines[0].Reason, "no runner of your team serves tag "+tag) {
		t.Fatalf("the other team's build: %s %+v", rb.Status, rb.Pipelines)
	}
	if bl := rb.Pipelines[0].Blockers; !rb.Waiting || !rb.Pipelines[0].Waiting || len(bl) != 1 || bl[0].Code != "no_agent" || bl[0].Remedy != "team_agents" {
		t.Errorf("the other team's build is not waiting on one blocker with its remedy: waiting %v/%v %+v", rb.Waiting, rb.Pipelines[0].Waiting, bl)
	}

	// In the browser: the reason on the other team's build page, the runner on the Agents page.
	br := startBrowser(t, w.base, 70)
	br.do("open the login page", 20*time.Second, chromedp.Navigate(w.base+"/login?next=%2Frivals%2Ftrainer%2Fbuilds%2F1"), chromedp.WaitVisible(chromedp.CSS("input[name=login]")))
	br.do("sign in", 10*time.Second, typeInto("input[name=login]", "alice"), typeInto("input[name=password]", "a long enough passphrase"),
		clickOn("button[type=submit]"))
	br.waitJS("the waiting reason on the build page", `document.body.innerText.includes("no runner of your team serves tag `+tag+`") && !!document.querySelector('[data-status="waiting"]') && (document.querySelector('[data-remedy="team_agents"]') || {}).getAttribute?.('href') === '/orgs/rivals/agents'`, 15*time.Second)
	br.shot("team-runner-waiting")
	br.do("open the team's agents", 10*time.Second, chromedp.Navigate(w.base+"/orgs/ml/agents"))
	br.waitJS("the runner online with its tag", `(document.querySelector('tr[data-agent="alice-laptop"]') || {}).innerText?.includes('online') && document.body.innerText.includes('`+tag+`') && document.body.innerText.includes("alice's laptop")`, 15*time.Second)
	br.shot("team-agents")

	// Paused, the runner leaves the next pipeline waiting with that reason; resumed, it runs it.
	paused, err := w.alice.api.PauseTeamAgent(t.Context(), "ml", runner.ID)
	w.alice.check("pause", err)
	if !paused.Paused {
		t.Fatalf("pause: %+v", paused)
	}
	w.alice.must(404, "POST", "/api/v1/orgs/rivals/agents/"+runner.ID+"/pause", nil, nil)
	n = w.pushFiles(map[string]string{".cnb.yml": file("echo after-resume")})
	w.waitFor(n, 20*time.Second, "the paused reason", func(b apiclient.Build) bool {
		return len(b.Pipelines) == 1 && strings.Contains(b.Pipelines[0].Reason, "every runner of your team with tag "+tag+" is paused")
	})
	time.Sleep(2 * time.Second)
	if b := w.build(n); b.Status != "queued" {
		t.Fatalf("a paused runner took work: %s", b.Status)
	}
	resumed := time.Now()
	_, err = w.alice.api.ResumeTeamAgent(t.Context(), "ml", runner.ID)
	w.alice.check("resume", err)
	w.waitFor(n, 10*time.Second, "the resumed runner takes the pipeline", func(b apiclient.Build) bool { return b.Status != "queued" })
	t.Logf("resume → pipeline started: %s (the poll timeout is 30 s: the resume wakes the paused runner's poll)", time.Since(resumed))
	w.waitBuildSuccess(n, time.Minute)

	// The time is in the usage, under team:<tag>, at no cost.
	var usage []apiclient.Usage
	deadline = time.Now().Add(20 * time.Second)
	for {
		usage, err = w.alice.api.Usage(t.Context(), "ml")
		w.alice.check("usage", err)
		if len(usage) == 1 && usage[0].Pipelines == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage: %+v", usage)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if u := usage[0]; u.RunnerClass != "team:"+tag || u.CoreSeconds < 1 || strings.Trim(u.Cost, "0.") != "" {
		t.Errorf("usage of the team's runner: %+v", u)
	}

	// After the configured wait, the other team's pipeline fails with the reason it had.
	for {
		rb = rivalBuild()
		if rb.Status != "queued" {
			break
		}
		if time.Since(rivalQueuedAt) > 60*time.Second {
			t.Fatalf("the other team's pipeline did not fail after the 25 s wait: %+v", rb.Pipelines)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if waited := time.Since(rivalQueuedAt); rb.Status != "failed" || waited < 25*time.Second ||
		rb.Pipelines[0].Reason != "no runner of your team serves tag "+tag+" (gave up after 25 seconds in the queue)" {
		t.Errorf("the other team's build after %s: %s %q", waited, rb.Status, rb.Pipelines[0].Reason)
	}
}
