package artifacts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/opencontainers/go-digest"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// The Hugging Face Hub protocol, read-only, so that inference services pull a model with the
// stock clients (huggingface_hub, transformers, @huggingface/hub) by pointing HF_ENDPOINT at
// {public URL}/api/v1/hf. Under /api/v1 it shares the API's authentication (a deploy token as
// `Authorization: Bearer`), and every read goes through ResolveRegistry, Resolve and serve like
// the files routes.
//
// Model ids have two parts, and Nimbus needs three (org, repo, package). Org names hold only
// letters, digits and '-' (backend/org), so the first '.' of the owner part ends the org:
//
//	<org>/<repo>             the repo's package named like the repo (the default package)
//	<org>.<repo>/<package>   any package of the repo
//
// Repo and package names may both hold '.', '-', '_' and "--", so no separator inside the name
// part would be unambiguous; the owner part has room for one. Both forms pass huggingface_hub's
// repo id check.
//
// Revisions: "main" and "HEAD" (what clients default to) and "latest" are the newest version
// (Latest), so a version named main or HEAD is not reachable here by its name; a
// version's name; or the commit id this endpoint hands out for a version (sha, X-Repo-Commit),
// which huggingface_hub's snapshot_download uses to fetch every file of the same version.
// That id is the version's row id in 40 hex digits, not the git commit the version was built
// from: two versions of one package may come from the same commit, and a commit must name one
// set of files. The git commit is in the model info's "nimbus" object.

// hfTimeFormat is how the hub writes times (lastModified, createdAt).
const hfTimeFormat = "2006-01-02T15:04:05.000Z"

var hfCommitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// hfCommit is the commit id of a version (see above).
func hfCommit(v *Version) string { return fmt.Sprintf("%040x", v.ID) }

// The hub's X-Error-Code values, which clients turn into their "not found" errors
// (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError; @huggingface/hub's
// fileDownloadInfo answers null on EntryNotFound).
const (
	hfRepoNotFound     = "RepoNotFound"
	hfRevisionNotFound = "RevisionNotFound"
	hfEntryNotFound    = "EntryNotFound"
)

// hfRoutes registers the endpoint under v1 (Routes).
func (h *Handler) hfRoutes(rs api.Routes) {
	const models = "/hf/api/models/:owner/:name"
	rs.GET(models, h.hfInfo)
	rs.GET(models+"/revision/:revision", h.hfInfo)
	rs.GET(models+"/tree/:revision", h.hfTree)
	// raw serves the same bytes: the hub's raw is a file's git blob, which for its LFS files is a
	// pointer, but Nimbus keeps no pointers (@huggingface/hub's fileExists HEADs raw).
	for _, kind := range []string{"resolve", "raw"} {
		rs.GET("/hf/:owner/:name/"+kind+"/:revision/:file", h.hfResolve)
		rs.HEAD("/hf/:owner/:name/"+kind+"/:revision/:file", h.hfResolve)
	}
}

// hfModel is a model id resolved: the repo (authorized to read) and the package's version.
type hfModel struct {
	access *repo.Access
	pkg    *Package
	ver    *Version
}

// hfNotFound marks err, when it is a 404, with the hub's error code and message headers.
func hfNotFound(c *gin.Context, err error, code string) error {
	var ae *fault.Error
	if errors.As(err, &ae) && ae.Kind == fault.KindNotFound {
		c.Header("X-Error-Code", code)
		c.Header("X-Error-Message", ae.Message)
	}
	return err
}

// hfResolveModel authorizes the caller on the model id's repo (registry:read, as downloads)
// and finds the package and the revision's version.
func (h *Handler) hfResolveModel(c *gin.Context) (*hfModel, error) {
	ctx := c.Request.Context()
	owner, name := c.Param("owner"), c.Param("name")
	orgName, repoName, dotted := strings.Cut(owner, ".")
	if !dotted {
		repoName = name
	}
	a, err := h.repos.ResolveRegistry(ctx, auth.From(c), orgName, repoName, repo.Read)
	if err != nil {
		return nil, hfNotFound(c, err, hfRepoNotFound)
	}
	pkgName := name
	if !dotted {
		pkgName = a.Repo.Name // the default package: named like the repo, as stored
	}
	if !packageRE.MatchString(pkgName) {
		return nil, hfNotFound(c, fault.NotFound("model %s/%s not found", owner, name), hfRepoNotFound)
	}
	p, err := h.svc.pkgOf(ctx, a.Repo.ID, pkgName)
	if err != nil {
		return nil, hfNotFound(c, err, hfRepoNotFound)
	}
	rev := c.Param("revision")
	if rev == "" {
		rev = "main"
	}
	v, err := h.svc.hfVersion(ctx, p, rev)
	if err != nil {
		return nil, hfNotFound(c, err, hfRevisionNotFound)
	}
	return &hfModel{access: a, pkg: p, ver: v}, nil
}

// hfVersion finds a revision's version: main, HEAD or latest, a version's name, else a commit id of
// hfCommit.
func (s *Service) hfVersion(ctx context.Context, p *Package, rev string) (*Version, error) {
	if rev == "main" || rev == "HEAD" || rev == Latest {
		return s.versionOf(ctx, p, Latest)
	}
	notFound := fault.NotFound("revision %s of %s not found", rev, p.Name)
	if versionRE.MatchString(rev) {
		v, err := s.versionOf(ctx, p, rev)
		if err == nil || fault.KindOf(err) != fault.KindNotFound || !hfCommitRE.MatchString(rev) {
			return v, err
		}
	}
	if !hfCommitRE.MatchString(rev) {
		return nil, notFound
	}
	id, err := strconv.ParseInt(rev, 16, 64)
	if err != nil {
		return nil, notFound
	}
	var v Version
	err = s.db.WithContext(ctx).Where("package_id = ? AND id = ?", p.ID, id).Take(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, notFound
	}
	return &v, err
}

// HFLFS is a file's LFS description: every Nimbus file is stored by its sha256, as the hub's LFS
// files are.
type HFLFS struct {
	SHA256      string `json:"sha256,omitempty"`
	OID         string `json:"oid,omitempty"`
	Size        int64  `json:"size"`
	PointerSize int64  `json:"pointerSize"`
}

// HFSibling is a file in the model info.
type HFSibling struct {
	RFilename string `json:"rfilename"`
	Size      int64  `json:"size"`
	BlobID    string `json:"blobId"`
	LFS       HFLFS  `json:"lfs"`
}

// HFNimbus is what the model info adds to the hub's fields: where the model came from.
type HFNimbus struct {
	Org     string        `json:"org"`
	Repo    string        `json:"repo"`
	Package string        `json:"package"`
	Version string        `json:"version"`
	Build   *BuildRefJSON `json:"build"` // null when a person pushed it
}

// HFModelInfo is GET /api/models/{id}[/revision/{revision}] as the hub answers it (the fields
// clients read; likes and downloads are always 0).
type HFModelInfo struct {
	InternalID   string      `json:"_id"`
	ID           string      `json:"id"`
	ModelID      string      `json:"modelId"`
	Author       string      `json:"author"`
	SHA          string      `json:"sha"`
	LastModified string      `json:"lastModified"`
	CreatedAt    string      `json:"createdAt"`
	Private      bool        `json:"private"`
	Disabled     bool        `json:"disabled"`
	Gated        bool        `json:"gated"`
	Downloads    int64       `json:"downloads"`
	Likes        int64       `json:"likes"`
	Tags         []string    `json:"tags"`
	Siblings     []HFSibling `json:"siblings"`
	UsedStorage  int64       `json:"usedStorage"`
	Nimbus       HFNimbus    `json:"nimbus"`
}

// HFTreeEntry is an entry of GET /api/models/{id}/tree/{revision}.
type HFTreeEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	OID  string `json:"oid"`
	LFS  HFLFS  `json:"lfs"`
}

// lfsPointerSize is the size of the git-lfs pointer file the hub would keep for the file: the
// clients report it, and it costs nothing to be exact.
func lfsPointerSize(hexDigest string, size int64) int64 {
	return int64(len("version https://git-lfs.github.com/spec/v1\noid sha256:" + hexDigest + "\nsize " + strconv.FormatInt(size, 10) + "\n"))
}

func hexOf(d string) string { return digest.Digest(d).Encoded() }

// hfFiles returns the version's files (sorted by name).
func (h *Handler) hfFiles(c *gin.Context, m *hfModel) (*VersionInfo, []File, error) {
	_, v, files, err := h.svc.VersionDetail(c.Request.Context(), m.access.Repo.ID, m.pkg.Name, m.ver.Version)
	if err != nil {
		return nil, nil, hfNotFound(c, err, hfRevisionNotFound)
	}
	return v, files, nil
}

// hfInfo is the model info: the version's files as siblings.
func (h *Handler) hfInfo(c *gin.Context) error {
	m, err := h.hfResolveModel(c)
	if err != nil {
		return err
	}
	v, files, err := h.hfFiles(c, m)
	if err != nil {
		return err
	}
	id := c.Param("owner") + "/" + c.Param("name")
	sha := hfCommit(m.ver)
	info := HFModelInfo{InternalID: sha, ID: id, ModelID: id, Author: m.access.Org.Name, SHA: sha,
		LastModified: m.ver.CreatedAt.UTC().Format(hfTimeFormat), CreatedAt: m.pkg.CreatedAt.UTC().Format(hfTimeFormat),
		Private: m.access.Repo.Visibility != repo.Public, Tags: []string{}, Siblings: make([]HFSibling, 0, len(files)),
		UsedStorage: v.Size,
		Nimbus:      HFNimbus{Org: m.access.Org.Name, Repo: m.access.Repo.Name, Package: m.pkg.Name, Version: m.ver.Version}}
	if j := versionJSON(m.pkg.Name, *v); j.Build != nil {
		info.Nimbus.Build = j.Build
	}
	for _, f := range files {
		hx := hexOf(f.Digest)
		info.Siblings = append(info.Siblings, HFSibling{RFilename: f.Name, Size: f.Size, BlobID: hx,
			LFS: HFLFS{SHA256: hx, Size: f.Size, PointerSize: lfsPointerSize(hx, f.Size)}})
	}
	return api.JSON(c, http.StatusOK, info)
}

// hfTree lists the version's files. A version is flat (file names hold no '/') and holds at
// most MaxFilesPerVersion files, so the listing is one page: no Link header, and recursive and
// expand change nothing.
func (h *Handler) hfTree(c *gin.Context) error {
	m, err := h.hfResolveModel(c)
	if err != nil {
		return err
	}
	_, files, err := h.hfFiles(c, m)
	if err != nil {
		return err
	}
	out := make([]HFTreeEntry, 0, len(files))
	for _, f := range files {
		hx := hexOf(f.Digest)
		out = append(out, HFTreeEntry{Type: "file", Path: f.Name, Size: f.Size, OID: hx,
			LFS: HFLFS{OID: hx, Size: f.Size, PointerSize: lfsPointerSize(hx, f.Size)}})
	}
	c.Header("X-Repo-Commit", hfCommit(m.ver))
	return api.JSON(c, http.StatusOK, out)
}

// hfResolve is GET and HEAD /{id}/resolve|raw/{revision}/{file}: the download (serve: Range,
// If-Range, HEAD, a presigned redirect when enabled) with the headers the clients read: the
// ETag and X-Linked-Etag as the bare sha256 (huggingface_hub names its cache blobs by it),
// X-Linked-Size, and X-Repo-Commit (the revision's commit id).
func (h *Handler) hfResolve(c *gin.Context) error {
	m, err := h.hfResolveModel(c)
	if err != nil {
		return err
	}
	e, err := h.svc.Resolve(c.Request.Context(), m.access.Repo.ID, m.pkg.Name, m.ver.Version, c.Param("file"))
	if err != nil {
		return hfNotFound(c, err, hfEntryNotFound)
	}
	tag := `"` + hexOf(e.File.Digest) + `"`
	hdr := c.Writer.Header()
	hdr.Set("X-Repo-Commit", hfCommit(&e.Version))
	hdr.Set("X-Linked-Etag", tag)
	hdr.Set("X-Linked-Size", strconv.FormatInt(e.File.Size, 10))
	h.recordPull(c, m.access, e)
	return h.serveTagged(c, e, tag)
}
