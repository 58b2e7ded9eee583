package tunnel_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent"
	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/tunnel"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// TestAssembledServerReachesARealAgent runs the whole server (backend/app) and a real agent
// (package agent) that registered with it: the agent holds its tunnel beside its polls, the
// server authenticates it with its agent token, and a stream reaches it. Nothing serves streams
// on agents yet, so the stream is refused as an unknown kind: the agent's own answer. When the
// agent stops, so does its tunnel.
func TestAssembledServerReachesARealAgent(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, nil, app.Options{})
	ag, err := agent.New(context.Background(), agent.Config{
		ServerURL: srv.URL, Token: srv.App.RegistrationToken, Name: "tunnel-test", CPUs: 1, Tags: []string{"cnb:arch:default"},
		Executor: "shell", WorkDir: t.TempDir(), Version: "test",
		DetectGPUs: func(context.Context) ([]protocol.GPU, error) { return nil, nil },
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ag.Close() })
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})

	// The server's id of the agent is the one its registration got.
	var id string
	var refused *tunnel.RefusedError
	deadline := time.Now().Add(15 * time.Second)
	for {
		if id == "" {
			id = serverID(t, srv, "tunnel-test")
		}
		_, err = srv.App.Tunnel.Open(context.Background(), id, tunnel.Header{Kind: "echo"})
		if errors.As(err, &refused) || time.Now().After(deadline) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the agent stopped: %v", err)
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	if refused == nil || refused.Code != protocol.TunnelUnknownKind {
		t.Fatalf("open a stream to the agent: %v, want its refusal of an unknown kind", err)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("the agent stopped with %v", err)
	}
	done <- nil
	// The server sees the connection close within moments (no keepalive needed).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err = srv.App.Tunnel.Open(context.Background(), id, tunnel.Header{Kind: "echo"})
		if errors.Is(err, tunnel.ErrNoTunnel) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("open to a stopped agent: %v, want ErrNoTunnel", err)
		}
	}
}

// serverID is the id the server gave the agent named name, "" before it registered.
func serverID(t *testing.T, srv *apptest.Server, name string) string {
	t.Helper()
	agents, err := srv.App.Scheduler.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		if a.Name == name {
			return a.ID
		}
	}
	return ""
}
