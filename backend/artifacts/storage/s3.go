package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/clock"
)

// S3Config says where the bucket is.
type S3Config struct {
	Endpoint  string // host:port
	Bucket    string
	AccessKey string
	SecretKey string
	Region    string // "" = the server's default (us-east-1)
	Insecure  bool   // plain HTTP (a local test server)
	// Prefix is prepended to every key ("" = the bucket root); tests give each run its own.
	Prefix string
	// PartSize is the size of the parts Put uploads (and so of its memory buffer); 0 = 16 MiB.
	PartSize int64
}

// S3 keeps blobs in an S3-compatible bucket:
//
//	<prefix>blobs/<algorithm>/<first two hex>/<hex>
//	<prefix>uploads/<id>/state.json, <prefix>uploads/<id>/chunk-<offset>
//
// Put streams into a multipart upload of the blob's own key and completes it only after the
// hash matched (S3 shows an object only when its upload completes, so nothing unverified is
// ever visible, and no copy is needed). A blob smaller than one part is held in the part buffer
// and sent in one PUT after verification. Upload sessions keep each chunk as an object;
// Commit joins them with server-side copies when S3 allows it (one chunk, or every chunk but
// the last at least 5 MiB) and by streaming them into one PUT otherwise.
type S3 struct {
	client   *minio.Client
	core     minio.Core
	bucket   string
	prefix   string
	partSize int64
	clock    clock.Clock
}

const (
	defaultPartSize = 16 << 20
	// s3MinPart is S3's smallest part of a multipart upload, other than the last.
	s3MinPart = 5 << 20
)

// NewS3 connects to the bucket, creating it when it does not exist.
func NewS3(ctx context.Context, cfg S3Config, clk clock.Clock) (*S3, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("storage: S3 needs an endpoint and a bucket")
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: !cfg.Insecure,
		Region: cfg.Region,
		// Path-style URLs work with every S3-compatible server and need no DNS per bucket.
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("storage: S3 client: %w", err)
	}
	s := &S3{client: client, core: minio.Core{Client: client}, bucket: cfg.Bucket, prefix: cfg.Prefix,
		partSize: cfg.PartSize, clock: clk}
	if s.partSize <= 0 {
		s.partSize = defaultPartSize
	}
	if s.partSize < s3MinPart {
		s.partSize = s3MinPart
	}
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("storage: S3 bucket %s at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	if !ok {
		err := client.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: cfg.Region})
		// Another replica (or test) may have created it in the meantime.
		if code := minio.ToErrorResponse(err).Code; err != nil && code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
			return nil, fmt.Errorf("storage: create S3 bucket %s: %w", cfg.Bucket, err)
		}
	}
	return s, nil
}

func (s *S3) blobKey(d digest.Digest) string { return s.prefix + blobPath(d) }

func (s *S3) uploadKey(id, name string) string { return s.prefix + "uploads/" + id + "/" + name }

func chunkName(offset int64) string { return fmt.Sprintf("chunk-%020d", offset) }

func isNoSuchKey(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == "NoSuchKey" || code == "NotFound" || minio.ToErrorResponse(err).StatusCode == http.StatusNotFound
}

// putOpts: the payload is not signed with its sha256 (we hash it ourselves, against the
// digest), which spares hashing every byte a second time.
func putOpts() minio.PutObjectOptions {
	return minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: true}
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, want digest.Digest, size int64, r io.Reader) (Info, error) {
	if err := CheckDigest(want); err != nil {
		return Info{}, err
	}
	key := s.blobKey(want)
	v := want.Verifier()
	src := io.TeeReader(ctxReader{ctx, r}, v)
	buf := make([]byte, s.partSize)
	n, err := io.ReadFull(src, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Info{}, fmt.Errorf("storage: receive blob: %w", err)
	}
	if int64(n) < s.partSize {
		// All of it fits in one part: verify first, then one PUT.
		if err := checkReceived(v, want, int64(n), size); err != nil {
			return Info{}, err
		}
		if _, err := s.client.PutObject(ctx, s.bucket, key, bytes.NewReader(buf[:n]), int64(n), putOpts()); err != nil {
			return Info{}, fmt.Errorf("storage: put blob: %w", err)
		}
		return Info{Digest: want, Size: int64(n), ModTime: s.clock.Now()}, nil
	}
	total, err := s.putMultipart(ctx, key, buf, src, func(total int64) error { return checkReceived(v, want, total, size) })
	if err != nil {
		return Info{}, err
	}
	return Info{Digest: want, Size: total, ModTime: s.clock.Now()}, nil
}

// putMultipart uploads buf (full) and the rest of src as parts of key, then calls check with
// the total size and completes the upload only if check passes.
func (s *S3) putMultipart(ctx context.Context, key string, buf []byte, src io.Reader, check func(int64) error) (int64, error) {
	uploadID, err := s.core.NewMultipartUpload(ctx, s.bucket, key, putOpts())
	if err != nil {
		return 0, fmt.Errorf("storage: start multipart upload: %w", err)
	}
	completed := false
	defer func() {
		if !completed {
			// A fresh context: the request's may be what ended.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			s.core.AbortMultipartUpload(actx, s.bucket, key, uploadID)
		}
	}()
	var parts []minio.CompletePart
	var total int64
	n := len(buf)
	for part := 1; n > 0; part++ {
		p, err := s.core.PutObjectPart(ctx, s.bucket, key, uploadID, part, bytes.NewReader(buf[:n]), int64(n),
			minio.PutObjectPartOptions{DisableContentSha256: true})
		if err != nil {
			return 0, fmt.Errorf("storage: upload part %d: %w", part, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: part, ETag: p.ETag})
		total += int64(n)
		n, err = io.ReadFull(src, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("storage: receive blob: %w", err)
		}
	}
	if err := check(total); err != nil {
		return 0, err
	}
	if _, err := s.core.CompleteMultipartUpload(ctx, s.bucket, key, uploadID, parts, putOpts()); err != nil {
		return 0, fmt.Errorf("storage: complete multipart upload: %w", err)
	}
	completed = true
	return total, nil
}

func checkReceived(v digest.Verifier, want digest.Digest, got, size int64) error {
	if size >= 0 && got != size {
		return fmt.Errorf("%w: got %d bytes, want %d", ErrSizeMismatch, got, size)
	}
	if !v.Verified() {
		return fmt.Errorf("%w: want %s", ErrDigestMismatch, want)
	}
	return nil
}

// Open implements Store. The object is fetched lazily: a Seek followed by a Read asks S3 for
// that range only.
func (s *S3) Open(ctx context.Context, d digest.Digest) (io.ReadSeekCloser, Info, error) {
	if err := CheckDigest(d); err != nil {
		return nil, Info{}, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.blobKey(d), minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, fmt.Errorf("storage: get blob: %w", err)
	}
	oi, err := obj.Stat()
	if err != nil {
		obj.Close()
		if isNoSuchKey(err) {
			return nil, Info{}, ErrNotFound
		}
		return nil, Info{}, fmt.Errorf("storage: get blob: %w", err)
	}
	return obj, Info{Digest: d, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, d digest.Digest) (Info, error) {
	if err := CheckDigest(d); err != nil {
		return Info{}, err
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s.blobKey(d), minio.StatObjectOptions{})
	if isNoSuchKey(err) {
		return Info{}, ErrNotFound
	}
	if err != nil {
		return Info{}, fmt.Errorf("storage: stat blob: %w", err)
	}
	return Info{Digest: d, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, d digest.Digest) error {
	if _, err := s.Stat(ctx, d); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, s.blobKey(d), minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("storage: delete blob: %w", err)
	}
	return nil
}

// Walk implements Store.
func (s *S3) Walk(ctx context.Context, fn func(Info) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine when fn ends the walk early
	for oi := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + "blobs/", Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("storage: list blobs: %w", oi.Err)
		}
		parts := strings.Split(strings.TrimPrefix(oi.Key, s.prefix+"blobs/"), "/")
		if len(parts) != 3 {
			continue
		}
		d := digest.NewDigestFromEncoded(digest.Algorithm(parts[0]), parts[2])
		if CheckDigest(d) != nil || s.blobKey(d) != oi.Key {
			continue
		}
		if err := fn(Info{Digest: d, Size: oi.Size, ModTime: oi.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// SignedURL implements Store with a presigned GET.
func (s *S3) SignedURL(ctx context.Context, d digest.Digest, ttl time.Duration) (string, error) {
	if err := CheckDigest(d); err != nil {
		return "", err
	}
	u, err := s.client.PresignedGetObject(ctx, s.bucket, s.blobKey(d), ttl, nil)
	if err != nil {
		return "", fmt.Errorf("storage: presign: %w", err)
	}
	return u.String(), nil
}

// CreateUpload implements Store.
func (s *S3) CreateUpload(ctx context.Context) (string, error) {
	id, err := newUploadID()
	if err != nil {
		return "", err
	}
	st, err := newSessionState(s.clock.Now().UTC())
	if err != nil {
		return "", err
	}
	return id, s.saveState(ctx, id, st)
}

func (s *S3) loadState(ctx context.Context, id string) (*sessionState, error) {
	if !validUploadID(id) {
		return nil, ErrUploadNotFound
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.uploadKey(id, "state.json"), minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("storage: read upload state: %w", err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, 16<<20))
	if isNoSuchKey(err) {
		return nil, ErrUploadNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read upload state: %w", err)
	}
	return parseSessionState(b)
}

func (s *S3) saveState(ctx context.Context, id string, st *sessionState) error {
	b, err := st.marshal()
	if err != nil {
		return err
	}
	_, err = s.client.PutObject(ctx, s.bucket, s.uploadKey(id, "state.json"), bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/json"})
	if err != nil {
		return fmt.Errorf("storage: write upload state: %w", err)
	}
	return nil
}

// UploadInfo implements Store.
func (s *S3) UploadInfo(ctx context.Context, id string) (UploadInfo, error) {
	st, err := s.loadState(ctx, id)
	if err != nil {
		return UploadInfo{}, err
	}
	return st.info(id), nil
}

// Append implements Store. The chunk goes to its own object, named by its offset; the state is
// written after it, so a chunk without state (a failure between the two) is overwritten by
// the retry and ignored by Commit.
func (s *S3) Append(ctx context.Context, id string, offset int64, r io.Reader) (int64, error) {
	st, err := s.loadState(ctx, id)
	if err != nil {
		return 0, err
	}
	h, err := st.next(offset)
	if err != nil {
		return 0, err
	}
	key := s.uploadKey(id, chunkName(offset))
	opts := putOpts()
	opts.PartSize = uint64(s.partSize)
	ui, err := s.client.PutObject(ctx, s.bucket, key, io.TeeReader(ctxReader{ctx, r}, h), -1, opts)
	if err != nil {
		return 0, fmt.Errorf("storage: store chunk: %w", err)
	}
	if ui.Size == 0 {
		s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
		return st.Size, nil
	}
	st.Chunks = append(st.Chunks, chunk{Offset: offset, Size: ui.Size})
	st.Size += ui.Size
	st.UpdatedAt = s.clock.Now().UTC()
	if err := st.saveHash(h); err != nil {
		return 0, err
	}
	if err := s.saveState(ctx, id, st); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// openChunks streams the session's chunks in order, as one reader.
func (s *S3) openChunks(ctx context.Context, id string, st *sessionState) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		for _, c := range st.Chunks {
			obj, err := s.client.GetObject(ctx, s.bucket, s.uploadKey(id, chunkName(c.Offset)), minio.GetObjectOptions{})
			if err == nil {
				_, err = io.Copy(pw, io.LimitReader(obj, c.Size))
				obj.Close()
			}
			if err != nil {
				pw.CloseWithError(fmt.Errorf("storage: read chunk: %w", err))
				return
			}
		}
		pw.Close()
	}()
	return pr
}

// Commit implements Store.
func (s *S3) Commit(ctx context.Context, id string, want digest.Digest) (Info, error) {
	if err := CheckDigest(want); err != nil {
		return Info{}, err
	}
	st, err := s.loadState(ctx, id)
	if err != nil {
		return Info{}, err
	}
	defer s.removeUpload(context.WithoutCancel(ctx), id)
	err = st.verify(want, func() (io.ReadCloser, error) { return s.openChunks(ctx, id, st), nil })
	if err != nil {
		return Info{}, err
	}
	key := s.blobKey(want)
	if composable(st.Chunks) {
		srcs := make([]minio.CopySrcOptions, len(st.Chunks))
		for i, c := range st.Chunks {
			srcs[i] = minio.CopySrcOptions{Bucket: s.bucket, Object: s.uploadKey(id, chunkName(c.Offset))}
		}
		dst := minio.CopyDestOptions{Bucket: s.bucket, Object: key, ReplaceMetadata: true,
			UserMetadata: map[string]string{}, ContentType: "application/octet-stream"}
		if _, err := s.client.ComposeObject(ctx, dst, srcs...); err != nil {
			return Info{}, fmt.Errorf("storage: join chunks: %w", err)
		}
	} else {
		// Small chunks: S3 cannot join them server-side, so they stream through once more.
		rc := s.openChunks(ctx, id, st)
		defer rc.Close()
		opts := putOpts()
		opts.PartSize = uint64(s.partSize)
		if _, err := s.client.PutObject(ctx, s.bucket, key, rc, st.Size, opts); err != nil {
			return Info{}, fmt.Errorf("storage: join chunks: %w", err)
		}
	}
	return Info{Digest: want, Size: st.Size, ModTime: s.clock.Now()}, nil
}

// composable reports whether S3 can join the chunks by server-side copies: one chunk, or every
// chunk but the last at least the minimum part size.
func composable(chunks []chunk) bool {
	if len(chunks) == 0 {
		return false
	}
	for _, c := range chunks[:len(chunks)-1] {
		if c.Size < s3MinPart {
			return false
		}
	}
	return true
}

// AbortUpload implements Store.
func (s *S3) AbortUpload(ctx context.Context, id string) error {
	if _, err := s.loadState(ctx, id); err != nil {
		return err
	}
	return s.removeUpload(ctx, id)
}

// removeUpload deletes every object of the session, the state last (so a session whose removal
// failed half way is still listed and removed again later).
func (s *S3) removeUpload(ctx context.Context, id string) error {
	prefix := s.prefix + "uploads/" + id + "/"
	var keys []string
	for oi := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("storage: list upload: %w", oi.Err)
		}
		if !strings.HasSuffix(oi.Key, "/state.json") {
			keys = append(keys, oi.Key)
		}
	}
	keys = append(keys, prefix+"state.json")
	for _, k := range keys {
		if err := s.client.RemoveObject(ctx, s.bucket, k, minio.RemoveObjectOptions{}); err != nil && !isNoSuchKey(err) {
			return fmt.Errorf("storage: remove upload: %w", err)
		}
	}
	return nil
}

// WalkUploads implements Store.
func (s *S3) WalkUploads(ctx context.Context, fn func(UploadInfo) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prefix := s.prefix + "uploads/"
	for oi := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("storage: list uploads: %w", oi.Err)
		}
		id, ok := strings.CutSuffix(strings.TrimPrefix(oi.Key, prefix), "/state.json")
		if !ok || !validUploadID(id) {
			continue
		}
		st, err := s.loadState(ctx, id)
		if errors.Is(err, ErrUploadNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(st.info(id)); err != nil {
			return err
		}
	}
	return ctx.Err()
}
