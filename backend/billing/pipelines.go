package billing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PipelineUsage is what one pipeline has used and costs so far: its settled figures once it is
// settled.
type PipelineUsage struct {
	CoreSeconds int64
	// Cost is what the pipeline costs so far while it runs; once settled, what its account paid
	// (its price less WrittenOff).
	Cost Amount
	// WrittenOff is, once settled, the part of its price the platform wrote off: the time it
	// ran past its last covered window that the balance could not pay.
	WrittenOff Amount
	// Uncovered is, once settled, how long it ran past its last frozen window
	// (PipelineBilling.Uncovered).
	Uncovered time.Duration
}

// PipelineUsage answers, for each pipeline in until, what it used up to that time (its end, or
// now while it runs). A pipeline that never started (no billing record) is absent: it cost
// nothing. The build API shows these figures beside each pipeline.
func (s *Service) PipelineUsage(ctx context.Context, until map[int64]time.Time) (map[int64]PipelineUsage, error) {
	out := make(map[int64]PipelineUsage, len(until))
	if len(until) == 0 {
		return out, nil
	}
	ids := make([]int64, 0, len(until))
	for id := range until {
		ids = append(ids, id)
	}
	var pbs []PipelineBilling
	if err := s.db.WithContext(ctx).Where("pipeline_id IN ?", ids).Find(&pbs).Error; err != nil {
		return nil, fmt.Errorf("billing: pipeline usage: %w", err)
	}
	for i := range pbs {
		cs, cost := pbs[i].SoFar(until[pbs[i].PipelineID])
		out[pbs[i].PipelineID] = PipelineUsage{CoreSeconds: cs, Cost: cost, WrittenOff: pbs[i].WrittenOff(), Uncovered: pbs[i].Uncovered()}
	}
	return out, nil
}

// SettleEnded settles the pipelines that ended while their settlement failed: a pipeline is
// settled when it ends, and the tick calls this to retry what did not go through. It walks the
// unsettled pipelines (its own rows) in pages, asks build (Config.EndedAt) which of them ended
// and when, and settles at most 500 a call; it returns how many it settled.
func (s *Service) SettleEnded(ctx context.Context) (int, error) {
	if s.cfg.EndedAt == nil {
		return 0, errors.New("billing: settle ended pipelines: no EndedAt in the Config")
	}
	const limit, page = 500, 500
	var errs []error
	n := 0
	for after := int64(0); n+len(errs) < limit; {
		var ids []int64
		if err := s.db.WithContext(ctx).Model(&PipelineBilling{}).Where("NOT settled AND pipeline_id > ?", after).
			Order("pipeline_id").Limit(page).Pluck("pipeline_id", &ids).Error; err != nil {
			return n, fmt.Errorf("billing: unsettled pipelines: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
		ended, err := s.cfg.EndedAt(ctx, ids)
		if err != nil {
			return n, fmt.Errorf("billing: ended pipelines: %w", err)
		}
		for _, id := range ids {
			at, ok := ended[id]
			if !ok || n+len(errs) >= limit {
				continue
			}
			if err := s.Settle(ctx, id, at); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
