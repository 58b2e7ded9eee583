package git

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// One Reader answers a whole trigger's questions — resolves, files (found, missing, too large, a
// directory), commits, diffs — on one process, and a failed question does not break the next.
func TestReaderAnswersManyQuestionsOnOneProcess(t *testing.T) {
	h := newHistory(t)
	ctx := context.Background()
	r, err := OpenReader(ctx, h.bare)
	if err != nil {
		t.Fatal(err)
	}
	pid := r.cmd.Process.Pid
	if sha, err := r.Resolve("main"); err != nil || sha != h.c3 {
		t.Fatalf("Resolve(main) = %s, %v", sha, err)
	}
	if _, err := r.ReadFile(h.c1, "nope.yml"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	_, err = r.ReadFile(h.c1, "big.bin")
	var tl *TooLargeError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &tl) || tl.Size <= MaxFileSize || tl.Limit != MaxFileSize || tl.File != "big.bin" {
		t.Fatalf("large file: %v", err)
	}
	if _, err := r.ReadFile(h.c1, "dir"); err == nil || !strings.Contains(err.Error(), "is a tree") {
		t.Fatalf("directory: %v", err)
	}
	if _, err := r.Resolve(strings.Repeat("d", 40)); !errors.Is(err, ErrUnknownRevision) {
		t.Fatalf("unknown commit: %v", err)
	}
	for i := 0; i < 3; i++ {
		if b, err := r.ReadFile(h.c1, ".cnb.yml"); err != nil || string(b) != "main:\n  push:\n    - stages: []\n" {
			t.Fatalf("read %d: %q, %v", i, b, err)
		}
	}
	info, err := r.Commit(h.c1)
	if err != nil || info.Title != "first line" || info.AuthorName != "Ann Author" || info.CommitterEmail != "committer@example.com" {
		t.Fatalf("Commit = %+v, %v", info, err)
	}
	files, err := r.ChangedFiles(h.c1, h.c2, 10)
	if err != nil || !slices.Equal(files, []string{"a.txt", "dir/b.txt", "new file.txt"}) {
		t.Fatalf("ChangedFiles = %q, %v", files, err)
	}
	if n, err := r.NewCommits(h.c1, h.c3, 99); err != nil || n != 2 {
		t.Fatalf("NewCommits = %d, %v", n, err)
	}
	if r.cmd.Process.Pid != pid || r.broken != nil {
		t.Fatalf("the reader's process changed or broke: %v", r.broken)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// A reader whose context ends stops answering, with an error, and never hangs.
func TestReaderFailsOnceItsContextEnds(t *testing.T) {
	h := newHistory(t)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := OpenReader(ctx, h.bare)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve("main"); err != nil {
		t.Fatal(err)
	}
	cancel()
	r.cmd.Wait() // the kill has landed
	if _, err := r.ReadFile("main", "a.txt"); err == nil {
		t.Fatal("a read after the context ended succeeded")
	}
	if _, err := r.Resolve("main"); err == nil || !strings.Contains(err.Error(), "reader of") {
		t.Fatalf("a broken reader must keep failing: %v", err)
	}
}

// A message in another encoding is described by git log, which re-encodes it to UTF-8; the raw
// parse is for the UTF-8 messages nearly every commit has.
func TestCommitInAnotherEncoding(t *testing.T) {
	env := clientEnv(t)
	dir := t.TempDir()
	bare := newBare(t, filepath.Join(dir, "repo.git"))
	wt := filepath.Join(dir, "wt")
	gitOK(t, env, dir, "clone", "-q", bare, wt)
	latin1 := "caf\xe9 au lait" // "café" in ISO-8859-1
	commit(t, env, wt, map[string]string{"a": "x"}, "first")
	gitOK(t, env, wt, "-c", "i18n.commitEncoding=ISO-8859-1", "commit", "-q", "--amend", "-m", latin1)
	sha := gitOK(t, env, wt, "rev-parse", "HEAD")
	gitOK(t, env, wt, "push", "-q", "origin", "HEAD:main")
	got, err := Commit(context.Background(), bare, sha)
	if err != nil {
		t.Fatal(err)
	}
	if got.Message != "café au lait" || got.SHA != sha {
		t.Fatalf("message %q (sha %s), want UTF-8 café au lait", got.Message, got.SHA)
	}
}
