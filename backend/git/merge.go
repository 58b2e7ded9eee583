package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Merges without a worktree, for pull requests. Everything happens in the object store of the
// bare repository:
//
//   - git merge-tree --write-tree (git ≥ 2.38) merges two commits into a tree and names the
//     conflicting paths, exactly as `git merge` would decide them (same merge base, same
//     rename detection, same strategy);
//   - git commit-tree makes a commit of a tree, with the author and committer given here (never
//     the server's identity or clock);
//   - git update-ref moves a ref only if it still holds the commit the merge started from, so
//     two merges (or a merge and a push) can never overwrite each other.
//
// A rebase replays each commit onto the new base with merge-tree too. git 2.39 (Debian 12) has
// no --merge-base option, so each step merges the commit with a throw-away commit whose tree is
// the new base and whose only parent is the commit's own parent: their best common ancestor is
// that parent, which makes the merge exactly a cherry-pick. The throw-away commits are
// unreferenced objects that git gc removes.

// Signature is who made a commit, and when.
type Signature struct {
	Name, Email string
	When        time.Time
}

// env is the signature as git's GIT_<role>_* variables (role: AUTHOR or COMMITTER). The date
// keeps its zone, in git's raw form ("<unix seconds> +hhmm").
func (s Signature) env(role string) []string {
	return []string{
		"GIT_" + role + "_NAME=" + s.Name,
		"GIT_" + role + "_EMAIL=" + s.Email,
		"GIT_" + role + "_DATE=" + strconv.FormatInt(s.When.Unix(), 10) + " " + s.When.Format("-0700"),
	}
}

func (s Signature) check() error {
	if strings.TrimSpace(s.Name) == "" || strings.TrimSpace(s.Email) == "" || s.When.IsZero() {
		return fmt.Errorf("%w: a commit needs a name, an email and a time", ErrInvalid)
	}
	if strings.ContainsAny(s.Name+s.Email, "<>\n\x00") {
		return fmt.Errorf("%w: a name or email with <, >, a newline or NUL", ErrInvalid)
	}
	return nil
}

// MergeResult is what merging two commits gives.
type MergeResult struct {
	// Tree is the merged tree. With conflicts it holds the conflict markers and is never
	// committed.
	Tree string
	// Conflicts are the paths that conflict, sorted; none when the merge is clean.
	Conflicts []string
}

// Clean reports whether the merge had no conflicts.
func (m MergeResult) Clean() bool { return len(m.Conflicts) == 0 }

// MergeTree merges theirs into ours as `git merge` would and returns the resulting tree and the
// conflicting paths. ours and theirs are commit SHAs: callers resolve refs first, so nothing
// from a request reaches git's command line but a hex string.
func MergeTree(ctx context.Context, repoPath, ours, theirs string) (MergeResult, error) {
	if !isSHA(ours) || !isSHA(theirs) {
		return MergeResult{}, fmt.Errorf("%w: merge %q into %q: commits are named by SHA", ErrInvalid, theirs, ours)
	}
	out, err := run(ctx, repoPath, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs)
	// Exit status 1 is "merged, with conflicts"; any other failure (an unknown commit, unrelated
	// histories) is an error.
	if err != nil && exitCode(err) != 1 {
		return MergeResult{}, fmt.Errorf("git: merge %s into %s: %w", theirs, ours, err)
	}
	fields := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !isSHA(fields[0]) {
		return MergeResult{}, fmt.Errorf("git: merge-tree printed %q, not a tree", fields[0])
	}
	res := MergeResult{Tree: fields[0]}
	for _, p := range fields[1:] {
		if p != "" && !slices.Contains(res.Conflicts, p) {
			res.Conflicts = append(res.Conflicts, p)
		}
	}
	slices.Sort(res.Conflicts)
	if err != nil && res.Clean() {
		return MergeResult{}, fmt.Errorf("git: merge %s into %s failed without naming a conflict: %w", theirs, ours, err)
	}
	return res, nil
}

// MergeBase returns the best common ancestor of two commits, or "" when they have none.
func MergeBase(ctx context.Context, repoPath, a, b string) (string, error) {
	if !isSHA(a) || !isSHA(b) {
		return "", fmt.Errorf("%w: merge base of %q and %q: commits are named by SHA", ErrInvalid, a, b)
	}
	out, err := run(ctx, repoPath, nil, "merge-base", a, b)
	if exitCode(err) == 1 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// NewCommit is a commit to write: a tree, its parents, the message and who made it.
type NewCommit struct {
	Tree      string
	Parents   []string
	Message   string
	Author    Signature
	Committer Signature
}

// CommitTree writes c and returns its SHA. Nothing points at it until a ref is moved to it.
func CommitTree(ctx context.Context, repoPath string, c NewCommit) (string, error) {
	if !isSHA(c.Tree) {
		return "", fmt.Errorf("%w: tree %q", ErrInvalid, c.Tree)
	}
	if err := c.Author.check(); err != nil {
		return "", err
	}
	if err := c.Committer.check(); err != nil {
		return "", err
	}
	args := []string{"commit-tree", c.Tree}
	for _, p := range c.Parents {
		if !isSHA(p) {
			return "", fmt.Errorf("%w: parent %q", ErrInvalid, p)
		}
		args = append(args, "-p", p)
	}
	cmd := command(ctx, repoPath, args...)
	cmd.Env = append(cmd.Env, c.Author.env("AUTHOR")...)
	cmd.Env = append(cmd.Env, c.Committer.env("COMMITTER")...)
	// The message goes in on stdin, as is: git commit-tree does not clean it up, so the caller
	// decides its exact bytes (a trailing newline, as git commit writes, is added if missing).
	msg := c.Message
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	cmd.Stdin = strings.NewReader(msg)
	var stdout bytes.Buffer
	stderr := &capWriter{max: maxStderr}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Run(); err != nil {
		return "", commandError(args, err, stderr)
	}
	sha := strings.TrimSpace(stdout.String())
	if !isSHA(sha) {
		return "", fmt.Errorf("git: commit-tree printed %q", sha)
	}
	return sha, nil
}

// ErrRefMoved is returned by UpdateRef when the ref no longer holds the expected commit.
var ErrRefMoved = errors.New("git: the ref moved meanwhile")

// UpdateRef points ref at sha if it still holds old (ZeroSHA: the ref must not exist yet). A ref
// that moved meanwhile leaves everything as it was and returns ErrRefMoved.
func UpdateRef(ctx context.Context, repoPath, ref, sha, old string) error {
	if !strings.HasPrefix(ref, "refs/") || strings.ContainsAny(ref, " \t\n\x00") {
		return fmt.Errorf("%w: ref %q", ErrInvalid, ref)
	}
	if !isSHA(sha) || !isSHA(old) {
		return fmt.Errorf("%w: update %s to %q from %q", ErrInvalid, ref, sha, old)
	}
	cur, err := ResolveRef(ctx, repoPath, ref)
	switch {
	case errors.Is(err, ErrUnknownRevision):
		cur = ZeroSHA
	case err != nil:
		return err
	}
	if cur != old {
		return fmt.Errorf("%w: %s is at %s, not %s", ErrRefMoved, ref, cur, old)
	}
	// The compare-and-swap is git's own (the old value under the ref's lock): the check above
	// only gives a clearer error in the common case.
	if _, err := run(ctx, repoPath, nil, "update-ref", ref, sha, old); err != nil {
		if cur, rerr := ResolveRef(ctx, repoPath, ref); rerr == nil && cur != old || errors.Is(rerr, ErrUnknownRevision) && !IsZeroSHA(old) {
			return fmt.Errorf("%w: %s: %v", ErrRefMoved, ref, err)
		}
		return err
	}
	return nil
}

// DeleteRef deletes ref if it still holds old.
func DeleteRef(ctx context.Context, repoPath, ref, old string) error {
	if !strings.HasPrefix(ref, "refs/") || !isSHA(old) || IsZeroSHA(old) {
		return fmt.Errorf("%w: delete %s at %q", ErrInvalid, ref, old)
	}
	if _, err := run(ctx, repoPath, nil, "update-ref", "-d", ref, old); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRefMoved, ref, err)
	}
	return nil
}

// CommitMeta is what a rebase keeps of a commit it replays.
type CommitMeta struct {
	SHA, Tree string
	Parents   []string
	Author    Signature
	Message   string
}

// commitMeta reads the commits' trees, parents, authors (date and zone as written) and raw
// messages, in the order given.
func commitMeta(ctx context.Context, repoPath string, shas []string) ([]CommitMeta, error) {
	if len(shas) == 0 {
		return nil, nil
	}
	// %x00 ends a field and %x01 a record: a message holds neither.
	args := append([]string{"show", "-s", "--no-walk=unsorted", "--date=raw", "--format=%H%x00%T%x00%P%x00%an%x00%ae%x00%ad%x00%B%x01"}, shas...)
	out, err := run(ctx, repoPath, nil, args...)
	if err != nil {
		return nil, err
	}
	var metas []CommitMeta
	for _, rec := range strings.Split(string(out), "\x01") {
		rec = strings.TrimPrefix(rec, "\n")
		if rec == "" {
			continue
		}
		f := strings.SplitN(rec, "\x00", 7)
		if len(f) != 7 {
			return nil, fmt.Errorf("git: show printed %q", rec)
		}
		when, err := parseRawDate(f[5])
		if err != nil {
			return nil, err
		}
		metas = append(metas, CommitMeta{SHA: f[0], Tree: f[1], Parents: strings.Fields(f[2]),
			Author: Signature{Name: f[3], Email: f[4], When: when}, Message: f[6]})
	}
	if len(metas) != len(shas) {
		return nil, fmt.Errorf("git: asked for %d commits, read %d", len(shas), len(metas))
	}
	return metas, nil
}

// parseRawDate reads git's raw date ("1700000000 +0800") into a time in that zone.
func parseRawDate(s string) (time.Time, error) {
	secs, zone, ok := strings.Cut(strings.TrimSpace(s), " ")
	n, err := strconv.ParseInt(secs, 10, 64)
	if !ok || err != nil {
		return time.Time{}, fmt.Errorf("git: date %q", s)
	}
	z, err := time.Parse("-0700", zone)
	if err != nil {
		return time.Time{}, fmt.Errorf("git: date %q: %w", s, err)
	}
	return time.Unix(n, 0).In(z.Location()), nil
}

// RebaseResult is a rebase's outcome.
type RebaseResult struct {
	// Head is the last replayed commit: the new tip of the rebased branch.
	Head string
	// Conflict is the commit that did not apply, and Conflicts its paths; Head is then "".
	Conflict  string
	Conflicts []string
}

// Rebase replays the commits of head that onto does not have onto it, as `git rebase onto` run
// on head would by default: merge commits are left out, commits whose change onto already has
// (by patch id) are skipped, and a commit that becomes empty is dropped. Each keeps its author
// and message; committer is the one who rebases. Nothing is referenced: the caller moves refs.
func Rebase(ctx context.Context, repoPath, onto, head string, committer Signature) (RebaseResult, error) {
	if !isSHA(onto) || !isSHA(head) {
		return RebaseResult{}, fmt.Errorf("%w: rebase %q onto %q: commits are named by SHA", ErrInvalid, head, onto)
	}
	if err := committer.check(); err != nil {
		return RebaseResult{}, err
	}
	list, err := readList(ctx, repoPath, '\n', 0, "rev-list", "--reverse", "--topo-order", "--no-merges", "--right-only", "--cherry-pick", onto+"..."+head)
	if err != nil {
		return RebaseResult{}, err
	}
	metas, err := commitMeta(ctx, repoPath, list)
	if err != nil {
		return RebaseResult{}, err
	}
	tip, tipTree := onto, ""
	if tipTree, err = TreeOf(ctx, repoPath, tip); err != nil {
		return RebaseResult{}, err
	}
	for _, c := range metas {
		var merged MergeResult
		switch {
		case len(c.Parents) == 0:
			return RebaseResult{}, fmt.Errorf("%w: %s is a root commit; it cannot be replayed", ErrInvalid, c.SHA)
		case c.Parents[0] == tip:
			merged = MergeResult{Tree: c.Tree} // already on the tip: git keeps it as it is
		default:
			// A stand-in for the tip whose only parent is c's parent: merging c into it is
			// cherry-picking c onto the tip (see the file's comment).
			standIn, err := CommitTree(ctx, repoPath, NewCommit{Tree: tipTree, Parents: c.Parents[:1], Message: "nimbus rebase step",
				Author: committer, Committer: committer})
			if err != nil {
				return RebaseResult{}, err
			}
			if merged, err = MergeTree(ctx, repoPath, standIn, c.SHA); err != nil {
				return RebaseResult{}, err
			}
			if !merged.Clean() {
				return RebaseResult{Conflict: c.SHA, Conflicts: merged.Conflicts}, nil
			}
		}
		if merged.Tree == tipTree {
			parentTree, err := TreeOf(ctx, repoPath, c.Parents[0])
			if err != nil {
				return RebaseResult{}, err
			}
			if parentTree != c.Tree {
				continue // it became empty: its change is already there
			}
		}
		if c.Parents[0] == tip {
			tip = c.SHA // git rebase fast-forwards over commits that are already in place
		} else if tip, err = CommitTree(ctx, repoPath, NewCommit{Tree: merged.Tree, Parents: []string{tip}, Message: c.Message,
			Author: c.Author, Committer: committer}); err != nil {
			return RebaseResult{}, err
		}
		tipTree = merged.Tree
	}
	return RebaseResult{Head: tip}, nil
}

// TreeOf returns the tree of a commit.
func TreeOf(ctx context.Context, repoPath, commit string) (string, error) {
	out, err := run(ctx, repoPath, nil, "rev-parse", "--verify", "--end-of-options", commit+"^{tree}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
