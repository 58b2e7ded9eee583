package volumes

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// The store is tested on the real file system with real overlay mounts (as root, which the
// agent is on its hosts and in CI) and with the copy fallback, against the same expectations.

const (
	cow   = protocol.VolumeCopyOnWrite
	cowro = protocol.VolumeCopyOnWriteReadOnly
	rw    = protocol.VolumeReadWrite
	ro    = protocol.VolumeReadOnly
)

// modes are the two ways a copy-on-write cache is made; overlay needs root and overlayfs, which
// CI has: there their absence fails the test instead of skipping it.
var modes = []string{MethodOverlay, MethodCopy}

func openStore(t *testing.T, mode string, cfg Config) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "caches")
	}
	cfg.NoOverlay = mode == MethodCopy
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if ok, why := s.Overlay(); mode == MethodOverlay && !ok {
		msg := "overlayfs is not usable here: " + why
		if testenv.CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return s
}

func eachMode(t *testing.T, f func(t *testing.T, mode string)) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { f(t, mode) })
	}
}

var key = Key{Repo: "42", Path: "/root/.m2"}

func acquire(t *testing.T, s *Store, k Key, typ string) *Mount {
	t.Helper()
	m, err := s.Acquire(context.Background(), k, typ)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func release(t *testing.T, m *Mount, keep bool) Result {
	t.Helper()
	res, err := m.Release(keep)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tree is a directory's content: "dir/" for a directory, "->target" for a symbolic link,
// otherwise a file's content.
type tree map[string]string

func writeTree(t *testing.T, dir string, tr tree) {
	t.Helper()
	names := make([]string, 0, len(tr))
	for n := range tr {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		v := tr[n]
		var err error
		switch {
		case strings.HasSuffix(n, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(v, "->"):
			os.MkdirAll(filepath.Dir(p), 0o755)
			err = os.Symlink(v[2:], p)
		default:
			os.MkdirAll(filepath.Dir(p), 0o755)
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func readTree(t *testing.T, dir string) tree {
	t.Helper()
	out := tree{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			out[rel+"/"] = ""
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "->" + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want tree) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v\nwant %v", what, got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("%s: %q is %q (present %v), want %q\ngot %v", what, k, g, ok, v, got)
		}
	}
}

// seed makes the cache's content tr through a successful copy-on-write pipeline.
func seed(t *testing.T, s *Store, k Key, tr tree) {
	t.Helper()
	m := acquire(t, s, k, cow)
	writeTree(t, m.Dir, tr)
	if res := release(t, m, true); res.Outcome != Saved {
		t.Fatalf("seeding: %+v", res)
	}
}

// content is what a fresh read-only mount of the cache shows.
func content(t *testing.T, s *Store, k Key) tree {
	t.Helper()
	m := acquire(t, s, k, ro)
	defer release(t, m, false)
	return readTree(t, m.Dir)
}

func TestCopyOnWriteKeepsWhatThePipelineLeft(t *testing.T) {
	base := tree{"keep": "k", "change": "old", "gone": "g", "dir/": "", "dir/a": "a", "dir/sub/": "", "dir/sub/b": "b",
		"swap/": "", "swap/x": "x", "file2dir": "f", "link": "->keep", "emptydir/": ""}
	for _, tt := range []struct {
		name string
		do   func(t *testing.T, dir string)
		want tree
	}{
		{"nothing", func(t *testing.T, dir string) {}, base},
		{"edit add and delete files", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "change"), []byte("new"), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "dir/sub/new"), []byte("n"), 0o644))
			must(t, os.Remove(filepath.Join(dir, "gone")))
			must(t, os.Remove(filepath.Join(dir, "dir/sub/b")))
		}, tree{"keep": "k", "change": "new", "dir/": "", "dir/a": "a", "dir/sub/": "", "dir/sub/new": "n",
			"swap/": "", "swap/x": "x", "file2dir": "f", "link": "->keep", "emptydir/": ""}},
		{"a directory deleted and made again hides its old content", func(t *testing.T, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, "dir")))
			must(t, os.MkdirAll(filepath.Join(dir, "dir"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "dir/only"), []byte("o"), 0o644))
		}, tree{"keep": "k", "change": "old", "gone": "g", "dir/": "", "dir/only": "o",
			"swap/": "", "swap/x": "x", "file2dir": "f", "link": "->keep", "emptydir/": ""}},
		{"a file becomes a directory and a directory a file", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "file2dir")))
			must(t, os.Mkdir(filepath.Join(dir, "file2dir"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "file2dir/in"), []byte("i"), 0o644))
			must(t, os.RemoveAll(filepath.Join(dir, "swap")))
			must(t, os.WriteFile(filepath.Join(dir, "swap"), []byte("now a file"), 0o644))
		}, tree{"keep": "k", "change": "old", "gone": "g", "dir/": "", "dir/a": "a", "dir/sub/": "", "dir/sub/b": "b",
			"swap": "now a file", "file2dir/": "", "file2dir/in": "i", "link": "->keep", "emptydir/": ""}},
		{"links and a removed empty directory", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "link")))
			must(t, os.Symlink("dir/a", filepath.Join(dir, "link")))
			must(t, os.Link(filepath.Join(dir, "keep"), filepath.Join(dir, "hard")))
			must(t, os.Remove(filepath.Join(dir, "emptydir")))
		}, tree{"keep": "k", "hard": "k", "change": "old", "gone": "g", "dir/": "", "dir/a": "a", "dir/sub/": "",
			"dir/sub/b": "b", "swap/": "", "swap/x": "x", "file2dir": "f", "link": "->dir/a"}},
		{"a renamed directory (mv copies it as overlay refuses the rename)", func(t *testing.T, dir string) {
			err := os.Rename(filepath.Join(dir, "dir"), filepath.Join(dir, "moved"))
			if errors.Is(err, syscall.EXDEV) {
				must(t, copyTree(context.Background(), filepath.Join(dir, "dir"), filepath.Join(dir, "moved")))
				err = os.RemoveAll(filepath.Join(dir, "dir"))
			}
			must(t, err)
		}, tree{"keep": "k", "change": "old", "gone": "g", "moved/": "", "moved/a": "a", "moved/sub/": "", "moved/sub/b": "b",
			"swap/": "", "swap/x": "x", "file2dir": "f", "link": "->keep", "emptydir/": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachMode(t, func(t *testing.T, mode string) {
				s := openStore(t, mode, Config{})
				seed(t, s, key, base)
				m := acquire(t, s, key, cow)
				if m.Method != mode || m.Fresh {
					t.Fatalf("mount %+v, want method %s", m, mode)
				}
				sameTree(t, "restored", readTree(t, m.Dir), base)
				tt.do(t, m.Dir)
				sameTree(t, "in the pipeline", readTree(t, m.Dir), tt.want)
				release(t, m, true)
				sameTree(t, "next pipeline", content(t, s, key), tt.want)
			})
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOnlySuccessKeepsChangesAndOnlyCopyOnWrite(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		s := openStore(t, mode, Config{})
		seed(t, s, key, tree{"a": "1"})
		for _, tt := range []struct {
			typ  string
			keep bool
			want string
		}{
			{cow, false, Discarded},
			{cowro, true, Discarded},
			{cowro, false, Discarded},
		} {
			m := acquire(t, s, key, tt.typ)
			must(t, os.WriteFile(filepath.Join(m.Dir, "a"), []byte("changed"), 0o644))
			must(t, os.WriteFile(filepath.Join(m.Dir, "b"), []byte("new"), 0o644))
			if res := release(t, m, tt.keep); res.Outcome != tt.want {
				t.Fatalf("%s keep=%v: %+v", tt.typ, tt.keep, res)
			}
			sameTree(t, tt.typ, content(t, s, key), tree{"a": "1"})
		}
		// An untouched copy-on-write overlay makes no new version.
		m := acquire(t, s, key, cow)
		if res := release(t, m, true); mode == MethodOverlay && res.Outcome != Unchanged {
			t.Fatalf("untouched: %+v", res)
		}
	})
}

func TestReadWriteAndReadOnlyBindTheCurrentVersion(t *testing.T) {
	s := openStore(t, MethodCopy, Config{})
	seed(t, s, key, tree{"a": "1"})
	m := acquire(t, s, key, rw)
	if m.Method != MethodBind || m.ReadOnly {
		t.Fatalf("read-write: %+v", m)
	}
	must(t, os.WriteFile(filepath.Join(m.Dir, "b"), []byte("2"), 0o644))
	if res := release(t, m, false); res.Outcome != InPlace || res.Bytes == 0 {
		t.Fatalf("read-write release: %+v", res) // written in place, whatever the outcome
	}
	r := acquire(t, s, key, ro)
	if r.Method != MethodBind || !r.ReadOnly {
		t.Fatalf("read-only: %+v", r)
	}
	sameTree(t, "read-only", readTree(t, r.Dir), tree{"a": "1", "b": "2"})
	release(t, r, true)
}

// Concurrent pipelines on one cache: each sees the version it started from and its own writes,
// never another's; the last to succeed wins, whole; the old version stays intact for a pipeline
// still reading it, and goes once nobody does.
func TestConcurrentPipelinesNeverMix(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		s := openStore(t, mode, Config{})
		seed(t, s, key, tree{"base": "0"})
		a, b, reader := acquire(t, s, key, cow), acquire(t, s, key, cow), acquire(t, s, key, ro)
		writeTree(t, a.Dir, tree{"from-a": "a", "shared": "a"})
		writeTree(t, b.Dir, tree{"from-b": "b", "shared": "b"})
		must(t, os.Remove(filepath.Join(b.Dir, "base")))
		sameTree(t, "a's view", readTree(t, a.Dir), tree{"base": "0", "from-a": "a", "shared": "a"})
		release(t, a, true)
		sameTree(t, "after a", content(t, s, key), tree{"base": "0", "from-a": "a", "shared": "a"})
		sameTree(t, "b's view after a", readTree(t, b.Dir), tree{"from-b": "b", "shared": "b"})
		release(t, b, true)
		sameTree(t, "after b", content(t, s, key), tree{"from-b": "b", "shared": "b"})
		sameTree(t, "the old version, still read", readTree(t, reader.Dir), tree{"base": "0"})
		old := reader.Dir
		release(t, reader, false)
		if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the old version outlived its last reader: %v", err)
		}
	})
}

// Many pipelines at once, each writing a whole set of files with its own mark: the cache ends
// as exactly one pipeline's set.
func TestManyConcurrentWritersLeaveOneWholeVersion(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		s := openStore(t, mode, Config{})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				m, err := s.Acquire(context.Background(), key, cow)
				if err != nil {
					t.Error(err)
					return
				}
				mark := string(rune('a' + w))
				for i := range 20 {
					os.WriteFile(filepath.Join(m.Dir, "f"+string(rune('a'+i))), []byte(mark), 0o644)
				}
				if _, err := m.Release(true); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got := content(t, s, key)
		if len(got) != 20 {
			t.Fatalf("%d files: %v", len(got), got)
		}
		for name, v := range got {
			if v != got["fa"] {
				t.Fatalf("a mix of pipelines: %s is %q, fa is %q", name, v, got["fa"])
			}
		}
		entries, _ := os.ReadDir(filepath.Join(s.dir, reposDir, filepath.FromSlash(cacheID(key))))
		if len(entries) != 2 { // meta.json and the current version
			t.Fatalf("old versions left behind: %v", entries)
		}
	})
}

func TestCachesAreKeptApartByRepositoryGroupAndPath(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := openStore(t, MethodCopy, Config{Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	keys := []Key{{Repo: "1", Path: "/c"}, {Repo: "2", Path: "/c"}, {Repo: "1", Group: "main", Path: "/c"},
		{Repo: "1", Path: "c"}, {Repo: "team/x y", Path: "/c"}}
	for i, k := range keys {
		seed(t, s, k, tree{"who": string(rune('0' + i))})
	}
	for i, k := range keys {
		sameTree(t, k.Repo+" "+k.String(), content(t, s, k), tree{"who": string(rune('0' + i))})
	}
	if got := strings.Join(s.Repos(), ","); got != "team/x y,1,2" { // the most recently used first
		t.Fatalf("Repos() = %q", got)
	}
}

func TestAnEmptyCacheIsNotKept(t *testing.T) {
	s := openStore(t, MethodCopy, Config{})
	m := acquire(t, s, key, ro)
	if !m.Fresh {
		t.Fatalf("a new cache: %+v", m)
	}
	release(t, m, true)
	if r := s.Repos(); len(r) != 0 {
		t.Fatalf("an empty cache was kept: %v", r)
	}
}

// The budget: least recently used caches go first, never one in use, and what stays is within
// the budget (on disk too).
func TestEvictionKeepsTheBudget(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	dir := filepath.Join(t.TempDir(), "caches")
	s := openStore(t, MethodCopy, Config{Dir: dir, Budget: 3 << 20, Now: now})
	blob := strings.Repeat("x", 1<<20)
	k := func(p string) Key { return Key{Repo: "7", Path: p} }
	seed(t, s, k("/a"), tree{"blob": blob})
	seed(t, s, k("/b"), tree{"blob": blob})
	held := acquire(t, s, k("/a"), ro) // a is now the most recently used, and in use
	seed(t, s, k("/c"), tree{"blob": blob})
	seed(t, s, k("/d"), tree{"blob": blob}) // 4 MiB > 3 MiB: b (least recently used) goes
	if got := cachePaths(s); got != "/a,/c,/d" {
		t.Fatalf("after d: %s", got)
	}
	seed(t, s, k("/e"), tree{"blob": blob}) // a is in use: c goes
	if got := cachePaths(s); got != "/a,/d,/e" {
		t.Fatalf("after e, with a in use: %s", got)
	}
	release(t, held, false)
	total, budget := s.Usage()
	if total > budget {
		t.Fatalf("usage %d over the budget %d", total, budget)
	}
	if onDisk, err := diskUsage(dir); err != nil || onDisk > budget+64<<10 { // meta.json files, directories
		t.Fatalf("%d bytes on disk for a budget of %d (%v)", onDisk, budget, err)
	}
	// A cache bigger than the whole budget is not kept.
	seed(t, s, k("/huge"), tree{"blob": strings.Repeat("y", 4<<20)})
	if got := cachePaths(s); strings.Contains(got, "/huge") {
		t.Fatalf("a cache over the budget was kept: %s", got)
	}
}

func cachePaths(s *Store) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.caches {
		out = append(out, c.meta.Path)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// After a crash (nothing released, overlays still mounted), Open unmounts and removes what the
// pipelines left, keeps the current versions, and evicts down to the budget.
func TestOpenRecoversAfterACrash(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		dir := filepath.Join(t.TempDir(), "caches")
		s := openStore(t, mode, Config{Dir: dir})
		seed(t, s, key, tree{"a": "1"})
		m := acquire(t, s, key, cow)
		writeTree(t, m.Dir, tree{"half": "written"})
		s.Close() // the crash: m is never released

		again, err := Open(Config{Dir: dir, NoOverlay: mode == MethodCopy})
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		sameTree(t, "after the crash", content(t, again, key), tree{"a": "1"})
		points, err := mountsUnder(dir)
		if err != nil || len(points) != 0 {
			t.Fatalf("mounts left: %v %v", points, err)
		}
		if entries, _ := os.ReadDir(filepath.Join(dir, mountsDir)); len(entries) != 0 {
			t.Fatalf("mount dirs left: %v", entries)
		}
	})
	dir := filepath.Join(t.TempDir(), "caches")
	s := openStore(t, MethodCopy, Config{Dir: dir})
	seed(t, s, key, tree{"a": "1"})
	s.Close()
	again := openStore(t, MethodCopy, Config{Dir: dir})
	sameTree(t, "after a restart", content(t, again, key), tree{"a": "1"})
}

func TestOneStorePerDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "caches")
	openStore(t, MethodCopy, Config{Dir: dir})
	if _, err := Open(Config{Dir: dir, NoOverlay: true}); err == nil || !strings.Contains(err.Error(), "another agent") {
		t.Fatalf("a second store on the same directory: %v", err)
	}
}

func TestAcquireRefusesWhatIsNotACache(t *testing.T) {
	s := openStore(t, MethodCopy, Config{})
	for _, tt := range []struct {
		k   Key
		typ string
	}{
		{key, protocol.VolumeData},
		{Key{Path: "/x"}, cow},
		{Key{Repo: "1"}, cow},
	} {
		if _, err := s.Acquire(context.Background(), tt.k, tt.typ); err == nil {
			t.Errorf("%+v %s: no error", tt.k, tt.typ)
		}
	}
}

// Modes, owners and times of what a pipeline leaves survive into the next version.
func TestMetadataSurvives(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		s := openStore(t, mode, Config{})
		seed(t, s, key, tree{"bin/": "", "bin/tool": "#!/bin/sh", "data": "d"})
		m := acquire(t, s, key, cow)
		when := time.Date(2020, 2, 2, 2, 2, 2, 0, time.UTC)
		must(t, os.Chmod(filepath.Join(m.Dir, "bin/tool"), 0o755))
		must(t, os.Chmod(filepath.Join(m.Dir, "bin"), 0o750))
		must(t, os.Lchown(filepath.Join(m.Dir, "data"), 1234, 5678))
		must(t, os.Chtimes(filepath.Join(m.Dir, "data"), when, when))
		release(t, m, true)
		r := acquire(t, s, key, ro)
		defer release(t, r, false)
		for _, tt := range []struct {
			name string
			mode fs.FileMode
		}{{"bin/tool", 0o755}, {"bin", 0o750 | fs.ModeDir}} {
			if fi, err := os.Stat(filepath.Join(r.Dir, tt.name)); err != nil || fi.Mode() != tt.mode {
				t.Errorf("%s: %v %v, want %v", tt.name, fi.Mode(), err, tt.mode)
			}
		}
		fi, err := os.Stat(filepath.Join(r.Dir, "data"))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.ModTime().Equal(when) || os.Geteuid() == 0 && (st.Uid != 1234 || st.Gid != 5678) {
			t.Errorf("data: mtime %v owner %d:%d", fi.ModTime(), st.Uid, st.Gid)
		}
	})
}
