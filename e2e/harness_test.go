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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/internal/testenv"
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

// Tests that wait far more than they compute (a killed agent's lease running out, billing
// windows, a restart, 200 pipelines through four agents) call t.Parallel: they run together,
// -parallel at a time (make test: 4), after the others. Each has its own server, PostgreSQL
// database, Redis database (redisDB), ports, work dirs and agents, whose containers carry their
// agent's label. Tests that measure a latency against a target (cancel → container gone, the
// benchmarks) or that look at the host's processes stay sequential, and so do the tests that
// push the shared test image to their own registry and the one that re-runs a pipeline exactly:
// the shared Docker engine keeps every registry digest an image was pushed under, so a pipeline
// recorded in parallel could name another test's registry, gone by its re-run.
//
// redisDBs are the databases of the test Redis that e2e servers take, one server at a time each
// (redisDB), so that tests that start servers can run in parallel without one server's queues,
// leader locks and pub/sub reaching another's. The other packages' tests keep 0 (keys of their
// own), 7 (the scheduler's) and 9 (billing's).
var redisDBs = func() chan int {
	c := make(chan int, 13)
	for _, i := range []int{1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 13, 14, 15} {
		c <- i
	}
	return c
}()

// redisDB returns the URL of a Redis database of the test's own until it ends, emptied first:
// queues a crashed run left behind must not sit in front of this test's pipelines. It waits
// while all are taken.
func redisDB(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var db int
	select {
	case db = <-redisDBs:
	case <-time.After(5 * time.Minute):
		t.Fatal("no free Redis database for 5 minutes")
	}
	t.Cleanup(func() { redisDBs <- db })
	u.Path = "/" + strconv.Itoa(db)
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return u.String()
}

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
