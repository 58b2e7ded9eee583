package registry

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
)

// Manifest media types the registry stores. Docker's schema 1 (signed, long deprecated) is not
// among them.
const (
	mtOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mtOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mtDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	mtDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// maxManifestSize is the largest manifest accepted (as the reference registry and the spec's
// recommendation).
const maxManifestSize = 4 << 20

// descriptor is an OCI content descriptor, as far as the registry reads it.
type descriptor struct {
	MediaType    string            `json:"mediaType"`
	Digest       string            `json:"digest"`
	Size         int64             `json:"size"`
	ArtifactType string            `json:"artifactType,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// manifestDoc is what the registry reads of a manifest: an image manifest or an index, OCI or
// Docker. The bytes stored and served are the client's own, never a re-encoding.
type manifestDoc struct {
	SchemaVersion *int              `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        *descriptor       `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Manifests     []descriptor      `json:"manifests"`
	Subject       *descriptor       `json:"subject"`
	Annotations   map[string]string `json:"annotations"`
}

// parsedManifest is a checked manifest: its media type, what it references, and what the
// referrers API says of it.
type parsedManifest struct {
	mediaType    string
	artifactType string
	subject      string
	annotations  string
	refs         []string
}

// parseManifest checks a manifest. References need not exist yet (sparse manifests, foreign
// layers, a subject pushed later are all valid OCI): the registry records them, the client
// owns their completeness.
func parseManifest(body []byte, contentType string) (*parsedManifest, error) {
	var doc manifestDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, errManifestInvalid("the manifest is not valid JSON: %v", err)
	}
	if doc.SchemaVersion == nil || *doc.SchemaVersion != 2 {
		return nil, errManifestInvalid("schemaVersion must be 2")
	}
	mt := ""
	if contentType != "" {
		mt, _, _ = mime.ParseMediaType(contentType)
	}
	if mt != "" && doc.MediaType != "" && mt != doc.MediaType {
		return nil, errManifestInvalid("Content-Type %q does not match the manifest's mediaType %q", mt, doc.MediaType)
	}
	if mt == "" {
		mt = doc.MediaType
	}
	if mt == "" {
		mt = mtOCIManifest
		if doc.Manifests != nil {
			mt = mtOCIIndex
		}
	}
	p := &parsedManifest{mediaType: mt, artifactType: doc.ArtifactType}
	check := func(d descriptor, what string) error {
		if _, err := parseDigest(d.Digest); err != nil {
			return errManifestInvalid("%s: invalid digest %q", what, truncate(d.Digest, 150))
		}
		if d.Size < 0 {
			return errManifestInvalid("%s: negative size", what)
		}
		return nil
	}
	switch mt {
	case mtOCIManifest, mtDockerManifest:
		if doc.Config == nil {
			return nil, errManifestInvalid("an image manifest needs a config")
		}
		if err := check(*doc.Config, "config"); err != nil {
			return nil, err
		}
		p.refs = append(p.refs, doc.Config.Digest)
		for i, l := range doc.Layers {
			if err := check(l, "layer "+strconv.Itoa(i)); err != nil {
				return nil, err
			}
			p.refs = append(p.refs, l.Digest)
		}
		if p.artifactType == "" {
			// The referrers API reports an image's config type when it names no artifactType.
			p.artifactType = doc.Config.MediaType
		}
	case mtOCIIndex, mtDockerList:
		for i, m := range doc.Manifests {
			if err := check(m, "manifest "+strconv.Itoa(i)); err != nil {
				return nil, err
			}
			p.refs = append(p.refs, m.Digest)
		}
	default:
		return nil, errManifestInvalid("unsupported manifest media type %q", truncate(mt, 100))
	}
	if doc.Subject != nil {
		if err := check(*doc.Subject, "subject"); err != nil {
			return nil, err
		}
		p.subject = doc.Subject.Digest
	}
	if len(doc.Annotations) > 0 {
		b, _ := json.Marshal(doc.Annotations)
		p.annotations = string(b)
	}
	return p, nil
}

// putManifest is PUT /v2/<name>/manifests/<tag or digest>[?tag=…]: the manifest under its
// digest, and the tags (the reference's, and those of ?tag=) pointed at it.
func (h *Handler) putManifest(w http.ResponseWriter, r *http.Request, req *request) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxManifestSize+1))
	if err != nil {
		return err
	}
	if len(body) > maxManifestSize {
		return ociError(http.StatusRequestEntityTooLarge, CodeSizeInvalid, "a manifest may have at most %d bytes", maxManifestSize)
	}
	var tags []string
	var d digest.Digest
	if isDigestRef(req.ref) {
		want, err := parseDigest(req.ref)
		if err != nil {
			return err
		}
		if d = want.Algorithm().FromBytes(body); d != want {
			return errDigestInvalid("the manifest's digest is %s, not %s", d, want)
		}
	} else {
		if !tagRE.MatchString(req.ref) {
			return errManifestInvalid("invalid tag %q", truncate(req.ref, 150))
		}
		tags = append(tags, req.ref)
		d = digest.SHA256.FromBytes(body)
	}
	for _, t := range r.URL.Query()["tag"] {
		if !tagRE.MatchString(t) {
			return errManifestInvalid("invalid tag %q", truncate(t, 150))
		}
		tags = append(tags, t)
	}
	pm, err := parseManifest(body, r.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	repo, err := h.repository(r, req, true)
	if err != nil {
		return err
	}
	man := &Manifest{RepositoryID: repo.ID, Digest: string(d), MediaType: pm.mediaType, ArtifactType: pm.artifactType,
		Subject: pm.subject, Annotations: pm.annotations, Size: int64(len(body)), Content: body}
	if err := h.meta.putManifest(r.Context(), man, pm.refs, tags); err != nil {
		return err
	}
	w.Header().Set("Location", "/v2/"+req.name+"/manifests/"+string(d))
	w.Header().Set("Docker-Content-Digest", string(d))
	if pm.subject != "" {
		w.Header().Set("OCI-Subject", pm.subject)
	}
	if q := r.URL.Query()["tag"]; len(q) > 0 {
		w.Header().Set("OCI-Tag", strings.Join(q, ", "))
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusCreated)
	return nil
}

// findManifest resolves the reference of the URL in the request's repository.
func (h *Handler) findManifest(r *http.Request, req *request) (*Manifest, error) {
	if isDigestRef(req.ref) {
		if _, err := parseDigest(req.ref); err != nil {
			return nil, err
		}
	} else if !tagRE.MatchString(req.ref) {
		return nil, errManifestUnknown(truncate(req.ref, 150))
	}
	repo, err := h.repository(r, req, false)
	if err != nil {
		return nil, err
	}
	if repo == nil {
		return nil, errManifestUnknown(req.ref)
	}
	man, err := h.meta.manifest(r.Context(), repo.ID, req.ref)
	if err != nil {
		return nil, err
	}
	if man == nil {
		return nil, errManifestUnknown(req.ref)
	}
	return man, nil
}

// getManifest is GET and HEAD /v2/<name>/manifests/<tag or digest>: the stored bytes with the
// media type they were pushed with.
func (h *Handler) getManifest(w http.ResponseWriter, r *http.Request, req *request) error {
	man, err := h.findManifest(r, req)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", man.MediaType)
	w.Header().Set("Docker-Content-Digest", man.Digest)
	w.Header().Set("ETag", `"`+man.Digest+`"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(man.Content)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(man.Content)
	}
	return nil
}

// deleteManifest is DELETE /v2/<name>/manifests/<tag or digest>: a tag removes the tag only; a
// digest removes the manifest and every tag pointing at it.
func (h *Handler) deleteManifest(w http.ResponseWriter, r *http.Request, req *request) error {
	if _, err := h.findManifest(r, req); err != nil {
		return err
	}
	repo, err := h.repository(r, req, false)
	if err != nil {
		return err
	}
	var found bool
	if isDigestRef(req.ref) {
		found, err = h.meta.deleteManifest(r.Context(), repo.ID, req.ref)
	} else {
		found, err = h.meta.deleteTag(r.Context(), repo.ID, req.ref)
	}
	if err != nil {
		return err
	}
	if !found {
		return errManifestUnknown(req.ref)
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// Tag list paging: ?n= asks for a page size; without it a page holds defaultTagPage tags.
const (
	defaultTagPage = 1000
	maxTagPage     = 10000
)

// listTags is GET /v2/<name>/tags/list[?n=&last=], in byte order, with a Link header to the
// next page when there is one.
func (h *Handler) listTags(w http.ResponseWriter, r *http.Request, req *request) error {
	q := r.URL.Query()
	n := defaultTagPage
	if v := q.Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			return ociError(http.StatusBadRequest, CodeUnsupported, "n must be a number ≥ 0")
		}
		n = min(n, maxTagPage)
	}
	last := q.Get("last")
	tags := []string{}
	repo, err := h.repository(r, req, false)
	if err != nil {
		return err
	}
	more := false
	if repo != nil && n > 0 {
		if tags, more, err = h.meta.tags(r.Context(), repo.ID, last, n); err != nil {
			return err
		}
	}
	if more {
		next := url.Values{"n": {strconv.Itoa(n)}, "last": {tags[len(tags)-1]}}
		w.Header().Set("Link", `</v2/`+req.name+`/tags/list?`+next.Encode()+`>; rel="next"`)
	}
	writeJSON(w, r, http.StatusOK, struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}{req.name, tags})
	return nil
}

// listReferrers is GET /v2/<name>/referrers/<digest>[?artifactType=]: an image index of the
// manifests whose subject is digest.
func (h *Handler) listReferrers(w http.ResponseWriter, r *http.Request, req *request) error {
	d, err := parseDigest(req.ref)
	if err != nil {
		return err
	}
	at := r.URL.Query().Get("artifactType")
	descs := []descriptor{}
	repo, err := h.repository(r, req, false)
	if err != nil {
		return err
	}
	if repo != nil {
		rows, err := h.meta.referrers(r.Context(), repo.ID, string(d), at)
		if err != nil {
			return err
		}
		for _, m := range rows {
			desc := descriptor{MediaType: m.MediaType, Digest: m.Digest, Size: m.Size, ArtifactType: m.ArtifactType}
			if m.Annotations != "" {
				json.Unmarshal([]byte(m.Annotations), &desc.Annotations)
			}
			descs = append(descs, desc)
		}
	}
	if at != "" {
		w.Header().Set("OCI-Filters-Applied", "artifactType")
	}
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}{2, mtOCIIndex, descs})
	w.Header().Set("Content-Type", mtOCIIndex)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes())
	}
	return nil
}
