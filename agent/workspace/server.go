package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Runtime is what the runner (agent/runner.Runner) tells about its workspaces.
type Runtime interface {
	// Attach is the container of a lease's ready workspace, counted as connected until
	// release is called.
	Attach(leaseID string) (t Target, release func(), err error)
	Status(leaseID string) (protocol.WorkspaceStatus, error)
	KeepAlive(leaseID string) error
	Restore(ctx context.Context, leaseID, ref string) ([]string, error)
}

// Config is what a Server needs.
type Config struct {
	// Runtime is the current registration's runner; nil (or a func returning nil) before the
	// agent has one.
	Runtime func() Runtime
	// Linger is how long a shell whose terminal connection broke waits to be reattached
	// (default 5 min); Scrollback is how much of its output is replayed then (default 64 KiB).
	Linger     time.Duration
	Scrollback int
	Log        *slog.Logger
}

// Server serves the workspace kinds of stream (protocol.KindWorkspace*).
type Server struct {
	cfg Config
	// ctx is the life of the shells: they outlive a stream, not the Server.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	terminals map[string]*terminal
	ssh       *sshKeys
}

// New returns a Server; Close ends the shells it keeps.
func New(cfg Config) *Server {
	if cfg.Linger <= 0 {
		cfg.Linger = 5 * time.Minute
	}
	if cfg.Scrollback <= 0 {
		cfg.Scrollback = 64 << 10
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, ctx: ctx, cancel: cancel, terminals: map[string]*terminal{}, ssh: &sshKeys{}}
}

// Close kills the shells that wait for a reattach.
func (s *Server) Close() {
	s.cancel()
	s.mu.Lock()
	ts := make([]*terminal, 0, len(s.terminals))
	for _, t := range s.terminals {
		ts = append(ts, t)
	}
	s.mu.Unlock()
	for _, t := range ts {
		t.proc.Close()
	}
}

// Handler is agent/tunnel's Handler.
type Handler = func(ctx context.Context, h protocol.TunnelHeader, conn net.Conn)

// Handlers are the Server's handlers by kind, for agent/tunnel's Client.Register.
func (s *Server) Handlers() map[string]Handler {
	return map[string]Handler{
		protocol.KindWorkspaceTerminal:  s.terminal,
		protocol.KindWorkspacePort:      s.port,
		protocol.KindWorkspaceSSH:       s.sshStream,
		protocol.KindWorkspaceStatus:    s.status,
		protocol.KindWorkspaceKeepAlive: s.keepAlive,
		protocol.KindWorkspaceRestore:   s.restore,
	}
}

// errNoRuntime is the agent between registrations.
var errNoRuntime = errors.New("the agent is registering")

func (s *Server) runtime() (Runtime, error) {
	if s.cfg.Runtime == nil {
		return nil, errNoRuntime
	}
	rt := s.cfg.Runtime()
	if rt == nil {
		return nil, errNoRuntime
	}
	return rt, nil
}

// attach resolves the stream's workspace and answers the workspace reply line: on a refusal it
// returns ok false and the stream is done.
func (s *Server) attach(h protocol.TunnelHeader, conn net.Conn) (Target, func(), bool) {
	rt, err := s.runtime()
	if err == nil {
		var t Target
		var release func()
		if t, release, err = rt.Attach(h.Fields["lease"]); err == nil {
			if err := accept(conn); err != nil {
				release()
				return nil, nil, false
			}
			return t, release, true
		}
	}
	refuse(conn, protocol.TunnelNoWorkspace, err.Error())
	return nil, nil, false
}

func accept(conn net.Conn) error {
	return protocol.WriteTunnelLine(conn, protocol.TunnelReply{Accepted: true})
}

func refuse(conn net.Conn, code, msg string) {
	protocol.WriteTunnelLine(conn, protocol.TunnelReply{Code: code, Message: msg})
}

// port connects the stream to a TCP port inside the workspace: a preview, the IDE.
func (s *Server) port(ctx context.Context, h protocol.TunnelHeader, conn net.Conn) {
	port, err := strconv.Atoi(h.Fields["port"])
	if err != nil || port < 1 || port > 65535 {
		refuse(conn, protocol.TunnelBadHeader, fmt.Sprintf("port %q is not a TCP port", h.Fields["port"]))
		return
	}
	rt, err := s.runtime()
	if err != nil {
		refuse(conn, protocol.TunnelNoWorkspace, err.Error())
		return
	}
	t, release, err := rt.Attach(h.Fields["lease"])
	if err != nil {
		refuse(conn, protocol.TunnelNoWorkspace, err.Error())
		return
	}
	defer release()
	up, err := t.DialPort(ctx, port)
	if err != nil {
		refuse(conn, protocol.TunnelPortClosed, err.Error())
		return
	}
	defer up.Close()
	if accept(conn) != nil {
		return
	}
	Splice(ctx, conn, up)
}

// Splice copies both ways until both directions have ended (or ctx ends), passing each
// side's EOF on as a half-close where the other side supports one.
func Splice(ctx context.Context, a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, tcpDst := dst.(*net.TCPConn)
		_, tcpSrc := src.(*net.TCPConn)
		if tcpDst && tcpSrc {
			// Socket to socket (a data connection to the container's port): the kernel
			// splices, the bytes never enter the agent.
			io.Copy(dst, src)
		} else {
			// Plain Reader and Writer: net.TCPConn's WriteTo would copy in 32 KiB pieces
			// (one tunnel frame each) whatever buffer is given here.
			buf := make([]byte, 256<<10)
			io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		a.Close()
		b.Close()
		<-done
	}
}

// status answers one WorkspaceStatus line.
func (s *Server) status(_ context.Context, h protocol.TunnelHeader, conn net.Conn) {
	s.answerStatus(h, conn, false)
}

// keepAlive restarts the idle countdown, then answers as status.
func (s *Server) keepAlive(_ context.Context, h protocol.TunnelHeader, conn net.Conn) {
	s.answerStatus(h, conn, true)
}

func (s *Server) answerStatus(h protocol.TunnelHeader, conn net.Conn, touch bool) {
	rt, err := s.runtime()
	if err == nil && touch {
		err = rt.KeepAlive(h.Fields["lease"])
	}
	var st protocol.WorkspaceStatus
	if err == nil {
		st, err = rt.Status(h.Fields["lease"])
	}
	if err != nil {
		refuse(conn, protocol.TunnelNoWorkspace, err.Error())
		return
	}
	if accept(conn) == nil {
		protocol.WriteTunnelLine(conn, st)
	}
}

// restore applies a saved work and answers one WorkspaceRestore line.
func (s *Server) restore(ctx context.Context, h protocol.TunnelHeader, conn net.Conn) {
	rt, err := s.runtime()
	if err != nil {
		refuse(conn, protocol.TunnelNoWorkspace, err.Error())
		return
	}
	if _, err := rt.Status(h.Fields["lease"]); err != nil {
		refuse(conn, protocol.TunnelNoWorkspace, err.Error())
		return
	}
	if accept(conn) != nil {
		return
	}
	files, err := rt.Restore(ctx, h.Fields["lease"], h.Fields["ref"])
	out := protocol.WorkspaceRestore{Files: files}
	if err != nil {
		out.Error = err.Error()
	}
	protocol.WriteTunnelLine(conn, out)
}
