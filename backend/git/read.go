package git

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxFileSize is the largest file ReadFile returns. The trigger reads .cnb.yml on every push;
// a bigger file is a mistake or an attack, and either way should not be held in memory.
const MaxFileSize = 1 << 20

// CommitInfo describes one commit, as a build records it.
type CommitInfo struct {
	SHA            string
	Message        string // the whole message, without its trailing newline
	Title          string // the first line of Message
	AuthorName     string
	AuthorEmail    string
	CommitterName  string
	CommitterEmail string
	Time           time.Time // author date, as `git log` shows it, in the author's zone
	CommitterTime  time.Time
}

// checkPath refuses a repository path that is not a plain relative path: empty, absolute,
// with "." / ".." / empty segments, or holding NUL or a newline (which would break the
// line-based lookup). Such a path cannot name a file of a tree, and some could make git
// resolve it against something other than the commit's root.
func checkPath(file string) error {
	if file == "" || strings.HasPrefix(file, "/") || strings.ContainsAny(file, "\x00\n") {
		return fmt.Errorf("%w: path %q", ErrInvalid, file)
	}
	for _, seg := range strings.Split(file, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: path %q", ErrInvalid, file)
		}
	}
	return nil
}

// ReadFile returns the content of file (a path from the repository root, like ".cnb.yml" or
// "ci/build.yml") at commit (a SHA or any revision). A file absent from that commit is
// ErrNotExist; an unknown commit is ErrUnknownRevision; a directory is an error of its own; a
// file over MaxFileSize is ErrTooLarge and is never read. A symbolic link is returned as its
// target text, not followed.
func ReadFile(ctx context.Context, repoPath, commit, file string) ([]byte, error) {
	if err := checkRev(commit); err != nil {
		return nil, err
	}
	if err := checkPath(file); err != nil {
		return nil, err
	}
	// One lookup answers both "is there such a commit" and "what is at that path".
	objs, err := lookup(ctx, repoPath, commit+"^{commit}", commit+"^{commit}:"+file)
	if err != nil {
		return nil, err
	}
	switch blob := objs[1]; {
	case objs[0].typ == "":
		return nil, fmt.Errorf("%w: %q in %s", ErrUnknownRevision, commit, repoPath)
	case blob.typ == "":
		return nil, fmt.Errorf("%w: %s at %s", ErrNotExist, file, objs[0].sha)
	case blob.typ != "blob":
		return nil, fmt.Errorf("git: %s at %s is a %s, not a file", file, objs[0].sha, blob.typ)
	case blob.size > MaxFileSize:
		return nil, fmt.Errorf("%w: %s at %s is %d bytes, the limit is %d", ErrTooLarge, file, objs[0].sha, blob.size, MaxFileSize)
	}
	data, err := run(ctx, repoPath, nil, "cat-file", "blob", objs[1].sha)
	if err != nil {
		return nil, fmt.Errorf("git: read %s at %s: %w", file, objs[0].sha, err)
	}
	return data, nil
}

// ChangedFiles lists the paths that differ between the commits oldSHA and newSHA (renames
// count as a deletion plus an addition, both listed), at most limit of them: ask for one more
// than you need to learn whether there were more.
//
// For a created ref (oldSHA is zero) there is nothing to compare with, so every file of the
// new commit counts as changed: rules like "run when src/** changed" then fire on a new branch
// rather than silently skip it. For a deleted ref (newSHA is zero) the answer is nil.
func ChangedFiles(ctx context.Context, repoPath, oldSHA, newSHA string, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	if IsZeroSHA(newSHA) {
		return nil, nil
	}
	var args []string
	if IsZeroSHA(oldSHA) {
		shas, err := resolveCommits(ctx, repoPath, newSHA)
		if err != nil {
			return nil, err
		}
		args = []string{"ls-tree", "-r", "-z", "--name-only", "--full-tree", shas[0]}
	} else {
		shas, err := resolveCommits(ctx, repoPath, oldSHA, newSHA)
		if err != nil {
			return nil, err
		}
		args = []string{"diff-tree", "-r", "-z", "--name-only", "--no-renames", "--no-commit-id", shas[0], shas[1], "--"}
	}
	files, err := readList(ctx, repoPath, 0, limit, args...)
	if err != nil {
		return nil, fmt.Errorf("git: changed files in %s: %w", repoPath, err)
	}
	return files, nil
}

// NewCommits counts the commits a ref update brought: those reachable from newSHA and not
// from oldSHA, at most max (CNB_NEW_COMMITS_COUNT stops at 99). A deleted ref brought none.
// For a created ref every commit reachable from newSHA counts, up to max: the pushed branch's
// fork point is not known here.
func NewCommits(ctx context.Context, repoPath, oldSHA, newSHA string, max int) (int, error) {
	if max <= 0 {
		return 0, fmt.Errorf("%w: max %d", ErrInvalid, max)
	}
	if IsZeroSHA(newSHA) {
		return 0, nil
	}
	args := []string{"rev-list", "--count", "--max-count=" + strconv.Itoa(max)}
	if IsZeroSHA(oldSHA) {
		shas, err := resolveCommits(ctx, repoPath, newSHA)
		if err != nil {
			return 0, err
		}
		args = append(args, shas[0])
	} else {
		shas, err := resolveCommits(ctx, repoPath, oldSHA, newSHA)
		if err != nil {
			return 0, err
		}
		args = append(args, shas[1], "^"+shas[0])
	}
	out, err := run(ctx, repoPath, nil, append(args, "--")...)
	if err != nil {
		return 0, fmt.Errorf("git: count commits in %s: %w", repoPath, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("git: count commits in %s: %q: %w", repoPath, out, err)
	}
	return n, nil
}

// Commit describes the commit sha (a SHA or any revision that names a commit).
func Commit(ctx context.Context, repoPath, sha string) (CommitInfo, error) {
	shas, err := resolveCommits(ctx, repoPath, sha)
	if err != nil {
		return CommitInfo{}, err
	}
	// NUL separates the fields; the message goes last because only it may hold anything.
	const format = "--format=%H%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
	out, err := run(ctx, repoPath, nil, "log", "-1", "--no-color", "--no-decorate", format, shas[0], "--")
	if err != nil {
		return CommitInfo{}, fmt.Errorf("git: commit %s in %s: %w", shas[0], repoPath, err)
	}
	f := strings.SplitN(string(out), "\x00", 8)
	if len(f) != 8 {
		return CommitInfo{}, fmt.Errorf("git: commit %s in %s: unexpected log output %q", shas[0], repoPath, out)
	}
	// git re-encodes messages to UTF-8, but a commit that lies about its encoding can still
	// carry invalid bytes; the database and JSON want valid text.
	for i := range f {
		if !utf8.ValidString(f[i]) {
			f[i] = strings.ToValidUTF8(f[i], "\uFFFD")
		}
	}
	authored, err := time.Parse(time.RFC3339, f[3])
	if err != nil {
		return CommitInfo{}, fmt.Errorf("git: commit %s: author date: %w", shas[0], err)
	}
	committed, err := time.Parse(time.RFC3339, f[6])
	if err != nil {
		return CommitInfo{}, fmt.Errorf("git: commit %s: committer date: %w", shas[0], err)
	}
	msg := strings.TrimRight(f[7], "\n")
	title, _, _ := strings.Cut(msg, "\n")
	return CommitInfo{
		SHA:            f[0],
		Message:        msg,
		Title:          strings.TrimSpace(title),
		AuthorName:     f[1],
		AuthorEmail:    f[2],
		CommitterName:  f[4],
		CommitterEmail: f[5],
		Time:           authored,
		CommitterTime:  committed,
	}, nil
}
