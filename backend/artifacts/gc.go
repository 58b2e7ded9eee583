package artifacts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Registry is what the collector asks of the OCI registry (package registry's Handler).
type Registry interface {
	// BlobReferencedIn reports, through db, whether any registry repository links the blob.
	BlobReferencedIn(db *gorm.DB, d digest.Digest) (bool, error)
	// ExpireUploads ends the registry's upload sessions started before cutoff (at most 1000 a
	// call) and returns how many it ended.
	ExpireUploads(ctx context.Context, cutoff time.Time) (int, error)
}

// Collector defaults.
const (
	// DefaultGrace: blobs written more recently are never collected. Uploads link their blob
	// within seconds of storing it (and under the blob's lock, see Blobs.Link); an hour is for
	// clocks that disagree and operators who look.
	DefaultGrace = time.Hour
	// DefaultUploadTTL: upload sessions idle (or, for the registry, open) this long are ended.
	DefaultUploadTTL = 24 * time.Hour
)

// CollectorConfig tunes a Collector; zero values take the defaults.
type CollectorConfig struct {
	Grace     time.Duration
	UploadTTL time.Duration
	// BuildRetention is how long a build's hand-off versions outlive the build (buildscope.go).
	BuildRetention time.Duration
}

// Collector removes stored blobs that nothing references: no registry repository links them
// and no file names them. It is safe while uploads run: a blob younger than the grace period
// is kept, and each deletion happens under the blob's lock after a last look at the references
// and the blob's age, the lock Blobs.Link takes to link a blob (so a re-upload of an old,
// unreferenced blob either lands before the look and keeps it, or finds it gone and says so).
// It also ends abandoned upload sessions. Several collectors (replicas) may run at once.
type Collector struct {
	db       *gorm.DB
	builds   EndedBuilds
	store    storage.Store
	registry Registry
	clock    clock.Clock
	log      *slog.Logger
	cfg      CollectorConfig
}

// EndedBuilds says which builds ended before a time (build.Service): their hand-off versions
// expire.
type EndedBuilds interface {
	BuildsEndedBefore(ctx context.Context, ids []int64, cutoff time.Time) ([]int64, error)
}

// NewCollector returns a collector. registry may be nil (no registry: only files count).
func NewCollector(db *gorm.DB, builds EndedBuilds, st storage.Store, registry Registry, clk clock.Clock, log *slog.Logger, cfg CollectorConfig) *Collector {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.UploadTTL <= 0 {
		cfg.UploadTTL = DefaultUploadTTL
	}
	if cfg.BuildRetention <= 0 {
		cfg.BuildRetention = DefaultBuildRetention
	}
	return &Collector{db: db, builds: builds, store: st, registry: registry, clock: clk, log: log, cfg: cfg}
}

// Report says what one collection did.
type Report struct {
	Blobs          int   // blobs in the store
	Deleted        int   // blobs removed
	Freed          int64 // their bytes
	UploadsExpired int   // upload sessions ended
	// VersionsExpired: build-scoped versions removed after their retention.
	VersionsExpired int
}

// Collect runs one collection: expire abandoned upload sessions and the hand-off versions of
// builds that ended longer ago than the retention, then remove the unreferenced blobs older
// than the grace period.
func (c *Collector) Collect(ctx context.Context) (Report, error) {
	var rep Report
	now := c.clock.Now()
	n, err := c.expireUploads(ctx, now.Add(-c.cfg.UploadTTL))
	rep.UploadsExpired = n
	if err != nil {
		return rep, err
	}
	if rep.VersionsExpired, err = c.expireBuildVersions(ctx, now.Add(-c.cfg.BuildRetention)); err != nil {
		return rep, err
	}
	var old []storage.Info
	err = c.store.Walk(ctx, func(info storage.Info) error {
		rep.Blobs++
		if info.ModTime.Before(now.Add(-c.cfg.Grace)) {
			old = append(old, info)
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("artifacts: gc walk: %w", err)
	}
	for _, info := range old {
		deleted, err := c.collect(ctx, info.Digest)
		if err != nil {
			return rep, err
		}
		if deleted {
			rep.Deleted++
			rep.Freed += info.Size
		}
	}
	return rep, nil
}

// expireUploads ends the registry's sessions opened before cutoff and every other session (a
// file upload whose server died) idle since before it.
func (c *Collector) expireUploads(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for c.registry != nil {
		n, err := c.registry.ExpireUploads(ctx, cutoff)
		total += n
		if err != nil {
			return total, fmt.Errorf("artifacts: expire registry uploads: %w", err)
		}
		if n < 1000 {
			break
		}
	}
	var stale []string
	err := c.store.WalkUploads(ctx, func(u storage.UploadInfo) error {
		if u.UpdatedAt.Before(cutoff) {
			stale = append(stale, u.ID)
		}
		return nil
	})
	if err != nil {
		return total, fmt.Errorf("artifacts: list uploads: %w", err)
	}
	for _, id := range stale {
		if err := c.store.AbortUpload(ctx, id); err != nil && !errors.Is(err, storage.ErrUploadNotFound) {
			return total, fmt.Errorf("artifacts: end upload %s: %w", id, err)
		}
		total++
	}
	return total, nil
}

// collect deletes blob d when, under its lock, nothing references it and it is still older than
// the grace period (a re-upload since the walk makes it young again).
func (c *Collector) collect(ctx context.Context, d digest.Digest) (bool, error) {
	deleted := false
	err := store.Tx(ctx, c.db, func(tx *gorm.DB) error {
		if err := store.Lock(tx, blobLock(d)); err != nil {
			return err
		}
		used, err := c.referenced(tx, d)
		if err != nil || used {
			return err
		}
		info, err := c.store.Stat(ctx, d)
		if errors.Is(err, storage.ErrNotFound) {
			return nil // another collector was first
		}
		if err != nil {
			return err
		}
		if !info.ModTime.Before(c.clock.Now().Add(-c.cfg.Grace)) {
			return nil
		}
		if err := c.store.Delete(ctx, d); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		deleted = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("artifacts: gc %s: %w", d, err)
	}
	if deleted {
		c.log.InfoContext(ctx, "garbage collector removed an unreferenced blob", "digest", string(d))
	}
	return deleted, nil
}

// referenced reports whether a file or a registry repository references d. Everything goes
// through tx, the transaction holding the blob's lock: SQLite's small pool may have no other
// connection to give while uploads wait for that lock.
func (c *Collector) referenced(tx *gorm.DB, d digest.Digest) (bool, error) {
	var n int64
	if err := tx.Model(&File{}).Where("digest = ?", string(d)).Limit(1).Count(&n).Error; err != nil {
		return false, fmt.Errorf("artifacts: file references: %w", err)
	}
	if n > 0 || c.registry == nil {
		return n > 0, nil
	}
	return c.registry.BlobReferencedIn(tx, d)
}

// Run collects every interval until ctx ends, on one replica at a time (the holder of a Redis
// lock, which it keeps while it runs; another replica takes over within three intervals of its
// end). It is its own loop, not a step of the scheduler's tick: a collection walks the whole
// store and may take minutes.
func (c *Collector) Run(ctx context.Context, rdb redis.UniversalClient, interval time.Duration) {
	if interval <= 0 {
		return
	}
	lead := redisconn.NewLeader(rdb, "nimbus:leader:artifacts-gc", 3*interval)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !lead.Hold(ctx) {
			continue
		}
		begin := time.Now()
		rep, err := c.Collect(ctx)
		if err != nil {
			c.log.ErrorContext(ctx, "garbage collection", "err", err)
		}
		c.log.InfoContext(ctx, "garbage collection done", "blobs", rep.Blobs, "deleted", rep.Deleted,
			"freed_bytes", rep.Freed, "uploads_expired", rep.UploadsExpired, "took", time.Since(begin).String())
	}
}
