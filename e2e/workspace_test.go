package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// A workspace opened through the API runs its stages, becomes ready (its agent says so), is
// recycled when nothing is connected for its keepAliveTimeout, runs its endStages and saves
// the uncommitted work to the repo, where the real git client finds it.
func TestWorkspaceOpensRecyclesAndSavesTheWork(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: ` + w.image + ` }
      services:
        - name: vscode
          options: { keepAliveTimeout: 2000 }
      stages:
        - name: edit
          script: echo draft > notes.txt
      endStages:
        - name: bye
          script: echo leaving
`})
	opened := w.api.openWorkspaces("ml", "trainer", "main")
	if opened.Event != "vscode" || len(opened.Pipelines) != 1 {
		t.Fatalf("opened %+v", opened)
	}
	pid := opened.Pipelines[0].ID

	deadline := time.Now().Add(90 * time.Second)
	var readyAt time.Time
	states := map[string]bool{}
	for {
		b := w.build(opened.Number)
		p := b.Pipelines[0]
		if !p.Workspace || p.WorkspaceState == nil {
			t.Fatalf("the pipeline is not a workspace: %+v", p)
		}
		states[*p.WorkspaceState] = true
		if p.ReadyAt != nil && readyAt.IsZero() {
			readyAt = *p.ReadyAt
		}
		if p.Status != "queued" && p.Status != "running" {
			if readyAt.IsZero() {
				t.Fatalf("the workspace ended without being ready: %+v", p)
			}
			if p.Status != "success" || !strings.Contains(p.Reason, "stopped: idle") ||
				!strings.Contains(p.Reason, "work saved to refs/nimbus/workspaces/main/"+itoa(pid)) {
				t.Fatalf("the workspace ended %s (%s)", p.Status, p.Reason)
			}
			if *p.WorkspaceState != "stopped" || !states["ready"] {
				t.Fatalf("workspace states %v, ending %s; want ready, then stopped", states, *p.WorkspaceState)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workspace did not recycle: %+v", p)
		}
		time.Sleep(250 * time.Millisecond)
	}
	full := w.build(opened.Number)
	if log := w.jobLog(full.Pipelines[0].Stages[len(full.Pipelines[0].Stages)-1].Jobs[0].ID); !strings.Contains(log, "leaving") {
		t.Fatalf("the endStages did not run: %q", log)
	}

	// The saved work is in the repo.
	u, _ := url.Parse(w.base + "/ml/trainer.git")
	u.User = url.UserPassword("alice", w.token)
	ref := "refs/nimbus/workspaces/main/" + itoa(pid)
	gitRun(t, w.work, "fetch", "-q", u.String(), ref)
	if got := strings.TrimSpace(gitRun(t, w.work, "show", "FETCH_HEAD:notes.txt")); got != "draft" {
		t.Fatalf("notes.txt in the saved work: %q", got)
	}

	// The next workspace of the branch offers the saved work and restores it into its tree.
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: ` + w.image + ` }
      services: [vscode]
`})
	next := w.openWorkspace(2 * time.Minute)
	nv := w.waitWorkspace(next, 10*time.Second, "offering the saved work", func(v apiclient.Workspace) bool { return len(v.SavedWork) > 0 })
	if nv.SavedWork[0].Ref != ref {
		t.Fatalf("saved work offered: %+v, want %s", nv.SavedWork, ref)
	}
	w.api.restoreWorkspace(next, ref)
	term := w.dialTerminal(next, "")
	term.send("cat notes.txt\n")
	term.expect("draft", 10*time.Second)
}
