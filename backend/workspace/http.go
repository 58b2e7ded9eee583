package workspace

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// WebSocket subprotocols of the terminal and SSH routes.
const (
	TerminalSubprotocol = "nimbus-terminal.v1"
	SSHSubprotocol      = "nimbus-ssh.v1"
)

// Handler is the workspace HTTP module.
type Handler struct {
	s      *Service
	builds Starter
	log    *slog.Logger
	// The default origin check: a browser page of another origin (a preview, another site)
	// cannot open a terminal with the user's cookie.
	upgrader websocket.Upgrader
	// pingEvery is how often the terminal and SSH bridges ping their client (keepAlive).
	pingEvery time.Duration
}

// PingEvery is how often a terminal or SSH WebSocket is pinged (every 4 s: the idle countdown
// of a workspace whose page was left starts within 10 s). A client that has not answered
// (a pong, or any message) for two of these and a bit is gone: its connection is closed, and
// the workspace's idle countdown starts. A browser that leaves a page by the address bar or
// into the back-forward cache, a laptop that sleeps, a network that drops may never send a
// close, and the workspace billed on as "connected".
const PingEvery = 4 * time.Second

// keepAlive pings ws every interval until stop is closed, and gives its reads a deadline that
// every pong and every message moves on: a client that answers nothing for 2×interval+1 s
// fails the next read. Writes of the caller and the pinger are serialised by wmu.
func keepAlive(ws *websocket.Conn, wmu *sync.Mutex, interval time.Duration, stop <-chan struct{}) {
	grace := 2*interval + time.Second
	ws.SetReadDeadline(time.Now().Add(grace))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(grace)) })
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				wmu.Lock()
				err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(interval))
				wmu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
}

// Starter is build's route preamble for what starts a build (build.Handler.Start): the open
// route answers as the routes that run builds do, with the new build.
type Starter interface {
	Start(c *gin.Context, what string, req any, run func(a *repo.Access, u *auth.User) (*build.Build, error)) error
}

// NewHandler returns the HTTP module of s; builds answers the open route.
func NewHandler(s *Service, builds Starter, log *slog.Logger) *Handler {
	return &Handler{s: s, builds: builds, log: log, pingEvery: PingEvery, upgrader: websocket.Upgrader{
		Subprotocols: []string{TerminalSubprotocol, SSHSubprotocol}, ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10}}
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.log)
	rs.POST("/repos/:org/:repo/workspaces", h.open)
	rs.GET("/orgs/:org/workspaces", h.list)
	rs.GET("/workspaces/:id", viewRoute(http.StatusOK, h.s.Get))
	rs.POST("/workspaces/:id/stop", viewRoute(http.StatusAccepted, h.s.Stop))
	rs.POST("/workspaces/:id/keepalive", viewRoute(http.StatusOK, h.s.KeepAlive))
	rs.POST("/workspaces/:id/restore", h.restore)
	rs.GET("/workspaces/:id/preview/:port", h.preview)
	rs.POST("/workspaces/:id/preview/:port/token", h.previewToken)
	rs.GET("/workspaces/:id/terminal", h.terminal)
	rs.GET("/workspaces/:id/ssh", h.ssh)
}

// open is POST /repos/{org}/{repo}/workspaces: the vscode event on a branch (the default one
// when none is given), answered 201 with the build that runs the workspace.
func (h *Handler) open(c *gin.Context) error {
	var req struct {
		Branch string `json:"branch"`
	}
	return h.builds.Start(c, "open workspaces", &req, func(a *repo.Access, u *auth.User) (*build.Build, error) {
		return h.s.cfg.Builds.OpenWorkspace(c.Request.Context(), a, u, req.Branch)
	})
}

func idOf(c *gin.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, errNotFound()
	}
	return id, nil
}

func portOf(c *gin.Context) (int, error) {
	p, err := strconv.Atoi(c.Param("port"))
	if err != nil || p < 1 || p > 65535 {
		return 0, fault.Invalid("port", "%q is not a TCP port (1-65535)", c.Param("port"))
	}
	return p, nil
}

func (h *Handler) list(c *gin.Context) error {
	all := c.Query("all") == "true"
	vs, err := h.s.List(c.Request.Context(), auth.From(c), c.Param("org"), all)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, gin.H{"items": vs})
}

// viewRoute answers a route on one workspace with its View.
func viewRoute(status int, do func(ctx context.Context, p *auth.Principal, id int64) (*View, error)) api.HandlerFunc {
	return func(c *gin.Context) error {
		id, err := idOf(c)
		if err != nil {
			return err
		}
		v, err := do(c.Request.Context(), auth.From(c), id)
		if err != nil {
			return err
		}
		return api.JSON(c, status, v)
	}
}

func (h *Handler) restore(c *gin.Context) error {
	id, err := idOf(c)
	if err != nil {
		return err
	}
	var req struct {
		Ref string `json:"ref"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if req.Ref == "" {
		return fault.Invalid("ref", "required: one of the workspace's saved_work refs")
	}
	out, err := h.s.Restore(c.Request.Context(), auth.From(c), id, req.Ref)
	if err != nil {
		return err
	}
	files := out.Files
	if files == nil {
		files = []string{}
	}
	return api.JSON(c, http.StatusOK, gin.H{"ref": req.Ref, "files": files})
}

func (h *Handler) preview(c *gin.Context) error {
	id, err := idOf(c)
	if err != nil {
		return err
	}
	port, err := portOf(c)
	if err != nil {
		return err
	}
	u, err := h.s.PreviewLogin(c.Request.Context(), auth.From(c), id, port, c.Query("path"))
	if err != nil {
		return err
	}
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusSeeOther, u)
	return nil
}

func (h *Handler) previewToken(c *gin.Context) error {
	id, err := idOf(c)
	if err != nil {
		return err
	}
	port, err := portOf(c)
	if err != nil {
		return err
	}
	token, u, exp, err := h.s.PreviewToken(c.Request.Context(), auth.From(c), id, port)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, gin.H{"url": u, "token": token, "expires_at": exp, "header": PreviewHeader})
}

// stream authorizes the caller and opens the workspace stream before the upgrade, so every
// refusal is an ordinary JSON error.
func (h *Handler) stream(c *gin.Context, kind string, fields map[string]string) (net.Conn, error) {
	id, err := idOf(c)
	if err != nil {
		return nil, err
	}
	r, err := h.s.load(c.Request.Context(), auth.From(c), id)
	if err != nil {
		return nil, err
	}
	if !websocket.IsWebSocketUpgrade(c.Request) {
		return nil, fault.BadRequest("this route is a WebSocket: connect with Upgrade: websocket")
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 15*time.Second)
	defer cancel()
	conn, err := h.s.open(ctx, r, kind, fields)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// terminal bridges the browser's WebSocket and the agent's terminal stream (README).
func (h *Handler) terminal(c *gin.Context) error {
	q := c.Request.URL.Query()
	conn, err := h.stream(c, protocol.KindWorkspaceTerminal, map[string]string{
		"session": q.Get("session"), "cols": q.Get("cols"), "rows": q.Get("rows")})
	if err != nil {
		return err
	}
	defer conn.Close()
	ws, err := h.upgrader.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		return nil // the upgrader has answered
	}
	defer ws.Close()
	var wmu sync.Mutex
	write := func(typ int, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return ws.WriteMessage(typ, b)
	}
	done := make(chan struct{})
	go func() {
		// Agent → browser.
		defer close(done)
		for {
			typ, b, err := protocol.ReadTermFrame(conn)
			if err != nil {
				write(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "the workspace's terminal ended"))
				ws.Close()
				return
			}
			switch typ {
			case protocol.TermData:
				err = write(websocket.BinaryMessage, b)
			case protocol.TermSession:
				var si protocol.TermSessionInfo
				json.Unmarshal(b, &si)
				out, _ := json.Marshal(map[string]string{"type": "session", "id": si.ID})
				err = write(websocket.TextMessage, out)
			case protocol.TermExit:
				var ei protocol.TermExitInfo
				json.Unmarshal(b, &ei)
				out, _ := json.Marshal(map[string]any{"type": "exit", "code": ei.Code})
				write(websocket.TextMessage, out)
				write(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "the shell exited"))
				ws.Close()
				return
			}
			if err != nil {
				ws.Close()
				return
			}
		}
	}()
	// Browser → agent.
	ws.SetReadLimit(protocol.MaxTermFrame)
	stopPings := make(chan struct{})
	defer close(stopPings)
	keepAlive(ws, &wmu, h.pingEvery, stopPings)
	grace := 2*h.pingEvery + time.Second
	for {
		typ, b, err := ws.ReadMessage()
		if err != nil {
			break
		}
		ws.SetReadDeadline(time.Now().Add(grace))
		switch typ {
		case websocket.BinaryMessage:
			err = protocol.WriteTermFrame(conn, protocol.TermData, b)
		case websocket.TextMessage:
			var m struct {
				Type string `json:"type"`
				Cols uint   `json:"cols"`
				Rows uint   `json:"rows"`
			}
			if json.Unmarshal(b, &m) == nil && m.Type == "resize" && m.Cols > 0 && m.Rows > 0 {
				err = protocol.WriteTermJSON(conn, protocol.TermResize, protocol.TermSize{Cols: m.Cols, Rows: m.Rows})
			}
		}
		if err != nil {
			break
		}
	}
	conn.Close()
	<-done
	return nil
}

// ssh carries an SSH connection between the CLI's WebSocket and the agent's SSH server.
func (h *Handler) ssh(c *gin.Context) error {
	conn, err := h.stream(c, protocol.KindWorkspaceSSH, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	ws, err := h.upgrader.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		return nil
	}
	defer ws.Close()
	var wmu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				wmu.Lock()
				ws.SetWriteDeadline(time.Now().Add(30 * time.Second))
				werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n])
				wmu.Unlock()
				if werr != nil {
					break
				}
			}
			if err != nil {
				wmu.Lock()
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				wmu.Unlock()
				break
			}
		}
		ws.Close()
	}()
	stopPings := make(chan struct{})
	defer close(stopPings)
	keepAlive(ws, &wmu, h.pingEvery, stopPings)
	grace := 2*h.pingEvery + time.Second
	for {
		typ, r, err := ws.NextReader()
		if err != nil {
			break
		}
		ws.SetReadDeadline(time.Now().Add(grace))
		if typ != websocket.BinaryMessage {
			continue
		}
		if _, err := io.Copy(conn, r); err != nil {
			break
		}
	}
	conn.Close()
	<-done
	return nil
}
