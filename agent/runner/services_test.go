package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/agent/dockerservice"
	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// dockerServices gives the harness's runner a rootless docker service manager.
func dockerServices(t *testing.T, h *harness) *dockerservice.Manager {
	t.Helper()
	user := testenv.DindUser(t)
	dir := filepath.Join("/var/lib/nimbus-agent-test", h.agentID)
	run := filepath.Join("/run", "nimbus-test-"+h.agentID)
	m := dockerservice.New(dockerservice.Config{User: user, Dir: dir, RunDir: run})
	if err := m.Available(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Cleanup()
		os.RemoveAll(dir)
		os.RemoveAll(run)
	})
	h.runner.cfg.Services.Docker = m
	return m
}

func withDocker(p protocol.Plan) protocol.Plan {
	p.Services = []protocol.Service{{Name: "docker", Options: map[string]any{"rootlessBuildkitd": map[string]any{"enabled": true}}}}
	p.Image = &protocol.Image{}
	return p
}

func TestDockerServiceInAJob(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	dockerServices(t, h)
	p := withDocker(plan(
		serial("use", script("use", `echo "host=$DOCKER_HOST"; docker version --format 'server {{.Server.Version}}' && docker info --format '{{.SecurityOptions}}'`)),
	))
	p.Image.Name = h.image
	res, rec := h.run(t, lease("svc-1", p))
	log := string(rec.Logs[jobID(0, 0)])
	if res.Status != StatusSuccess {
		t.Fatalf("status %+v, log:\n%s", res, log)
	}
	for _, want := range []string{
		"[nimbus] services: starting the pipeline's own Docker engine (rootless)",
		"[nimbus] services: docker is ready after",
		"rootlessBuildkitd is not available on this agent",
		"host=unix:///var/run/docker.sock", "server ", "rootless",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	// The engine is gone with the pipeline.
	entries, _ := os.ReadDir(filepath.Join("/var/lib/nimbus-agent-test", h.agentID))
	if len(entries) != 0 {
		t.Fatalf("the engine's state survived the pipeline: %v", entries)
	}

}

func TestDockerServiceRefusedClearly(t *testing.T) {
	t.Run("shell executor", func(t *testing.T) {
		h := newHarness(t, executor.ModeShell)
		res, rec := h.run(t, lease("svc-shell", withDocker(plan(serial("s", script("s", "echo never"))))))
		if res.Status != StatusFailed || !strings.Contains(res.Reason, "services: docker needs the Docker executor") {
			t.Fatalf("result %+v", res)
		}
		if log := string(rec.Logs[jobID(0, 0)]); !strings.Contains(log, "needs the Docker executor") || strings.Contains(log, "never") {
			t.Fatalf("the first job's log:\n%s", log)
		}
	})
	t.Run("service off", func(t *testing.T) {
		h := newHarness(t, executor.ModeDocker)
		h.runner.cfg.Services.Docker = dockerservice.New(dockerservice.Config{Mode: dockerservice.ModeOff, Dir: t.TempDir()})
		p := withDocker(plan(serial("s", script("s", "echo never"))))
		p.Image.Name = h.image
		res, _ := h.run(t, lease("svc-off", p))
		if res.Status != StatusFailed || !strings.Contains(res.Reason, "--docker-service=off") {
			t.Fatalf("result %+v", res)
		}
	})
}
