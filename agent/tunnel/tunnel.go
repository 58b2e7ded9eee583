// Package tunnel is the agent's end of the tunnel (see internal/protocol/tunnel.go): one WebSocket
// connection the agent opens to the server, carrying a yamux session on which the server opens
// streams to this host. Agent hosts accept no inbound connections; everything the server needs
// to reach on them (a workspace's terminal, a forwarded port) rides this connection.
//
// A Client holds the connection until its context ends, connecting again with backoff when it
// breaks. Each stream the server opens starts with a header line naming a kind; the Client
// answers with an accept or refuse line and hands an accepted stream to the Handler Registered
// for that kind:
//
//	server ──stream──► header {"kind":"terminal",…} ──► Register("terminal", h) ? accept, h(ctx, header, conn)
//	                                                                           : refuse unknown_kind
//
// It is intended for internal use of the agent; the server's end is backend/tunnel.
package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-build/nimbus/internal/backoff"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Header is what the server asks of a stream: its kind and that kind's fields.
type Header = protocol.TunnelHeader

// Handler serves one accepted stream. ctx ends when the connection breaks or the Client stops;
// the handler must return then. The Client closes conn after the handler returns.
type Handler func(ctx context.Context, h Header, conn net.Conn)

// Backoff between connection attempts: DefaultMinBackoff doubling to DefaultMaxBackoff, each
// wait jittered by ±20% so agents cut off together do not come back together.
const (
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
)

// headerTimeout bounds reading a stream's header: the server writes it right after opening.
const headerTimeout = 10 * time.Second

// Config is a Client's configuration.
type Config struct {
	// ServerURL is the server's base URL, as for the API client (http(s)://host[:port][/prefix]).
	ServerURL string
	// Token returns the agent token to connect with; it is asked on every attempt, so a new
	// registration is picked up. "" waits for one.
	Token func() string
	// Dial makes the TCP connection (nil: net.Dialer); TLS configures https server URLs (nil:
	// the system's roots). Proxies come from the environment, as for the API client.
	Dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	TLS       *tls.Config
	UserAgent string
	// Keepalive and Timeout are the liveness settings (zero: protocol.TunnelKeepalive and
	// protocol.TunnelTimeout).
	Keepalive, Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts (zero: the defaults above).
	MinBackoff, MaxBackoff time.Duration
	Log                    *slog.Logger
}

// Client is the agent's tunnel: Register handlers, then Run.
type Client struct {
	cfg  Config
	url  string   // the tunnel's WebSocket URL
	base *url.URL // the server's base URL, for data connections
	log  *slog.Logger

	mu       sync.Mutex
	handlers map[string]Handler
}

// New checks cfg and returns a Client with no handlers.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.ServerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tunnel: server URL %q must be http(s)://host[:port]", cfg.ServerURL)
	}
	if cfg.Token == nil {
		return nil, errors.New("tunnel: a token function is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "nimbus-agent"
	}
	cfg.Keepalive = orDefault(cfg.Keepalive, protocol.TunnelKeepalive)
	cfg.Timeout = orDefault(cfg.Timeout, protocol.TunnelTimeout)
	cfg.MinBackoff = orDefault(cfg.MinBackoff, DefaultMinBackoff)
	cfg.MaxBackoff = max(orDefault(cfg.MaxBackoff, DefaultMaxBackoff), cfg.MinBackoff)
	return &Client{
		cfg:      cfg,
		url:      "ws" + strings.TrimPrefix(strings.TrimRight(u.String(), "/"), "http") + protocol.PathTunnel,
		base:     u,
		log:      cfg.Log.With("component", "tunnel"),
		handlers: map[string]Handler{},
	}, nil
}

// orDefault is v, or def when v is not positive.
func orDefault(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

// Register makes h serve the streams of kind; a later Register of the same kind replaces it.
// It may be called while the Client runs: streams opened afterwards see it.
func (c *Client) Register(kind string, h Handler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers[kind] = h
}

func (c *Client) handler(kind string) (Handler, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handlers[kind], slices.Sorted(maps.Keys(c.handlers))
}

// Run holds the tunnel until ctx ends, connecting again after every break, and returns once
// every handler has returned.
func (c *Client) Run(ctx context.Context) {
	var wait time.Duration
	failing := false
	for ctx.Err() == nil {
		start := time.Now()
		err := c.connect(ctx)
		if ctx.Err() != nil {
			return
		}
		wait = c.nextWait(wait, err, time.Since(start))
		// A lost connection, and the first failed attempt after it, are warnings; the rest
		// of a run of failures would flood the log while the server is away.
		lost := errors.Is(err, errSessionEnded)
		level := slog.LevelWarn
		if failing && !lost {
			level = slog.LevelDebug
		}
		failing = !lost
		c.log.Log(ctx, level, "tunnel down; connecting again", "err", err, "in", wait.Round(time.Millisecond))
		if !pause(ctx, wait) {
			return
		}
	}
}

// nextWait is the backoff after an attempt that ended with err after lasted. A connection that
// held for a while starts the backoff over; a refusal that asking again cannot change (a bad
// token until the agent registers again, a server without the tunnel) waits the most.
func (c *Client) nextWait(prev time.Duration, err error, lasted time.Duration) time.Duration {
	policy := backoff.Policy{Initial: c.cfg.MinBackoff, Max: c.cfg.MaxBackoff, Jitter: 0.2}
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.Status >= 400 && se.Status < 500 && se.Status != http.StatusTooManyRequests:
		return policy.Next(c.cfg.MaxBackoff)
	case lasted >= c.cfg.MaxBackoff:
		return policy.Next(0)
	}
	return policy.Next(prev)
}

// pause waits d or until ctx ends, and reports whether ctx is still alive.
func pause(ctx context.Context, d time.Duration) bool {
	return backoff.Sleep(ctx, d) == nil
}
