package lifeline_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/lifeline"
	"github.com/nimbus-build/nimbus/internal/lifeline/lifelinetest"
)

func newLines(t *testing.T) *lifeline.Lines {
	t.Helper()
	ls, err := lifeline.New(context.Background(), filepath.Join(t.TempDir(), "lifelines"), lifelinetest.Init(t))
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// under runs argv under the init, on a held line, in a process group of its own (as the shell
// executor does).
func under(ls *lifeline.Lines, line string, argv ...string) *exec.Cmd {
	full := lifeline.Command(ls.Init(), line, argv)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// The init is transparent while the agent lives: the command's output, its exit code (128 + the
// signal's for one a signal ended, as a shell reports it) and the signals sent to the init.
func TestInitPassesTheCommandThrough(t *testing.T) {
	ls := newLines(t)
	l, err := ls.Hold()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	for _, tc := range []struct {
		name string
		argv []string
		code int
		out  string
	}{
		{"output and success", []string{"sh", "-c", "echo out; echo err >&2"}, 0, "out\nerr\n"},
		{"exit code", []string{"sh", "-c", "exit 3"}, 3, ""},
		{"ended by a signal", []string{"sh", "-c", "kill -TERM $$"}, 143, ""},
		{"not found", []string{"no-such-command-nimbus"}, 127, "executable file not found"},
		{"not executable", []string{"/etc/passwd"}, 126, "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := under(ls, l.Path(), tc.argv...).CombinedOutput()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(string(out), tc.out) {
				t.Fatalf("exit %d, output %q; want %d and %q", code, out, tc.code, tc.out)
			}
		})
	}

	t.Run("signals reach the command", func(t *testing.T) {
		cmd := under(ls, l.Path(), "sh", "-c", `trap 'echo got-term; exit 5' TERM; echo ready; while :; do sleep 0.1; done`)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		if line, _ := r.ReadString('\n'); line != "ready\n" {
			t.Fatalf("first line %q", line)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		rest, _ := r.ReadString('\n')
		if err := cmd.Wait(); rest != "got-term\n" || cmd.ProcessState.ExitCode() != 5 {
			t.Fatalf("after SIGTERM to the init: %q, %v", rest, err)
		}
	})

	t.Run("usage", func(t *testing.T) {
		out, err := exec.Command(ls.Init(), "lifeline", l.Path()).CombinedOutput()
		if cmd := (*exec.ExitError)(nil); !errors.As(err, &cmd) || cmd.ExitCode() != 2 || !strings.Contains(string(out), "usage: nimbus lifeline FIFO -- COMMAND") {
			t.Fatalf("without a command: %v %q", err, out)
		}
	})
}

// When the lifeline goes (the agent's descriptor closes, as it does when the agent dies), the
// command and everything in its process group are killed at once, SIGTERM ignored or not.
func TestReleaseKillsTheProcessGroup(t *testing.T) {
	ls := newLines(t)
	l, err := ls.Hold()
	if err != nil {
		t.Fatal(err)
	}
	cmd := under(ls, l.Path(), "sh", "-c", `trap '' TERM HUP INT; sleep 300 & echo started; while :; do sleep 300; done`)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "started\n" {
		t.Fatalf("first line %q", line)
	}
	pgid := cmd.Process.Pid
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the init still runs 5 s after its lifeline went")
	}
	for n := livingInGroup(pgid); n > 0; n = livingInGroup(pgid) {
		if time.Since(released) > 5*time.Second {
			t.Fatalf("%d processes of the step's group survive its lifeline", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the step's group was gone %v after its lifeline", time.Since(released).Round(time.Millisecond))
	if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the released FIFO is still there: %v", err)
	}
}

// A lifeline whose agent died before the init opened it: the command does not run on.
func TestLineGoneBeforeTheInitStarts(t *testing.T) {
	ls := newLines(t)
	dir := filepath.Dir(mustHold(t, ls).Path())
	fifo := filepath.Join(dir, "orphan")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := under(ls, fifo, "sleep", "300").Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || time.Since(start) > 5*time.Second {
		t.Fatalf("the init ran its command for %v without a lifeline: %v", time.Since(start), err)
	}
	if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the init ended with %v, want killed", ws)
	}
}

// livingInGroup counts the processes of group pgid that are not dead (zombies wait for whoever
// reaps orphans here, which may take its time).
func livingInGroup(pgid int) int {
	n := 0
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

func mustHold(t *testing.T, ls *lifeline.Lines) *lifeline.Line {
	t.Helper()
	l, err := ls.Hold()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release() })
	return l
}

// New empties the directory of what a crashed agent left, and refuses an init that cannot run
// steps (a nimbus CLI older than the agent would fail every step).
func TestNew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lifelines")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "left-by-a-crash"), nil, 0o644)
	if _, err := lifeline.New(context.Background(), dir, "/bin/busybox"); err == nil || !strings.Contains(err.Error(), "cannot run steps under a lifeline") {
		t.Fatalf("New with busybox as the init: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "left-by-a-crash")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a leftover FIFO survived New: %v", err)
	}
}
