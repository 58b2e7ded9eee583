package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/store"
)

// ErrBlobGone is what Link returns when the blob it should link is no longer stored: a garbage
// collection removed it between the upload and the link (the blob had been stored before and
// referenced by nothing). The client uploads it again. It wraps storage.ErrNotFound.
var ErrBlobGone = fmt.Errorf("artifacts: the blob was removed by a garbage collection while it was linked; upload it again: %w", storage.ErrNotFound)

// ErrQuota is what a body capped by QuotaReader returns past the team's quota.
var ErrQuota = errors.New("artifacts: the team's storage quota is exhausted")

// Blobs is the team-level bookkeeping of stored blobs, shared by the registry and the files:
// what a team uses, the cap on it, and the lock that keeps the garbage collector (Collector)
// from deleting a blob while an upload links it. It is safe for concurrent use.
type Blobs struct {
	db    *gorm.DB
	store storage.Store
	quota int64 // bytes per team; 0 = no cap
}

// NewBlobs returns the bookkeeping; quota is each team's cap in bytes (0 = none).
func NewBlobs(db *gorm.DB, st storage.Store, quota int64) *Blobs {
	return &Blobs{db: db, store: st, quota: quota}
}

// Usage is what a team stores. A blob counts once per team however many registry
// repositories, versions or files name it: Used is the size of the team's distinct blobs,
// Registry and Files those of each side (a blob both sides hold counts in both, once in Used).
type Usage struct {
	Used     int64 `json:"used_bytes"`
	Registry int64 `json:"registry_bytes"`
	Files    int64 `json:"file_bytes"`
	Quota    int64 `json:"quota_bytes"` // 0 = no cap
}

// The team's blobs on each side, as (digest, size) rows without repeats. Manifests are kept in
// the database, not the store, and are not counted.
const (
	registryBlobsOf = `SELECT DISTINCT b.digest, b.size FROM registry_blobs b
		JOIN registry_repositories rr ON rr.id = b.repository_id JOIN repos p ON p.id = rr.repo_id WHERE p.org_id = ?`
	fileBlobsOf = `SELECT DISTINCT f.digest, f.size FROM artifact_files f
		JOIN artifact_versions v ON v.id = f.version_id JOIN artifact_packages k ON k.id = v.package_id
		JOIN repos p ON p.id = k.repo_id WHERE p.org_id = ?`
)

// Usage returns what the team stores, in one query.
func (b *Blobs) Usage(ctx context.Context, orgID int64) (Usage, error) {
	u := Usage{Quota: b.quota}
	q := `SELECT
		(SELECT COALESCE(SUM(size), 0) FROM (` + registryBlobsOf + `) r) AS registry,
		(SELECT COALESCE(SUM(size), 0) FROM (` + fileBlobsOf + `) f) AS files,
		(SELECT COALESCE(SUM(size), 0) FROM (` + registryBlobsOf + ` UNION ` + fileBlobsOf + `) u) AS used`
	row := b.db.WithContext(ctx).Raw(q, orgID, orgID, orgID, orgID).Row()
	if err := row.Scan(&u.Registry, &u.Files, &u.Used); err != nil {
		return Usage{}, fmt.Errorf("artifacts: storage usage: %w", err)
	}
	return u, nil
}

// Room returns how many more bytes the team may store, or -1 when there is no cap. A blob the
// team already holds costs nothing, so Room is -1 for a known digest d the team has ("" when
// the upload's digest is not known yet).
func (b *Blobs) Room(ctx context.Context, orgID int64, d digest.Digest) (int64, error) {
	if b.quota <= 0 {
		return -1, nil
	}
	if d != "" {
		var n int64
		err := b.db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM (`+registryBlobsOf+` AND b.digest = ? UNION `+fileBlobsOf+` AND f.digest = ?) h`,
			orgID, string(d), orgID, string(d)).Row().Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("artifacts: blob of the team: %w", err)
		}
		if n > 0 {
			return -1, nil
		}
	}
	u, err := b.Usage(ctx, orgID)
	if err != nil {
		return 0, err
	}
	return max(0, b.quota-u.Used), nil
}

// Link runs link, which records a reference to blob d in the transaction it is given, under
// the lock the collector holds while it decides about d and deletes it, after checking that d
// is still stored. Either the collector sees the reference and keeps the blob, or the blob is
// gone before the reference is made and Link returns ErrBlobGone with nothing recorded.
func (b *Blobs) Link(ctx context.Context, d digest.Digest, link func(tx *gorm.DB) error) error {
	return store.Tx(ctx, b.db, func(tx *gorm.DB) error {
		if err := store.Lock(tx, blobLock(d)); err != nil {
			return fmt.Errorf("artifacts: lock blob: %w", err)
		}
		if _, err := b.store.Stat(ctx, d); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return ErrBlobGone
			}
			return err
		}
		return link(tx)
	})
}

// blobLock names the transaction lock of a blob (store.Lock).
func blobLock(d digest.Digest) string { return "artifacts:blob:" + string(d) }

// QuotaReader returns r capped at room bytes (room < 0: no cap): reading past the cap fails
// with ErrQuota, so a store that is streaming it keeps nothing.
func QuotaReader(r io.Reader, room int64) io.Reader {
	if room < 0 {
		return r
	}
	return &quotaReader{r: r, left: room}
}

type quotaReader struct {
	r    io.Reader
	left int64
}

func (q *quotaReader) Read(p []byte) (int, error) {
	if q.left <= 0 {
		// One byte more than the room tells "exactly at the cap" from "past it".
		var one [1]byte
		n, err := q.r.Read(one[:])
		if n > 0 {
			return 0, ErrQuota
		}
		return 0, err
	}
	if int64(len(p)) > q.left {
		p = p[:q.left]
	}
	n, err := q.r.Read(p)
	q.left -= int64(n)
	return n, err
}
