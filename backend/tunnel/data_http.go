package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Data connections (internal/protocol/tunnel.go): a bulk stream's bytes on a TCP connection of its
// own, which the agent makes to GET /api/v1/agent/tunnel/data when the stream's header offers a
// token. Through the tunnel a download is cut into yamux frames, WebSocket messages the agent
// masks and the server unmasks, and copied in and out of both processes, with at most a window
// (1 MiB) in flight. On its own connection it is plain TCP, which the agent splices from the
// container's port without reading it (the server's preview proxy still copies it once), and
// TCP's own window grows with the path. Only streams of the tunnel this replica
// holds are offered one; when the agent cannot make it, the bytes go on the stream as before.

// dataWait is a bulk stream waiting for its data connection.
type dataWait struct {
	agentID string
	ready   chan struct{} // closed once conn is set

	mu        sync.Mutex
	conn      net.Conn
	abandoned bool // the opener stopped waiting: a late connection is closed
}

// deliver hands the agent's data connection to the waiting opener; false when it gave up.
func (w *dataWait) deliver(conn net.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.abandoned || w.conn != nil {
		return false
	}
	w.conn = conn
	close(w.ready)
	return true
}

// abandon ends the wait and returns the connection that arrived, if one did.
func (w *dataWait) abandon() net.Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.abandoned = true
	return w.conn
}

// OpenBulk is Open for a stream that may carry much (a preview: pages, downloads, uploads). On
// a tunnel this replica holds, the agent is offered a data connection for the stream's bytes;
// the caller cannot tell which way its bytes go, except by their speed.
func (h *Hub) OpenBulk(ctx context.Context, agentID string, hdr Header) (net.Conn, error) {
	return h.open(ctx, agentID, hdr, true)
}

func (h *Hub) open(ctx context.Context, agentID string, hdr Header, bulk bool) (net.Conn, error) {
	if hdr.Kind == "" {
		return nil, errors.New("tunnel: a stream header needs a kind")
	}
	conn, local, err := h.dialAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	var w *dataWait
	if bulk && local {
		hdr.Data, w = h.expectData(agentID)
		defer h.forgetData(hdr.Data)
	}
	reply, err := handshake(ctx, conn, hdr)
	if err != nil {
		conn.Close()
		if w != nil {
			if late := w.abandon(); late != nil {
				late.Close()
			}
		}
		if errors.Is(err, ErrRefused) {
			return nil, err
		}
		return nil, fmt.Errorf("tunnel: open a %q stream to agent %s: %w", hdr.Kind, agentID, err)
	}
	if w == nil || !reply.Data {
		return conn, nil
	}
	// The agent answers Data only after the 101, which serveData writes just before it
	// delivers: the connection is there, or a moment away.
	conn.Close()
	wait := time.NewTimer(handshakeTimeout)
	defer wait.Stop()
	select {
	case <-w.ready:
		return w.conn, nil
	case <-ctx.Done():
	case <-wait.C:
	}
	if late := w.abandon(); late != nil {
		return late, nil
	}
	return nil, fmt.Errorf("tunnel: open a %q stream to agent %s: the agent said it made the data connection, and none arrived", hdr.Kind, agentID)
}

// expectData registers a single-use data token for a stream to agentID.
func (h *Hub) expectData(agentID string) (string, *dataWait) {
	token := randomID() + randomID()
	w := &dataWait{agentID: agentID, ready: make(chan struct{})}
	h.mu.Lock()
	h.waiting[token] = w
	h.mu.Unlock()
	return token, w
}

func (h *Hub) forgetData(token string) {
	h.mu.Lock()
	delete(h.waiting, token)
	h.mu.Unlock()
}

// takeData claims the wait of token for agentID: nil when there is none (another replica's
// token, one spent or given up on, or another agent's).
func (h *Hub) takeData(agentID, token string) *dataWait {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.waiting[token]
	if w == nil || w.agentID != agentID {
		return nil
	}
	delete(h.waiting, token)
	return w
}

// serveData accepts an agent's data connection for the stream its token names.
func (h *Hub) serveData(c *gin.Context) error {
	agentID, err := h.cfg.Authenticate(c.Request.Context(), bearer(c))
	if err != nil {
		return err
	}
	if !hasToken(c.Request.Header, "Connection", "upgrade") || !hasToken(c.Request.Header, "Upgrade", protocol.TunnelDataProtocol) {
		return fault.BadRequest("a data connection is an upgrade to %s", protocol.TunnelDataProtocol)
	}
	w := h.takeData(agentID, c.GetHeader(protocol.TunnelDataHeader))
	if w == nil {
		return fault.NotFound("no stream of this agent waits for that data connection here")
	}
	c.Writer.WriteHeader(http.StatusSwitchingProtocols) // for the access log; the 101 is written below
	conn, rw, err := c.Writer.Hijack()
	if err != nil {
		w.abandon()
		return fmt.Errorf("tunnel: hijack a data connection: %w", err)
	}
	// The server's read and write deadlines of the request must not cut the stream.
	conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+protocol.TunnelDataProtocol+"\r\n\r\n"); err != nil {
		conn.Close()
		w.abandon()
		return nil
	}
	// The agent writes nothing before it has the 101, so nothing is buffered in practice; a
	// plain connection keeps the splice on the opener's side.
	var dc net.Conn = conn
	if rw.Reader.Buffered() > 0 {
		dc = &bufferedConn{Conn: conn, r: rw.Reader}
	}
	if !w.deliver(dc) {
		conn.Close()
	}
	return nil
}
