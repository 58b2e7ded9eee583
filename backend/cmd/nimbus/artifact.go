package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/backoff"
	"github.com/nimbus-build/nimbus/internal/envflag"
)

func artifactCommand() command {
	return command{summary: "push and pull model files of a repo (push|pull)", run: runArtifact}
}

const artifactUsage = `Usage: nimbus artifact push [flags] ORG/REPO PACKAGE VERSION FILE...
       nimbus artifact pull [flags] ORG/REPO PACKAGE VERSION [FILE...]
       nimbus artifact push --build [flags] PACKAGE FILE...
       nimbus artifact pull --build [flags] PACKAGE [FILE...]

push publishes each FILE (under its base name) as a file of PACKAGE at VERSION, sending its
sha256 so the server keeps it only if every byte arrived. Published files never change: pushing
the same bytes again is a no-op, other bytes are refused. Inside a pipeline the job token
(CNB_TOKEN) and the server (CNB_WEB_ENDPOINT) are used when --token and --server are not given,
and the version records the pipeline, build and commit.

pull downloads the files of PACKAGE at VERSION (every file, or the FILEs named) into --dir.
VERSION may be "latest". An interrupted download resumes where it stopped — in the same run
(after a cut connection) and in the next one (from the partial file left in --dir) — and every
file is checked against its sha256 before it takes its name; a file already there with the right
sha256 is not downloaded again.

--build (inside a pipeline) uses the pipeline's repo (CNB_REPO_SLUG) and the build's own version
(CNB_BUILD_ID): the hand-off space of the build's pipelines, which run on different nodes. A job
of one pipeline pushes there, a job of another pipeline of the same build pulls, after a
cnb:await for the key the first resolved. Only the build's jobs push to it, it is never
"latest", and the server removes it a while after the build ended. Directories travel as one
archive: tar czf processed.tgz processed.`

// artifactClient talks to one server's model-file API (through backend/apiclient; transfers
// stream, resume and retry here).
type artifactClient struct {
	server, token string
	api           *apiclient.Client
	stderr        io.Writer
	every         time.Duration // progress lines when stderr is not a terminal
	retries       int           // attempts of a download after the first
	backoff       time.Duration // before a retry, times the attempt
	stall         time.Duration // a download that receives nothing this long is cut and retried
}

func runArtifact(ctx context.Context, e env, args []string) int {
	verb, code, ok := verbOf(e, args, artifactUsage, "push", "pull")
	if !ok {
		return code
	}
	c := &artifactClient{stderr: e.stderr, every: 2 * time.Second, stall: time.Minute}
	dir := "."
	var scoped bool
	fs := envflag.New("artifact "+verb, artifactUsage)
	fs.Bool(&scoped, "build", "", false, "the build's hand-off version: repo CNB_REPO_SLUG, version CNB_BUILD_ID (inside a pipeline)")
	serverFlags(fs, &c.server, &c.token, "a personal, deploy or job token (default: CNB_TOKEN inside a pipeline)")
	fs.Int(&c.retries, "retries", "NIMBUS_ARTIFACT_RETRIES", 5, "attempts after a failed transfer (a cut connection, a 5xx); downloads resume")
	fs.Duration(&c.backoff, "retry-wait", "NIMBUS_ARTIFACT_RETRY_WAIT", time.Second, "pause before a retry, times the attempt's number")
	if verb == "pull" {
		fs.String(&dir, "dir", "", ".", "where the files go")
	}
	if err := fs.Parse(args[1:], e.getenv, e.stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(e.stderr, "nimbus:", err)
		return 2
	}
	inPipeline(e, &c.server, &c.token)
	rest := fs.Args()
	if scoped {
		slug, id := e.getenv("CNB_REPO_SLUG"), e.getenv("CNB_BUILD_ID")
		if slug == "" || id == "" {
			fmt.Fprintln(e.stderr, "nimbus artifact: --build needs CNB_REPO_SLUG and CNB_BUILD_ID, which a pipeline's jobs have")
			return 2
		}
		if len(rest) > 0 {
			rest = append([]string{slug, rest[0], id}, rest[1:]...)
		}
	}
	need := 4
	if verb == "pull" {
		need = 3
	}
	switch {
	case c.server == "":
		fmt.Fprintln(e.stderr, "nimbus artifact: --server (NIMBUS_SERVER) is required")
		return 2
	case len(rest) < need || strings.Count(rest[0], "/") != 1:
		fmt.Fprintln(e.stderr, artifactUsage)
		return 2
	}
	c.server = strings.TrimRight(c.server, "/")
	c.api = apiclient.New(c.server, apiclient.WithToken(c.token), apiclient.WithHTTPClient(&http.Client{CheckRedirect: dropIfRange}))
	var err error
	if verb == "push" {
		err = c.push(ctx, e.stdout, rest[0], rest[1], rest[2], rest[3:])
	} else {
		err = c.pull(ctx, e.stdout, rest[0], rest[1], rest[2], rest[3:], dir)
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "nimbus artifact "+verb+":", err)
		return 1
	}
	return 0
}

// dropIfRange follows redirects (a presigned S3 URL) without If-Range: the redirect's object is
// named by the file's digest, so the bytes cannot change there, and S3's own ETag would never
// match ours (the rest would come whole instead of from the range).
func dropIfRange(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	req.Header.Del("If-Range")
	return nil
}

// versionPath is the API path of a version ("latest" too) of a package of repo ("org/name").
func versionPath(repo, pkg, version string) string {
	org, name, _ := strings.Cut(repo, "/")
	return apiclient.ArtifactPath(org, name, pkg, version)
}

// fileSum hashes a file: its sha256 in hex and its size.
func fileSum(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, make([]byte, 1<<20))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// push publishes each file, retrying an upload that failed on the way (network, 5xx).
func (c *artifactClient) push(ctx context.Context, out io.Writer, repo, pkg, version string, files []string) error {
	for _, path := range files {
		sum, size, err := fileSum(path)
		if err != nil {
			return err
		}
		u := versionPath(repo, pkg, version) + "/" + url.PathEscape(filepath.Base(path))
		var res apiclient.Published
		for attempt := 0; ; attempt++ {
			status, err := c.upload(ctx, u, path, sum, size, &res)
			if err == nil {
				verb := "published"
				if status == http.StatusOK {
					verb = "already published"
				}
				fmt.Fprintf(out, "%s %s sha256:%s %d bytes\n", verb, res.DownloadURL, sum, size)
				break
			}
			var perm permanent
			if errors.As(err, &perm) || attempt >= c.retries || ctx.Err() != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			fmt.Fprintf(c.stderr, "%s: %v; trying again\n", filepath.Base(path), err)
			if err := backoff.Sleep(ctx, c.retryWait().After(attempt+1)); err != nil {
				return err
			}
		}
	}
	return nil
}

// permanent marks an answer that another attempt would not change (a 4xx).
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

func (c *artifactClient) upload(ctx context.Context, u, path, sum string, size int64, res any) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, permanent{err}
	}
	defer f.Close()
	p := newProgress(c.stderr, filepath.Base(path), size, 0, c.every)
	req, err := c.api.NewRequest(ctx, http.MethodPut, u, counter{f, p})
	if err != nil {
		return 0, permanent{err}
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("X-Checksum-Sha256", sum)
	resp, err := c.api.Send(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	p.finish()
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		return resp.StatusCode, json.NewDecoder(resp.Body).Decode(res)
	case resp.StatusCode >= 500:
		return 0, apiclient.ErrorOf(resp)
	}
	return 0, permanent{apiclient.ErrorOf(resp)}
}

// retryWait is the pause before a retry: the retry-wait flag times the attempt's number.
func (c *artifactClient) retryWait() backoff.Policy {
	return backoff.Policy{Initial: c.backoff, Linear: true}
}
