package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/backoff"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// remoteFile is a file of a version as the server lists it.
type remoteFile = apiclient.ArtifactFile

// pull downloads the version's files (all, or those named) into dir.
func (c *artifactClient) pull(ctx context.Context, out io.Writer, repo, pkg, version string, names []string, dir string) error {
	org, name, _ := strings.Cut(repo, "/")
	v, err := c.api.ArtifactVersion(ctx, org, name, pkg, version)
	if err != nil {
		return err
	}
	files := v.Files
	if len(names) > 0 {
		files = nil
		for _, n := range names {
			i := slices.IndexFunc(v.Files, func(f remoteFile) bool { return f.Name == n })
			if i < 0 {
				return fmt.Errorf("%s %s has no file %q", pkg, v.Version, n)
			}
			files = append(files, v.Files[i])
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		// The names come from the server: only plain names (one segment under the path rule)
		// may become paths here.
		if userpath.Name(f.Name) != nil || !strings.HasPrefix(f.Digest, "sha256:") || len(f.Digest) != len("sha256:")+64 {
			return fmt.Errorf("the server listed a file this client will not write: %q (%s)", f.Name, f.Digest)
		}
		u := versionPath(repo, pkg, v.Version) + "/" + url.PathEscape(f.Name)
		dst, err := c.fetch(ctx, u, f, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		fmt.Fprintf(out, "%s %s %d bytes (%s %s)\n", dst, f.Digest, f.Size, pkg, v.Version)
	}
	return nil
}

// fetch downloads one file to dir/name through a partial file, resuming and retrying, and
// renames it only once its sha256 is the listed one.
func (c *artifactClient) fetch(ctx context.Context, u string, f remoteFile, dir string) (string, error) {
	dst := filepath.Join(dir, f.Name)
	want := strings.TrimPrefix(f.Digest, "sha256:")
	if sum, _, err := fileSum(dst); err == nil && sum == want {
		fmt.Fprintf(c.stderr, "%s: up to date\n", f.Name)
		return dst, nil
	}
	// The partial file is named by the digest: a partial of other bytes is never resumed.
	part := filepath.Join(dir, "."+f.Name+"."+want[:12]+".part")
	for attempt := 0; ; attempt++ {
		err := c.download(ctx, u, f, part, want)
		if err == nil {
			break
		}
		var perm permanent
		if errors.As(err, &perm) || attempt >= c.retries || ctx.Err() != nil {
			return "", err
		}
		fmt.Fprintf(c.stderr, "%s: %v; resuming\n", f.Name, err)
		if err := backoff.Sleep(ctx, c.retryWait().After(attempt+1)); err != nil {
			return "", err
		}
	}
	if err := os.Rename(part, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// download makes one attempt: it asks for what the partial file lacks (Range from its size,
// If-Range with the file's ETag, so other bytes than the partial's come whole), appends it,
// and checks the whole file's sha256. A failed check deletes the partial file.
func (c *artifactClient) download(ctx context.Context, u string, f remoteFile, part, want string) error {
	file, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return permanent{err}
	}
	defer file.Close()
	h := sha256.New()
	have, err := io.CopyBuffer(h, file, make([]byte, 1<<20)) // the partial's bytes count in the sum
	if err != nil {
		return permanent{err}
	}
	if have > f.Size {
		if have, err = restart(file, h); err != nil {
			return permanent{err}
		}
	}
	if have < f.Size {
		if err := c.receive(ctx, u, f, file, h, &have); err != nil {
			return err
		}
	}
	if have != f.Size {
		return fmt.Errorf("the download stopped at %d of %d bytes", have, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		file.Close()
		os.Remove(part)
		return fmt.Errorf("the downloaded bytes have sha256 %s, not %s; the partial file is deleted", got, want)
	}
	if err := file.Sync(); err != nil {
		return permanent{err}
	}
	return nil
}

// receive requests the bytes from have on and appends them to file and h, moving have along.
func (c *artifactClient) receive(ctx context.Context, u string, f remoteFile, file *os.File, h hash.Hash, have *int64) error {
	// A stalled connection (no byte for c.stall) is cut, so the next attempt resumes.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchdog := time.AfterFunc(c.stall, cancel)
	defer watchdog.Stop()
	req, err := c.api.NewRequest(actx, http.MethodGet, u, nil)
	if err != nil {
		return permanent{err}
	}
	if *have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", *have))
		req.Header.Set("If-Range", `"`+f.Digest+`"`)
	}
	resp, err := c.api.Send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && *have > 0:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", *have)) {
			return fmt.Errorf("the server sent the range %q, not from byte %d", resp.Header.Get("Content-Range"), *have)
		}
	case resp.StatusCode == http.StatusOK:
		// The whole file (no range asked, or the server would not resume these bytes).
		if *have, err = restart(file, h); err != nil {
			return permanent{err}
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if _, err := restart(file, h); err != nil {
			return permanent{err}
		}
		*have = 0
		return errors.New("the server cannot resume this partial file; starting over")
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return apiclient.ErrorOf(resp)
	default:
		return permanent{apiclient.ErrorOf(resp)}
	}
	p := newProgress(c.stderr, f.Name, f.Size, *have, c.every)
	defer p.finish()
	body := stallReader{r: resp.Body, watchdog: watchdog, stall: c.stall}
	n, err := io.CopyBuffer(io.MultiWriter(file, h), counter{body, p}, make([]byte, 1<<20))
	*have += n
	if err != nil {
		return fmt.Errorf("the connection broke after %d of %d bytes: %w", *have, f.Size, err)
	}
	return nil
}

// restart empties the partial file and the hash.
func restart(file *os.File, h hash.Hash) (int64, error) {
	h.Reset()
	if err := file.Truncate(0); err != nil {
		return 0, err
	}
	_, err := file.Seek(0, io.SeekStart)
	return 0, err
}

// stallReader pushes the watchdog back with every read that returns bytes.
type stallReader struct {
	r        io.Reader
	watchdog *time.Timer
	stall    time.Duration
}

func (s stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.watchdog.Reset(s.stall)
	}
	return n, err
}
