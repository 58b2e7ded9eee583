package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
)

// What the garbage collector (outside this package) needs to know of the registry. The
// collector owns the decision; the registry only says what it still uses.

// BlobReferenced reports whether any registry repository still links blob d. Manifests live in
// the database, so links are the registry's only claim on stored blobs (a manifest's config
// and layers are linked blobs of its repository; registry_manifest_refs records them for
// reports).
func (h *Handler) BlobReferenced(ctx context.Context, d digest.Digest) (bool, error) {
	return h.BlobReferencedIn(h.meta.db.WithContext(ctx), d)
}

// BlobReferencedIn is BlobReferenced through db: the collector asks inside the transaction that
// holds the blob's lock, where a database with few connections (SQLite) must not be asked for
// another one.
func (h *Handler) BlobReferencedIn(db *gorm.DB, d digest.Digest) (bool, error) {
	var n int64
	err := db.Model(&Blob{}).Where("digest = ?", string(d)).Limit(1).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("registry: blob references: %w", err)
	}
	return n > 0, nil
}

// ExpireUploads ends the upload sessions started before cutoff (clients that went away): their
// bytes leave the store and their rows the database. It returns how many it ended.
func (h *Handler) ExpireUploads(ctx context.Context, cutoff time.Time) (int, error) {
	var stale []Upload
	if err := h.meta.db.WithContext(ctx).Where("created_at < ?", cutoff.UTC()).Order("created_at").Limit(1000).Find(&stale).Error; err != nil {
		return 0, fmt.Errorf("registry: stale uploads: %w", err)
	}
	n := 0
	for _, u := range stale {
		if err := h.store.AbortUpload(ctx, u.ID); err != nil && !errors.Is(err, storage.ErrUploadNotFound) {
			return n, err
		}
		if err := h.meta.deleteUpload(ctx, u.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// HasManifest reports whether any repository of the registry still holds the manifest d: an
// exact re-run (package record) refuses a pinned image whose manifest was deleted or collected.
func (h *Handler) HasManifest(ctx context.Context, d digest.Digest) (bool, error) {
	var n int64
	err := h.meta.db.WithContext(ctx).Model(&Manifest{}).Where("digest = ?", string(d)).Limit(1).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("registry: manifests: %w", err)
	}
	return n > 0, nil
}
