// Package fault is the vocabulary in which Nimbus's domain services say what went wrong for
// the caller: an *Error carries a Kind (not found, forbidden, conflict, invalid, …), a stable
// Code that clients switch on, a Message for people and optional Details. It knows nothing of
// HTTP and imports only the standard library, so a service can return a fault without
// depending on the web framework, as Gitea's services return util.ErrNotExist.
//
// The HTTP edge alone turns a Kind into a status: backend/api's Fail maps it and writes the one
// error envelope {"error":{"code":…,"message":…,"details":…}}. Any error that is not (or does
// not wrap) an *Error is an internal failure there: logged, and answered without its text.
//
// Who uses what: code outside handler files returns faults and never names a status code. A
// handler file is a file named http.go, http_*.go or *_http.go, or any file of backend/api,
// backend/server, backend/app (the composition root), backend/cmd and the packages that
// implement HTTP protocols of their own: backend/registry (OCI distribution), backend/git (git's
// smart HTTP) and backend/artifacts/storage (an S3 client, range serving). A handler file may
// also hold the HTTP plumbing of a room (a reverse proxy, a stream of server-sent events, a
// tunnel's upgrade). backend/build's layering test (httprule_test.go) holds the rule.
package fault

import (
	"errors"
	"fmt"
)

// Kind is what kind of failure an Error is: what the caller did wrong, or why the server cannot
// serve it now. The zero Kind is KindInternal.
type Kind uint8

// The kinds. backend/api maps each to one HTTP status.
const (
	KindInternal            Kind = iota // a failure of the server's own; its text is not shown
	KindBadRequest                      // the input is malformed: not JSON, a wrong type, a bad cursor
	KindInvalid                         // well-formed input that breaks a rule; Details["field"] names it
	KindUnauthenticated                 // no credentials, or credentials that are not valid
	KindForbidden                       // the caller may see the thing but not do this to it
	KindNotFound                        // no such thing, or another team's private thing
	KindConflict                        // the thing's state does not allow this now
	KindTooLarge                        // the input is over a size limit
	KindRangeNotSatisfiable             // a requested byte range lies outside the content
	KindRateLimited                     // too many attempts; try again later
	KindUpstreamFailed                  // a service the request needs answered wrongly (a bad gateway)
	KindUnavailable                     // a service the request needs is down or draining; try again
)

func (k Kind) String() string {
	switch k {
	case KindInternal:
		return "internal"
	case KindBadRequest:
		return "bad request"
	case KindInvalid:
		return "invalid"
	case KindUnauthenticated:
		return "unauthenticated"
	case KindForbidden:
		return "forbidden"
	case KindNotFound:
		return "not found"
	case KindConflict:
		return "conflict"
	case KindTooLarge:
		return "too large"
	case KindRangeNotSatisfiable:
		return "range not satisfiable"
	case KindRateLimited:
		return "rate limited"
	case KindUpstreamFailed:
		return "upstream failed"
	case KindUnavailable:
		return "unavailable"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Stable error codes. Clients switch on these, so they never change meaning. Domain packages
// may use codes of their own (internal/protocol's lease_lost, import_refused) with New.
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

// Error is a failure the caller is told about: its kind, a stable code and a message for people.
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Details map[string]any // shown to the caller as is; nil for none
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// New builds an *Error of kind with code and a formatted message.
func New(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is malformed input (bad_request).
func BadRequest(format string, args ...any) *Error {
	return New(KindBadRequest, CodeBadRequest, format, args...)
}

// Invalid is well-formed input that breaks a rule (validation_failed); field, when not empty,
// names the offending field in Details["field"].
func Invalid(field, format string, args ...any) *Error {
	e := New(KindInvalid, CodeValidation, format, args...)
	if field != "" {
		e.Details = map[string]any{"field": field}
	}
	return e
}

// Unauthenticated is a request without valid credentials (unauthenticated).
func Unauthenticated(format string, args ...any) *Error {
	return New(KindUnauthenticated, CodeUnauthenticated, format, args...)
}

// Forbidden is a caller who may see the thing but not do this to it (forbidden).
func Forbidden(format string, args ...any) *Error {
	return New(KindForbidden, CodeForbidden, format, args...)
}

// NotFound is a missing thing (not_found). Another team's private thing is also a NotFound,
// never a Forbidden, so that its existence is not revealed.
func NotFound(format string, args ...any) *Error {
	return New(KindNotFound, CodeNotFound, format, args...)
}

// Conflict is a thing whose state does not allow this now (conflict).
func Conflict(format string, args ...any) *Error {
	return New(KindConflict, CodeConflict, format, args...)
}

// TooLarge is input over a size limit (payload_too_large).
func TooLarge(format string, args ...any) *Error {
	return New(KindTooLarge, CodeTooLarge, format, args...)
}

// Unavailable is a service the request needs that is down or draining (unavailable).
func Unavailable(format string, args ...any) *Error {
	return New(KindUnavailable, CodeUnavailable, format, args...)
}

// KindOf is the kind of the *Error that err is or wraps, and KindInternal for any other error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
