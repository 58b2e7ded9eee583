package tunnel

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	agenttunnel "github.com/nimbus-build/nimbus/agent/tunnel"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// The tests run real agent clients (agent/tunnel) against hubs behind real HTTP servers, over
// loopback TCP connections the test can cut or freeze.

// testSecret is the NIMBUS_SECRET_KEY every replica of a test shares.
var testSecret = []byte("0123456789abcdef0123456789abcdef")

// replica is one hub behind its own HTTP server.
type replica struct {
	hub *Hub
	srv *httptest.Server
}

// agents maps tokens to agent ids, as the scheduler does.
type agents struct {
	mu     sync.Mutex
	tokens map[string]string
}

func (a *agents) add(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tokens == nil {
		a.tokens = map[string]string{}
	}
	tok := "nba_" + id
	a.tokens[tok] = id
	return tok
}

func (a *agents) authenticate(_ context.Context, token string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if id, ok := a.tokens[token]; ok {
		return id, nil
	}
	return "", fault.Unauthenticated("unknown agent token")
}

// newReplica starts a hub (cfg's Authenticate, Secret and InternalURL are filled in) behind an
// HTTP server.
func newReplica(t testing.TB, ag *agents, cfg Config) *replica {
	t.Helper()
	cfg.Authenticate = ag.authenticate
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	if cfg.Log == nil {
		cfg.Log = testLog()
	}
	hub, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	hub.Routes(e, e.Group("/api/v1"))
	srv := httptest.NewServer(e)
	if err := hub.SetInternalURL(srv.URL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hub.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return &replica{hub: hub, srv: srv}
}

func testLog() *slog.Logger {
	if os.Getenv("NIMBUS_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// sharedRedis is the test Redis, with the keys of this test's agents removed afterwards.
func sharedRedis(t testing.TB) redis.UniversalClient {
	t.Helper()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at %s: %v", opts.Addr, err)
	}
	return rdb
}

// network is how a test agent reaches the servers: every connection goes to the current
// target, and the test can cut (close) or freeze (stop forwarding, leaving the server's end
// open) the connections made so far.
type network struct {
	target atomic.Value // string: host:port
	mu     sync.Mutex
	conns  []*testConn
}

func newNetwork(target *replica) *network {
	n := &network{}
	n.point(target)
	return n
}

// point sends the next connections to r.
func (n *network) point(r *replica) { n.target.Store(r.srv.Listener.Addr().String()) }

// dial connects to the current target, whatever address is asked for.
func (n *network) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", n.target.Load().(string))
	if err != nil {
		return nil, err
	}
	tc := &testConn{Conn: c}
	n.mu.Lock()
	n.conns = append(n.conns, tc)
	n.mu.Unlock()
	return tc, nil
}

// cut closes every connection made so far, as a broken network does.
func (n *network) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		c.Conn.Close()
	}
	n.conns = nil
}

// freeze stops the agent's connection of the server's session s without closing the server's
// end: the agent's writes hang and its reads see nothing, as when a path breaks silently.
// Closing a frozen connection on the agent's side leaves the server's end open until the test
// ends.
func (n *network) freeze(t testing.TB, s *session) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		if c.LocalAddr().String() == s.mux.RemoteAddr().String() {
			c.freeze()
			t.Cleanup(func() { c.Conn.Close() })
			return
		}
	}
	t.Fatalf("no connection of the agent's at %s", s.mux.RemoteAddr())
}

// testConn is the agent's end of one connection. Frozen, it still honours deadlines, as a
// socket does.
type testConn struct {
	net.Conn
	mu            sync.Mutex
	frozen        bool
	closed        chan struct{} // closed when the agent closes a frozen connection
	writeDeadline time.Time
	once          sync.Once
}

func (c *testConn) freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = true
	c.closed = make(chan struct{})
}

func (c *testConn) state() (bool, chan struct{}, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen, c.closed, c.writeDeadline
}

func (c *testConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if frozen, _, _ := c.state(); !frozen || err != nil {
			return n, err
		}
		// Bytes that arrive after the freeze are lost, as on a dead path.
	}
}

func (c *testConn) Write(p []byte) (int, error) {
	frozen, closed, deadline := c.state()
	if !frozen {
		return c.Conn.Write(p)
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		timeout = time.After(time.Until(deadline))
	}
	select {
	case <-closed:
		return 0, net.ErrClosed
	case <-timeout:
		return 0, os.ErrDeadlineExceeded
	}
}

func (c *testConn) SetDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *testConn) SetWriteDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *testConn) setWriteDeadline(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDeadline = t
}

func (c *testConn) Close() error {
	if frozen, closed, _ := c.state(); frozen {
		c.once.Do(func() { close(closed) })
		// Ends a read in progress without closing the socket.
		c.Conn.SetReadDeadline(time.Now())
		return nil
	}
	return c.Conn.Close()
}

// testAgent is an agent's tunnel client with the test handlers.
type testAgent struct {
	id     string
	client *agenttunnel.Client
	net    *network
	stop   func()
}

// startAgent connects a new agent to r through its own network, with the production liveness
// settings; opts adjust its configuration.
func startAgent(t testing.TB, ag *agents, r *replica, opts ...func(*agenttunnel.Config)) *testAgent {
	t.Helper()
	id := "agent-" + randomID()[:8]
	tok := ag.add(id)
	n := newNetwork(r)
	cfg := agenttunnel.Config{
		ServerURL: "http://tunnel.test", Token: func() string { return tok }, Dial: n.dial,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Log: testLog().With("agent", id),
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := agenttunnel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	registerTestHandlers(c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	a := &testAgent{id: id, client: c, net: n, stop: func() { cancel(); <-done }}
	t.Cleanup(a.stop)
	return a
}

// quickPings makes an agent notice a dead connection within seconds, for the tests of one.
func quickPings(c *agenttunnel.Config) { c.Keepalive, c.Timeout = 200*time.Millisecond, 2*time.Second }

// registerTestHandlers adds the kinds the tests open: echo (bytes back until EOF), source
// (fields["bytes"] of pattern, then EOF) and sink (reads to EOF, then answers the count), and
// the benchmark's bench-source and bench-sink (the same with large buffers).
func registerTestHandlers(c *agenttunnel.Client) {
	c.Register("bench-source", func(_ context.Context, h Header, conn net.Conn) {
		send(conn, atoi(h.Fields["bytes"]))
	})
	c.Register("bench-sink", func(_ context.Context, _ Header, conn net.Conn) {
		n, _ := drain(conn)
		io.WriteString(conn, itoa(n))
	})
	c.Register("echo", func(_ context.Context, _ Header, conn net.Conn) {
		io.Copy(conn, conn)
	})
	c.Register("source", func(_ context.Context, h Header, conn net.Conn) {
		io.Copy(conn, io.LimitReader(pattern{}, atoi(h.Fields["bytes"])))
	})
	c.Register("sink", func(_ context.Context, _ Header, conn net.Conn) {
		n, _ := io.Copy(io.Discard, conn)
		io.WriteString(conn, itoa(n))
	})
}

// pattern is an endless, cheap byte stream (a sequence of every byte value).
type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}
	return len(p), nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// waitConnected waits until r holds a session of the agent other than not.
func waitConnected(t testing.TB, r *replica, a *testAgent, not *session) *session {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s := r.hub.local(a.id); s != nil && s != not && !s.mux.IsClosed() {
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("agent %s did not connect to %s", a.id, r.srv.URL)
	return nil
}

// echo opens an echo stream on r and checks that msg comes back.
func echo(t testing.TB, r *replica, agentID, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := r.hub.Open(ctx, agentID, Header{Kind: "echo"})
	if err != nil {
		t.Fatalf("open an echo stream on %s: %v", r.srv.URL, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("read the echo: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

// eventually retries f until it succeeds or 10 s have passed.
func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err = f(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
