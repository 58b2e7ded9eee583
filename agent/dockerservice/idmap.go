package dockerservice

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// identity is the unprivileged host user a rootless engine runs as, and the id maps of the user
// namespace it gets: its root is the user itself, ids 1… come from the user's subordinate ranges,
// as rootlesskit (through newuidmap) maps them.
type identity struct {
	name     string
	uid, gid int
	uidMap   []syscall.SysProcIDMap
	gidMap   []syscall.SysProcIDMap
}

// lookupIdentity finds name and its ranges in /etc/subuid and /etc/subgid.
func lookupIdentity(name, subuid, subgid string) (*identity, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("the user %q does not exist: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return nil, fmt.Errorf("the user %q is root: rootless engines need an unprivileged user", name)
	}
	id := &identity{name: name, uid: uid, gid: gid}
	for _, f := range []struct {
		path string
		host int
		out  *[]syscall.SysProcIDMap
	}{{subuid, uid, &id.uidMap}, {subgid, gid, &id.gidMap}} {
		ranges, err := subRanges(f.path, name, f.host)
		if err != nil {
			return nil, err
		}
		if len(ranges) == 0 {
			return nil, fmt.Errorf("%s has no range for %q (add a line like %s:200000:65536)", f.path, name, name)
		}
		*f.out = idMap(f.host, ranges)
	}
	return id, nil
}

// subRange is one line of /etc/subuid or /etc/subgid.
type subRange struct{ start, count int }

// subRanges reads the ranges of a user (by name or by numeric id, as shadow-utils allows).
func subRanges(path, name string, id int) ([]subRange, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	return parseSubRanges(f, name, id)
}

func parseSubRanges(r io.Reader, name string, id int) ([]subRange, error) {
	var out []subRange
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 || (parts[0] != name && parts[0] != strconv.Itoa(id)) {
			continue
		}
		start, err1 := strconv.Atoi(parts[1])
		count, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil || start <= 0 || count <= 0 {
			return nil, fmt.Errorf("bad subordinate id line %q", line)
		}
		out = append(out, subRange{start, count})
	}
	return out, sc.Err()
}

// idMap is the map rootlesskit sets up: 0 is the user itself, then the ranges one after another.
func idMap(host int, ranges []subRange) []syscall.SysProcIDMap {
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: host, Size: 1}}
	next := 1
	for _, r := range ranges {
		m = append(m, syscall.SysProcIDMap{ContainerID: next, HostID: r.start, Size: r.count})
		next += r.count
	}
	return m
}

// formatIDMap writes a map as /proc/<pid>/uid_map does, for comparing with the engine's own.
func formatIDMap(m []syscall.SysProcIDMap) string {
	var b strings.Builder
	for _, e := range m {
		fmt.Fprintf(&b, "%d %d %d\n", e.ContainerID, e.HostID, e.Size)
	}
	return b.String()
}

// normalizeIDMap turns /proc/<pid>/uid_map text into formatIDMap's form.
func normalizeIDMap(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			b.WriteString(strings.Join(f, " ") + "\n")
		}
	}
	return b.String()
}

// idmappedMount mounts src at dst so that, through dst, a file stored as id k reads as the host
// id that k maps to in id's user namespace, and a file the engine's root creates is stored as
// root. The engine then sees the checkout exactly as the job containers do: what they wrote as
// root is its root's, and what it writes is theirs. The user namespace for the mapping is that
// of a short-lived child process, which is all the kernel needs: the mount keeps the mapping.
func idmappedMount(id *identity, src, dst string) error {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: id.uidMap,
		GidMappings: id.gidMap,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("idmapped mount: a user namespace: %w", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		return fmt.Errorf("idmapped mount: %w", err)
	}
	defer ns.Close()
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("idmapped mount: open_tree %s: %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			return fmt.Errorf("idmapped mount of %s: the kernel or its file system cannot (Linux 5.12+ with ext4, xfs or btrfs is needed): %w", src, err)
		}
		return fmt.Errorf("idmapped mount of %s: %w", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("idmapped mount: move to %s: %w", dst, err)
	}
	return nil
}
