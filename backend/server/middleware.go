package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/reqlog"
)

// HeaderRequestID carries the request id in both directions.
const HeaderRequestID = "X-Request-Id"

// A client-sent id is kept only when it is short and plain, so it cannot forge log lines.
var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader(HeaderRequestID)
	if !validRequestID.MatchString(id) {
		id = newRequestID()
	}
	c.Header(HeaderRequestID, id)
	c.Request = c.Request.WithContext(reqlog.WithID(c.Request.Context(), id))
	c.Next()
}

// recover turns a panic in a handler into a logged 500 envelope instead of a dropped connection.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r) // the client went away; let net/http handle it quietly
			}
			s.deps.Log.ErrorContext(c.Request.Context(), "panic in handler", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			if !c.Writer.Written() {
				api.Abort(c, http.StatusInternalServerError, &api.Body{Code: fault.CodeInternal, Message: "internal error"})
			}
		}
	}()
	c.Next()
}

func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	level := slog.LevelInfo
	switch p := c.Request.URL.Path; {
	case c.Writer.Status() >= 500:
		level = slog.LevelError
	case p == "/healthz" || p == "/readyz" || p == "/metrics" || routine(c):
		level = slog.LevelDebug // probes every few seconds would drown everything else
	}
	s.deps.Log.LogAttrs(c.Request.Context(), level, "http request",
		slog.String("method", c.Request.Method),
		slog.String("path", c.Request.URL.Path),
		slog.Int("status", c.Writer.Status()),
		slog.Int("bytes", c.Writer.Size()),
		slog.Duration("duration", time.Since(start)),
		slog.String("client", c.ClientIP()),
	)
}

// routine reports whether a request is an agent's timed traffic that brings no news: a long
// poll that leased nothing, a control poll with nothing to say, a lease renewal, a log chunk.
// Every agent sends them every few seconds; at INFO they buried what happened (a lease, a
// finish, an event, which stay at INFO). NIMBUS_LOG_LEVEL=debug shows them.
func routine(c *gin.Context) bool {
	if c.Writer.Status() >= 300 {
		return false
	}
	switch c.FullPath() {
	case "/api/v1/agent/poll":
		return c.Writer.Status() == http.StatusNoContent
	case "/api/v1/agent/control":
		return c.Writer.Size() <= len("{}")
	case "/api/v1/agent/leases/:lease/renew", "/api/v1/agent/leases/:lease/jobs/:job/log":
		return true
	}
	return false
}

// checkURL refuses, before any route sees it, a request whose URL names nothing Nimbus could
// hold, with a 400 that says why, in the dialect of whoever serves the path. Checked here once
// for every route (the API, git, the registry, downloads, the dashboard), never by handlers:
//
//   - a path or query that is not valid UTF-8 once percent-decoded (GET /api/v1/repos/%ff/x),
//     or holds a control character: no name, ref, version or file of Nimbus can, and the
//     databases refuse such text (PostgreSQL with an error, so every route that passed it on
//     answered 500);
//   - a path with an empty segment ("//") or a "." or ".." segment, before or after decoding
//     (%2e%2e): no name can be empty or a dot, the router binds an empty segment to a
//     parameter as "" (GET /api/v1/hf/…/resolve//weights.bin served the newest version's file),
//     and a ".." that anything cleaned later would name another resource than the one asked
//     for. A trailing slash is allowed (the registry's POST …/blobs/uploads/ has one).
//
// Preview hosts (Server.Handler) are the workspaces' own applications and are not checked.
func (s *Server) checkURL(c *gin.Context) {
	if problem := urlProblem(c.Request.URL); problem != "" {
		s.refuse(c, http.StatusBadRequest, problem)
		return
	}
	c.Next()
}

// urlProblem says what is wrong with u's path or query, or "".
func urlProblem(u *url.URL) string {
	if p := textProblem(u.Path); p != "" {
		return "the URL path " + p
	}
	segments := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	for i, seg := range segments {
		switch {
		case seg == "" && i < len(segments)-1:
			return `the URL path has an empty segment ("//")`
		case seg == "." || seg == "..":
			return fmt.Sprintf("the URL path has a %q segment", seg)
		}
	}
	// What a handler reads with c.Query: pairs ParseQuery could not decode are dropped there
	// too, so they cannot carry anything in.
	query, _ := url.ParseQuery(u.RawQuery)
	for k, vs := range query {
		for _, v := range append([]string{k}, vs...) {
			if p := textProblem(v); p != "" {
				return fmt.Sprintf("the URL query parameter %q %s", k, p)
			}
		}
	}
	return ""
}

func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.ContainsFunc(s, isControl):
		return "holds a control character"
	}
	return ""
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }

// refuse answers a request the edge refuses and stops the chain: the registry and git in their
// own error formats, everything else (the API, downloads, the dashboard) with the envelope.
func (s *Server) refuse(c *gin.Context, status int, message string) {
	p := c.Request.URL.Path
	switch {
	case s.deps.Registry != nil && isRegistryPath(p):
		s.deps.Registry.Refuse(c.Writer, c.Request, status, message)
	case s.deps.Git != nil && isGitPath(p):
		s.deps.Git.Refuse(c.Writer, c.Request, status, message)
	default:
		api.Abort(c, status, &api.Body{Code: edgeCode(status), Message: message})
	}
	c.Abort()
}

// edgeCode is the envelope's code of the statuses the edge answers.
func edgeCode(status int) string {
	if status == http.StatusNotFound {
		return fault.CodeNotFound
	}
	return fault.CodeBadRequest
}
