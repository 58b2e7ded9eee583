package volumes

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Kernel overlayfs, for copy-on-write caches: one mount per pipeline and cache, the cache's
// current version as the lower dir, an upper and a work dir of its own.

// overlayOptions are tried in order until the kernel takes one. Each turns redirect_dir off,
// so a renamed directory is copied up whole instead of being recorded as a redirect the merge
// would have to follow; metacopy and index are turned off where the kernel knows them (metacopy
// would leave a changed file's data in the lower dir). A kernel that refuses even
// redirect_dir=off is older than 4.10 and gets no overlay.
var overlayOptions = []string{"redirect_dir=off,metacopy=off,index=off", "redirect_dir=off,index=off", "redirect_dir=off"}

// mountOverlay mounts an overlay of lower under upper at merged.
func mountOverlay(lower, upper, work, merged, opts string) error {
	data := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + "," + opts
	if err := unix.Mount("overlay", merged, "overlay", 0, data); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", merged, err)
	}
	return nil
}

// errBusy means a mount could only be detached: something still had it open, so what is under
// it may still change.
var errBusy = errors.New("still in use; detached")

// unmount unmounts dir, waiting a little for the last users of a removed container to let go,
// and detaches it lazily when they do not. "Not mounted" is no error.
func unmount(dir string) error {
	for range 30 {
		err := unix.Unmount(dir, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil
		case !errors.Is(err, unix.EBUSY):
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	unix.Unmount(dir, unix.MNT_DETACH)
	return fmt.Errorf("unmount %s: %w", dir, errBusy)
}

// probeOverlay finds the options with which this host mounts an overlay whose upper dir is on
// the store's file system, trying them in dir (removed after). It fails without root, on a
// file system that cannot hold an upper dir (overlayfs itself, NFS), or on a kernel without
// overlayfs.
func probeOverlay(dir string) (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("the agent does not run as root")
	}
	if strings.ContainsAny(dir, ",:\\") {
		return "", errors.New("the cache directory's path has a comma, colon or backslash, which overlay options cannot hold")
	}
	defer os.RemoveAll(dir)
	lower, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	for _, d := range []string{lower, upper, work, merged} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "f"), []byte("x"), 0o600); err != nil {
		return "", err
	}
	var err error
	for _, opts := range overlayOptions {
		if err = mountOverlay(lower, upper, work, merged, opts); err == nil {
			return opts, checkWhiteout(merged, upper)
		}
		if !errors.Is(err, unix.EINVAL) {
			break
		}
	}
	return "", err
}

// checkWhiteout deletes a lower file through a fresh overlay and checks the deletion shows in
// upper the way the merge reads it; it unmounts the overlay.
func checkWhiteout(merged, upper string) error {
	rmErr := os.Remove(filepath.Join(merged, "f"))
	if err := unmount(merged); err != nil {
		return err
	}
	if rmErr != nil {
		return fmt.Errorf("delete through an overlay: %w", rmErr)
	}
	fi, err := os.Lstat(filepath.Join(upper, "f"))
	if err != nil {
		return fmt.Errorf("the overlay recorded no whiteout: %w", err)
	}
	x, err := overlayXattrs(filepath.Join(upper, "f"))
	if err != nil || !isWhiteout(fi, x) {
		return fmt.Errorf("the overlay's whiteout is of a kind the merge does not read (%v)", fi.Mode())
	}
	return nil
}

// unmountUnder unmounts every mount below dir, deepest first: the overlays of pipelines that a
// crash of the agent left mounted.
func unmountUnder(dir string) error {
	points, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points below dir from /proc/self/mountinfo, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if p := unescapeMount(fields[4]); strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// syncFS flushes the file system holding dir, so a version is on disk before the cache points
// to it: after a power cut a cache is its old version or its new one, never empty files.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil && !errors.Is(err, syscall.ENOSYS) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
