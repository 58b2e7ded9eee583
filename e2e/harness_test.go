// Package e2e holds the end-to-end tests: they start the real nimbus-server, nimbus-agent and
// nimbus binaries as processes against the real services of e2e/testenv.sh, and drive them the
// way a user would (HTTP, git, a headless Chromium).
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binDir holds nimbus-server, nimbus-agent and nimbus: NIMBUS_E2E_BIN (make test sets it to
// bin/, built with the dashboard), else a fresh build into a temp dir.
var binDir string

func TestMain(m *testing.M) {
	code := func() int {
		binDir = os.Getenv("NIMBUS_E2E_BIN")
		if binDir == "" {
			dir, err := os.MkdirTemp("", "nimbus-e2e-bin")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			for name, pkg := range map[string]string{
				"nimbus-server": "./backend/cmd/nimbus-server",
				"nimbus-agent":  "./agent/cmd/nimbus-agent",
				"nimbus":        "./backend/cmd/nimbus",
			} {
				cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
				cmd.Dir = ".."
				if name == "nimbus" {
					// Static, as make builds it: the e2e copies it into a busybox container.
					cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
					return 1
				}
			}
			binDir = dir
		}
		return m.Run()
	}()
	os.Exit(code)
}

func bin(name string) string { return filepath.Join(binDir, name) }

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lines collects a process's output and lets a test wait for a line.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

func (l *lines) contains(sub string) bool { return strings.Contains(l.String(), sub) }

// proc is a started binary.
type proc struct {
	cmd    *exec.Cmd
	stdout *lines
	stderr *lines
	done   chan error
}

func collect(r io.Reader, l *lines, wg *sync.WaitGroup) {
	defer wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l.add(sc.Text())
	}
}

// start runs a binary in dir with exactly env (plus PATH and HOME) and stops it when the test
// ends.
func start(t testing.TB, dir string, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin(name), args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdout: &lines{}, stderr: &lines{}, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go collect(outR, p.stdout, &wg)
	go collect(errR, p.stderr, &wg)
	go func() {
		wg.Wait()
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, p.stdout, name, p.stderr)
		}
	})
	return p
}

// stop sends SIGTERM and returns the exit error and how long the process took to exit.
func (p *proc) stop(t testing.TB, within time.Duration) (error, time.Duration) {
	t.Helper()
	begin := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		return err, time.Since(begin)
	case <-time.After(within):
		t.Fatalf("process still running %v after SIGTERM", within)
		return nil, 0
	}
}

// waitReady polls GET base/readyz until 200 or the deadline; it returns the time it took.
func waitReady(t testing.TB, base string, p *proc, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Since(begin) < within {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("server exited before ready: %v\nstderr:\n%s", err, p.stderr)
		default:
		}
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(begin)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s/readyz not 200 within %v", base, within)
	return 0
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
