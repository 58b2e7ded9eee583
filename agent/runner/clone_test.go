package runner

import (
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

func TestCloneChecksOutTheCommitWithTheJobToken(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		url, commit := h.srv.NewRepo(t, "acme/app", map[string]string{"hello.txt": "hi from git\n", "dir/b.txt": "b\n"})
		p := plan(serial("s", script("look", `cat hello.txt dir/b.txt; test -e later.txt && echo TIP-CHECKED-OUT; grep -ci extraheader .git/config; echo "$(git rev-parse HEAD 2>/dev/null)"`)))
		p.Git.Enable = true
		l := lease("clone", p)
		l.CloneURL, l.Commit, l.JobToken = url, commit, "job-token-clone-1"
		res, rec := h.run(t, l)
		if res.Status != StatusSuccess {
			t.Fatalf("result %+v", res)
		}
		got := logOf(rec, jobID(0, 0))
		if !strings.HasPrefix(got, "hi from git\nb\n0\n") {
			t.Fatalf("job log %q", got)
		}
		if h.image == "" && !strings.Contains(got, commit) {
			t.Fatalf("HEAD is not the leased commit %s: %q", commit, got)
		}
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(fakeserver.GitUser+":"+l.JobToken))
		sawToken := false
		for _, a := range h.srv.GitAuth() {
			sawToken = sawToken || a == want
		}
		if !sawToken {
			t.Fatalf("git never presented the job token: %q", h.srv.GitAuth())
		}
		if started := rec.EventsOf(protocol.EventPipelineStarted, 0); len(started) != 1 {
			t.Fatalf("%d pipeline_started events", len(started))
		}
	})
}

func TestCloneWithABadTokenFailsBeforeUserCode(t *testing.T) {
	h := newHarness(t, "shell")
	url, commit := h.srv.NewRepo(t, "acme/private", map[string]string{"a": "a"})
	p := plan(serial("s", script("never", "echo must-not-run")))
	p.Git.Enable = true
	l := lease("clone-denied", p)
	l.CloneURL, l.Commit, l.JobToken = url, commit, "" // no token: the server refuses
	res, rec := h.run(t, l)
	if res.Status != StatusFailed || !strings.Contains(res.Reason, "clone") {
		t.Fatalf("result %+v", res)
	}
	if len(rec.EventsOf(protocol.EventPipelineStarted, 0)) != 0 || len(rec.EventsOf(protocol.EventJobStarted, jobID(0, 0))) != 0 {
		t.Fatalf("user code was reported started after a failed clone: %+v", rec.Events)
	}
}

// A server that is briefly unreachable (restarting under a running pipeline) does not fail the
// clone: transient git failures are retried.
func TestCloneRetriesWhileTheServerIsDown(t *testing.T) {
	h := newHarness(t, "shell")
	real, commit := h.srv.NewRepo(t, "acme/flaky", map[string]string{"a.txt": "here\n"})
	target, err := neturl.Parse(real)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here for now: connection refused
	go func() {
		time.Sleep(1500 * time.Millisecond)
		l2, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		proxy := httputil.NewSingleHostReverseProxy(&neturl.URL{Scheme: target.Scheme, Host: target.Host})
		srv := &http.Server{Handler: proxy}
		go srv.Serve(l2)
		t.Cleanup(func() { srv.Close() })
	}()
	p := plan(serial("s", script("look", "cat a.txt")))
	p.Git.Enable = true
	l := lease("clone-flaky", p)
	l.CloneURL, l.Commit, l.JobToken = "http://"+addr+target.Path, commit, "job-token-flaky"
	start := time.Now()
	res, rec := h.run(t, l)
	if res.Status != StatusSuccess || !strings.Contains(logOf(rec, jobID(0, 0)), "here") {
		t.Fatalf("result %+v log %q", res, logOf(rec, jobID(0, 0)))
	}
	if time.Since(start) < time.Second {
		t.Fatal("the clone cannot have succeeded before the server came up")
	}
}
