package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/clock"
)

// Local keeps blobs in a directory:
//
//	<root>/blobs/<algorithm>/<first two hex>/<hex>   committed blobs, read-only from then on
//	<root>/uploads/<id>/data, state.json             upload sessions
//	<root>/tmp/put-*                                 Put in progress
//
// Blobs appear by rename(2) from tmp/ or uploads/, which is atomic on one file system, so a
// reader sees a whole, verified blob or nothing. Several processes may share the directory.
type Local struct {
	root  string
	clock clock.Clock
}

// tempMaxAge: temporary files older than this at start belong to a Put that died with its
// process. No upload runs that long.
const tempMaxAge = 24 * time.Hour

// NewLocal opens (creating when missing) the store in root.
func NewLocal(root string, clk clock.Clock) (*Local, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	l := &Local{root: abs, clock: clk}
	for _, dir := range []string{"blobs", "uploads", "tmp"} {
		if err := os.MkdirAll(filepath.Join(abs, dir), 0o750); err != nil {
			return nil, fmt.Errorf("storage: create %s: %w", dir, err)
		}
	}
	l.removeStaleTemp()
	return l, nil
}

func (l *Local) removeStaleTemp() {
	entries, _ := os.ReadDir(filepath.Join(l.root, "tmp"))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && l.clock.Now().Sub(fi.ModTime()) > tempMaxAge {
			os.Remove(filepath.Join(l.root, "tmp", e.Name()))
		}
	}
}

func (l *Local) blobFile(d digest.Digest) string {
	return filepath.Join(l.root, filepath.FromSlash(blobPath(d)))
}

func (l *Local) uploadDir(id string) string { return filepath.Join(l.root, "uploads", id) }

// Put implements Store.
func (l *Local) Put(ctx context.Context, want digest.Digest, size int64, r io.Reader) (Info, error) {
	if err := CheckDigest(want); err != nil {
		return Info{}, err
	}
	f, err := os.CreateTemp(filepath.Join(l.root, "tmp"), "put-*")
	if err != nil {
		return Info{}, fmt.Errorf("storage: temp file: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	v := want.Verifier()
	n, err := copyBig(io.MultiWriter(f, v), ctxReader{ctx, r})
	if err != nil {
		return Info{}, fmt.Errorf("storage: receive blob: %w", err)
	}
	if size >= 0 && n != size {
		return Info{}, fmt.Errorf("%w: got %d bytes, want %d", ErrSizeMismatch, n, size)
	}
	if !v.Verified() {
		return Info{}, fmt.Errorf("%w: want %s", ErrDigestMismatch, want)
	}
	if err := syncClose(f); err != nil {
		return Info{}, err
	}
	if err := l.install(f.Name(), want); err != nil {
		return Info{}, err
	}
	committed = true
	return Info{Digest: want, Size: n, ModTime: l.clock.Now()}, nil
}

// install renames a verified file to the blob's name.
func (l *Local) install(path string, d digest.Digest) error {
	dst := l.blobFile(d)
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return fmt.Errorf("storage: create blob directory: %w", err)
	}
	if err := os.Chmod(path, 0o440); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := os.Rename(path, dst); err != nil {
		return fmt.Errorf("storage: commit blob: %w", err)
	}
	return nil
}

// copyBig copies with a 1 MiB buffer: a gigabyte takes a thousand writes instead of io.Copy's
// thirty thousand.
func copyBig(dst io.Writer, src io.Reader) (int64, error) {
	return io.CopyBuffer(dst, src, make([]byte, 1<<20))
}

func syncClose(f *os.File) error {
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("storage: sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("storage: close: %w", err)
	}
	return nil
}

// Open implements Store.
func (l *Local) Open(ctx context.Context, d digest.Digest) (io.ReadSeekCloser, Info, error) {
	if err := CheckDigest(d); err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(l.blobFile(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, ErrNotFound
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("storage: open blob: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Info{}, fmt.Errorf("storage: stat blob: %w", err)
	}
	return f, Info{Digest: d, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Stat implements Store.
func (l *Local) Stat(ctx context.Context, d digest.Digest) (Info, error) {
	if err := CheckDigest(d); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(l.blobFile(d))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, ErrNotFound
	}
	if err != nil {
		return Info{}, fmt.Errorf("storage: stat blob: %w", err)
	}
	return Info{Digest: d, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Delete implements Store.
func (l *Local) Delete(ctx context.Context, d digest.Digest) error {
	if err := CheckDigest(d); err != nil {
		return err
	}
	err := os.Remove(l.blobFile(d))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("storage: delete blob: %w", err)
	}
	return nil
}

// Walk implements Store. Files that are not blobs (a stray editor file) are skipped.
func (l *Local) Walk(ctx context.Context, fn func(Info) error) error {
	base := filepath.Join(l.root, "blobs")
	return filepath.WalkDir(base, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return fmt.Errorf("storage: walk: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(base, path)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 3 {
			return nil
		}
		d := digest.NewDigestFromEncoded(digest.Algorithm(parts[0]), parts[2])
		if CheckDigest(d) != nil || blobPath(d) != "blobs/"+filepath.ToSlash(rel) {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("storage: walk: %w", err)
		}
		return fn(Info{Digest: d, Size: fi.Size(), ModTime: fi.ModTime()})
	})
}

// SignedURL implements Store: the local disk has no URLs of its own.
func (l *Local) SignedURL(ctx context.Context, d digest.Digest, ttl time.Duration) (string, error) {
	return "", ErrNotSupported
}

// CreateUpload implements Store.
func (l *Local) CreateUpload(ctx context.Context) (string, error) {
	id, err := newUploadID()
	if err != nil {
		return "", err
	}
	dir := l.uploadDir(id)
	if err := os.Mkdir(dir, 0o750); err != nil {
		return "", fmt.Errorf("storage: create upload: %w", err)
	}
	st, err := newSessionState(l.clock.Now().UTC())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "data"), nil, 0o640)
	}
	if err == nil {
		err = l.saveState(id, st)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return id, nil
}

func (l *Local) loadState(id string) (*sessionState, error) {
	if !validUploadID(id) {
		return nil, ErrUploadNotFound
	}
	b, err := os.ReadFile(filepath.Join(l.uploadDir(id), "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrUploadNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read upload state: %w", err)
	}
	return parseSessionState(b)
}

// saveState replaces state.json by rename, so a crash leaves the old or the new state whole.
func (l *Local) saveState(id string, st *sessionState) error {
	b, err := st.marshal()
	if err != nil {
		return err
	}
	dir := l.uploadDir(id)
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		return fmt.Errorf("storage: write upload state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "state.json")); err != nil {
		return fmt.Errorf("storage: write upload state: %w", err)
	}
	return nil
}

// UploadInfo implements Store.
func (l *Local) UploadInfo(ctx context.Context, id string) (UploadInfo, error) {
	st, err := l.loadState(id)
	if err != nil {
		return UploadInfo{}, err
	}
	return st.info(id), nil
}

// Append implements Store. Bytes past the saved size (left by an append that failed or a
// process that died mid-chunk) are cut off first, so the data always matches the state.
func (l *Local) Append(ctx context.Context, id string, offset int64, r io.Reader) (int64, error) {
	st, err := l.loadState(id)
	if err != nil {
		return 0, err
	}
	h, err := st.next(offset)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(filepath.Join(l.uploadDir(id), "data"), os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ErrUploadNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("storage: open upload: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(st.Size); err != nil {
		return 0, fmt.Errorf("storage: truncate upload: %w", err)
	}
	if _, err := f.Seek(st.Size, io.SeekStart); err != nil {
		return 0, fmt.Errorf("storage: seek upload: %w", err)
	}
	n, err := copyBig(io.MultiWriter(f, h), ctxReader{ctx, r})
	if err != nil {
		f.Truncate(st.Size)
		return 0, fmt.Errorf("storage: receive chunk: %w", err)
	}
	if n == 0 {
		return st.Size, nil
	}
	st.Size += n
	st.UpdatedAt = l.clock.Now().UTC()
	if err := st.saveHash(h); err != nil {
		return 0, err
	}
	if err := l.saveState(id, st); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// Commit implements Store.
func (l *Local) Commit(ctx context.Context, id string, want digest.Digest) (Info, error) {
	if err := CheckDigest(want); err != nil {
		return Info{}, err
	}
	st, err := l.loadState(id)
	if err != nil {
		return Info{}, err
	}
	dir := l.uploadDir(id)
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	if err := os.Truncate(data, st.Size); err != nil {
		return Info{}, fmt.Errorf("storage: truncate upload: %w", err)
	}
	err = st.verify(want, func() (io.ReadCloser, error) { return os.Open(data) })
	if err != nil {
		return Info{}, err
	}
	f, err := os.OpenFile(data, os.O_RDWR, 0)
	if err != nil {
		return Info{}, fmt.Errorf("storage: open upload: %w", err)
	}
	if err := syncClose(f); err != nil {
		return Info{}, err
	}
	if err := l.install(data, want); err != nil {
		return Info{}, err
	}
	return Info{Digest: want, Size: st.Size, ModTime: l.clock.Now()}, nil
}

// AbortUpload implements Store.
func (l *Local) AbortUpload(ctx context.Context, id string) error {
	if _, err := l.loadState(id); err != nil {
		return err
	}
	if err := os.RemoveAll(l.uploadDir(id)); err != nil {
		return fmt.Errorf("storage: remove upload: %w", err)
	}
	return nil
}

// WalkUploads implements Store.
func (l *Local) WalkUploads(ctx context.Context, fn func(UploadInfo) error) error {
	entries, err := os.ReadDir(filepath.Join(l.root, "uploads"))
	if err != nil {
		return fmt.Errorf("storage: list uploads: %w", err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := l.loadState(e.Name())
		if errors.Is(err, ErrUploadNotFound) {
			continue // not a session, or one that just ended
		}
		if err != nil {
			return err
		}
		if err := fn(st.info(e.Name())); err != nil {
			return err
		}
	}
	return nil
}
