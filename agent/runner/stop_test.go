package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// waitStarted waits until the job reported it started and printed its first line.
func waitStarted(t *testing.T, h *harness, leaseID string, id int64) {
	t.Helper()
	h.srv.WaitFor(t, leaseID, 30*time.Second, "job start", func(l fakeserver.Lease) bool {
		return len(l.EventsOf(protocol.EventJobStarted, id)) == 1 && strings.Contains(string(l.Logs[id]), "started")
	})
}

func TestCancelStopsContainersWithinFiveSeconds(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		p := plan(parallel("long", script("a", "echo started; sleep 300 & wait"), script("b", "echo started; sleep 300")),
			serial("later", script("never", "echo must-not-run")))
		p.FailStages = []protocol.Stage{serial("fail", script("f", "echo must-not-run"))}
		p.EndStages = []protocol.Stage{serial("end", script("e", "echo must-not-run"))}
		l := lease("cancel", p)
		done := h.start(t, l)
		waitStarted(t, h, l.ID, jobID(0, 0))
		waitStarted(t, h, l.ID, jobID(0, 1))
		if n := h.containers(t, l.ID); h.docker != nil && n != 2 {
			t.Fatalf("%d containers running, want 2", n)
		}
		cancelledAt := time.Now()
		h.srv.CancelLease(l.ID, "cancelled by alice")
		var o runOutcome
		select {
		case o = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the run did not end 10 s after the cancel")
		}
		// The cancel reaches the agent with the next heartbeat (200 ms here); from there the
		// containers must be gone within 5 s.
		took := time.Since(cancelledAt)
		t.Logf("run ended %v after the cancel", took)
		if took > 5*time.Second+h.srv.Intervals.HeartbeatInterval.Std() {
			t.Fatalf("took %v", took)
		}
		if n := h.containers(t, l.ID); n != 0 {
			t.Fatalf("%d containers left after the cancel", n)
		}
		if o.err != nil || o.res.Status != StatusCancelled || o.res.Reason != "cancelled by alice" {
			t.Fatalf("outcome %+v", o)
		}
		rec := h.srv.Get(l.ID)
		if rec.Finish == nil || rec.Finish.Status != StatusCancelled {
			t.Fatalf("finish %+v", rec.Finish)
		}
		for _, id := range []int64{jobID(0, 0), jobID(0, 1)} {
			if st, _ := status(t, rec, id); st != StatusCancelled {
				t.Fatalf("job %d is %s", id, st)
			}
		}
		for _, id := range []int64{jobID(1, 0), jobID(2, 0), jobID(3, 0)} {
			if len(rec.EventsOf(protocol.EventJobStarted, id)) != 0 || strings.Contains(logOf(rec, id), "must-not-run") {
				t.Fatalf("job %d ran after the cancel", id)
			}
		}
	})
}

func TestLostLeaseStopsWorkAndReportsNothing(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		p := plan(serial("long", script("a", "echo started; sleep 300")), serial("later", script("never", "echo x")))
		p.EndStages = []protocol.Stage{serial("end", script("e", "echo must-not-run"))}
		l := lease("lost", p)
		done := h.start(t, l)
		waitStarted(t, h, l.ID, jobID(0, 0))
		before := len(h.srv.Get(l.ID).Events)
		lostAt := time.Now()
		h.srv.LoseLease(l.ID)
		var o runOutcome
		select {
		case o = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the run did not end 10 s after the lease was lost")
		}
		t.Logf("run ended %v after the lease was lost", time.Since(lostAt))
		if time.Since(lostAt) > 5*time.Second+h.srv.Intervals.HeartbeatInterval.Std() {
			t.Fatalf("took %v", time.Since(lostAt))
		}
		if !errors.Is(o.err, client.ErrLeaseLost) {
			t.Fatalf("outcome %+v", o)
		}
		if n := h.containers(t, l.ID); n != 0 {
			t.Fatalf("%d containers left", n)
		}
		rec := h.srv.Get(l.ID)
		if rec.Finish != nil || len(rec.Events) != before {
			t.Fatalf("reports after the loss: finish %+v, events %d -> %d", rec.Finish, before, len(rec.Events))
		}
	})
}

func TestJobTimeoutFailsTheJob(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		slow := script("slow", "echo started; sleep 300")
		slow.Timeout = protocol.Duration(time.Second)
		start := time.Now()
		p := plan(serial("s", slow, script("after", "echo must-not-run")))
		p.EndStages = []protocol.Stage{serial("end", script("e", "echo end ran"))}
		res, rec := h.run(t, lease("timeout", p))
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("a 1 s timeout took %v", took)
		}
		if res.Status != StatusFailed || !strings.Contains(res.Reason, "timed out after 1s") {
			t.Fatalf("result %+v", res)
		}
		if st, _ := status(t, rec, jobID(0, 0)); st != StatusFailed || !strings.Contains(logOf(rec, jobID(0, 0)), "[nimbus] timed out after 1s") {
			t.Fatalf("job: %s %q", st, logOf(rec, jobID(0, 0)))
		}
		if logOf(rec, jobID(1, 0)) != "end ran\n" {
			t.Fatalf("the endStage did not run after a job timeout: %q", logOf(rec, jobID(1, 0)))
		}
		if n := h.containers(t, "timeout"); n != 0 {
			t.Fatalf("%d containers left", n)
		}
	})
}

func TestNoOutputTimeout(t *testing.T) {
	h := newHarness(t, "shell")
	p := plan(serial("s", script("quiet", "echo started; sleep 300")))
	p.Runner.NoOutputTimeout = protocol.Duration(500 * time.Millisecond)
	res, rec := h.run(t, lease("quiet", p))
	if res.Status != StatusFailed || !strings.Contains(logOf(rec, jobID(0, 0)), "no output for 500ms") {
		t.Fatalf("result %+v log %q", res, logOf(rec, jobID(0, 0)))
	}
}

func TestPipelineMaxDurationIsAHardCap(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		p := plan(serial("s", script("long", "echo started; sleep 300")))
		p.Runner.MaxDuration = protocol.Duration(time.Second)
		p.EndStages = []protocol.Stage{serial("end", script("e", "echo must-not-run"))}
		start := time.Now()
		res, rec := h.run(t, lease("cap", p))
		if time.Since(start) > 10*time.Second {
			t.Fatalf("a 1 s cap took %v", time.Since(start))
		}
		if res.Status != StatusFailed || !strings.Contains(res.Reason, "maximum of 1s") {
			t.Fatalf("result %+v", res)
		}
		if st, _ := status(t, rec, jobID(0, 0)); st != StatusFailed {
			t.Fatalf("job %s", st)
		}
		if strings.Contains(logOf(rec, jobID(1, 0)), "must-not-run") {
			t.Fatal("an endStage ran past the hard cap")
		}
	})
}

func TestAgentStopReportsTheRunFailed(t *testing.T) {
	h := newHarness(t, "shell")
	l := lease("agent-stop", plan(serial("s", script("long", "echo started; sleep 300"))))
	h.srv.Enqueue(l)
	got, err := h.api.Poll(context.Background(), protocol.PollRequest{FreeCPUs: 1})
	if err != nil || got == nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan runOutcome, 1)
	go func() {
		res, err := h.runner.Run(ctx, context.Background(), got)
		done <- runOutcome{res, err}
	}()
	waitStarted(t, h, l.ID, jobID(0, 0))
	cancel()
	o := <-done
	if o.err != nil || o.res.Status != StatusFailed || !strings.HasPrefix(o.res.Reason, "agent_stopped") {
		t.Fatalf("outcome %+v", o)
	}
	if f := h.srv.Get(l.ID).Finish; f == nil || f.Status != StatusFailed {
		t.Fatalf("finish %+v", f)
	}
}
