package executor

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
)

// startContainer starts a long-lived container for the test and stops it at the end.
func startContainer(t *testing.T, d *Docker, s Step) *Container {
	t.Helper()
	c, err := d.StartContainer(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	return c
}

// readUntil reads r until what it has read contains want, or fails after the timeout.
func readUntil(t *testing.T, r io.Reader, want string, timeout time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if strings.Contains(b.String(), want) || err != nil {
				got <- b.String()
				return
			}
		}
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, want) {
			t.Fatalf("output %q lacks %q", s, want)
		}
		return s
	case <-time.After(timeout):
		t.Fatalf("no %q within %v", want, timeout)
		return ""
	}
}

func TestContainerExecTTY(t *testing.T) {
	d, img := newDocker(t)
	ctx := context.Background()
	c := startContainer(t, d, Step{Name: "ws", Image: img, Checkout: t.TempDir()})

	s, err := c.Exec(ctx, ExecSpec{Cmd: []string{"sh"}, TTY: true, Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(s, "echo hi; stty size; exit 3\n"); err != nil {
		t.Fatal(err)
	}
	// The terminal echoes the input line; the command's output follows it on lines of its own.
	out := readUntil(t, s, "\n40 120", 10*time.Second)
	if !strings.Contains(out, "\nhi\r\n") {
		t.Fatalf("output %q lacks the echo's line", out)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if code, err := s.Wait(wctx); err != nil || code != 3 {
		t.Fatalf("Wait = %d, %v; want 3", code, err)
	}
}

func TestContainerConcurrentExecs(t *testing.T) {
	d, img := newDocker(t)
	c := startContainer(t, d, Step{Name: "ws", Image: img})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				rows, cols := uint(20+i), uint(70+i)
				// The sleep keeps all four running at the same time.
				s, err := c.Exec(ctx, ExecSpec{Cmd: []string{"sh", "-c", fmt.Sprintf("sleep 0.3; echo id-%d; stty size", i)},
					TTY: true, Rows: rows, Cols: cols, Env: map[string]string{"TERM": "xterm-256color"}})
				if err != nil {
					return err
				}
				defer s.Close()
				out, err := io.ReadAll(s)
				if err != nil && !errors.Is(err, io.EOF) {
					return err
				}
				if want := fmt.Sprintf("id-%d\r\n%d %d\r\n", i, rows, cols); string(out) != want {
					return fmt.Errorf("exec %d: output %q, want %q", i, out, want)
				}
				if code, err := s.Wait(ctx); err != nil || code != 0 {
					return fmt.Errorf("exec %d: Wait = %d, %v", i, code, err)
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestContainerExecWithoutTTY(t *testing.T) {
	d, img := newDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c := startContainer(t, d, Step{Name: "ws", Image: img, Checkout: t.TempDir(), Env: map[string]string{"FROM_STEP": "step"}})

	t.Run("stdout and stderr in the reader", func(t *testing.T) {
		s, err := c.Exec(ctx, ExecSpec{Cmd: []string{"sh", "-c", `cat; echo "err $FROM_STEP $FROM_EXEC $(pwd)" >&2; exit 5`},
			Env: map[string]string{"FROM_EXEC": "exec"}, WorkingDir: "/tmp"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := io.WriteString(s, "from stdin\n"); err != nil {
			t.Fatal(err)
		}
		if err := s.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(s)
		if err != nil {
			t.Fatal(err)
		}
		// No multiplexing headers: just the payloads, in order.
		if string(out) != "from stdin\nerr step exec /tmp\n" {
			t.Fatalf("output %q", out)
		}
		if code, err := s.Wait(ctx); err != nil || code != 5 {
			t.Fatalf("Wait = %d, %v; want 5", code, err)
		}
	})

	t.Run("stderr apart", func(t *testing.T) {
		var errOut lockedBuffer
		s, err := c.Exec(ctx, ExecSpec{Cmd: []string{"sh", "-c", "echo to-out; echo to-err >&2"}, Stderr: &errOut})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := io.ReadAll(s)
		if err != nil || string(out) != "to-out\n" || errOut.String() != "to-err\n" {
			t.Fatalf("stdout %q stderr %q err %v", out, errOut.String(), err)
		}
	})

	t.Run("a command that is not there", func(t *testing.T) {
		s, err := c.Exec(ctx, ExecSpec{Cmd: []string{"no-such-command"}})
		if err != nil {
			return // some engines refuse it at once
		}
		defer s.Close()
		io.Copy(io.Discard, s)
		if code, err := s.Wait(ctx); err != nil || code == 0 {
			t.Fatalf("Wait = %d, %v; want an error code", code, err)
		}
	})
}

func TestContainerExecCloseKillsTheProcess(t *testing.T) {
	d, img := newDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c := startContainer(t, d, Step{Name: "ws", Image: img})
	for _, tc := range []struct {
		name string
		spec ExecSpec
	}{
		// A shell in a terminal running a foreground job, as a closed browser tab leaves it.
		{"tty shell", ExecSpec{Cmd: []string{"sh"}, TTY: true}},
		// A script that ignores stdin's end and has a child.
		{"script", ExecSpec{Cmd: []string{"sh", "-c", "sleep 300 & wait"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.Exec(ctx, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if tc.spec.TTY {
				io.WriteString(s, "sleep 300\n")
				time.Sleep(200 * time.Millisecond)
			}
			start := time.Now()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("closed in %v", time.Since(start))
			info, err := d.cli.ContainerExecInspect(ctx, s.id)
			if err != nil || info.Running {
				t.Fatalf("exec after Close: %+v %v", info, err)
			}
			// The sleeps went too: only the keep-alive's remain.
			ps, err := c.Exec(ctx, ExecSpec{Cmd: []string{"sh", "-c", "ps -o args | grep -c '^sleep 300'"}})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(ps)
			ps.Close()
			if strings.TrimSpace(string(out)) != "0" {
				t.Fatalf("%s sleep 300 still run", out)
			}
		})
	}
}

func TestContainerStopAndCleanup(t *testing.T) {
	d, img := newDocker(t)
	ctx := context.Background()
	var out lockedBuffer
	c, err := d.StartContainer(ctx, Step{Name: "ide", Image: img, Output: &out, Labels: map[string]string{"nimbus.workspace": "w1"},
		Script: "echo ide-up; exec sleep 300", CPUs: 0.5, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	info, err := d.cli.ContainerInspect(ctx, c.ID)
	if err != nil || !info.State.Running || info.Config.Labels[LabelAgent] != d.agentID || info.Config.Labels["nimbus.workspace"] != "w1" ||
		info.HostConfig.NanoCPUs != 5e8 || info.HostConfig.Memory != 64<<20 {
		t.Fatalf("started container: %+v %v", info.State, err)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "ide-up"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("main process output %q", out.String())
		}
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.ContainerInspect(ctx, c.ID); !isGone(err) {
		t.Fatalf("container after Stop: %v", err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	// One a crashed agent left behind goes with Cleanup.
	left, err := d.StartContainer(ctx, Step{Name: "left", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.ContainerInspect(ctx, left.ID); !isGone(err) {
		t.Fatalf("container after Cleanup: %v", err)
	}
}

func TestContainerMainProcess(t *testing.T) {
	d, img := newDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	t.Run("script ends the container", func(t *testing.T) {
		c := startContainer(t, d, Step{Name: "short", Image: img, Script: "exit 4"})
		if code, err := c.Wait(ctx); err != nil || code != 4 {
			t.Fatalf("Wait = %d, %v", code, err)
		}
	})

	t.Run("image without a shell", func(t *testing.T) {
		ref := noShellImage(t, d, img)
		c := startContainer(t, d, Step{Name: "distroless", Image: ref})
		time.Sleep(300 * time.Millisecond) // a container whose main process failed would be gone by now
		info, err := d.cli.ContainerInspect(ctx, c.ID)
		if err != nil || !info.State.Running {
			t.Fatalf("state %+v %v", info.State, err)
		}
		s, err := c.Exec(ctx, ExecSpec{Cmd: []string{"/bin/busybox", "echo", "no shell needed"}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if out, err := io.ReadAll(s); err != nil || string(out) != "no shell needed\n" {
			t.Fatalf("%q %v", out, err)
		}
	})
}

// noShellImage imports an image with only /bin/busybox in it (no sh on its PATH) whose command
// is `busybox sleep 3600`.
func noShellImage(t *testing.T, d *Docker, img string) string {
	t.Helper()
	ctx := context.Background()
	rc, _, err := d.cli.CopyFromContainer(ctx, createdContainer(t, d, img), "/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: hdr.Size})
	if _, err := io.Copy(tw, tr); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	ref := "nimbus-test/no-shell:" + strings.ToLower(rand.Text()[:8])
	out, err := d.cli.ImageImport(ctx, image.ImportSource{Source: &layer, SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{"ENV PATH=/usr/bin", `CMD ["/bin/busybox", "sleep", "3600"]`}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, out)
	out.Close()
	t.Cleanup(func() { d.cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true}) })
	return ref
}

// createdContainer creates (does not start) a container of img, to copy or commit from, and
// removes it when the test ends.
func createdContainer(t *testing.T, d *Docker, img string) string {
	t.Helper()
	src, err := d.cli.ContainerCreate(context.Background(), &container.Config{Image: img, Cmd: []string{"true"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cli.ContainerRemove(context.Background(), src.ID, container.RemoveOptions{Force: true}) })
	return src.ID
}

// netnsOfThreads reads the network namespace of many OS threads at once: as many goroutines as
// there are likely threads, each locked to its own.
func netnsOfThreads(t *testing.T) []string {
	t.Helper()
	n := 4*runtime.GOMAXPROCS(0) + 16
	var mu sync.Mutex
	var seen []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			<-start // all locked at the same time, so each holds a thread of its own
			ns, err := os.Readlink("/proc/thread-self/ns/net")
			if err != nil {
				ns = err.Error()
			}
			mu.Lock()
			seen = append(seen, ns)
			mu.Unlock()
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(start)
	wg.Wait()
	slices.Sort(seen)
	return slices.Compact(seen)
}

func interfaceNames(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	return names
}

func TestDialPort(t *testing.T) {
	d, img := newDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 18*time.Second)
	defer cancel()
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ifsBefore := interfaceNames(t)
	// A listener on the agent's own loopback, to check afterwards that the agent's sockets are
	// still made in the agent's namespace.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "agent\n")
			c.Close()
		}
	}()

	checkout := t.TempDir()
	if err := os.WriteFile(filepath.Join(checkout, "hello.txt"), []byte("hello from the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const bigSize = 64 << 20
	big := make([]byte, bigSize)
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(checkout, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	wantSum := sha256.Sum256(big)
	big = nil

	if d.NetworkMode != "none" {
		t.Fatalf("the test needs network mode none, not %q", d.NetworkMode)
	}
	c := startContainer(t, d, Step{Name: "preview", Image: img, Checkout: checkout, Script: "exec httpd -f -p 8686 -h /workspace"})

	// Nothing listens yet, or on this port ever: refused, not hung.
	if _, err := c.DialPort(ctx, 8687); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial of a closed port: %v", err)
	}

	httpc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return c.DialPort(ctx, 8686) },
	}}
	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://workspace/hello.txt", nil)
		if resp, err = httpc.Do(req); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != "hello from the workspace\n" {
		t.Fatalf("GET hello.txt: %d %q %v", resp.StatusCode, body, err)
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://workspace/big.bin", nil)
	start := time.Now()
	resp, err = httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, bufio.NewReaderSize(resp.Body, 256<<10))
	resp.Body.Close()
	elapsed := time.Since(start)
	if err != nil || n != bigSize || !bytes.Equal(h.Sum(nil), wantSum[:]) {
		t.Fatalf("GET big.bin: %d bytes, %v, checksum equal %v", n, err, bytes.Equal(h.Sum(nil), wantSum[:]))
	}
	t.Logf("64 MiB through DialPort in %v: %.0f MiB/s", elapsed, float64(n)/(1<<20)/elapsed.Seconds())

	// Many dials at once, so that many threads go in and out of the container's namespace.
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if conn, err := c.DialPort(ctx, 8686); err == nil {
				conn.Close()
			} else {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	// The agent is where it was: every thread in its namespace, the same interfaces, its own
	// loopback listener reachable from a fresh goroutine.
	if got := netnsOfThreads(t); len(got) != 1 || got[0] != own {
		t.Fatalf("threads in network namespaces %v, want only %s", got, own)
	}
	if got := interfaceNames(t); !slices.Equal(got, ifsBefore) {
		t.Fatalf("interfaces %v, before %v", got, ifsBefore)
	}
	done := make(chan string, 1)
	go func() {
		conn, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
		if err != nil {
			done <- err.Error()
			return
		}
		defer conn.Close()
		b, _ := io.ReadAll(conn)
		done <- string(b)
	}()
	if got := <-done; got != "agent\n" {
		t.Fatalf("the agent's own listener: %q", got)
	}
}

func TestDialPortNeedsARunningContainer(t *testing.T) {
	d, img := newDocker(t)
	ctx := context.Background()
	c, err := d.StartContainer(ctx, Step{Name: "gone", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(ctx)
	if _, err := c.DialPort(ctx, 8686); err == nil {
		t.Fatal("dialled into a removed container")
	}
}

func TestShellHasNoContainers(t *testing.T) {
	_, err := NewShell().StartContainer(context.Background(), Step{Name: "ws"})
	if !errors.Is(err, ErrNeedsDocker) || !strings.Contains(err.Error(), "need the Docker executor") {
		t.Fatalf("err = %v", err)
	}
	var c *Container
	if _, err := c.Exec(context.Background(), ExecSpec{Cmd: []string{"sh"}}); !errors.Is(err, ErrNeedsDocker) {
		t.Fatalf("Exec on no container: %v", err)
	}
	if _, err := c.DialPort(context.Background(), 80); !errors.Is(err, ErrNeedsDocker) {
		t.Fatalf("DialPort on no container: %v", err)
	}
}
