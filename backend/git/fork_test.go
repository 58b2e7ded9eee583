package git

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A fork borrows its source's objects (nothing copied), has its branches and tags but not its
// pull request refs, brings a fork's new commit into the source by fetching only what the
// source lacks, and survives its source after Dissociate.
func TestForkSharesObjects(t *testing.T) {
	ctx := context.Background()
	w := newMergeWorld(t)
	if err := UpdateRef(ctx, w.bare, "refs/pull/1/head", w.sha("topic"), ZeroSHA); err != nil {
		t.Fatal(err)
	}
	gitOK(t, w.env, w.work, "tag", "v1", "main")
	gitOK(t, w.env, w.work, "push", "-q", w.bare, "v1")

	fork := newBare(t, filepath.Join(t.TempDir(), "fork.git"))
	if err := ShareObjects(ctx, fork, w.bare); err != nil {
		t.Fatal(err)
	}
	if err := CopyRefs(ctx, fork, w.bare); err != nil {
		t.Fatal(err)
	}
	if got := gitOK(t, w.env, "", "--git-dir="+w.bare, "config", "gc.pruneExpire"); got != "never" {
		t.Errorf("the source prunes (gc.pruneExpire %q): a fork could lose the objects it borrows", got)
	}
	for _, ref := range []string{"refs/heads/main", "refs/heads/topic", "refs/heads/clash", "refs/tags/v1"} {
		want, _ := ResolveRef(ctx, w.bare, ref)
		if got, err := ResolveRef(ctx, fork, ref); err != nil || got != want {
			t.Errorf("fork's %s = %q, %v; want %s", ref, got, err, want)
		}
	}
	if _, err := ResolveRef(ctx, fork, "refs/pull/1/head"); err == nil {
		t.Error("the fork got the source's pull request ref")
	}
	// Nothing was copied: the fork's own object store is empty.
	if got := gitOK(t, w.env, "", "--git-dir="+fork, "count-objects", "-v"); !containsLine(got, "count: 0") || !containsLine(got, "in-pack: 0") {
		t.Errorf("the fork holds objects of its own:\n%s", got)
	}

	// A commit pushed to the fork reaches the source by FetchCommit.
	gitOK(t, w.env, w.work, "checkout", "-q", "-b", "forked", "main")
	c := commit(t, w.env, w.work, map[string]string{"fork.txt": "from the fork\n"}, "fork: a file")
	gitOK(t, w.env, w.work, "push", "-q", fork, "forked")
	if _, err := TreeOf(ctx, w.bare, c); err == nil {
		t.Fatal("the source has the fork's commit before the fetch")
	}
	if err := FetchCommit(ctx, w.bare, fork, c); err != nil {
		t.Fatal(err)
	}
	if _, err := TreeOf(ctx, w.bare, c); err != nil {
		t.Errorf("after the fetch: %v", err)
	}
	if heads, _ := Branches(ctx, w.bare); len(heads) != 3 {
		t.Errorf("the fetch wrote refs into the source: %v", heads)
	}

	// The source goes away; the dissociated fork keeps everything.
	if err := Dissociate(ctx, fork); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(w.bare); err != nil {
		t.Fatal(err)
	}
	if out, err := gitTry(t, w.env, "", "--git-dir="+fork, "fsck", "--no-progress", "--connectivity-only"); err != nil {
		t.Errorf("the fork without its source: %v\n%s", err, out)
	}
	if _, err := TreeOf(ctx, fork, w.sha("topic")); err != nil {
		t.Errorf("the fork lost topic: %v", err)
	}
}

func containsLine(s, line string) bool { return slices.Contains(strings.Split(s, "\n"), line) }
