package dockerservice

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/lifeline/lifelinetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

func TestParseSubRanges(t *testing.T) {
	tests := []struct {
		name, in string
		want     []subRange
		wantErr  bool
	}{
		{"by name", "alice:100000:65536\nbob:165536:65536\n", []subRange{{100000, 65536}}, false},
		{"by uid", "999:300000:1000\n", []subRange{{300000, 1000}}, false},
		{"several", "alice:100000:10\n# note\nalice:200000:20\n", []subRange{{100000, 10}, {200000, 20}}, false},
		{"none", "bob:1:2\n", nil, false},
		{"bad", "alice:x:10\n", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSubRanges(strings.NewReader(tc.in), "alice", 999)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	m := idMap(999, []subRange{{100000, 10}, {200000, 20}})
	if got, want := formatIDMap(m), "0 999 1\n1 100000 10\n11 200000 20\n"; got != want {
		t.Fatalf("idMap = %q, want %q", got, want)
	}
	if got := normalizeIDMap("         0        999          1\n         1     100000         10\n        11     200000         20\n"); got != formatIDMap(m) {
		t.Fatalf("normalizeIDMap = %q", got)
	}
}

func TestIsStatic(t *testing.T) {
	// busybox-static and the shell are on every test host (e2e/testenv.sh installs the former).
	if ok, err := executor.IsStatic("/bin/busybox"); err != nil || !ok {
		t.Fatalf("executor.IsStatic(/bin/busybox) = %v, %v; want true", ok, err)
	}
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	if ok, err := executor.IsStatic(sh); err != nil || ok {
		t.Fatalf("executor.IsStatic(%s) = %v, %v; want false", sh, ok, err)
	}
	if _, problem := findCLI(sh); !strings.Contains(problem, "dynamically linked") {
		t.Fatalf("findCLI(%s) problem = %q", sh, problem)
	}
}

func TestUnavailableSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Mode: ModeOff, Dir: t.TempDir()}, "--docker-service=off"},
		{Config{Mode: "weird", Dir: t.TempDir()}, "unknown mode"},
		{Config{Mode: ModeRootless, Dir: t.TempDir(), User: "no-such-user-nimbus"}, "no-such-user-nimbus"},
	} {
		err := New(tc.cfg).Available()
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Available() = %v, want ErrUnavailable mentioning %q", err, tc.want)
		}
	}
}

// rig is a manager for the test's engines with a busybox image to import into them.
type rig struct {
	m      *Manager
	dir    string
	rootfs string // a busybox root file system
}

func newRig(t testing.TB, cfg Config) *rig {
	t.Helper()
	userName := testenv.DindUser(t)
	if os.Geteuid() != 0 {
		t.Fatal("the docker service tests need root (as the agent does to offer the service)")
	}
	dir := t.TempDir()
	// The engines' user must reach their state, as in an agent's work dir.
	for p := dir; p != filepath.Dir(p); p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 {
			os.Chmod(p, st.Mode().Perm()|0o011)
		}
	}
	cfg.Dir = filepath.Join(dir, "services")
	cfg.RunDir = filepath.Join("/run", "nimbus-test-"+filepath.Base(dir))
	cfg.User = userName
	m := New(cfg)
	if err := m.Available(); err != nil {
		t.Fatal(err)
	}
	if m.CLIProblem() != "" {
		t.Fatal(m.CLIProblem())
	}
	t.Cleanup(func() {
		m.Cleanup()
		os.RemoveAll(cfg.RunDir)
	})
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "etc", "tmp"} {
		os.MkdirAll(filepath.Join(rootfs, d), 0o755)
	}
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), b, 0o755)
	for _, a := range []string{"sh", "cat", "echo", "ls", "touch", "id", "head", "dd", "sleep", "stat"} {
		os.Symlink("busybox", filepath.Join(rootfs, "bin", a))
	}
	os.WriteFile(filepath.Join(rootfs, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	return &rig{m: m, dir: dir, rootfs: rootfs}
}

// docker runs the docker CLI against an engine and returns its combined output.
func docker(ctx context.Context, e *Engine, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.m.cli, append([]string{"-H", "unix://" + e.Socket()}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + os.TempDir(), "DOCKER_CONFIG=" + filepath.Join(e.dir, "config")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *rig) start(t *testing.T, id string, spec Spec) (*Engine, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checkout := filepath.Join(r.dir, "checkout-"+id)
	if err := os.MkdirAll(checkout, 0o755); err != nil {
		t.Fatal(err)
	}
	spec.ID, spec.Checkout = id, checkout
	if spec.Mount == "" {
		spec.Mount = "/workspace"
	}
	e, err := r.m.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop() })
	imp := exec.CommandContext(ctx, "sh", "-c", `tar -C "$1" -c . | "$2" -H "unix://$3" import --change 'ENV PATH=/bin' - bb:1`, "sh", r.rootfs, r.m.cli, e.Socket())
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import busybox: %v: %s", err, out)
	}
	return e, checkout
}

func TestRootlessEngine(t *testing.T) {
	r := newRig(t, Config{Mode: ModeRootless})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, wsA := r.start(t, "lease-a", Spec{CPUs: 1, MemoryBytes: 2 << 30})
	b, _ := r.start(t, "lease-b", Spec{})
	t.Logf("engine a answered after %s", a.Ready)

	t.Run("checkout paths and owners mean the same inside", func(t *testing.T) {
		// What the jobs (root on the agent's engine) wrote, the engine's containers may change,
		// and what they write is root's for the next job.
		if err := os.WriteFile(filepath.Join(wsA, "from-job"), []byte("job\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Mkdir(filepath.Join(wsA, "made-by-job"), 0o755)
		out, err := docker(ctx, a, "run", "--rm", "--network", "none", "-v", "/workspace/out:/out", "-v", "/workspace:/w", "bb:1",
			"sh", "-c", "cat /w/from-job && echo inner > /out/f && echo more >> /w/from-job && echo x > /w/made-by-job/y && id -u")
		if err != nil {
			t.Fatalf("docker run: %v: %s", err, out)
		}
		if !strings.Contains(out, "job") || !strings.HasSuffix(strings.TrimSpace(out), "0") {
			t.Fatalf("output %q", out)
		}
		for _, f := range []string{"out/f", "from-job", "made-by-job/y"} {
			st, err := os.Stat(filepath.Join(wsA, f))
			if err != nil {
				t.Fatal(err)
			}
			if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 0 {
				t.Errorf("%s is owned by %d on the host, want 0 (root, as the jobs see it)", f, uid)
			}
		}
	})

	t.Run("privileged containers do not reach the host", func(t *testing.T) {
		secret := filepath.Join(r.dir, "host-secret")
		os.WriteFile(secret, []byte("s3cret\n"), 0o600)
		out, err := docker(ctx, a, "run", "--rm", "--network", "none", "--privileged", "-v", "/:/host", "bb:1",
			"sh", "-c", "cat /host"+secret+"; cat /host/etc/shadow; touch /host/root/escaped; echo done")
		if err != nil {
			t.Fatalf("docker run: %v: %s", err, out)
		}
		if strings.Contains(out, "s3cret") || strings.Contains(out, "root:") {
			t.Fatalf("a privileged container read the host's files: %s", out)
		}
		if _, err := os.Stat("/root/escaped"); err == nil {
			os.Remove("/root/escaped")
			t.Fatal("a privileged container wrote into the host's /root")
		}
		if !strings.Contains(out, "Permission denied") {
			t.Fatalf("want permission errors, got %q", out)
		}
	})

	t.Run("engines see only their own images and containers", func(t *testing.T) {
		if out, err := docker(ctx, a, "run", "-d", "--name", "only-in-a", "--network", "none", "bb:1", "sleep", "300"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if out, _ := docker(ctx, b, "ps", "-a", "--format", "{{.Names}}"); strings.Contains(out, "only-in-a") {
			t.Fatalf("engine b lists a's container: %s", out)
		}
		if out, err := docker(ctx, b, "tag", "bb:1", "only-in-b:1"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if out, _ := docker(ctx, a, "images", "--format", "{{.Repository}}"); strings.Contains(out, "only-in-b") {
			t.Fatalf("engine a lists b's image: %s", out)
		}
	})

	t.Run("the pipeline's limits bound its containers", func(t *testing.T) {
		out, err := docker(ctx, a, "run", "--rm", "--network", "none", "bb:1", "cat", "/proc/self/cgroup")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if !strings.Contains(out, "nimbus-services/"+engineName("lease-a")) {
			t.Fatalf("the container is not in the pipeline's cgroup:\n%s", out)
		}
		cg := existingCgroup(engineName("lease-a"))
		if cg == nil {
			t.Fatal("no cgroup for the engine")
		}
		read := func(ctl, file string) string {
			dir := filepath.Join(cgroupRoot, ctl, "nimbus-services", engineName("lease-a"))
			if cg.v2 {
				dir = cg.dirs[0]
			}
			b, _ := os.ReadFile(filepath.Join(dir, file))
			return strings.TrimSpace(string(b))
		}
		if cg.v2 {
			if got := read("", "memory.max"); got != strconv.FormatInt(2<<30, 10) {
				t.Fatalf("memory.max %q", got)
			}
			if got := read("", "cpu.max"); got != "100000 100000" {
				t.Fatalf("cpu.max %q", got)
			}
		} else {
			if got := read("memory", "memory.limit_in_bytes"); got != strconv.FormatInt(2<<30, 10) {
				t.Fatalf("memory limit %q", got)
			}
			if got := read("cpu", "cpu.cfs_quota_us"); got != "100000" {
				t.Fatalf("cpu quota %q", got)
			}
		}
	})

	t.Run("stop leaves nothing", func(t *testing.T) {
		dir := a.dir
		if err := a.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the engine's directory is still there: %v", err)
		}
		if cg := existingCgroup(engineName("lease-a")); cg != nil {
			t.Fatalf("the cgroup is still there: %v", cg.dirs)
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mounts), dir) {
			t.Fatal("a mount of the engine is still there")
		}
		u, _ := user.Lookup(r.m.cfg.User)
		if out, _ := exec.Command("pgrep", "-a", "-u", u.Uid, "-f", a.name).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
			t.Fatalf("processes of the engine survived:\n%s", out)
		}
		// b is untouched.
		if out, err := docker(ctx, b, "version", "--format", "{{.Server.Version}}"); err != nil {
			t.Fatalf("engine b: %v: %s", err, out)
		}
	})
}

func TestDiskLimitFailsThePipeline(t *testing.T) {
	r := newRig(t, Config{Mode: ModeRootless, DiskLimit: 40 << 20, DiskCheckInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, _ := r.start(t, "lease-disk", Spec{})
	go docker(ctx, e, "run", "--network", "none", "bb:1", "dd", "if=/dev/zero", "of=/big", "bs=1M", "count=80")
	select {
	case err := <-e.Failed():
		if !strings.Contains(err.Error(), "above this agent's limit of 40.0 MiB") {
			t.Fatalf("error %q does not name the limit", err)
		}
	case <-ctx.Done():
		t.Fatal("the engine went over its disk limit unnoticed")
	}
}

func TestPrivilegedEngine(t *testing.T) {
	r := newRig(t, Config{Mode: ModePrivileged})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, checkout := r.start(t, "lease-p", Spec{})
	out, err := docker(ctx, e, "run", "--rm", "--network", "none", "-v", "/workspace/out:/out", "bb:1", "sh", "-c", "echo hi > /out/f")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(checkout, "out", "f")); err != nil || string(b) != "hi\n" {
		t.Fatalf("the checkout path does not mean the same inside: %q, %v", b, err)
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestGPUsThePipelineDidNotReserveAreHidden(t *testing.T) {
	r := newRig(t, Config{Mode: ModeRootless})
	// Stand-ins for two GPUs of the host: character devices that read as zeros, world-readable
	// like NVIDIA's.
	for _, n := range []string{"97", "98"} {
		p := "/dev/nvidia" + n
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
		os.Chmod(p, 0o666)
		t.Cleanup(func() { os.Remove(p) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, _ := r.start(t, "lease-gpu", Spec{GPUs: []string{"98"}})
	out, err := docker(ctx, e, "run", "--rm", "--network", "none", "--device", "/dev/nvidia97", "--device", "/dev/nvidia98", "bb:1", "sh", "-c",
		"echo other=$(head -c 4 /dev/nvidia97 | wc -c) mine=$(head -c 4 /dev/nvidia98 | wc -c)")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(out, "other=0 mine=4") {
		t.Fatalf("a container of the pipeline given both devices sees %q; want the reserved GPU only (other=0 mine=4)", out)
	}
}

// engineAgentEnv, in a child process of TestEngineEndsWithItsAgent, makes it the agent: it
// starts an engine in the directories the variable names and waits to be killed.
const engineAgentEnv = "NIMBUS_TEST_ENGINE_AGENT"

// kill -9 of the agent used to leave its pipelines' engines running (dockerd, containerd and
// every container a job had started in them), unbilled, until the agent was started again.
// Now the engine and all it started are gone within seconds, with no restart, in both modes.
func TestEngineEndsWithItsAgent(t *testing.T) {
	if args := os.Getenv(engineAgentEnv); args != "" {
		actAsAgent(t, args)
		return
	}
	for _, mode := range []string{ModeRootless, ModePrivileged} {
		t.Run(mode, func(t *testing.T) { engineEndsWithItsAgent(t, mode) })
	}
}

func engineEndsWithItsAgent(t *testing.T, mode string) {
	r := newRig(t, Config{Mode: mode})
	checkout := filepath.Join(r.dir, "checkout")
	os.MkdirAll(checkout, 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	child, out := lifelinetest.Agent(t, "TestEngineEndsWithItsAgent",
		engineAgentEnv+"="+strings.Join([]string{mode, r.m.cfg.Dir, r.m.cfg.RunDir, checkout}, ":"))
	// The child says "engine <name> <socket>" once its engine answers.
	var name, sock string
	buf := make([]byte, 4096)
	var seen string
	for name == "" {
		n, err := out.Read(buf)
		seen += string(buf[:n])
		for _, line := range strings.Split(seen, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "engine" {
				name, sock = f[1], f[2]
			}
		}
		if err != nil && name == "" {
			t.Fatalf("the agent's child ended before its engine answered: %v\n%s", err, seen)
		}
	}
	// A container in the engine, as a job's `docker run -d` leaves one.
	e := &Engine{m: r.m, dir: filepath.Join(r.m.cfg.Dir, name), run: filepath.Dir(sock)}
	imp := exec.CommandContext(ctx, "sh", "-c", `tar -C "$1" -c . | "$2" -H "unix://$3" import --change 'ENV PATH=/bin' - bb:1`, "sh", r.rootfs, r.m.cli, sock)
	if b, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import busybox: %v: %s", err, b)
	}
	if b, err := docker(ctx, e, "run", "-d", "--network", "none", "bb:1", "sleep", "300"); err != nil {
		t.Fatalf("docker run: %v: %s", err, b)
	}
	cg := existingCgroup(name)
	if cg == nil || len(cg.pids()) == 0 {
		t.Fatal("the engine's cgroup holds no processes")
	}
	before := len(cg.pids())
	child.Process.Kill()
	child.Wait()
	killed := time.Now()
	for len(cg.pids()) > 0 {
		if time.Since(killed) > 10*time.Second {
			ps, _ := exec.Command("ps", "-o", "pid,user,args", "-p", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(cg.pids())), ","), "[]")).CombinedOutput()
			t.Fatalf("10 s after kill -9 of the agent, %d of its engine's %d processes still run:\n%s", len(cg.pids()), before, ps)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the engine's %d processes were gone %v after kill -9 of the agent", before, time.Since(killed).Round(time.Millisecond))
}

// actAsAgent starts an engine as args (mode:state dir:run dir:checkout) say and waits to be
// killed.
func actAsAgent(t *testing.T, args string) {
	a := strings.Split(args, ":")
	m := New(Config{Mode: a[0], Dir: a[1], RunDir: a[2], User: testenv.DindUser(t)})
	e, err := m.Start(context.Background(), Spec{ID: "lease-agent-killed", Checkout: a[3], Mount: "/workspace"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("engine %s %s\n", e.name, e.Socket())
	select {}
}
