package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/lifeline"
)

// Every job step gets the nimbus CLI (nimbus artifact push|pull, with the job's CNB_TOKEN), the
// way Buildkite's jobs get buildkite-agent: a job in any image hands files to the build's other
// pipelines without installing anything. It is mounted read-only at the end of the image's PATH,
// so an image's own nimbus wins.

// CLIOff, as Config.NimbusCLI, gives jobs no nimbus CLI.
const CLIOff = "off"

// findCLI finds the nimbus CLI for the jobs: the configured path, else nimbus beside the
// running executable (bin/ of a release holds all three binaries), else nimbus on PATH. It must
// be statically linked (make build makes it so). It returns "" and why when there is none.
func findCLI(configured string) (string, string) {
	if configured == CLIOff {
		return "", "turned off (NIMBUS_AGENT_NIMBUS_CLI=off)"
	}
	candidates := []string{configured}
	if configured == "" {
		candidates = nil
		if self, err := os.Executable(); err == nil {
			candidates = append(candidates, filepath.Join(filepath.Dir(self), "nimbus"))
		}
		if p, err := exec.LookPath("nimbus"); err == nil {
			candidates = append(candidates, p)
		}
	}
	var problems []string
	for _, c := range candidates {
		abs, err := filepath.Abs(c)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			if configured != "" || !os.IsNotExist(err) {
				problems = append(problems, fmt.Sprintf("%s: %v", c, err))
			}
			continue
		}
		static, err := executor.IsStatic(abs)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", c, err))
		case !static:
			problems = append(problems, c+" is dynamically linked (build it with CGO_ENABLED=0)")
		default:
			return abs, ""
		}
	}
	if len(problems) == 0 {
		return "", "no nimbus executable beside the agent or on PATH"
	}
	return "", strings.Join(problems, "; ")
}

// setUpCLI finds the nimbus CLI, places a copy of it in the work dir and makes the lifelines
// (internal/lifeline) that run every step under it, so that the steps end when the agent dies. It
// returns the CLI the jobs get ("" when configured off or when there is none) and the lifelines
// (nil without a CLI that can run steps), and logs why either is missing.
//
// The copy is what containers mount: the engine sees the work dir at the agent's path (the
// checkouts are bind-mounted from it), while an agent in a container of its own (the deploy
// image, Kubernetes) has its executable where the engine's host has nothing. With
// NIMBUS_AGENT_NIMBUS_CLI=off the jobs get no CLI on their PATH, but the one beside the agent or
// on PATH still runs them, at its own path: it is the agent's machinery, as docker-init is the
// engine's.
func setUpCLI(ctx context.Context, workDir, configured string, log *slog.Logger) (string, *lifeline.Lines) {
	found, problem := findCLI(configured)
	if problem != "" && configured != CLIOff {
		log.Warn("jobs get no nimbus CLI; nimbus artifact works only in images that bring it", "why", problem)
	}
	init := found
	if configured == CLIOff {
		init, problem = findCLI("")
	}
	var lines *lifeline.Lines
	if init != "" {
		placed, err := placeCLI(workDir, init)
		if err == nil {
			if found != "" {
				found = placed
			}
			lines, err = lifeline.New(ctx, filepath.Join(workDir, "lifelines"), placed)
		}
		if err != nil {
			problem = err.Error()
		}
	}
	if lines == nil {
		log.Warn("if this agent dies without stopping (kill -9, a crash), its jobs run on until it is started again", "why", problem)
	}
	return found, lines
}

// placeCLI copies the CLI at path to workDir/bin/nimbus and returns the copy's path. A job still
// running from an earlier copy keeps it: the new one replaces it by a rename.
func placeCLI(workDir, path string) (string, error) {
	dir := filepath.Join(workDir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("place the nimbus CLI: %w", err)
	}
	src, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("place the nimbus CLI: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".nimbus-")
	if err != nil {
		return "", fmt.Errorf("place the nimbus CLI: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, src)
	err = errors.Join(err, tmp.Chmod(0o755), tmp.Close())
	dst := filepath.Join(dir, "nimbus")
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return "", fmt.Errorf("place the nimbus CLI: %w", err)
	}
	return dst, nil
}
