package dockerservice

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroup bounds an engine and everything it starts: the engine process joins it before it runs
// (see Start), and every process forks inside it, containers included (a rootless engine on
// cgroup v1 cannot make cgroups of its own, so its containers stay in this one). Both
// hierarchies are handled: v2 (one tree, cpu.max and memory.max) and v1 (a directory per
// controller, cfs quota and memory limit).
type cgroup struct {
	dirs []string // one per controller on v1, one on v2
	v2   bool
}

// cgroupRoot is where cgroups are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// newCgroup creates the cgroup of one engine with the pipeline's limits (cpus 0 and memory 0
// mean none) and lets uid move itself into it.
func newCgroup(name string, cpus float64, memory int64, uid int) (*cgroup, error) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return newCgroupV2(name, cpus, memory, uid)
	}
	return newCgroupV1(name, cpus, memory, uid)
}

func newCgroupV2(name string, cpus float64, memory int64, uid int) (*cgroup, error) {
	parent := filepath.Join(cgroupRoot, "nimbus-services")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	// Controllers must be enabled on the way down; the root has no processes rule to break.
	for _, dir := range []string{cgroupRoot, parent} {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0); err != nil {
			return nil, fmt.Errorf("cgroup: enable controllers in %s: %w", dir, err)
		}
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	cg := &cgroup{dirs: []string{dir}, v2: true}
	if cpus > 0 {
		if err := write(dir, "cpu.max", fmt.Sprintf("%d 100000", int64(cpus*100000))); err != nil {
			cg.remove()
			return nil, err
		}
	}
	if memory > 0 {
		if err := write(dir, "memory.max", strconv.FormatInt(memory, 10)); err != nil {
			cg.remove()
			return nil, err
		}
	}
	return cg, nil
}

func newCgroupV1(name string, cpus float64, memory int64, uid int) (*cgroup, error) {
	cg := &cgroup{}
	for _, ctl := range []string{"cpu", "memory", "pids"} {
		base := filepath.Join(cgroupRoot, ctl)
		if _, err := os.Stat(base); err != nil {
			continue // a controller this host does not mount
		}
		dir := filepath.Join(base, "nimbus-services", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		cg.dirs = append(cg.dirs, dir)
		var err error
		switch {
		case ctl == "cpu" && cpus > 0:
			if err = write(dir, "cpu.cfs_period_us", "100000"); err == nil {
				err = write(dir, "cpu.cfs_quota_us", strconv.FormatInt(int64(cpus*100000), 10))
			}
		case ctl == "memory" && memory > 0:
			err = write(dir, "memory.limit_in_bytes", strconv.FormatInt(memory, 10))
		}
		if err == nil {
			// On v1 a process may move itself into a cgroup whose cgroup.procs it can write.
			err = os.Chown(filepath.Join(dir, "cgroup.procs"), uid, -1)
		}
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
	}
	if len(cg.dirs) == 0 {
		return nil, errors.New("cgroup: no cpu, memory or pids controller is mounted under " + cgroupRoot)
	}
	return cg, nil
}

// procsFiles are the files a process writes its pid to, to join the cgroup (v1).
func (cg *cgroup) procsFiles() []string {
	out := make([]string, len(cg.dirs))
	for i, d := range cg.dirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// fd opens the cgroup for clone3's CLONE_INTO_CGROUP (v2): the process starts in it.
func (cg *cgroup) fd() (int, error) {
	return syscall.Open(cg.dirs[0], syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
}

// kill sends SIGKILL to every process in the cgroup and waits, up to a few seconds, until it
// is empty. It reports whether it emptied.
func (cg *cgroup) kill() bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := cg.pids()
		if len(pids) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pids are the processes in the cgroup.
func (cg *cgroup) pids() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range cg.dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// remove deletes the cgroup; it must be empty.
func (cg *cgroup) remove() error {
	var errs []error
	for _, d := range cg.dirs {
		var err error
		for range 50 {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond) // the kernel frees a cgroup shortly after its last process
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// existingCgroup finds the cgroup a crashed agent left for name.
func existingCgroup(name string) *cgroup {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		dir := filepath.Join(cgroupRoot, "nimbus-services", name)
		if _, err := os.Stat(dir); err == nil {
			return &cgroup{dirs: []string{dir}, v2: true}
		}
		return nil
	}
	cg := &cgroup{}
	for _, ctl := range []string{"cpu", "memory", "pids"} {
		dir := filepath.Join(cgroupRoot, ctl, "nimbus-services", name)
		if _, err := os.Stat(dir); err == nil {
			cg.dirs = append(cg.dirs, dir)
		}
	}
	if len(cg.dirs) == 0 {
		return nil
	}
	return cg
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup: set %s: %w", file, err)
	}
	return nil
}
