package git

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// mergeWorld is a work tree with a main branch and topic branches, and a bare copy of it that
// the merge helpers work in. Every commit the test's git client makes has the identity and the
// dates of clientEnv, so a commit the helpers write with the same ones has the same SHA as the
// one git itself writes: that is how these tests compare the helpers with git.
type mergeWorld struct {
	t    *testing.T
	env  []string
	work string
	bare string
	// who is clientEnv's identity: the author and committer of every commit the client makes.
	author, committer Signature
}

func newMergeWorld(t *testing.T) *mergeWorld {
	t.Helper()
	w := &mergeWorld{t: t, env: clientEnv(t), work: t.TempDir()}
	w.author = Signature{Name: "Test Committer", Email: "committer@example.com", When: time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("", 8*3600))}
	w.committer = Signature{Name: "Test Committer", Email: "committer@example.com", When: time.Date(2024, 1, 2, 4, 5, 6, 0, time.UTC)}
	gitOK(t, w.env, w.work, "init", "-q")
	commit(t, w.env, w.work, map[string]string{
		"f":       "a\nb\nc\n",
		"g":       "x\n",
		"h":       "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n",
		"keep.md": "unchanged\n",
	}, "base")
	// topic: three commits; the second is also cherry-picked onto main (a patch git rebase skips).
	gitOK(t, w.env, w.work, "checkout", "-q", "-b", "topic")
	commit(t, w.env, w.work, map[string]string{"h": "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n10\n"}, "topic: line two\n\nwith a body\n")
	picked := commit(t, w.env, w.work, map[string]string{"new.txt": "new\n"}, "topic: a new file")
	commit(t, w.env, w.work, map[string]string{"dir/deep.txt": "deep\n"}, "topic: a deep file")
	// main moves on: line nine of h, g, and the cherry-pick.
	gitOK(t, w.env, w.work, "checkout", "-q", "main")
	commit(t, w.env, w.work, map[string]string{"h": "1\n2\n3\n4\n5\n6\n7\n8\nnine\n10\n", "g": "y\n"}, "main: nine and g")
	gitOK(t, w.env, w.work, "cherry-pick", picked)
	// clash changes f's line b, which main changes too.
	gitOK(t, w.env, w.work, "checkout", "-q", "-b", "clash", "main~2")
	commit(t, w.env, w.work, map[string]string{"f": "a\nB from clash\nc\n"}, "clash: b")
	gitOK(t, w.env, w.work, "checkout", "-q", "main")
	commit(t, w.env, w.work, map[string]string{"f": "a\nB from main\nc\n"}, "main: b")
	w.bare = filepath.Join(t.TempDir(), "repo.git")
	gitOK(t, w.env, w.work, "clone", "-q", "--bare", w.work, w.bare)
	return w
}

func (w *mergeWorld) sha(rev string) string {
	w.t.Helper()
	return gitOK(w.t, w.env, w.work, "rev-parse", rev)
}

// TestMergeLikeGit: a merge commit, a squash and a rebase made in the bare repository without a
// work tree are the very commits (same SHAs) that git merge --no-ff, git merge --squash + commit
// and git rebase make in a work tree.
func TestMergeLikeGit(t *testing.T) {
	ctx := context.Background()
	w := newMergeWorld(t)
	mainSHA, topic := w.sha("main"), w.sha("topic")

	merged, err := MergeTree(ctx, w.bare, mainSHA, topic)
	if err != nil || !merged.Clean() {
		t.Fatalf("MergeTree(main, topic) = %+v, %v; want clean", merged, err)
	}
	base, err := MergeBase(ctx, w.bare, mainSHA, topic)
	if err != nil || base != w.sha("main~3") {
		t.Fatalf("MergeBase = %q, %v; want the base commit %s", base, err, w.sha("main~3"))
	}

	for _, c := range []struct {
		name    string
		byGit   [][]string // what makes the same commit in the work tree, on a branch from main
		parents []string
		message string
	}{
		{"merge commit", [][]string{{"merge", "-q", "--no-ff", "-m", "Merge topic", "topic"}}, []string{mainSHA, topic}, "Merge topic"},
		{"squash", [][]string{{"merge", "-q", "--squash", "topic"}, {"commit", "-q", "-m", "Topic, squashed (#1)"}}, []string{mainSHA}, "Topic, squashed (#1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			gitOK(t, w.env, w.work, "checkout", "-q", "-b", "by-git-"+c.name[:5], "main")
			for _, args := range c.byGit {
				gitOK(t, w.env, w.work, args...)
			}
			got, err := CommitTree(ctx, w.bare, NewCommit{Tree: merged.Tree, Parents: c.parents, Message: c.message, Author: w.author, Committer: w.committer})
			if err != nil {
				t.Fatal(err)
			}
			if want := w.sha("HEAD"); got != want {
				t.Fatalf("%s %s, git made %s", c.name, got, want)
			}
		})
	}
	t.Run("rebase", func(t *testing.T) {
		gitOK(t, w.env, w.work, "checkout", "-q", "-b", "by-git-rebase", "topic")
		gitOK(t, w.env, w.work, "rebase", "-q", "main")
		got, err := Rebase(ctx, w.bare, mainSHA, topic, w.committer)
		if err != nil || got.Conflict != "" {
			t.Fatalf("Rebase = %+v, %v", got, err)
		}
		if want := w.sha("HEAD"); got.Head != want {
			t.Fatalf("rebased head %s, git rebase made %s:\n%s", got.Head, want, gitOK(t, w.env, w.work, "log", "--format=%H %s", "main~1..HEAD"))
		}
		// The cherry-picked commit was skipped: two of topic's three commits were replayed.
		if n := gitOK(t, w.env, w.bare, "rev-list", "--count", mainSHA+".."+got.Head); n != "2" {
			t.Fatalf("%s commits replayed, want 2 (the cherry-picked one skipped)", n)
		}
	})
	t.Run("rebase of a branch already on its base", func(t *testing.T) {
		got, err := Rebase(ctx, w.bare, w.sha("main~3"), topic, w.committer)
		if err != nil || got.Head != topic {
			t.Fatalf("Rebase onto its own base = %+v, %v; want the branch as it is (%s)", got, err, topic)
		}
	})
}

// TestMergeConflicts: a conflict names its paths, in a merge and in a rebase, and writes no ref.
func TestMergeConflicts(t *testing.T) {
	ctx := context.Background()
	w := newMergeWorld(t)
	mainSHA, clash := w.sha("main"), w.sha("clash")
	refsBefore := gitOK(t, w.env, w.bare, "for-each-ref")

	got, err := MergeTree(ctx, w.bare, mainSHA, clash)
	if err != nil {
		t.Fatal(err)
	}
	if got.Clean() || !slices.Equal(got.Conflicts, []string{"f"}) || !isSHA(got.Tree) {
		t.Fatalf("MergeTree(main, clash) = %+v; want a conflict on f", got)
	}
	rb, err := Rebase(ctx, w.bare, mainSHA, clash, w.committer)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Head != "" || rb.Conflict != clash || !slices.Equal(rb.Conflicts, []string{"f"}) {
		t.Fatalf("Rebase(clash onto main) = %+v; want the conflict of %s on f", rb, clash)
	}
	if after := gitOK(t, w.env, w.bare, "for-each-ref"); after != refsBefore {
		t.Fatalf("refs changed:\n%s\nwas\n%s", after, refsBefore)
	}
}

// TestUpdateRefIsACompareAndSwap: a ref moves only from the commit the caller saw.
func TestUpdateRefIsACompareAndSwap(t *testing.T) {
	ctx := context.Background()
	w := newMergeWorld(t)
	mainSHA, topic := w.sha("main"), w.sha("topic")

	if err := UpdateRef(ctx, w.bare, "refs/pull/1/merge", topic, ZeroSHA); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := UpdateRef(ctx, w.bare, "refs/pull/1/merge", mainSHA, ZeroSHA); !errors.Is(err, ErrRefMoved) {
		t.Fatalf("create over an existing ref: %v, want ErrRefMoved", err)
	}
	if err := UpdateRef(ctx, w.bare, "refs/heads/main", topic, w.sha("main~1")); !errors.Is(err, ErrRefMoved) {
		t.Fatalf("update from a stale commit: %v, want ErrRefMoved", err)
	}
	if got := gitOK(t, w.env, w.bare, "rev-parse", "refs/heads/main"); got != mainSHA {
		t.Fatalf("main moved to %s on a refused update", got)
	}
	if err := UpdateRef(ctx, w.bare, "refs/heads/main", topic, mainSHA); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := DeleteRef(ctx, w.bare, "refs/pull/1/merge", mainSHA); !errors.Is(err, ErrRefMoved) {
		t.Fatalf("delete from a stale commit: %v, want ErrRefMoved", err)
	}
	if err := DeleteRef(ctx, w.bare, "refs/pull/1/merge", topic); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := ResolveRef(ctx, w.bare, "refs/pull/1/merge"); !errors.Is(err, ErrUnknownRevision) {
		t.Fatalf("deleted ref still resolves: %v", err)
	}
}

// Bad arguments are refused before git runs.
func TestMergeRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	w := newMergeWorld(t)
	sha := w.sha("main")
	ok := Signature{Name: "A", Email: "a@example.com", When: time.Now()}
	for name, err := range map[string]error{
		"a ref, not a SHA":     func() error { _, err := MergeTree(ctx, w.bare, "main", sha); return err }(),
		"an option":            func() error { _, err := MergeTree(ctx, w.bare, sha, "--output=x"); return err }(),
		"merge base of a name": func() error { _, err := MergeBase(ctx, w.bare, "HEAD", sha); return err }(),
		"rebase of a name":     func() error { _, err := Rebase(ctx, w.bare, sha, "topic", ok); return err }(),
		"no committer":         func() error { _, err := Rebase(ctx, w.bare, sha, sha, Signature{}); return err }(),
		"a name with <":        func() error { return Signature{Name: "a <b>", Email: "e", When: time.Now()}.check() }(),
		"a tree that is not a SHA": func() error {
			_, err := CommitTree(ctx, w.bare, NewCommit{Tree: "HEAD", Author: ok, Committer: ok})
			return err
		}(),
		"a ref outside refs/": func() error { return UpdateRef(ctx, w.bare, "HEAD", sha, ZeroSHA) }(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
