package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/agent/protocol"
	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/store"
)

// ErrLeaseLost answers a call about a lease the server no longer honours (HTTP 409).
var ErrLeaseLost = &api.Error{Status: 409, Code: protocol.ErrCodeLeaseLost, Message: "the lease is no longer valid: stop this pipeline"}

// Poll waits up to the poll timeout for a pipeline that fits the agent and leases it. It returns
// nil, nil when none came (or the server is draining).
func (s *Service) Poll(ctx context.Context, a *Agent, req protocol.PollRequest, draining <-chan struct{}) (*protocol.Lease, error) {
	s.seen(ctx, a, req.FreeCPUs, len(req.FreeGPUs))
	if len(req.Running) >= a.Concurrency || req.FreeCPUs < 1 {
		return s.idle(ctx, draining, nil)
	}
	classes := s.classesFor(a.tags())
	deadline := time.NewTimer(s.cfg.PollTimeout)
	defer deadline.Stop()
	for {
		// Subscribe before looking, so work enqueued between the look and the wait wakes us.
		waits := make([]<-chan struct{}, len(classes))
		for i, c := range classes {
			waits[i] = s.wake.wait(c)
		}
		lease, err := s.tryDispatch(ctx, a, classes, req)
		if lease != nil || err != nil {
			return lease, err
		}
		woke := make(chan struct{})
		stop := make(chan struct{})
		for _, w := range waits {
			go func(w <-chan struct{}) {
				select {
				case <-w:
					select {
					case woke <- struct{}{}:
					default:
					}
				case <-stop:
				}
			}(w)
		}
		select {
		case <-woke:
			close(stop)
		case <-deadline.C:
			close(stop)
			return nil, nil
		case <-draining:
			close(stop)
			return nil, nil
		case <-ctx.Done():
			close(stop)
			return nil, nil
		}
	}
}

// idle holds a poll that cannot take work until the timeout, so a busy agent does not spin.
func (s *Service) idle(ctx context.Context, draining <-chan struct{}, _ any) (*protocol.Lease, error) {
	t := time.NewTimer(s.cfg.PollTimeout)
	defer t.Stop()
	select {
	case <-t.C:
	case <-draining:
	case <-ctx.Done():
	}
	return nil, nil
}

// tryDispatch asks each class's queue once, starting at a rotating class so a multi-class agent
// serves them evenly, and claims what it gets.
func (s *Service) tryDispatch(ctx context.Context, a *Agent, classes []string, req protocol.PollRequest) (*protocol.Lease, error) {
	if len(classes) == 0 {
		return nil, nil
	}
	start := int(s.clock.Now().UnixNano() % int64(len(classes)))
	capacity := Capacity{FreeCPUs: req.FreeCPUs, TotalCPUs: a.CPUs, FreeGPUs: len(req.FreeGPUs), TotalGPUs: a.gpuCount()}
	for i := range classes {
		class := classes[(start+i)%len(classes)]
		for attempt := 0; attempt < 20; attempt++ {
			id, org, err := s.queue.Dispatch(ctx, class, capacity, s.rules(class), s.clock.Now())
			if errors.Is(err, ErrEmpty) {
				break
			}
			if err != nil {
				return nil, err
			}
			lease, err := s.claim(ctx, a, id, req)
			if err != nil {
				s.queue.Released(ctx, class, org)
				return nil, err
			}
			if lease != nil {
				return lease, nil
			}
			// Cancelled or claimed since it was queued: not ours, try the next entry.
			s.queue.Released(ctx, class, org)
		}
	}
	return nil, nil
}

func newLeaseID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "lease_" + hex.EncodeToString(b)
}

// claim moves a queued pipeline to running under a new lease — only if it is still queued — and
// builds what the agent needs. It returns nil, nil when the pipeline was not queued any more.
func (s *Service) claim(ctx context.Context, a *Agent, pipelineID int64, req protocol.PollRequest) (*protocol.Lease, error) {
	now := s.clock.Now().UTC()
	leaseID := newLeaseID()
	jobToken, err := auth.NewToken(auth.PrefixJob)
	if err != nil {
		return nil, err
	}
	expires := now.Add(s.cfg.LeaseTTL)
	// One statement claims the pipeline and returns it: the claim is the conditional UPDATE
	// itself, so two agents can never both win.
	var rows []build.Pipeline
	res := s.db.WithContext(ctx).Model(&rows).Clauses(clause.Returning{}).
		Where("id = ? AND status = ?", pipelineID, build.StatusQueued).Updates(map[string]any{
		"status": build.StatusRunning, "lease_id": leaseID, "agent_id": a.ID, "lease_expires_at": expires,
		"started_at": now, "updated_at": now, "job_token_hash": auth.HashToken(jobToken), "user_started": false,
		"cancel_requested": false, "reason": "",
	})
	if res.Error != nil || len(rows) == 0 {
		return nil, res.Error
	}
	p := rows[0]
	if s.bill != nil {
		// The first window is frozen before the agent hears of the pipeline: one the account
		// cannot cover never starts.
		err := s.bill.Start(ctx, billing.Run{PipelineID: p.ID, OrgID: p.OrgID, RepoID: p.RepoID, Class: p.RunnerTag, Cores: p.CPUs}, now)
		if errors.Is(err, billing.ErrInsufficientBalance) || errors.Is(err, billing.ErrSpendingCap) {
			reason := ReasonInsufficientBalance
			if errors.Is(err, billing.ErrSpendingCap) {
				reason = ReasonSpendingCap
			}
			if err := s.end(ctx, &p, leaseID, build.StatusFailed, reason); err != nil {
				return nil, err
			}
			return nil, nil
		}
		if err != nil {
			// Not started: put it back as it was, for the next poll to try again.
			s.db.WithContext(ctx).Model(&build.Pipeline{}).Where("id = ? AND lease_id = ?", p.ID, leaseID).
				Updates(map[string]any{"status": build.StatusQueued, "lease_id": "", "agent_id": "", "lease_expires_at": nil, "started_at": nil, "job_token_hash": ""})
			s.Enqueue(ctx, &p)
			return nil, fmt.Errorf("scheduler: billing start of pipeline %d: %w", p.ID, err)
		}
	}
	// The build follows its first running pipeline. Outside the claim on purpose: if this fails
	// the next status change of the build recomputes it from its pipelines.
	if err := s.db.WithContext(ctx).Model(&build.Build{}).Where("id = ? AND status = ?", p.BuildID, build.StatusQueued).
		Updates(map[string]any{"status": build.StatusRunning, "started_at": now, "updated_at": now}).Error; err != nil {
		s.log.WarnContext(ctx, "build status after lease", "build", p.BuildID, "err", err)
	}
	lease, err := s.leaseFor(ctx, &p, leaseID, jobToken, expires, req)
	if err != nil {
		// The agent never hears of this lease; the reaper will put the pipeline back when the
		// lease expires, since no user code ran.
		return nil, fmt.Errorf("scheduler: build lease for pipeline %d: %w", p.ID, err)
	}
	s.log.InfoContext(ctx, "pipeline leased", "pipeline", p.ID, "agent", a.ID, "class", p.RunnerTag, "lease", leaseID)
	return lease, nil
}

// leaseFor assembles the lease of a claimed pipeline.
func (s *Service) leaseFor(ctx context.Context, p *build.Pipeline, leaseID, jobToken string, expires time.Time, req protocol.PollRequest) (*protocol.Lease, error) {
	var plan protocol.Plan
	if err := json.Unmarshal([]byte(p.Plan), &plan); err != nil {
		return nil, err
	}
	// Three queries, whatever the pipeline: the build with its repo and org, the secrets, and the
	// jobs with their stages' positions. Dispatch speed is bounded by these round trips.
	var b struct {
		ID        int64
		Number    int64
		CommitSHA string
		RepoID    int64
		RepoName  string
		OrgName   string
	}
	if err := s.db.WithContext(ctx).Table("builds").
		Select("builds.id, builds.number, builds.commit_sha, builds.repo_id, repos.name AS repo_name, orgs.name AS org_name").
		Joins("JOIN repos ON repos.id = builds.repo_id").Joins("JOIN orgs ON orgs.id = repos.org_id").
		Where("builds.id = ?", p.BuildID).Take(&b).Error; err != nil {
		return nil, err
	}
	secrets, err := s.repos.SecretValues(ctx, b.RepoID)
	if err != nil {
		return nil, err
	}
	var jobs []struct {
		ID            int64
		Position      int
		StagePosition int
	}
	if err := s.db.WithContext(ctx).Table("jobs").Select("jobs.id, jobs.position, stages.position AS stage_position").
		Joins("JOIN stages ON stages.id = jobs.stage_id").Where("jobs.pipeline_id = ?", p.ID).
		Order("stages.position, jobs.position").Scan(&jobs).Error; err != nil {
		return nil, err
	}
	refs := make([]protocol.JobRef, 0, len(jobs))
	for _, j := range jobs {
		refs = append(refs, protocol.JobRef{Stage: j.StagePosition, Job: j.Position, ID: j.ID})
	}
	l := &protocol.Lease{ID: leaseID, PipelineID: p.ID, BuildID: b.ID, ExpiresAt: expires, Plan: plan,
		CloneURL: s.cfg.PublicURL + "/" + b.OrgName + "/" + b.RepoName + ".git", Commit: b.CommitSHA, JobToken: jobToken,
		Secrets: secrets, Jobs: refs,
		Env: map[string]string{
			"CNB_TOKEN":            jobToken,
			"CNB_BUILD_ID":         "nimbus-" + itoa(b.ID),
			"CNB_BUILD_NUMBER":     itoa(b.Number),
			"CNB_PIPELINE_ID":      itoa(p.ID),
			"CNB_BUILD_WEB_URL":    s.cfg.PublicURL + "/" + b.OrgName + "/" + b.RepoName + "/builds/" + itoa(b.Number),
			"CNB_BUILD_START_TIME": p.StartedAt.UTC().Format(time.RFC1123),
		}}
	if n := s.gpusOf(p.RunnerTag); n > 0 && len(req.FreeGPUs) >= n {
		l.GPUs = append([]string(nil), req.FreeGPUs[:n]...)
	}
	return l, nil
}

// pipelineOfLease loads the running pipeline a lease holds, or ErrLeaseLost.
func (s *Service) pipelineOfLease(ctx context.Context, a *Agent, leaseID string) (*build.Pipeline, error) {
	var p build.Pipeline
	err := s.db.WithContext(ctx).Omit("plan").Where("lease_id = ? AND agent_id = ?", leaseID, a.ID).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrLeaseLost
	}
	return &p, err
}

// Renew extends a lease and says whether the pipeline must stop.
func (s *Service) Renew(ctx context.Context, a *Agent, leaseID string) (*protocol.RenewResponse, error) {
	now := s.clock.Now().UTC()
	expires := now.Add(s.cfg.LeaseTTL)
	res := s.db.WithContext(ctx).Model(&build.Pipeline{}).
		Where("lease_id = ? AND agent_id = ? AND status = ?", leaseID, a.ID, build.StatusRunning).
		Updates(map[string]any{"lease_expires_at": expires})
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 0 {
		return nil, ErrLeaseLost
	}
	s.db.WithContext(ctx).Model(&Agent{}).Where("id = ?", a.ID).Update("last_seen_at", now)
	p, err := s.pipelineOfLease(ctx, a, leaseID)
	if err != nil {
		return nil, err
	}
	out := &protocol.RenewResponse{ExpiresAt: expires}
	if p.CancelRequested {
		out.Cancel, out.Reason = true, p.Reason
		if out.Reason == "" {
			out.Reason = "cancelled"
		}
	}
	return out, nil
}

// Event records a step of a running pipeline. Job moves are conditional on the job's current
// status, so a repeated event changes nothing.
func (s *Service) Event(ctx context.Context, a *Agent, leaseID string, ev protocol.Event) error {
	p, err := s.pipelineOfLease(ctx, a, leaseID)
	if err != nil {
		return err
	}
	if p.Status != build.StatusRunning {
		return ErrLeaseLost
	}
	now := s.clock.Now().UTC()
	var finishedJob int64
	err = store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		switch ev.Kind {
		case protocol.EventPipelineStarted:
			return nil
		case protocol.EventJobStarted:
			// From here on user code may have run: an expired lease now fails the pipeline.
			if err := tx.Model(&build.Pipeline{}).Where("id = ? AND lease_id = ?", p.ID, leaseID).Update("user_started", true).Error; err != nil {
				return err
			}
			var j build.Job
			if err := tx.Where("id = ? AND pipeline_id = ?", ev.JobID, p.ID).Take(&j).Error; err != nil {
				return api.NotFound("job %d is not part of this pipeline", ev.JobID)
			}
			if err := tx.Model(&build.Job{}).Where("id = ? AND status = ?", j.ID, build.StatusQueued).
				Updates(map[string]any{"status": build.StatusRunning, "started_at": now}).Error; err != nil {
				return err
			}
			return tx.Model(&build.Stage{}).Where("id = ? AND status = ?", j.StageID, build.StatusQueued).
				Updates(map[string]any{"status": build.StatusRunning, "started_at": now}).Error
		case protocol.EventJobFinished:
			if !build.Terminal(ev.Status) {
				return api.Invalid("status", "job_finished needs a final status, not %q", ev.Status)
			}
			var j build.Job
			if err := tx.Where("id = ? AND pipeline_id = ?", ev.JobID, p.ID).Take(&j).Error; err != nil {
				return api.NotFound("job %d is not part of this pipeline", ev.JobID)
			}
			if err := tx.Model(&build.Job{}).Where("id = ? AND status IN ?", j.ID, []string{build.StatusQueued, build.StatusRunning}).
				Updates(map[string]any{"status": ev.Status, "exit_code": ev.ExitCode, "finished_at": now}).Error; err != nil {
				return err
			}
			finishedJob = j.ID
			return settleStage(tx, j.StageID, now)
		default:
			return api.Invalid("kind", "unknown event kind %q", ev.Kind)
		}
	})
	if err != nil {
		return err
	}
	// After the commit: the log service writes in its own transaction, and streams waiting on
	// the log learn it is complete.
	if finishedJob != 0 && s.logs != nil {
		return s.logs.Complete(ctx, finishedJob)
	}
	return nil
}

// settleStage finishes a stage once none of its jobs is queued or running.
func settleStage(tx *gorm.DB, stageID int64, now time.Time) error {
	var statuses []string
	if err := tx.Model(&build.Job{}).Where("stage_id = ?", stageID).Pluck("status", &statuses).Error; err != nil {
		return err
	}
	final := build.StatusSuccess
	for _, st := range statuses {
		switch st {
		case build.StatusQueued, build.StatusRunning:
			return nil
		case build.StatusFailed:
			final = build.StatusFailed
		case build.StatusCancelled:
			if final != build.StatusFailed {
				final = build.StatusCancelled
			}
		}
	}
	return tx.Model(&build.Stage{}).Where("id = ? AND status IN ?", stageID, []string{build.StatusQueued, build.StatusRunning}).
		Updates(map[string]any{"status": final, "finished_at": now}).Error
}

// Finish records a pipeline's final status. Repeating it is harmless; a lease that is gone
// gets ErrLeaseLost.
func (s *Service) Finish(ctx context.Context, a *Agent, leaseID string, req protocol.FinishRequest) error {
	switch req.Status {
	case build.StatusSuccess, build.StatusFailed, build.StatusCancelled:
	default:
		return api.Invalid("status", "a pipeline finishes success, failed or cancelled, not %q", req.Status)
	}
	p, err := s.pipelineOfLease(ctx, a, leaseID)
	if err != nil {
		return err
	}
	if build.Terminal(p.Status) {
		return nil // a retried finish
	}
	status, reason := req.Status, req.Reason
	if p.CancelRequested && p.Reason != "" {
		// Billing or the API stopped it: its reason wins over the agent's view.
		reason = p.Reason
		if p.Reason == ReasonInsufficientBalance {
			status = build.StatusTerminated
		} else {
			status = build.StatusCancelled
		}
	}
	return s.end(ctx, p, leaseID, status, reason)
}

// Reasons a pipeline ended other than by its own jobs.
const (
	ReasonAgentLost           = "agent_lost"
	ReasonCancelled           = "cancelled"
	ReasonInsufficientBalance = "insufficient_balance"
	ReasonSpendingCap         = "spending_cap_reached"
)

// end moves a running pipeline to a final status under its lease, closes its unfinished jobs and
// stages, releases the team's concurrency slot and refreshes the build.
func (s *Service) end(ctx context.Context, p *build.Pipeline, leaseID, status, reason string) error {
	now := s.clock.Now().UTC()
	ended := false
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		res := tx.Model(&build.Pipeline{}).Where("id = ? AND lease_id = ? AND status = ?", p.ID, leaseID, build.StatusRunning).
			Updates(map[string]any{"status": status, "reason": reason, "finished_at": now, "updated_at": now,
				"lease_expires_at": nil, "job_token_hash": ""})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		ended = true
		leftover := build.StatusSkipped
		if status == build.StatusCancelled || status == build.StatusTerminated {
			leftover = build.StatusCancelled
		}
		running := build.StatusCancelled
		if status == build.StatusFailed {
			running = build.StatusFailed
		}
		if err := tx.Model(&build.Job{}).Where("pipeline_id = ? AND status = ?", p.ID, build.StatusRunning).
			Updates(map[string]any{"status": running, "finished_at": now}).Error; err != nil {
			return err
		}
		if err := tx.Model(&build.Job{}).Where("pipeline_id = ? AND status = ?", p.ID, build.StatusQueued).
			Updates(map[string]any{"status": leftover}).Error; err != nil {
			return err
		}
		var stageIDs []int64
		if err := tx.Model(&build.Stage{}).Where("pipeline_id = ?", p.ID).Pluck("id", &stageIDs).Error; err != nil {
			return err
		}
		for _, id := range stageIDs {
			if err := settleStage(tx, id, now); err != nil {
				return err
			}
		}
		return build.RefreshStatus(tx, p.BuildID, now)
	})
	if err != nil {
		return err
	}
	if !ended {
		var cur build.Pipeline
		if err := s.db.WithContext(ctx).Omit("plan").Take(&cur, p.ID).Error; err == nil && cur.LeaseID == leaseID && build.Terminal(cur.Status) {
			return nil
		}
		return ErrLeaseLost
	}
	s.queue.Released(ctx, p.RunnerTag, p.OrgID)
	if s.bill != nil {
		// Settled after the status commit, once (billing claims the settlement itself); a
		// failure here is retried by the tick, which settles what ended unsettled.
		if err := s.bill.Settle(ctx, p.ID, now); err != nil {
			s.log.ErrorContext(ctx, "settlement failed; the billing tick retries it", "pipeline", p.ID, "err", err)
		}
	}
	if s.logs != nil {
		var jobIDs []int64
		s.db.WithContext(ctx).Model(&build.Job{}).Where("pipeline_id = ?", p.ID).Pluck("id", &jobIDs)
		for _, id := range jobIDs {
			s.logs.Complete(ctx, id)
		}
	}
	s.log.InfoContext(ctx, "pipeline finished", "pipeline", p.ID, "status", status, "reason", reason)
	return nil
}

// ResolveJobToken authenticates a pipeline's CNB_TOKEN: valid only while the pipeline runs,
// scoped to its repo (clone, push, registry).
func (s *Service) ResolveJobToken(ctx context.Context, token string) (*auth.Principal, error) {
	bad := api.Unauthenticated("the job token is invalid or its pipeline has finished")
	var p build.Pipeline
	err := s.db.WithContext(ctx).Omit("plan").Where("job_token_hash = ? AND status = ?", auth.HashToken(token), build.StatusRunning).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, bad
	}
	if err != nil {
		return nil, err
	}
	var b build.Build
	if err := s.db.WithContext(ctx).Take(&b, p.BuildID).Error; err != nil {
		return nil, err
	}
	pr := &auth.Principal{Kind: auth.KindJob, RepoID: p.RepoID, PipelineID: p.ID,
		Scopes: auth.Scopes{auth.ScopeRepoWrite, auth.ScopeRegistryWrite}}
	if b.TriggeredBy != nil {
		var u auth.User
		if s.db.WithContext(ctx).Take(&u, *b.TriggeredBy).Error == nil {
			pr.User = &u
		}
	}
	return pr, nil
}

func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}
