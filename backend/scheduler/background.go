package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/backend/store"
	"gorm.io/gorm"
)

// Reap handles leases that expired (the agent stopped renewing): a pipeline whose user code may
// have run fails with reason agent_lost — user code is never re-run on its own — and one that
// had not started any job goes back to the queue. It returns how many it handled.
func (s *Service) Reap(ctx context.Context) (int, error) {
	now := s.clock.Now().UTC()
	var expired []build.Pipeline
	if err := s.db.WithContext(ctx).Omit("plan").Where("status = ? AND lease_expires_at < ?", build.StatusRunning, now).
		Limit(500).Find(&expired).Error; err != nil {
		return 0, fmt.Errorf("scheduler: reap: %w", err)
	}
	n := 0
	for i := range expired {
		p := &expired[i]
		if p.CancelRequested {
			// Stopped while its agent was gone: it ends cancelled (or terminated, when billing
			// stopped it); it does not go back.
			status := build.StatusCancelled
			if p.Reason == ReasonInsufficientBalance {
				status = build.StatusTerminated
			}
			if err := s.end(ctx, p, p.LeaseID, status, p.Reason); err != nil && err != ErrLeaseLost {
				return n, err
			}
			n++
			continue
		}
		if p.UserStarted {
			if err := s.end(ctx, p, p.LeaseID, build.StatusFailed, ReasonAgentLost); err != nil && err != ErrLeaseLost {
				return n, err
			}
			n++
			continue
		}
		requeued := false
		err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
			res := tx.Model(&build.Pipeline{}).Where("id = ? AND lease_id = ? AND status = ?", p.ID, p.LeaseID, build.StatusRunning).
				Updates(map[string]any{"status": build.StatusQueued, "lease_id": "", "agent_id": "", "lease_expires_at": nil,
					"started_at": nil, "job_token_hash": "", "queued_at": now, "updated_at": now})
			requeued = res.RowsAffected == 1
			return res.Error
		})
		if err != nil {
			return n, err
		}
		if requeued {
			s.queue.Released(ctx, p.RunnerTag, p.OrgID)
			p.Status, p.QueuedAt = build.StatusQueued, &now
			if err := s.Enqueue(ctx, p); err != nil {
				s.log.WarnContext(ctx, "re-enqueue after expired lease", "pipeline", p.ID, "err", err)
			}
			s.log.InfoContext(ctx, "lease expired before any job started; pipeline re-queued", "pipeline", p.ID)
			n++
		}
	}
	return n, nil
}

// Reconcile makes Redis agree with the database: every queued pipeline is in its queue (after a
// Redis restart or FLUSHALL they come back here), and the per-team running counts are the
// database's. It returns how many pipelines it re-queued.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	var queued []build.Pipeline
	if err := s.db.WithContext(ctx).Select("id, org_id, runner_tag, cpus, queued_at, created_at").
		Where("status = ?", build.StatusQueued).Find(&queued).Error; err != nil {
		return 0, fmt.Errorf("scheduler: reconcile: %w", err)
	}
	byClass := map[string][]build.Pipeline{}
	for _, p := range queued {
		byClass[p.RunnerTag] = append(byClass[p.RunnerTag], p)
	}
	n := 0
	for class, ps := range byClass {
		ids := make([]int64, len(ps))
		for i, p := range ps {
			ids[i] = p.ID
		}
		in, err := s.queue.Queued(ctx, class, ids)
		if err != nil {
			return n, err
		}
		for i := range ps {
			if !in[ps[i].ID] {
				if err := s.Enqueue(ctx, &ps[i]); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	var running []struct {
		RunnerTag string
		OrgID     int64
		N         int
	}
	if err := s.db.WithContext(ctx).Model(&build.Pipeline{}).Select("runner_tag, org_id, count(*) AS n").
		Where("status = ?", build.StatusRunning).Group("runner_tag, org_id").Scan(&running).Error; err != nil {
		return n, err
	}
	counts := map[string]map[int64]int{}
	for _, c := range s.cfg.Classes {
		counts[c.Tags[0]] = map[int64]int{}
	}
	for _, r := range running {
		if counts[r.RunnerTag] == nil {
			counts[r.RunnerTag] = map[int64]int{}
		}
		counts[r.RunnerTag][r.OrgID] = r.N
	}
	for class, m := range counts {
		if err := s.queue.SetRunning(ctx, class, m); err != nil {
			return n, err
		}
	}
	if n > 0 {
		s.log.InfoContext(ctx, "reconciler re-queued pipelines Redis had lost", "count", n)
	}
	return n, nil
}

// CancelBuild cancels a build: queued pipelines end at once; running ones are told to stop at
// their agent's next renew and end when it reports (or when their lease expires).
func (s *Service) CancelBuild(ctx context.Context, buildID int64, reason string) error {
	now := s.clock.Now().UTC()
	var cancelledJobs []int64
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := tx.Model(&build.Pipeline{}).Where("build_id = ? AND status = ?", buildID, build.StatusQueued).
			Updates(map[string]any{"status": build.StatusCancelled, "reason": reason, "finished_at": now, "updated_at": now}).Error; err != nil {
			return err
		}
		var ids []int64
		if err := tx.Model(&build.Pipeline{}).Where("build_id = ? AND status = ?", buildID, build.StatusCancelled).Pluck("id", &ids).Error; err != nil {
			return err
		}
		if len(ids) > 0 {
			if err := tx.Model(&build.Job{}).Where("pipeline_id IN ? AND status = ?", ids, build.StatusQueued).
				Pluck("id", &cancelledJobs).Error; err != nil {
				return err
			}
			if err := tx.Model(&build.Job{}).Where("pipeline_id IN ? AND status = ?", ids, build.StatusQueued).
				Update("status", build.StatusCancelled).Error; err != nil {
				return err
			}
			if err := tx.Model(&build.Stage{}).Where("pipeline_id IN ? AND status = ?", ids, build.StatusQueued).
				Update("status", build.StatusCancelled).Error; err != nil {
				return err
			}
		}
		if err := tx.Model(&build.Pipeline{}).Where("build_id = ? AND status = ?", buildID, build.StatusRunning).
			Updates(map[string]any{"cancel_requested": true, "reason": reason}).Error; err != nil {
			return err
		}
		return build.RefreshStatus(tx, buildID, now)
	})
	if err != nil {
		return err
	}
	// Jobs that never ran have complete (empty) logs: their streams end.
	if s.logs != nil {
		for _, id := range cancelledJobs {
			s.logs.Complete(ctx, id)
		}
	}
	return nil
}

// Run drives the background work until ctx ends: relaying work notifications, and — on the one
// replica holding the leader lock — reaping, reconciling and firing schedules every tick.
func (s *Service) Run(ctx context.Context, tick time.Duration) {
	if tick <= 0 {
		tick = 5 * time.Second
	}
	go s.listen(ctx)
	lead := redisconn.NewLeader(s.rdb, "nimbus:leader:scheduler", 3*tick)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if lead.Hold(ctx) {
			if _, err := s.Reap(ctx); err != nil {
				s.log.ErrorContext(ctx, "reaper", "err", err)
			}
			if _, err := s.Reconcile(ctx); err != nil {
				s.log.ErrorContext(ctx, "reconciler", "err", err)
			}
			if _, err := s.FireSchedules(ctx); err != nil {
				s.log.ErrorContext(ctx, "cron", "err", err)
			}
			if err := s.BillingTick(ctx); err != nil {
				s.log.ErrorContext(ctx, "billing tick", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// BillingTick freezes the next window of running pipelines and stops the ones their account can
// no longer cover: they end terminated with reason insufficient_balance when their agent reports
// (at its next renew), or when their lease expires. It also settles pipelines that ended while
// a settlement failed.
func (s *Service) BillingTick(ctx context.Context) error {
	if s.bill == nil {
		return nil
	}
	stop, err := s.bill.Tick(ctx)
	for _, id := range stop {
		if cerr := s.stopPipeline(ctx, id, ReasonInsufficientBalance); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	var ended []build.Pipeline
	if qerr := s.db.WithContext(ctx).Omit("plan").Table("pipelines").Select("pipelines.id, pipelines.finished_at").
		Joins("JOIN pipeline_billing ON pipeline_billing.pipeline_id = pipelines.id").
		Where("NOT pipeline_billing.settled AND pipelines.finished_at IS NOT NULL").Limit(500).Scan(&ended).Error; qerr != nil {
		return errors.Join(err, qerr)
	}
	for _, p := range ended {
		if serr := s.bill.Settle(ctx, p.ID, *p.FinishedAt); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return err
}

// stopPipeline asks the agent running a pipeline to stop, with a reason.
func (s *Service) stopPipeline(ctx context.Context, pipelineID int64, reason string) error {
	return s.db.WithContext(ctx).Model(&build.Pipeline{}).Where("id = ? AND status = ?", pipelineID, build.StatusRunning).
		Updates(map[string]any{"cancel_requested": true, "reason": reason}).Error
}
