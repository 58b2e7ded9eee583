package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// The brief's GPU workspace, exactly as it is written there, on a simulated GPU host: it opens,
// is billed as GPU (no free quota) in 10-second windows frozen ahead, and, when the team's money
// runs out, stops as insufficient_balance with its uncommitted work saved.
func TestWorkspaceOnGPUIsBilledAndStopsWhenMoneyRunsOut(t *testing.T) {
	t.Parallel() // waits more than it computes: it overlaps the other slow worlds (harness_test.go)
	w := newWorld(t, "NIMBUS_BILLING_FREEZE_INTERVAL=10s", "NIMBUS_BILLING_FREEZE_LEAD=50",
		"NIMBUS_DEFAULT_DEV_IMAGE="+testenv.Image(t))
	w.agent("", "NIMBUS_AGENT_TAGS=cnb:arch:amd64:gpu", "NIMBUS_AGENT_CPUS=16", "NIMBUS_AGENT_GPUS=simulate:1:L40")
	// The brief's example (its image is the default dev image, the busybox test image here).
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner:
        tags: cnb:arch:amd64:gpu
        cpus: 16
      services:
        - vscode
`})
	// A GPU window is 16 cores × 10 s at 0.5 per core-hour: money for six. The clock starts at
	// the lease, and on a loaded CI machine the container, the terminal and its first command
	// took more than 25 s: with money for three the workspace ended before the terminal opened.
	const windows = 6
	window := billing.CostOf(16*10, billing.Scale/2)
	w.alice.grantCredits("ml", (windows * window).String(), "six windows")

	id := w.openWorkspace(2 * time.Minute)
	v := w.waitWorkspace(id, 30*time.Second, "reachable", func(v apiclient.Workspace) bool { return v.Connections != nil })
	if v.GPUs != 1 {
		t.Fatalf("the GPU workspace shows %d GPUs", v.GPUs)
	}
	term := w.dialTerminal(id, "")
	term.send("echo 'lr = 3e-4' > train.py && echo edited-$((1+1))\n")
	term.expect("edited-2", 20*time.Second)
	// Keep it connected until the money runs out: it is terminated, not idle.
	ended := w.waitWorkspace(id, 2*time.Minute, "ended", func(v apiclient.Workspace) bool { return v.Status != "running" && v.Status != "queued" })
	if ended.Status != "terminated" || ended.State != "stopped" || !strings.Contains(ended.Reason, "insufficient_balance") ||
		!strings.Contains(ended.Reason, "work saved to refs/nimbus/workspaces/main/"+itoa(id)) {
		t.Fatalf("the workspace ended %s/%s (%q)", ended.Status, ended.State, ended.Reason)
	}
	kinds := strings.Join(w.checkLedgerAddsUp("ml"), " ")
	if !strings.HasPrefix(kinds, "grant freeze freeze freeze") || strings.Count(kinds, "settle") != 1 {
		t.Fatalf("ledger kinds: %s", kinds)
	}
	// Billed as GPU from the first second: what was paid is the run time at the GPU price, all
	// of the six windows at most. On a loaded machine the stop can land a few seconds past the
	// last covered window; that overrun is written off (billing.Settle), never charged.
	settled := w.waitSettled(id)
	// (Cost is shown to 4 places, so it is compared as shown: six windows show as 0.1333.)
	if want := min(billing.CostOf(settled.CoreSeconds, billing.Scale/2), windows*window); settled.Cost != want.Display() || settled.CoreSeconds < 16*10 {
		t.Fatalf("paid %s for %d core-seconds; at the GPU price that is %s (at most %s)", settled.Cost, settled.CoreSeconds, want.Display(), (windows * window).Display())
	}
	t.Logf("GPU workspace: %d core-seconds, paid %s, ended %q", settled.CoreSeconds, settled.Cost, ended.Reason)
}

// kill -9 of the agent under an open workspace: its container stops within 10 s (it used to run
// on until the agent was started again), and it ends as agent_lost, billed to the agent's last
// heartbeat, not to when the lease ran out.
func TestWorkspaceAgentKilledIsLostAndBilledToTheLastHeartbeat(t *testing.T) {
	w := newWorld(t, "NIMBUS_LEASE_TTL=6s", "NIMBUS_DEFAULT_DEV_IMAGE="+testenv.Image(t))
	ag, dir := w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 2 }
      services: [vscode]
`})
	id := w.openWorkspace(2 * time.Minute)
	term := w.dialTerminal(id, "")
	term.send("echo alive-$((1+1))\n")
	term.expect("alive-2", 20*time.Second)
	time.Sleep(3 * time.Second) // past a renewal (every 2 s): the last heartbeat is after the start
	ag.cmd.Process.Kill()
	<-ag.done
	ag.done <- nil
	killed := time.Now().UTC()
	w.waitUntil(10*time.Second, "the workspace's container stopping after kill -9 of its agent", func() bool { return w.runningContainers(dir) == 0 })
	ended := w.waitWorkspace(id, 45*time.Second, "lost", func(v apiclient.Workspace) bool { return v.Status != "running" })
	if ended.Status != "failed" || ended.Reason != "agent_lost" || ended.State != "failed" {
		t.Fatalf("after kill -9: %s/%s (%q)", ended.Status, ended.State, ended.Reason)
	}
	full := w.api.workspace(id)
	if full.StartedAt == nil || full.FinishedAt == nil {
		t.Fatalf("the lost workspace has no start or end: %+v", full)
	}
	// Renewals come every 2 s (a third of the TTL): the last one was at most that before the
	// kill, and never after it.
	finished := *full.FinishedAt
	if finished.After(killed) || finished.Before(killed.Add(-3*time.Second)) {
		t.Fatalf("billed until %v; the agent was killed at %v (renewals every 2 s)", finished, killed)
	}
	settled := w.waitSettled(id)
	if secs := finished.Sub(*full.StartedAt).Seconds(); settled.CoreSeconds > 2*int64(secs+1) || settled.CoreSeconds == 0 {
		t.Fatalf("%d core-seconds billed for %.1f s on 2 cores", settled.CoreSeconds, secs)
	}
	w.checkLedgerAddsUp("ml")
	// The restarted agent removes the orphaned workspace container.
	w.agent(dir)
	deadline := time.Now().Add(30 * time.Second)
	for w.containers(dir) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the restarted agent left the orphaned workspace container behind")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// An agent that is stopped (SIGTERM) first stops its workspaces gracefully: the uncommitted
// work is saved to the repo before anything is killed.
func TestWorkspaceSavedWhenItsAgentStops(t *testing.T) {
	w := newWorld(t, "NIMBUS_DEFAULT_DEV_IMAGE="+testenv.Image(t))
	ag, _ := w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      services: [vscode]
`})
	id := w.openWorkspace(2 * time.Minute)
	term := w.dialTerminal(id, "")
	term.send("echo unsaved-idea > idea.txt && echo written-$((1+1))\n")
	term.expect("written-2", 20*time.Second)
	if err, _ := ag.stop(t, 2*time.Minute); err != nil {
		t.Fatalf("the agent's stop: %v", err)
	}
	ended := w.waitWorkspace(id, 30*time.Second, "ended", func(v apiclient.Workspace) bool { return v.Status != "running" })
	if ended.State != "stopped" || !strings.Contains(ended.Reason, "the agent is stopping") || !strings.Contains(ended.Reason, "work saved") {
		t.Fatalf("after the agent's stop: %s/%s (%q)", ended.Status, ended.State, ended.Reason)
	}
	u, _ := url.Parse(w.base + "/ml/trainer.git")
	u.User = url.UserPassword("alice", w.token)
	gitRun(t, w.work, "fetch", "-q", u.String(), "refs/nimbus/workspaces/main/"+itoa(id))
	if got := strings.TrimSpace(gitRun(t, w.work, "show", "FETCH_HEAD:idea.txt")); got != "unsaved-idea" {
		t.Fatalf("idea.txt in the saved work: %q", got)
	}
}

// waitSettled waits until the ended workspace's usage shows (its settlement).
func (w *world) waitSettled(id int64) apiclient.Workspace {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := w.api.workspace(id)
		if v.CoreSeconds > 0 || time.Now().After(deadline) {
			return v
		}
		time.Sleep(200 * time.Millisecond)
	}
}
