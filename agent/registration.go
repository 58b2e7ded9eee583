package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// errNoToken means the agent has neither a saved registration nor a registration token.
var errNoToken = errors.New("agent: no registration token")

// savedRegistration is TokenFile: the server's answer to the registration, and which server gave
// it, so a restart keeps its identity on the server instead of registering a new agent each
// time (the server creates one per registration).
type savedRegistration struct {
	Server string `json:"server"`
	protocol.RegisterResponse
}

// registration returns the agent's registration: the saved one when it is for this server (and
// not force), else a new one, saved before it is used. A server that cannot be reached is asked
// again until ctx ends; a refusal is final.
func (a *Agent) registration(ctx context.Context, api *client.Client, force bool) (protocol.RegisterResponse, error) {
	path := filepath.Join(a.cfg.WorkDir, TokenFile)
	if !force {
		saved, err := readRegistration(path)
		if err != nil {
			return protocol.RegisterResponse{}, err
		}
		if saved != nil && saved.Server == a.cfg.ServerURL && saved.Token != "" {
			a.log.Info("using the saved registration", "server_agent_id", saved.AgentID)
			a.restateFacts(ctx, api.WithToken(saved.Token))
			return withDefaults(saved.RegisterResponse), nil
		}
	}
	if a.cfg.Token == "" {
		return protocol.RegisterResponse{}, errNoToken
	}
	req := a.facts()
	name := req.Name
	for {
		resp, err := api.Register(ctx, a.cfg.Token, req)
		if err == nil {
			if err := writeRegistration(path, savedRegistration{Server: a.cfg.ServerURL, RegisterResponse: resp}); err != nil {
				return protocol.RegisterResponse{}, err
			}
			a.log.Info("registered", "server_agent_id", resp.AgentID, "name", name)
			if len(resp.IgnoredTags) > 0 {
				// A team runner's cnb: tags the operator does not let team runners serve.
				a.log.Warn("the server ignores some of this agent's tags: it will not run their pipelines",
					"tags", strings.Join(resp.IgnoredTags, " "))
			}
			return withDefaults(resp), nil
		}
		if !client.Retryable(err) || ctx.Err() != nil {
			return protocol.RegisterResponse{}, fmt.Errorf("agent: %w", err)
		}
		a.log.Warn("registration failed; trying again", "err", err)
		if !pause(ctx, 10*time.Second) {
			return protocol.RegisterResponse{}, ctx.Err()
		}
	}
}

// facts are what the agent tells the server it is, at registration and at every start.
func (a *Agent) facts() protocol.RegisterRequest {
	name := a.cfg.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	mem := a.cfg.MemoryBytes
	if mem == 0 {
		mem = hostMemory()
	}
	return protocol.RegisterRequest{Name: name, Version: a.cfg.Version, Tags: a.tags, CPUs: a.cfg.CPUs,
		MemoryBytes: mem, GPUs: a.gpus, Concurrency: a.concurrency(), Executor: a.exec.Name(), Host: a.host, WholeHost: a.cfg.WholeHost}
}

// restateFacts tells the server what this agent is now, under a saved registration: the
// executor, cores, GPUs and tags of the host as it starts today, not as it registered. A
// failure is logged and the agent goes on: a revoked token shows at the first poll, which
// registers again.
func (a *Agent) restateFacts(ctx context.Context, api *client.Client) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := api.Facts(ctx, a.facts())
	if err != nil {
		a.log.Warn("could not update this agent's facts on the server; it shows what it was at its last start", "err", err)
		return
	}
	if len(resp.IgnoredTags) > 0 {
		a.log.Warn("the server ignores some of this agent's tags: it will not run their pipelines", "tags", strings.Join(resp.IgnoredTags, " "))
	}
}

// withDefaults fills intervals a server left out, so a zero can never become a busy loop.
func withDefaults(r protocol.RegisterResponse) protocol.RegisterResponse {
	def := func(d *protocol.Duration, v time.Duration) {
		if *d <= 0 {
			*d = protocol.Duration(v)
		}
	}
	def(&r.HeartbeatInterval, 10*time.Second)
	def(&r.PollTimeout, 30*time.Second)
	def(&r.LogFlushInterval, time.Second)
	def(&r.LeaseTTL, 30*time.Second)
	return r
}

func readRegistration(path string) (*savedRegistration, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: read %s: %w", TokenFile, err)
	}
	var s savedRegistration
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, nil // a torn or foreign file: register again and overwrite it
	}
	return &s, nil
}

// writeRegistration replaces the file atomically, readable by the agent's user only: it holds
// the agent token.
func writeRegistration(path string, s savedRegistration) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("agent: encode registration: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("agent: save registration: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("agent: save registration: %w", err)
	}
	return nil
}

// hostMemory reads MemTotal from /proc/meminfo; 0 where there is none.
func hostMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kib int64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kib); err == nil {
			return kib << 10
		}
	}
	return 0
}
