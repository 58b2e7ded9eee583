// Package server wires Nimbus's HTTP surface and nothing else: middleware (request ids, JSON
// access logs, metrics, panic recovery, and the one check of every URL: checkURL), the
// operations endpoints (/healthz, /readyz, /metrics),
// each domain's routes under /api/v1, the embedded dashboard, and a graceful shutdown that drains
// in-flight requests and long-polls.
//
// Domains own their handlers; they plug in as Modules. Every API error leaves as the one
// envelope of package api, including unknown routes and wrong methods.
package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
)

// Module is a domain's HTTP surface: it adds its routes to the /api/v1 group (and, for
// protocols such as git or the registry, to the root engine).
type Module interface {
	Routes(root *gin.Engine, v1 *gin.RouterGroup)
}

// Deps are what the server needs from the process that runs it.
type Deps struct {
	DB           *gorm.DB
	Redis        redis.UniversalClient
	Log          *slog.Logger
	Frontend     fs.FS // the built dashboard (frontend/dist); a placeholder page is served without index.html
	Version      string
	ReadyTimeout time.Duration
	// Authenticate runs before every /api/v1 route: it resolves the caller (package auth).
	Authenticate gin.HandlerFunc
	// TrustedProxies are the addresses (IPs or CIDRs) of reverse proxies whose X-Forwarded-For
	// names the client. Empty trusts none: the client is the TCP peer, so no caller can pick
	// its own address (which would defeat the per-IP login limit).
	TrustedProxies []string
	// Git serves /{org}/{repo}.git/… (smart HTTP); nil disables git hosting.
	Git Protocol
	// Registry serves /v2 and everything under it (the OCI registry, which speaks OCI's error
	// format and authenticates on its own); nil disables it.
	Registry Protocol
	// Preview serves the hosts it matches (workspace previews, package workspace) before any
	// route: those origins are the workspaces' applications, not Nimbus. nil serves none.
	Preview HostHandler
	Modules []Module
}

// Protocol is the handler of a protocol served beside the JSON API, with an error format of
// its own (git smart HTTP, the OCI registry).
type Protocol interface {
	http.Handler
	// Refuse answers, in the protocol's error format, a request the server's edge refuses
	// before it reaches the handler (a URL that is not valid UTF-8): status is 400 or 404,
	// message says why.
	Refuse(w http.ResponseWriter, r *http.Request, status int, message string)
}

// HostHandler serves the requests for the hosts it matches.
type HostHandler interface {
	http.Handler
	MatchHost(host string) bool
}

// Server is the HTTP server of one nimbus-server process.
type Server struct {
	deps      Deps
	engine    *gin.Engine
	metrics   *metrics
	drain     chan struct{}
	drainOnce sync.Once
}

// New builds the server and its routes.
func New(d Deps) *Server {
	if d.ReadyTimeout <= 0 {
		d.ReadyTimeout = 2 * time.Second
	}
	gin.SetMode(gin.ReleaseMode)
	s := &Server{deps: d, engine: gin.New(), metrics: newMetrics(), drain: make(chan struct{})}
	e := s.engine
	if err := e.SetTrustedProxies(d.TrustedProxies); err != nil {
		d.Log.Error("invalid trusted proxies; trusting none", "err", err)
		e.SetTrustedProxies(nil)
	}
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.Use(s.requestID, s.recover, s.accessLog, s.metrics.middleware, s.checkURL)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", gin.WrapH(s.metrics.handler()))

	v1 := e.Group("/api/v1")
	if d.Authenticate != nil {
		v1.Use(d.Authenticate)
	}
	v1.GET("/version", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"version": d.Version}) })
	v1.GET("/openapi.json", s.openAPIHandler())
	for _, m := range d.Modules {
		m.Routes(e, v1)
	}
	e.NoRoute(s.noRoute)
	e.NoMethod(func(c *gin.Context) {
		api.Abort(c, http.StatusMethodNotAllowed, &api.Body{Code: fault.CodeMethodNotAllowed,
			Message: fmt.Sprintf("method %s is not allowed on %s", c.Request.Method, c.Request.URL.Path)})
	})
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	if s.deps.Preview == nil {
		return s.engine
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.deps.Preview.MatchHost(r.Host) {
			s.deps.Preview.ServeHTTP(w, r)
			return
		}
		s.engine.ServeHTTP(w, r)
	})
}

// Draining is closed when a graceful shutdown begins. Long-poll handlers select on it and answer
// at once ("no work"), so a shutdown never waits for a poll to time out.
func (s *Server) Draining() <-chan struct{} { return s.drain }

func (s *Server) startDrain() { s.drainOnce.Do(func() { close(s.drain) }) }

// Serve serves on ln until ctx is cancelled, then shuts down gracefully: readiness turns 503,
// long-polls are released, in-flight requests get up to timeout to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener, timeout time.Duration) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	hs.RegisterOnShutdown(s.startDrain)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	s.deps.Log.Info("shutting down: draining requests", "timeout", timeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", serr)
	}
	if err != nil {
		hs.Close()
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	s.deps.Log.Info("shutdown complete")
	return nil
}

func (s *Server) fail(c *gin.Context, err error) { api.Fail(c, s.deps.Log, err) }

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok", "version": s.deps.Version})
}

// readyz answers 200 only when the database and Redis both answer and no shutdown has begun, so
// a load balancer stops sending traffic to a draining replica.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.deps.ReadyTimeout)
	defer cancel()
	checks := map[string]string{"database": "ok", "redis": "ok"}
	var failed []string
	if err := pingDB(ctx, s.deps.DB); err != nil {
		checks["database"] = err.Error()
		failed = append(failed, "database")
	}
	if err := s.deps.Redis.Ping(ctx).Err(); err != nil {
		checks["redis"] = err.Error()
		failed = append(failed, "redis")
	}
	select {
	case <-s.drain:
		checks["server"] = "shutting down"
		failed = append(failed, "server")
	default:
	}
	if len(failed) > 0 {
		api.Abort(c, http.StatusServiceUnavailable, &api.Body{Code: fault.CodeUnavailable,
			Message: fmt.Sprintf("not ready: %v", failed), Details: map[string]any{"checks": checks}})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "checks": checks})
}

func pingDB(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}
