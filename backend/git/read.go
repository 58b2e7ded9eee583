package git

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nimbus-build/nimbus/internal/userpath"
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

// checkPath refuses a repository path that breaks the path rule (internal/userpath): empty,
// absolute, with "." / ".." / empty segments, a backslash or a control character such as NUL
// or a newline (which would break the line-based lookup). Such a path cannot name a file of a
// tree, and some could make git resolve it against something other than the commit's root.
// The error wraps both ErrInvalid and the rule's *userpath.Error.
func checkPath(file string) error {
	if err := userpath.Check(file); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// ReadFile returns the content of file (a path from the repository root, like ".cnb.yml" or
// "ci/build.yml") at commit (a SHA or any revision). A file absent from that commit is
// ErrNotExist; an unknown commit is ErrUnknownRevision; a directory or submodule is ErrNotFile;
// a file over MaxFileSize is a *TooLargeError (ErrTooLarge) and is never read. A symbolic link is returned as its
// target text, not followed.
func ReadFile(ctx context.Context, repoPath, commit, file string) ([]byte, error) {
	return withReader(ctx, repoPath, func(r *Reader) ([]byte, error) { return r.ReadFile(commit, file) })
}

// withReader runs one question on a Reader of its own.
func withReader[T any](ctx context.Context, repoPath string, ask func(*Reader) (T, error)) (T, error) {
	r, err := OpenReader(ctx, repoPath)
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := ask(r)
	return out, errors.Join(err, r.Close())
}

// ChangedFiles lists the paths that differ between the commits oldSHA and newSHA (renames
// count as a deletion plus an addition, both listed), at most limit of them: ask for one more
// than you need to learn whether there were more.
//
// For a created ref (oldSHA is zero) there is nothing to compare with, so every file of the
// new commit counts as changed: rules like "run when src/** changed" then fire on a new branch
// rather than silently skip it. For a deleted ref (newSHA is zero) the answer is nil.
func ChangedFiles(ctx context.Context, repoPath, oldSHA, newSHA string, limit int) ([]string, error) {
	return changedFiles(ctx, repoPath, oldSHA, newSHA, limit, func(revs ...string) ([]string, error) {
		return resolveCommits(ctx, repoPath, revs...)
	})
}

// changedFiles is ChangedFiles with the way revisions are resolved to commits passed in (a
// process of its own, or a Reader's).
func changedFiles(ctx context.Context, repoPath, oldSHA, newSHA string, limit int, resolve func(...string) ([]string, error)) ([]string, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	if IsZeroSHA(newSHA) {
		return nil, nil
	}
	var args []string
	if IsZeroSHA(oldSHA) {
		shas, err := resolve(newSHA)
		if err != nil {
			return nil, err
		}
		args = []string{"ls-tree", "-r", "-z", "--name-only", "--full-tree", shas[0]}
	} else {
		shas, err := resolve(oldSHA, newSHA)
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
	return newCommits(ctx, repoPath, oldSHA, newSHA, max, func(revs ...string) ([]string, error) {
		return resolveCommits(ctx, repoPath, revs...)
	})
}

// newCommits is NewCommits with the way revisions are resolved passed in.
func newCommits(ctx context.Context, repoPath, oldSHA, newSHA string, max int, resolve func(...string) ([]string, error)) (int, error) {
	if max <= 0 {
		return 0, fmt.Errorf("%w: max %d", ErrInvalid, max)
	}
	if IsZeroSHA(newSHA) {
		return 0, nil
	}
	args := []string{"rev-list", "--count", "--max-count=" + strconv.Itoa(max)}
	if IsZeroSHA(oldSHA) {
		shas, err := resolve(newSHA)
		if err != nil {
			return 0, err
		}
		args = append(args, shas[0])
	} else {
		shas, err := resolve(oldSHA, newSHA)
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

// Commit describes the commit sha (a SHA or any revision that names a commit); see
// Reader.Commit.
func Commit(ctx context.Context, repoPath, sha string) (CommitInfo, error) {
	return withReader(ctx, repoPath, func(r *Reader) (CommitInfo, error) { return r.Commit(sha) })
}

// logCommit describes the commit with the full SHA sha through `git log`, which re-encodes a
// message written in another encoding to UTF-8.
func logCommit(ctx context.Context, repoPath, sha string) (CommitInfo, error) {
	shas := []string{sha}
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
	// git re-encodes the message to UTF-8, but a commit that lies about its encoding can still
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
