// Package storage is Nimbus's content-addressed blob store: the bytes behind OCI images (package
// registry) and generic model files. Blobs are named by their digest (sha256 or sha512) and are
// immutable; everything about who may see them, tags, sizes per team and garbage collection
// lives in the database of the domains that use the store.
//
// Two backends implement Store: Local (a directory, the default, under <data dir>/artifacts) and
// S3 (any S3-compatible object store, through minio-go). Both keep the same promises:
//
//   - Nothing is visible under a digest until every byte was received and hashed to that
//     digest: Put writes to a temporary object and commits it only after verification (an
//     atomic rename on disk; a multipart upload completed only after the hash matched, on S3).
//     A blob is never held whole in memory.
//   - Upload sessions (CreateUpload, Append, Commit) are resumable across requests, processes
//     and replicas: their state (size and the running sha256) is stored with their bytes, so
//     any replica can take the next chunk and a client that lost a connection asks UploadInfo
//     where to go on.
//   - Open returns an io.ReadSeekCloser, so HTTP Range requests are served without reading
//     the whole blob (http.ServeContent).
//
// The store has no idea of repositories or teams: two uploads of the same bytes are one blob.
// Callers count sizes and decide what to delete (Walk and WalkUploads exist for the garbage
// collector, which must not delete a blob that a running upload is about to reference — see
// Info.ModTime and UploadInfo.UpdatedAt).
package storage

import (
	"context"
	"crypto/rand"
	_ "crypto/sha256" // registers the hash for go-digest
	_ "crypto/sha512" // registers the hash for go-digest
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/clock"
)

// Errors of every backend. Callers test them with errors.Is.
var (
	// ErrNotFound: no blob with that digest.
	ErrNotFound = errors.New("storage: blob not found")
	// ErrUploadNotFound: no upload session with that id (never created, committed or aborted).
	ErrUploadNotFound = errors.New("storage: upload not found")
	// ErrDigestMismatch: the bytes do not hash to the digest the caller promised. Nothing was
	// stored (and a session given to Commit is gone).
	ErrDigestMismatch = errors.New("storage: content does not match the digest")
	// ErrSizeMismatch: the stream was longer or shorter than the size the caller announced.
	ErrSizeMismatch = errors.New("storage: content does not match the size")
	// ErrUnsupportedDigest: not a valid sha256 or sha512 digest.
	ErrUnsupportedDigest = errors.New("storage: unsupported or malformed digest")
	// ErrNotSupported: the backend cannot do this (signed URLs on the local disk).
	ErrNotSupported = errors.New("storage: not supported by this backend")
)

// OffsetError is returned by Append when a chunk does not start where the session ends. Size
// is where it does end: the offset the next chunk must start at.
type OffsetError struct{ Size int64 }

func (e *OffsetError) Error() string {
	return fmt.Sprintf("storage: chunk must start at offset %d", e.Size)
}

// Info describes a stored blob.
type Info struct {
	Digest digest.Digest
	Size   int64
	// ModTime is when the blob was last written. A garbage collector keeps blobs younger than
	// its grace period: an upload that is committing may be about to reference them.
	ModTime time.Time
}

// UploadInfo describes an upload session.
type UploadInfo struct {
	ID        string
	Size      int64 // bytes received so far: the offset of the next chunk
	StartedAt time.Time
	UpdatedAt time.Time
}

// Store is a content-addressed blob store. Implementations are safe for concurrent use;
// appends to one upload session must come one at a time (a protocol that sends chunks in
// order, such as OCI's, does so).
type Store interface {
	// Put streams r into the store as the blob want. size is the announced length, or -1 when
	// unknown. The bytes are hashed while they stream and nothing becomes visible unless they
	// match: ErrDigestMismatch or ErrSizeMismatch otherwise. Storing a blob that exists is
	// harmless (same digest, same bytes).
	Put(ctx context.Context, want digest.Digest, size int64, r io.Reader) (Info, error)
	// Open returns a reader of the blob that can Seek (for ranges) and its Info. ErrNotFound
	// when absent. The caller closes the reader.
	Open(ctx context.Context, d digest.Digest) (io.ReadSeekCloser, Info, error)
	// Stat returns the blob's Info, or ErrNotFound.
	Stat(ctx context.Context, d digest.Digest) (Info, error)
	// Delete removes the blob; ErrNotFound when it was not there.
	Delete(ctx context.Context, d digest.Digest) error
	// Walk calls fn for every blob, in no particular order, until fn returns an error (which
	// Walk returns) or the blobs run out.
	Walk(ctx context.Context, fn func(Info) error) error
	// SignedURL returns a URL that downloads the blob without credentials for ttl (S3 presigned
	// GET). ErrNotSupported on backends without one.
	SignedURL(ctx context.Context, d digest.Digest, ttl time.Duration) (string, error)

	// CreateUpload starts an empty upload session and returns its id.
	CreateUpload(ctx context.Context) (string, error)
	// UploadInfo returns the session's state, or ErrUploadNotFound.
	UploadInfo(ctx context.Context, id string) (UploadInfo, error)
	// Append adds r at offset, which must be the session's current size (*OffsetError
	// otherwise), and returns the new size. A failed append adds nothing: the chunk is sent
	// again.
	Append(ctx context.Context, id string, offset int64, r io.Reader) (int64, error)
	// Commit verifies the session's bytes against want and makes them the blob want. The
	// session is gone afterwards, whatever the outcome (ErrDigestMismatch keeps nothing).
	Commit(ctx context.Context, id string, want digest.Digest) (Info, error)
	// AbortUpload deletes the session and its bytes; ErrUploadNotFound when there is none.
	AbortUpload(ctx context.Context, id string) error
	// WalkUploads calls fn for every session (for the collector of abandoned uploads).
	WalkUploads(ctx context.Context, fn func(UploadInfo) error) error
}

// CheckDigest reports whether d is a well-formed digest of a supported algorithm (sha256 or
// sha512, lower-case hex of the right length). Everything a caller hands the store passes it,
// so a digest is always safe to use as a file or object name.
func CheckDigest(d digest.Digest) error {
	// Algorithm() panics on a string without ':', so the shape is checked first.
	alg, _, ok := strings.Cut(string(d), ":")
	switch digest.Algorithm(alg) {
	case digest.SHA256, digest.SHA512:
	default:
		ok = false
	}
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnsupportedDigest, truncate(string(d), 80))
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupportedDigest, err)
	}
	return nil
}

// newUploadID returns 32 random hex characters: unguessable, and safe as a path segment.
func newUploadID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("storage: upload id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// validUploadID reports whether id has the shape newUploadID makes. Ids arrive in URLs; this
// check is what keeps them from naming anything outside the uploads area.
func validUploadID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// blobPath is the relative name of a blob in every backend: "blobs/sha256/ab/abcdef…". The
// two-character fan-out keeps directories small on the local disk.
func blobPath(d digest.Digest) string {
	enc := d.Encoded()
	return "blobs/" + string(d.Algorithm()) + "/" + enc[:2] + "/" + enc
}

// ctxReader stops a copy when the context ends, so an abandoned request frees its resources
// even when the source keeps delivering.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Backends selectable by Config.Backend.
const (
	BackendLocal = "local"
	BackendS3    = "s3"
)

// Config selects and configures a backend (nimbus-server's NIMBUS_STORAGE and NIMBUS_S3_*).
type Config struct {
	Backend   string // BackendLocal (default) or BackendS3
	LocalRoot string // the directory of the local backend
	S3        S3Config
}

// New opens the configured backend.
func New(ctx context.Context, cfg Config, clk clock.Clock) (Store, error) {
	switch cfg.Backend {
	case "", BackendLocal:
		return NewLocal(cfg.LocalRoot, clk)
	case BackendS3:
		return NewS3(ctx, cfg.S3, clk)
	default:
		return nil, fmt.Errorf("storage: unknown backend %q (want %s or %s)", cfg.Backend, BackendLocal, BackendS3)
	}
}
