package runner

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

func TestParseKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want time.Duration
		ok   bool
	}{
		{float64(600000), 10 * time.Minute, true}, {"600000", 10 * time.Minute, true}, {"18h", 18 * time.Hour, true},
		{"30m", 30 * time.Minute, true}, {"soon", 0, false}, {true, 0, false},
	} {
		got, err := parseKeepAlive(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseKeepAlive(%v) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// workspacePlan is a workspace pipeline with a short keepAliveTimeout.
func workspacePlan(keepAliveMs int, stages ...protocol.Stage) protocol.Plan {
	p := plan(stages...)
	p.Workspace = true
	p.Ref = "main"
	p.Services = []protocol.Service{{Name: "vscode", Options: map[string]any{"keepAliveTimeout": float64(keepAliveMs)}}}
	return p
}

// An idle workspace stops after keepAliveTimeout, runs its endStages and saves the uncommitted
// work to the repo; an open connection keeps it up.
func TestWorkspaceIdleStopSavesTheWork(t *testing.T) {
	h := newHarness(t, "shell")
	url, commit := h.srv.NewRepo(t, "acme/ws", map[string]string{"a.txt": "committed\n"})
	p := workspacePlan(400, serial("edit", script("edit", "echo draft > notes.txt && echo changed >> a.txt")))
	p.EndStages = []protocol.Stage{serial("bye", script("bye", "echo end-stage-ran"))}
	p.Git.Enable = true
	l := lease("ws-idle", p)
	l.CloneURL, l.Commit, l.JobToken, l.PipelineID = url, commit, "job-token-ws", 7
	done := h.start(t, l)

	// Connected for a while longer than the keep-alive: the workspace stays.
	var release func()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, r, err := h.runner.Attach(l.ID)
		if err == nil {
			release = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workspace never became ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(900 * time.Millisecond)
	select {
	case o := <-done:
		t.Fatalf("the workspace ended while a connection was open: %+v", o.res)
	default:
	}
	began := time.Now()
	release()
	var o runOutcome
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle workspace did not stop")
	}
	if idle := time.Since(began); idle < 400*time.Millisecond {
		t.Fatalf("stopped %v after the last connection closed, before the keep-alive", idle)
	}
	if o.err != nil || o.res.Status != StatusSuccess || !strings.Contains(o.res.Reason, "stopped: idle") ||
		!strings.Contains(o.res.Reason, "work saved to refs/nimbus/workspaces/main/7") {
		t.Fatalf("result %+v, %v", o.res, o.err)
	}
	rec := h.srv.Get(l.ID)
	if len(rec.EventsOf(protocol.EventWorkspaceReady, 0)) != 1 {
		t.Fatalf("events %+v: want one workspace_ready", rec.Events)
	}
	if !strings.Contains(logOf(rec, jobID(1, 0)), "end-stage-ran") {
		t.Fatalf("the endStages did not run before the workspace went")
	}
	ref := "refs/nimbus/workspaces/main/7"
	if got, ok := h.srv.RepoFile(t, "acme/ws", ref, "notes.txt"); !ok || got != "draft\n" {
		t.Fatalf("the saved work lacks the new file: %q %v", got, ok)
	}
	if got, _ := h.srv.RepoFile(t, "acme/ws", ref, "a.txt"); got != "committed\nchanged\n" {
		t.Fatalf("the saved work lacks the change: %q", got)
	}
}

// A stop from the server ends a ready workspace gracefully: endStages run, the result is
// stopped, not cancelled.
func TestWorkspaceStopIsGraceful(t *testing.T) {
	h := newHarness(t, "shell")
	p := workspacePlan(600000, serial("s", script("s", "echo up")))
	p.EndStages = []protocol.Stage{serial("bye", script("bye", "echo end-stage-ran"))}
	l := lease("ws-stop", p)
	done := h.start(t, l)
	deadline := time.Now().Add(10 * time.Second)
	for h.runner.KeepAlive(l.ID) != nil || len(h.srv.Get(l.ID).EventsOf(protocol.EventWorkspaceReady, 0)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the workspace never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !h.runner.Stop(l.ID, "the user stopped it") {
		t.Fatal("Stop found no run")
	}
	h.runner.Stop(l.ID, "the user stopped it") // the control long-poll may say it again
	select {
	case o := <-done:
		if o.err != nil || o.res.Status != StatusSuccess || !strings.Contains(o.res.Reason, "stopped: the user stopped it") {
			t.Fatalf("result %+v, %v", o.res, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stopped workspace did not end")
	}
	if !strings.Contains(logOf(h.srv.Get(l.ID), jobID(1, 0)), "end-stage-ran") {
		t.Fatal("the endStages did not run")
	}
}

// With vscode:go the workspace is ready only when the task is reached; a failure before it ends
// the workspace.
func TestWorkspaceFailureBeforeVscodeGoEndsIt(t *testing.T) {
	h := newHarness(t, "shell")
	gate := protocol.Job{Key: "go", Name: "go", Kind: protocol.KindBuiltin, Type: "vscode:go"}
	p := workspacePlan(600000, serial("setup", script("setup", "exit 3")), serial("ready", gate))
	res, rec := h.run(t, lease("ws-gated", p))
	if res.Status != StatusFailed {
		t.Fatalf("result %+v", res)
	}
	if len(rec.EventsOf(protocol.EventWorkspaceReady, 0)) != 0 {
		t.Fatal("a workspace that failed before vscode:go was reported ready")
	}
}

// A workspace on the Docker executor has a container that stays up: a terminal enters it and
// sees the workspace; it is gone when the workspace stops.
func TestWorkspaceContainerTakesATerminal(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	p := workspacePlan(600000, serial("s", script("s", "echo from-the-stages > made.txt")))
	p.Image = &protocol.Image{Name: h.image}
	l := lease("ws-docker", p)
	done := h.start(t, l)
	var c *executor.Container
	var release func()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if c, release, err = h.runner.Attach(l.ID); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workspace never became ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c == nil {
		t.Fatal("a Docker workspace has no container")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The stages run beside the environment: wait for their file, then read it from a shell.
	for len(h.srv.Get(l.ID).EventsOf(protocol.EventJobFinished, jobID(0, 0))) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the stage did not finish")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sess, err := c.Exec(ctx, executor.ExecSpec{Cmd: []string{"sh"}, TTY: true, Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(sess, "cat made.txt; exit\n")
	out, _ := io.ReadAll(sess)
	if !strings.Contains(string(out), "from-the-stages") {
		t.Fatalf("the terminal saw %q", out)
	}
	sess.Close()
	release()
	if !h.runner.Stop(l.ID, "done") {
		t.Fatal("no run to stop")
	}
	select {
	case o := <-done:
		if o.res.Status != StatusSuccess {
			t.Fatalf("result %+v", o.res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the workspace did not stop")
	}
	if n := h.containers(t, l.ID); n != 0 {
		t.Fatalf("%d containers of the workspace are left", n)
	}
}
