package app

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/scheduler"
)

// meter is the scheduler's Meter over package billing: the scheduler may not import billing
// (the layering test says so), so billing's refusals become the scheduler's *Refusal here, with
// the pipeline's end reason and the sentence people read.
type meter struct{ b *billing.Service }

func (m meter) CanStart(ctx context.Context, r scheduler.Run) error {
	return refused(m.b.CanStart(ctx, billing.Run(r)))
}

func (m meter) Start(ctx context.Context, r scheduler.Run, at time.Time) error {
	return refused(m.b.Start(ctx, billing.Run(r), at))
}

// Usage is build's Meter (and the workspace room's) over package billing: build shows what a
// pipeline cost and never computes money, so billing's amounts arrive displayed.
func Usage(b *billing.Service) build.Meter { return usage{b} }

type usage struct{ b *billing.Service }

func (u usage) PipelineUsage(ctx context.Context, until map[int64]time.Time) (map[int64]build.Usage, error) {
	got, err := u.b.PipelineUsage(ctx, until)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]build.Usage, len(got))
	for id, g := range got {
		out[id] = build.Usage{CoreSeconds: g.CoreSeconds, Cost: g.Cost.Display(), WrittenOff: g.WrittenOff.Display(), Uncovered: g.Uncovered}
	}
	return out, nil
}

// refused turns billing's "cannot pay" errors into a *scheduler.Refusal; others pass as they are.
func refused(err error) error {
	for _, r := range []struct {
		err    error
		reason string
	}{{billing.ErrSpendingCap, build.ReasonSpendingCap}, {billing.ErrInsufficientBalance, build.ReasonInsufficientBalance}} {
		if errors.Is(err, r.err) {
			// billing's messages are "<its error>: <why>"; the why is what people read.
			detail, _ := strings.CutPrefix(err.Error(), r.err.Error())
			return &scheduler.Refusal{Reason: r.reason, Detail: strings.TrimPrefix(detail, ": ")}
		}
	}
	return err
}
