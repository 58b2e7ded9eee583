package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
)

// FireSchedules fires every schedule that is due. Each fire time produces exactly one build even
// with several replicas — build fires it for the replica whose conditional update of
// last_fired_at wins — and after downtime a schedule fires once for the latest missed time, not
// once per miss.
func (s *Service) FireSchedules(ctx context.Context) (int, error) {
	all, err := s.builds.Schedules(ctx)
	if err != nil {
		return 0, fmt.Errorf("scheduler: schedules: %w", err)
	}
	now := s.clock.Now().UTC()
	fired := 0
	for i := range all {
		sc := &all[i]
		since := sc.CreatedAt
		if sc.LastFiredAt != nil {
			since = *sc.LastFiredAt
		}
		due, ok := lastDue(spec.Schedule{Cron: sc.Cron, Location: s.cfg.Location}, since, now)
		if !ok {
			continue
		}
		b, won, err := s.builds.FireSchedule(ctx, sc, due)
		if !won && err != nil {
			return fired, err
		}
		if !won {
			continue // another replica fired it
		}
		if err != nil {
			s.log.ErrorContext(ctx, "schedule fire failed", "schedule", sc.ID, "err", err)
			continue
		}
		fired++
		if b != nil {
			s.log.InfoContext(ctx, "schedule fired", "schedule", sc.ID, "branch", sc.Branch, "cron", sc.Cron, "build", b.Number, "due", due)
		}
	}
	return fired, nil
}

// lastDue returns the latest fire time in (since, now].
func lastDue(sc spec.Schedule, since, now time.Time) (time.Time, bool) {
	next := sc.Next(since)
	if next.IsZero() || next.After(now) {
		return time.Time{}, false
	}
	due := next
	// A schedule fires at most every 5 minutes, so a year of downtime is ~100k steps: cheap, but
	// bounded anyway by jumping close to now first.
	if now.Sub(due) > 48*time.Hour {
		if j := sc.Next(now.Add(-48 * time.Hour)); !j.IsZero() && !j.After(now) {
			due = j
		}
	}
	for {
		n := sc.Next(due)
		if n.IsZero() || n.After(now) {
			return due, true
		}
		due = n
	}
}
