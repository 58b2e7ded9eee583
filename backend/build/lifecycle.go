package build

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Lifecycle is what the scheduler asks of builds: the lease path (claim, renew, park, refuse)
// and its background work (reap, reconcile, locks, cron). An agent's own reports about its
// pipeline (events, finish, log checks, child builds, cnb:resolve/await) are not the
// scheduler's: backend/agentapi calls them through its Runs interface. *Service implements it;
// backend/app passes it to the scheduler, which never touches build's tables itself.
//
// Every method that moves a pipeline is one conditional UPDATE on its status and, once it is
// leased, its lease id: a late, repeated or fenced-off call changes nothing and says so
// (ErrLeaseLost, or false). Methods may be called concurrently from any number of replicas.
type Lifecycle interface {
	// Claim moves a queued pipeline to running under the lease l, and its build with it. It
	// returns nil and no error when the pipeline was not queued any more (cancelled, or another
	// agent won).
	Claim(ctx context.Context, pipelineID int64, l Lease) (*Pipeline, error)
	// NoteSecrets keeps the names of the repo secrets a running pipeline's lease hands its jobs.
	NoteSecrets(ctx context.Context, pipelineID int64, leaseID string, names []string) error
	// Requeue puts a running pipeline that no user code touched back in the queue (its lease
	// expired before a job started, or billing could not start it), queued since queuedAt, and
	// tells the queue. It reports whether it did.
	Requeue(ctx context.Context, p *Pipeline, queuedAt time.Time) (bool, error)
	// End moves a running pipeline to a final status with a reason, closes its unfinished jobs
	// and stages and rolls the build up. It reports whether this call ended it; a pipeline this
	// lease already ended is false and no error, one another lease holds is ErrLeaseLost.
	End(ctx context.Context, p *Pipeline, status, reason string) (bool, error)
	// Refuse ends a pipeline that was claimed but never handed to an agent (billing refused its
	// first window): failed with the reason, and no start time, because nothing ran.
	Refuse(ctx context.Context, p *Pipeline, reason string) (bool, error)
	// Park puts a claimed pipeline that no agent has heard of back to queued with a reason (it
	// waits for a lock, see the scheduler's locks.go), in its place but not on any queue: the
	// caller enqueues it again when it may run. It reports whether it did; it does not when the
	// pipeline was asked to stop since its claim.
	Park(ctx context.Context, p *Pipeline, reason string) (bool, error)
	// Drop ends a queued pipeline with a status and reason (a lock wait that timed out or was
	// cancelled by a newer one). It reports whether it did.
	Drop(ctx context.Context, pipelineID int64, status, reason string) (bool, error)
	// QueuedPipeline returns a queued pipeline with its plan, or nil when it is not queued.
	QueuedPipeline(ctx context.Context, pipelineID int64) (*Pipeline, error)
	// Renew extends the agent's lease until the given time and returns its pipeline, whose
	// CancelRequested and Reason say whether it must stop.
	Renew(ctx context.Context, agentID, leaseID string, until time.Time) (*Pipeline, error)
	// RunInfo is what an agent needs to know of a claimed pipeline beyond its Plan.
	RunInfo(ctx context.Context, p *Pipeline) (*RunInfo, error)
	// Leased returns the running pipeline the agent's lease holds (ErrLeaseLost otherwise): what
	// an agent's request on behalf of the pipeline (an import) is checked against.
	Leased(ctx context.Context, agentID, leaseID string) (*Pipeline, error)
	// Reap handles up to 500 running pipelines whose lease expired before now: it ends or
	// re-queues each and returns them. The ends go to the OnEnded subscribers.
	Reap(ctx context.Context, now time.Time, leaseTTL time.Duration) ([]Reaped, error)
	// RequestStop asks the agent of a running pipeline to stop it, with a reason; the agent is
	// told at once through Config.Agents (and at its next renew in any case).
	RequestStop(ctx context.Context, pipelineID int64, reason string) error
	// Stopping lists the pipelines among the agent's leases that must stop (lease id and
	// reason): what the agent's control long-poll answers.
	Stopping(ctx context.Context, agentID string, leaseIDs []string) ([]Pipeline, error)
	// Queued lists every queued pipeline (id, team, repo, class, cores, workspace, queue time),
	// oldest first.
	Queued(ctx context.Context) ([]Pipeline, error)
	// RunningCounts counts running pipelines per runner class and team.
	RunningCounts(ctx context.Context) ([]RunningCount, error)
	// Held lists the running pipelines held by agents, with their build, team and repo.
	Held(ctx context.Context) ([]Held, error)
	// Schedules lists every registered schedule; FireSchedule fires one at its due time, once
	// across replicas.
	Schedules(ctx context.Context) ([]Schedule, error)
	FireSchedule(ctx context.Context, sc *Schedule, due time.Time) (*Build, bool, error)
}

var _ Lifecycle = (*Service)(nil)

// ErrLeaseLost answers a call about a lease the server no longer honours (a conflict, which
// the agent reads as a 409 lease_lost): the agent must stop that pipeline.
var ErrLeaseLost = &fault.Error{Kind: fault.KindConflict, Code: protocol.ErrCodeLeaseLost, Message: "the lease is no longer valid: stop this pipeline"}

// Lease is what a claim records on the pipeline: who holds it, until when, and the hash of the
// job token its jobs authenticate with.
type Lease struct {
	ID           string
	AgentID      string
	ExpiresAt    time.Time
	JobTokenHash string
	// Host is the agent and its host as the pipeline's record keeps them (JSON).
	Host string
}

// NoteSecrets keeps the names of the repo secrets the lease of a running pipeline hands its
// jobs, for its record. Fenced by the lease like every move of a leased pipeline.
func (s *Service) NoteSecrets(ctx context.Context, pipelineID int64, leaseID string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	names = slices.Clone(names)
	slices.Sort(names)
	raw, err := json.Marshal(names)
	if err != nil {
		return err
	}
	return s.db.WithContext(ctx).Model(&Pipeline{}).Where("id = ? AND lease_id = ?", pipelineID, leaseID).
		Update("secret_names", string(raw)).Error
}

// Claim implements Lifecycle. One statement claims the pipeline and returns it: the claim is the
// conditional UPDATE itself, so two agents can never both win.
func (s *Service) Claim(ctx context.Context, pipelineID int64, l Lease) (*Pipeline, error) {
	now := s.clock.Now().UTC()
	var rows []Pipeline
	res := s.db.WithContext(ctx).Model(&rows).Clauses(clause.Returning{}).
		Where("id = ? AND status = ?", pipelineID, StatusQueued).Updates(map[string]any{
		"status": StatusRunning, "lease_id": l.ID, "agent_id": l.AgentID, "lease_expires_at": l.ExpiresAt,
		"started_at": now, "updated_at": now, "job_token_hash": l.JobTokenHash, "user_started": false,
		"cancel_requested": false, "reason": "", "host": l.Host,
	})
	if res.Error != nil || len(rows) == 0 {
		return nil, res.Error
	}
	p := rows[0]
	// The build follows its first running pipeline. Outside the claim on purpose: if this fails
	// the next status change of the build recomputes it from its pipelines.
	if err := s.db.WithContext(ctx).Model(&Build{}).Where("id = ? AND status = ?", p.BuildID, StatusQueued).
		Updates(map[string]any{"status": StatusRunning, "started_at": now, "updated_at": now}).Error; err != nil {
		s.log.WarnContext(ctx, "build status after lease", "build", p.BuildID, "err", err)
	}
	return &p, nil
}

// Requeue implements Lifecycle.
func (s *Service) Requeue(ctx context.Context, p *Pipeline, queuedAt time.Time) (bool, error) {
	now := s.clock.Now().UTC()
	res := s.db.WithContext(ctx).Model(&Pipeline{}).Where("id = ? AND lease_id = ? AND status = ?", p.ID, p.LeaseID, StatusRunning).
		Updates(map[string]any{"status": StatusQueued, "lease_id": "", "agent_id": "", "lease_expires_at": nil,
			"started_at": nil, "job_token_hash": "", "queued_at": queuedAt, "updated_at": now})
	if res.Error != nil || res.RowsAffected == 0 {
		return false, res.Error
	}
	p.Status, p.QueuedAt, p.LeaseID, p.AgentID, p.StartedAt = StatusQueued, &queuedAt, "", "", nil
	s.enqueue(ctx, p)
	return true, nil
}

// Park implements Lifecycle.
func (s *Service) Park(ctx context.Context, p *Pipeline, reason string) (bool, error) {
	now := s.clock.Now().UTC()
	queuedAt := p.QueuedSince()
	// Not when a cancel came since the claim: the next claim would forget it.
	res := s.db.WithContext(ctx).Model(&Pipeline{}).
		Where("id = ? AND lease_id = ? AND status = ? AND cancel_requested = ?", p.ID, p.LeaseID, StatusRunning, false).
		Updates(map[string]any{"status": StatusQueued, "lease_id": "", "agent_id": "", "lease_expires_at": nil,
			"started_at": nil, "job_token_hash": "", "queued_at": queuedAt, "reason": reason, "host": "", "updated_at": now})
	if res.Error != nil || res.RowsAffected == 0 {
		return false, res.Error
	}
	// The build may have gone running with this claim; it stays so (builds only move forward),
	// and the pipeline's status and reason say it waits.
	p.Status, p.Reason, p.QueuedAt, p.LeaseID, p.AgentID, p.StartedAt, p.Host = StatusQueued, reason, &queuedAt, "", "", nil, ""
	return true, nil
}

// Drop implements Lifecycle.
func (s *Service) Drop(ctx context.Context, pipelineID int64, status, reason string) (bool, error) {
	now := s.clock.Now().UTC()
	dropped := false
	var jobIDs []int64
	var buildID int64
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		var rows []Pipeline
		res := tx.Model(&rows).Clauses(clause.Returning{Columns: []clause.Column{{Name: "build_id"}}}).
			Where("id = ? AND status = ?", pipelineID, StatusQueued).
			Updates(map[string]any{"status": status, "reason": reason, "finished_at": now, "updated_at": now})
		if res.Error != nil || len(rows) == 0 {
			return res.Error
		}
		dropped, buildID = true, rows[0].BuildID
		leftover := StatusSkipped
		if status == StatusCancelled {
			leftover = StatusCancelled
		}
		if err := tx.Model(&Job{}).Where("pipeline_id = ? AND status = ?", pipelineID, StatusQueued).Pluck("id", &jobIDs).Error; err != nil {
			return err
		}
		if err := tx.Model(&Job{}).Where("pipeline_id = ? AND status = ?", pipelineID, StatusQueued).Update("status", leftover).Error; err != nil {
			return err
		}
		if err := tx.Model(&Stage{}).Where("pipeline_id = ? AND status = ?", pipelineID, StatusQueued).Update("status", leftover).Error; err != nil {
			return err
		}
		return refreshStatus(tx, buildID, now)
	})
	if err != nil || !dropped {
		return false, err
	}
	if s.logs != nil {
		for _, id := range jobIDs {
			s.logs.Complete(ctx, id)
		}
	}
	return true, nil
}

// QueuedPipeline implements Lifecycle.
func (s *Service) QueuedPipeline(ctx context.Context, pipelineID int64) (*Pipeline, error) {
	var p Pipeline
	err := s.db.WithContext(ctx).Where("id = ? AND status = ?", pipelineID, StatusQueued).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// End implements Lifecycle.
func (s *Service) End(ctx context.Context, p *Pipeline, status, reason string) (bool, error) {
	return s.end(ctx, p, status, reason, s.clock.Now().UTC(), false)
}

// Refuse implements Lifecycle.
func (s *Service) Refuse(ctx context.Context, p *Pipeline, reason string) (bool, error) {
	ended, err := s.end(ctx, p, StatusFailed, reason, s.clock.Now().UTC(), true)
	if ended {
		p.StartedAt, p.Host = nil, ""
	}
	return ended, err
}

// end moves a running pipeline to its final status at the given time (the server's now, or
// when the agent saw it end); neverStarted also clears its start time.
func (s *Service) end(ctx context.Context, p *Pipeline, status, reason string, at time.Time, neverStarted bool) (bool, error) {
	now := s.clock.Now().UTC()
	leaseID := p.LeaseID
	ended := false
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		set := map[string]any{"status": status, "reason": reason, "finished_at": at, "updated_at": now,
			"lease_expires_at": nil, "job_token_hash": ""}
		if neverStarted {
			// It never ran: no host ran it either (the card said "on sim-gpu" for a pipeline
			// that billing refused at its claim).
			set["started_at"] = nil
			set["host"] = ""
		}
		res := tx.Model(&Pipeline{}).Where("id = ? AND lease_id = ? AND status = ?", p.ID, leaseID, StatusRunning).
			Updates(set)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		ended = true
		leftover := StatusSkipped
		if status == StatusCancelled || status == StatusTerminated {
			leftover = StatusCancelled
		}
		running := StatusCancelled
		if status == StatusFailed {
			running = StatusFailed
		}
		if err := tx.Model(&Job{}).Where("pipeline_id = ? AND status = ?", p.ID, StatusRunning).
			Updates(map[string]any{"status": running, "finished_at": at}).Error; err != nil {
			return err
		}
		if err := tx.Model(&Job{}).Where("pipeline_id = ? AND status = ?", p.ID, StatusQueued).
			Updates(map[string]any{"status": leftover}).Error; err != nil {
			return err
		}
		var stageIDs []int64
		if err := tx.Model(&Stage{}).Where("pipeline_id = ?", p.ID).Pluck("id", &stageIDs).Error; err != nil {
			return err
		}
		for _, id := range stageIDs {
			if err := settleStage(tx, id, at); err != nil {
				return err
			}
		}
		return refreshStatus(tx, p.BuildID, at)
	})
	if err != nil {
		return false, err
	}
	if !ended {
		var cur Pipeline
		if err := s.db.WithContext(ctx).Omit("plan").Take(&cur, p.ID).Error; err == nil && cur.LeaseID == leaseID && Terminal(cur.Status) {
			return false, nil
		}
		return false, ErrLeaseLost
	}
	p.Status, p.Reason, p.FinishedAt = status, reason, &at
	if s.logs != nil {
		var jobIDs []int64
		s.db.WithContext(ctx).Model(&Job{}).Where("pipeline_id = ?", p.ID).Pluck("id", &jobIDs)
		for _, id := range jobIDs {
			s.logs.Complete(ctx, id)
		}
	}
	return true, nil
}

// pipelineOfLease loads the pipeline a lease holds, or ErrLeaseLost.
func (s *Service) pipelineOfLease(ctx context.Context, agentID, leaseID string) (*Pipeline, error) {
	var p Pipeline
	err := s.db.WithContext(ctx).Omit("plan").Where("lease_id = ? AND agent_id = ?", leaseID, agentID).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrLeaseLost
	}
	return &p, err
}

// Renew implements Lifecycle.
func (s *Service) Renew(ctx context.Context, agentID, leaseID string, until time.Time) (*Pipeline, error) {
	res := s.db.WithContext(ctx).Model(&Pipeline{}).
		Where("lease_id = ? AND agent_id = ? AND status = ?", leaseID, agentID, StatusRunning).
		Updates(map[string]any{"lease_expires_at": until})
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 0 {
		return nil, ErrLeaseLost
	}
	return s.pipelineOfLease(ctx, agentID, leaseID)
}

// Event records a job's start or end under the agent's lease. Job moves are conditional on the job's current status, so a
// repeated event changes nothing.
func (s *Service) Event(ctx context.Context, agentID, leaseID string, ev protocol.Event) error {
	p, err := s.pipelineOfLease(ctx, agentID, leaseID)
	if err != nil {
		return err
	}
	if p.Status != StatusRunning {
		return ErrLeaseLost
	}
	now := s.observed(ev.At, p)
	var finishedJob int64
	var restarted bool
	err = store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		switch ev.Kind {
		case protocol.EventPipelineStarted:
			if !ev.Waited {
				return nil
			}
			// The pipeline waited for its place after the lease (a pod Pending on Kubernetes):
			// its run time starts now, and so does its bill (OnStarted).
			if err := tx.Model(&Pipeline{}).Where("id = ? AND lease_id = ?", p.ID, leaseID).Update("wait_reason", "").Error; err != nil {
				return err
			}
			res := tx.Model(&Pipeline{}).Where("id = ? AND lease_id = ? AND started_at < ?", p.ID, leaseID, now).
				Update("started_at", now)
			if res.Error != nil {
				return res.Error
			}
			restarted = res.RowsAffected == 1
			return nil
		case protocol.EventWorkspaceReady:
			// A workspace's readiness is the agent's to tell (at once, or at its vscode:go).
			// From then on people work in it: a lost agent fails it (agent_lost) rather than
			// handing a fresh environment to the queue, even when it has no stages.
			return tx.Model(&Pipeline{}).Where("id = ? AND lease_id = ? AND workspace AND ready_at IS NULL", p.ID, leaseID).
				Updates(map[string]any{"ready_at": now, "user_started": true}).Error
		case protocol.EventWaiting:
			if len(ev.Reason) > protocol.MaxWaitReason {
				return fault.Invalid("reason", "a waiting reason is at most %d bytes", protocol.MaxWaitReason)
			}
			return tx.Model(&Pipeline{}).Where("id = ? AND lease_id = ? AND NOT user_started", p.ID, leaseID).
				Update("wait_reason", ev.Reason).Error
		case protocol.EventJobStarted:
			// From here on user code may have run: an expired lease now fails the pipeline.
			if err := tx.Model(&Pipeline{}).Where("id = ? AND lease_id = ?", p.ID, leaseID).
				Updates(map[string]any{"user_started": true, "wait_reason": ""}).Error; err != nil {
				return err
			}
			var j Job
			if err := tx.Where("id = ? AND pipeline_id = ?", ev.JobID, p.ID).Take(&j).Error; err != nil {
				return fault.NotFound("job %d is not part of this pipeline", ev.JobID)
			}
			if err := tx.Model(&Job{}).Where("id = ? AND status = ?", j.ID, StatusQueued).
				Updates(map[string]any{"status": StatusRunning, "started_at": now}).Error; err != nil {
				return err
			}
			return tx.Model(&Stage{}).Where("id = ? AND status = ?", j.StageID, StatusQueued).
				Updates(map[string]any{"status": StatusRunning, "started_at": now}).Error
		case protocol.EventJobFinished:
			if !Terminal(ev.Status) {
				return fault.Invalid("status", "job_finished needs a final status, not %q", ev.Status)
			}
			var j Job
			if err := tx.Where("id = ? AND pipeline_id = ?", ev.JobID, p.ID).Take(&j).Error; err != nil {
				return fault.NotFound("job %d is not part of this pipeline", ev.JobID)
			}
			set := map[string]any{"status": ev.Status, "exit_code": ev.ExitCode, "finished_at": now}
			if im := ev.Image; im != nil {
				if len(im.Ref) > 1000 || len(im.Digest) > 1000 {
					return fault.Invalid("image", "an image reference and digest are at most 1000 characters")
				}
				set["image"], set["image_digest"] = im.Ref, im.Digest
			}
			if len(ev.Exports) > 0 {
				raw, err := json.Marshal(ev.Exports)
				if err != nil {
					return err
				}
				set["exports"] = string(raw)
			}
			res := tx.Model(&Job{}).Where("id = ? AND status IN ?", j.ID, []string{StatusQueued, StatusRunning}).Updates(set)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 1 && len(ev.Metrics) > 0 {
				if err := keepMetrics(tx, p, j.ID, ev.Metrics, now); err != nil {
					return err
				}
			}
			finishedJob = j.ID
			return settleStage(tx, j.StageID, now)
		default:
			return fault.Invalid("kind", "unknown event kind %q", ev.Kind)
		}
	})
	if err != nil {
		return err
	}
	if restarted {
		for _, fn := range s.started {
			fn(context.WithoutCancel(ctx), p.ID, now)
		}
	}
	// After the commit: the log service writes in its own transaction, and streams waiting on
	// the log learn it is complete.
	if finishedJob != 0 && s.logs != nil {
		return s.logs.Complete(ctx, finishedJob)
	}
	return nil
}

// Finish ends the agent's pipeline as the agent reports, unless billing or a user stopped it
// (then their reason wins). It returns the pipeline and whether this call ended it; an end goes
// to the OnEnded subscribers. Repeating it is harmless; a lease that is gone gets ErrLeaseLost.
func (s *Service) Finish(ctx context.Context, agentID, leaseID string, req protocol.FinishRequest) (*Pipeline, bool, error) {
	switch req.Status {
	case StatusSuccess, StatusFailed, StatusCancelled:
	default:
		return nil, false, fault.Invalid("status", "a pipeline finishes success, failed or cancelled, not %q", req.Status)
	}
	p, err := s.pipelineOfLease(ctx, agentID, leaseID)
	if err != nil {
		return nil, false, err
	}
	if Terminal(p.Status) {
		return p, false, nil // a retried finish
	}
	status, reason := req.Status, req.Reason
	switch {
	case p.CancelRequested && p.Reason != "" && p.Workspace && req.Status == StatusSuccess && strings.Contains(req.Reason, p.Reason):
		// A workspace stopped gracefully: the agent's reason names the stop and where the
		// work was saved; money still ends it as terminated.
		if p.Reason == ReasonInsufficientBalance {
			status = StatusTerminated
		}
	case p.CancelRequested && p.Reason != "":
		// Billing or the API stopped it: its reason wins over the agent's view.
		status, reason = stoppedStatus(p.Reason), p.Reason
	}
	ended, err := s.end(ctx, p, status, reason, s.observed(req.FinishedAt, p), false)
	if ended && err == nil {
		s.notifyEnded(ctx, p)
	}
	return p, ended, err
}

// OnEnded subscribes fn to the end of a running pipeline that an agent's finish or the reaper
// brought about (Finish when that call ended it, Reap for the pipelines it ended, not those it
// re-queued): the scheduler frees the team's slot and the locks, billing settles. Subscribers
// are registered before anything runs (app.New) and called in registration order, once per
// end, after the end is committed, with a context that is never cancelled: an agent that hung
// up must not leave the slot taken, the locks held or the bill to the next tick.
func (s *Service) OnEnded(fn func(ctx context.Context, p *Pipeline)) {
	s.ended = append(s.ended, fn)
}

// OnStarted subscribes fn to the late starts of pipelines: one that waited for its place after
// its lease (protocol.Event.Waited) runs, and is billed, from at. Call it while wiring the
// server, before it serves.
func (s *Service) OnStarted(fn func(ctx context.Context, pipelineID int64, at time.Time)) {
	s.started = append(s.started, fn)
}

// notifyEnded forgets the awaits of a pipeline that just ended, then tells the subscribers.
func (s *Service) notifyEnded(ctx context.Context, p *Pipeline) {
	ctx = context.WithoutCancel(ctx)
	if err := s.EndAwait(ctx, p); err != nil {
		s.log.WarnContext(ctx, "forget the pipeline's awaits", "pipeline", p.ID, "err", err)
	}
	for _, fn := range s.ended {
		fn(ctx, p)
	}
}

// observed is when the agent saw something happen to pipeline p, bounded by what the server
// knows: not before the pipeline started, not after now. Agents report their own time because a
// report can reach the server long after the fact (it was down, or unreachable), and a job's
// duration and the bill are the real run time, not the outage.
func (s *Service) observed(at time.Time, p *Pipeline) time.Time {
	now := s.clock.Now().UTC()
	if at.IsZero() || at.After(now) {
		return now
	}
	if p.StartedAt != nil && at.Before(*p.StartedAt) {
		return p.StartedAt.UTC()
	}
	return at.UTC()
}

// stoppedStatus is the final status of a pipeline stopped for reason: terminated when its
// account could not pay, cancelled otherwise.
func stoppedStatus(reason string) string {
	if reason == ReasonInsufficientBalance {
		return StatusTerminated
	}
	return StatusCancelled
}

// Leased implements Lifecycle.
func (s *Service) Leased(ctx context.Context, agentID, leaseID string) (*Pipeline, error) {
	p, err := s.pipelineOfLease(ctx, agentID, leaseID)
	if err != nil {
		return nil, err
	}
	// The lease id stays on a pipeline after its end: what it asks for then is refused.
	if p.Status != StatusRunning {
		return nil, ErrLeaseLost
	}
	return p, nil
}

// CheckJob says whether jobID belongs to the pipeline the agent's lease holds (log uploads).
func (s *Service) CheckJob(ctx context.Context, agentID, leaseID string, jobID int64) error {
	p, err := s.pipelineOfLease(ctx, agentID, leaseID)
	if err != nil {
		return err
	}
	var n int64
	if err := s.db.WithContext(ctx).Model(&Job{}).Where("id = ? AND pipeline_id = ?", jobID, p.ID).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return fault.NotFound("job %d is not part of this pipeline", jobID)
	}
	return nil
}

// Reaped is a pipeline Reap handled: Requeued when it went back to the queue, else it ended.
type Reaped struct {
	Pipeline
	Requeued bool
}

// Reap implements Lifecycle. A pipeline whose user code may have run fails with reason
// agent_lost — user code is never re-run on its own —, one that had not started any job goes
// back to the queue, and one a user or billing stopped while its agent was gone ends as they
// asked. A lost pipeline ends at its agent's last heartbeat (the lease's expiry less leaseTTL,
// which every renew restarts): what is billed is what the agent was last heard running, not the
// wait for the lease to run out.
func (s *Service) Reap(ctx context.Context, now time.Time, leaseTTL time.Duration) ([]Reaped, error) {
	var expired []Pipeline
	if err := s.db.WithContext(ctx).Omit("plan").Where("status = ? AND lease_expires_at < ?", StatusRunning, now).
		Limit(500).Find(&expired).Error; err != nil {
		return nil, err
	}
	var out []Reaped
	for i := range expired {
		p := &expired[i]
		var done bool
		var err error
		switch {
		case p.CancelRequested:
			done, err = s.End(ctx, p, stoppedStatus(p.Reason), p.Reason)
		case p.UserStarted:
			at := now
			if p.LeaseExpiresAt != nil && leaseTTL > 0 {
				at = p.LeaseExpiresAt.Add(-leaseTTL).UTC()
			}
			if p.StartedAt != nil && at.Before(*p.StartedAt) {
				at = *p.StartedAt
			}
			if at.After(now) {
				at = now
			}
			done, err = s.end(ctx, p, StatusFailed, ReasonAgentLost, at, false)
		default:
			if done, err = s.Requeue(ctx, p, now); err == nil && done {
				out = append(out, Reaped{Pipeline: *p, Requeued: true})
				continue
			}
		}
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			return out, err
		}
		if done {
			s.notifyEnded(ctx, p)
			out = append(out, Reaped{Pipeline: *p})
		}
	}
	return out, nil
}

// RequestStop implements Lifecycle.
func (s *Service) RequestStop(ctx context.Context, pipelineID int64, reason string) error {
	var rows []Pipeline
	if err := s.db.WithContext(ctx).Model(&rows).Clauses(clause.Returning{Columns: []clause.Column{{Name: "agent_id"}}}).
		Where("id = ? AND status = ?", pipelineID, StatusRunning).
		Updates(map[string]any{"cancel_requested": true, "reason": reason}).Error; err != nil {
		return err
	}
	s.stopRequested(ctx, rows)
	return nil
}

// stopRequested wakes the agents of pipelines just asked to stop.
func (s *Service) stopRequested(ctx context.Context, ps []Pipeline) {
	if s.agents == nil || len(ps) == 0 {
		return
	}
	ids := make([]string, 0, len(ps))
	for _, p := range ps {
		if p.AgentID != "" {
			ids = append(ids, p.AgentID)
		}
	}
	s.agents.StopRequested(ctx, ids)
}

// Cancel cancels a build: queued pipelines end at once; running ones are told to stop at their
// agent's next renew and end when it reports (or when their lease expires).
func (s *Service) Cancel(ctx context.Context, buildID int64, reason string) error {
	now := s.clock.Now().UTC()
	var cancelledJobs []int64
	var stopping []Pipeline
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := tx.Model(&Pipeline{}).Where("build_id = ? AND status = ?", buildID, StatusQueued).
			Updates(map[string]any{"status": StatusCancelled, "reason": reason, "finished_at": now, "updated_at": now}).Error; err != nil {
			return err
		}
		var ids []int64
		if err := tx.Model(&Pipeline{}).Where("build_id = ? AND status = ?", buildID, StatusCancelled).Pluck("id", &ids).Error; err != nil {
			return err
		}
		if len(ids) > 0 {
			if err := tx.Model(&Job{}).Where("pipeline_id IN ? AND status = ?", ids, StatusQueued).
				Pluck("id", &cancelledJobs).Error; err != nil {
				return err
			}
			if err := tx.Model(&Job{}).Where("pipeline_id IN ? AND status = ?", ids, StatusQueued).
				Update("status", StatusCancelled).Error; err != nil {
				return err
			}
			if err := tx.Model(&Stage{}).Where("pipeline_id IN ? AND status = ?", ids, StatusQueued).
				Update("status", StatusCancelled).Error; err != nil {
				return err
			}
		}
		if err := tx.Model(&stopping).Clauses(clause.Returning{Columns: []clause.Column{{Name: "agent_id"}}}).
			Where("build_id = ? AND status = ?", buildID, StatusRunning).
			Updates(map[string]any{"cancel_requested": true, "reason": reason}).Error; err != nil {
			return err
		}
		return refreshStatus(tx, buildID, now)
	})
	if err != nil {
		return err
	}
	s.stopRequested(ctx, stopping)
	// Jobs that never ran have complete (empty) logs: their streams end.
	if s.logs != nil {
		for _, id := range cancelledJobs {
			s.logs.Complete(ctx, id)
		}
	}
	return nil
}

// FireSchedule implements Lifecycle: the replica whose conditional update of last_fired_at
// wins fires the schedule's build; the others get false.
func (s *Service) FireSchedule(ctx context.Context, sc *Schedule, due time.Time) (*Build, bool, error) {
	q := s.db.WithContext(ctx).Model(&Schedule{}).Where("id = ?", sc.ID)
	if sc.LastFiredAt == nil {
		q = q.Where("last_fired_at IS NULL")
	} else {
		q = q.Where("last_fired_at = ?", *sc.LastFiredAt)
	}
	res := q.Update("last_fired_at", due)
	if res.Error != nil || res.RowsAffected == 0 {
		return nil, false, res.Error
	}
	b, err := s.fire(ctx, sc)
	return b, true, err
}
