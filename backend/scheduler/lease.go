package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// ErrLeaseLost answers a call about a lease the server no longer honours (HTTP 409); it is
// build's, which does the fencing.
var ErrLeaseLost = build.ErrLeaseLost

// Poll waits up to the poll timeout for a pipeline that fits the agent and leases it. It returns
// nil, nil when none came (or the server is draining).
//
// Cache affinity (queue.go, rule 5): an agent that holds caches and finds nothing records in
// Redis that it waits, so that cold agents' dispatches, on any replica, leave it the pipelines
// of those repos and wake it; a cold agent that left one looks again when the hand-over runs out
// (HandOver after the first cold agent left it), and takes it if the warm agent did not.
func (s *Service) Poll(ctx context.Context, a *Agent, req protocol.PollRequest, draining <-chan struct{}) (*protocol.Lease, error) {
	s.seen(ctx, a, req.FreeCPUs, len(req.FreeGPUs))
	if a.PausedAt != nil {
		return s.idle(ctx, draining, s.in.wake.wait(handOverKey(a.ID))) // a resume wakes it
	}
	if len(req.Running) >= a.Concurrency || req.FreeCPUs < 1 {
		return s.idle(ctx, draining, nil)
	}
	classes := s.agentClasses(a)
	who := Poller{AgentID: a.ID, Caches: pollCaches(req.Caches)}
	if a.isTeam() {
		who.OnlyOrg = *a.OrgID
	}
	capacity := Capacity{FreeCPUs: req.FreeCPUs, TotalCPUs: a.CPUs, FreeGPUs: len(req.FreeGPUs), TotalGPUs: a.gpuCount()}
	if a.WholeHost {
		// Any size fits it when it is idle, so a large pipeline can be reserved (rule 3) while
		// small ones run, and is taken once they end.
		capacity.TotalCPUs = max(a.CPUs, s.in.classes.largest())
		if len(req.Running) == 0 {
			capacity.FreeCPUs = capacity.TotalCPUs
		}
	}
	until := s.clock.Now().Add(s.cfg.PollTimeout)
	deadline := time.NewTimer(s.cfg.PollTimeout)
	defer deadline.Stop()
	waiting := false
	defer func() {
		if waiting {
			s.stopWaiting(ctx, classes, who)
		}
	}()
	var woken *turn // the class turn that woke this poll, if any
	for {
		// Queue up before looking, so work enqueued (or handed over) between the look and the
		// wait wakes us.
		regs := make([]*waiter, len(classes))
		for i, c := range classes {
			regs[i] = s.in.wake.queue(c, a.ID)
		}
		var handOverCh <-chan struct{}
		if len(who.Caches) > 0 {
			handOverCh = s.in.wake.wait(handOverKey(a.ID)) // only warm agents get hand-overs
		}
		// leave takes this poll out of every line; a turn it was given and will not use goes on.
		leave := func() {
			for i, c := range classes {
				s.in.wake.pass(s.in.wake.leave(c, regs[i]))
			}
		}
		if a.isTeam() && s.pausedNow(ctx, a) {
			// Paused while this poll waited (the pause may be on another replica).
			leave()
			s.in.wake.pass(woken)
			return s.idle(ctx, draining, s.in.wake.wait(handOverKey(a.ID)))
		}
		lease, handedOver, recheckIn, err := s.tryDispatch(ctx, a, classes, who, capacity, req)
		s.in.handOver(ctx, handedOver)
		if lease != nil || err != nil {
			leave()
			if lease == nil {
				s.in.wake.pass(woken)
			}
			return lease, err
		}
		if woken != nil {
			// Woken for work this agent could not take: when the class still has some, the next
			// poller in line tries.
			if n, err := s.queue.rdb.LLen(ctx, prefix(woken.key)+":ring").Result(); err == nil && n > 0 {
				s.in.wake.pass(woken)
			}
			woken = nil
		}
		if !waiting && len(who.Caches) > 0 && s.cfg.HandOver > 0 {
			// Recorded only now that there is nothing to take: an agent that finds work at once
			// never writes it. A failure costs the affinity of this poll, nothing else.
			waiting = true
			now := s.clock.Now()
			for _, c := range classes {
				if err := s.queue.Waiting(ctx, c, who, capacity, now, until); err != nil {
					s.log.WarnContext(ctx, "cache affinity: waiting agent not recorded", "agent", a.ID, "err", err)
					break
				}
			}
		}
		var recheck <-chan time.Time
		if recheckIn > 0 {
			recheck = time.After(recheckIn) // collected once it fires or is dropped
		}
		// One forwarder per line; the channel holds every turn they may forward, so none blocks.
		turns := make(chan *turn, len(regs))
		stop := make(chan struct{})
		var forwarders sync.WaitGroup
		for _, r := range regs {
			forwarders.Add(1)
			go func(r *waiter) {
				defer forwarders.Done()
				select {
				case t := <-r.ch:
					turns <- t
				case <-stop:
				}
			}(r)
		}
		// end stops the forwarders and leaves the lines; it keeps the first turn received (as
		// the one that woke the poll) and passes the others on. It waits for the forwarders
		// first: one that took a turn from its line just as stop closed still puts it in turns.
		end := func(keep bool) {
			close(stop)
			forwarders.Wait()
			leave()
			for {
				select {
				case t := <-turns:
					if keep && woken == nil {
						woken = t
					} else {
						s.in.wake.pass(t)
					}
				default:
					return
				}
			}
		}
		select {
		case t := <-turns:
			woken = t
			end(true)
		case <-handOverCh:
			end(true)
		case <-recheck:
			end(true)
		case <-deadline.C:
			end(false)
			return nil, nil
		case <-draining:
			end(false)
			return nil, nil
		case <-ctx.Done():
			end(false)
			return nil, nil
		}
	}
}

// stopWaiting forgets that the agent waits, even when its poll ended because the agent went
// away (ctx is done then); what fails here expires with the poll's until time.
func (s *Service) stopWaiting(ctx context.Context, classes []string, who Poller) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := s.queue.StopWaiting(ctx, classes, who); err != nil {
		s.log.WarnContext(ctx, "cache affinity: waiting agent not forgotten", "agent", who.AgentID, "err", err)
	}
}

// idle holds a poll that cannot take work until the timeout, so a busy agent does not spin;
// woke (nil: never) ends it early, as a resume does for a paused runner.
func (s *Service) idle(ctx context.Context, draining <-chan struct{}, woke <-chan struct{}) (*protocol.Lease, error) {
	t := time.NewTimer(s.cfg.PollTimeout)
	defer t.Stop()
	select {
	case <-t.C:
	case <-woke:
	case <-draining:
	case <-ctx.Done():
	}
	return nil, nil
}

// tryDispatch asks each class's queue once, starting at a rotating class so a multi-class agent
// serves them evenly, and claims what it gets. It also returns the warm agents that pipelines
// were left for, to wake, and when the first of those hand-overs runs out.
func (s *Service) tryDispatch(ctx context.Context, a *Agent, classes []string, who Poller, capacity Capacity, req protocol.PollRequest) (lease *protocol.Lease, handedOver []string, recheck time.Duration, err error) {
	if len(classes) == 0 {
		return nil, nil, 0, nil
	}
	start := int(s.clock.Now().UnixNano() % int64(len(classes)))
	for i := range classes {
		class := classes[(start+i)%len(classes)]
		for attempt := 0; attempt < 20; attempt++ {
			d, err := s.queue.Dispatch(ctx, class, who, capacity, s.agentRules(a, class), s.clock.Now())
			if d.Recheck > 0 && (recheck == 0 || d.Recheck < recheck) {
				recheck = d.Recheck
			}
			handedOver = append(handedOver, d.HandedOver...)
			if errors.Is(err, ErrEmpty) {
				break
			}
			if err != nil {
				return nil, handedOver, recheck, err
			}
			lease, err := s.claim(ctx, a, d.PipelineID, req)
			if err != nil {
				s.queue.Released(ctx, class, d.OrgID)
				return nil, handedOver, recheck, err
			}
			if lease != nil {
				return lease, handedOver, recheck, nil
			}
			// Cancelled or claimed since it was queued: not ours, try the next entry.
			s.queue.Released(ctx, class, d.OrgID)
		}
	}
	return nil, handedOver, recheck, nil
}

func newLeaseID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "lease_" + hex.EncodeToString(b)
}

// claim has build move a queued pipeline to running under a new lease — only if it is still
// queued — then starts its billing and builds what the agent needs. It returns nil, nil when the
// pipeline was not queued any more.
func (s *Service) claim(ctx context.Context, a *Agent, pipelineID int64, req protocol.PollRequest) (*protocol.Lease, error) {
	leaseID := newLeaseID()
	jobToken, err := auth.NewToken(auth.PrefixJob)
	if err != nil {
		return nil, err
	}
	expires := s.clock.Now().UTC().Add(s.cfg.LeaseTTL)
	p, err := s.builds.Claim(ctx, pipelineID, build.Lease{ID: leaseID, AgentID: a.ID, ExpiresAt: expires,
		JobTokenHash: auth.HashToken(jobToken), Host: hostSnapshot(a)})
	if err != nil || p == nil {
		return nil, err
	}
	if lk := pipelineLock(p); lk != nil {
		ok, err := s.takeLock(ctx, p, lk)
		if err != nil {
			// Put it back as it was; the next dispatch tries again.
			s.builds.Requeue(ctx, p, p.QueuedSince())
			return nil, fmt.Errorf("scheduler: lock of pipeline %d: %w", p.ID, err)
		}
		if !ok {
			return nil, nil // parked to wait, or failed: the caller takes the next entry
		}
	}
	if s.meter != nil {
		// The first window is frozen before the agent hears of the pipeline: one the account
		// cannot cover never starts.
		err := s.meter.Start(ctx, Run{PipelineID: p.ID, OrgID: p.OrgID, RepoID: p.RepoID, Class: billedClass(a, p.RunnerTag), Cores: p.CPUs,
			Workspace: p.Workspace}, *p.StartedAt)
		if r := refusal(err); r != nil {
			// Nothing was frozen and the caller releases the team's slot (it got no lease).
			// It waits for money, on no queue, as the README's "Money" rule says: the
			// reconciler puts it back once the account can pay (Reconcile).
			s.releaseLocks(ctx, p)
			parked, err := s.builds.Park(ctx, p, build.ReasonFundsWaitPrefix+r.Error())
			if err != nil {
				return nil, err
			}
			if !parked {
				// Cancelled since the claim: it ends so, before any agent heard of it.
				if _, err := s.builds.End(ctx, p, build.StatusCancelled, build.ReasonCancelled); err != nil {
					return nil, err
				}
				return nil, nil
			}
			s.log.InfoContext(ctx, "pipeline waits for money", "pipeline", p.ID, "reason", r.Reason)
			return nil, nil
		}
		if err != nil {
			// Not started: put it back as it was, in its place, for the next poll to try again.
			s.builds.Requeue(ctx, p, p.QueuedSince())
			s.releaseLocks(ctx, p)
			return nil, fmt.Errorf("scheduler: billing start of pipeline %d: %w", p.ID, err)
		}
	}
	lease, err := s.leaseFor(ctx, a, p, leaseID, jobToken, expires, req)
	if err != nil {
		// The agent never hears of this lease; the reaper will put the pipeline back when the
		// lease expires, since no user code ran.
		return nil, fmt.Errorf("scheduler: build lease for pipeline %d: %w", p.ID, err)
	}
	s.log.InfoContext(ctx, "pipeline leased", "pipeline", p.ID, "agent", a.ID, "class", p.RunnerTag, "lease", leaseID)
	return lease, nil
}

// UntrustedCacheGroup is the docker.volumes group an untrusted build's cache entry of group
// gets: one that no build of the repository's own branches names, since a .cnb.yml group
// cannot hold ':' (it separates group, path and type), so the fork can neither read what the
// team's branches cached nor leave them a poisoned cache.
func UntrustedCacheGroup(pull int64, group string) string {
	return fmt.Sprintf("fork-pr-%d:%s", pull, group)
}

// leaseFor assembles the lease of a claimed pipeline.
func (s *Service) leaseFor(ctx context.Context, a *Agent, p *build.Pipeline, leaseID, jobToken string, expires time.Time, req protocol.PollRequest) (*protocol.Lease, error) {
	var plan protocol.Plan
	if err := json.Unmarshal([]byte(p.Plan), &plan); err != nil {
		return nil, err
	}
	run, err := s.builds.RunInfo(ctx, p)
	if err != nil {
		return nil, err
	}
	var secrets map[string]string
	if run.Untrusted {
		// A fork's proposed code: no repo secret, and caches of its request's own
		// (build.Build.Untrusted).
		for i := range plan.Volumes {
			if plan.Volumes[i].Type != protocol.VolumeData {
				plan.Volumes[i].Group = UntrustedCacheGroup(run.PullNumber, plan.Volumes[i].Group)
			}
		}
	} else if secrets, err = s.secrets.SecretValues(ctx, p.RepoID); err != nil {
		return nil, err
	}
	if len(secrets) > 0 {
		if err := s.builds.NoteSecrets(ctx, p.ID, leaseID, slices.Collect(maps.Keys(secrets))); err != nil {
			return nil, err
		}
	}
	slug := run.OrgName + "/" + run.RepoName
	l := &protocol.Lease{ID: leaseID, PipelineID: p.ID, BuildID: run.BuildID, ExpiresAt: expires, Plan: plan,
		CloneURL: s.cfg.PublicURL + "/" + slug + ".git", Commit: run.CommitSHA, JobToken: jobToken,
		Secrets: secrets, Jobs: run.Jobs,
		Env: map[string]string{
			"CNB_TOKEN":            jobToken,
			"CNB_BUILD_ID":         build.BuildIDOf(run.BuildID),
			"CNB_BUILD_NUMBER":     itoa(run.BuildNumber),
			"CNB_PIPELINE_ID":      itoa(p.ID),
			"CNB_BUILD_WEB_URL":    s.cfg.PublicURL + "/" + slug + "/builds/" + itoa(run.BuildNumber),
			"CNB_BUILD_START_TIME": p.StartedAt.UTC().Format(time.RFC1123),
		}}
	if p.Workspace && s.cfg.WorkspaceEnv != nil {
		for k, v := range s.cfg.WorkspaceEnv(run.OrgName, run.RepoName, p.ID) {
			l.Env[k] = v
		}
	}
	n := s.in.classes.gpusOf(p.RunnerTag)
	if _, platform := s.in.classes.class(p.RunnerTag); a.isTeam() && !platform && len(req.FreeGPUs) > 0 {
		n = 1 // a team tag on a runner with GPUs: one free GPU each (teams.go)
	}
	if n > 0 && len(req.FreeGPUs) >= n {
		l.GPUs = append([]string(nil), req.FreeGPUs[:n]...)
	}
	return l, nil
}

// Renew extends a lease and says whether the pipeline must stop.
func (s *Service) Renew(ctx context.Context, a *Agent, leaseID string) (*protocol.RenewResponse, error) {
	now := s.clock.Now().UTC()
	expires := now.Add(s.cfg.LeaseTTL)
	p, err := s.builds.Renew(ctx, a.ID, leaseID, expires)
	if err != nil {
		return nil, err
	}
	s.db.WithContext(ctx).Model(&Agent{}).Where("id = ?", a.ID).Update("last_seen_at", now)
	out := &protocol.RenewResponse{ExpiresAt: expires}
	if p.CancelRequested {
		out.Cancel, out.Reason = true, p.Reason
		if out.Reason == "" {
			out.Reason = "cancelled"
		}
	}
	return out, nil
}

// Ended releases the team's concurrency slot and the locks of a pipeline that just ended. It is
// subscribed to build's OnEnded hook (app.New), which calls it after the end is committed, from
// the agent's finish and from the reaper alike.
func (s *Service) Ended(ctx context.Context, p *build.Pipeline) {
	s.queue.Released(ctx, s.in.queueClass(p.OrgID, p.RunnerTag), p.OrgID)
	s.releaseLocks(ctx, p)
	s.log.InfoContext(ctx, "pipeline finished", "pipeline", p.ID, "status", p.Status, "reason", p.Reason)
}

// billedClass is the class a pipeline's time is billed under: its own on a platform agent,
// "team:<class>" on a team runner (free unless the operator prices that class; teams.go).
func billedClass(a *Agent, class string) string {
	if a.isTeam() {
		return teamClassPrefix + class
	}
	return class
}

func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}
