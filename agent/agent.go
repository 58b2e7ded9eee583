// Package agent is the Nimbus agent: the process on a CPU or GPU host that runs pipelines. It is
// used by the nimbus-agent binary and, in the all-in-one mode, inside nimbus-server as the
// built-in agent. It never imports backend packages; it talks to the server only through the
// HTTP API whose wire types are in agent/protocol.
//
// Today the agent establishes its identity (an id kept in its work dir, so a restart recognises
// what the previous run left behind), chooses and verifies its executor (Docker when an engine
// answers, else the host shell with a loud warning) and removes leftovers of earlier runs.
// Leasing work from the server arrives with the scheduler.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/nimbus-build/nimbus/agent/executor"
)

// Config is an agent's configuration.
type Config struct {
	ServerURL  string
	Token      string
	Tags       []string
	CPUs       int
	Executor   string // auto, docker or shell
	DockerHost string // "" = DOCKER_HOST or the default socket
	Network    string // container network mode; "" = the engine's default
	WorkDir    string // workspaces and the agent id live here
}

// Agent is one running agent.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	id   string
	exec executor.Executor
}

// IDFile holds the agent's id in its work dir.
const IDFile = "agent-id"

// New prepares an agent: work dir, id, executor, cleanup of earlier runs. The caller must Close
// it.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Agent, error) {
	if cfg.WorkDir == "" {
		return nil, errors.New("agent: work dir is required")
	}
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, "workspaces"), 0o755); err != nil {
		return nil, fmt.Errorf("agent: create work dir: %w", err)
	}
	id, err := loadID(cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	ex, warning, err := executor.Detect(ctx, cfg.Executor, cfg.DockerHost, id)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if d, ok := ex.(*executor.Docker); ok {
		d.NetworkMode = cfg.Network
	}
	log = log.With("agent_id", id)
	if warning != "" {
		log.Warn("!!! " + warning + " !!!")
	}
	a := &Agent{cfg: cfg, log: log, id: id, exec: ex}
	if err := a.cleanup(ctx); err != nil {
		ex.Close()
		return nil, err
	}
	log.Info("agent ready", "executor", ex.Name(), "tags", strings.Join(cfg.Tags, ","), "cpus", cfg.CPUs, "work_dir", cfg.WorkDir)
	return a, nil
}

// ID returns the agent's stable id.
func (a *Agent) ID() string { return a.id }

// Executor returns the executor the agent chose.
func (a *Agent) Executor() executor.Executor { return a.exec }

// Close releases the executor.
func (a *Agent) Close() error { return a.exec.Close() }

// Run serves until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	<-ctx.Done()
	a.log.Info("agent stopped")
	return nil
}

// cleanup removes containers and workspaces that an earlier run of this agent left behind: a
// crash or kill -9 skips the normal teardown, and the next start must not inherit its debris.
func (a *Agent) cleanup(ctx context.Context) error {
	if err := a.exec.Cleanup(ctx); err != nil {
		return fmt.Errorf("agent: clean up earlier containers: %w", err)
	}
	dir := filepath.Join(a.cfg.WorkDir, "workspaces")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("agent: read workspaces: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("agent: remove stale workspace: %w", err)
		}
	}
	if len(entries) > 0 {
		a.log.Info("removed stale workspaces", "count", len(entries))
	}
	return nil
}

func loadID(workDir string) (string, error) {
	path := filepath.Join(workDir, IDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("agent: read id: %w", err)
	}
	r := make([]byte, 8)
	if _, err := rand.Read(r); err != nil {
		return "", fmt.Errorf("agent: generate id: %w", err)
	}
	id := "agent-" + hex.EncodeToString(r)
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("agent: write id: %w", err)
	}
	return id, nil
}
