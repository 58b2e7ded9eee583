//go:build unix

package inpod

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// step runs the step its header describes until it exits or stdin ends.
func step(stdin io.Reader, stdout, stderr io.Writer) int {
	line, err := bufio.NewReader(stdin).ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(stderr, "nimbus pod step: no header:", err)
		return 125
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		fmt.Fprintln(stderr, "nimbus pod step: bad header:", err)
		return 125
	}
	argv := h.Args
	if h.Script != "" {
		argv = []string{"/bin/sh", "-c", h.Script}
	}
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "nimbus pod step: nothing to run")
		return 125
	}
	env := mergeEnv(os.Environ(), h.Env, h.PathAppend)
	path := argv[0]
	if !strings.Contains(path, "/") {
		if p, err := lookPath(path, env); err == nil {
			path = p
		}
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Dir = h.Dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "nimbus pod step:", err)
		return 127
	}
	// Where `nimbus pod kill ID` finds the step's process group.
	if h.ID != "" {
		if err := writePID(h.ID, cmd.Process.Pid); err != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			fmt.Fprintln(stderr, "nimbus pod step:", err)
			return 125
		}
		defer os.Remove(pidFile(h.ID))
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintln(stderr, "nimbus pod step:", err)
	return 125
}

func writePID(id string, pid int) error {
	if err := os.MkdirAll(filepath.Dir(pidFile(id)), 0o777); err != nil {
		return err
	}
	return os.WriteFile(pidFile(id), []byte(strconv.Itoa(pid)), 0o600)
}

// kill kills the process group of the step with the id, in this container; a step that has
// ended already is no error.
func kill(id string) error {
	b, err := os.ReadFile(pidFile(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("bad pid file for step %s", id)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
