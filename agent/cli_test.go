package agent

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/internal/lifeline/lifelinetest"
)

// The agent finds its nimbus CLI, places a copy in its work dir (the path the engine sees, even
// when the agent runs in a container of its own) for the jobs' PATH and as their lifeline's
// init; with the CLI off the jobs get none, but their init is still found; an executable that
// cannot be the init leaves the agent without lifelines, and it says so.
func TestSetUpCLI(t *testing.T) {
	cli := lifelinetest.Init(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()

	work := t.TempDir()
	got, lines := setUpCLI(ctx, work, cli, log)
	if want := filepath.Join(work, "bin", "nimbus"); got != want || lines == nil || lines.Init() != want {
		t.Fatalf("setUpCLI(%s) = %q, %v; want the copy %s for both", cli, got, lines, want)
	}
	orig, _ := os.ReadFile(cli)
	if copied, err := os.ReadFile(got); err != nil || !bytes.Equal(copied, orig) {
		t.Fatalf("the copy differs from the CLI: %v", err)
	}

	t.Setenv("PATH", filepath.Dir(cli)+string(os.PathListSeparator)+os.Getenv("PATH"))
	got, lines = setUpCLI(ctx, t.TempDir(), CLIOff, log)
	if got != "" || lines == nil {
		t.Fatalf("with the CLI off: %q, %v; want none for the jobs and lifelines still", got, lines)
	}

	logs.Reset()
	got, lines = setUpCLI(ctx, t.TempDir(), "/bin/busybox", log)
	if lines != nil || !strings.Contains(logs.String(), "its jobs run on until it is started again") ||
		!strings.Contains(logs.String(), "cannot run steps under a lifeline") {
		t.Fatalf("busybox as the CLI: %q, %v, log %q", got, lines, logs.String())
	}
}
