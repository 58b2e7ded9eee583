package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/internal/human"
)

// Team runners: a team's own hosts (bring your own machines).
//
// A team admin makes a runner token; an agent registered with it is a team runner (Agent.OrgID):
//
//   - It serves its tags outside the cnb: namespace, each as a queue of that team alone:
//     class "team:<org>:<tag>" ({q:team:<org>:<tag>} in Redis). Platform agents never poll
//     those, and another team's pipeline with the same tag lands in its own team's queue, so a
//     team runner never takes another team's pipeline.
//   - It serves the cnb: tags in Config.TeamRunnerCNBTags (none unless the operator says so)
//     from the platform's queues, taking only its team's entries (Poller.OnlyOrg), so a team can
//     add its own GPU box to cnb:arch:amd64:gpu for itself.
//   - Its time is billed under the class "team:<tag>": recorded in the usage like any other,
//     free unless the operator prices that class (billing's Prices: a class without a price is
//     free), and never taken from the monthly free quota.
//   - On a runner with GPUs, a pipeline of a team tag gets one free GPU by device id (none when
//     all are held): the platform does not size team hosts, so set the agent's --concurrency to
//     its GPU count to give each pipeline one.
//   - A queued pipeline of a team tag that no online runner of its team serves says "no runner
//     of your team serves tag X", and fails after Config.TeamRunnerWait (24 h, as GitHub fails
//     a job no self-hosted runner picked up in a day) with the same words.
//
// Pause keeps a runner registered and online but gives it no new work; revoke deletes it, so
// its token stops working at its next call (its running pipelines fail agent_lost when their
// leases expire).

// teamClassPrefix starts the queue class of a team tag.
const teamClassPrefix = "team:"

// teamClass is the queue class of a team's tag.
func teamClass(orgID int64, tag string) string {
	return teamClassPrefix + strconv.FormatInt(orgID, 10) + ":" + tag
}

// queueClass is the queue a pipeline waits in: its class's, or its team's for a team tag.
func (in *Intake) queueClass(orgID int64, runnerTag string) string {
	if _, ok := in.classes.class(runnerTag); ok {
		return runnerTag
	}
	return teamClass(orgID, runnerTag)
}

// isTeam says whether the agent is a team runner.
func (a *Agent) isTeam() bool { return a.OrgID != nil }

// agentClasses are the queue classes the agent takes work from.
func (s *Service) agentClasses(a *Agent) []string {
	if !a.isTeam() {
		return s.in.classes.servedBy(a.tags())
	}
	out := s.in.classes.servedBy(a.tags()) // only the allowed cnb: tags were kept
	for _, t := range a.tags() {
		if !strings.HasPrefix(t, "cnb:") {
			if _, ok := s.in.classes.class(t); !ok {
				out = append(out, teamClass(*a.OrgID, t))
			}
		}
	}
	return out
}

// teamTags splits a team runner's tags into those it serves and those it may not.
func (s *Service) teamTags(tags []string) (keep, ignored []string) {
	for _, t := range tags {
		if strings.HasPrefix(t, "cnb:") && !slices.Contains(s.cfg.TeamRunnerCNBTags, t) {
			ignored = append(ignored, t)
			continue
		}
		if !slices.Contains(keep, t) {
			keep = append(keep, t)
		}
	}
	return keep, ignored
}

func (s *Service) allowedCNBTags() string {
	if len(s.cfg.TeamRunnerCNBTags) == 0 {
		return "no cnb: tags"
	}
	return strings.Join(s.cfg.TeamRunnerCNBTags, ", ")
}

// runnerToken finds the team of a runner registration token.
func (s *Service) runnerToken(ctx context.Context, token string) (*RunnerToken, error) {
	var t RunnerToken
	err := s.db.WithContext(ctx).Where("token_hash = ?", auth.HashToken(token)).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Unauthenticated("invalid registration token (a deleted runner token no longer registers runners)")
	}
	return &t, err
}

// RunnerTokenInfo is a runner token as its team sees it; Token is set only in the answer that
// creates it.
type RunnerTokenInfo struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	Token      string     `json:"token,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

func tokenInfo(t RunnerToken) RunnerTokenInfo {
	return RunnerTokenInfo{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt}
}

// CreateRunnerToken makes a registration token for the team's runners; the token is in the
// answer only.
func (s *Service) CreateRunnerToken(ctx context.Context, orgID, userID int64, name string) (RunnerTokenInfo, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return RunnerTokenInfo{}, fault.Invalid("name", "a runner token needs a name of 1–100 characters")
	}
	token, err := auth.NewToken(auth.PrefixRunner)
	if err != nil {
		return RunnerTokenInfo{}, err
	}
	t := RunnerToken{OrgID: orgID, Name: name, TokenHash: auth.HashToken(token), CreatedBy: userID, CreatedAt: s.clock.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(&t).Error; err != nil {
		return RunnerTokenInfo{}, err
	}
	out := tokenInfo(t)
	out.Token = token
	return out, nil
}

// RunnerTokens lists the team's runner tokens, oldest first.
func (s *Service) RunnerTokens(ctx context.Context, orgID int64) ([]RunnerTokenInfo, error) {
	var ts []RunnerToken
	if err := s.db.WithContext(ctx).Where("org_id = ?", orgID).Order("id").Find(&ts).Error; err != nil {
		return nil, err
	}
	out := make([]RunnerTokenInfo, len(ts))
	for i, t := range ts {
		out[i] = tokenInfo(t)
	}
	return out, nil
}

// DeleteRunnerToken deletes a runner token: it registers nothing from now on; runners
// registered with it keep their own tokens (revoke those one by one).
func (s *Service) DeleteRunnerToken(ctx context.Context, orgID, id int64) error {
	res := s.db.WithContext(ctx).Where("org_id = ? AND id = ?", orgID, id).Delete(&RunnerToken{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fault.NotFound("runner token %d not found", id)
	}
	return nil
}

// TeamAgents lists the team's runners, oldest first, with what they run now.
func (s *Service) TeamAgents(ctx context.Context, orgID int64) ([]AgentInfo, error) {
	return s.agentList(ctx, s.db.WithContext(ctx).Where("org_id = ?", orgID))
}

// teamAgent loads one of the team's runners; another team's or a platform agent is not found.
func (s *Service) teamAgent(ctx context.Context, orgID int64, id string) (*Agent, error) {
	var a Agent
	err := s.db.WithContext(ctx).Where("org_id = ? AND id = ?", orgID, id).Take(&a).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("runner %q not found", id)
	}
	return &a, err
}

// PauseAgent stops giving the team's runner new pipelines (those it runs go on); ResumeAgent
// undoes it. Both answer the runner as the list shows it.
func (s *Service) PauseAgent(ctx context.Context, orgID int64, id string, paused bool) (AgentInfo, error) {
	a, err := s.teamAgent(ctx, orgID, id)
	if err != nil {
		return AgentInfo{}, err
	}
	var at *time.Time
	if paused {
		now := s.clock.Now().UTC()
		at = &now
	}
	if err := s.db.WithContext(ctx).Model(&Agent{}).Where("id = ?", a.ID).Update("paused_at", at).Error; err != nil {
		return AgentInfo{}, err
	}
	list, err := s.agentList(ctx, s.db.WithContext(ctx).Where("id = ?", a.ID))
	if err != nil || len(list) == 0 {
		return AgentInfo{}, err
	}
	if !paused {
		// A poll held while it was paused returns at once (here, or on the replica holding it,
		// through the work channel), and the agent polls again.
		s.in.handOver(ctx, []string{a.ID})
	}
	return list[0], nil
}

// RevokeAgent deletes the team's runner: its token stops working at its next call.
func (s *Service) RevokeAgent(ctx context.Context, orgID int64, id string) error {
	a, err := s.teamAgent(ctx, orgID, id)
	if err != nil {
		return err
	}
	if err := s.db.WithContext(ctx).Delete(&Agent{}, "id = ?", a.ID).Error; err != nil {
		return err
	}
	s.log.InfoContext(ctx, "team runner revoked", "agent", a.ID, "org", orgID)
	return nil
}

// pausedNow re-reads whether a team runner is paused (or revoked) before a dispatch: a long-poll
// began before the pause holds the agent as it was then.
func (s *Service) pausedNow(ctx context.Context, a *Agent) bool {
	var now Agent
	err := s.db.WithContext(ctx).Select("paused_at").Where("id = ?", a.ID).Take(&now).Error
	return err != nil || now.PausedAt != nil
}

// noTeamRunner is the reason a team-tag pipeline waits, and fails with after TeamRunnerWait.
func noTeamRunner(tag string) string {
	return fmt.Sprintf("no runner of your team serves tag %s", tag)
}

// FailUnserved fails the queued pipelines of team tags that have waited longer than
// Config.TeamRunnerWait while no online runner of their team serves the tag, with the reason
// they waited for. It returns how many it failed.
func (s *Service) FailUnserved(ctx context.Context) (int, error) {
	if s.cfg.TeamRunnerWait <= 0 {
		return 0, nil
	}
	queued, err := s.builds.Queued(ctx)
	if err != nil {
		return 0, err
	}
	deadline := s.clock.Now().Add(-s.cfg.TeamRunnerWait)
	var due []build.Pipeline
	for _, p := range queued {
		if _, ok := s.in.classes.class(p.RunnerTag); !ok && p.QueuedSince().Before(deadline) {
			due = append(due, p)
		}
	}
	if len(due) == 0 {
		return 0, nil
	}
	served, err := s.servedClasses(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range due {
		if served[s.in.queueClass(p.OrgID, p.RunnerTag)] {
			continue
		}
		reason := fmt.Sprintf("%s (gave up after %s in the queue)", noTeamRunner(p.RunnerTag), human.Duration(s.cfg.TeamRunnerWait))
		dropped, err := s.builds.Drop(ctx, p.ID, build.StatusFailed, reason)
		if err != nil {
			return n, err
		}
		if dropped {
			n++
			s.log.InfoContext(ctx, "queued pipeline failed: no team runner", "pipeline", p.ID, "tag", p.RunnerTag)
		}
	}
	return n, nil
}

// FailStale fails the pipelines that have waited in the queue longer than Config.QueueTimeout,
// with what they waited for ("gave up after 24 hours in the queue: no online agent serves …;
// balance insufficient: …"). Pipelines waiting for a lock keep their lock.timeout. It returns
// how many it failed.
func (s *Service) FailStale(ctx context.Context) (int, error) {
	if s.cfg.QueueTimeout <= 0 {
		return 0, nil
	}
	queued, err := s.builds.Queued(ctx)
	if err != nil {
		return 0, err
	}
	deadline := s.clock.Now().Add(-s.cfg.QueueTimeout)
	var due []build.Pipeline
	for _, p := range queued {
		if !strings.HasPrefix(p.Reason, lockWaitPrefix) && p.QueuedSince().Before(deadline) {
			due = append(due, p)
		}
	}
	if len(due) == 0 {
		return 0, nil
	}
	why := s.Explain(ctx, due)
	n := 0
	for _, p := range due {
		reason := fmt.Sprintf("gave up after %s in the queue", human.Duration(s.cfg.QueueTimeout))
		if r := build.ReasonOf(why[p.ID]); r != "" {
			reason += ": " + r
		}
		dropped, err := s.builds.Drop(ctx, p.ID, build.StatusFailed, reason)
		if err != nil {
			return n, err
		}
		if dropped {
			n++
			s.log.InfoContext(ctx, "queued pipeline failed: queue timeout", "pipeline", p.ID, "reason", reason)
		}
	}
	return n, nil
}
