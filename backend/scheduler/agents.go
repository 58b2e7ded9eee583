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

	"github.com/nimbus-build/nimbus/agent/protocol"
	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
)

// Register admits an agent that presents the registration token and gives it its own token.
func (s *Service) Register(ctx context.Context, registrationToken string, req protocol.RegisterRequest) (*protocol.RegisterResponse, error) {
	if s.cfg.RegistrationToken == "" || subtle.ConstantTimeCompare([]byte(registrationToken), []byte(s.cfg.RegistrationToken)) != 1 {
		return nil, api.Unauthenticated("invalid registration token")
	}
	if len(req.Tags) == 0 || req.CPUs < 1 || req.Concurrency < 1 || len(req.Name) > 200 {
		return nil, api.Invalid("", "an agent needs tags, cpus ≥ 1, concurrency ≥ 1 and a name of at most 200 characters")
	}
	if len(s.classesFor(req.Tags)) == 0 {
		return nil, api.Invalid("tags", "none of the tags %v names a runner class", req.Tags)
	}
	token, err := auth.NewToken(auth.PrefixAgent)
	if err != nil {
		return nil, err
	}
	idb := make([]byte, 8)
	rand.Read(idb)
	gpus, _ := json.Marshal(req.GPUs)
	now := s.clock.Now().UTC()
	a := &Agent{ID: "agt_" + hex.EncodeToString(idb), Name: req.Name, TokenHash: auth.HashToken(token), Version: req.Version,
		Tags: strings.Join(req.Tags, " "), Executor: req.Executor, CPUs: req.CPUs, MemoryBytes: req.MemoryBytes,
		GPUs: string(gpus), Concurrency: req.Concurrency, FreeCPUs: req.CPUs, FreeGPUs: len(req.GPUs),
		LastSeenAt: now, CreatedAt: now}
	if err := s.db.WithContext(ctx).Create(a).Error; err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "agent registered", "agent", a.ID, "name", a.Name, "tags", a.Tags, "cpus", a.CPUs, "gpus", len(req.GPUs))
	return &protocol.RegisterResponse{AgentID: a.ID, Token: token,
		HeartbeatInterval: protocol.Duration(s.cfg.HeartbeatInterval), PollTimeout: protocol.Duration(s.cfg.PollTimeout),
		LogFlushInterval: protocol.Duration(s.cfg.LogFlushInterval), LeaseTTL: protocol.Duration(s.cfg.LeaseTTL)}, nil
}

// AgentByToken authenticates an agent token.
func (s *Service) AgentByToken(ctx context.Context, token string) (*Agent, error) {
	if !strings.HasPrefix(token, auth.PrefixAgent) {
		return nil, api.Unauthenticated("an agent token is required")
	}
	var a Agent
	err := s.db.WithContext(ctx).Where("token_hash = ?", auth.HashToken(token)).Take(&a).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, api.Unauthenticated("unknown agent token")
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
// second; the row is written at most every few seconds (online means seen within a poll timeout).
func (s *Service) seen(ctx context.Context, a *Agent, freeCPUs, freeGPUs int) {
	now := s.clock.Now().UTC()
	if now.Sub(a.LastSeenAt) < 5*time.Second && a.FreeCPUs == freeCPUs && a.FreeGPUs == freeGPUs {
		return
	}
	if s.db.WithContext(ctx).Model(&Agent{}).Where("id = ?", a.ID).
		Updates(map[string]any{"last_seen_at": now, "free_cpus": freeCPUs, "free_gpus": freeGPUs}).Error == nil {
		a.LastSeenAt, a.FreeCPUs, a.FreeGPUs = now, freeCPUs, freeGPUs
	}
}
