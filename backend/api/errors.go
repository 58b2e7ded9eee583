// Package api holds what every JSON endpoint of Nimbus shares: strict body binding, pages, and
// the one error envelope {"error":{"code":"…","message":"…"}}. It is the HTTP edge of the error
// vocabulary: domain packages return *fault.Error values (backend/fault, which knows no HTTP) or
// wrap them with %w, the handler returns them, and Fail maps the fault's kind to its status
// (Status, the one such mapping) and writes the envelope; anything else becomes a logged 500
// whose message reveals nothing internal.
//
// Only handler files import this package (and gin, and net/http's status codes): files named
// http.go, http_*.go or *_http.go, and the edge packages listed in backend/fault's doc. The
// layering test in backend/build holds that rule; everything else speaks in faults.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/fault"

	"github.com/nimbus-build/nimbus/internal/userpath"
)

// Body is the "error" object of the envelope: the code, message and details of a fault.
type Body struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// Envelope is the JSON body of every error response.
type Envelope struct {
	Error *Body `json:"error"`
}

// Status is the HTTP status of a fault of kind k: the one place where kinds meet statuses.
func Status(k fault.Kind) int {
	statuses := [...]int{
		fault.KindInternal:            http.StatusInternalServerError,
		fault.KindBadRequest:          http.StatusBadRequest,
		fault.KindInvalid:             http.StatusUnprocessableEntity,
		fault.KindUnauthenticated:     http.StatusUnauthorized,
		fault.KindForbidden:           http.StatusForbidden,
		fault.KindNotFound:            http.StatusNotFound,
		fault.KindConflict:            http.StatusConflict,
		fault.KindTooLarge:            http.StatusRequestEntityTooLarge,
		fault.KindRangeNotSatisfiable: http.StatusRequestedRangeNotSatisfiable,
		fault.KindRateLimited:         http.StatusTooManyRequests,
		fault.KindUpstreamFailed:      http.StatusBadGateway,
		fault.KindUnavailable:         http.StatusServiceUnavailable,
	}
	if int(k) < len(statuses) {
		return statuses[k]
	}
	return http.StatusInternalServerError
}

// Abort writes an error envelope with status and aborts the request: for the edge's own
// answers (the server's middleware, a readiness check), which have a status but no fault.
func Abort(c *gin.Context, status int, b *Body) {
	c.AbortWithStatusJSON(status, Envelope{Error: b})
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
func badPath(pe *userpath.Error) *fault.Error {
	e := fault.BadRequest("%s", pe.Error())
	e.Details = map[string]any{"path": pe.Path, "reason": pe.Reason}
	return e
}

// Fail writes err as the error envelope and aborts the request: a *fault.Error (or an error
// wrapping one) with the status of its kind (Status) and its code, message and details. A path
// refused by the path rule, wherever a service checked it, is a badPath: every route answers it
// alike without converting it itself. Any other error is logged with the request's context and answered
// as a 500 that says nothing about its cause, unless the client went away: that is logged at
// DEBUG and recorded as StatusClientClosed, so that an ERROR line always means something is
// wrong.
func Fail(c *gin.Context, log *slog.Logger, err error) {
	var fe *fault.Error
	var pe *userpath.Error
	switch {
	case errors.As(err, &fe):
	case errors.As(err, &pe):
		fe = badPath(pe)
	case ClientGone(c.Request.Context()):
		log.DebugContext(c.Request.Context(), "request abandoned by its client", "err", err, "path", c.FullPath())
		c.AbortWithStatus(StatusClientClosed)
		return
	default:
		log.ErrorContext(c.Request.Context(), "request failed", "err", err, "path", c.FullPath())
		fe = fault.New(fault.KindInternal, fault.CodeInternal, "internal error")
	}
	Abort(c, Status(fe.Kind), &Body{Code: fe.Code, Message: fe.Message, Details: fe.Details})
}
