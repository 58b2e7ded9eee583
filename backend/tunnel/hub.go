// Package tunnel is the server's end of the agent tunnel (the protocol is in
// internal/protocol/tunnel.go; the agent's end is agent/tunnel). Agents open one WebSocket to
// GET /api/v1/agent/tunnel and run a yamux session over it; the Hub keeps this replica's
// sessions and opens streams to agents for the rest of the server:
//
//	conn, err := hub.Open(ctx, agentID, tunnel.Header{Kind: "terminal", Fields: …})
//
// Open returns once the agent has accepted the stream; from then on conn is raw bytes to and
// from the agent's handler of that kind. The agent's connection may be on another replica:
// Open finds it through a record in Redis and reaches it through that replica (forward_http.go).
// README.md draws the flow; start there.
package tunnel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	yamux "github.com/libp2p/go-yamux/v5"
	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/tunnelwire"
)

// Header is what a stream is for: a kind the agent has a handler for, and its fields.
type Header = protocol.TunnelHeader

// ErrNoTunnel means the agent has no tunnel connection that this replica can reach: it is
// offline, reconnecting, or too old to open one. Test with errors.Is.
var ErrNoTunnel = errors.New("tunnel: the agent has no tunnel connection")

// ErrRefused matches every *RefusedError.
var ErrRefused = errors.New("tunnel: the agent refused the stream")

// RefusedError is the agent's refusal of a stream, with its code (protocol.TunnelUnknownKind,
// protocol.TunnelBadHeader) and message.
type RefusedError struct {
	Kind, Code, Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("tunnel: the agent refused a %q stream (%s): %s", e.Kind, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// handshakeTimeout bounds writing a header and reading the reply when the caller's context has
// no earlier deadline.
const handshakeTimeout = 15 * time.Second

// Config is what a Hub needs.
type Config struct {
	// Authenticate resolves an agent token to the agent's id; its error is the answer (a 401
	// from the scheduler for an unknown token).
	Authenticate func(ctx context.Context, token string) (agentID string, err error)
	// Redis holds the routing records shared by the replicas; nil keeps every agent local (one
	// replica, and the tests of a single hub).
	Redis redis.UniversalClient
	// Secret is key material every replica shares (NIMBUS_SECRET_KEY); the key that signs
	// forwarded streams is derived from it. Empty refuses forwarding both ways.
	Secret []byte
	// InternalURL is where other replicas reach this one (http(s)://host:port); SetInternalURL
	// may set it later, once the listener is bound.
	InternalURL string
	// Draining is the server's shutdown signal: sessions are closed so agents move to another
	// replica. nil never drains.
	Draining func() <-chan struct{}
	// Keepalive and Timeout are the liveness settings (zero: protocol.TunnelKeepalive and
	// protocol.TunnelTimeout); RecordTTL is the routing record's lifetime (zero: 30 s),
	// refreshed every third of it.
	Keepalive, Timeout, RecordTTL time.Duration
	Log                           *slog.Logger
}

// Hub holds this replica's agent sessions and opens streams to agents.
type Hub struct {
	cfg     Config
	log     *slog.Logger
	replica string // random per process: records name the process, not the address
	key     []byte // HMAC key of forwarded streams; nil without a secret
	done    chan struct{}
	active  sync.WaitGroup // the handlers serving a session or a forwarded stream

	mu          sync.Mutex
	internalURL string
	sessions    map[string]*session  // agent id → its current session here
	waiting     map[string]*dataWait // data token → the stream that waits for its connection
	closed      bool
}

// session is one agent connection held by this replica.
type session struct {
	agentID string
	id      string
	record  string // its routing record's value in Redis
	mux     *yamux.Session
}

// New returns a Hub; Routes (server.Module) serves its endpoints.
func New(cfg Config) (*Hub, error) {
	if cfg.Authenticate == nil {
		return nil, errors.New("tunnel: an Authenticate function is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = protocol.TunnelKeepalive
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = protocol.TunnelTimeout
	}
	if cfg.RecordTTL <= 0 {
		cfg.RecordTTL = DefaultRecordTTL
	}
	h := &Hub{
		cfg: cfg, log: cfg.Log.With("component", "tunnel"), replica: randomID(), done: make(chan struct{}),
		sessions: map[string]*session{}, waiting: map[string]*dataWait{},
	}
	if len(cfg.Secret) > 0 {
		h.key = deriveKey(cfg.Secret)
	}
	if err := h.SetInternalURL(cfg.InternalURL); err != nil {
		return nil, err
	}
	return h, nil
}

// SetInternalURL sets where other replicas reach this one; connections accepted afterwards are
// recorded with it. "" leaves this replica unreachable to the others.
func (h *Hub) SetInternalURL(u string) error {
	if u != "" {
		if err := checkInternalURL(u); err != nil {
			return err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.internalURL = u
	return nil
}

// Open opens a stream to the agent for h and returns it once the agent has accepted it. ctx
// bounds the opening only, not the stream. Errors: ErrNoTunnel when the agent cannot be
// reached, a *RefusedError (ErrRefused) when it refuses the kind.
func (h *Hub) Open(ctx context.Context, agentID string, hdr Header) (net.Conn, error) {
	return h.open(ctx, agentID, hdr, false)
}

// dialAgent returns a raw stream to the agent, before the header: on this replica's session,
// or forwarded to the replica the routing record names (local false).
func (h *Hub) dialAgent(ctx context.Context, agentID string) (conn net.Conn, local bool, err error) {
	rec, err := h.lookup(ctx, agentID)
	if err != nil {
		// Redis is away: this replica's own session is still worth a try.
		h.log.Warn("tunnel routing record unreadable; trying this replica's session", "agent_id", agentID, "err", err)
	}
	if rec == nil || rec.Replica == h.replica {
		conn, err := h.localStream(ctx, agentID)
		return conn, true, err
	}
	conn, err = h.forward(ctx, agentID, *rec)
	return conn, false, err
}

// localStream opens a stream on this replica's session of the agent.
func (h *Hub) localStream(ctx context.Context, agentID string) (net.Conn, error) {
	s := h.local(agentID)
	if s == nil {
		return nil, fmt.Errorf("%w: agent %s", ErrNoTunnel, agentID)
	}
	st, err := s.mux.OpenStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: agent %s: %w", ErrNoTunnel, agentID, err)
	}
	return tunnelwire.Stream(st), nil
}

func (h *Hub) local(agentID string) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[agentID]
}

// handshake writes the header and reads the agent's reply, within ctx and handshakeTimeout.
func handshake(ctx context.Context, conn net.Conn, hdr Header) (protocol.TunnelReply, error) {
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	// A cancelled ctx moves the deadline to now, which unblocks the read.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	err := protocol.WriteTunnelLine(conn, hdr)
	var reply protocol.TunnelReply
	if err == nil {
		err = protocol.ReadTunnelLine(conn, &reply)
	}
	if !stop() {
		return reply, fmt.Errorf("stream header: %w", ctx.Err())
	}
	if err != nil {
		return reply, fmt.Errorf("stream header: %w", err)
	}
	conn.SetDeadline(time.Time{})
	if !reply.Accepted {
		return reply, &RefusedError{Kind: hdr.Kind, Code: reply.Code, Message: reply.Message}
	}
	return reply, nil
}

// attach makes s the agent's session here and closes the one it replaces: the agent holds one
// connection, so an older one is stale (its path broke before either end noticed).
func (h *Hub) attach(s *session) bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	old := h.sessions[s.agentID]
	h.sessions[s.agentID] = s
	h.mu.Unlock()
	if old != nil {
		h.log.Info("agent tunnel replaced by a newer connection", "agent_id", s.agentID, "session", old.id)
		old.mux.Close()
	}
	return true
}

// detach forgets s unless a newer session has replaced it.
func (h *Hub) detach(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[s.agentID] == s {
		delete(h.sessions, s.agentID)
	}
}

// enter counts a handler in, unless the hub is closed.
func (h *Hub) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.active.Add(1)
	return true
}

// Close closes every session and refuses new ones (agents connect to another replica), and
// returns once their handlers have ended and released their records.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.done)
	sessions := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	for _, s := range sessions {
		s.mux.Close()
	}
	h.active.Wait()
	return nil
}

func randomID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
