package volumes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The file-tree work of the store: versions are made by hard-link clones (cloneTree) with an
// overlay's upper dir applied on top (applyUpper), or by full copies where there is no overlay
// (copyTree); diskUsage measures them. Directories are recreated with their mode, owner and
// times; their extended attributes are not kept (package managers do not use them).

// errOverlayFeature means an upper dir uses an overlay feature the merge cannot apply (a
// metacopy file, whose data stays in the lower dir, or a redirected directory). The store mounts
// with both turned off, so seeing one means the kernel ignored that; the changes are discarded.
var errOverlayFeature = errors.New("the overlay upper dir uses metacopy or redirect_dir")

// cloneTree makes dst (which must not exist) a tree like src in which every non-directory is a
// hard link to src's inode. Later changes go through an overlay, which never writes a lower file
// in place, so src and dst stay independent as long as nothing writes their files directly.
func cloneTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("clone %s: %w", src, err)
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return fmt.Errorf("clone %s: %w", src, err)
	}
	return cloneDir(src, dst, fi)
}

func cloneDir(src, dst string, fi fs.FileInfo) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("clone %s: %w", src, err)
	}
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if !e.IsDir() {
			if err := linkOrCopy(s, d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		efi, err := os.Lstat(s)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a read-write pipeline removed it meanwhile
		}
		if err != nil {
			return fmt.Errorf("clone %s: %w", s, err)
		}
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("clone %s: %w", s, err)
		}
		if err := cloneDir(s, d, efi); err != nil {
			return err
		}
	}
	return copyMeta(dst, fi)
}

// linkOrCopy hard-links src at dst, or copies it when the inode has as many links as the file
// system allows.
func linkOrCopy(src, dst string) error {
	err := os.Link(src, dst)
	if errors.Is(err, syscall.EMLINK) {
		fi, serr := os.Lstat(src)
		if serr != nil {
			return fmt.Errorf("clone %s: %w", src, serr)
		}
		return copyEntry(src, dst, fi, nil)
	}
	if err != nil {
		return fmt.Errorf("clone %s: %w", src, err)
	}
	return nil
}

// copyTree makes dst (which must not exist) a full copy of src: data, modes, owners, times,
// symbolic links, device nodes and FIFOs, and hard links between files of src. It is the
// copy-on-write of hosts without overlayfs. It stops when ctx ends.
func copyTree(ctx context.Context, src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return copyDir(ctx, src, dst, fi, map[inode]string{})
}

type inode struct{ dev, ino uint64 }

func copyDir(ctx context.Context, src, dst string, fi fs.FileInfo, links map[inode]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		efi, err := os.Lstat(s)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", s, err)
		}
		if efi.IsDir() {
			if err := os.Mkdir(d, 0o700); err != nil {
				return fmt.Errorf("copy %s: %w", s, err)
			}
			if err := copyDir(ctx, s, d, efi, links); err != nil {
				return err
			}
			continue
		}
		if err := copyEntry(s, d, efi, links); err != nil {
			return err
		}
	}
	return copyMeta(dst, fi)
}

// copyEntry copies one non-directory. links (may be nil) remembers the copies of inodes with
// several names, so the copy keeps them one inode.
func copyEntry(src, dst string, fi fs.FileInfo, links map[inode]string) error {
	st := fi.Sys().(*syscall.Stat_t)
	id := inode{uint64(st.Dev), st.Ino}
	if links != nil && st.Nlink > 1 {
		if first, ok := links[id]; ok {
			if err := os.Link(first, dst); err != nil {
				return fmt.Errorf("copy %s: %w", src, err)
			}
			return nil
		}
	}
	var err error
	switch t := fi.Mode().Type(); {
	case t == 0:
		err = copyFile(src, dst)
	case t&fs.ModeSymlink != 0:
		var target string
		if target, err = os.Readlink(src); err == nil {
			err = os.Symlink(target, dst)
		}
	case t&(fs.ModeDevice|fs.ModeNamedPipe) != 0:
		err = unix.Mknod(dst, st.Mode, int(st.Rdev))
	default:
		return nil // a socket: meaningless once its process is gone
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if links != nil && st.Nlink > 1 {
		links[id] = dst
	}
	return copyMeta(dst, fi)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// io.Copy between two files uses copy_file_range, which shares extents where the file
	// system can (XFS, Btrfs).
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyMeta gives path the owner, mode and times of fi. Owners are kept only when the agent may
// set them (root); the mode is set after the owner because chown clears set-id bits.
func copyMeta(path string, fi fs.FileInfo) error {
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Lchown(path, int(st.Uid), int(st.Gid)); err != nil && os.Geteuid() == 0 {
		return fmt.Errorf("chown %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		mode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		if err := os.Chmod(path, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", path, err)
		}
	}
	times := []unix.Timespec{{Sec: st.Atim.Sec, Nsec: st.Atim.Nsec}, {Sec: st.Mtim.Sec, Nsec: st.Mtim.Nsec}}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", path, err)
	}
	return nil
}

// applyUpper applies an unmounted overlay's upper dir to dst, a clone of its lower dir, so dst
// becomes what the merged dir showed: a whiteout deletes, an opaque directory replaces the
// lower one, any other entry is renamed in (it moves out of upper, which is discarded after).
// Renaming keeps each changed file's inode, hence its hard links inside upper.
func applyUpper(upper, dst string) error {
	fi, err := os.Lstat(upper)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if err := applyDir(upper, dst); err != nil {
		return err
	}
	return copyMeta(dst, fi)
}

func applyDir(up, dst string) error {
	entries, err := os.ReadDir(up)
	if err != nil {
		return fmt.Errorf("merge %s: %w", up, err)
	}
	for _, e := range entries {
		if err := applyEntry(filepath.Join(up, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func applyEntry(u, d string) error {
	fi, err := os.Lstat(u)
	if err != nil {
		return fmt.Errorf("merge %s: %w", u, err)
	}
	xattrs, err := overlayXattrs(u)
	if err != nil {
		return err
	}
	if xattrs["trusted.overlay.metacopy"] || xattrs["trusted.overlay.redirect"] {
		return fmt.Errorf("merge %s: %w", u, errOverlayFeature)
	}
	switch {
	case isWhiteout(fi, xattrs):
		return removeAll(d)
	case fi.IsDir():
		dfi, err := os.Lstat(d)
		opaque := xattrs["trusted.overlay.opaque"] && opaqueValue(u) == "y"
		if err == nil && (!dfi.IsDir() || opaque) {
			if err := removeAll(d); err != nil {
				return err
			}
			err = fs.ErrNotExist
		}
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(d, 0o700); err != nil {
				return fmt.Errorf("merge %s: %w", u, err)
			}
		} else if err != nil {
			return fmt.Errorf("merge %s: %w", u, err)
		}
		if err := applyDir(u, d); err != nil {
			return err
		}
		return copyMeta(d, fi)
	default:
		if err := removeAll(d); err != nil {
			return err
		}
		if err := os.Rename(u, d); err != nil {
			return fmt.Errorf("merge %s: %w", u, err)
		}
		// The overlay's own bookkeeping (trusted.overlay.origin) means nothing outside it.
		for name := range xattrs {
			unix.Lremovexattr(d, name)
		}
		return nil
	}
}

func removeAll(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("merge: remove %s: %w", path, err)
	}
	return nil
}

// isWhiteout recognises the overlay's record of a deletion: a character device 0/0, or (kernels
// from 6.7 may use it) an empty file marked trusted.overlay.whiteout.
func isWhiteout(fi fs.FileInfo, xattrs map[string]bool) bool {
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&fs.ModeCharDevice != 0 && st.Rdev == 0 {
		return true
	}
	return fi.Mode().IsRegular() && fi.Size() == 0 && xattrs["trusted.overlay.whiteout"]
}

// overlayXattrs lists the trusted.overlay.* attributes of path.
func overlayXattrs(path string) (map[string]bool, error) {
	buf := make([]byte, 1024)
	for {
		n, err := unix.Llistxattr(path, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("merge: list attributes of %s: %w", path, err)
		}
		var out map[string]bool
		for _, name := range strings.Split(string(buf[:n]), "\x00") {
			if strings.HasPrefix(name, "trusted.overlay.") {
				if out == nil {
					out = map[string]bool{}
				}
				out[name] = true
			}
		}
		return out, nil
	}
}

func opaqueValue(path string) string {
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(path, "trusted.overlay.opaque", buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// diskUsage is the space a tree's content takes: the blocks of everything below dir, each inode
// counted once (an empty tree takes 0).
func diskUsage(dir string) (int64, error) {
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Nlink > 1 && !fi.IsDir() {
			id := inode{uint64(st.Dev), st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	return total, nil
}

// isEmptyDir says whether dir has no entries.
func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}
