package scheduler

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Register admits an agent that presents the registration token and gives it its own token.
// A team's runner token (RunnerToken) registers a team runner instead: it serves only that
// team's pipelines, with its tags outside the cnb: namespace and those cnb: tags the operator
// lets team runners serve (Config.TeamRunnerCNBTags); its other cnb: tags are ignored and
// named in the answer.
func (s *Service) Register(ctx context.Context, registrationToken string, req protocol.RegisterRequest) (*protocol.RegisterResponse, error) {
	var team *RunnerToken
	var platform *RegistrationToken
	switch {
	case strings.HasPrefix(registrationToken, auth.PrefixRunner):
		var err error
		if team, err = s.runnerToken(ctx, registrationToken); err != nil {
			return nil, err
		}
	case strings.HasPrefix(registrationToken, auth.PrefixRegister):
		var err error
		if platform, err = s.registrationToken(ctx, registrationToken); err != nil {
			return nil, err
		}
	case s.cfg.RegistrationToken == "" || subtle.ConstantTimeCompare([]byte(registrationToken), []byte(s.cfg.RegistrationToken)) != 1:
		return nil, fault.Unauthenticated("invalid registration token")
	}
	tags, ignored, err := s.checkFacts(req, team != nil)
	if err != nil {
		return nil, err
	}
	token, err := auth.NewToken(auth.PrefixAgent)
	if err != nil {
		return nil, err
	}
	idb := make([]byte, 8)
	rand.Read(idb)
	gpus, _ := json.Marshal(req.GPUs)
	host, _ := json.Marshal(req.Host)
	now := s.clock.Now().UTC()
	a := &Agent{ID: "agt_" + hex.EncodeToString(idb), Name: req.Name, TokenHash: auth.HashToken(token), Version: req.Version,
		Tags: strings.Join(tags, " "), Executor: req.Executor, CPUs: req.CPUs, MemoryBytes: req.MemoryBytes,
		GPUs: string(gpus), Host: string(host), Concurrency: req.Concurrency, FreeCPUs: req.CPUs, FreeGPUs: len(req.GPUs),
		WholeHost: req.WholeHost, LastSeenAt: now, CreatedAt: now}
	if team != nil {
		a.OrgID = &team.OrgID
	}
	err = store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if team != nil {
			if err := tx.Model(&RunnerToken{}).Where("id = ?", team.ID).Update("last_used_at", now).Error; err != nil {
				return err
			}
		}
		if platform != nil {
			if err := tx.Model(&RegistrationToken{}).Where("id = ?", platform.ID).Update("last_used_at", now).Error; err != nil {
				return err
			}
		}
		return tx.Create(a).Error
	})
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "agent registered", "agent", a.ID, "name", a.Name, "tags", a.Tags, "cpus", a.CPUs, "gpus", len(req.GPUs),
		"team", a.OrgID != nil, "ignored_tags", strings.Join(ignored, " "))
	return &protocol.RegisterResponse{AgentID: a.ID, Token: token,
		HeartbeatInterval: protocol.Duration(s.cfg.HeartbeatInterval), PollTimeout: protocol.Duration(s.cfg.PollTimeout),
		LogFlushInterval: protocol.Duration(s.cfg.LogFlushInterval), LeaseTTL: protocol.Duration(s.cfg.LeaseTTL),
		IgnoredTags: ignored}, nil
}

// checkFacts validates what an agent says it is, and returns the tags it will serve (a team
// runner's cnb: tags the installation does not let team runners serve are ignored).
func (s *Service) checkFacts(req protocol.RegisterRequest, team bool) (tags, ignored []string, err error) {
	if len(req.Tags) == 0 || req.CPUs < 1 || req.Concurrency < 1 || len(req.Name) > 200 {
		return nil, nil, fault.Invalid("", "an agent needs tags, cpus ≥ 1, concurrency ≥ 1 and a name of at most 200 characters")
	}
	for _, t := range req.Tags {
		if t == "" || len(t) > 100 || strings.ContainsAny(t, " \t\r\n") {
			return nil, nil, fault.Invalid("tags", "tag %q: a tag is 1–100 characters without spaces", t)
		}
	}
	tags = req.Tags
	if team {
		tags, ignored = s.teamTags(req.Tags)
		if len(tags) == 0 {
			return nil, nil, fault.Invalid("tags", "a team runner needs a tag outside the cnb: namespace (this installation lets team runners serve %s)", s.allowedCNBTags())
		}
	} else if len(s.in.classes.servedBy(req.Tags)) == 0 {
		return nil, nil, fault.Invalid("tags", "none of the tags %v names a runner class", req.Tags)
	}
	return tags, ignored, nil
}

// UpdateFacts records what a registered agent says it is at its start (name, version, tags,
// executor, cores, memory, GPUs, concurrency, host): an agent registers once, and the admin
// Agents page showed what the host was then ("shell" after Docker was installed, the cores
// of another configuration). It answers the tags ignored, as Register does.
func (s *Service) UpdateFacts(ctx context.Context, a *Agent, req protocol.RegisterRequest) ([]string, error) {
	tags, ignored, err := s.checkFacts(req, a.OrgID != nil)
	if err != nil {
		return nil, err
	}
	gpus, _ := json.Marshal(req.GPUs)
	host, _ := json.Marshal(req.Host)
	set := map[string]any{"name": req.Name, "version": req.Version, "tags": strings.Join(tags, " "), "executor": req.Executor,
		"cpus": req.CPUs, "memory_bytes": req.MemoryBytes, "gpus": string(gpus), "host": string(host), "concurrency": req.Concurrency,
		"whole_host": req.WholeHost, "last_seen_at": s.clock.Now().UTC()}
	if err := s.db.WithContext(ctx).Model(&Agent{}).Where("id = ?", a.ID).Updates(set).Error; err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "agent facts updated", "agent", a.ID, "name", req.Name, "executor", req.Executor, "cpus", req.CPUs,
		"gpus", len(req.GPUs), "tags", strings.Join(tags, " "))
	return ignored, nil
}

// AgentByToken authenticates an agent token.
func (s *Service) AgentByToken(ctx context.Context, token string) (*Agent, error) {
	if !strings.HasPrefix(token, auth.PrefixAgent) {
		return nil, fault.Unauthenticated("an agent token is required")
	}
	var a Agent
	err := s.db.WithContext(ctx).Where("token_hash = ?", auth.HashToken(token)).Take(&a).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Unauthenticated("unknown agent token (a revoked runner registers again with a new registration token)")
	}
	return &a, err
}

func (a *Agent) tags() []string { return strings.Fields(a.Tags) }

func (a *Agent) gpuCount() int {
	var g []protocol.GPU
	json.Unmarshal([]byte(a.GPUs), &g)
	return len(g)
}

// seen records that the agent is alive and what it has free. Busy agents poll many times a
// second; the row is written at most every half heartbeat (online means heard from within one
// LeaseTTL, and the control long-poll comes back every heartbeat), and at once after a stop.
func (s *Service) seen(ctx context.Context, a *Agent, freeCPUs, freeGPUs int) {
	now := s.clock.Now().UTC()
	if now.Sub(a.LastSeenAt) < min(5*time.Second, s.cfg.HeartbeatInterval/2) && a.StoppedAt == nil &&
		a.FreeCPUs == freeCPUs && a.FreeGPUs == freeGPUs {
		return
	}
	if s.db.WithContext(ctx).Model(&Agent{}).Where("id = ?", a.ID).
		Updates(map[string]any{"last_seen_at": now, "free_cpus": freeCPUs, "free_gpus": freeGPUs, "stopped_at": nil}).Error == nil {
		a.LastSeenAt, a.FreeCPUs, a.FreeGPUs, a.StoppedAt = now, freeCPUs, freeGPUs, nil
	}
}

// Deregister records that the agent is stopping: it is offline from now on (until it is heard
// from again), so waiting pipelines say that no agent serves them instead of "all busy".
func (s *Service) Deregister(ctx context.Context, a *Agent) error {
	now := s.clock.Now().UTC()
	if err := s.db.WithContext(ctx).Model(&Agent{}).Where("id = ?", a.ID).Update("stopped_at", now).Error; err != nil {
		return err
	}
	s.log.InfoContext(ctx, "agent deregistered", "agent", a.ID, "name", a.Name)
	return nil
}

// Control holds an agent's control long-poll: it answers the moment one of the agent's running
// leases must stop (Intake.StopRequested wakes it on whichever replica holds it), and otherwise
// after one heartbeat, empty. Each call counts as the agent being heard from.
func (s *Service) Control(ctx context.Context, a *Agent, req protocol.ControlRequest, draining <-chan struct{}) (*protocol.ControlResponse, error) {
	s.seen(ctx, a, a.FreeCPUs, a.FreeGPUs)
	deadline := time.NewTimer(s.cfg.HeartbeatInterval)
	defer deadline.Stop()
	for {
		// Subscribe before looking, so a stop requested between the look and the wait wakes us.
		woke := s.in.wake.wait(stopKey(a.ID))
		stopping, err := s.builds.Stopping(ctx, a.ID, req.Running)
		if err != nil {
			return nil, err
		}
		if len(stopping) > 0 {
			out := &protocol.ControlResponse{}
			for _, p := range stopping {
				reason := p.Reason
				if reason == "" {
					reason = build.ReasonCancelled
				}
				out.Stop = append(out.Stop, protocol.Stop{LeaseID: p.LeaseID, Reason: reason})
			}
			return out, nil
		}
		select {
		case <-woke:
		case <-deadline.C:
			return &protocol.ControlResponse{}, nil
		case <-draining:
			return &protocol.ControlResponse{}, nil
		case <-ctx.Done():
			return &protocol.ControlResponse{}, nil
		}
	}
}

// AgentInfo is an agent as platform admins see it (GET /api/v1/admin/agents).
type AgentInfo struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Version     string         `json:"version"`
	Tags        []string       `json:"tags"`
	Executor    string         `json:"executor"`
	CPUs        int            `json:"cpus"`
	FreeCPUs    int            `json:"free_cpus"`
	MemoryBytes int64          `json:"memory_bytes"`
	GPUs        []protocol.GPU `json:"gpus"`
	FreeGPUs    int            `json:"free_gpus"`
	Concurrency int            `json:"concurrency"`
	// WholeHost says the agent takes a pipeline larger than its cores when idle, alone.
	WholeHost bool `json:"whole_host"`
	Online    bool `json:"online"`
	// Paused says a team admin paused the runner: it takes no new pipelines.
	Paused bool `json:"paused"`
	// TeamID is the team of a team runner; absent for the platform's agents.
	TeamID     *int64          `json:"team_id,omitempty"`
	LastSeenAt time.Time       `json:"last_seen_at"`
	CreatedAt  time.Time       `json:"created_at"`
	Pipelines  []AgentPipeline `json:"pipelines"`
}

// AgentPipeline is a pipeline an agent holds a lease on now.
type AgentPipeline struct {
	ID          int64      `json:"id"`
	Name        string     `json:"name"`
	RunnerTag   string     `json:"runner_tag"`
	CPUs        int        `json:"cpus"`
	Org         string     `json:"org"`
	Repo        string     `json:"repo"`
	BuildNumber int64      `json:"build_number"`
	StartedAt   *time.Time `json:"started_at"`
}

// onlineSince is the oldest last-seen time of an agent that still counts as online: one heard
// from within one LeaseTTL (a live agent's control long-poll comes back every third of it), and
// that has not deregistered since (online below).
func (s *Service) onlineSince() time.Time {
	return s.clock.Now().UTC().Add(-s.cfg.LeaseTTL)
}

// online says whether an agent counts as online.
func (a *Agent) online(since time.Time) bool {
	return a.LastSeenAt.After(since) && (a.StoppedAt == nil || a.StoppedAt.Before(a.LastSeenAt))
}

// Agents lists every registered agent, oldest first, with the running pipelines it holds.
func (s *Service) Agents(ctx context.Context) ([]AgentInfo, error) {
	return s.agentList(ctx, s.db.WithContext(ctx))
}

// agentList lists the agents q selects, oldest first, with the running pipelines each holds.
func (s *Service) agentList(ctx context.Context, q *gorm.DB) ([]AgentInfo, error) {
	var agents []Agent
	if err := q.Order("created_at, id").Find(&agents).Error; err != nil {
		return nil, err
	}
	held, err := s.builds.Held(ctx)
	if err != nil {
		return nil, err
	}
	byAgent := map[string][]AgentPipeline{}
	for _, h := range held {
		byAgent[h.AgentID] = append(byAgent[h.AgentID], AgentPipeline{ID: h.ID, Name: h.Name, RunnerTag: h.RunnerTag, CPUs: h.CPUs,
			Org: h.Org, Repo: h.Repo, BuildNumber: h.BuildNumber, StartedAt: h.StartedAt})
	}
	online := s.onlineSince()
	out := make([]AgentInfo, 0, len(agents))
	for _, a := range agents {
		gpus := []protocol.GPU{}
		json.Unmarshal([]byte(a.GPUs), &gpus)
		if gpus == nil {
			gpus = []protocol.GPU{}
		}
		ps := byAgent[a.ID]
		if ps == nil {
			ps = []AgentPipeline{}
		}
		out = append(out, AgentInfo{ID: a.ID, Name: a.Name, Version: a.Version, Tags: a.tags(), Executor: a.Executor,
			CPUs: a.CPUs, FreeCPUs: a.FreeCPUs, MemoryBytes: a.MemoryBytes, GPUs: gpus, FreeGPUs: a.FreeGPUs,
			Concurrency: a.Concurrency, WholeHost: a.WholeHost, Online: a.online(online), Paused: a.PausedAt != nil, TeamID: a.OrgID, LastSeenAt: a.LastSeenAt,
			CreatedAt: a.CreatedAt, Pipelines: ps})
	}
	return out, nil
}

// hostSnapshot is what a pipeline's record keeps of the agent that leases it: who it is, its
// version and executor, its GPUs and its host's facts, as they are at the lease.
func hostSnapshot(a *Agent) string {
	var facts protocol.HostFacts
	json.Unmarshal([]byte(a.Host), &facts)
	var gpus []protocol.GPU
	json.Unmarshal([]byte(a.GPUs), &gpus)
	raw, _ := json.Marshal(build.HostSnapshot{AgentID: a.ID, Name: a.Name, Version: a.Version, Executor: a.Executor, GPUs: gpus, Host: facts})
	return string(raw)
}
