package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
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
				c.AbortWithStatusJSON(http.StatusInternalServerError, api.Envelope{Error: api.Errorf(http.StatusInternalServerError, api.CodeInternal, "internal error")})
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
	case p == "/healthz" || p == "/readyz" || p == "/metrics":
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
