package tunnel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

func TestOpenEcho(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	a := startAgent(t, ag, r)
	waitConnected(t, r, a, nil)
	echo(t, r, a.id, "hello, agent")

	// Half-close: everything written before the close comes back, then EOF.
	conn, err := r.hub.Open(context.Background(), a.id, Header{Kind: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "all of it")
	conn.Close() // a yamux stream's Close closes the writing half; reading goes on
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "all of it" {
		t.Fatalf("after a half-close read %q, %v; want the whole echo and EOF", got, err)
	}
}

func TestManyConcurrentStreams(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	a := startAgent(t, ag, r)
	waitConnected(t, r, a, nil)
	const streams, size = 100, 64 << 10
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			if err := roundTrip(r, a.id, randomBytes(t, size)); err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// roundTrip sends data through an echo stream while reading it back, and compares.
func roundTrip(r *replica, agentID string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := r.hub.Open(ctx, agentID, Header{Kind: "echo"})
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(data)
		closeWrite(conn)
		werr <- err
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("echo of %d bytes came back as %d different bytes", len(data), len(got))
	}
	return nil
}

func TestLargeTransfersBothWays(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	a := startAgent(t, ag, r)
	waitConnected(t, r, a, nil)
	const size = 16 << 20

	t.Run("both at once", func(t *testing.T) {
		if err := roundTrip(r, a.id, randomBytes(t, size)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("to the agent", func(t *testing.T) {
		conn, err := r.hub.Open(context.Background(), a.id, Header{Kind: "sink"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.Copy(conn, io.LimitReader(pattern{}, size)); err != nil {
			t.Fatal(err)
		}
		closeWrite(conn)
		got, _ := io.ReadAll(conn)
		if string(got) != itoa(size) {
			t.Fatalf("the agent read %s bytes, want %d", got, size)
		}
	})
	t.Run("from the agent", func(t *testing.T) {
		conn, err := r.hub.Open(context.Background(), a.id, Header{Kind: "source", Fields: map[string]string{"bytes": itoa(size)}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		h := sha256.New()
		n, err := io.Copy(h, conn)
		want := sha256.New()
		io.Copy(want, io.LimitReader(pattern{}, size))
		if err != nil || n != size || !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
			t.Fatalf("read %d bytes (%v), want %d of the pattern", n, err, size)
		}
	})
}

func TestUnknownKindIsRefused(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	a := startAgent(t, ag, r)
	waitConnected(t, r, a, nil)

	_, err := r.hub.Open(context.Background(), a.id, Header{Kind: "teleport"})
	var re *RefusedError
	if !errors.Is(err, ErrRefused) || !errors.As(err, &re) || re.Code != protocol.TunnelUnknownKind {
		t.Fatalf("open a teleport stream: %v, want a refusal with code %s", err, protocol.TunnelUnknownKind)
	}
	if !strings.Contains(re.Message, `"teleport"`) || !strings.Contains(re.Message, "echo") {
		t.Errorf("refusal message %q should name the kind and what the agent serves", re.Message)
	}
	if _, err := r.hub.Open(context.Background(), a.id, Header{}); err == nil {
		t.Error("a header without a kind was sent")
	}
	// The session is unharmed.
	echo(t, r, a.id, "still here")
}

func TestOfflineAgent(t *testing.T) {
	t.Parallel()
	r := newReplica(t, &agents{}, Config{})
	if _, err := r.hub.Open(context.Background(), "agent-nobody", Header{Kind: "echo"}); !errors.Is(err, ErrNoTunnel) {
		t.Fatalf("open to an agent that never connected: %v, want ErrNoTunnel", err)
	}
}

func TestAgentTokenRequired(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	good := ag.add("agent-known")
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": protocol.TunnelSubprotocol}
	for _, tc := range []struct {
		name, auth string
		upgrade    bool
		want       int
	}{
		{"no token", "", true, http.StatusUnauthorized},
		{"unknown token", "Bearer nba_forged", true, http.StatusUnauthorized},
		{"another scheme", "Basic " + good, true, http.StatusUnauthorized},
		{"agent token without the upgrade", "Bearer " + good, false, http.StatusBadRequest},
		{"agent token", "Bearer " + good, true, http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, r.srv.URL+protocol.PathTunnel, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.upgrade {
				for k, v := range upgrade {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusSwitchingProtocols {
				return
			}
			var env struct {
				Error struct{ Code string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Error.Code == "" {
				t.Errorf("the refusal is not the API's error envelope: %v", err)
			}
		})
	}

	// An agent client with a bad token never holds a session.
	bad := startAgent(t, ag, r)
	ag.mu.Lock()
	delete(ag.tokens, "nba_"+bad.id)
	ag.mu.Unlock()
	bad.net.cut()
	time.Sleep(300 * time.Millisecond)
	if s := r.hub.local(bad.id); s != nil && !s.mux.IsClosed() {
		t.Error("an agent whose token was revoked still holds a session after a reconnect")
	}
}

func TestReconnectAfterCut(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	a := startAgent(t, ag, r)
	first := waitConnected(t, r, a, nil)
	// A stream open across the cut fails rather than hangs.
	open, err := r.hub.Open(context.Background(), a.id, Header{Kind: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	a.net.cut()
	open.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(open); errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Errorf("a stream of the cut connection hung: %v", err)
	}
	waitConnected(t, r, a, first)
	echo(t, r, a.id, "back again")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestStaleSessionReplaced(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	// The server pings rarely: the agent is first to notice the dead path, as when it is the
	// agent's side that broke.
	r := newReplica(t, ag, Config{Keepalive: time.Minute, Timeout: time.Minute})
	a := startAgent(t, ag, r, quickPings)
	stale := waitConnected(t, r, a, nil)
	echo(t, r, a.id, "both ends are up") // the agent has read the 101 too

	start := time.Now()
	a.net.freeze(t, stale)
	fresh := waitConnected(t, r, a, stale)
	t.Logf("the agent noticed the dead connection and came back in %s", time.Since(start).Round(time.Millisecond))
	eventually(t, "the stale session closes once the agent is back", func() error {
		if !stale.mux.IsClosed() {
			return errors.New("still open")
		}
		return nil
	})
	if r.hub.local(a.id) != fresh {
		t.Error("the hub does not hold the new session")
	}
	echo(t, r, a.id, "on the new connection")
}

func TestDrainClosesSessions(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	drain := make(chan struct{})
	r := newReplica(t, ag, Config{Draining: func() <-chan struct{} { return drain }})
	a := startAgent(t, ag, r)
	s := waitConnected(t, r, a, nil)
	close(drain)
	eventually(t, "the session closes when the server drains", func() error {
		if !s.mux.IsClosed() {
			return errors.New("still open")
		}
		return nil
	})
	// A draining replica takes no new session: the agent goes elsewhere.
	time.Sleep(100 * time.Millisecond)
	if now := r.hub.local(a.id); now != nil && !now.mux.IsClosed() {
		t.Error("a draining replica accepted a new session")
	}
}

func TestHubCloseEndsSessions(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	a := startAgent(t, ag, r)
	s := waitConnected(t, r, a, nil)
	r.hub.Close()
	if !s.mux.IsClosed() {
		t.Error("Close left a session open")
	}
	if _, err := r.hub.Open(context.Background(), a.id, Header{Kind: "echo"}); !errors.Is(err, ErrNoTunnel) {
		t.Errorf("open after Close: %v, want ErrNoTunnel", err)
	}
}
