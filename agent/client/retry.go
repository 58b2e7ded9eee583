package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nimbus-build/nimbus/internal/backoff"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// This file is the agent's one retry policy. Every API call goes through Retry.do; nobody else
// writes a retry loop. The rule, from the protocol: network errors, 5xx and 429 are retried with
// capped exponential backoff (honouring Retry-After); every other 4xx is final, because asking
// again cannot change the answer. A 409 with code lease_lost is final too and matches
// ErrLeaseLost, so the caller stops that pipeline's work.

// ErrLeaseLost means the server no longer honours the lease (409 lease_lost): stop the work and
// drop the remaining reports. Test with errors.Is.
var ErrLeaseLost = errors.New("client: lease lost")

// ErrUnauthenticated means the server refused the token (401): the agent token was revoked or
// never existed there, so the agent must register again. Test with errors.Is.
var ErrUnauthenticated = errors.New("client: unauthenticated")

// APIError is a non-2xx answer of the server.
type APIError struct {
	Method, Path string
	Status       int
	Code         string // the envelope's error code, "" when the body had none
	Message      string
	RetryAfter   time.Duration // from the Retry-After header, 0 when absent
}

func (e *APIError) Error() string {
	msg := e.Message
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	return fmt.Sprintf("client: %s %s: %d %s", e.Method, e.Path, e.Status, msg)
}

// Is makes errors.Is(err, ErrLeaseLost) and errors.Is(err, ErrUnauthenticated) work.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrLeaseLost:
		return e.Status == http.StatusConflict && e.Code == protocol.ErrCodeLeaseLost
	case ErrUnauthenticated:
		return e.Status == http.StatusUnauthorized
	}
	return false
}

// Retry is the backoff policy. A zero field takes the protocol's default: "a few seconds,
// capped" — 250 ms doubling up to 5 s, giving up after a minute.
type Retry struct {
	// Initial is the first wait; each next one doubles up to Max.
	Initial time.Duration
	Max     time.Duration
	// GiveUpAfter bounds the whole call, waits included. A lease the server cannot hear about
	// for longer than its TTL is lost anyway, so retrying for ever only hides the outage.
	GiveUpAfter time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Initial <= 0 {
		r.Initial = 250 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 5 * time.Second
	}
	if r.GiveUpAfter <= 0 {
		r.GiveUpAfter = time.Minute
	}
	return r
}

// Retryable reports whether a call that failed with err may succeed when sent again.
func Retryable(err error) bool {
	var perm *permanentError
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &perm) {
		return false
	}
	var api *APIError
	if errors.As(err, &api) {
		return api.Status >= 500 || api.Status == http.StatusTooManyRequests
	}
	return true // the request never got an answer: a network error
}

// do runs attempt until it succeeds, fails for good, the policy gives up or ctx ends. It returns
// the last error.
func (r Retry) do(ctx context.Context, attempt func() error) error {
	deadline := time.Now().Add(r.GiveUpAfter)
	policy := backoff.Policy{Initial: r.Initial, Max: r.Max}
	wait := policy.Next(0)
	for {
		err := attempt()
		if err == nil || !Retryable(err) || ctx.Err() != nil {
			return err
		}
		pause := wait
		var api *APIError
		if errors.As(err, &api) && api.RetryAfter > pause {
			pause = min(api.RetryAfter, r.Max)
		}
		if time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("%w (gave up after %s)", err, r.GiveUpAfter)
		}
		if serr := backoff.Sleep(ctx, pause); serr != nil {
			return errors.Join(err, serr)
		}
		wait = policy.Next(wait)
	}
}

// parseRetryAfter reads a Retry-After header in seconds; dates are rare from an API and ignored.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// permanentError is a failure on this side that no retry mends (a local file that cannot be read).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }
