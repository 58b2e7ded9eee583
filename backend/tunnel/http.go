package tunnel

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"
	yamux "github.com/libp2p/go-yamux/v5"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/tunnelwire"
)

// Routes implements server.Module: the agents' tunnel beside the rest of the agent API (outside
// the user middleware: only agent tokens work there), and the replicas' forwarding endpoint.
func (h *Hub) Routes(root *gin.Engine, _ *gin.RouterGroup) {
	r := api.NewRoutes(root, h.log)
	r.GET(protocol.PathTunnel, h.serveAgent)
	r.GET(protocol.PathTunnelData, h.serveData)
	r.GET(PathForward, h.serveForward)
}

// upgrader accepts the agents' WebSockets. Its buffers stay small, as there is one connection
// per agent: the server does not mask what it sends, so large writes go out without a copy, and
// large reads bypass the read buffer.
var upgrader = websocket.Upgrader{Subprotocols: []string{protocol.TunnelSubprotocol}}

// serveAgent accepts an agent's tunnel connection and holds it until it breaks, the agent
// connects again, or the server drains.
func (h *Hub) serveAgent(c *gin.Context) error {
	ctx := c.Request.Context()
	agentID, err := h.cfg.Authenticate(ctx, bearer(c))
	if err != nil {
		return err
	}
	if !hasToken(c.Request.Header, "Connection", "upgrade") || !hasToken(c.Request.Header, "Upgrade", "websocket") {
		return fault.BadRequest("the tunnel is a WebSocket (Upgrade: websocket, subprotocol %s)", protocol.TunnelSubprotocol)
	}
	if h.stopping() || !h.enter() {
		return fault.Unavailable("this replica is shutting down; connect again")
	}
	defer h.active.Done()
	s := h.newSession(agentID)
	// Recorded before the 101: the agent cannot connect again before it has this answer, so the
	// newest connection's record is always the last one written.
	if err := h.claim(ctx, s); err != nil {
		h.log.Warn("tunnel session not recorded; other replicas cannot reach it", "agent_id", agentID, "err", err)
	}
	defer h.release(context.WithoutCancel(ctx), s)
	c.Writer.WriteHeader(http.StatusSwitchingProtocols) // for the access log; Upgrade writes the 101
	ws, err := upgrader.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		return nil // Upgrade has answered
	}
	if ws.Subprotocol() != protocol.TunnelSubprotocol {
		ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "the tunnel needs subprotocol "+protocol.TunnelSubprotocol),
			time.Now().Add(time.Second))
		ws.Close()
		return nil
	}
	conn := tunnelwire.WebSocketConn(ws, false)
	s.mux, err = yamux.Server(conn, tunnelwire.MuxConfig(h.cfg.Keepalive, h.cfg.Timeout, h.log), nil)
	if err != nil {
		conn.Close()
		h.log.Error("tunnel session not started", "agent_id", agentID, "err", err)
		return nil
	}
	defer s.mux.Close()
	if !h.attach(s) {
		return nil
	}
	defer h.detach(s)
	h.log.Info("agent tunnel connected", "agent_id", agentID, "session", s.id)
	go refuseStreams(s.mux)
	why := h.hold(ctx, s)
	h.log.Info("agent tunnel closed", "agent_id", agentID, "session", s.id, "why", why)
	return nil
}

// hold keeps s's record fresh until s ends, and says why it ended.
func (h *Hub) hold(ctx context.Context, s *session) string {
	tick := time.NewTicker(h.cfg.RecordTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-s.mux.CloseChan():
			return "connection closed"
		case <-h.done:
			return "hub closed"
		case <-h.draining():
			return "server draining"
		case <-tick.C:
			ok, err := h.refresh(ctx, s)
			if err != nil {
				h.log.Warn("tunnel record not refreshed", "agent_id", s.agentID, "err", err)
			}
			if !ok {
				// The agent connected again elsewhere: this connection is stale.
				return "replaced by a newer connection on another replica"
			}
		}
	}
}

// refuseStreams closes the streams an agent opens: only the server opens streams.
func refuseStreams(mux *yamux.Session) {
	for {
		st, err := mux.AcceptStream()
		if err != nil {
			return
		}
		st.Reset()
	}
}

func (h *Hub) draining() <-chan struct{} {
	if h.cfg.Draining == nil {
		return nil
	}
	return h.cfg.Draining()
}

// stopping reports whether the hub is closed or the server drains.
func (h *Hub) stopping() bool {
	select {
	case <-h.done:
		return true
	case <-h.draining():
		return true
	default:
		return false
	}
}

func bearer(c *gin.Context) string {
	scheme, tok, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// hasToken reports whether a comma-separated header (Connection, Upgrade) lists token.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
