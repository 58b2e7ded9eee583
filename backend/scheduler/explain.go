package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/internal/human"
)

// Explain says, for each queued pipeline, everything it waits for at once — the question
// "pending forever with no reason" leaves unanswered everywhere else — each blocker with what
// to do about it (build.Blocker's remedy). In order of what to fix first:
//
//	waiting for lock …                                              (lock)
//	no online agent serves <class>                                  (no_agent: see the agents, bring a team runner)
//	no online agent of <class> has <n> cores (the largest has <m>)  (too_small)
//	team concurrency cap reached: <n> of <cap> pipelines running    (team_cap)
//	balance insufficient: … / the team's monthly spending cap would be passed: …    (balance: top up / spending_cap)
//	all agents of <class> are busy: #<k> in the team's queue, …     (busy: not a blocker, its place)
//
// and for a team tag (teams.go): no runner of your team serves tag <tag>, every runner of it is
// paused, none has the cores, or all are busy.
func (s *Service) Explain(ctx context.Context, ps []build.Pipeline) map[int64][]build.Blocker {
	out := map[int64][]build.Blocker{}
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
			if a.WholeHost {
				ci.maxCPUs = max(ci.maxCPUs, s.in.classes.largest())
			}
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
		var bs []build.Blocker
		add := func(code, remedy, format string, args ...any) {
			bs = append(bs, build.Blocker{Code: code, Message: fmt.Sprintf(format, args...), Remedy: remedy})
		}
		if strings.HasPrefix(p.Reason, lockWaitPrefix) {
			// Parked by takeLock: it is on no queue until the lock is free.
			add(build.BlockerLock, "", "%s", s.lockWaitReason(ctx, p))
			out[p.ID] = bs
			continue
		}
		qc := s.in.queueClass(p.OrgID, p.RunnerTag)
		ci := info[qc]
		_, platform := s.in.classes.class(p.RunnerTag)
		switch {
		case !platform && ci == nil && paused[qc]:
			add(build.BlockerPaused, build.RemedyTeamAgents, "every runner of your team with tag %s is paused (resume one on the team's Agents page)", p.RunnerTag)
		case !platform && ci == nil:
			msg := noTeamRunner(p.RunnerTag)
			if s.cfg.TeamRunnerWait > 0 {
				msg += fmt.Sprintf(" (it fails after %s in the queue)", human.Duration(s.cfg.TeamRunnerWait))
			}
			add(build.BlockerNoAgent, build.RemedyTeamAgents, "%s", msg)
		case !platform && ci.maxCPUs < p.CPUs:
			add(build.BlockerTooSmall, build.RemedyTeamAgents, "no runner of your team with tag %s has %d cores (the largest has %d)", p.RunnerTag, p.CPUs, ci.maxCPUs)
		case ci == nil:
			add(build.BlockerNoAgent, s.agentRemedy(p.RunnerTag), "no online agent serves %s", p.RunnerTag)
		case ci.maxCPUs < p.CPUs:
			add(build.BlockerTooSmall, s.agentRemedy(p.RunnerTag), "no online agent of %s has %d cores (the largest has %d)", p.RunnerTag, p.CPUs, ci.maxCPUs)
		case strings.HasPrefix(p.Reason, build.ReasonFundsWaitPrefix):
			// Agents serve it: what it waits for is the money (below).
		default:
			if limit := s.cfg.Caps[p.RunnerTag]; platform && limit > 0 && running[p.RunnerTag][p.OrgID] >= limit {
				add(build.BlockerTeamCap, "", "team concurrency cap reached: %d of %d pipelines running on %s", running[p.RunnerTag][p.OrgID], limit, p.RunnerTag)
			} else {
				add(build.BlockerBusy, "", "%s", s.waiting(ctx, p))
			}
		}
		if s.meter != nil {
			// A pipeline its account cannot pay for would fail at dispatch.
			err := s.meter.CanStart(ctx, Run{PipelineID: p.ID, OrgID: p.OrgID, RepoID: p.RepoID, Class: p.RunnerTag, Cores: p.CPUs, Workspace: p.Workspace})
			switch r := refusal(err); {
			case r == nil:
			case r.Reason == build.ReasonSpendingCap && r.Detail != "":
				// The cap need not be reached: the next window may be what would pass it, and
				// the figures say by how much (a team at 0.1467 of 0.15 read "reached").
				add(build.BlockerSpendingCap, build.RemedySpendingCap, "the team's monthly spending cap would be passed: %s", r.Detail)
			case r.Reason == build.ReasonSpendingCap:
				add(build.BlockerSpendingCap, build.RemedySpendingCap, "the team's monthly spending cap would be passed")
			default:
				add(build.BlockerBalance, build.RemedyTopUp, "balance insufficient: %s", r.Detail)
			}
		}
		if len(bs) == 0 {
			// It waited for money, which is there now: the reconciler queues it again.
			add(build.BlockerBusy, "", "the team's money covers it now: it goes back in the queue within seconds")
		}
		out[p.ID] = bs
	}
	return out
}

// Reasons is Explain as one sentence per pipeline: its blockers' messages.
func (s *Service) Reasons(ctx context.Context, ps []build.Pipeline) map[int64]string {
	out := map[int64]string{}
	for id, bs := range s.Explain(ctx, ps) {
		out[id] = build.ReasonOf(bs)
	}
	return out
}

// waiting says where a pipeline that some agent could run stands: its place in the queue.
func (s *Service) waiting(ctx context.Context, p build.Pipeline) string {
	pos, teams, err := s.queue.Position(ctx, s.in.queueClass(p.OrgID, p.RunnerTag), p.OrgID, p.ID)
	if err != nil || pos == 0 {
		return "being put back in the queue (the reconciler restores what Redis lost within seconds)"
	}
	if _, platform := s.in.classes.class(p.RunnerTag); !platform {
		return fmt.Sprintf("all runners of your team with tag %s are busy: #%d in the queue", p.RunnerTag, pos)
	}
	return fmt.Sprintf("all agents of %s are busy: #%d in the team's queue, %d team(s) waiting", p.RunnerTag, pos, teams)
}

// agentRemedy is where a pipeline of a platform class that lacks an agent points: a team's own
// runners only when the installation lets them serve the tag (a runner started for a GPU tag
// was refused: "a team runner needs a tag outside the cnb: namespace"); otherwise the
// platform's admins, who add agents on the admin Agents page.
func (s *Service) agentRemedy(tag string) string {
	if slices.Contains(s.cfg.TeamRunnerCNBTags, tag) {
		return build.RemedyAgents
	}
	return build.RemedyPlatformAgents
}
