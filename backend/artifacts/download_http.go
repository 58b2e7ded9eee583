package artifacts

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// signedURLTTL is how long a presigned download stays valid: long enough to start a big
// download, short enough that a leaked URL is soon worthless.
const signedURLTTL = 10 * time.Minute

// download is GET and HEAD …/artifacts/{package}/{version}/{file}: the file's bytes, with
// Range and If-Range (the ETag is the digest) for resumed downloads, or a redirect to a
// presigned URL of the store when the operator enabled them. X-Artifact-Version says which
// version "latest" was.
func (h *Handler) download(c *gin.Context, a *repo.Access) error {
	e, err := h.svc.Resolve(c.Request.Context(), a.Repo.ID, c.Param("package"), c.Param("version"), c.Param("file"))
	if err != nil {
		return err
	}
	h.recordPull(c, a, e)
	return h.serve(c, e)
}

// recordPull writes down a job token's GET of a file (uses.go): the pipeline's inputs.
func (h *Handler) recordPull(c *gin.Context, a *repo.Access, e *Entry) {
	if p := auth.From(c); p != nil && p.Kind == auth.KindJob && p.PipelineID != 0 && c.Request.Method == http.MethodGet {
		h.svc.used(c.Request.Context(), p.PipelineID, UsePull, a.Repo.ID, e)
	}
}

// serve answers a download of a resolved file (an artifact's or a release's).
func (h *Handler) serve(c *gin.Context, e *Entry) error {
	return h.serveTagged(c, e, etag(e.File.Digest))
}

// serveTagged is serve with the ETag given: the Hugging Face endpoint's clients want the bare
// hex digest (hf_http.go). If-Range and If-None-Match compare against it.
func (h *Handler) serveTagged(c *gin.Context, e *Entry, tag string) error {
	ctx := c.Request.Context()
	d := digest.Digest(e.File.Digest)
	hdr := c.Writer.Header()
	hdr.Set("ETag", tag)
	hdr.Set("X-Checksum-Sha256", d.Encoded())
	if raw, err := hex.DecodeString(d.Encoded()); err == nil {
		hdr.Set("Digest", "sha-256="+base64.StdEncoding.EncodeToString(raw))
	}
	hdr.Set("X-Artifact-Version", e.Version.Version)
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": e.File.Name}))
	hdr.Set("Accept-Ranges", "bytes")
	// Always revalidate: "latest" moves, and a deleted file may come back with other bytes.
	hdr.Set("Cache-Control", "private, no-cache")
	if c.Request.Method == http.MethodHead {
		hdr.Set("Content-Length", strconv.FormatInt(e.File.Size, 10))
		c.Status(http.StatusOK)
		return nil
	}
	if h.presign {
		u, err := h.svc.store.SignedURL(ctx, d, signedURLTTL)
		if err == nil {
			c.Redirect(http.StatusTemporaryRedirect, u)
			return nil
		}
		if !errors.Is(err, storage.ErrNotSupported) {
			return err
		}
	}
	rc, _, err := h.svc.store.Open(ctx, d)
	if err != nil {
		// The database names a blob the store lacks: an operator's problem, not the client's.
		return fmt.Errorf("artifacts: open %s of %s/%s/%s: %w", d, e.Package.Name, e.Version.Version, e.File.Name, err)
	}
	defer rc.Close()
	// ServeContent answers everything itself, its 416 included (rangeErrorWriter), so there is no
	// error left to return.
	storage.ServeContent(&rangeErrorWriter{ResponseWriter: c.Writer}, c.Request, e.File.CreatedAt, rc)
	return nil
}

// rangeErrorWriter answers the 416 of http.ServeContent (a range past the end, or one it
// cannot read) with the API's error envelope instead of its plain text, and drops that text.
type rangeErrorWriter struct {
	http.ResponseWriter
	failed bool
}

// Unwrap lets storage.ServeContent reach the connection's ReadFrom.
func (w *rangeErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *rangeErrorWriter) WriteHeader(code int) {
	if code != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.failed = true
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.ResponseWriter.WriteHeader(code)
	json.NewEncoder(w.ResponseWriter).Encode(api.Envelope{Error: &api.Body{Code: fault.CodeBadRequest,
		Message: fmt.Sprintf("the range is not within the file (%s)", w.Header().Get("Content-Range"))}})
}

func (w *rangeErrorWriter) Write(b []byte) (int, error) {
	if w.failed {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}
