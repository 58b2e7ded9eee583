package artifacts_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/artifacts"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/registry"
)

func (w *world) collector(grace, uploadTTL time.Duration) *artifacts.Collector {
	return artifacts.NewCollector(w.app.DB, w.app.Builds, w.app.Storage, w.app.Registry, clock.Real{}, slog.New(slog.DiscardHandler),
		artifacts.CollectorConfig{Grace: grace, UploadTTL: uploadTTL})
}

// The collector removes exactly the blobs nothing references once they are older than the
// grace period, and ends abandoned upload sessions of the registry and of the store.
func TestCollectorRemovesOnlyUnreferencedBlobs(t *testing.T) {
	eachDialect(t, nil, func(t *testing.T, w *world) {
		ctx := context.Background()
		kept, dropped, stray, linked := randomBytes(100), randomBytes(200), randomBytes(300), randomBytes(400)
		if r := w.put("dave", apiBase+"/m/v1/kept", kept, true); r.Status != 201 {
			t.Fatal(r.Status)
		}
		if r := w.put("dave", apiBase+"/m/v1/dropped", dropped, true); r.Status != 201 {
			t.Fatal(r.Status)
		}
		if r := w.do("alice", "DELETE", apiBase+"/m/v1/dropped", nil); r.Status != 204 {
			t.Fatal(r.Status)
		}
		if _, err := w.app.Storage.Put(ctx, digest.SHA256.FromBytes(stray), -1, bytes.NewReader(stray)); err != nil {
			t.Fatal(err)
		}
		if r := w.registryPush("dave", "acme/models/img", linked); r.Status != 201 {
			t.Fatal(r.Status)
		}
		if r := w.do("dave", "POST", "/v2/acme/models/img/blobs/uploads/", nil); r.Status != 202 {
			t.Fatal(r.Status)
		}
		if _, err := w.app.Storage.CreateUpload(ctx); err != nil {
			t.Fatal(err)
		}

		// Within the grace period nothing goes, and neither do sessions within their TTL.
		rep, err := w.collector(time.Hour, time.Hour).Collect(ctx)
		if err != nil || rep.Deleted != 0 || rep.Blobs != 4 || rep.UploadsExpired != 0 {
			t.Fatalf("young blobs: %+v %v", rep, err)
		}
		time.Sleep(20 * time.Millisecond)
		rep, err = w.collector(10*time.Millisecond, 10*time.Millisecond).Collect(ctx)
		if err != nil || rep.Deleted != 2 || rep.Freed != 500 || rep.UploadsExpired != 2 {
			t.Fatalf("collection: %+v %v", rep, err)
		}
		left := w.blobs()
		for name, b := range map[string][]byte{"kept": kept, "linked": linked} {
			if _, ok := left[string(digest.SHA256.FromBytes(b))]; !ok {
				t.Errorf("the referenced blob %s was collected", name)
			}
		}
		if len(left) != 2 || w.uploads() != 0 {
			t.Errorf("left: %v, %d sessions", left, w.uploads())
		}
		var n int64
		w.app.DB.Model(&registry.Upload{}).Count(&n)
		if n != 0 {
			t.Errorf("%d registry upload rows outlived their sessions", n)
		}
	})
}

// Collections run back to back, with no grace period at all, while files and registry blobs
// are uploaded, deleted and uploaded again (the same bytes, so each blob turns unreferenced
// and is stored and referenced again while the collector looks at it): afterwards every file
// and every registry link still has its bytes, and a last collection leaves exactly the
// referenced blobs. Every upload has bytes of its own, so no other upload can heal a loss.
func TestCollectorWhileUploading(t *testing.T) {
	eachDialect(t, nil, func(t *testing.T, w *world) {
		ctx := context.Background()
		gc := w.collector(time.Nanosecond, time.Hour)
		stop := make(chan struct{})
		var collections atomic.Int64
		var gcErr error
		var gcWG sync.WaitGroup
		gcWG.Add(1)
		go func() {
			defer gcWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := gc.Collect(ctx); err != nil {
					gcErr = err
					return
				}
				collections.Add(1)
			}
		}()

		var retries atomic.Int64
		// put uploads until the server keeps it: with no grace period a blob may be collected
		// between its upload and its link, and the server says so (503) for the client to retry.
		put := func(path string, data []byte, sum bool) error {
			status := w.put("dave", path, data, sum).Status
			for try := 0; status == http.StatusServiceUnavailable && try < 20; try++ {
				retries.Add(1)
				status = w.put("dave", path, data, true).Status
			}
			if status != http.StatusCreated {
				return fmt.Errorf("upload %s: %d", path, status)
			}
			return nil
		}
		push := func(name string, data []byte) error {
			r := w.registryPush("dave", name, data)
			for try := 0; r.Status == http.StatusNotFound && try < 20; try++ {
				retries.Add(1)
				r = w.registryPush("dave", name, data)
			}
			if r.Status != http.StatusCreated {
				return fmt.Errorf("registry push to %s: %d %s", name, r.Status, r.Body)
			}
			return nil
		}
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for worker := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 12 {
					data := randomBytes(2000)
					first := fmt.Sprintf("%s/w%d/v%d/first", apiBase, worker, i)
					name := fmt.Sprintf("acme/models/w%d", worker)
					steps := []func() error{
						func() error { return put(first, data, i%2 == 0) },
						func() error {
							if r := w.do("alice", "DELETE", first, nil); r.Status != http.StatusNoContent {
								return fmt.Errorf("delete %s: %d", first, r.Status)
							}
							return nil
						},
						func() error { return put(fmt.Sprintf("%s/w%d/v%d/again", apiBase, worker, i), data, i%2 == 1) },
						func() error { return push(name, randomBytes(1000)) },
					}
					for _, step := range steps {
						if err := step(); err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		gcWG.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if gcErr != nil {
			t.Fatal(gcErr)
		}
		t.Logf("%d collections ran during the uploads; %d uploads were sent again", collections.Load(), retries.Load())
		if collections.Load() < 3 {
			t.Errorf("only %d collections overlapped the uploads", collections.Load())
		}
		w.checkEveryReferenceHasItsBytes()
		if _, err := gc.Collect(ctx); err != nil {
			t.Fatal(err)
		}
		w.checkEveryReferenceHasItsBytes()
		var refs []string
		w.app.DB.Raw("SELECT digest FROM artifact_files UNION SELECT digest FROM registry_blobs").Scan(&refs)
		if got := w.blobs(); len(got) != len(refs) {
			t.Errorf("after a quiet collection the store has %d blobs for %d referenced digests", len(got), len(refs))
		}
	})
}

// checkEveryReferenceHasItsBytes downloads every file and checks every registry link's blob.
func (w *world) checkEveryReferenceHasItsBytes() {
	w.t.Helper()
	var files []struct {
		Package, Version, Name, Digest string
	}
	err := w.app.DB.Raw(`SELECT k.name AS package, v.version, f.name, f.digest FROM artifact_files f
		JOIN artifact_versions v ON v.id = f.version_id JOIN artifact_packages k ON k.id = v.package_id`).Scan(&files).Error
	if err != nil {
		w.t.Fatal(err)
	}
	for _, f := range files {
		r := w.do("deploy", "GET", apiBase+"/"+f.Package+"/"+f.Version+"/"+f.Name, nil)
		if r.Status != http.StatusOK || string(digest.SHA256.FromBytes(r.Body)) != f.Digest {
			w.t.Errorf("file %s/%s/%s lost its bytes: %d", f.Package, f.Version, f.Name, r.Status)
		}
	}
	var linked []string
	if err := w.app.DB.Model(&registry.Blob{}).Distinct().Pluck("digest", &linked).Error; err != nil {
		w.t.Fatal(err)
	}
	for _, d := range linked {
		if _, err := w.app.Storage.Stat(context.Background(), digest.Digest(d)); err != nil {
			w.t.Errorf("registry blob %s lost its bytes: %v", d, err)
		}
	}
}

// lockedBuffer is a log sink for several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// Three replicas' collectors share one Redis: each interval one of them collects, not all.
func TestCollectorRunsOnOneReplicaAtATime(t *testing.T) {
	w := newWorld(t, false, nil)
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	const interval = 200 * time.Millisecond
	for range 3 {
		c := artifacts.NewCollector(w.app.DB, w.app.Builds, w.app.Storage, w.app.Registry, clock.Real{}, slog.New(slog.NewTextHandler(&logs, nil)),
			artifacts.CollectorConfig{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Run(ctx, w.app.Redis.Client, interval)
		}()
	}
	time.Sleep(10*interval + interval/2)
	cancel()
	wg.Wait()
	// About 10; three replicas without the lock would make about 30. The lower bound is loose
	// on purpose: a ticker drops the ticks a loaded machine misses.
	if n := logs.count("garbage collection done"); n < 2 || n > 11 {
		t.Fatalf("%d collections in 10 intervals by 3 replicas, want at most one per interval:\n%s", n, logs.buf.String())
	}
}
