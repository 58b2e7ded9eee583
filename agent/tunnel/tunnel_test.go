package tunnel

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	yamux "github.com/libp2p/go-yamux/v5"

	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/tunnelwire"
)

// fakeServer is the server's end of the tunnel reduced to what the client sees: the handshake
// with a token check, and a yamux session per connection, handed to the test.
type fakeServer struct {
	srv      *httptest.Server
	token    atomic.Value // string: the token it accepts
	sessions chan *yamux.Session
	attempts atomic.Int64
	status   atomic.Int64 // answered instead of upgrading when not 0
}

func newFakeServer(t *testing.T, token string) *fakeServer {
	t.Helper()
	f := &fakeServer{sessions: make(chan *yamux.Session, 16)}
	f.token.Store(token)
	up := websocket.Upgrader{Subprotocols: []string{protocol.TunnelSubprotocol}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.attempts.Add(1)
		if r.URL.Path != protocol.PathTunnel {
			http.NotFound(w, r)
			return
		}
		if st := f.status.Load(); st != 0 {
			http.Error(w, `{"error":{"code":"x","message":"refused by the test"}}`, int(st))
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+f.token.Load().(string) {
			http.Error(w, `{"error":{"code":"unauthenticated","message":"unknown agent token"}}`, http.StatusUnauthorized)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mux, err := yamux.Server(tunnelwire.WebSocketConn(ws, false), tunnelwire.MuxConfig(time.Second, time.Second, slog.New(slog.DiscardHandler)), nil)
		if err != nil {
			t.Error(err)
			return
		}
		f.sessions <- mux
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// session waits for the client's next connection.
func (f *fakeServer) session(t *testing.T) *yamux.Session {
	t.Helper()
	select {
	case s := <-f.sessions:
		t.Cleanup(func() { s.Close() })
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not connect")
		return nil
	}
}

// run starts a client of f with the token function tok until the test ends.
func run(t *testing.T, f *fakeServer, tok func() string, register func(*Client)) *Client {
	t.Helper()
	c, err := New(Config{ServerURL: f.srv.URL, Token: tok, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if register != nil {
		register(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

// open opens a stream on s, writes hdr and returns the agent's reply.
func open(t *testing.T, s *yamux.Session, hdr any) (net.Conn, protocol.TunnelReply) {
	t.Helper()
	raw, err := s.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := tunnelwire.Stream(raw)
	st.SetDeadline(time.Now().Add(5 * time.Second))
	switch h := hdr.(type) {
	case string:
		io.WriteString(st, h)
	default:
		if err := protocol.WriteTunnelLine(st, h); err != nil {
			t.Fatal(err)
		}
	}
	var reply protocol.TunnelReply
	if err := protocol.ReadTunnelLine(st, &reply); err != nil {
		t.Fatalf("read the reply: %v", err)
	}
	return st, reply
}

func TestStreamsAreDispatchedByKind(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, "nba_a")
	got := make(chan Header, 1)
	run(t, f, func() string { return "nba_a" }, func(c *Client) {
		c.Register("upper", func(_ context.Context, h Header, conn net.Conn) {
			got <- h
			b, _ := io.ReadAll(conn)
			conn.Write(bytes.ToUpper(b))
		})
		c.Register("other", func(context.Context, Header, net.Conn) {})
	})
	s := f.session(t)

	st, reply := open(t, s, Header{Kind: "upper", Fields: map[string]string{"cols": "80"}})
	if !reply.Accepted {
		t.Fatalf("reply %+v, want accepted", reply)
	}
	// Bytes right after the header belong to the handler, none are lost to the header's read.
	io.WriteString(st, "raw bytes")
	st.Close()
	if b, _ := io.ReadAll(st); string(b) != "RAW BYTES" {
		t.Errorf("the handler answered %q", b)
	}
	if h := <-got; h.Fields["cols"] != "80" {
		t.Errorf("the handler got header %+v", h)
	}

	for _, tc := range []struct {
		name string
		hdr  any
		code string
	}{
		{"unknown kind", Header{Kind: "teleport"}, protocol.TunnelUnknownKind},
		{"not JSON", "hello\n", protocol.TunnelBadHeader},
		{"no end of line", strings.Repeat("x", protocol.MaxTunnelLine+1), protocol.TunnelBadHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, reply := open(t, s, tc.hdr)
			if reply.Accepted || reply.Code != tc.code || reply.Message == "" {
				t.Fatalf("reply %+v, want a refusal with code %s and a message", reply, tc.code)
			}
		})
	}
	_, reply = open(t, s, Header{Kind: "teleport"})
	if !strings.Contains(reply.Message, `"teleport"`) || !strings.Contains(reply.Message, "other, upper") {
		t.Errorf("refusal %q should name the kind and the kinds served", reply.Message)
	}
}

func TestReconnectsWithTheCurrentToken(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, "nba_first")
	var mu sync.Mutex
	token := "nba_first"
	run(t, f, func() string {
		mu.Lock()
		defer mu.Unlock()
		return token
	}, nil)
	first := f.session(t)

	// The agent registers again (a new token) and its connection breaks.
	mu.Lock()
	token = "nba_second"
	mu.Unlock()
	f.token.Store("nba_second")
	first.Close()
	second := f.session(t)
	if _, reply := open(t, second, Header{Kind: "nothing"}); reply.Code != protocol.TunnelUnknownKind {
		t.Errorf("the new session does not answer: %+v", reply)
	}
}

func TestRefusedHandshakeWaitsTheLongestBackoff(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, "nba_good")
	run(t, f, func() string { return "nba_revoked" }, nil)
	time.Sleep(700 * time.Millisecond)
	// 200 ms ± 20% between attempts: at most 5 in 700 ms (a hot loop would make hundreds).
	if n := f.attempts.Load(); n < 2 || n > 5 {
		t.Errorf("%d attempts with a refused token in 700 ms, want 2 to 5", n)
	}
}

func TestServerErrorsBackOff(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, "nba_a")
	f.status.Store(http.StatusServiceUnavailable)
	run(t, f, func() string { return "nba_a" }, nil)
	time.Sleep(400 * time.Millisecond)
	// 10, 20, 40, 80, 160 ms…: a handful of attempts, then the server is back.
	if n := f.attempts.Load(); n < 3 || n > 9 {
		t.Errorf("%d attempts against a 503 in 400 ms, want a doubling backoff", n)
	}
	f.status.Store(0)
	f.session(t)
}

func TestRunEndsHandlers(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, "nba_a")
	c, err := New(Config{ServerURL: f.srv.URL, Token: func() string { return "nba_a" }})
	if err != nil {
		t.Fatal(err)
	}
	started, ended := make(chan struct{}), make(chan struct{})
	c.Register("wait", func(ctx context.Context, _ Header, _ net.Conn) {
		close(started)
		<-ctx.Done()
		close(ended)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	s := f.session(t)
	open(t, s, Header{Kind: "wait"})
	<-started
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	select {
	case <-ended:
	default:
		t.Error("Run returned before its handler did")
	}
}

func TestNewChecksTheConfig(t *testing.T) {
	t.Parallel()
	tok := func() string { return "" }
	for _, cfg := range []Config{{ServerURL: "ftp://x", Token: tok}, {ServerURL: "http://x"}, {ServerURL: "x", Token: tok}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
	c, err := New(Config{ServerURL: "https://nimbus.example/prefix/", Token: tok})
	if err != nil || c.url != "wss://nimbus.example/prefix"+protocol.PathTunnel {
		t.Errorf("url %q, %v", c.url, err)
	}
}

func TestNextWait(t *testing.T) {
	t.Parallel()
	c, _ := New(Config{ServerURL: "http://x", Token: func() string { return "" }, MinBackoff: time.Second, MaxBackoff: 8 * time.Second})
	within := func(d, want time.Duration) bool { return d >= want*8/10 && d <= want*12/10 }
	for _, tc := range []struct {
		name   string
		prev   time.Duration
		err    error
		lasted time.Duration
		want   time.Duration
	}{
		{"first failure", 0, errors.New("refused"), 0, time.Second},
		{"doubles", 2 * time.Second, errors.New("refused"), 0, 4 * time.Second},
		{"capped", 8 * time.Second, errors.New("refused"), 0, 8 * time.Second},
		{"a long session starts over", 8 * time.Second, errSessionEnded, time.Minute, time.Second},
		{"401 waits the cap", 0, &StatusError{Status: 401}, 0, 8 * time.Second},
		{"404 waits the cap", 0, &StatusError{Status: 404}, 0, 8 * time.Second},
		{"429 backs off as usual", 0, &StatusError{Status: 429}, 0, time.Second},
		{"503 backs off as usual", time.Second, &StatusError{Status: 503}, 0, 2 * time.Second},
	} {
		if got := c.nextWait(tc.prev, tc.err, tc.lasted); !within(got, tc.want) {
			t.Errorf("%s: %s, want %s ± 20%%", tc.name, got, tc.want)
		}
	}
}

func TestTunnelLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := protocol.WriteTunnelLine(&buf, Header{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("raw")
	var h Header
	if err := protocol.ReadTunnelLine(&buf, &h); err != nil || h.Kind != "k" {
		t.Fatalf("read %+v, %v", h, err)
	}
	if buf.String() != "raw" {
		t.Errorf("the line's read took %q too", strings.TrimSuffix("raw", buf.String()))
	}
	if err := protocol.ReadTunnelLine(strings.NewReader(`{"kind":"k"`), &h); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut line: %v, want io.ErrUnexpectedEOF", err)
	}
	if err := protocol.ReadTunnelLine(strings.NewReader(strings.Repeat(" ", protocol.MaxTunnelLine)+"\n"), &h); !errors.Is(err, protocol.ErrTunnelLineTooLong) {
		t.Errorf("an overlong line: %v", err)
	}
	if err := protocol.WriteTunnelLine(io.Discard, Header{Kind: strings.Repeat("k", protocol.MaxTunnelLine)}); err == nil {
		t.Error("an overlong header was written")
	}
}
