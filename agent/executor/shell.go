package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nimbus-build/nimbus/internal/lifeline"
)

// Shell runs steps as host processes, each in its own process group so that cancelling kills the
// script and everything it started, and so does the step's end: what a script left running in
// the background ends with it, as it does in a container.
type Shell struct {
	// Lifelines, when set, kill a step's process group when the agent dies (internal/lifeline): the
	// step runs under the init, which watches a lifeline the agent holds. Without them a crashed
	// agent's steps run on.
	Lifelines *lifeline.Lines
}

// NewShell returns the host-shell executor.
func NewShell() *Shell { return &Shell{} }

// Name implements Executor.
func (*Shell) Name() string { return ModeShell }

// Close implements Executor.
func (*Shell) Close() error { return nil }

// Cleanup implements Executor. Processes die with their process group on cancel, at the step's
// end and, under Lifelines, with the agent, and leave no containers; checkouts are the agent's
// to remove.
func (*Shell) Cleanup(context.Context) error { return nil }

// Run implements Executor. Plugin steps (no script) cannot run without Docker.
func (sh *Shell) Run(ctx context.Context, s Step) (int, error) {
	if s.Script == "" {
		return -1, fmt.Errorf("executor: step %q runs image %q, which needs Docker (this agent uses the shell executor)", s.Name, s.Image)
	}
	argv := []string{"sh", "-c", s.Script}
	if sh.Lifelines != nil {
		line, err := sh.Lifelines.Hold()
		if err != nil {
			return -1, fmt.Errorf("executor: %q: %w", s.Name, err)
		}
		defer line.Release()
		argv = lifeline.Command(sh.Lifelines.Init(), line.Path(), argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.Checkout
	cmd.Env = shellEnv(s.Env, s.GPUs, s.Tools)
	out := s.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout = out
	cmd.Stderr = out
	if s.Stderr != nil {
		cmd.Stderr = s.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("executor: start %q: %w", s.Name, err)
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() {
		// The rest of the group is killed once the step's process has exited but before it is
		// reaped: until then its pid, the group's id, cannot name another group. The output
		// ends with the group too (a background process would hold it open).
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, pgid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		syscall.Kill(-pgid, syscall.SIGKILL)
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() {
				return 128 + int(status.Signal()), nil
			}
			return exit.ExitCode(), nil
		}
		if err != nil {
			return -1, fmt.Errorf("executor: run %q: %w", s.Name, err)
		}
		return 0, nil
	case <-ctx.Done():
		// The negative pid addresses the whole group: the shell and every child it started.
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return -1, ctx.Err()
	}
}

// shellEnv gives the step a small, predictable environment: PATH and HOME from the agent, then
// the step's variables. The agent's own secrets (tokens in its env) are not inherited. Without a
// container there are no device requests, so CUDA_VISIBLE_DEVICES is what keeps a step to its
// reserved GPUs (and off all of them when it has none). The tools' directories go at the end
// of PATH.
func shellEnv(env map[string]string, gpus, tools []string) []string {
	path := os.Getenv("PATH")
	for _, t := range tools {
		path += string(os.PathListSeparator) + filepath.Dir(t)
	}
	out := []string{"PATH=" + path, "HOME=" + os.Getenv("HOME")}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "CUDA_VISIBLE_DEVICES" {
			continue
		}
		out = append(out, k+"="+env[k])
	}
	return append(out, "CUDA_VISIBLE_DEVICES="+strings.Join(gpus, ","))
}
