package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/e2e/testenv"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestIDSurvivesRestartAndStaleWorkspacesGo(t *testing.T) {
	dir := t.TempDir()
	a, err := New(context.Background(), Config{WorkDir: dir, Executor: executor.ModeShell}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	first := a.ID()
	a.Close()
	if !strings.HasPrefix(first, "agent-") {
		t.Fatalf("id %q", first)
	}
	stale := filepath.Join(dir, "workspaces", "pipeline-41")
	os.MkdirAll(filepath.Join(stale, "src"), 0o755)
	os.WriteFile(filepath.Join(stale, "src", "f"), []byte("x"), 0o644)

	b, err := New(context.Background(), Config{WorkDir: dir, Executor: executor.ModeShell}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.ID() != first {
		t.Fatalf("id changed across restart: %q -> %q", first, b.ID())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale workspace survived: %v", err)
	}
}

func TestRestartRemovesContainersOfThePreviousRun(t *testing.T) {
	host, image := testenv.DockerHost(t), testenv.Image(t)
	dir := t.TempDir()
	cfg := Config{WorkDir: dir, Executor: executor.ModeDocker, DockerHost: host, Network: "none"}
	a, err := New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if a.Executor().Name() != "docker" {
		t.Fatalf("executor %s", a.Executor().Name())
	}
	a.Close()

	// What a kill -9 mid-job leaves: a labelled container still there.
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{"sleep", "600"},
		Labels: map[string]string{executor.LabelAgent: a.ID()}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}

	b, err := New(ctx, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := cli.ContainerInspect(ctx, c.ID); !client.IsErrNotFound(err) {
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		t.Fatalf("leftover container survived the restart: %v", err)
	}
}

func TestRequiredDockerMissingFails(t *testing.T) {
	_, err := New(context.Background(), Config{WorkDir: t.TempDir(), Executor: executor.ModeDocker,
		DockerHost: "unix://" + filepath.Join(t.TempDir(), "none.sock")}, quiet())
	if err == nil || !strings.Contains(err.Error(), "no Docker engine") {
		t.Fatalf("err = %v", err)
	}
}
