package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	dockerclient "github.com/docker/docker/client"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/agent/volumes"
	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestIDSurvivesRestartAndStaleCheckoutsGo(t *testing.T) {
	dir := t.TempDir()
	a, err := New(context.Background(), Config{WorkDir: dir, Executor: executor.ModeShell}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	first := a.ID()
	a.Close()
	if !strings.HasPrefix(first, "agent-") {
		t.Fatalf("id %q", first)
	}
	stale := filepath.Join(dir, "workspaces", "pipeline-41")
	os.MkdirAll(filepath.Join(stale, "src"), 0o755)
	os.WriteFile(filepath.Join(stale, "src", "f"), []byte("x"), 0o644)

	b, err := New(context.Background(), Config{WorkDir: dir, Executor: executor.ModeShell}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.ID() != first {
		t.Fatalf("id changed across restart: %q -> %q", first, b.ID())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale checkout survived: %v", err)
	}
}

func TestRestartRemovesContainersOfThePreviousRun(t *testing.T) {
	host, image := testenv.DockerHost(t), testenv.Image(t)
	dir := t.TempDir()
	cfg := Config{WorkDir: dir, Executor: executor.ModeDocker, DockerHost: host, Network: "none"}
	a, err := New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if a.Executor().Name() != "docker" {
		t.Fatalf("executor %s", a.Executor().Name())
	}
	a.Close()

	// What a kill -9 mid-job leaves: a labelled container still there.
	cli, err := dockerclient.NewClientWithOpts(dockerclient.WithHost(host), dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{"sleep", "600"},
		Labels: map[string]string{executor.LabelAgent: a.ID()}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}

	b, err := New(ctx, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := cli.ContainerInspect(ctx, c.ID); !dockerclient.IsErrNotFound(err) {
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		t.Fatalf("leftover container survived the restart: %v", err)
	}
}

func TestRequiredDockerMissingFails(t *testing.T) {
	_, err := New(context.Background(), Config{WorkDir: t.TempDir(), Executor: executor.ModeDocker,
		DockerHost: "unix://" + filepath.Join(t.TempDir(), "none.sock")}, quiet())
	if err == nil || !strings.Contains(err.Error(), "no Docker engine") {
		t.Fatalf("err = %v", err)
	}
}

// agentConfig is an agent on the shell executor against the fake control plane.
func agentConfig(t *testing.T, srv *fakeserver.Server) Config {
	return Config{ServerURL: srv.URL, Token: srv.RegistrationToken, Tags: []string{"cnb:arch:amd64"}, CPUs: 2,
		Executor: executor.ModeShell, WorkDir: t.TempDir(), Version: "test", Name: "agent-under-test",
		DetectGPUs: func(context.Context) ([]protocol.GPU, error) { return nil, nil },
		Retry:      client.Retry{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, GiveUpAfter: time.Second}}
}

// start runs an agent until the returned stop is called; stop returns Run's error.
func start(t *testing.T, cfg Config) (*Agent, func() error) {
	t.Helper()
	a, err := New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		defer a.Close()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("the agent did not stop within 20 s")
			return nil
		}
	}
	t.Cleanup(func() { stop() })
	return a, stop
}

func shellLease(id string, cpus int, scripts ...string) protocol.Lease {
	l := protocol.Lease{ID: id, PipelineID: 1, Plan: protocol.Plan{Name: id,
		Runner: protocol.Runner{Cpus: cpus, MaxDuration: protocol.Duration(time.Hour)}}}
	st := protocol.Stage{Name: "s"}
	for i, s := range scripts {
		st.Jobs = append(st.Jobs, protocol.Job{Key: "j", Name: "j", Kind: protocol.KindScript, Script: s})
		l.Jobs = append(l.Jobs, protocol.JobRef{Stage: 0, Job: i, ID: int64(i + 1)})
	}
	l.Plan.Stages = []protocol.Stage{st}
	return l
}

// waitPolls waits until the agent has polled at least n times.
func waitPolls(t *testing.T, srv *fakeserver.Server, n int) []protocol.PollRequest {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if p := srv.Polls(); len(p) >= n {
			return p
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d polls within 10 s", n)
	return nil
}

func TestRegistersOnceAndKeepsItsToken(t *testing.T) {
	srv := fakeserver.New(t)
	cfg := agentConfig(t, srv)
	_, stop := start(t, cfg)
	waitPolls(t, srv, 1)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	regs := srv.Registrations()
	if len(regs) != 1 {
		t.Fatalf("%d registrations", len(regs))
	}
	r := regs[0]
	if r.Name != "agent-under-test" || r.CPUs != 2 || r.Concurrency != 2 || r.Executor != "shell" ||
		r.Version != "test" || r.MemoryBytes <= 0 || len(r.Tags) != 1 {
		t.Fatalf("registered with %+v", r)
	}
	info, err := os.Stat(filepath.Join(cfg.WorkDir, TokenFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", info, err)
	}

	// A restart (even without the registration token) uses the saved agent token.
	cfg.Token = ""
	_, stop = start(t, cfg)
	n := len(srv.Polls())
	waitPolls(t, srv, n+1)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(srv.Registrations()) != 1 {
		t.Fatalf("registered again after a restart: %d registrations", len(srv.Registrations()))
	}
}

func TestRegistersAgainWhenTheTokenIsRefused(t *testing.T) {
	srv := fakeserver.New(t)
	cfg := agentConfig(t, srv)
	_, stop := start(t, cfg)
	waitPolls(t, srv, 1)
	srv.SetAgentToken("agent-token-2") // the old token now gets 401
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Registrations()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	srv.Enqueue(shellLease("after-revoke", 1, "echo hi"))
	srv.WaitFinished(t, "after-revoke", 10*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Registrations()); got != 2 {
		t.Fatalf("%d registrations, want 2", got)
	}
	b, _ := os.ReadFile(filepath.Join(cfg.WorkDir, TokenFile))
	if !strings.Contains(string(b), "agent-token-2") {
		t.Fatalf("the new token was not saved: %s", b)
	}
}

func TestWithoutARegistrationTokenTheAgentIdles(t *testing.T) {
	srv := fakeserver.New(t)
	cfg := agentConfig(t, srv)
	cfg.Token = ""
	_, stop := start(t, cfg)
	time.Sleep(300 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(srv.Registrations()) != 0 || len(srv.Polls()) != 0 {
		t.Fatal("an agent without a token talked to the server")
	}
}

func TestRefusedRegistrationIsAnError(t *testing.T) {
	srv := fakeserver.New(t)
	cfg := agentConfig(t, srv)
	cfg.Token = "wrong"
	a, err := New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Run(ctx); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("Run = %v", err)
	}
}

func TestRunsLeasesConcurrentlyWithinCapacity(t *testing.T) {
	srv := fakeserver.New(t)
	cfg := agentConfig(t, srv) // 2 cores, so 2 one-core pipelines at a time
	marks := t.TempDir()
	ids := []string{"l1", "l2", "l3"}
	for _, id := range ids {
		// Each job writes when it ran; overlap is judged from those times, not from how long
		// the whole test took, which a loaded machine stretches.
		srv.Enqueue(shellLease(id, 1, fmt.Sprintf("date +%%s%%N > %[1]s/%[2]s.start; sleep 2; date +%%s%%N > %[1]s/%[2]s.end", marks, id)))
	}
	_, stop := start(t, cfg)
	for _, id := range ids {
		if f := srv.WaitFinished(t, id, 30*time.Second).Finish; f.Status != "success" {
			t.Fatalf("%s: %+v", id, f)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	type span struct{ start, end int64 }
	stamp := func(name string) int64 {
		raw, err := os.ReadFile(filepath.Join(marks, name))
		if err != nil {
			t.Fatal(err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	spans := make([]span, len(ids))
	for i, id := range ids {
		spans[i] = span{stamp(id + ".start"), stamp(id + ".end")}
	}
	overlapped := false
	for i := range spans {
		running := 0 // pipelines running at the moment spans[i] started
		for j := range spans {
			if spans[j].start <= spans[i].start && spans[i].start < spans[j].end {
				running++
			}
			if i != j && spans[j].start < spans[i].end && spans[i].start < spans[j].end {
				overlapped = true
			}
		}
		if running > 2 {
			t.Fatalf("three one-core pipelines ran at once on 2 cores: %+v", spans)
		}
	}
	if !overlapped {
		t.Fatalf("the pipelines ran one at a time with a free core: %+v", spans)
	}
	for _, p := range srv.Polls() {
		if len(p.Running) >= 2 || p.FreeCPUs != 2-len(p.Running) {
			t.Fatalf("a poll misstated the capacity: %+v", p)
		}
	}
}

func TestGPUsAreAnnouncedAndReservedPerLease(t *testing.T) {
	srv := fakeserver.New(t)
	cfg := agentConfig(t, srv)
	cfg.CPUs = 32
	cfg.DetectGPUs = func(context.Context) ([]protocol.GPU, error) {
		return []protocol.GPU{{Index: 0, Name: "NVIDIA L40", MemoryMiB: 46068}, {Index: 1, Name: "NVIDIA L40", MemoryMiB: 46068}}, nil
	}
	// The job runs until the test has seen a poll made while it ran.
	release := filepath.Join(t.TempDir(), "release")
	l := shellLease("gpu", 16, `echo "cuda=$CUDA_VISIBLE_DEVICES"; while [ ! -e `+release+` ]; do sleep 0.1; done`)
	l.GPUs = []string{"1"}
	srv.Enqueue(l)
	a, stop := start(t, cfg)
	rec := srv.WaitFor(t, "gpu", 10*time.Second, "job start", func(r fakeserver.Lease) bool {
		return len(r.EventsOf(protocol.EventJobStarted, 1)) == 1
	})
	n := len(srv.Polls())
	polls := waitPolls(t, srv, n+1)
	during := polls[len(polls)-1]
	if !slices.Equal(during.FreeGPUs, []string{"0"}) || during.FreeCPUs != 16 || !slices.Equal(during.Running, []string{"gpu"}) {
		t.Fatalf("poll during the GPU lease: %+v", during)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec = srv.WaitFinished(t, "gpu", 10*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := string(rec.Logs[1]); got != "cuda=1\n" {
		t.Fatalf("job saw %q", got)
	}
	want := []string{"cnb:arch:amd64", "cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:L40"}
	if reg := srv.Registrations()[0]; !slices.Equal(reg.Tags, want) || len(reg.GPUs) != 2 || !slices.Equal(a.Tags(), want) {
		t.Fatalf("registered %+v", reg)
	}
	if first := srv.Polls()[0]; !slices.Equal(first.FreeGPUs, []string{"0", "1"}) {
		t.Fatalf("first poll %+v", first)
	}
}

func TestStoppingTheAgentEndsItsPipelines(t *testing.T) {
	srv := fakeserver.New(t)
	srv.Enqueue(shellLease("long", 1, "echo started; sleep 300"))
	_, stop := start(t, agentConfig(t, srv))
	srv.WaitFor(t, "long", 10*time.Second, "output", func(r fakeserver.Lease) bool {
		return strings.Contains(string(r.Logs[1]), "started")
	})
	begin := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("stopping took %v", took)
	}
	if f := srv.Get("long").Finish; f == nil || f.Status != "failed" || !strings.HasPrefix(f.Reason, "agent_stopped") {
		t.Fatalf("finish %+v", f)
	}
}

// Every poll lists the repositories whose caches the host holds, for the scheduler's cache
// affinity.
func TestPollsListTheCachedRepositories(t *testing.T) {
	srv := fakeserver.New(t)
	cfg := agentConfig(t, srv)
	store, err := volumes.Open(volumes.Config{Dir: filepath.Join(cfg.WorkDir, "caches")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.Acquire(context.Background(), volumes.Key{Repo: "42", Path: "/root/.cache"}, protocol.VolumeReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "dep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Release(true); err != nil {
		t.Fatal(err)
	}
	store.Close()

	_, stop := start(t, cfg)
	polls := waitPolls(t, srv, 1)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := polls[0].Caches; len(got) != 1 || got[0] != "42" {
		t.Fatalf("the poll listed caches %v, want [42]", got)
	}
}

// A relative work dir (the flag's default is ./nimbus-agent) is made absolute: the Docker
// engine refuses to bind-mount a relative path, and every job of such an agent failed.
func TestRelativeWorkDirBecomesAbsolute(t *testing.T) {
	srv := fakeserver.New(t)
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := agentConfig(t, srv)
	cfg.WorkDir = "nimbus-agent"
	a, err := New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if want := filepath.Join(dir, "nimbus-agent"); a.cfg.WorkDir != want {
		t.Fatalf("work dir %q, want %q", a.cfg.WorkDir, want)
	}
}
