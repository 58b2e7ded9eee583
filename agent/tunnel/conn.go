package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	yamux "github.com/libp2p/go-yamux/v5"

	"github.com/nimbus-build/nimbus/agent/protocol"
)

// dialTimeout bounds one connection attempt, the WebSocket handshake included: an answer takes
// well under a second, and a path that died during the handshake must not hold the agent long.
const dialTimeout = 15 * time.Second

// Flow control of the tunnel's streams (libp2p/go-yamux). A stream's window starts at yamux's
// 256 KiB and doubles, up to StreamWindow, each time its reader takes a whole window within
// four round trips of the connection (measured by a ping when it starts and every
// rttInterval). The cap is a trade: what is in flight on a short path (a LAN, loopback) stays
// in the CPU's caches below about 1 MiB (on loopback 2 MiB cost a quarter of the throughput and
// 4 MiB or more a third to a half), while one stream over a long path moves at most
// StreamWindow per round trip (1 MiB: 50 MiB/s at 20 ms, 20 MiB/s at 50 ms).
const (
	StreamWindow = 1 << 20
	// MaxFrame bounds a yamux frame (header included): a 256 KiB write goes out as one frame,
	// and one WebSocket message, while a bulk stream holds the connection for at most that much
	// before a keystroke on another stream gets its turn.
	MaxFrame = 256<<10 + 12
	// rttInterval is how often the round trip is measured again.
	rttInterval = 10 * time.Second
)

// errSessionEnded marks the end of a connection that had been established (as opposed to an
// attempt that failed).
var errSessionEnded = errors.New("tunnel: connection lost")

// StatusError is a handshake the server answered with something other than 101.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("tunnel: server answered %d to the tunnel handshake: %s", e.Status, e.Message)
}

// connect makes one connection and serves its streams until it breaks or ctx ends.
func (c *Client) connect(ctx context.Context) error {
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	mux, err := yamux.Client(conn, MuxConfig(c.cfg.Keepalive, c.cfg.Timeout, c.log), nil)
	if err != nil {
		conn.Close()
		return fmt.Errorf("tunnel: start session: %w", err)
	}
	c.log.Info("tunnel connected")
	return c.serve(ctx, mux)
}

// readBuffer is the agent's WebSocket read buffer. It only holds the start of a message: the
// rest of a large one is read straight into yamux's buffer, so a larger one would only copy more.
// (What the agent writes does not go through gorilla's write buffer: see WebSocketConn.)
const readBuffer = 4 << 10

// dial makes the WebSocket handshake with the agent token.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	token := c.cfg.Token()
	if token == "" {
		return nil, &StatusError{Status: http.StatusUnauthorized, Message: "the agent has no token yet"}
	}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+token)
	hdr.Set("User-Agent", c.cfg.UserAgent)
	d := websocket.Dialer{
		NetDialContext: c.cfg.Dial, Proxy: http.ProxyFromEnvironment, TLSClientConfig: c.cfg.TLS,
		HandshakeTimeout: dialTimeout, ReadBufferSize: readBuffer,
		Subprotocols: []string{protocol.TunnelSubprotocol},
	}
	ws, resp, err := d.DialContext(ctx, c.url, hdr)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			return nil, &StatusError{Status: resp.StatusCode, Message: responseMessage(resp)}
		}
		return nil, fmt.Errorf("tunnel: connect to %s: %w", c.url, err)
	}
	if ws.Subprotocol() != protocol.TunnelSubprotocol {
		ws.Close()
		return nil, fmt.Errorf("tunnel: the server did not agree to %s", protocol.TunnelSubprotocol)
	}
	return WebSocketConn(ws, true), nil
}

// responseMessage is the start of a refused handshake's body (the server's error envelope).
func responseMessage(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if msg := strings.TrimSpace(string(b)); msg != "" {
		return msg
	}
	return http.StatusText(resp.StatusCode)
}

// serve accepts the server's streams until the session breaks or ctx ends, then waits for
// their handlers.
func (c *Client) serve(ctx context.Context, mux *yamux.Session) error {
	sctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, func() { mux.Close() })
	var handlers sync.WaitGroup
	defer func() {
		stop()
		cancel()
		mux.Close()
		handlers.Wait()
	}()
	for {
		st, err := mux.AcceptStream()
		if err != nil {
			return fmt.Errorf("%w: %w", errSessionEnded, err)
		}
		handlers.Go(func() { c.serveStream(sctx, Stream(st)) })
	}
}

// serveStream reads the header, answers it and runs the kind's handler.
func (c *Client) serveStream(ctx context.Context, st net.Conn) {
	defer st.Close()
	st.SetDeadline(time.Now().Add(headerTimeout))
	var h Header
	if err := protocol.ReadTunnelLine(st, &h); err != nil {
		c.refuse(st, protocol.TunnelBadHeader, err.Error())
		return
	}
	handler, kinds := c.handler(h.Kind)
	if handler == nil {
		c.refuse(st, protocol.TunnelUnknownKind, fmt.Sprintf("this agent serves no streams of kind %q (it serves: %s)",
			h.Kind, strings.Join(kinds, ", ")))
		return
	}
	conn := st
	if h.Data != "" {
		// A bulk stream: its bytes go on a connection of its own when one can be made.
		if dc, err := c.dialData(ctx, h.Data); err != nil {
			c.log.Debug("tunnel data connection not made; the stream carries the bytes", "kind", h.Kind, "err", err)
		} else {
			defer dc.Close()
			conn = dc
		}
	}
	if err := protocol.WriteTunnelLine(st, protocol.TunnelReply{Accepted: true, Data: conn != st}); err != nil {
		c.log.Debug("tunnel stream gone before it was accepted", "kind", h.Kind, "err", err)
		return
	}
	st.SetDeadline(time.Time{})
	if conn != st {
		st.Close()
	}
	handler(ctx, h, conn)
}

func (c *Client) refuse(st net.Conn, code, msg string) {
	c.log.Warn("tunnel stream refused", "code", code, "why", msg)
	protocol.WriteTunnelLine(st, protocol.TunnelReply{Code: code, Message: msg})
}

// MuxConfig is the yamux configuration of both ends of the tunnel: pings every keepalive (when
// nothing was received in between), and a connection whose ping or write is not through within
// timeout is dropped.
func MuxConfig(keepalive, timeout time.Duration, log *slog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = true
	c.KeepAliveInterval = keepalive
	c.ConnectionWriteTimeout = timeout
	c.MaxStreamWindowSize = StreamWindow
	c.MaxMessageSize = MaxFrame
	c.MeasureRTTInterval = rttInterval
	c.LogOutput = muxLogger{log}
	return c
}

// muxLogger sends yamux's log lines (a failed keepalive, a write to a dead connection) to the
// debug level: what matters of them reaches the caller as the session's end.
type muxLogger struct{ log *slog.Logger }

func (l muxLogger) Write(p []byte) (int, error) {
	l.log.Debug(strings.TrimSpace(string(p)))
	return len(p), nil
}
