// Package api holds what every JSON endpoint of Nimbus shares: the one error envelope
// {"error":{"code":"…","message":"…"}}, its stable codes, and the helpers handlers use to write
// it. Domain packages return *Error values (or wrap them with %w) and the handler calls Fail;
// anything else becomes a logged 500 whose message reveals nothing internal.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/internal/userpath"
)

// Stable error codes. Clients switch on these, so they never change meaning.
const (
	CodeBadRequest       = "bad_request"
	CodeValidation       = "validation_failed"
	CodeUnauthenticated  = "unauthenticated"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeTooLarge         = "payload_too_large"
	CodeRateLimited      = "rate_limited"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

// Error is an API error: an HTTP status, a stable code and a message for people.
type Error struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Envelope is the JSON body of every error response.
type Envelope struct {
	Error *Error `json:"error"`
}

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 for malformed input.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, CodeBadRequest, format, args...)
}

// NotFound is a 404. Another team's private thing is also a NotFound, never a Forbidden.
func NotFound(format string, args ...any) *Error {
	return Errorf(http.StatusNotFound, CodeNotFound, format, args...)
}

// Conflict is a 409.
func Conflict(format string, args ...any) *Error {
	return Errorf(http.StatusConflict, CodeConflict, format, args...)
}

// StatusClientClosed is the status a request is recorded with when its client went away before
// the answer (nginx's 499). Nobody reads that answer, and it is no server error: the access log
// files it at INFO.
const StatusClientClosed = 499

// ClientGone says whether the client of a request went away, given the request's context. The
// server cancels that context only then (its base context is never cancelled and no middleware
// sets a deadline), so whatever a handler meets afterwards, typically context.Canceled from the
// database or Redis, is the client's doing: an agent restarting its long-poll, a closed tab.
func ClientGone(ctx context.Context) bool { return ctx.Err() != nil }

// badPath is the 400 of a path that breaks the one path rule (internal/userpath): the message
// names the path and the reason, and so do details.path and details.reason.
func badPath(pe *userpath.Error) *Error {
	e := BadRequest("%s", pe.Error())
	e.Details = map[string]any{"path": pe.Path, "reason": pe.Reason}
	return e
}

// Fail writes err as the error envelope and aborts the request. A path refused by the path
// rule, wherever a service checked it, is a badPath: every route answers it alike without
// converting it itself. Any other non-*Error is logged with the request's context and answered
// as a 500 that says nothing about its cause, unless the client went away: that is logged at
// DEBUG and recorded as StatusClientClosed, so that an ERROR line always means something is
// wrong.
func Fail(c *gin.Context, log *slog.Logger, err error) {
	var ae *Error
	var pe *userpath.Error
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &pe):
		ae = badPath(pe)
	case ClientGone(c.Request.Context()):
		log.DebugContext(c.Request.Context(), "request abandoned by its client", "err", err, "path", c.FullPath())
		c.AbortWithStatus(StatusClientClosed)
		return
	default:
		log.ErrorContext(c.Request.Context(), "request failed", "err", err, "path", c.FullPath())
		ae = Errorf(http.StatusInternalServerError, CodeInternal, "internal error")
	}
	c.AbortWithStatusJSON(ae.Status, Envelope{Error: ae})
}
