// Package backoff is the one backoff helper of Nimbus: how long to wait before trying again,
// for the agent and the server alike (it lives in the root internal/ because the agent may not
// import backend; the layering test keeps it free of both).
//
// It is a few lines of our own rather than github.com/cenkalti/backoff: the loops that use it
// count their failures in different places — in a local variable (the agent's control poll, the
// API client, the CLI), or in a database row (the webhook outbox), where the next try is a due
// time computed from the injectable clock by whichever server claims the row. So the helper is
// a pure function of the attempt number or the previous wait, with no timers, no clock and no
// state of its own; Sleep is the one place that waits.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy describes a sequence of waits: Initial, then doubling (or, when Linear, growing by
// Initial each time), capped at Max when Max is positive, each spread by ±Jitter (a fraction,
// 0.2 for ±20 %) so many clients that failed together do not come back together.
type Policy struct {
	Initial time.Duration
	Max     time.Duration
	Linear  bool
	Jitter  float64
}

// After is the wait after the n-th failure in a row (n ≥ 1; n < 1 counts as 1).
func (p Policy) After(n int) time.Duration {
	n = max(n, 1)
	var d time.Duration
	if p.Linear {
		d = p.Initial * time.Duration(n)
		if p.Max > 0 && (d > p.Max || d/time.Duration(n) != p.Initial) {
			d = p.Max
		}
		return p.jitter(d)
	}
	d = p.Initial
	for i := 1; i < n && (p.Max <= 0 || d < p.Max) && d < time.Duration(1)<<61; i++ {
		d *= 2
	}
	return p.jitter(p.capped(d))
}

// Next is the wait after a failure that followed a wait of prev: Initial when prev is 0 (the
// first failure), otherwise twice prev, within [Initial, Max]. It suits loops that keep only
// the last wait, and restart from 0 after a success.
func (p Policy) Next(prev time.Duration) time.Duration {
	return p.jitter(p.capped(max(2*prev, p.Initial)))
}

func (p Policy) capped(d time.Duration) time.Duration {
	if p.Max > 0 {
		return min(d, p.Max)
	}
	return d
}

func (p Policy) jitter(d time.Duration) time.Duration {
	if p.Jitter <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 - p.Jitter + 2*p.Jitter*rand.Float64()))
}

// Sleep waits d, or until ctx ends, in which case it returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
