package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Reading a repository for people (the code browser, a commit's diff, a request's files). Every
// revision is resolved to a commit first (ResolveRef) and every path checked (checkPath), so
// what reaches git's arguments is a SHA or a checked path after "--".

// TreeEntry is one entry of a directory.
type TreeEntry struct {
	Name string
	Path string // from the repository root
	// Type is blob (a file or a symbolic link), tree (a directory) or commit (a submodule).
	Type string
	Mode string // git's mode: 100644, 100755, 120000 (link), 040000, 160000
	SHA  string
	Size int64 // blobs only
}

// Tree lists the directory dir ("" for the root) of commit, a commit SHA: directories first,
// then files, each group by name as git orders them. A path that is not in the commit is
// ErrNotExist; a path that is a file is ErrNotFile.
func Tree(ctx context.Context, repoPath, commit, dir string) ([]TreeEntry, error) {
	if !isSHA(commit) {
		return nil, fmt.Errorf("%w: tree of %q", ErrInvalid, commit)
	}
	treeish := commit + "^{tree}"
	if dir != "" {
		if err := checkPath(dir); err != nil {
			return nil, err
		}
		objs, err := lookup(ctx, repoPath, commit+":"+dir)
		if err != nil {
			return nil, err
		}
		switch objs[0].typ {
		case "":
			return nil, fmt.Errorf("%w: %s at %s", ErrNotExist, dir, commit)
		case "tree":
		default:
			return nil, fmt.Errorf("%w: %s at %s is a %s", ErrNotFile, dir, commit, objs[0].typ)
		}
		treeish = objs[0].sha
	}
	out, err := run(ctx, repoPath, nil, "ls-tree", "-z", "-l", "--end-of-options", treeish)
	if err != nil {
		return nil, fmt.Errorf("git: tree %s:%s in %s: %w", commit, dir, repoPath, err)
	}
	var dirs, files []TreeEntry
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if rec == "" {
			continue
		}
		// "<mode> <type> <sha> <size>\t<name>"
		meta, name, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("git: tree %s:%s: unexpected entry %q", commit, dir, rec)
		}
		e := TreeEntry{Name: name, Path: name, Type: f[1], Mode: f[0], SHA: f[2]}
		if dir != "" {
			e.Path = dir + "/" + name
		}
		if f[1] == "blob" {
			e.Size, _ = strconv.ParseInt(f[3], 10, 64)
			files = append(files, e)
		} else {
			dirs = append(dirs, e)
		}
	}
	return append(dirs, files...), nil
}

// Blob is a file read for showing: at most max bytes of it.
type Blob struct {
	SHA  string
	Size int64
	Mode string
	Data []byte // the first min(Size, max) bytes
}

// ReadBlob reads file at commit (a SHA) for showing, at most max bytes of it: a file bigger
// than that is not read past max (the caller says it is too large to show). A path not in the
// commit is ErrNotExist; a directory or submodule ErrNotFile.
func ReadBlob(ctx context.Context, repoPath, commit, file string, max int64) (Blob, error) {
	if err := checkPath(file); err != nil {
		return Blob{}, err
	}
	if !isSHA(commit) {
		return Blob{}, fmt.Errorf("%w: read %q", ErrInvalid, commit)
	}
	// One ls-tree answers it all: "<mode> <type> <sha> <size>\t<path>", nothing when absent.
	out, err := run(ctx, repoPath, nil, "--literal-pathspecs", "ls-tree", "-z", "-l", "--end-of-options", commit, "--", file)
	if err != nil {
		return Blob{}, fmt.Errorf("git: read %s at %s: %w", file, commit, err)
	}
	meta, _, _ := strings.Cut(strings.TrimSuffix(string(out), "\x00"), "\t")
	f := strings.Fields(meta)
	switch {
	case len(f) != 4:
		return Blob{}, fmt.Errorf("%w: %s at %s", ErrNotExist, file, commit)
	case f[1] != "blob":
		return Blob{}, fmt.Errorf("%w: %s at %s is a %s", ErrNotFile, file, commit, f[1])
	}
	b := Blob{SHA: f[2], Mode: f[0]}
	b.Size, _ = strconv.ParseInt(f[3], 10, 64)
	var buf bytes.Buffer
	if err := StreamBlob(ctx, repoPath, b.SHA, &limitWriter{w: &buf, n: max}); err != nil && !errors.Is(err, errLimit) {
		return Blob{}, err
	}
	b.Data = buf.Bytes()
	return b, nil
}

// StreamBlob copies the blob sha to w, whatever its size (raw downloads).
func StreamBlob(ctx context.Context, repoPath, sha string, w io.Writer) error {
	if !isSHA(sha) {
		return fmt.Errorf("%w: blob %q", ErrInvalid, sha)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := command(ctx, repoPath, "cat-file", "blob", sha)
	stderr := &capWriter{max: maxStderr}
	cmd.Stdout, cmd.Stderr = w, stderr
	err := cmd.Run()
	if l, ok := w.(*limitWriter); ok && l.full {
		return errLimit // git was stopped on purpose: the reader had what it wanted
	}
	if err != nil {
		return fmt.Errorf("git: blob %s: %w", sha, commandError([]string{"cat-file"}, err, stderr))
	}
	return nil
}

var errLimit = errors.New("git: read limit reached")

// limitWriter keeps the first n bytes and then refuses, which stops the git behind it.
type limitWriter struct {
	w    io.Writer
	n    int64
	full bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		p = p[:l.n]
		l.full = true
	}
	n, err := l.w.Write(p)
	l.n -= int64(n)
	if err == nil && l.full {
		err = errLimit
	}
	return n, err
}

// IsBinary is git's own test: a NUL byte in the first 8000 bytes.
func IsBinary(data []byte) bool {
	if len(data) > 8000 {
		data = data[:8000]
	}
	return bytes.IndexByte(data, 0) >= 0
}

// LFSPointer is what a Git LFS pointer file points at.
type LFSPointer struct {
	OID  string // sha256:<hex>
	Size int64
}

// ParseLFSPointer reads a Git LFS pointer file (spec v1); ok is false for any other content.
func ParseLFSPointer(data []byte) (LFSPointer, bool) {
	if len(data) > 1024 || !bytes.HasPrefix(data, []byte("version https://git-lfs.github.com/spec/v1\n")) {
		return LFSPointer{}, false
	}
	var p LFSPointer
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "oid":
			p.OID = v
		case "size":
			p.Size, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return p, p.OID != ""
}

// Log lists the commits reachable from commit (a SHA), newest first, skipping skip and keeping
// at most limit; with path, only those that change it.
func Log(ctx context.Context, repoPath, commit, path string, skip, limit int) ([]CommitInfo, error) {
	if !isSHA(commit) {
		return nil, fmt.Errorf("%w: log of %q", ErrInvalid, commit)
	}
	args := []string{"rev-list", "--skip=" + strconv.Itoa(skip), "--max-count=" + strconv.Itoa(limit), commit, "--"}
	if path != "" {
		if err := checkPath(path); err != nil {
			return nil, err
		}
		args = append(args, path)
	}
	out, err := run(ctx, repoPath, nil, args...)
	if err != nil {
		return nil, fmt.Errorf("git: log of %s in %s: %w", commit, repoPath, err)
	}
	return Commits(ctx, repoPath, strings.Fields(string(out)))
}

// RangeLog lists the commits of head that base lacks (git log base..head), newest first, at
// most limit: a pull request's commits.
func RangeLog(ctx context.Context, repoPath, base, head string, limit int) ([]CommitInfo, error) {
	if !isSHA(base) || !isSHA(head) {
		return nil, fmt.Errorf("%w: log %q..%q", ErrInvalid, base, head)
	}
	out, err := run(ctx, repoPath, nil, "rev-list", "--max-count="+strconv.Itoa(limit), head, "^"+base, "--")
	if err != nil {
		return nil, fmt.Errorf("git: log %s..%s in %s: %w", base, head, repoPath, err)
	}
	return Commits(ctx, repoPath, strings.Fields(string(out)))
}

// Parents are the parents of commit (a SHA), first parent first.
func Parents(ctx context.Context, repoPath, commit string) ([]string, error) {
	if !isSHA(commit) {
		return nil, fmt.Errorf("%w: parents of %q", ErrInvalid, commit)
	}
	out, err := run(ctx, repoPath, nil, "rev-list", "--parents", "-n", "1", commit, "--")
	if err != nil {
		return nil, fmt.Errorf("git: parents of %s: %w", commit, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownRevision, commit)
	}
	return f[1:], nil
}

// FileDiff is one file of a diff.
type FileDiff struct {
	Path    string
	OldPath string // the path before a rename or copy; "" otherwise
	// Status is added, modified, deleted, renamed, copied or type_changed.
	Status               string
	Additions, Deletions int
	Binary               bool
	// Patch is the file's unified diff from its first "@@" hunk; "" for a binary file, one
	// without content changes (a pure rename), or one past the diff's size budget (Truncated).
	Patch     string
	Truncated bool
}

// Diff compares two commits (SHAs; from "" for a root commit, which then shows every file
// added), with renames found, as `git diff from to` would. Patches are kept up to maxBytes in
// all; the files past that keep their stats and say Truncated.
func Diff(ctx context.Context, repoPath, from, to string, maxBytes int) ([]FileDiff, error) {
	if !isSHA(to) || from != "" && !isSHA(from) {
		return nil, fmt.Errorf("%w: diff %q..%q", ErrInvalid, from, to)
	}
	base := []string{"diff-tree", "-r", "-M", "--no-color", "--no-ext-diff", "--full-index"}
	revs := []string{from, to}
	if from == "" {
		base = append(base, "--root")
		revs = []string{to}
	}
	stat, err := run(ctx, repoPath, nil, append(append(append([]string{}, base...), "-z", "--numstat", "--raw"), append(revs, "--")...)...)
	if err != nil {
		return nil, fmt.Errorf("git: diff %s..%s: %w", from, to, err)
	}
	files, err := parseRawNumstat(stat, from == "")
	if err != nil {
		return nil, fmt.Errorf("git: diff %s..%s: %w", from, to, err)
	}
	// The patch is read only as far as the budget goes (plus room for the files' headers): git
	// is stopped there, so a 100 MB file's diff costs neither its size in memory nor the time
	// to read it. Sections past the cut, and the one it falls in, are Truncated.
	var buf bytes.Buffer
	out := &limitWriter{w: &buf, n: int64(maxBytes) + patchHeaderRoom}
	err = runTo(ctx, repoPath, out, append(append(append([]string{}, base...), "-p"), append(revs, "--")...)...)
	if err != nil && !out.full {
		return nil, fmt.Errorf("git: diff %s..%s: %w", from, to, err)
	}
	// The patch lists the files in the same order as --raw: one "diff --git" section each.
	sections := splitPatch(buf.Bytes(), from == "")
	if out.full && len(sections) > 0 {
		sections = sections[:len(sections)-1] // cut short
	}
	budget, perFile := maxBytes, maxBytes/maxFileShare
	for i := range files {
		body := ""
		if i < len(sections) {
			body = sections[i]
		}
		if files[i].Binary || (body == "" && i < len(sections)) {
			continue
		}
		if i >= len(sections) || len(body) > budget || len(body) > perFile {
			files[i].Truncated = true
			if len(body) > budget {
				budget = 0
			}
			continue
		}
		budget -= len(body)
		files[i].Patch = body
	}
	return files, nil
}

// patchHeaderRoom is what Diff reads past its budget for the "diff --git", index and ---/+++
// lines, which do not count against it.
const patchHeaderRoom = 64 << 10

// maxFileShare: one file's patch may take at most 1/maxFileShare of a diff's budget; a larger
// one (a generated file, a data file in one line) is Truncated and leaves the budget to the
// others, as GitHub folds a large file's diff.
const maxFileShare = 8

// splitPatch cuts diff-tree -p output into each file's hunks (from its first "@@"), "" for a
// file without hunks. With root, the first line is the commit's SHA, which is skipped.
func splitPatch(out []byte, root bool) []string {
	text := string(out)
	if root {
		if _, rest, ok := strings.Cut(text, "\n"); ok && !strings.HasPrefix(text, "diff --git ") {
			text = rest
		}
	}
	var sections []string
	for _, sec := range strings.Split(text, "\ndiff --git ") {
		sec = strings.TrimPrefix(sec, "diff --git ")
		if sec == "" {
			continue
		}
		hunks := ""
		if i := strings.Index(sec, "\n@@ "); i >= 0 {
			hunks = sec[i+1:]
			if !strings.HasSuffix(hunks, "\n") {
				hunks += "\n"
			}
		}
		sections = append(sections, hunks)
	}
	return sections
}

// parseRawNumstat reads `diff-tree -z --raw --numstat`: first every file's raw record
// (":<modes> <shas> <status>\0<path>\0[<new path>\0]"), then every file's numstat
// ("<added>\t<deleted>\t<path>\0", or "<added>\t<deleted>\t\0<old>\0<new>\0" for a rename).
func parseRawNumstat(out []byte, root bool) ([]FileDiff, error) {
	f := strings.Split(string(out), "\x00")
	i := 0
	if root && i < len(f) && isSHA(strings.TrimSpace(f[i])) {
		i++
	}
	var files []FileDiff
	for i < len(f) && strings.HasPrefix(f[i], ":") {
		meta := strings.Fields(f[i])
		if len(meta) != 5 || i+1 >= len(f) {
			return nil, fmt.Errorf("unexpected raw record %q", f[i])
		}
		d := FileDiff{Path: f[i+1]}
		i += 2
		switch meta[4][0] {
		case 'A':
			d.Status = "added"
		case 'D':
			d.Status = "deleted"
		case 'M':
			d.Status = "modified"
		case 'T':
			d.Status = "type_changed"
		case 'R', 'C':
			d.Status = map[byte]string{'R': "renamed", 'C': "copied"}[meta[4][0]]
			if i >= len(f) {
				return nil, fmt.Errorf("unexpected end after %q", meta)
			}
			d.OldPath, d.Path = d.Path, f[i]
			i++
		default:
			d.Status = "modified"
		}
		files = append(files, d)
	}
	for n := 0; n < len(files) && i < len(f); n++ {
		// numstat: "<added>\t<deleted>\t<path>" or, for a rename, "<added>\t<deleted>\t" then
		// the two paths as their own fields.
		cols := strings.SplitN(strings.TrimPrefix(f[i], "\n"), "\t", 3)
		if len(cols) != 3 {
			return nil, fmt.Errorf("unexpected numstat record %q", f[i])
		}
		i++
		if cols[2] == "" {
			i += 2
		}
		if cols[0] == "-" {
			files[n].Binary = true
			continue
		}
		files[n].Additions, _ = strconv.Atoi(cols[0])
		files[n].Deletions, _ = strconv.Atoi(cols[1])
	}
	return files, nil
}

// RefTip is a branch or tag and the commit it points at (an annotated tag peeled).
type RefTip struct {
	Name string // without refs/heads/ or refs/tags/
	SHA  string
}

// RefTips lists the refs under prefix ("refs/heads/" or "refs/tags/"), by name, each with its
// commit. Tags of something other than a commit are left out.
func RefTips(ctx context.Context, repoPath, prefix string) ([]RefTip, error) {
	if prefix != "refs/heads/" && prefix != "refs/tags/" {
		return nil, fmt.Errorf("%w: refs under %q", ErrInvalid, prefix)
	}
	out, err := run(ctx, repoPath, nil, "for-each-ref", "--sort=refname", "--format=%(refname)%00%(objecttype)%00%(objectname)%00%(*objecttype)%00%(*objectname)", prefix)
	if err != nil {
		return nil, fmt.Errorf("git: refs of %s: %w", repoPath, err)
	}
	var tips []RefTip
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\x00")
		if len(f) != 5 {
			continue
		}
		tip := RefTip{Name: strings.TrimPrefix(f[0], prefix)}
		switch {
		case f[1] == "commit":
			tip.SHA = f[2]
		case f[1] == "tag" && f[3] == "commit":
			tip.SHA = f[4]
		default:
			continue
		}
		tips = append(tips, tip)
	}
	return tips, nil
}

// Commits describes each of shas (commit SHAs) through one git process.
func Commits(ctx context.Context, repoPath string, shas []string) ([]CommitInfo, error) {
	if len(shas) == 0 {
		return nil, nil
	}
	return withReader(ctx, repoPath, func(r *Reader) ([]CommitInfo, error) {
		infos := make([]CommitInfo, 0, len(shas))
		for _, sha := range shas {
			info, err := r.Commit(sha)
			if err != nil {
				return nil, err
			}
			infos = append(infos, info)
		}
		return infos, nil
	})
}
