package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
)

// Explain says, for each queued pipeline, why it waits — the question "pending forever with no
// reason" leaves unanswered everywhere else. In order of what to fix first:
//
//	no online agent serves <class>
//	no online agent of <class> has <n> cores (the largest has <m>)
//	team concurrency cap reached: <n> of <cap> pipelines running on <class>
//	all agents of <class> are busy: #<k> in the team's queue, <t> team(s) waiting
//
// and for a team tag (teams.go): no runner of your team serves tag <tag>, every runner of it is
// paused, none has the cores, or all are busy.
func (s *Service) Explain(ctx context.Context, ps []build.Pipeline) map[int64]string {
	out := map[int64]string{}
	online := s.onlineSince()
	var agents []Agent
	if err := s.db.WithContext(ctx).Where("last_seen_at > ?", online).Find(&agents).Error; err != nil {
		return out
	}
	agents = slices.DeleteFunc(agents, func(a Agent) bool { return !a.online(online) })
	type classInfo struct {
		agents, maxCPUs int
	}
	info := map[string]*classInfo{}
	paused := map[string]bool{} // queue classes only paused runners serve
	for _, a := range agents {
		for _, c := range s.agentClasses(&a) {
			if a.PausedAt != nil {
				paused[c] = true
				continue
			}
			ci := info[c]
			if ci == nil {
				ci = &classInfo{}
				info[c] = ci
			}
			ci.agents++
			ci.maxCPUs = max(ci.maxCPUs, a.CPUs)
		}
	}
	var running map[string]map[int64]int // read once, and only when a cap needs it
	if len(s.cfg.Caps) > 0 {
		counts, err := s.builds.RunningCounts(ctx)
		if err != nil {
			return out
		}
		running = byClass(counts)
	}
	for _, p := range ps {
		qc := s.in.queueClass(p.OrgID, p.RunnerTag)
		ci := info[qc]
		_, platform := s.in.classes.class(p.RunnerTag)
		switch {
		case strings.HasPrefix(p.Reason, lockWaitPrefix):
			// Parked by takeLock: the lock comes before agents and money.
			out[p.ID] = s.lockWaitReason(ctx, p)
			continue
		case !platform && ci == nil && paused[qc]:
			out[p.ID] = fmt.Sprintf("every runner of your team with tag %s is paused (resume one on the team's Agents page)", p.RunnerTag)
		case !platform && ci == nil:
			out[p.ID] = noTeamRunner(p.RunnerTag)
			if s.cfg.TeamRunnerWait > 0 {
				out[p.ID] += fmt.Sprintf(" (it fails after %s in the queue)", humanDuration(s.cfg.TeamRunnerWait))
			}
		case !platform && ci.maxCPUs < p.CPUs:
			out[p.ID] = fmt.Sprintf("no runner of your team with tag %s has %d cores (the largest has %d)", p.RunnerTag, p.CPUs, ci.maxCPUs)
		case !platform:
			out[p.ID] = s.waiting(ctx, p, 0)
		case ci == nil:
			out[p.ID] = fmt.Sprintf("no online agent serves %s", p.RunnerTag)
		case ci.maxCPUs < p.CPUs:
			out[p.ID] = fmt.Sprintf("no online agent of %s has %d cores (the largest has %d)", p.RunnerTag, p.CPUs, ci.maxCPUs)
		default:
			out[p.ID] = s.waiting(ctx, p, running[p.RunnerTag][p.OrgID])
		}
		if s.bill != nil {
			// Money comes first: a pipeline its account cannot pay for would fail at dispatch.
			if err := s.bill.CanStart(ctx, billing.Run{PipelineID: p.ID, OrgID: p.OrgID, RepoID: p.RepoID, Class: p.RunnerTag, Cores: p.CPUs, Workspace: p.Workspace}); err != nil {
				if errors.Is(err, billing.ErrSpendingCap) {
					out[p.ID] = "the team's monthly spending cap is reached"
				} else if errors.Is(err, billing.ErrInsufficientBalance) {
					out[p.ID] = "balance insufficient: " + strings.TrimPrefix(err.Error(), billing.ErrInsufficientBalance.Error()+": ")
				}
			}
		}
	}
	return out
}

// waiting says where a pipeline that some agent could run stands: its team at its cap (running
// of its class run now), or its place in the queue.
func (s *Service) waiting(ctx context.Context, p build.Pipeline, running int) string {
	if limit := s.cfg.Caps[p.RunnerTag]; limit > 0 {
		if running >= limit {
			return fmt.Sprintf("team concurrency cap reached: %d of %d pipelines running on %s", running, limit, p.RunnerTag)
		}
	}
	pos, teams, err := s.queue.Position(ctx, s.in.queueClass(p.OrgID, p.RunnerTag), p.OrgID, p.ID)
	if err != nil || pos == 0 {
		return "being put back in the queue (the reconciler restores what Redis lost within seconds)"
	}
	if _, platform := s.in.classes.class(p.RunnerTag); !platform {
		return fmt.Sprintf("all runners of your team with tag %s are busy: #%d in the queue", p.RunnerTag, pos)
	}
	return fmt.Sprintf("all agents of %s are busy: #%d in the team's queue, %d team(s) waiting", p.RunnerTag, pos, teams)
}
