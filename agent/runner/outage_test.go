package runner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The server goes away while a job runs, for longer than the API client retries one call (2 s
// in the harness): the job keeps running, and once the server is back every report arrives —
// each event once and in order, the whole log once, the finish with the time the job really
// ended. Reports used to be dropped after the client gave up (an event after two minutes, a log
// after thirty flushes), so an outage longer than that lost job results and log lines.
func TestServerOutageLosesNoReport(t *testing.T) {
	h := newHarness(t, "shell")
	l := lease("outage", plan(serial("s",
		script("a", "echo before; sleep 1; echo during-1; sleep 1; echo during-2"),
		script("b", "echo second-job"))))
	done := h.start(t, l)
	h.srv.WaitFor(t, l.ID, 10*time.Second, "the first line", func(r fakeserver.Lease) bool {
		return strings.Contains(string(r.Logs[jobID(0, 0)]), "before")
	})
	h.srv.SetDown(true)
	down := time.Now()
	// Both jobs finish while the server is away: nothing may wait for it.
	time.Sleep(4 * time.Second)
	h.srv.SetDown(false)
	var o runOutcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end after the server came back")
	}
	if o.err != nil || o.res.Status != StatusSuccess {
		t.Fatalf("outcome %+v", o)
	}
	rec := h.srv.Get(l.ID)
	if got := string(rec.Logs[jobID(0, 0)]); got != "before\nduring-1\nduring-2\n" {
		t.Fatalf("log of the first job %q", got)
	}
	if got := string(rec.Logs[jobID(0, 1)]); got != "second-job\n" {
		t.Fatalf("log of the second job %q", got)
	}
	var kinds []string
	for _, ev := range rec.Events {
		kinds = append(kinds, ev.Kind)
	}
	want := []string{protocol.EventPipelineStarted, protocol.EventJobStarted, protocol.EventJobFinished,
		protocol.EventJobStarted, protocol.EventJobFinished}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v in this order", kinds, want)
	}
	if rec.Finish == nil || rec.Finishs != 1 {
		t.Fatalf("finish %+v sent %d times", rec.Finish, rec.Finishs)
	}
	// The job ended about 2 s after the server went away; the finish came 2 s or more later.
	if end := rec.Finish.FinishedAt; end.IsZero() || end.After(down.Add(4*time.Second)) {
		t.Fatalf("finish reports the end at %v, the server went away at %v and came back 4 s later", end, down)
	}
	if last := rec.Events[len(rec.Events)-1].At; last.After(down.Add(4 * time.Second)) {
		t.Fatalf("the last job_finished carries %v, after the outage ended: not when it happened", last)
	}
}

// Ending the reports context gives up on a server that never comes back: Run returns at once
// instead of retrying for ever, and every process of the run is gone.
func TestAbandonedReportsEndTheRun(t *testing.T) {
	h := newHarness(t, "shell")
	l := lease("abandon", plan(serial("s", script("a", "echo hi"))))
	h.srv.Enqueue(l)
	got, err := h.api.Poll(context.Background(), protocol.PollRequest{FreeCPUs: 1})
	if err != nil || got == nil {
		t.Fatal(err)
	}
	h.srv.SetDown(true)
	reports, abandon := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.runner.Run(context.Background(), reports, got)
		done <- err
	}()
	time.Sleep(time.Second)
	abandon()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a run whose finish never reached the server reported success")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run went on retrying after its reports were abandoned")
	}
}

// A job's first output reaches the server at once, not at the next flush tick: with a one-hour
// flush interval the first line used to wait an hour (a second with the server's default).
// Output that follows right after is batched.
func TestFirstOutputIsSentAtOnce(t *testing.T) {
	api := &countingAPI{appended: make(chan []byte, 16)}
	s := newLogStream(context.Background(), api, "l", 1, time.Hour, func() {}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer func() { s.abandon(); <-s.done }()
	begin := time.Now()
	s.Write([]byte("first line\n"))
	select {
	case got := <-api.appended:
		if string(got) != "first line\n" {
			t.Fatalf("sent %q", got)
		}
		if d := time.Since(begin); d > 200*time.Millisecond {
			t.Fatalf("the first line took %v to be sent", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the first line was not sent within 2 s")
	}
	s.Write([]byte("second\n"))
	select {
	case got := <-api.appended:
		t.Fatalf("output right after a send went at once (%q): nothing is batched under load", got)
	case <-time.After(300 * time.Millisecond):
	}
	s.finish() // the end of the job sends what is left at once
	select {
	case got := <-api.appended:
		if string(got) != "second\n" {
			t.Fatalf("sent %q", got)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the rest was not sent at the job's end")
	}
}

// countingAPI accepts every log append and hands the bytes to the test.
type countingAPI struct {
	mu       sync.Mutex
	offset   int64
	appended chan []byte
}

func (a *countingAPI) Renew(context.Context, string) (protocol.RenewResponse, error) {
	return protocol.RenewResponse{}, nil
}
func (a *countingAPI) Event(context.Context, string, protocol.Event) error          { return nil }
func (a *countingAPI) Finish(context.Context, string, protocol.FinishRequest) error { return nil }
func (a *countingAPI) AppendLog(_ context.Context, _ string, _, offset int64, data []byte) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if offset == a.offset {
		a.offset += int64(len(data))
		a.appended <- append([]byte(nil), data...)
	}
	return a.offset, nil
}

// No user code runs before the server knows it may have: a lease that expires before any job
// started puts the pipeline back in the queue, so a job that ran unreported would run twice.
// The server is away when the first job would start: the job waits for it (its script has not
// run 1.5 s later), then runs once it is back; the second job does not wait again.
func TestFirstJobWaitsUntilTheServerKnowsItStarts(t *testing.T) {
	h := newHarness(t, "shell")
	marker := filepath.Join(t.TempDir(), "ran")
	l := lease("start-known", plan(serial("s",
		script("a", "echo a >> "+marker),
		script("b", "echo b >> "+marker))))
	h.srv.Enqueue(l)
	got, err := h.api.Poll(context.Background(), protocol.PollRequest{FreeCPUs: 1})
	if err != nil || got == nil {
		t.Fatal(err)
	}
	h.srv.SetDown(true)
	done := make(chan runOutcome, 1)
	go func() {
		res, err := h.runner.Run(context.Background(), context.Background(), got)
		done <- runOutcome{res, err}
	}()
	time.Sleep(1500 * time.Millisecond)
	if b, err := os.ReadFile(marker); !os.IsNotExist(err) {
		t.Fatalf("the first job ran while the server could not hear of it: %q %v", b, err)
	}
	h.srv.SetDown(false)
	select {
	case o := <-done:
		if o.err != nil || o.res.Status != StatusSuccess {
			t.Fatalf("outcome %+v", o)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end after the server came back")
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "a\nb\n" {
		t.Fatalf("the jobs' output %q %v, want each once", b, err)
	}
	rec := h.srv.Get(l.ID)
	if st, _ := status(t, rec, jobID(0, 0)); st != StatusSuccess {
		t.Fatalf("job a: %s", st)
	}
}
