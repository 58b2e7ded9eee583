package registry

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/opencontainers/go-digest"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
)

// Guard is what the registry asks of the storage bookkeeping it shares with the model files
// (package artifacts' Blobs): team quotas, and the garbage collector's lock on a blob.
type Guard interface {
	// Room returns how many more bytes the team may store: -1 without a cap, and for a blob d
	// the team already holds (d is "" when the upload's digest is not known yet).
	Room(ctx context.Context, orgID int64, d digest.Digest) (int64, error)
	// Link runs link, which records a reference to blob d in the transaction it is given, under
	// the lock the garbage collector holds while it deletes d, after checking that d is still
	// stored: an error wrapping storage.ErrNotFound when a collection removed it meanwhile.
	Link(ctx context.Context, d digest.Digest, link func(tx *gorm.DB) error) error
}

// errQuota is the answer to an upload past the team's storage quota. OCI has no code for it;
// DENIED with 413 is what clients show as "denied: …" with the message.
func errQuota(room int64) *Error {
	return ociError(http.StatusRequestEntityTooLarge, CodeDenied,
		"this upload passes the team's storage quota (room for %d more bytes); nothing of it was kept", room)
}

// capped returns the body of an upload capped at what the team may still store, less held (the
// bytes its upload session already has), or a 413 when Content-Length alone passes it. Past the
// cap the body fails with *http.MaxBytesError, so the store keeps nothing of it (storageError
// answers 413). d is the blob's digest when known: one the team holds costs nothing.
func (h *Handler) capped(w http.ResponseWriter, r *http.Request, req *request, d digest.Digest, held int64) (io.Reader, error) {
	if h.guard == nil {
		return r.Body, nil
	}
	room, err := h.guard.Room(r.Context(), req.access.Org.ID, d)
	if err != nil || room < 0 {
		return r.Body, err
	}
	room = max(0, room-held)
	if r.ContentLength > room {
		return nil, errQuota(room)
	}
	return http.MaxBytesReader(w, r.Body, room), nil
}

// link records blob d in the repository: under the garbage collector's lock when there is one,
// so a blob stored again while a collection deletes it is never linked without its bytes
// (storage.ErrNotFound then).
func (h *Handler) link(ctx context.Context, repositoryID int64, d digest.Digest, size int64) error {
	if h.guard == nil {
		return h.meta.linkBlob(h.meta.db.WithContext(ctx), repositoryID, string(d), size)
	}
	return h.guard.Link(ctx, d, func(tx *gorm.DB) error {
		return h.meta.linkBlob(tx, repositoryID, string(d), size)
	})
}

// errBlobCollected answers an upload whose blob a garbage collection removed before it was
// linked: the session is gone, and clients start the upload again.
func errBlobCollected(err error) error {
	if errors.Is(err, storage.ErrNotFound) {
		return ociError(http.StatusNotFound, CodeBlobUploadUnknown, "the blob was removed by a garbage collection before it was linked; push it again")
	}
	return err
}
