package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A cancel reaches the agent through the control long-poll at once. It used to wait for the
// next renewal: with the 10 s heartbeat the server dictates here, about 9 s on average.
func TestCancelArrivesThroughTheControlPollAtOnce(t *testing.T) {
	srv := fakeserver.New(t)
	srv.Intervals.HeartbeatInterval = protocol.Duration(10 * time.Second)
	srv.Enqueue(shellLease("long", 1, "echo started; sleep 300"))
	_, stop := start(t, agentConfig(t, srv))
	waitStarted(t, srv, "long")
	begin := time.Now()
	srv.CancelLease("long", "cancelled by alice")
	rec := srv.WaitFinished(t, "long", 5*time.Second)
	took := time.Since(begin)
	if rec.Finish.Status != "cancelled" {
		t.Fatalf("finish %+v", rec.Finish)
	}
	if took > time.Second {
		t.Fatalf("the cancelled pipeline took %v to finish", took)
	}
	if rec.Renews > 0 {
		t.Fatalf("%d renewals happened: the cancel may have come that way", rec.Renews)
	}
	t.Logf("cancel to finish: %v", took.Round(time.Millisecond))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Told to stop while the server is unreachable, the agent exits within its stop timeout. It
// used to retry the pipeline's reports for about two minutes, far past a service manager's 30 s.
func TestStopIsBoundedWhenTheServerIsAway(t *testing.T) {
	srv := fakeserver.New(t)
	srv.Enqueue(shellLease("long", 1, "echo started; sleep 300"))
	cfg := agentConfig(t, srv)
	cfg.StopTimeout = 2 * time.Second
	cfg.Retry = client.Retry{} // the real backoff: each call retries for a minute
	_, stop := start(t, cfg)
	waitStarted(t, srv, "long")
	srv.SetDown(true)
	begin := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 4*time.Second {
		t.Fatalf("stopping took %v with a 2 s stop timeout", took)
	}
	if srv.Get("long").Finish != nil {
		t.Fatal("a server that was down recorded a finish")
	}
}

// A graceful stop deregisters the agent, so the server shows it offline at once; running
// pipelines get the grace period to end by themselves.
func TestStopDeregistersAndHonoursTheGrace(t *testing.T) {
	srv := fakeserver.New(t)
	srv.Enqueue(shellLease("short", 1, "echo started; sleep 1; echo done"))
	cfg := agentConfig(t, srv)
	cfg.StopGrace = 20 * time.Second
	_, stop := start(t, cfg)
	waitStarted(t, srv, "short")
	begin := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("stopping took %v though the pipeline ended after 1 s", took)
	}
	if f := srv.Get("short").Finish; f == nil || f.Status != "success" {
		t.Fatalf("the pipeline was not let finish within the grace: %+v", f)
	}
	if srv.Deregistered() != 1 {
		t.Fatalf("%d deregistrations", srv.Deregistered())
	}
}

// waitStarted waits until the lease's first job has printed "started".
func waitStarted(t *testing.T, srv *fakeserver.Server, lease string) {
	t.Helper()
	srv.WaitFor(t, lease, 10*time.Second, "output", func(r fakeserver.Lease) bool {
		return strings.Contains(string(r.Logs[1]), "started")
	})
}
