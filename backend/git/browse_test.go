package git

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// The browser's reads agree with git's own porcelain on the same repository: a tree lists
// directories first, a blob is cut at the limit, a log pages, and a diff has git's files,
// statuses, counts and hunks (a rename and a binary file included).
func TestBrowseLikeGit(t *testing.T) {
	ctx := context.Background()
	w := newMergeWorld(t)
	gitOK(t, w.env, w.work, "checkout", "-q", "-b", "browse", "topic")
	gitOK(t, w.env, w.work, "mv", "g", "g-renamed")
	commit(t, w.env, w.work, map[string]string{"bin.dat": "a\x00b\x00c", "f": "a\nb\nc\nd\n", "lfs.bin": "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n"}, "browse: rename, binary, lfs")
	gitOK(t, w.env, w.work, "push", "-q", w.bare, "browse")
	head := w.sha("browse")

	root, err := Tree(ctx, w.bare, head, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range root {
		names = append(names, e.Type+":"+e.Path)
	}
	if want := []string{"tree:dir", "blob:bin.dat", "blob:f", "blob:g-renamed", "blob:h", "blob:keep.md", "blob:lfs.bin", "blob:new.txt"}; !slices.Equal(names, want) {
		t.Errorf("root %q, want %q", names, want)
	}
	sub, err := Tree(ctx, w.bare, head, "dir")
	if err != nil || len(sub) != 1 || sub[0].Path != "dir/deep.txt" || sub[0].Size != 5 {
		t.Errorf("dir: %+v %v", sub, err)
	}
	if _, err := Tree(ctx, w.bare, head, "f"); !errors.Is(err, ErrNotFile) {
		t.Errorf("a file as a directory: %v", err)
	}
	if _, err := Tree(ctx, w.bare, head, "../etc"); !errors.Is(err, ErrInvalid) {
		t.Errorf("a path out of the tree: %v", err)
	}

	b, err := ReadBlob(ctx, w.bare, head, "h", 4)
	if err != nil || b.Size != 23 || string(b.Data) != "1\ntw" || b.Mode != "100644" {
		t.Errorf("h cut at 4 bytes: %+v %v", b, err)
	}
	if b, _ := ReadBlob(ctx, w.bare, head, "bin.dat", 100); !IsBinary(b.Data) {
		t.Errorf("bin.dat is not binary: %q", b.Data)
	}
	if b, _ := ReadBlob(ctx, w.bare, head, "lfs.bin", 100); true {
		if p, ok := ParseLFSPointer(b.Data); !ok || p.OID != "sha256:4d7a" || p.Size != 12345 {
			t.Errorf("the LFS pointer: %+v %v", p, ok)
		}
	}
	if _, err := ReadBlob(ctx, w.bare, head, "nope", 10); !errors.Is(err, ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}

	all, err := Log(ctx, w.bare, head, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(gitOK(t, w.env, w.work, "rev-list", "browse"))
	var got []string
	for _, c := range all {
		got = append(got, c.SHA)
	}
	if !slices.Equal(got, want) {
		t.Errorf("log %q, want %q", got, want)
	}
	page, _ := Log(ctx, w.bare, head, "", 1, 2)
	if len(page) != 2 || page[0].SHA != want[1] || page[1].SHA != want[2] {
		t.Errorf("the second page of two: %+v", page)
	}
	if touched, _ := Log(ctx, w.bare, head, "h", 0, 10); len(touched) != 2 {
		t.Errorf("commits that change h: %d, want 2", len(touched))
	}

	parents, err := Parents(ctx, w.bare, head)
	if err != nil || len(parents) != 1 || parents[0] != w.sha("browse~1") {
		t.Fatalf("parents %v %v", parents, err)
	}
	files, err := Diff(ctx, w.bare, parents[0], head, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, f := range files {
		seen = append(seen, f.Status+":"+f.OldPath+">"+f.Path)
	}
	if want := []string{"added:>bin.dat", "modified:>f", "renamed:g>g-renamed", "added:>lfs.bin"}; !slices.Equal(seen, want) {
		t.Errorf("diff files %q, want %q", seen, want)
	}
	for _, f := range files {
		switch f.Path {
		case "bin.dat":
			if !f.Binary || f.Patch != "" {
				t.Errorf("bin.dat %+v", f)
			}
		case "f":
			wantPatch := gitOK(t, w.env, w.work, "diff", "browse~1", "browse", "--", "f")
			if f.Additions != 1 || f.Deletions != 0 || !strings.HasPrefix(f.Patch, "@@ ") || !strings.HasSuffix(wantPatch, strings.TrimSuffix(f.Patch, "\n")) {
				t.Errorf("f %+v, git says\n%s", f, wantPatch)
			}
		case "g-renamed":
			if f.Patch != "" || f.Additions != 0 {
				t.Errorf("a pure rename %+v", f)
			}
		}
	}
	// Past the budget, files keep their counts and say so.
	small, _ := Diff(ctx, w.bare, parents[0], head, 10)
	if len(small) != 4 || small[1].Patch != "" || !small[1].Truncated || small[1].Additions != 1 {
		t.Errorf("a diff over its budget: %+v", small)
	}
	// A root commit shows every file added.
	first := w.sha("main~3")
	rootDiff, err := Diff(ctx, w.bare, "", first, 1<<20)
	if err != nil || len(rootDiff) != 4 || rootDiff[0].Status != "added" || rootDiff[0].Additions != 3 {
		t.Errorf("the root commit's diff %+v %v", rootDiff, err)
	}
}

// A diff reads git's patch only as far as its budget: a file far larger than the budget does
// not come into memory whole, the files after the cut keep their counts and say Truncated, and
// one file may take an eighth of the budget at most, leaving the rest to the others.
func TestDiffStopsAtItsBudget(t *testing.T) {
	ctx := context.Background()
	w := newMergeWorld(t)
	gitOK(t, w.env, w.work, "checkout", "-q", "-b", "big", "topic")
	line := strings.Repeat("x", 99) + "\n"
	commit(t, w.env, w.work, map[string]string{
		"a-small.txt": "one\n", "b-wide.txt": strings.Repeat(line, 2000), "c-huge.txt": strings.Repeat(line, 80_000), "d-after.txt": "two\n",
	}, "big files")
	gitOK(t, w.env, w.work, "push", "-q", w.bare, "big")
	files, err := Diff(ctx, w.bare, w.sha("big~1"), w.sha("big"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]FileDiff{}
	for _, f := range files {
		got[f.Path] = f
	}
	small, wide, huge, after := got["a-small.txt"], got["b-wide.txt"], got["c-huge.txt"], got["d-after.txt"]
	if small.Truncated || !strings.Contains(small.Patch, "+one") {
		t.Errorf("the small file before the big ones: %+v", small)
	}
	if !wide.Truncated || wide.Patch != "" || wide.Additions != 2000 {
		t.Errorf("a 200 KB file, over an eighth of a 1 MiB budget: %+v", wide)
	}
	if !huge.Truncated || huge.Patch != "" || huge.Additions != 80_000 {
		t.Errorf("an 8 MB file: truncated %v, additions %d, patch %d bytes", huge.Truncated, huge.Additions, len(huge.Patch))
	}
	if !after.Truncated || after.Additions != 1 {
		t.Errorf("the file after the cut: %+v", after)
	}
}
