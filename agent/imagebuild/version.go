package imagebuild

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
)

// versionFormat heads what the version hashes: changing the format below changes every
// version, on purpose, and this line says so.
const versionFormat = "nimbus image version 1"

// Version is an image's content hash, CNB's "sha1(dockerfile + versionBy + buildArgs + target +
// arch)": the SHA-1 of the lines that inputs returns, one per input, in a fixed order. A folder
// counts by its git tree id and a file by its git blob id, computed here from the files in the
// checkout (see treeID), so the version does not depend on file times, on the order the
// paths are listed in, or on how they are spelled. It is the image's tag: 40 hex digits.
func Version(root *os.Root, s Spec, arch string) (version string, inputs []string, err error) {
	inputs, err = versionInputs(root, s, arch)
	if err != nil {
		return "", nil, err
	}
	h := sha1.New()
	for _, l := range inputs {
		io.WriteString(h, l+"\n")
	}
	return hex.EncodeToString(h.Sum(nil)), inputs, nil
}

// versionInputs are the lines the version hashes:
//
//	nimbus image version 1
//	dockerfile <blob id>
//	file "<path>" <blob id>      each versionBy path, sorted; a folder is
//	dir "<path>" <tree id>       its git tree id, a symbolic link the blob
//	link "<path>" <blob id>      of its target
//	arg "<name>"="<value>"       each build arg, sorted, unless ignored
//	target "<target>"
//	arch "<arch>"
func versionInputs(root *os.Root, s Spec, arch string) ([]string, error) {
	df, err := cleanPath("dockerfile", s.Dockerfile)
	if err != nil {
		return nil, err
	}
	id, err := dockerfileID(root, df)
	if err != nil {
		return nil, err
	}
	lines := []string{versionFormat, "dockerfile " + id}
	paths, err := cleanPaths("versionBy", s.versionBy())
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		kind, id, err := pathID(root, p)
		if err != nil {
			return nil, fmt.Errorf("versionBy %q: %w", p, err)
		}
		lines = append(lines, kind+" "+strconv.Quote(p)+" "+id)
	}
	if !s.IgnoreBuildArgsInVersion {
		for _, k := range slices.Sorted(maps.Keys(s.BuildArgs)) {
			lines = append(lines, "arg "+strconv.Quote(k)+"="+strconv.Quote(s.BuildArgs[k]))
		}
	}
	return append(lines, "target "+strconv.Quote(s.Target), "arch "+strconv.Quote(arch)), nil
}

// dockerfileID is the blob id of the Dockerfile, which must be a regular file (a link to one
// inside the checkout is followed).
func dockerfileID(root *os.Root, name string) (string, error) {
	f, err := root.Open(filepath.FromSlash(name))
	if err != nil {
		return "", fmt.Errorf("dockerfile %q: %w", name, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("dockerfile %q: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("dockerfile %q is not a file", name)
	}
	id, err := blobID(f, info.Size())
	if err != nil {
		return "", fmt.Errorf("dockerfile %q: %w", name, err)
	}
	return hex.EncodeToString(id), nil
}

// pathID is what one versionBy path contributes: its kind and its git object id.
func pathID(root *os.Root, p string) (kind, id string, err error) {
	info, err := root.Lstat(filepath.FromSlash(p))
	if err != nil {
		return "", "", err
	}
	var raw []byte
	switch mode := info.Mode(); {
	case mode.IsDir():
		kind = "dir"
		raw, _, err = treeID(root, p)
	case mode&fs.ModeSymlink != 0:
		kind = "link"
		raw, err = linkID(root, p)
	case mode.IsRegular():
		kind = "file"
		raw, err = fileID(root, p)
	default:
		return "", "", errors.New("not a file, a folder or a symbolic link")
	}
	if err != nil {
		return "", "", err
	}
	return kind, hex.EncodeToString(raw), nil
}

// treeID is the git tree id of a folder as it is on disk: what `git rev-parse HEAD:<dir>`
// prints when the folder is as committed. Like git, it leaves out .git and folders with no
// files, records only the executable bit of a file's mode, and stores a link as the blob of its
// target. Unlike git it sees what is not committed too: files a job wrote before a docker:cache
// step count. empty reports a folder git would not store.
func treeID(root *os.Root, dir string) (id []byte, empty bool, err error) {
	entries, err := fs.ReadDir(root.FS(), dir)
	if err != nil {
		return nil, false, err
	}
	type entry struct {
		mode, name string
		id         []byte
		dir        bool
	}
	var list []entry
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		p := path.Join(dir, e.Name())
		var en entry
		switch t := e.Type(); {
		case t.IsDir():
			sub, empty, err := treeID(root, p)
			if err != nil {
				return nil, false, err
			}
			if empty {
				continue
			}
			en = entry{mode: "40000", id: sub, dir: true}
		case t&fs.ModeSymlink != 0:
			lid, err := linkID(root, p)
			if err != nil {
				return nil, false, err
			}
			en = entry{mode: "120000", id: lid}
		case t.IsRegular():
			info, err := e.Info()
			if err != nil {
				return nil, false, err
			}
			en = entry{mode: "100644"}
			if info.Mode().Perm()&0o100 != 0 {
				en.mode = "100755"
			}
			if en.id, err = fileID(root, p); err != nil {
				return nil, false, err
			}
		default:
			continue // sockets, devices, pipes: nothing git would hold
		}
		en.name = e.Name()
		list = append(list, en)
	}
	// Git orders a tree's entries by name, a folder's name read with a trailing slash.
	key := func(e entry) string {
		if e.dir {
			return e.name + "/"
		}
		return e.name
	}
	slices.SortFunc(list, func(a, b entry) int { return bytes.Compare([]byte(key(a)), []byte(key(b))) })
	var body bytes.Buffer
	for _, e := range list {
		body.WriteString(e.mode + " " + e.name + "\x00")
		body.Write(e.id)
	}
	return objectID("tree", body.Bytes()), len(list) == 0, nil
}

// fileID is the git blob id of a regular file.
func fileID(root *os.Root, p string) ([]byte, error) {
	f, err := root.Open(filepath.FromSlash(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return blobID(f, info.Size())
}

// linkID is the git blob id of a symbolic link: the blob of its target.
func linkID(root *os.Root, p string) ([]byte, error) {
	target, err := root.Readlink(filepath.FromSlash(p))
	if err != nil {
		return nil, err
	}
	return objectID("blob", []byte(target)), nil
}

// blobID hashes size bytes of r as a git blob, without holding them in memory.
func blobID(r io.Reader, size int64) ([]byte, error) {
	h := objectHash("blob", size)
	n, err := io.Copy(h, r)
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, fmt.Errorf("the file changed while it was read (%d bytes, then %d)", size, n)
	}
	return h.Sum(nil), nil
}

// objectID is git's id of an object: the SHA-1 of "<kind> <size>\0" and the content.
func objectID(kind string, content []byte) []byte {
	h := objectHash(kind, int64(len(content)))
	h.Write(content)
	return h.Sum(nil)
}

func objectHash(kind string, size int64) hash.Hash {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", kind, size)
	return h
}
