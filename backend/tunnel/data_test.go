package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	agenttunnel "github.com/nimbus-build/nimbus/agent/tunnel"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// which is the type of the connection the agent's handler was given, as the "which" kind
// answers it: the tunnel stream, or the test network's connection (a data connection).
func which(t *testing.T, r *replica, agentID string, bulk bool) (string, net.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := r.hub.Open
	if bulk {
		open = r.hub.OpenBulk
	}
	conn, err := open(ctx, agentID, Header{Kind: "which"})
	if err != nil {
		t.Fatalf("open a which stream: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	return string(got), conn
}

const (
	onStream = "*tunnelwire.stream" // internal/tunnelwire's stream: the bytes ride the tunnel
	onData   = "*tunnel.testConn"   // the test network's connection: a data connection
)

func withWhich(c *agenttunnel.Client) {
	c.Register("which", func(_ context.Context, _ Header, conn net.Conn) {
		fmt.Fprintf(conn, "%T", conn)
	})
}

func TestBulkStreamGetsADataConnection(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	a := startAgent(t, ag, r)
	withWhich(a.client)
	waitConnected(t, r, a, nil)

	if got, _ := which(t, r, a.id, false); got != onStream {
		t.Errorf("a plain stream went on %s, want the tunnel (%s)", got, onStream)
	}
	got, conn := which(t, r, a.id, true)
	if got != onData {
		t.Errorf("a bulk stream went on %s, want a data connection (%s)", got, onData)
	}
	// The server's end is the hijacked TCP connection itself, which the kernel can splice.
	if _, ok := conn.(*net.TCPConn); !ok {
		t.Errorf("the server's end of a data connection is a %T, want *net.TCPConn", conn)
	}

	// Bytes both ways, at once and after a half-close, as on a stream.
	ctx := context.Background()
	for range 3 {
		conn, err := r.hub.OpenBulk(ctx, a.id, Header{Kind: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		data := randomBytes(t, 8<<20)
		go func() { conn.Write(data); closeWrite(conn) }()
		back, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || string(back) != string(data) {
			t.Fatalf("8 MiB echo on a data connection: %d bytes back, %v", len(back), err)
		}
	}
	conn, err := r.hub.OpenBulk(ctx, a.id, Header{Kind: "source", Fields: map[string]string{"bytes": itoa(32 << 20)}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, conn)
	conn.Close()
	if err != nil || n != 32<<20 {
		t.Fatalf("32 MiB from the agent: %d bytes, %v", n, err)
	}
	if _, err := r.hub.OpenBulk(ctx, a.id, Header{Kind: "teleport"}); !errors.Is(err, ErrRefused) {
		t.Errorf("a bulk stream of an unknown kind: %v, want the agent's refusal", err)
	}
	r.hub.mu.Lock()
	left := len(r.hub.waiting)
	r.hub.mu.Unlock()
	if left != 0 {
		t.Errorf("%d data tokens still wait after every stream was answered", left)
	}
}

func TestBulkStreamKeepsItsBytesWithoutADataConnection(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	ag := &agents{}
	a, b := newReplica(t, ag, Config{Redis: rdb}), newReplica(t, ag, Config{Redis: rdb})

	t.Run("the data connection cannot be made", func(t *testing.T) {
		var refuse atomic.Bool
		agent := startAgent(t, ag, a, func(c *agenttunnel.Config) {
			dial := c.Dial
			c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if refuse.Load() {
					return nil, errors.New("connection refused (test)")
				}
				return dial(ctx, network, addr)
			}
		})
		withWhich(agent.client)
		waitConnected(t, a, agent, nil)
		refuse.Store(true)
		if got, _ := which(t, a, agent.id, true); got != onStream {
			t.Errorf("with no way to connect, a bulk stream went on %s, want the tunnel", got)
		}
		if err := roundTrip(a, agent.id, randomBytes(t, 1<<20)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the data connection reaches another replica", func(t *testing.T) {
		// A balancer sends the agent's data connection to B, which has no stream waiting
		// for it: B answers 404 and the agent keeps the bytes on A's tunnel.
		agent := startAgent(t, ag, a)
		withWhich(agent.client)
		waitConnected(t, a, agent, nil)
		agent.net.point(b)
		if got, _ := which(t, a, agent.id, true); got != onStream {
			t.Errorf("a data connection that landed on another replica carried the stream (%s)", got)
		}
	})
	t.Run("a forwarded stream is not offered one", func(t *testing.T) {
		agent := startAgent(t, ag, a)
		withWhich(agent.client)
		waitConnected(t, a, agent, nil)
		if got, _ := which(t, b, agent.id, true); got != onStream {
			t.Errorf("a bulk stream forwarded by B went on %s, want the tunnel", got)
		}
	})
}

func TestDataEndpointRefusals(t *testing.T) {
	t.Parallel()
	ag := &agents{}
	r := newReplica(t, ag, Config{})
	mine, other := ag.add("agent-mine"), ag.add("agent-other")
	token, w := r.hub.expectData("agent-mine")
	defer r.hub.forgetData(token)

	do := func(auth, upgrade, data string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, r.srv.URL+protocol.PathTunnelData, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		if upgrade != "" {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", upgrade)
		}
		req.Header.Set(protocol.TunnelDataHeader, data)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, tc := range []struct {
		name                 string
		auth, upgrade, token string
		want                 int
		code                 string
	}{
		{"no agent token", "", protocol.TunnelDataProtocol, token, 401, "unauthenticated"},
		{"unknown agent token", "nba_forged", protocol.TunnelDataProtocol, token, 401, "unauthenticated"},
		{"without the upgrade", mine, "", token, 400, "bad_request"},
		{"a WebSocket upgrade", mine, "websocket", token, 400, "bad_request"},
		{"an unknown data token", mine, protocol.TunnelDataProtocol, "f00d", 404, "not_found"},
		{"another agent's data token", other, protocol.TunnelDataProtocol, token, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(tc.auth, tc.upgrade, tc.token)
			var env struct {
				Error struct{ Code string } `json:"error"`
			}
			json.NewDecoder(resp.Body).Decode(&env)
			if resp.StatusCode != tc.want || env.Error.Code != tc.code {
				t.Fatalf("status %d code %q, want %d %q", resp.StatusCode, env.Error.Code, tc.want, tc.code)
			}
		})
	}
	// None of those spent the token: the right agent still connects, once.
	if resp := do(mine, protocol.TunnelDataProtocol, token); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("the stream's own agent: status %d, want 101", resp.StatusCode)
	}
	select {
	case <-w.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting stream never got the connection")
	}
	w.conn.Close()
	if resp := do(mine, protocol.TunnelDataProtocol, token); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a spent token: status %d, want 404", resp.StatusCode)
	}
}
