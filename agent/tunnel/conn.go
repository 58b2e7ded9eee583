package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	yamux "github.com/libp2p/go-yamux/v5"

	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/tunnelwire"
)

// dialTimeout bounds one connection attempt, the WebSocket handshake included: an answer takes
// well under a second, and a path that died during the handshake must not hold the agent long.
const dialTimeout = 15 * time.Second

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
	mux, err := yamux.Client(conn, tunnelwire.MuxConfig(c.cfg.Keepalive, c.cfg.Timeout, c.log), nil)
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
	return tunnelwire.WebSocketConn(ws, true), nil
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
		handlers.Go(func() { c.serveStream(sctx, tunnelwire.Stream(st)) })
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
