package git

import (
	"context"
	"path/filepath"
	"testing"
)

func TestLineMap(t *testing.T) {
	// Old lines 3-4 replaced by 3 lines; 2 lines inserted after old 8; old line 12 deleted.
	m, err := ParseHunks([]byte("diff --git a/f b/f\n@@ -3,2 +3,3 @@ def f\n-a\n-b\n+x\n+y\n+z\n@@ -8,0 +10,2 @@\n+p\n+q\n@@ -12 +13,0 @@\n-gone\n"))
	if err != nil {
		t.Fatal(err)
	}
	for line, want := range map[int]int{1: 1, 2: 2, 3: 0, 4: 0, 5: 6, 8: 9, 9: 12, 11: 14, 12: 0, 13: 15} {
		got, ok := m.Map(line)
		if want == 0 {
			if ok {
				t.Errorf("line %d moved to %d; the change touched it", line, got)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("line %d: %d %v, want %d", line, got, ok, want)
		}
	}
	if _, err := ParseHunks([]byte("@@ -x +1 @@\n")); err == nil {
		t.Error("a broken hunk header parsed")
	}
}

// On a real repository: a line above a change keeps its place, one below moves by the lines
// added, a changed one has none, and a deleted file has no lines.
func TestLinesBetween(t *testing.T) {
	ctx := context.Background()
	env, work := clientEnv(t), t.TempDir()
	gitOK(t, env, work, "init", "-q")
	dir := filepath.Join(work, ".git")
	first := commit(t, env, work, map[string]string{"train.py": "a\nb\nc\nd\ne\n", "other.txt": "x\n"}, "first")
	second := commit(t, env, work, map[string]string{"train.py": "a\nb\nC1\nC2\nd\ne\n"}, "second")
	m, err := LinesBetween(ctx, dir, first, second, "train.py")
	if err != nil {
		t.Fatal(err)
	}
	for line, want := range map[int]int{1: 1, 2: 2, 3: 0, 4: 5, 5: 6} {
		got, ok := m.Map(line)
		if (want == 0) == ok || (ok && got != want) {
			t.Errorf("line %d: %d %v, want %d", line, got, ok, want)
		}
	}
	third := commit(t, env, work, map[string]string{"other.txt": ""}, "third")
	if m, err := LinesBetween(ctx, dir, second, third, "other.txt"); err != nil {
		t.Fatal(err)
	} else if _, ok := m.Map(1); ok {
		t.Error("a line of a deleted file kept a place")
	}
	if _, err := LinesBetween(ctx, dir, "--output=/tmp/x", third, "other.txt"); err == nil {
		t.Error("an option as a revision was run")
	}
}
