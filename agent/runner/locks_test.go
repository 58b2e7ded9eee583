package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

func TestJobLockWaitsForItsHolderThenReleases(t *testing.T) {
	h := newHarness(t, executor.ModeShell)
	h.srv.HoldLock("deploy", "build #7 (pipeline other)")
	job := script("ship", "echo shipped")
	job.Lock = &protocol.Lock{Key: "deploy", Wait: true, Timeout: protocol.Duration(time.Minute)}
	done := h.start(t, lease("job-lock", plan(serial("s", job))))
	// It asks, then waits; the holder ends.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(string(h.srv.Get("job-lock").Logs[jobID(0, 0)]), "waiting for lock") {
		if time.Now().After(deadline) {
			t.Fatal("the job never said it waits")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.srv.FreeLock("deploy")
	out := <-done
	rec := h.srv.Get("job-lock")
	log := logOf(rec, jobID(0, 0))
	if out.err != nil || out.res.Status != StatusSuccess {
		t.Fatalf("%+v %v: %q", out.res, out.err, log)
	}
	mustContain(t, "the job's log", log, `waiting for lock "deploy" held by build #7 (pipeline other)`, `lock "deploy": taken`, "shipped")
	if holder, held := h.srv.LockHolder("deploy"); held {
		t.Fatalf("the job ended still holding the lock (%s)", holder)
	}
}

func TestBusyLocksFailTheirStageOrJob(t *testing.T) {
	h := newHarness(t, executor.ModeShell)
	h.srv.HoldLock("k", "build #1 (pipeline p)")
	noWait := script("nowait", "echo ran-nowait")
	noWait.Lock = &protocol.Lock{Key: "k"}
	noWait.AllowFailure = true
	timesOut := script("timeout", "echo ran-timeout")
	timesOut.Lock = &protocol.Lock{Key: "k", Wait: true, Timeout: protocol.Duration(100 * time.Millisecond)}
	timesOut.AllowFailure = true
	locked := serial("locked-stage", script("inner", "echo ran-inner"))
	locked.Lock = &protocol.Lock{Key: "k"}
	res, rec := h.run(t, lease("busy-locks", plan(serial("s", noWait, timesOut), locked)))
	if res.Status != StatusFailed || !strings.Contains(res.Reason, `stage "locked-stage": lock "k" is held by build #1`) {
		t.Fatalf("result %+v", res)
	}
	for i, want := range []string{`lock "k" is held by build #1 (pipeline p) (this job "s/nowait" does not wait`, `gave up waiting for lock "k" after 100ms`} {
		if st, _ := status(t, rec, jobID(0, i)); st != StatusFailed || !strings.Contains(logOf(rec, jobID(0, i)), want) || strings.Contains(logOf(rec, jobID(0, i)), "ran-") {
			t.Errorf("job %d: %s %q, want %q", i, st, logOf(rec, jobID(0, i)), want)
		}
	}
	if st, _ := status(t, rec, jobID(1, 0)); st != StatusSkipped {
		t.Errorf("the locked stage's job: %s", st)
	}
}
