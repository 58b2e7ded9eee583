package storage_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// eachBackend runs fn against a fresh store of every backend: the local disk always, S3 against
// the test server of e2e/testenv.sh (skipped without it, a failure under CI=true).
func eachBackend(t *testing.T, fn func(t *testing.T, s storage.Store)) {
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		s, err := storage.NewLocal(t.TempDir(), clock.Real{})
		if err != nil {
			t.Fatal(err)
		}
		fn(t, s)
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		fn(t, newS3(t))
	})
}

func newS3(t *testing.T) *storage.S3 {
	t.Helper()
	srv := testenv.S3Server(t)
	s, err := storage.NewS3(context.Background(), storage.S3Config{
		Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Bucket: srv.Bucket,
		Insecure: true, Prefix: "test-" + randomHex(t, 8) + "/", PartSize: 5 << 20,
	}, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func readAll(t *testing.T, s storage.Store, d digest.Digest) []byte {
	t.Helper()
	rc, info, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatalf("open %s: %v", d, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != info.Size {
		t.Fatalf("open: info says %d bytes, read %d", info.Size, len(b))
	}
	return b
}

func TestPutOpenStatDelete(t *testing.T) {
	eachBackend(t, func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		for _, algo := range []digest.Algorithm{digest.SHA256, digest.SHA512} {
			data := randomBytes(3000)
			d := algo.FromBytes(data)
			info, err := s.Put(ctx, d, int64(len(data)), bytes.NewReader(data))
			if err != nil || info.Size != 3000 || info.Digest != d {
				t.Fatalf("put %s: %+v %v", algo, info, err)
			}
			if got := readAll(t, s, d); !bytes.Equal(got, data) {
				t.Fatalf("%s: read back differs", algo)
			}
			if st, err := s.Stat(ctx, d); err != nil || st.Size != 3000 {
				t.Fatalf("stat: %+v %v", st, err)
			}
			// Ranges: seek and read a slice, as http.ServeContent does.
			rc, _, err := s.Open(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rc.Seek(1000, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			part := make([]byte, 500)
			if _, err := io.ReadFull(rc, part); err != nil || !bytes.Equal(part, data[1000:1500]) {
				t.Fatalf("range read: %v", err)
			}
			if end, err := rc.Seek(0, io.SeekEnd); err != nil || end != 3000 {
				t.Fatalf("seek end: %d %v", end, err)
			}
			rc.Close()
			// A second Put of the same bytes is harmless.
			if _, err := s.Put(ctx, d, -1, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, d); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Stat(ctx, d); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("stat after delete: %v", err)
			}
			if _, _, err := s.Open(ctx, d); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("open after delete: %v", err)
			}
			if err := s.Delete(ctx, d); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("second delete: %v", err)
			}
		}
		// The empty blob is a blob.
		empty := digest.SHA256.FromBytes(nil)
		if _, err := s.Put(ctx, empty, 0, bytes.NewReader(nil)); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, s, empty); len(got) != 0 {
			t.Fatalf("empty blob has %d bytes", len(got))
		}
	})
}

func TestPutRefusesWrongContentAndKeepsNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		// Sizes below and above one part (S3 streams the larger ones as a multipart upload).
		for _, n := range []int{100, 11 << 20} {
			data := randomBytes(n)
			d := digest.SHA256.FromBytes(data)
			bad := append(bytes.Clone(data), 'x')
			if _, err := s.Put(ctx, d, -1, bytes.NewReader(bad)); !errors.Is(err, storage.ErrDigestMismatch) {
				t.Fatalf("%d bytes, wrong content: %v", n, err)
			}
			if _, err := s.Put(ctx, d, int64(n+1), bytes.NewReader(data)); !errors.Is(err, storage.ErrSizeMismatch) {
				t.Fatalf("%d bytes, wrong size: %v", n, err)
			}
			if _, err := s.Stat(ctx, d); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("%d bytes: a refused put left a blob: %v", n, err)
			}
			if _, err := s.Put(ctx, d, int64(n), bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, s, d); !bytes.Equal(got, data) {
				t.Fatal("read back differs")
			}
		}
		if blobs := walk(t, s); len(blobs) != 2 {
			t.Fatalf("walk after refused puts: %v", blobs)
		}
	})
}

func TestDigestsAreChecked(t *testing.T) {
	eachBackend(t, func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		for _, d := range []digest.Digest{
			"", "sha256:", "sha256:../../../../etc/passwd", "md5:d41d8cd98f00b204e9800998ecf8427e",
			"sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
			"sha384:38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b",
			digest.Digest("sha256:" + strings.Repeat("a", 63)),
		} {
			if _, err := s.Put(ctx, d, 0, bytes.NewReader(nil)); !errors.Is(err, storage.ErrUnsupportedDigest) {
				t.Errorf("put %q: %v", d, err)
			}
			if _, err := s.Stat(ctx, d); !errors.Is(err, storage.ErrUnsupportedDigest) {
				t.Errorf("stat %q: %v", d, err)
			}
		}
		for _, id := range []string{"", "../../blobs", "0123456789abcdef0123456789abcdeg", strings.Repeat("a", 33)} {
			if _, err := s.UploadInfo(ctx, id); !errors.Is(err, storage.ErrUploadNotFound) {
				t.Errorf("upload %q: %v", id, err)
			}
			if _, err := s.Append(ctx, id, 0, strings.NewReader("x")); !errors.Is(err, storage.ErrUploadNotFound) {
				t.Errorf("append %q: %v", id, err)
			}
		}
	})
}

// blockingReader delivers first, then waits for release before the rest.
type blockingReader struct {
	first, rest []byte
	reached     chan struct{}
	release     chan struct{}
	once        sync.Once
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	b.once.Do(func() { close(b.reached); <-b.release })
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// While a Put is half way, the blob does not exist for anyone.
func TestNoPartialBlobIsVisible(t *testing.T) {
	eachBackend(t, func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		data := randomBytes(12 << 20)
		d := digest.SHA256.FromBytes(data)
		r := &blockingReader{first: data[:6<<20], rest: data[6<<20:], reached: make(chan struct{}), release: make(chan struct{})}
		done := make(chan error, 1)
		go func() { _, err := s.Put(ctx, d, -1, r); done <- err }()
		<-r.reached
		if _, err := s.Stat(ctx, d); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("half-written blob is visible: %v", err)
		}
		if blobs := walk(t, s); len(blobs) != 0 {
			t.Errorf("walk lists a half-written blob: %v", blobs)
		}
		close(r.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, s, d); !bytes.Equal(got, data) {
			t.Fatal("read back differs")
		}
	})
}

func TestConcurrentPutsOfOneBlob(t *testing.T) {
	eachBackend(t, func(t *testing.T, s storage.Store) {
		data := randomBytes(64 << 10)
		d := digest.SHA256.FromBytes(data)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				_, err := s.Put(context.Background(), d, int64(len(data)), bytes.NewReader(data))
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := readAll(t, s, d); !bytes.Equal(got, data) {
			t.Fatal("read back differs")
		}
	})
}

// failingReader returns n bytes, then an error, as a client that drops its connection.
type failingReader struct {
	data []byte
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, errors.New("connection reset")
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestUploadSessions(t *testing.T) {
	eachBackend(t, func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		data := randomBytes(9000)
		id, err := s.CreateUpload(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.Append(ctx, id, 0, bytes.NewReader(data[:4000])); err != nil || n != 4000 {
			t.Fatalf("append: %d %v", n, err)
		}
		// Out of order: refused, with where to go on.
		var oe *storage.OffsetError
		if _, err := s.Append(ctx, id, 5000, bytes.NewReader(data[5000:])); !errors.As(err, &oe) || oe.Size != 4000 {
			t.Fatalf("out-of-order append: %v", err)
		}
		// A chunk cut off half way adds nothing.
		if _, err := s.Append(ctx, id, 4000, &failingReader{data: data[4000:6000]}); err == nil {
			t.Fatal("a failed chunk was accepted")
		}
		info, err := s.UploadInfo(ctx, id)
		if err != nil || info.Size != 4000 || info.ID != id {
			t.Fatalf("after a failed chunk: %+v %v", info, err)
		}
		// Resume where the store says, a zero-length chunk changes nothing.
		if n, err := s.Append(ctx, id, 4000, bytes.NewReader(nil)); err != nil || n != 4000 {
			t.Fatalf("empty append: %d %v", n, err)
		}
		if n, err := s.Append(ctx, id, 4000, bytes.NewReader(data[4000:])); err != nil || n != 9000 {
			t.Fatalf("resumed append: %d %v", n, err)
		}
		var listed []string
		if err := s.WalkUploads(ctx, func(u storage.UploadInfo) error { listed = append(listed, u.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(listed) != 1 || listed[0] != id {
			t.Fatalf("walk uploads: %v", listed)
		}
		d := digest.SHA256.FromBytes(data)
		if _, err := s.Stat(ctx, d); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("an uncommitted upload is visible: %v", err)
		}
		if info, err := s.Commit(ctx, id, d); err != nil || info.Size != 9000 {
			t.Fatalf("commit: %+v %v", info, err)
		}
		if got := readAll(t, s, d); !bytes.Equal(got, data) {
			t.Fatal("committed blob differs")
		}
		if _, err := s.UploadInfo(ctx, id); !errors.Is(err, storage.ErrUploadNotFound) {
			t.Fatalf("session after commit: %v", err)
		}
	})
}

func TestUploadCommitVariants(t *testing.T) {
	eachBackend(t, func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		upload := func(chunks ...[]byte) string {
			id, err := s.CreateUpload(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var off int64
			for _, c := range chunks {
				if off, err = s.Append(ctx, id, off, bytes.NewReader(c)); err != nil {
					t.Fatal(err)
				}
			}
			return id
		}
		// sha512 is verified by reading the bytes again.
		data := randomBytes(5000)
		d512 := digest.SHA512.FromBytes(data)
		if _, err := s.Commit(ctx, upload(data[:10], data[10:]), d512); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, s, d512); !bytes.Equal(got, data) {
			t.Fatal("sha512 blob differs")
		}
		// A wrong digest keeps nothing, not even the session.
		id := upload(data)
		wrong := digest.SHA256.FromBytes(append(bytes.Clone(data), 1))
		if _, err := s.Commit(ctx, id, wrong); !errors.Is(err, storage.ErrDigestMismatch) {
			t.Fatalf("wrong digest: %v", err)
		}
		if _, err := s.Stat(ctx, wrong); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("blob after a refused commit: %v", err)
		}
		if _, err := s.UploadInfo(ctx, id); !errors.Is(err, storage.ErrUploadNotFound) {
			t.Fatalf("session after a refused commit: %v", err)
		}
		id = upload(data)
		if _, err := s.Commit(ctx, id, digest.SHA512.FromBytes(data[1:])); !errors.Is(err, storage.ErrDigestMismatch) {
			t.Fatalf("wrong sha512: %v", err)
		}
		// Big chunks (joined server-side on S3), an empty upload, and an abort.
		big := randomBytes(11 << 20)
		dBig := digest.SHA256.FromBytes(big)
		if _, err := s.Commit(ctx, upload(big[:6<<20], big[6<<20:]), dBig); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, s, dBig); !bytes.Equal(got, big) {
			t.Fatal("big blob differs")
		}
		if _, err := s.Commit(ctx, upload(), digest.SHA256.FromBytes(nil)); err != nil {
			t.Fatal(err)
		}
		id = upload(data)
		if err := s.AbortUpload(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := s.AbortUpload(ctx, id); !errors.Is(err, storage.ErrUploadNotFound) {
			t.Fatalf("second abort: %v", err)
		}
		if err := s.WalkUploads(ctx, func(u storage.UploadInfo) error { return errors.New("left: " + u.ID) }); err != nil {
			t.Fatal(err)
		}
	})
}

func walk(t *testing.T, s storage.Store) []string {
	t.Helper()
	var out []string
	if err := s.Walk(context.Background(), func(i storage.Info) error {
		out = append(out, string(i.Digest))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestWalk(t *testing.T) {
	eachBackend(t, func(t *testing.T, s storage.Store) {
		var want []string
		for range 5 {
			data := randomBytes(100)
			d := digest.SHA256.FromBytes(data)
			if _, err := s.Put(context.Background(), d, 100, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			want = append(want, string(d))
		}
		sort.Strings(want)
		if got := walk(t, s); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("walk: %v, want %v", got, want)
		}
		stop := errors.New("stop")
		n := 0
		if err := s.Walk(context.Background(), func(storage.Info) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
			t.Fatalf("early stop: %v after %d", err, n)
		}
	})
}

func TestLocalLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	s, err := storage.NewLocal(dir, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := randomBytes(1000)
	d := digest.SHA256.FromBytes(data)
	s.Put(ctx, d, -1, bytes.NewReader(append(bytes.Clone(data), 'x')))
	s.Put(ctx, d, -1, &failingReader{data: data[:10]})
	if entries, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(entries) != 0 {
		t.Fatalf("refused puts left temp files: %v", entries)
	}
	// A stray file in the blob tree is not a blob.
	os.MkdirAll(filepath.Join(dir, "blobs", "sha256", "zz"), 0o755)
	os.WriteFile(filepath.Join(dir, "blobs", "sha256", "zz", "notes.txt"), []byte("x"), 0o644)
	if got := walk(t, s); len(got) != 0 {
		t.Fatalf("walk: %v", got)
	}
}

func TestS3SignedURL(t *testing.T) {
	s := newS3(t)
	ctx := context.Background()
	data := randomBytes(2048)
	d := digest.SHA256.FromBytes(data)
	if _, err := s.Put(ctx, d, -1, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	u, err := s.SignedURL(ctx, d, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Range", "bytes=100-199")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, data[100:200]) {
		t.Fatalf("signed URL: %d %q", resp.StatusCode, got)
	}
	local, _ := storage.NewLocal(t.TempDir(), clock.Real{})
	if _, err := local.SignedURL(ctx, d, time.Minute); !errors.Is(err, storage.ErrNotSupported) {
		t.Fatalf("local signed URL: %v", err)
	}
}

// patternReader yields n bytes without holding them: a 64 KiB block, each copy stamped with
// its number so no two are alike (cheap enough under -race).
type patternReader struct {
	n, off int64
	block  []byte
}

func newPattern(n int64) *patternReader {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return &patternReader{n: n, block: b}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	bs := int64(len(p.block))
	if p.off%bs == 0 {
		binary.BigEndian.PutUint64(p.block, uint64(p.off/bs))
	}
	i := p.off % bs
	n := copy(b, p.block[i:min(bs, i+p.n-p.off)])
	p.off += int64(n)
	return n, nil
}

// A 128 MiB blob streams through each backend, by Put and by an upload session, with a few
// MiB of allocations at most: nothing holds it whole. (Sequential, so the process-wide counter
// measures one thing at a time.)
func TestPutStreamsWithoutHoldingTheBlob(t *testing.T) {
	const size = 128 << 20
	h := digest.SHA256.Digester()
	io.Copy(h.Hash(), newPattern(size))
	d := h.Digest()
	local, err := storage.NewLocal(t.TempDir(), clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]storage.Store{"local": local}
	if testenv.Has(testenv.EnvS3Endpoint) {
		stores["s3"] = newS3(t)
	}
	ctx := context.Background()
	measure := func(what string, fn func() error) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s of %d MiB allocated %.1f MiB", what, size>>20, float64(alloc)/(1<<20))
		if alloc > 32<<20 {
			t.Errorf("%s of %d MiB allocated %d MiB", what, size>>20, alloc>>20)
		}
	}
	for name, s := range stores {
		measure(name+" put", func() error {
			_, err := s.Put(ctx, d, size, newPattern(size))
			return err
		})
		s.Delete(ctx, d)
		measure(name+" upload session", func() error {
			id, err := s.CreateUpload(ctx)
			if err != nil {
				return err
			}
			if _, err := s.Append(ctx, id, 0, newPattern(size)); err != nil {
				return err
			}
			_, err = s.Commit(ctx, id, d)
			return err
		})
	}
}
