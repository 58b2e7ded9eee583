package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Renew extends a lease. RenewResponse.Cancel tells the agent to stop the pipeline. A lease the
// server no longer honours fails with ErrLeaseLost.
func (c *Client) Renew(ctx context.Context, leaseID string) (protocol.RenewResponse, error) {
	var resp protocol.RenewResponse
	path, err := leasePath(leaseID, "renew")
	if err != nil {
		return resp, err
	}
	if _, err := c.postJSON(ctx, path, protocol.RenewRequest{}, &resp); err != nil {
		return resp, fmt.Errorf("renew: %w", err)
	}
	return resp, nil
}

// Event reports one step of a running pipeline. The server treats it idempotently per (job,
// kind), so a retry after a lost answer is harmless.
func (c *Client) Event(ctx context.Context, leaseID string, ev protocol.Event) error {
	path, err := leasePath(leaseID, "events")
	if err != nil {
		return err
	}
	if _, err := c.postJSON(ctx, path, ev, nil); err != nil {
		return fmt.Errorf("event %s: %w", ev.Kind, err)
	}
	return nil
}

// Finish reports the pipeline's final status (success, failed or cancelled). It is idempotent.
func (c *Client) Finish(ctx context.Context, leaseID string, req protocol.FinishRequest) error {
	path, err := leasePath(leaseID, "finish")
	if err != nil {
		return err
	}
	if _, err := c.postJSON(ctx, path, req, nil); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}

// Import reads a file of a repository of this install that a job of the lease imports
// (protocol.ImportRequest). A refusal by a secret repository's rule is an *APIError with code
// protocol.CodeImportRefused and the rule in its message.
func (c *Client) Import(ctx context.Context, leaseID string, req protocol.ImportRequest) (protocol.ImportFile, error) {
	var f protocol.ImportFile
	path, err := leasePath(leaseID, protocol.PathImportsSuffix)
	if err != nil {
		return f, err
	}
	if _, err := c.postJSON(ctx, path, req, &f); err != nil {
		return f, fmt.Errorf("import %s: %w", req.URL, err)
	}
	return f, nil
}

// Lock asks for a stage's or a job's lock (protocol/locks.go); a busy lock is Acquired false.
func (c *Client) Lock(ctx context.Context, leaseID string, req protocol.LockRequest) (protocol.LockResponse, error) {
	var out protocol.LockResponse
	path, err := leasePath(leaseID, protocol.PathLocksSuffix)
	if err != nil {
		return out, err
	}
	if _, err := c.postJSON(ctx, path, req, &out); err != nil {
		return out, fmt.Errorf("lock %q: %w", req.Key, err)
	}
	return out, nil
}

// Unlock releases a lock Lock took; releasing one not held is harmless.
func (c *Client) Unlock(ctx context.Context, leaseID string, req protocol.LockRequest) error {
	path, err := leasePath(leaseID, protocol.PathLocksReleaseSuffix)
	if err != nil {
		return err
	}
	if _, err := c.postJSON(ctx, path, req, nil); err != nil {
		return fmt.Errorf("unlock %q: %w", req.Key, err)
	}
	return nil
}

// releasePath is the API path of a release of the repo slug ("org/repo"), or of one of its files.
func releasePath(slug, tag, file string) (string, error) {
	org, repo, ok := strings.Cut(slug, "/")
	if !ok || org == "" || repo == "" || tag == "" {
		return "", fmt.Errorf("client: release of %q at tag %q", slug, tag)
	}
	p := "/api/v1/repos/" + url.PathEscape(org) + "/" + url.PathEscape(repo) + "/releases/" + url.PathEscape(tag)
	if file != "" {
		p += "/files/" + url.PathEscape(file)
	}
	return p, nil
}

// pullPath is the API path of what (merge, reviewers) of pull request number of slug.
func pullPath(slug string, number int64, what string) (string, error) {
	org, repo, ok := strings.Cut(slug, "/")
	if !ok || org == "" || repo == "" || number <= 0 {
		return "", fmt.Errorf("client: pull request %d of %q", number, slug)
	}
	return "/api/v1/repos/" + url.PathEscape(org) + "/" + url.PathEscape(repo) + "/pulls/" + strconv.FormatInt(number, 10) + "/" + what, nil
}

// MergePull merges pull request number of slug with a pipeline's job token (protocol/pulls.go).
// A refusal (the gate, a conflict) is not retried: it is the answer.
func (c *Client) MergePull(ctx context.Context, jobToken, slug string, number int64, req protocol.MergeRequest) (protocol.MergedPull, error) {
	var out protocol.MergedPull
	path, err := pullPath(slug, number, "merge")
	if err != nil {
		return out, err
	}
	body, err := jsonBody(req)
	if err != nil {
		return out, err
	}
	if _, err := c.call(ctx, request{method: http.MethodPost, path: path, body: body, contentType: "application/json",
		token: jobToken, out: &out}); err != nil {
		return out, fmt.Errorf("merge pull request #%d: %w", number, err)
	}
	return out, nil
}

// SetReviewers changes the reviewers of pull request number of slug with a pipeline's job token
// (protocol/pulls.go).
func (c *Client) SetReviewers(ctx context.Context, jobToken, slug string, number int64, req protocol.ReviewersRequest) (protocol.ReviewedPull, error) {
	var out protocol.ReviewedPull
	path, err := pullPath(slug, number, "reviewers")
	if err != nil {
		return out, err
	}
	body, err := jsonBody(req)
	if err != nil {
		return out, err
	}
	if _, err := c.call(ctx, request{method: http.MethodPost, path: path, body: body, contentType: "application/json",
		token: jobToken, out: &out}); err != nil {
		return out, fmt.Errorf("reviewers of pull request #%d: %w", number, err)
	}
	return out, nil
}

// PutRelease creates or updates a release with a pipeline's job token (protocol/releases.go).
func (c *Client) PutRelease(ctx context.Context, jobToken, slug, tag string, req protocol.ReleaseRequest) (protocol.Release, error) {
	var out protocol.Release
	path, err := releasePath(slug, tag, "")
	if err != nil {
		return out, err
	}
	body, err := jsonBody(req)
	if err != nil {
		return out, err
	}
	if _, err := c.call(ctx, request{method: http.MethodPut, path: path, body: body, contentType: "application/json",
		token: jobToken, out: &out}); err != nil {
		return out, fmt.Errorf("release %s: %w", tag, err)
	}
	return out, nil
}

// PutReleaseFile publishes the file open returns as name in a release, with its sha256 so that
// the server checks the bytes and a retry of a file already there sends nothing twice. The file
// is streamed, opened again for each attempt.
func (c *Client) PutReleaseFile(ctx context.Context, jobToken, slug, tag, name string, open func() (*os.File, error)) (protocol.ReleaseFile, error) {
	var out protocol.ReleaseFile
	path, err := releasePath(slug, tag, name)
	if err != nil {
		return out, err
	}
	sum, size, err := fileSHA256(open)
	if err != nil {
		return out, fmt.Errorf("release %s: file %s: %w", tag, name, err)
	}
	err = c.retry.do(ctx, func() error {
		f, err := open()
		if err != nil {
			return permanent(err)
		}
		defer f.Close()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+path, f)
		if err != nil {
			return permanent(err)
		}
		req.ContentLength = size
		req.Header.Set("Authorization", "Bearer "+jobToken)
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("X-Checksum-Sha256", sum)
		req.Header.Set("User-Agent", c.userAgent)
		resp, err := c.http.Do(req)
		if err != nil {
			return fmt.Errorf("client: PUT %s: %w", path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return newAPIError(http.MethodPut, path, resp)
		}
		return json.NewDecoder(resp.Body).Decode(&out)
	})
	if err != nil {
		return out, fmt.Errorf("release %s: file %s: %w", tag, name, err)
	}
	return out, nil
}

func fileSHA256(open func() (*os.File, error)) (string, int64, error) {
	f, err := open()
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// StartBuild asks for a build a pipeline starts (protocol/builds.go).
func (c *Client) StartBuild(ctx context.Context, leaseID string, req protocol.StartBuildRequest) (protocol.ChildBuild, error) {
	var out protocol.ChildBuild
	path, err := leasePath(leaseID, protocol.PathBuildsSuffix)
	if err != nil {
		return out, err
	}
	if _, err := c.postJSON(ctx, path, req, &out); err != nil {
		return out, fmt.Errorf("start a build: %w", err)
	}
	return out, nil
}

// ChildBuild reads how a build the pipeline started stands.
func (c *Client) ChildBuild(ctx context.Context, leaseID string, ref protocol.ChildBuildRef) (protocol.ChildBuild, error) {
	var out protocol.ChildBuild
	path, err := leasePath(leaseID, protocol.PathBuildStatusSuffix)
	if err != nil {
		return out, err
	}
	if _, err := c.postJSON(ctx, path, ref, &out); err != nil {
		return out, fmt.Errorf("build %s#%d: %w", ref.Slug, ref.Number, err)
	}
	return out, nil
}

// Resolve resolves a key of the lease's build (cnb:resolve).
func (c *Client) Resolve(ctx context.Context, leaseID string, req protocol.KeyRequest) error {
	path, err := leasePath(leaseID, protocol.PathResolveSuffix)
	if err != nil {
		return err
	}
	if _, err := c.postJSON(ctx, path, req, nil); err != nil {
		return fmt.Errorf("resolve %q: %w", req.Key, err)
	}
	return nil
}

// Await asks once whether a key of the lease's build is resolved (cnb:await).
func (c *Client) Await(ctx context.Context, leaseID string, req protocol.KeyRequest) (protocol.KeyAnswer, error) {
	var out protocol.KeyAnswer
	path, err := leasePath(leaseID, protocol.PathAwaitSuffix)
	if err != nil {
		return out, err
	}
	if _, err := c.postJSON(ctx, path, req, &out); err != nil {
		return out, fmt.Errorf("await %q: %w", req.Key, err)
	}
	return out, nil
}
