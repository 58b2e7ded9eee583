package runner

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"strconv"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/volumes"
	"github.com/nimbus-build/nimbus/internal/envflag"
	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// docker.volumes, the third preparation (prepare.go): each entry becomes a mount of every job
// container of the pipeline, released when the run ends.
//
//   - Caches (copy-on-write, read-write, read-only, copy-on-write-read-only) come from the
//     agent's volumes.Store, keyed by the plan's CNB_REPO_ID, the group and the path; a
//     copy-on-write cache keeps its changes only when the pipeline succeeds. No group is the
//     repository's one shared group: every branch and event of the repository reads and writes
//     the same cache per path (CNB documents the group as what isolates caches, and no default
//     one). A group of one's own isolates, e.g. ${CNB_BRANCH}:/root/.m2.
//   - data: a named engine volume of the pipeline's own, which the engine seeds from the
//     image's content at the path on first mount, removed when the pipeline ends.
//
// A relative path is relative to the checkout (x.mount in the containers) and names the same
// cache wherever the checkout is mounted. With the shell executor nothing is mounted: jobs run
// on the host itself, where absolute paths already are the host's own, persistent directories;
// the job log says so.

// CacheConfig is where the agent keeps the cache volumes of docker.volumes.
type CacheConfig struct {
	// Store keeps the caches; nil means this agent keeps none: pipelines run without their
	// caches, and the job log says so (data volumes still work).
	Store *volumes.Store
}

// volumeEngine is what data volumes need of the executor; *executor.Docker has it.
type volumeEngine interface {
	CreateVolume(ctx context.Context, name string, labels map[string]string) error
	RemoveVolume(ctx context.Context, name string) error
}

// pipelineVolume is one docker.volumes entry as this run resolved it.
type pipelineVolume struct {
	protocol.Volume        // variables expanded, type defaulted
	target          string // where the containers see it
}

// name is the entry as the job log shows it: [group:]path (type).
func (v pipelineVolume) name() string {
	n := v.Path
	if v.Group != "" {
		n = v.Group + ":" + n
	}
	return n + " (" + v.Type + ")"
}

// heldVolume is a volume mounted for the run: a cache's mount or a data volume's name.
type heldVolume struct {
	pipelineVolume
	cache *volumes.Mount
	data  string
}

// prepareVolumes mounts the pipeline's docker.volumes.
func (x *run) prepareVolumes(ctx context.Context) (release, error) {
	if len(x.lease.Plan.Volumes) == 0 {
		return nil, nil
	}
	if x.cfg.Executor.Name() == executor.ModeShell {
		x.setupLog().note("docker.volumes are ignored by the shell executor: jobs run on this host itself, " +
			"where absolute paths are the host's own directories (kept, and shared by every pipeline) and nothing is mounted")
		return nil, nil
	}
	vols, err := x.resolveVolumes()
	if err != nil {
		return nil, err
	}
	var held []heldVolume
	undo := func(success bool) {
		for i := len(held) - 1; i >= 0; i-- {
			x.releaseVolume(held[i], success)
		}
	}
	var mounts []executor.Mount
	for _, v := range vols {
		h, m, err := x.holdVolume(ctx, v)
		if err != nil {
			undo(false)
			return nil, err
		}
		if m == nil {
			continue
		}
		held = append(held, h)
		mounts = append(mounts, *m)
	}
	x.extras.addMounts(mounts...)
	return undo, nil
}

// resolveVolumes expands the plan's run-time variables in each entry and works out where the
// containers see it; two entries at one place are an error.
func (x *run) resolveVolumes() ([]pipelineVolume, error) {
	p := &x.lease.Plan
	var env map[string]string
	if len(p.RuntimeVars) > 0 {
		env = x.jobEnv(protocol.Stage{}, x.planJob(), nil, nil)
	}
	seen := map[string]string{}
	var out []pipelineVolume
	for _, v := range p.Volumes {
		if env != nil {
			v.Group = protocol.ExpandVars(v.Group, p.RuntimeVars, env)
			v.Path = protocol.ExpandVars(v.Path, p.RuntimeVars, env)
		}
		if v.Type == "" {
			v.Type = protocol.VolumeCopyOnWrite
		}
		key, target, err := volumeTarget(v.Path, x.mount)
		if err != nil {
			return nil, fmt.Errorf("docker.volumes %q: %w", v.Path, err)
		}
		if other, ok := seen[target]; ok {
			return nil, fmt.Errorf("docker.volumes %q and %q are both mounted at %s", other, v.Path, target)
		}
		seen[target] = v.Path
		v.Path = key
		out = append(out, pipelineVolume{Volume: v, target: target})
	}
	return out, nil
}

// volumeTarget resolves a volume path: key is how it names its cache (the cleaned path;
// relative ones stay relative, so they do not depend on where the checkout is mounted) and
// target where the containers see it; mount is where they see the checkout.
func volumeTarget(p, mount string) (key, target string, err error) {
	if p == "" {
		return "", "", errors.New("the path is empty")
	}
	m := path.Clean(mount)
	if path.IsAbs(p) {
		t := path.Clean(p)
		switch t {
		case "/":
			return "", "", errors.New("a volume cannot be mounted at /")
		case m:
			return "", "", fmt.Errorf("a volume at the workspace (%s) would hide it", m)
		}
		return t, t, nil
	}
	rel, err := userpath.Clean(p)
	if err != nil {
		return "", "", fmt.Errorf("a relative path must name a directory inside the workspace: %w", err)
	}
	if rel == "." {
		return "", "", errors.New("a relative path must name a directory inside the workspace, not the workspace itself")
	}
	return rel, path.Join(m, rel), nil
}

// holdVolume mounts one volume; a nil mount means it is skipped (no cache store).
func (x *run) holdVolume(ctx context.Context, v pipelineVolume) (heldVolume, *executor.Mount, error) {
	h := heldVolume{pipelineVolume: v}
	if v.Type == protocol.VolumeData {
		return x.holdData(ctx, h)
	}
	store := x.cfg.Caches.Store
	if store == nil {
		x.setupLog().note("cache %s: this agent keeps no caches; the pipeline runs without it", v.name())
		return h, nil, nil
	}
	repo := x.lease.Plan.Builtins["CNB_REPO_ID"]
	if repo == "" {
		return h, nil, fmt.Errorf("docker.volumes %s: the pipeline has no CNB_REPO_ID, so its cache could not be kept apart from other repositories'", v.name())
	}
	m, err := store.Acquire(ctx, volumes.Key{Repo: repo, Group: v.Group, Path: v.Path}, v.Type)
	if err != nil {
		return h, nil, fmt.Errorf("docker.volumes %s: %w", v.name(), err)
	}
	h.cache = m
	x.setupLog().note("%s", cacheNote(v, m))
	return h, &executor.Mount{Kind: executor.MountBind, Source: m.Dir, Target: v.target, ReadOnly: m.ReadOnly}, nil
}

// cacheNote is the job-log line of a mounted cache.
func cacheNote(v pipelineVolume, m *volumes.Mount) string {
	s := "cache " + v.name() + ": "
	if m.Fresh {
		s += "empty (first use)"
	} else {
		s += envflag.HumanSize(m.Bytes) + " restored"
	}
	if m.Method == volumes.MethodCopy {
		s += ", as a copy (" + m.Fallback + ")"
	}
	return s
}

// holdData creates the pipeline's data volume.
func (x *run) holdData(ctx context.Context, h heldVolume) (heldVolume, *executor.Mount, error) {
	eng, ok := x.cfg.Executor.(volumeEngine)
	if !ok {
		return h, nil, fmt.Errorf("docker.volumes %s: data volumes need the Docker executor", h.name())
	}
	h.data = dataVolumeName(x.lease.ID, h.target)
	if err := eng.CreateVolume(ctx, h.data, map[string]string{"nimbus.lease": x.lease.ID}); err != nil {
		return h, nil, fmt.Errorf("docker.volumes %s: %w", h.name(), err)
	}
	return h, &executor.Mount{Kind: executor.MountVolume, Source: h.data, Target: h.target}, nil
}

// dataVolumeName is the engine's name of a data volume: unique per lease and path (lease ids
// are plain names, see validLeaseID).
func dataVolumeName(leaseID, target string) string {
	h := fnv.New32a()
	h.Write([]byte(target))
	return "nimbus-data-" + leaseID + "-" + strconv.FormatUint(uint64(h.Sum32()), 16)
}

// releaseVolume ends one volume. The jobs have ended, so this goes to the agent's log.
func (x *run) releaseVolume(h heldVolume, success bool) {
	if h.data != "" {
		// The run's context may be over (a cancel); the volume must go anyway.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := x.cfg.Executor.(volumeEngine).RemoveVolume(ctx, h.data); err != nil {
			x.log.Warn("removing a data volume failed; the agent's next start removes it", "volume", h.data, "err", err)
		}
		return
	}
	res, err := h.cache.Release(success)
	if err != nil {
		x.log.Warn("a cache kept nothing of this pipeline", "cache", h.name(), "err", err)
		return
	}
	x.log.Info("cache released", "cache", h.name(), "outcome", res.Outcome, "bytes", res.Bytes)
}
