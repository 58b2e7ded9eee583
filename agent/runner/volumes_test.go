package runner

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/volumes"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// docker.volumes through a real runner: the real Docker engine of the tests, the fake control
// plane, a real store with overlayfs (the tests run as root, as the agent does; the store tests
// cover the copy fallback).

// withCaches gives the harness's runner a cache store in its work dir.
func withCaches(t *testing.T, h *harness) *volumes.Store {
	t.Helper()
	store, err := volumes.Open(volumes.Config{Dir: filepath.Join(h.workDir, "caches")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h.runner, err = New(Config{API: h.api, Executor: h.exec, WorkDir: h.workDir, DefaultImage: h.image,
		HeartbeatInterval: h.runner.cfg.HeartbeatInterval, LogFlushInterval: h.runner.cfg.LogFlushInterval,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Caches: CacheConfig{Store: store}})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// volumePlan is a one-job pipeline of repository repo with the given volumes.
func volumePlan(repo, sh string, vols ...protocol.Volume) protocol.Plan {
	p := plan(serial("s", script("job", sh)))
	p.Builtins["CNB_REPO_ID"] = repo
	p.Volumes = vols
	return p
}

// vol is a docker.volumes entry as the planner makes it from spec (types in their long spelling).
func vol(spec string) protocol.Volume {
	long := map[string]string{"cow": protocol.VolumeCopyOnWrite, "rw": protocol.VolumeReadWrite, "ro": protocol.VolumeReadOnly}
	parts := strings.Split(spec, ":")
	v := protocol.Volume{Path: parts[0], Type: protocol.VolumeCopyOnWrite}
	switch len(parts) {
	case 2:
		v.Path, v.Type = parts[0], parts[1]
	case 3:
		v.Group, v.Path, v.Type = parts[0], parts[1], parts[2]
	}
	if l, ok := long[v.Type]; ok {
		v.Type = l
	}
	return v
}

func (h *harness) runOK(t *testing.T, l protocol.Lease, want string) string {
	t.Helper()
	res, rec := h.run(t, l)
	log := logOf(rec, jobID(0, 0))
	if res.Status != want {
		t.Fatalf("lease %s: %+v, want %s; log:\n%s", l.ID, res, want, log)
	}
	return log
}

// A copy-on-write cache (absolute and checkout-relative) carries what a successful pipeline
// wrote to the next one, and nothing of a failed one; read-only shows it and refuses writes.
func TestVolumeCopyOnWriteCarriesOnlySuccess(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	withCaches(t, h)
	vols := []protocol.Volume{vol("/cache"), vol("./deps:cow")}
	log := h.runOK(t, lease("first", volumePlan("1", `echo one > /cache/a && echo dep > deps/b && pwd`, vols...)), StatusSuccess)
	if !strings.Contains(log, "cache /cache (copy-on-write): empty (first use)") || !strings.Contains(log, "cache deps (copy-on-write)") {
		t.Fatalf("first log:\n%s", log)
	}
	h.runOK(t, lease("failing", volumePlan("1", `cat /cache/a deps/b && echo two > /cache/a && touch /cache/c && exit 3`, vols...)), StatusFailed)
	log = h.runOK(t, lease("third", volumePlan("1", `cat /cache/a deps/b; test ! -e /cache/c || echo "c survived"`, vols...)), StatusSuccess)
	if !strings.Contains(log, "restored") || !strings.Contains(log, "one\ndep\n") || strings.Contains(log, "survived") {
		t.Fatalf("after a success and a failure:\n%s", log)
	}
	log = h.runOK(t, lease("read-only", volumePlan("1", `cat /cache/a; touch /cache/x 2>/dev/null && echo "wrote"; echo done`,
		vol("/cache:read-only"))), StatusSuccess)
	if !strings.Contains(log, "one\n") || strings.Contains(log, "wrote") {
		t.Fatalf("read-only:\n%s", log)
	}
	log = h.runOK(t, lease("cow-ro", volumePlan("1", `echo scratch > /cache/a`, vol("/cache:copy-on-write-read-only"))), StatusSuccess)
	log = h.runOK(t, lease("after-cow-ro", volumePlan("1", `cat /cache/a`, vol("/cache:ro"))), StatusSuccess)
	if !strings.Contains(log, "one\n") {
		t.Fatalf("copy-on-write-read-only kept its write:\n%s", log)
	}
}

// The group, the repository and run-time variables in the spec pick the cache.
func TestVolumeGroupsRepositoriesAndVariables(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	store := withCaches(t, h)
	p := volumePlan("1", `echo blue > /c/who`, protocol.Volume{Group: "${CACHE_GROUP}", Path: "/c", Type: protocol.VolumeCopyOnWrite})
	p.RuntimeVars = []string{"CACHE_GROUP"}
	l := lease("grouped", p)
	l.Env["CACHE_GROUP"] = "blue"
	h.runOK(t, l, StatusSuccess)
	for _, tt := range []struct {
		id, repo, spec, want string
	}{
		{"same-group", "1", "blue:/c:ro", "blue"},
		{"no-group", "1", "/c:ro", "none"},
		{"other-repo", "2", "blue:/c:ro", "none"},
	} {
		log := h.runOK(t, lease(tt.id, volumePlan(tt.repo, `cat /c/who 2>/dev/null || echo none`, vol(tt.spec))), StatusSuccess)
		if !strings.Contains(log, tt.want+"\n") {
			t.Errorf("%s: %q, want %q", tt.id, log, tt.want)
		}
	}
	if got := strings.Join(store.Repos(), ","); got != "1" {
		t.Fatalf("Repos() = %q", got)
	}
}

// A data volume is shared by the pipeline's containers, starts with the image's content at its
// path, and is gone when the pipeline ends.
func TestVolumeDataIsPerPipeline(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	withCaches(t, h)
	p := plan(serial("s", script("write", `test -f /etc/passwd && echo shared > /etc/nimbus-data`),
		script("read", `cat /etc/nimbus-data`)))
	p.Volumes = []protocol.Volume{vol("/etc:data")}
	res, rec := h.run(t, lease("data", p))
	if res.Status != StatusSuccess || logOf(rec, jobID(0, 1)) != "shared\n" {
		t.Fatalf("%+v: %q %q", res, logOf(rec, jobID(0, 0)), logOf(rec, jobID(0, 1)))
	}
	if _, err := h.docker.VolumeInspect(context.Background(), dataVolumeName("data", "/etc")); err == nil {
		t.Fatal("the data volume outlived its pipeline")
	}
	res, rec = h.run(t, lease("data-again", p))
	if res.Status != StatusSuccess {
		t.Fatalf("second pipeline: %+v %q", res, logOf(rec, jobID(0, 0)))
	}
}

// Specs that cannot be mounted fail the pipeline with the reason in its first job's log.
func TestVolumeErrorsFailThePipeline(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	withCaches(t, h)
	for _, tt := range []struct {
		id, repo string
		vols     []protocol.Volume
		want     string
	}{
		{"escape", "1", []protocol.Volume{vol("../up")}, "inside the workspace"},
		{"checkout", "1", []protocol.Volume{vol(".")}, "inside the workspace"},
		{"root", "1", []protocol.Volume{vol("/")}, "cannot be mounted at /"},
		{"twice", "1", []protocol.Volume{vol("/x"), vol("/x/:ro")}, "both mounted at /x"},
		{"no-repo", "", []protocol.Volume{vol("/x")}, "no CNB_REPO_ID"},
	} {
		log := h.runOK(t, lease(tt.id, volumePlan(tt.repo, "echo ran", tt.vols...)), StatusFailed)
		if !strings.Contains(log, tt.want) || strings.Contains(log, "ran\n") {
			t.Errorf("%s: log %q, want %q", tt.id, log, tt.want)
		}
	}
}

// The shell executor mounts nothing and says so; the pipeline runs.
func TestVolumeShellExecutorSaysCachesAreIgnored(t *testing.T) {
	h := newHarness(t, executor.ModeShell)
	withCaches(t, h)
	log := h.runOK(t, lease("shell", volumePlan("1", "echo ran", vol("/tmp/nimbus-cache-test"))), StatusSuccess)
	if !strings.Contains(log, "docker.volumes are ignored by the shell executor") || !strings.Contains(log, "ran\n") {
		t.Fatalf("log %q", log)
	}
}
