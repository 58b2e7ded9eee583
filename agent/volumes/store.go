// Package volumes keeps the caches of docker.volumes on an agent host, per repository, group and
// path, and hands each pipeline a directory to bind into its job containers. It is intended for
// internal use of the agent only (agent/runner mounts what it hands out).
//
// A cache is a sequence of immutable version directories and a meta.json whose "current" names
// the live one; meta.json is replaced by rename, so switching versions is atomic:
//
//	<dir>/repos/<repo>/<cache>/meta.json   repo, group, path, current, bytes, last use
//	                          /v7/         the current version (older ones while in use)
//	<dir>/mounts/<n>/upper, work, merged   one pipeline's overlay (or copy/ without overlayfs)
//
// What each type gets (Acquire):
//
//   - copy-on-write: a kernel overlay, lower = the current version, with an upper and work dir
//     of its own. On success (Release(true)) a new version is made: a hard-link clone of the
//     lower with the upper applied (whiteouts delete, opaque directories replace, everything
//     else is renamed in), flushed to disk, then made current. The overlay never writes a lower
//     file in place, so the old version stays intact for pipelines still reading it; the last
//     successful pipeline wins, whole, and no pipeline sees another's half-written state. On
//     failure the upper is dropped. Without overlayfs (no root, an upper dir on overlayfs or
//     NFS, an old kernel) the same holds with a full copy instead of the overlay (slower).
//   - copy-on-write-read-only: the same overlay (or copy), always dropped.
//   - read-write: the current version itself, bound read-write: writes land at once, for every
//     pipeline using the cache; concurrent writers are the user's business, as in CNB. Because
//     versions share unchanged files by hard links, an in-place write also reaches older
//     versions still in use; keep a path either read-write or copy-on-write.
//   - read-only: the current version, bound read-only (the kernel refuses writes).
//
// Old versions are removed once no pipeline uses them. Caches are evicted least recently used
// first (never one in use) whenever their total size is over the budget: at Open and after each
// Release. A cache that ends up empty is not kept. Caches never cross repositories: the key
// starts with the repository id.
//
// One Store per directory: Open takes a lock on it, and a second agent on the same work dir is
// refused instead of evicting the first one's caches under its feet. After a crash Open
// unmounts and removes what pipelines left, and every version but the current one.
package volumes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// DefaultBudget is the cache budget of an agent that sets none.
const DefaultBudget int64 = 20 << 30

// Config says where a Store keeps its caches and how much room they may take.
type Config struct {
	// Dir is the store's directory: <agent work dir>/caches.
	Dir string
	// Budget is the most bytes the caches may take together; 0 means DefaultBudget.
	Budget int64
	Log    *slog.Logger
	// NoOverlay makes copy-on-write caches full copies even where overlayfs works.
	NoOverlay bool
	// Now is the clock of last uses; nil means time.Now.
	Now func() time.Time
}

// Key names a cache. Repo is the repository id (the plan's CNB_REPO_ID), Group the volume's
// group ("" is the repository's shared group), Path the path as the pipeline gave it
// (absolute, or relative to the checkout).
type Key struct {
	Repo, Group, Path string
}

func (k Key) String() string {
	if k.Group == "" {
		return k.Path
	}
	return k.Group + ":" + k.Path
}

// Store keeps caches. Its methods are safe for concurrent use.
type Store struct {
	dir         string
	budget      int64
	log         *slog.Logger
	now         func() time.Time
	lock        *os.File
	overlayOpts string // the overlay mount options that work here; "" = no overlay
	noOverlay   string // why there is no overlay

	mu     sync.Mutex
	caches map[string]*cache // by id (<repo>/<cache>)
	seq    int64             // names of mount and trash dirs
}

// cache is one cache of the index.
type cache struct {
	id      string
	dir     string
	meta    meta
	users   map[string]int  // version → mounts using it
	pending map[string]bool // versions being made
}

// meta is a cache's meta.json.
type meta struct {
	Repo     string    `json:"repo"`
	Group    string    `json:"group"`
	Path     string    `json:"path"`
	Current  string    `json:"current"`
	Next     int       `json:"next"`  // number of the next version
	Bytes    int64     `json:"bytes"` // of the current version
	LastUsed time.Time `json:"lastUsed"`
}

// Layout of the store's directory.
const (
	lockFile  = ".lock"
	reposDir  = "repos"
	mountsDir = "mounts"
	trashDir  = "trash"
	probeDir  = "probe"
	metaFile  = "meta.json"
	tmpPrefix = "tmp-"
)

// Open opens (creating it when needed) the store in cfg.Dir: it takes the directory's lock,
// cleans up after a crash, finds out whether overlayfs works here, and evicts what is over the
// budget. The caller must Close it.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("volumes: a directory is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	// Caches hold every repository's dependencies: only the agent reads them from the host.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, budget: cfg.Budget, log: cfg.Log, now: cfg.Now, lock: lock, caches: map[string]*cache{}}
	if s.budget <= 0 {
		s.budget = DefaultBudget
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.recover(); err != nil {
		lock.Close()
		return nil, err
	}
	if cfg.NoOverlay {
		s.noOverlay = "overlayfs is turned off in the agent's configuration"
	} else if opts, err := probeOverlay(filepath.Join(dir, probeDir)); err != nil {
		s.noOverlay = "overlayfs does not work here: " + err.Error()
		s.log.Warn("copy-on-write caches are copied instead of overlaid (slower, same behaviour)", "reason", s.noOverlay)
	} else {
		s.overlayOpts = opts
	}
	s.evict()
	return s, nil
}

// lockDir takes an exclusive lock on dir for as long as the process holds the returned file.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("volumes: %s is used by another agent process (each agent needs a work dir of its own)", dir)
		}
		return nil, fmt.Errorf("volumes: lock %s: %w", dir, err)
	}
	return f, nil
}

// Close releases the store's directory; a nil Store has nothing to release. Mounts still held
// stay valid until released.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	return s.lock.Close()
}

// Overlay says whether copy-on-write caches use overlayfs, and why not when they do not.
func (s *Store) Overlay() (bool, string) { return s.overlayOpts != "", s.noOverlay }

// Repos lists the repository ids this host holds caches for, the most recently used first:
// what the scheduler may prefer this agent for (PollRequest.Caches, which the server reads only
// so far).
func (s *Store) Repos() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := map[string]time.Time{}
	for _, c := range s.caches {
		if t, ok := last[c.meta.Repo]; !ok || c.meta.LastUsed.After(t) {
			last[c.meta.Repo] = c.meta.LastUsed
		}
	}
	out := make([]string, 0, len(last))
	for r := range last {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if ti, tj := last[out[i]], last[out[j]]; !ti.Equal(tj) {
			return ti.After(tj)
		}
		return out[i] < out[j]
	})
	return out
}

// Usage is the size of all caches (their current versions) and the budget, in bytes.
func (s *Store) Usage() (total, budget int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.caches {
		total += c.meta.Bytes
	}
	return total, s.budget
}

// recover cleans up after a crash: overlays left mounted, half-made versions, versions no
// pipeline can be using any more, caches whose meta.json is unreadable. It fills the index.
func (s *Store) recover() error {
	if err := unmountUnder(s.dir); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	for _, d := range []string{mountsDir, trashDir, probeDir} {
		if err := os.RemoveAll(filepath.Join(s.dir, d)); err != nil {
			return fmt.Errorf("volumes: remove leftovers: %w", err)
		}
	}
	for _, d := range []string{mountsDir, trashDir, reposDir} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o700); err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
	}
	repos, err := os.ReadDir(filepath.Join(s.dir, reposDir))
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	for _, r := range repos {
		entries, err := os.ReadDir(filepath.Join(s.dir, reposDir, r.Name()))
		if err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
		for _, e := range entries {
			if err := s.load(r.Name() + "/" + e.Name()); err != nil {
				return err
			}
		}
		os.Remove(filepath.Join(s.dir, reposDir, r.Name())) // only when empty
	}
	return nil
}

// load adds one cache directory to the index, or removes it when it is unusable.
func (s *Store) load(id string) error {
	dir := filepath.Join(s.dir, reposDir, filepath.FromSlash(id))
	m, err := readMeta(dir)
	if err == nil {
		if fi, serr := os.Stat(filepath.Join(dir, m.Current)); serr != nil || !fi.IsDir() || !validVersion(m.Current) {
			err = fmt.Errorf("its current version %q is missing", m.Current)
		}
	}
	if err != nil {
		s.log.Warn("removing an unusable cache", "dir", dir, "err", err)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	for _, e := range entries {
		if e.Name() != metaFile && e.Name() != m.Current {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("volumes: %w", err)
			}
		}
	}
	s.caches[id] = &cache{id: id, dir: dir, meta: m, users: map[string]int{}, pending: map[string]bool{}}
	return nil
}

func readMeta(dir string) (meta, error) {
	var m meta
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", metaFile, err)
	}
	return m, nil
}

// saveLocked writes a cache's meta.json by rename, so a crash leaves the old one or the new one.
func (s *Store) saveLocked(c *cache) error {
	b, err := json.Marshal(c.meta)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	tmp := filepath.Join(c.dir, metaFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, metaFile)); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	return nil
}

func validVersion(name string) bool {
	n, ok := strings.CutPrefix(name, "v")
	_, err := strconv.Atoi(n)
	return ok && err == nil
}

// cacheID is where a key's cache lives under repos/: a directory per repository (its id when
// that is a plain name, else a hash) and one per group and path (a hash; meta.json says which).
func cacheID(k Key) string {
	repo := "h-" + hash(k.Repo)
	if plainName(k.Repo) {
		repo = "r-" + k.Repo
	}
	return repo + "/" + hash(k.Group+"\x00"+k.Path)
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

func plainName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// cacheLocked returns the key's cache, creating it with an empty first version.
func (s *Store) cacheLocked(k Key) (*cache, bool, error) {
	id := cacheID(k)
	if c := s.caches[id]; c != nil {
		return c, false, nil
	}
	dir := filepath.Join(s.dir, reposDir, filepath.FromSlash(id))
	if err := os.RemoveAll(dir); err != nil { // a leftover the index does not know
		return nil, false, fmt.Errorf("volumes: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "v1"), 0o755); err != nil {
		return nil, false, fmt.Errorf("volumes: %w", err)
	}
	c := &cache{id: id, dir: dir, users: map[string]int{}, pending: map[string]bool{},
		meta: meta{Repo: k.Repo, Group: k.Group, Path: k.Path, Current: "v1", Next: 2, LastUsed: s.now()}}
	if err := s.saveLocked(c); err != nil {
		os.RemoveAll(dir)
		return nil, false, err
	}
	s.caches[id] = c
	return c, true, nil
}

// Methods of a Mount: how its directory came to be.
const (
	MethodOverlay = "overlay" // a kernel overlay over the current version
	MethodCopy    = "copy"    // a full copy of the current version
	MethodBind    = "bind"    // the current version itself
)

// Mount is one pipeline's use of a cache: a host directory to bind at the volume's path.
type Mount struct {
	// Dir is the host directory to bind into the job containers.
	Dir string
	// ReadOnly means bind Dir read-only (type read-only).
	ReadOnly bool
	// Method is MethodOverlay, MethodCopy or MethodBind.
	Method string
	// Fallback is why a copy-on-write cache is a copy instead of an overlay; "" otherwise.
	Fallback string
	// Bytes is the size of the version the mount started from; Fresh says the cache was made
	// for it (nothing to restore).
	Bytes int64
	Fresh bool

	s       *Store
	c       *cache
	typ     string
	version string
	work    string // the mount's own directory under mounts/; "" for a bind
	once    sync.Once
}

// Acquire hands out a directory for the cache of k used as typ (a protocol.Volume* type other
// than data). The caller must Release it when the pipeline ends.
func (s *Store) Acquire(ctx context.Context, k Key, typ string) (*Mount, error) {
	switch typ {
	case protocol.VolumeCopyOnWrite, protocol.VolumeCopyOnWriteReadOnly, protocol.VolumeReadWrite, protocol.VolumeReadOnly:
	default:
		return nil, fmt.Errorf("volumes: type %q is not a cache", typ)
	}
	if k.Repo == "" || k.Path == "" {
		return nil, errors.New("volumes: a cache needs a repository id and a path")
	}
	s.mu.Lock()
	c, fresh, err := s.cacheLocked(k)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	m := &Mount{s: s, c: c, typ: typ, version: c.meta.Current, Bytes: c.meta.Bytes, Fresh: fresh}
	c.users[m.version]++
	c.meta.LastUsed = s.now()
	if err := s.saveLocked(c); err != nil {
		s.log.Warn("recording a cache's last use failed", "cache", k.String(), "err", err)
	}
	s.mu.Unlock()

	current := filepath.Join(c.dir, m.version)
	switch typ {
	case protocol.VolumeReadWrite, protocol.VolumeReadOnly:
		m.Dir, m.Method, m.ReadOnly = current, MethodBind, typ == protocol.VolumeReadOnly
		return m, nil
	}
	if err := m.writable(ctx, current); err != nil {
		s.finish(m, "", 0, false)
		if m.work != "" {
			os.RemoveAll(m.work)
		}
		return nil, err
	}
	return m, nil
}

// writable makes the mount's private writable view of lower: an overlay, else a copy.
func (m *Mount) writable(ctx context.Context, lower string) error {
	s := m.s
	s.mu.Lock()
	s.seq++
	m.work = filepath.Join(s.dir, mountsDir, strconv.FormatInt(s.seq, 10))
	s.mu.Unlock()
	if err := os.Mkdir(m.work, 0o700); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	m.Fallback = s.noOverlay
	if s.overlayOpts != "" {
		err := m.overlay(lower)
		if err == nil {
			return nil
		}
		// The probe passed, so this is particular to the cache (say, a path too long for the
		// mount options): a copy still gives the pipeline what it asked for.
		m.Fallback = err.Error()
		s.log.Warn("a copy-on-write cache is copied instead of overlaid", "dir", lower, "err", err)
		for _, d := range []string{"upper", "work", "merged"} {
			os.RemoveAll(filepath.Join(m.work, d))
		}
	}
	dst := filepath.Join(m.work, "copy")
	if err := copyTree(ctx, lower, dst); err != nil {
		return fmt.Errorf("volumes: copy the cache: %w", err)
	}
	m.Dir, m.Method = dst, MethodCopy
	return nil
}

// overlay mounts the overlay of the mount; the merged root looks like lower's.
func (m *Mount) overlay(lower string) error {
	upper, work, merged := filepath.Join(m.work, "upper"), filepath.Join(m.work, "work"), filepath.Join(m.work, "merged")
	for _, d := range []string{upper, work, merged} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
	}
	fi, err := os.Lstat(lower)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if err := copyMeta(upper, fi); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if err := mountOverlay(lower, upper, work, merged, m.s.overlayOpts); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	m.Dir, m.Method = merged, MethodOverlay
	return nil
}

// Outcomes of Release.
const (
	Saved     = "saved"            // a new version is current
	Unchanged = "unchanged"        // nothing was written, or nothing could be
	Discarded = "discarded"        // the pipeline's changes were dropped
	InPlace   = "written in place" // read-write: the writes are already there
)

// Result is what Release did.
type Result struct {
	Outcome string
	// Bytes is the cache's size after the release.
	Bytes int64
}

// Release ends the pipeline's use of the cache. keep says the pipeline succeeded: only then do
// a copy-on-write cache's changes become its new version. An error means the changes were
// dropped (the cache is as it was). Releasing twice does nothing the second time.
func (m *Mount) Release(keep bool) (Result, error) {
	res := Result{Outcome: Unchanged}
	var err error
	m.once.Do(func() { res, err = m.release(keep) })
	return res, err
}

func (m *Mount) release(keep bool) (Result, error) {
	s := m.s
	res := Result{Outcome: Unchanged}
	var version string
	var bytes int64
	var measured bool
	var err error
	switch {
	case m.Method == MethodBind && m.typ == protocol.VolumeReadWrite:
		res.Outcome = InPlace
		bytes, err = diskUsage(m.Dir)
		measured = err == nil
	case m.Method == MethodBind:
	case m.Method == MethodOverlay:
		if err = unmount(m.Dir); err != nil {
			res.Outcome = Discarded
			break
		}
		fallthrough
	default:
		if !keep || m.typ != protocol.VolumeCopyOnWrite {
			res.Outcome = Discarded
			break
		}
		version, bytes, err = m.save()
		switch {
		case err != nil:
			res.Outcome = Discarded
		case version != "":
			res.Outcome = Saved
		}
	}
	res.Bytes = s.finish(m, version, bytes, measured)
	if m.work != "" {
		if rerr := os.RemoveAll(m.work); rerr != nil {
			s.log.Warn("removing a pipeline's cache mount failed", "dir", m.work, "err", rerr)
		}
	}
	s.evict()
	if err != nil {
		return res, fmt.Errorf("volumes: cache %s: %w", m.key(), err)
	}
	return res, nil
}

func (m *Mount) key() Key {
	return Key{Repo: m.c.meta.Repo, Group: m.c.meta.Group, Path: m.c.meta.Path}
}

// save turns the mount's changes into a new version of the cache and returns its name and size;
// "" when there were no changes.
func (m *Mount) save() (string, int64, error) {
	if m.Method == MethodOverlay {
		upper := filepath.Join(m.work, "upper")
		if empty, err := isEmptyDir(upper); err != nil || empty {
			return "", 0, err
		}
	}
	name := m.s.allocVersion(m.c)
	dst := filepath.Join(m.c.dir, name)
	bytes, err := m.build(dst)
	if err != nil {
		m.s.unpend(m.c, name)
		return "", 0, err
	}
	return name, bytes, nil
}

// build makes the new version at dst: under a temporary name until it is complete and on disk.
func (m *Mount) build(dst string) (int64, error) {
	tmp := filepath.Join(filepath.Dir(dst), tmpPrefix+filepath.Base(dst))
	var err error
	if m.Method == MethodOverlay {
		if err = cloneTree(filepath.Join(m.c.dir, m.version), tmp); err == nil {
			err = applyUpper(filepath.Join(m.work, "upper"), tmp)
		}
	} else {
		err = os.Rename(m.Dir, tmp)
	}
	var bytes int64
	if err == nil {
		bytes, err = diskUsage(tmp)
	}
	if err == nil {
		err = syncFS(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return 0, err
	}
	return bytes, nil
}

// allocVersion names the next version of a cache and keeps it from being collected while it is
// made.
func (s *Store) allocVersion(c *cache) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := "v" + strconv.Itoa(c.meta.Next)
	c.meta.Next++
	c.pending[name] = true
	return name
}

func (s *Store) unpend(c *cache, name string) {
	s.mu.Lock()
	delete(c.pending, name)
	s.mu.Unlock()
}

// finish records the end of a mount: version (when not "") becomes current with bytes, or bytes
// is the current version's new size when measured. Versions nobody uses any more are removed,
// and so is the whole cache when it is unused and empty. It returns the cache's size.
func (s *Store) finish(m *Mount, version string, bytes int64, measured bool) int64 {
	c := m.c
	s.mu.Lock()
	if c.users[m.version]--; c.users[m.version] <= 0 {
		delete(c.users, m.version)
	}
	switch {
	case version != "":
		delete(c.pending, version)
		c.meta.Current, c.meta.Bytes = version, bytes
	case measured && c.meta.Current == m.version:
		c.meta.Bytes = bytes
	}
	c.meta.LastUsed = s.now()
	if err := s.saveLocked(c); err != nil {
		s.log.Warn("saving a cache's state failed", "cache", m.key().String(), "err", err)
	}
	stale := s.staleLocked(c)
	size := c.meta.Bytes
	gone := s.dropIfEmptyLocked(c)
	s.mu.Unlock()
	for _, dir := range append(stale, gone...) {
		if err := os.RemoveAll(dir); err != nil {
			s.log.Warn("removing an old cache version failed", "dir", dir, "err", err)
		}
	}
	return size
}

// staleLocked lists the versions of c that are not current, not in use and not being made.
func (s *Store) staleLocked(c *cache) []string {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if validVersion(n) && n != c.meta.Current && c.users[n] == 0 && !c.pending[n] {
			out = append(out, filepath.Join(c.dir, n))
		}
	}
	return out
}

// dropIfEmptyLocked takes an unused cache whose current version is empty out of the index and
// returns its directory (moved to the trash) for removal: an empty cache saves nothing.
func (s *Store) dropIfEmptyLocked(c *cache) []string {
	if len(c.users) > 0 || len(c.pending) > 0 {
		return nil
	}
	if empty, err := isEmptyDir(filepath.Join(c.dir, c.meta.Current)); err != nil || !empty {
		return nil
	}
	if dir := s.trashLocked(c); dir != "" {
		return []string{dir}
	}
	return nil
}

// trashLocked moves a cache out of the index and into the trash; "" when it could not.
func (s *Store) trashLocked(c *cache) string {
	s.seq++
	dst := filepath.Join(s.dir, trashDir, strconv.FormatInt(s.seq, 10))
	if err := os.Rename(c.dir, dst); err != nil {
		s.log.Warn("removing a cache failed", "dir", c.dir, "err", err)
		return ""
	}
	delete(s.caches, c.id)
	os.Remove(filepath.Dir(c.dir)) // the repository's directory, when that was its last cache
	return dst
}

// evict removes the least recently used caches that no pipeline uses until the total is within
// the budget.
func (s *Store) evict() {
	s.mu.Lock()
	var total int64
	var idle []*cache
	for _, c := range s.caches {
		total += c.meta.Bytes
		if len(c.users) == 0 && len(c.pending) == 0 {
			idle = append(idle, c)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].meta.LastUsed.Before(idle[j].meta.LastUsed) })
	type victim struct {
		dir string
		m   meta
	}
	var victims []victim
	for _, c := range idle {
		if total <= s.budget {
			break
		}
		if dir := s.trashLocked(c); dir != "" {
			total -= c.meta.Bytes
			victims = append(victims, victim{dir, c.meta})
		}
	}
	s.mu.Unlock()
	for _, v := range victims {
		if err := os.RemoveAll(v.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("removing an evicted cache failed", "dir", v.dir, "err", err)
		}
		s.log.Info("cache evicted (least recently used, over the budget)", "repo", v.m.Repo,
			"cache", Key{Group: v.m.Group, Path: v.m.Path}.String(), "bytes", v.m.Bytes, "last_used", v.m.LastUsed)
	}
	if total > s.budget {
		s.log.Warn("the caches in use are over the budget", "bytes", total, "budget", s.budget)
	}
}
