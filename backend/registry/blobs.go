package registry

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
)

// signedURLTTL is how long a presigned download stays valid: long enough to start a big
// download, short enough that a leaked URL is soon worthless.
const signedURLTTL = 10 * time.Minute

// storageError turns the store's errors into OCI answers.
func storageError(err error, d digest.Digest) error {
	var oe *storage.OffsetError
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, storage.ErrDigestMismatch):
		return errDigestInvalid("the content does not match digest %s", d)
	case errors.Is(err, storage.ErrSizeMismatch):
		return ociError(http.StatusBadRequest, CodeSizeInvalid, "the content does not match Content-Length")
	case errors.Is(err, storage.ErrUnsupportedDigest):
		return errDigestInvalid("invalid digest %q", truncate(string(d), 150))
	case errors.Is(err, storage.ErrNotFound):
		return errBlobUnknown(string(d))
	case errors.As(err, &tooBig):
		return errQuota(tooBig.Limit)
	case errors.Is(err, storage.ErrUploadNotFound):
		return errUploadUnknown()
	case errors.As(err, &oe):
		return ociError(http.StatusRequestedRangeNotSatisfiable, CodeBlobUploadInvalid, "the chunk must start at offset %d", oe.Size)
	}
	return err
}

// repository returns the request's registry repository; pushes create it, reads of one that
// does not exist get nil.
func (h *Handler) repository(r *http.Request, req *request, create bool) (*Repository, error) {
	return h.meta.repository(r.Context(), req.access.Repo.ID, req.image, create)
}

// linkedBlob returns the blob digest of the URL and the request's repository, or
// BLOB_UNKNOWN when the blob is not linked there.
func (h *Handler) linkedBlob(r *http.Request, req *request) (digest.Digest, *Repository, error) {
	d, err := parseDigest(req.ref)
	if err != nil {
		return "", nil, err
	}
	repo, err := h.repository(r, req, false)
	if err != nil {
		return "", nil, err
	}
	if repo == nil {
		return "", nil, errBlobUnknown(string(d))
	}
	link, err := h.meta.blob(r.Context(), repo.ID, string(d))
	if err != nil {
		return "", nil, err
	}
	if link == nil {
		return "", nil, errBlobUnknown(string(d))
	}
	return d, repo, nil
}

// getBlob is GET and HEAD /v2/<name>/blobs/<digest>, with Range support (resumed downloads),
// or a redirect to a presigned URL when the store has them and Presign is on.
func (h *Handler) getBlob(w http.ResponseWriter, r *http.Request, req *request) error {
	d, _, err := h.linkedBlob(r, req)
	if err != nil {
		return err
	}
	w.Header().Set("Docker-Content-Digest", string(d))
	w.Header().Set("ETag", `"`+string(d)+`"`)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Accept-Ranges", "bytes")
	// Blobs never change under their digest.
	w.Header().Set("Cache-Control", "max-age=31536000")
	if r.Method == http.MethodHead {
		info, err := h.store.Stat(r.Context(), d)
		if err != nil {
			return storageError(err, d)
		}
		w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
		w.WriteHeader(http.StatusOK)
		return nil
	}
	if h.presign {
		u, err := h.store.SignedURL(r.Context(), d, signedURLTTL)
		if err == nil {
			http.Redirect(w, r, u, http.StatusTemporaryRedirect)
			return nil
		}
		if !errors.Is(err, storage.ErrNotSupported) {
			return err
		}
	}
	rc, info, err := h.store.Open(r.Context(), d)
	if err != nil {
		return storageError(err, d)
	}
	defer rc.Close()
	http.ServeContent(w, r, "", info.ModTime, rc)
	return nil
}

// deleteBlob is DELETE /v2/<name>/blobs/<digest>: the blob leaves this repository at once; its
// bytes stay in the store, for other repositories and for the garbage collector to decide.
func (h *Handler) deleteBlob(w http.ResponseWriter, r *http.Request, req *request) error {
	d, repo, err := h.linkedBlob(r, req)
	if err != nil {
		return err
	}
	found, err := h.meta.unlinkBlob(r.Context(), repo.ID, string(d))
	if err != nil {
		return err
	}
	if !found {
		return errBlobUnknown(string(d)) // deleted meanwhile
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// stored links a blob that just reached the store into the repository and answers 201.
func (h *Handler) stored(w http.ResponseWriter, r *http.Request, req *request, repo *Repository, info storage.Info) error {
	if err := h.link(r.Context(), repo.ID, info.Digest, info.Size); err != nil {
		return errBlobCollected(err)
	}
	blobCreated(w, req, info.Digest)
	return nil
}

func blobCreated(w http.ResponseWriter, req *request, d digest.Digest) {
	w.Header().Set("Location", "/v2/"+req.name+"/blobs/"+string(d))
	w.Header().Set("Docker-Content-Digest", string(d))
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusCreated)
}

func uploadLocation(req *request, id string) string {
	return "/v2/" + req.name + "/blobs/uploads/" + id
}

// rangeOf is the Range header of an upload of size bytes: "0-<last byte>", and "0-0" for an
// empty one (as the reference registry answers; clients read it as "start at 0").
func rangeOf(size int64) string {
	if size <= 0 {
		return "0-0"
	}
	return "0-" + strconv.FormatInt(size-1, 10)
}

func uploadAccepted(w http.ResponseWriter, req *request, id string, size int64, status int) {
	w.Header().Set("Location", uploadLocation(req, id))
	w.Header().Set("Range", rangeOf(size))
	w.Header().Set("Docker-Upload-UUID", id)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}

// startUpload is POST /v2/<name>/blobs/uploads/: a cross-repository mount (?mount=&from=), a
// monolithic upload (?digest=, the blob in the body) or a new upload session.
func (h *Handler) startUpload(w http.ResponseWriter, r *http.Request, req *request) error {
	ctx := r.Context()
	q := r.URL.Query()
	repo, err := h.repository(r, req, true)
	if err != nil {
		return err
	}
	if m := q.Get("mount"); m != "" {
		d, err := parseDigest(m)
		if err != nil {
			return err
		}
		mounted, err := h.mount(r, req, repo, d, q.Get("from"))
		if err != nil {
			return err
		}
		if mounted {
			blobCreated(w, req, d)
			return nil
		}
		// Not mountable (no such blob, or a source the caller may not read): the spec's answer
		// is a fresh upload session, into which the client pushes the blob.
	} else if dq := q.Get("digest"); dq != "" {
		d, err := parseDigest(dq)
		if err != nil {
			return err
		}
		body, err := h.capped(w, r, req, d, 0)
		if err != nil {
			return err
		}
		info, err := h.store.Put(ctx, d, r.ContentLength, body)
		if err != nil {
			return storageError(err, d)
		}
		return h.stored(w, r, req, repo, info)
	}
	id, err := h.store.CreateUpload(ctx)
	if err != nil {
		return err
	}
	if err := h.meta.createUpload(ctx, id, repo.ID); err != nil {
		h.store.AbortUpload(ctx, id)
		return err
	}
	uploadAccepted(w, req, id, 0, http.StatusAccepted)
	return nil
}

// mount links blob d into repo from the repository named from when the caller may read that
// one and it holds d. Without from, any repository of the same team that the caller may read
// will do (OCI's "mount without a source"); never one of another team, so a digest alone never
// opens a door between teams.
func (h *Handler) mount(r *http.Request, req *request, repo *Repository, d digest.Digest, from string) (bool, error) {
	var sources []route
	if from != "" {
		src, ok := parseName(from)
		if !ok {
			return false, nil
		}
		sources = []route{src}
	} else {
		cands, err := h.meta.blobInOrg(r.Context(), req.access.Org.ID, string(d))
		if err != nil {
			return false, err
		}
		for _, c := range cands {
			sources = append(sources, route{org: req.access.Org.Name, repo: c.RepoName, image: c.Name})
		}
	}
	for _, src := range sources {
		a, ok := h.mayRead(r, req.caller, src)
		if !ok {
			continue
		}
		srcRepo, err := h.meta.repository(r.Context(), a.Repo.ID, src.image, false)
		if err != nil {
			return false, err
		}
		if srcRepo == nil {
			continue
		}
		link, err := h.meta.blob(r.Context(), srcRepo.ID, string(d))
		if err != nil {
			return false, err
		}
		if link == nil {
			continue
		}
		if _, err := h.store.Stat(r.Context(), d); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			return false, err
		}
		if err := h.link(r.Context(), repo.ID, d, link.Size); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue // collected meanwhile: not mountable
			}
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// session checks that the upload of the URL belongs to the repository of the URL.
func (h *Handler) session(r *http.Request, req *request) (*Repository, error) {
	repo, err := h.repository(r, req, false)
	if err != nil {
		return nil, err
	}
	if repo == nil {
		return nil, errUploadUnknown()
	}
	ok, err := h.meta.uploadOf(r.Context(), req.ref, repo.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errUploadUnknown()
	}
	return repo, nil
}

// uploadStatus is GET /v2/<name>/blobs/uploads/<id>: how much arrived, so an interrupted
// client resumes there.
func (h *Handler) uploadStatus(w http.ResponseWriter, r *http.Request, req *request) error {
	if _, err := h.session(r, req); err != nil {
		return err
	}
	info, err := h.store.UploadInfo(r.Context(), req.ref)
	if err != nil {
		return storageError(err, "")
	}
	uploadAccepted(w, req, req.ref, info.Size, http.StatusNoContent)
	return nil
}

// parseContentRange reads a chunk's "<start>-<end>" (the form OCI clients send; "bytes " and
// "bytes=" prefixes are tolerated).
func parseContentRange(v string) (start, end int64, ok bool) {
	v = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(v), "bytes"), "=")
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '/'); i >= 0 {
		v = v[:i]
	}
	a, b, found := strings.Cut(v, "-")
	start, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	if !found || err1 != nil || err2 != nil || start < 0 || end < start {
		return 0, 0, false
	}
	return start, end, true
}

// appendChunk stores the request body at the end of the session: a Content-Range must start
// exactly there (416, with where it ends, otherwise). The team's quota caps it (d: the blob's
// digest when the client said it).
func (h *Handler) appendChunk(w http.ResponseWriter, r *http.Request, req *request, d digest.Digest) (int64, error) {
	ctx := r.Context()
	info, err := h.store.UploadInfo(ctx, req.ref)
	if err != nil {
		return 0, storageError(err, "")
	}
	if cr := r.Header.Get("Content-Range"); cr != "" {
		start, end, ok := parseContentRange(cr)
		if !ok {
			return 0, ociError(http.StatusBadRequest, CodeBlobUploadInvalid, "malformed Content-Range %q", truncate(cr, 100))
		}
		if start != info.Size {
			e := ociError(http.StatusRequestedRangeNotSatisfiable, CodeBlobUploadInvalid,
				"the chunk starts at %d but the upload has %d bytes", start, info.Size)
			e.header = http.Header{"Location": {uploadLocation(req, req.ref)}, "Range": {rangeOf(info.Size)},
				"Docker-Upload-Uuid": {req.ref}}
			return 0, e
		}
		if r.ContentLength >= 0 && r.ContentLength != end-start+1 {
			return 0, ociError(http.StatusBadRequest, CodeSizeInvalid, "Content-Range %d-%d does not match Content-Length %d", start, end, r.ContentLength)
		}
	}
	body, err := h.capped(w, r, req, d, info.Size)
	if err != nil {
		return 0, err
	}
	n, err := h.store.Append(ctx, req.ref, info.Size, body)
	if err != nil {
		return 0, storageError(err, "")
	}
	return n, nil
}

// patchUpload is PATCH /v2/<name>/blobs/uploads/<id>: one chunk (with Content-Range) or the
// whole stream (without).
func (h *Handler) patchUpload(w http.ResponseWriter, r *http.Request, req *request) error {
	if _, err := h.session(r, req); err != nil {
		return err
	}
	n, err := h.appendChunk(w, r, req, "")
	if err != nil {
		return err
	}
	uploadAccepted(w, req, req.ref, n, http.StatusAccepted)
	return nil
}

// finishUpload is PUT /v2/<name>/blobs/uploads/<id>?digest=: the last chunk (optional), then
// the digest check and the blob. A wrong digest ends the session and keeps nothing.
func (h *Handler) finishUpload(w http.ResponseWriter, r *http.Request, req *request) error {
	ctx := r.Context()
	repo, err := h.session(r, req)
	if err != nil {
		return err
	}
	d, err := parseDigest(r.URL.Query().Get("digest"))
	if err != nil {
		return err
	}
	if r.ContentLength != 0 {
		if _, err := h.appendChunk(w, r, req, d); err != nil {
			return err
		}
	}
	info, err := h.store.Commit(ctx, req.ref, d)
	if derr := h.meta.deleteUpload(ctx, req.ref); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return storageError(err, d)
	}
	return h.stored(w, r, req, repo, info)
}

// cancelUpload is DELETE /v2/<name>/blobs/uploads/<id>.
func (h *Handler) cancelUpload(w http.ResponseWriter, r *http.Request, req *request) error {
	if _, err := h.session(r, req); err != nil {
		return err
	}
	if err := h.store.AbortUpload(r.Context(), req.ref); err != nil && !errors.Is(err, storage.ErrUploadNotFound) {
		return err
	}
	if err := h.meta.deleteUpload(r.Context(), req.ref); err != nil {
		return fmt.Errorf("registry: cancel upload: %w", err)
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
