package registry

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
)

// Path components of a repository name (distribution-spec): lower case, separators inside.
const nameComponent = `[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*`

var (
	// routeRE splits /v2/<name>/<endpoint>. RE2 finds the one split that makes the whole path
	// match, so a name component called "blobs" or "manifests" is no ambiguity.
	routeRE = regexp.MustCompile(`^/v2/(` + nameComponent + `(?:/` + nameComponent + `)*)/` +
		`(tags/list|manifests/[^/]+|blobs/uploads/[^/]*|blobs/[^/]+|referrers/[^/]+)$`)
	nameRE = regexp.MustCompile(`^` + nameComponent + `(?:/` + nameComponent + `)*$`)
	tagRE  = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
)

// Endpoints.
const (
	epTags      = "tags"
	epManifest  = "manifest"
	epBlob      = "blob"
	epUploads   = "uploads" // POST …/blobs/uploads/
	epUpload    = "upload"  // …/blobs/uploads/<id>
	epReferrers = "referrers"
)

// route is a parsed /v2/<name>/… request.
type route struct {
	name     string // the full repository name
	org      string
	repo     string
	image    string // "" for {org}/{repo}
	endpoint string
	ref      string // the tag or digest, blob digest, upload id or referrers subject
}

// parseRoute parses the path. ok is false for paths of no endpoint (404). A name of the wrong
// shape (not {org}/{repo}[/{name}]) parses, with org left empty: it is a NAME_UNKNOWN.
func parseRoute(r *http.Request) (rt route, ok bool) {
	// Names never need escaping: an escaped path ("%2F", "%2e%2e") is an attempt at another
	// shape, refused before it is decoded into one.
	if r.URL.RawPath != "" {
		return route{}, false
	}
	m := routeRE.FindStringSubmatch(r.URL.Path)
	if m == nil {
		return route{}, false
	}
	rt.name = m[1]
	switch ep := m[2]; {
	case ep == "tags/list":
		rt.endpoint = epTags
	case strings.HasPrefix(ep, "manifests/"):
		rt.endpoint, rt.ref = epManifest, strings.TrimPrefix(ep, "manifests/")
	case ep == "blobs/uploads/":
		rt.endpoint = epUploads
	case strings.HasPrefix(ep, "blobs/uploads/"):
		rt.endpoint, rt.ref = epUpload, strings.TrimPrefix(ep, "blobs/uploads/")
	case strings.HasPrefix(ep, "blobs/"):
		rt.endpoint, rt.ref = epBlob, strings.TrimPrefix(ep, "blobs/")
	case strings.HasPrefix(ep, "referrers/"):
		rt.endpoint, rt.ref = epReferrers, strings.TrimPrefix(ep, "referrers/")
	}
	parts := strings.Split(rt.name, "/")
	if (len(parts) == 2 || len(parts) == 3) && len(rt.name) <= 255 {
		rt.org, rt.repo = parts[0], parts[1]
		if len(parts) == 3 {
			rt.image = parts[2]
		}
	}
	return rt, true
}

// parseName splits a repository name given as a parameter (the "from" of a mount).
func parseName(name string) (rt route, ok bool) {
	if !nameRE.MatchString(name) {
		return route{}, false
	}
	parts := strings.Split(name, "/")
	if len(parts) != 2 && len(parts) != 3 {
		return route{}, false
	}
	rt = route{name: name, org: parts[0], repo: parts[1]}
	if len(parts) == 3 {
		rt.image = parts[2]
	}
	return rt, true
}

// parseDigest checks a digest from a URL or parameter: a *Error (DIGEST_INVALID) when it is
// not a sha256 or sha512 digest.
func parseDigest(s string) (digest.Digest, error) {
	d := digest.Digest(s)
	if err := storage.CheckDigest(d); err != nil {
		return "", errDigestInvalid("invalid digest %q: want sha256:<64 hex> or sha512:<128 hex>", truncate(s, 150))
	}
	return d, nil
}

// isDigestRef tells a manifest reference that is a digest from one that is a tag (tags cannot
// contain ':').
func isDigestRef(ref string) bool { return strings.Contains(ref, ":") }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
