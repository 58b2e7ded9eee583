package imagebuild

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// WriteContext writes the build context as a tar stream: the Dockerfile and the By paths (a
// folder with everything below it), each at its path in the checkout, and nothing else, so a
// COPY of anything not listed in by fails, as in CNB. Every read goes through root, which
// refuses paths and links that lead out of the checkout; links are stored as links, never
// followed.
func WriteContext(w io.Writer, root *os.Root, s Spec) error {
	df, err := cleanPath("dockerfile", s.Dockerfile)
	if err != nil {
		return err
	}
	by, err := cleanPaths("by", s.By)
	if err != nil {
		return err
	}
	c := &contextWriter{tw: tar.NewWriter(w), root: root, written: map[string]bool{}}
	if err := c.dockerfile(df); err != nil {
		return err
	}
	for _, p := range by {
		if err := c.tree(p); err != nil {
			return fmt.Errorf("by %q: %w", p, err)
		}
	}
	return c.tw.Close()
}

type contextWriter struct {
	tw      *tar.Writer
	root    *os.Root
	written map[string]bool // names already in the archive
}

// dockerfile adds the Dockerfile as a regular file, whatever link leads to it: the engine must
// be able to read it.
func (c *contextWriter) dockerfile(name string) error {
	f, err := c.root.Open(filepath.FromSlash(name))
	if err != nil {
		return fmt.Errorf("dockerfile %q: %w", name, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("dockerfile %q: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("dockerfile %q is not a file", name)
	}
	if err := c.parents(name); err != nil {
		return err
	}
	return c.file(name, info, f)
}

// tree adds a path and, for a folder, everything below it. A link at the top is a link too:
// WalkDir would follow it.
func (c *contextWriter) tree(p string) error {
	if err := c.parents(p); err != nil {
		return err
	}
	info, err := c.root.Lstat(filepath.FromSlash(p))
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return c.entry(p, info)
	}
	return fs.WalkDir(c.root.FS(), p, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := c.root.Lstat(filepath.FromSlash(name))
		if err != nil {
			return err
		}
		return c.entry(name, info)
	})
}

// entry adds one folder (without its content), link or file.
func (c *contextWriter) entry(name string, info fs.FileInfo) error {
	if name == "." || c.written[name] {
		return nil
	}
	switch mode := info.Mode(); {
	case mode.IsDir():
		return c.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(mode.Perm()), ModTime: info.ModTime()})
	case mode&fs.ModeSymlink != 0:
		target, err := c.root.Readlink(filepath.FromSlash(name))
		if err != nil {
			return err
		}
		return c.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: info.ModTime()})
	case mode.IsRegular():
		f, err := c.root.Open(filepath.FromSlash(name))
		if err != nil {
			return err
		}
		defer f.Close()
		return c.file(name, info, f)
	}
	return nil // sockets, devices, pipes cannot be copied into an image
}

// parents adds the folders above a path, so the engine sees their real modes.
func (c *contextWriter) parents(p string) error {
	dir := path.Dir(p)
	if dir == "." || c.written[dir] {
		return nil
	}
	if err := c.parents(dir); err != nil {
		return err
	}
	info, err := c.root.Lstat(filepath.FromSlash(dir))
	if err != nil {
		return err
	}
	return c.header(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: int64(info.Mode().Perm()), ModTime: info.ModTime()})
}

func (c *contextWriter) file(name string, info fs.FileInfo, r io.Reader) error {
	if c.written[name] {
		return nil
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: info.Size(), Mode: int64(info.Mode().Perm()), ModTime: info.ModTime()}
	if err := c.header(h); err != nil {
		return err
	}
	if _, err := io.CopyN(c.tw, r, info.Size()); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// header writes one entry's header; files and folders belong to root in the image, as with
// `docker build`.
func (c *contextWriter) header(h *tar.Header) error {
	c.written[path.Clean(h.Name)] = true
	h.Format = tar.FormatPAX // long names and exact times
	return c.tw.WriteHeader(h)
}
