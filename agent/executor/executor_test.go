package executor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/nimbus-build/nimbus/internal/testenv"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newDocker(t testing.TB) (*Docker, string) {
	t.Helper()
	host := testenv.DockerHost(t)
	image := testenv.Image(t)
	d, err := NewDocker(context.Background(), host, "test-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Fatal(err)
	}
	d.NetworkMode = "none"
	t.Cleanup(func() { d.Close() })
	return d, image
}

// executors returns both executors, without and with lifelines (what the agent runs with when it
// has the nimbus CLI), with the image the Docker one needs.
func executors(t *testing.T) map[string]func(t *testing.T) (Executor, string) {
	return map[string]func(t *testing.T) (Executor, string){
		"docker": func(t *testing.T) (Executor, string) { return newDocker(t) },
		"shell":  func(t *testing.T) (Executor, string) { return NewShell(), "" },
		"docker+lifeline": func(t *testing.T) (Executor, string) {
			d, img := newDocker(t)
			d.Lifelines = newLines(t)
			return d, img
		},
		"shell+lifeline": func(t *testing.T) (Executor, string) { return &Shell{Lifelines: newLines(t)}, "" },
	}
}

func TestRunScripts(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		env      map[string]string
		wantCode int
		wantOut  []string
	}{
		{"success", "echo hello", nil, 0, []string{"hello\n"}},
		{"exit code", "echo before; exit 3", nil, 3, []string{"before"}},
		{"stderr is captured", "echo oops >&2", nil, 0, []string{"oops"}},
		{"env reaches the script", `echo "v=$MY_VAR"`, map[string]string{"MY_VAR": "a b$c"}, 0, []string{"v=a b$c"}},
		{"exit 78 is passed through", "exit 78", nil, 78, nil},
	}
	for exName, mk := range executors(t) {
		t.Run(exName, func(t *testing.T) {
			ex, image := mk(t)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					var out lockedBuffer
					code, err := ex.Run(context.Background(), Step{
						Name: tt.name, Image: image, Script: tt.script, Env: tt.env,
						Checkout: t.TempDir(), Output: &out,
					})
					if err != nil {
						t.Fatal(err)
					}
					if code != tt.wantCode {
						t.Fatalf("exit %d, want %d (output %q)", code, tt.wantCode, out.String())
					}
					for _, w := range tt.wantOut {
						if !strings.Contains(out.String(), w) {
							t.Fatalf("output %q lacks %q", out.String(), w)
						}
					}
				})
			}
		})
	}
}

func TestCheckoutIsSharedBetweenSteps(t *testing.T) {
	for exName, mk := range executors(t) {
		t.Run(exName, func(t *testing.T) {
			ex, image := mk(t)
			checkout := t.TempDir()
			os.Chmod(checkout, 0o777)
			if code, err := ex.Run(context.Background(), Step{Name: "write", Image: image, Checkout: checkout,
				Script: "echo model-v1 > model.txt"}); err != nil || code != 0 {
				t.Fatalf("write: %d %v", code, err)
			}
			var out lockedBuffer
			if code, err := ex.Run(context.Background(), Step{Name: "read", Image: image, Checkout: checkout,
				Script: "cat model.txt", Output: &out}); err != nil || code != 0 {
				t.Fatalf("read: %d %v", code, err)
			}
			if strings.TrimSpace(out.String()) != "model-v1" {
				t.Fatalf("second step read %q", out.String())
			}
			if b, _ := os.ReadFile(filepath.Join(checkout, "model.txt")); strings.TrimSpace(string(b)) != "model-v1" {
				t.Fatalf("host checkout has %q", b)
			}
		})
	}
}

func TestCancelKillsWithinSeconds(t *testing.T) {
	for exName, mk := range executors(t) {
		t.Run(exName, func(t *testing.T) {
			ex, image := mk(t)
			ctx, cancel := context.WithCancel(context.Background())
			var out lockedBuffer
			done := make(chan error, 1)
			go func() {
				// The child sleep proves the whole process tree dies, not just the shell.
				_, err := ex.Run(ctx, Step{Name: "long", Image: image, Checkout: t.TempDir(), Output: &out,
					Script: "echo started; sleep 300 & wait"})
				done <- err
			}()
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(out.String(), "started") {
				if time.Now().After(deadline) {
					t.Fatal("step never started")
				}
				time.Sleep(20 * time.Millisecond)
			}
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("step still running 5 s after cancel")
			}
			t.Logf("stopped %v after cancel", time.Since(start))
			if d, ok := ex.(*Docker); ok {
				list, err := d.cli.ContainerList(context.Background(), container.ListOptions{All: true,
					Filters: filters.NewArgs(filters.Arg("label", LabelAgent+"="+d.agentID))})
				if err != nil || len(list) != 0 {
					t.Fatalf("containers left after cancel: %d %v", len(list), err)
				}
			}
		})
	}
}

func TestDockerPluginStepAndLimits(t *testing.T) {
	d, image := newDocker(t)
	var out lockedBuffer
	code, err := d.Run(context.Background(), Step{Name: "plugin", Image: image, Args: []string{"echo", "from-args"}, Output: &out})
	if err != nil || code != 0 || !strings.Contains(out.String(), "from-args") {
		t.Fatalf("plugin step: %d %v %q", code, err, out.String())
	}

	out = lockedBuffer{}
	code, err = d.Run(context.Background(), Step{Name: "limits", Image: image, CPUs: 1.5, MemoryBytes: 256 << 20,
		Output: &out, Checkout: t.TempDir(), CheckoutMount: "/work/space",
		Script: "pwd; cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes; echo gpus=$NVIDIA_VISIBLE_DEVICES"})
	if err != nil || code != 0 {
		t.Fatalf("limits step: %d %v %q", code, err, out.String())
	}
	got := out.String()
	for _, want := range []string{"/work/space", "150000", "268435456", "gpus=void"} {
		if !strings.Contains(got, want) {
			t.Errorf("limits output %q lacks %q", got, want)
		}
	}
}

func TestDockerMissingImageIsAnError(t *testing.T) {
	d, _ := newDocker(t)
	_, err := d.Run(context.Background(), Step{Name: "x", Image: "nimbus-test/does-not-exist:1", Script: "true"})
	if err == nil || !strings.Contains(err.Error(), "create container") {
		t.Fatalf("err = %v", err)
	}
}

func TestDockerCleanupRemovesLeftovers(t *testing.T) {
	d, image := newDocker(t)
	ctx := context.Background()
	// A container as a crashed agent would leave it: created, labelled, never removed.
	for i := 0; i < 2; i++ {
		if _, err := d.cli.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{"sleep", "60"},
			Labels: map[string]string{LabelAgent: d.agentID}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	other, err := d.cli.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{"true"},
		Labels: map[string]string{LabelAgent: "someone-else"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.cli.ContainerRemove(ctx, other.ID, container.RemoveOptions{Force: true})
	if err := d.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	mine, _ := d.cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", LabelAgent+"="+d.agentID))})
	if len(mine) != 0 {
		t.Fatalf("%d leftovers remain", len(mine))
	}
	if _, err := d.cli.ContainerInspect(ctx, other.ID); err != nil {
		t.Fatalf("another agent's container was removed: %v", err)
	}
}

func TestShellRejectsPluginSteps(t *testing.T) {
	_, err := NewShell().Run(context.Background(), Step{Name: "p", Image: "cnbcool/changelog"})
	if err == nil || !strings.Contains(err.Error(), "needs Docker") {
		t.Fatalf("err = %v", err)
	}
}

func TestDetect(t *testing.T) {
	ctx := context.Background()
	bad := "unix://" + filepath.Join(t.TempDir(), "no.sock")

	ex, warn, err := Detect(ctx, ModeShell, "", "a")
	if err != nil || ex.Name() != "shell" || !strings.Contains(warn, "NO DOCKER") {
		t.Fatalf("shell: %v %q %v", ex, warn, err)
	}
	ex, warn, err = Detect(ctx, ModeAuto, bad, "a")
	if err != nil || ex.Name() != "shell" || !strings.Contains(warn, "NO DOCKER") {
		t.Fatalf("auto without engine: %v %q %v", ex, warn, err)
	}
	if _, _, err := Detect(ctx, ModeDocker, bad, "a"); !errors.Is(err, ErrNoDocker) {
		t.Fatalf("docker without engine: %v", err)
	}
	if _, _, err := Detect(ctx, "podman", "", "a"); err == nil {
		t.Fatal("unknown mode accepted")
	}
	ex, warn, err = Detect(ctx, ModeAuto, testenv.DockerHost(t), "a")
	if err != nil || ex.Name() != "docker" || warn != "" {
		t.Fatalf("auto with engine: %v %q %v", ex, warn, err)
	}
	ex.Close()
}

func TestEnvListPinsGPUs(t *testing.T) {
	got := envList(map[string]string{"B": "2", "A": "1", "NVIDIA_VISIBLE_DEVICES": "all"}, []string{"0", "2"})
	want := []string{"A=1", "B=2", "NVIDIA_VISIBLE_DEVICES=0,2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("envList = %v, want %v", got, want)
	}
	if got := envList(map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"}, nil); got[len(got)-1] != "NVIDIA_VISIBLE_DEVICES=void" {
		t.Fatalf("a step without GPUs may ask for all of them: %v", got)
	}
}

func TestStderrCanBeSeparated(t *testing.T) {
	for exName, mk := range executors(t) {
		t.Run(exName, func(t *testing.T) {
			ex, image := mk(t)
			var out, errOut lockedBuffer
			code, err := ex.Run(context.Background(), Step{Name: "streams", Image: image, Checkout: t.TempDir(),
				Script: "echo to-out; echo to-err >&2", Output: &out, Stderr: &errOut})
			if err != nil || code != 0 {
				t.Fatalf("%d %v", code, err)
			}
			if out.String() != "to-out\n" || errOut.String() != "to-err\n" {
				t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
			}
		})
	}
}

func TestShellPinsCUDADevices(t *testing.T) {
	var out lockedBuffer
	code, err := NewShell().Run(context.Background(), Step{Name: "gpus", Checkout: t.TempDir(), Output: &out,
		GPUs: []string{"1", "3"}, Env: map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,2,3"},
		Script: `echo "cuda=$CUDA_VISIBLE_DEVICES"`})
	if err != nil || code != 0 || out.String() != "cuda=1,3\n" {
		t.Fatalf("%d %v %q", code, err, out.String())
	}
	out = lockedBuffer{}
	if _, err := NewShell().Run(context.Background(), Step{Name: "none", Checkout: t.TempDir(), Output: &out,
		Script: `echo "cuda=${CUDA_VISIBLE_DEVICES-unset}"`}); err != nil || out.String() != "cuda=\n" {
		t.Fatalf("a step without GPUs may see them all: %v %q", err, out.String())
	}
}

func TestDockerCapsCPUsAtTheEngine(t *testing.T) {
	d, image := newDocker(t)
	var out lockedBuffer
	code, err := d.Run(context.Background(), Step{Name: "big", Image: image, CPUs: 1000, Output: &out,
		Script: "cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us"})
	if err != nil || code != 0 {
		t.Fatalf("a step asking for more cores than the engine has: %d %v %q", code, err, out.String())
	}
	if strings.Contains(out.String(), "100000000") {
		t.Fatalf("limit not capped: %q", out.String())
	}
}

// A tool of the host is found by its name in both executors, after the image's own PATH, and
// a job cannot change it.
func TestToolsAreOnPath(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "nimbus-tool")
	raw, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tool, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"docker": ToolDir + "/nimbus-tool", "shell": tool}
	for exName, mk := range executors(t) {
		t.Run(exName, func(t *testing.T) {
			ex, image := mk(t)
			kind := ex.Name()
			var out lockedBuffer
			script := `command -v nimbus-tool; case "$PATH" in *:` + filepath.Dir(want[kind]) + `) ;; *) echo "not last: $PATH";; esac`
			if kind == "docker" {
				script += `; echo x > ` + ToolDir + `/nimbus-tool || echo read-only`
			}
			code, err := ex.Run(context.Background(), Step{Name: "tools", Image: image, Script: script,
				Checkout: t.TempDir(), Output: &out, Tools: []string{tool}})
			if err != nil || code != 0 {
				t.Fatalf("exit %d, %v: %s", code, err, out.String())
			}
			got := out.String()
			if !strings.Contains(got, want[kind]+"\n") || strings.Contains(got, "not last") ||
				(kind == "docker" && !strings.Contains(got, "read-only")) {
				t.Fatalf("output %q, want the tool at %s, last on PATH, read-only", got, want[kind])
			}
		})
	}
	if ok, err := IsStatic(tool); err != nil || !ok {
		t.Fatalf("IsStatic(busybox) = %v, %v", ok, err)
	}
}
