package git

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// history is a small bare repo with three commits on main, a tag and a second branch:
//
//	c1: .cnb.yml, a.txt, dir/b.txt, big.bin (1 MiB + 1), link -> a.txt   (tag v1, annotated)
//	c2: a.txt changed, dir/b.txt deleted, "new file.txt" added
//	c3: a.txt changed                                                    (main)
//	feature/x: c3 + one commit
type history struct {
	bare       string
	c1, c2, c3 string
	tag        string // the v1 tag object
	feature    string
}

func newHistory(t *testing.T) history {
	t.Helper()
	env := clientEnv(t)
	dir := t.TempDir()
	h := history{bare: newBare(t, filepath.Join(dir, "repo.git"))}
	wt := filepath.Join(dir, "wt")
	gitOK(t, env, dir, "clone", "-q", h.bare, wt)

	h.c1 = commit(t, env, wt, map[string]string{
		".cnb.yml":  "main:\n  push:\n    - stages: []\n",
		"a.txt":     "A1\n",
		"dir/b.txt": "B\n",
		"big.bin":   strings.Repeat("x", MaxFileSize+1),
	}, "first line\n\nbody line one\nbody line two", "--author=Ann Author <ann@example.com>")
	gitOK(t, env, wt, "tag", "-a", "-m", "release one", "v1")
	h.tag = gitOK(t, env, wt, "rev-parse", "v1")
	h.c2 = commit(t, env, wt, map[string]string{"a.txt": "A2\n", "dir/b.txt": "", "new file.txt": "N\n"}, "second")
	h.c3 = commit(t, env, wt, map[string]string{"a.txt": "A3\n"}, "third")
	gitOK(t, env, wt, "checkout", "-q", "-b", "feature/x")
	h.feature = commit(t, env, wt, map[string]string{"f.txt": "F\n"}, "feature")
	gitOK(t, env, wt, "push", "-q", "origin", "main", "feature/x", "v1")
	return h
}

// wantErr fails the test unless err is want, and reports whether an error was wanted (so the
// case is done); a nil want means the call must succeed, which the caller checks.
func wantErr(t *testing.T, err, want error) bool {
	t.Helper()
	if want == nil {
		return false
	}
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	return true
}

func TestStorageHelpers(t *testing.T) {
	h := newHistory(t)
	ctx := context.Background()
	bad := strings.Repeat("d", 40)

	t.Run("ReadFile", func(t *testing.T) {
		cases := []struct {
			name, commit, file string
			want               string
			err                error // nil: want must match
		}{
			{"top-level file", h.c1, ".cnb.yml", "main:\n  push:\n    - stages: []\n", nil},
			{"nested file", h.c1, "dir/b.txt", "B\n", nil},
			{"file as of a later commit", h.c3, "a.txt", "A3\n", nil},
			{"path with a space", h.c2, "new file.txt", "N\n", nil},
			{"branch name as commit", "main", "a.txt", "A3\n", nil},
			{"annotated tag is peeled", "v1", "a.txt", "A1\n", nil},
			{"deleted file", h.c2, "dir/b.txt", "", ErrNotExist},
			{"never existed", h.c1, "nope.yml", "", ErrNotExist},
			{"below a file", h.c1, "a.txt/x", "", ErrNotExist},
			{"over the size limit", h.c1, "big.bin", "", ErrTooLarge},
			{"unknown commit", bad, "a.txt", "", ErrUnknownRevision},
			{"unknown branch", "nope", "a.txt", "", ErrUnknownRevision},
			{"dot-dot", h.c1, "../a.txt", "", ErrInvalid},
			{"dot-dot inside", h.c1, "dir/../a.txt", "", ErrInvalid},
			{"dot segment", h.c1, "./a.txt", "", ErrInvalid},
			{"absolute", h.c1, "/a.txt", "", ErrInvalid},
			{"trailing slash", h.c1, "dir/", "", ErrInvalid},
			{"NUL", h.c1, "a.txt\x00b", "", ErrInvalid},
			{"backslash", h.c1, `dir\\b.txt`, "", ErrInvalid},
			{"newline", h.c1, "a.txt\nHEAD", "", ErrInvalid},
			{"empty path", h.c1, "", "", ErrInvalid},
			{"option as commit", "--output=/tmp/x", "a.txt", "", ErrInvalid},
			{"path in commit", "main:a.txt", "a.txt", "", ErrInvalid},
			{"space in commit", "main a", "a.txt", "", ErrInvalid},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, err := ReadFile(ctx, h.bare, tc.commit, tc.file)
				if wantErr(t, err, tc.err) {
					return
				}
				if err != nil || string(got) != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
			})
		}
	})

	t.Run("ReadFile edge cases", func(t *testing.T) {
		_, err := ReadFile(ctx, h.bare, h.c1, "nope")
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a missing file is not fs.ErrNotExist: %v", err)
		}
		_, err = ReadFile(ctx, h.bare, h.c1, "dir")
		if !errors.Is(err, ErrNotFile) || errors.Is(err, ErrNotExist) || !strings.Contains(err.Error(), "dir at "+h.c1+" is a tree") {
			t.Fatalf("a directory: %v", err)
		}
	})

	t.Run("ChangedFiles", func(t *testing.T) {
		cases := []struct {
			name     string
			old, new string
			limit    int
			want     []string
			err      error
		}{
			{"between commits", h.c1, h.c2, 10, []string{"a.txt", "dir/b.txt", "new file.txt"}, nil},
			{"backwards", h.c2, h.c1, 10, []string{"a.txt", "dir/b.txt", "new file.txt"}, nil},
			{"one commit", h.c2, h.c3, 10, []string{"a.txt"}, nil},
			{"capped", h.c1, h.c2, 2, []string{"a.txt", "dir/b.txt"}, nil},
			{"created ref: whole tree", ZeroSHA, h.c1, 10, []string{".cnb.yml", "a.txt", "big.bin", "dir/b.txt"}, nil},
			{"created ref capped", ZeroSHA, h.c1, 1, []string{".cnb.yml"}, nil},
			{"deleted ref", h.c1, ZeroSHA, 10, nil, nil},
			{"same commit", h.c3, h.c3, 10, nil, nil},
			{"unknown old", bad, h.c1, 10, nil, ErrUnknownRevision},
			{"unknown new", h.c1, bad, 10, nil, ErrUnknownRevision},
			{"zero limit", h.c1, h.c2, 0, nil, ErrInvalid},
			{"option as sha", "--output=/tmp/x", h.c2, 10, nil, ErrInvalid},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, err := ChangedFiles(ctx, h.bare, tc.old, tc.new, tc.limit)
				if wantErr(t, err, tc.err) {
					return
				}
				if err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
			})
		}
	})

	t.Run("NewCommits", func(t *testing.T) {
		cases := []struct {
			name     string
			old, new string
			max      int
			want     int
			err      error
		}{
			{"fast-forward by two", h.c1, h.c3, 99, 2, nil},
			{"fast-forward by one", h.c2, h.c3, 99, 1, nil},
			{"capped", h.c1, h.c3, 1, 1, nil},
			{"created ref counts history", ZeroSHA, h.c3, 99, 3, nil},
			{"created ref capped", ZeroSHA, h.c3, 2, 2, nil},
			{"rewind brings nothing", h.c3, h.c1, 99, 0, nil},
			{"deleted ref", h.c3, ZeroSHA, 99, 0, nil},
			{"other branch", h.c3, h.feature, 99, 1, nil},
			{"unknown", bad, h.c3, 99, 0, ErrUnknownRevision},
			{"zero max", h.c1, h.c3, 0, 0, ErrInvalid},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, err := NewCommits(ctx, h.bare, tc.old, tc.new, tc.max)
				if wantErr(t, err, tc.err) {
					return
				}
				if err != nil || got != tc.want {
					t.Fatalf("got %d, %v; want %d", got, err, tc.want)
				}
			})
		}
	})

	t.Run("Commit", func(t *testing.T) {
		got, err := Commit(ctx, h.bare, h.c1)
		if err != nil {
			t.Fatal(err)
		}
		want := CommitInfo{
			SHA:            h.c1,
			Message:        "first line\n\nbody line one\nbody line two",
			Title:          "first line",
			AuthorName:     "Ann Author",
			AuthorEmail:    "ann@example.com",
			CommitterName:  "Test Committer",
			CommitterEmail: "committer@example.com",
			Time:           time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("", 8*3600)),
			CommitterTime:  time.Date(2024, 1, 2, 4, 5, 6, 0, time.UTC),
		}
		if !got.Time.Equal(want.Time) || !got.CommitterTime.Equal(want.CommitterTime) {
			t.Fatalf("times: %v %v", got.Time, got.CommitterTime)
		}
		if _, off := got.Time.Zone(); off != 8*3600 {
			t.Fatalf("author zone offset %d, want +8h", off)
		}
		got.Time, got.CommitterTime = want.Time, want.CommitterTime
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got  %+v\nwant %+v", got, want)
		}

		byRef, err := Commit(ctx, h.bare, "v1")
		if err != nil || byRef.SHA != h.c1 {
			t.Fatalf("Commit(v1) = %s, %v; want %s", byRef.SHA, err, h.c1)
		}
		one, err := Commit(ctx, h.bare, h.c3)
		if err != nil || one.Title != "third" || one.Message != "third" {
			t.Fatalf("Commit(c3) = %+v, %v", one, err)
		}
		for _, rev := range []string{bad, "nope", "--all", ""} {
			if _, err := Commit(ctx, h.bare, rev); !errors.Is(err, ErrUnknownRevision) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Commit(%q): %v", rev, err)
			}
		}
	})

	t.Run("ResolveRef", func(t *testing.T) {
		cases := []struct {
			ref  string
			want string
			err  error
		}{
			{"main", h.c3, nil},
			{"refs/heads/main", h.c3, nil},
			{"HEAD", h.c3, nil},
			{"feature/x", h.feature, nil},
			{"v1", h.c1, nil},
			{"refs/tags/v1", h.c1, nil},
			{h.c2, h.c2, nil},
			{h.c2[:12], h.c2, nil},
			{"main~2", h.c1, nil},
			{"nope", "", ErrUnknownRevision},
			{bad, "", ErrUnknownRevision},
			{"-x", "", ErrInvalid},
			{"main:a.txt", "", ErrInvalid},
			{"", "", ErrInvalid},
		}
		for _, tc := range cases {
			got, err := ResolveRef(ctx, h.bare, tc.ref)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Errorf("ResolveRef(%q): err = %v, want %v", tc.ref, err, tc.err)
				}
				continue
			}
			if err != nil || got != tc.want {
				t.Errorf("ResolveRef(%q) = %s, %v; want %s", tc.ref, got, err, tc.want)
			}
		}
	})

	t.Run("Branches and HEAD", func(t *testing.T) {
		got, err := Branches(ctx, h.bare)
		if err != nil || !slices.Equal(got, []string{"feature/x", "main"}) {
			t.Fatalf("Branches = %q, %v", got, err)
		}
		if err := SetHEAD(ctx, h.bare, "feature/x"); err != nil {
			t.Fatal(err)
		}
		if sha, err := ResolveRef(ctx, h.bare, "HEAD"); err != nil || sha != h.feature {
			t.Fatalf("HEAD after SetHEAD = %s, %v", sha, err)
		}
		for _, name := range []string{"", "-x", "a..b", "a b", "x.lock", "a/", "@{-1}"} {
			if err := SetHEAD(ctx, h.bare, name); !errors.Is(err, ErrInvalid) {
				t.Errorf("SetHEAD(%q): %v, want ErrInvalid", name, err)
			}
		}
		empty, err := IsEmpty(ctx, h.bare)
		if err != nil || empty {
			t.Fatalf("IsEmpty of a pushed repo = %v, %v", empty, err)
		}
	})
}

func TestInitBare(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "org", "repo.git")
	if err := InitBare(ctx, path, "trunk"); err != nil {
		t.Fatal(err)
	}
	head, err := run(ctx, path, nil, "symbolic-ref", "HEAD")
	if err != nil || strings.TrimSpace(string(head)) != "refs/heads/trunk" {
		t.Fatalf("HEAD = %q, %v", head, err)
	}
	bare, err := run(ctx, path, nil, "rev-parse", "--is-bare-repository")
	if err != nil || strings.TrimSpace(string(bare)) != "true" {
		t.Fatalf("bare = %q, %v", bare, err)
	}
	if empty, err := IsEmpty(ctx, path); err != nil || !empty {
		t.Fatalf("IsEmpty = %v, %v", empty, err)
	}
	if branches, err := Branches(ctx, path); err != nil || len(branches) != 0 {
		t.Fatalf("Branches = %q, %v", branches, err)
	}
	if _, err := ResolveRef(ctx, path, "HEAD"); !errors.Is(err, ErrUnknownRevision) {
		t.Fatalf("ResolveRef(HEAD) of an empty repo: %v", err)
	}

	if err := InitBare(ctx, path, "main"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second InitBare: %v, want fs.ErrExist", err)
	}
	if head, _ := run(ctx, path, nil, "symbolic-ref", "HEAD"); strings.TrimSpace(string(head)) != "refs/heads/trunk" {
		t.Fatalf("a refused InitBare changed HEAD to %q", head)
	}
	other := filepath.Join(dir, "other.git")
	if err := InitBare(ctx, other, "bad..name"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("InitBare with a bad branch: %v", err)
	}
	if entries, _ := filepath.Glob(other); len(entries) != 0 {
		t.Fatalf("a refused InitBare left %v behind", entries)
	}
}
