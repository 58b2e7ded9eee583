// Package lifelinetest helps the tests of what must end with the agent: it builds the init that
// internal/lifeline runs steps under (the statically linked nimbus CLI, from this module's source)
// and starts a test binary again as an agent to be killed.
package lifelinetest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Init builds the init into a directory of the test's and returns its path.
func Init(t testing.TB) string {
	t.Helper()
	p, err := Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Build builds the nimbus CLI as make does (static, so that it runs in any image) into dir and
// returns its path. Go's build cache makes it a link of a few seconds after the first; a package
// whose tests need it often builds it once, in TestMain.
func Build(dir string) (string, error) {
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	out := filepath.Join(dir, "nimbus")
	cmd := exec.Command("go", "build", "-o", out, "./backend/cmd/nimbus")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the nimbus CLI: %w\n%s", err, b)
	}
	// A container's user, whoever it is, runs it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return out, nil
}

// Agent starts this test binary again, running only the test named test with env ("NAME=value")
// added to its environment: that process acts as the agent (the test sees env and does so), so
// that the test can kill it as the kernel or an operator would. It returns the process and its
// standard output; its standard error is the test's. It is killed when the test ends.
func Agent(t testing.TB, test, env string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, out
}

// Processes lists this host's processes whose command line contains one of subs, as "pid:
// command line", this one excepted: what a killed agent may have left. A Docker engine's
// containers are processes of its host too.
func Processes(subs ...string) []string {
	var out []string
	self := strconv.Itoa(os.Getpid())
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		pid := filepath.Base(filepath.Dir(p))
		b, err := os.ReadFile(p)
		if err != nil || pid == self {
			continue // gone meanwhile
		}
		cmd := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		if slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(cmd, s) }) {
			out = append(out, pid+": "+cmd)
		}
	}
	return out
}
