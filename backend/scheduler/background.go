package scheduler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/redisconn"
)

// Reap has build handle the leases that expired (the agent stopped renewing) — a pipeline whose
// user code may have run fails with reason agent_lost, one that had not started any job goes
// back to the queue — and releases what each re-queued one held here (an end is build's OnEnded
// hook's, see Ended). It returns how many it handled.
//
// Time no server could hear renewals in does not count against a lease. An outage of the whole
// server (a restart, an upgrade, every replica down) or of its database leaves healthy agents
// unable to renew; their leases look expired when it ends, though their jobs run on. So a
// replica reaps only once it has itself been able to hear renewals for one full LeaseTTL: from
// its start, and again from the end of a database outage it saw (a failed reap). By then every
// live agent has renewed (it renews every third of a TTL and retries with backoff), and what is
// still expired is really lost. With several replicas the others keep serving renewals through a
// rolling restart, and the leader that takes over has been hearing them all along.
func (s *Service) Reap(ctx context.Context) (int, error) {
	now := s.clock.Now().UTC()
	if since := time.Unix(0, s.heardSince.Load()); now.Sub(since) < s.cfg.LeaseTTL {
		return 0, nil
	}
	reaped, err := s.builds.Reap(ctx, now, s.cfg.LeaseTTL)
	for i := range reaped {
		p := &reaped[i].Pipeline
		if !reaped[i].Requeued {
			continue // build's OnEnded hook released what it held (Ended)
		}
		s.queue.Released(ctx, s.in.queueClass(p.OrgID, p.RunnerTag), p.OrgID)
		s.releaseLocks(ctx, p) // it takes its lock again when it is dispatched again
		s.log.InfoContext(ctx, "lease expired before any job started; pipeline re-queued", "pipeline", p.ID)
	}
	if err != nil {
		if len(reaped) == 0 {
			// The database did not answer: renewals failed too. Start counting again.
			s.heardSince.Store(s.clock.Now().UnixNano())
		}
		return len(reaped), fmt.Errorf("scheduler: reap: %w", err)
	}
	return len(reaped), nil
}

// Reconcile makes Redis agree with the database: every queued pipeline is in its queue (after a
// Redis restart or FLUSHALL they come back here) unless it waits for a lock, and the per-team
// running counts are the database's. It also runs the locks' tick (locks.go). It returns how many pipelines it re-queued.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	queued, err := s.builds.Queued(ctx)
	if err != nil {
		return 0, fmt.Errorf("scheduler: reconcile: %w", err)
	}
	// Read after the queued rows: a pipeline parked since is in its wait list by then.
	parked, err := s.lockTick(ctx)
	if err != nil {
		return 0, fmt.Errorf("scheduler: reconcile locks: %w", err)
	}
	queuedOf := map[string][]build.Pipeline{}
	affordable := s.affordable(ctx)
	for _, p := range queued {
		if parked[p.ID] || strings.HasPrefix(p.Reason, build.ReasonFundsWaitPrefix) && !affordable(p) {
			continue
		}
		c := s.in.queueClass(p.OrgID, p.RunnerTag)
		queuedOf[c] = append(queuedOf[c], p)
	}
	n := 0
	for class, ps := range queuedOf {
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
				if err := s.in.Enqueue(ctx, &ps[i]); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	running, err := s.builds.RunningCounts(ctx)
	if err != nil {
		return n, err
	}
	counts := s.byQueueClass(running)
	for _, c := range s.in.classes {
		if counts[c.Tags[0]] == nil {
			counts[c.Tags[0]] = map[int64]int{} // a class nobody runs on: its counts are cleared
		}
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

// affordable reports whether the account of a pipeline that waits for money can now pay its
// first window (a top-up, a grant, the team's other windows settled, a new month's quota). The
// account is asked once per team, class, size and kind in one reconcile; an error to ask
// counts as "not yet" (the next tick asks again).
func (s *Service) affordable(ctx context.Context) func(p build.Pipeline) bool {
	type key struct {
		org       int64
		class     string
		cores     int
		workspace bool
	}
	verdict := map[key]bool{}
	return func(p build.Pipeline) bool {
		if s.meter == nil {
			return true
		}
		k := key{p.OrgID, p.RunnerTag, p.CPUs, p.Workspace}
		ok, seen := verdict[k]
		if !seen {
			err := s.meter.CanStart(ctx, Run{PipelineID: p.ID, OrgID: p.OrgID, RepoID: p.RepoID, Class: p.RunnerTag, Cores: p.CPUs, Workspace: p.Workspace})
			ok = err == nil
			if err != nil && refusal(err) == nil {
				s.log.WarnContext(ctx, "reconciler: ask billing whether a pipeline waiting for money can start", "pipeline", p.ID, "err", err)
			}
			verdict[k] = ok
		}
		return ok
	}
}

// byQueueClass arranges running counts as queue class → team → pipelines.
func (s *Service) byQueueClass(counts []build.RunningCount) map[string]map[int64]int {
	out := map[string]map[int64]int{}
	for _, c := range counts {
		q := s.in.queueClass(c.OrgID, c.RunnerTag)
		if out[q] == nil {
			out[q] = map[int64]int{}
		}
		out[q][c.OrgID] = c.N
	}
	return out
}

// byClass arranges running counts as class → team → pipelines.
func byClass(counts []build.RunningCount) map[string]map[int64]int {
	out := map[string]map[int64]int{}
	for _, c := range counts {
		if out[c.RunnerTag] == nil {
			out[c.RunnerTag] = map[int64]int{}
		}
		out[c.RunnerTag][c.OrgID] = c.N
	}
	return out
}

// Run drives the background work until ctx ends: relaying work notifications, and — on the one
// replica holding the leader lock — reaping, reconciling and firing schedules every tick.
func (s *Service) Run(ctx context.Context, tick time.Duration) {
	if tick <= 0 {
		tick = 5 * time.Second
	}
	go s.in.listen(ctx)
	lead := redisconn.NewLeader(s.in.rdb, "nimbus:leader:scheduler", 3*tick)
	t := time.NewTicker(tick)
	defer t.Stop()
	// A step cut short by the server's own shutdown is no failure.
	failed := func(what string, err error) {
		if err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, what, "err", err)
		}
	}
	for {
		if lead.Hold(ctx) {
			_, err := s.Reap(ctx)
			failed("reaper", err)
			_, err = s.Reconcile(ctx)
			failed("reconciler", err)
			_, err = s.FireSchedules(ctx)
			failed("cron", err)
			_, err = s.FailUnserved(ctx)
			failed("fail pipelines no team runner serves", err)
			_, err = s.FailStale(ctx)
			failed("fail pipelines past the queue timeout", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// servedClasses are the queue classes some online agent that is not paused serves.
func (s *Service) servedClasses(ctx context.Context) (map[string]bool, error) {
	online := s.onlineSince()
	var agents []Agent
	if err := s.db.WithContext(ctx).Where("last_seen_at > ?", online).Find(&agents).Error; err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, a := range agents {
		if !a.online(online) || a.PausedAt != nil {
			continue
		}
		for _, c := range s.agentClasses(&a) {
			out[c] = true
		}
	}
	return out, nil
}
