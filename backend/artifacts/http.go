package artifacts

import (
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Handler serves the files routes and the team's storage usage.
type Handler struct {
	svc       *Service
	blobs     *Blobs
	repos     *repo.Service
	orgs      *org.Service
	publicURL string
	presign   bool
	log       *slog.Logger
}

// HandlerConfig is what NewHandler needs.
type HandlerConfig struct {
	Service   *Service
	Blobs     *Blobs
	Repos     *repo.Service
	Orgs      *org.Service
	PublicURL string
	// Presign answers downloads with a redirect to a presigned URL of the store (S3).
	Presign bool
	Log     *slog.Logger
}

// NewHandler returns the HTTP handler.
func NewHandler(cfg HandlerConfig) *Handler {
	return &Handler{svc: cfg.Service, blobs: cfg.Blobs, repos: cfg.Repos, orgs: cfg.Orgs,
		publicURL: strings.TrimRight(cfg.PublicURL, "/"), presign: cfg.Presign, log: cfg.Log}
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	const base = "/repos/:org/:repo/artifacts"
	rs := api.NewRoutes(v1, h.log)
	rs.GET(base, h.on(repo.Read, h.listPackages))
	rs.GET(base+"/:package", h.on(repo.Read, h.listVersions))
	rs.GET(base+"/:package/:version", h.on(repo.Read, h.getVersion))
	rs.DELETE(base+"/:package/:version", h.on(repo.Admin, h.deleteVersion))
	rs.PUT(base+"/:package/:version/:file", h.on(repo.Write, h.put))
	rs.GET(base+"/:package/:version/:file", h.on(repo.Read, h.download))
	rs.HEAD(base+"/:package/:version/:file", h.on(repo.Read, h.download))
	rs.DELETE(base+"/:package/:version/:file", h.on(repo.Admin, h.deleteFile))
	rs.GET("/orgs/:org/storage", h.usage)
	rs.GET("/repos/:org/:repo/pipelines/:id/artifacts", h.pipelineUses)
	h.releaseRoutes(rs)
	h.hfRoutes(rs)
}

// on is a route on one repo's model files or releases: the caller is authorized at need
// (access) before fn runs, so each route's level reads in the route table.
func (h *Handler) on(need repo.Level, fn func(c *gin.Context, a *repo.Access) error) api.HandlerFunc {
	return func(c *gin.Context) error {
		a, err := h.access(c, need)
		if err != nil {
			return err
		}
		return fn(c, a)
	}
}

// stored answers an upload (a model file, a release file): where to download it, its ETag, and
// 201 when it is new, 200 when it replaced the same bytes.
func stored(c *gin.Context, j FileJSON, digest string, created bool) error {
	c.Header("Location", j.DownloadURL)
	c.Header("ETag", etag(digest))
	if created {
		return api.JSON(c, http.StatusCreated, j)
	}
	return api.JSON(c, http.StatusOK, j)
}

// access authorizes the caller on the route's repo as the registry does: registry:read to read,
// registry:write to write or delete (archived repos take neither); another team's private repo
// is a 404.
func (h *Handler) access(c *gin.Context, need repo.Level) (*repo.Access, error) {
	a, err := h.repos.ResolveRegistry(c.Request.Context(), auth.From(c), c.Param("org"), c.Param("repo"), need)
	if err != nil {
		return nil, err
	}
	if need >= repo.Write && a.Repo.Archived {
		return nil, fault.Forbidden("repo %s/%s is archived", a.Org.Name, a.Repo.Name)
	}
	return a, nil
}

// FileJSON is a file as the API shows it.
type FileJSON struct {
	Package     string    `json:"package"`
	Version     string    `json:"version"`
	Name        string    `json:"name"`
	Size        int64     `json:"size"`
	Digest      string    `json:"digest"`
	CreatedAt   time.Time `json:"created_at"`
	DownloadURL string    `json:"download_url"`
}

// BuildRefJSON is the build that produced a version.
type BuildRefJSON struct {
	Number     int64  `json:"number"`
	PipelineID int64  `json:"pipeline_id"`
	Commit     string `json:"commit"`
}

// VersionJSON is a version; Files only in a version's own answer.
type VersionJSON struct {
	id        int64         // the cursor
	Package   string        `json:"package"`
	Version   string        `json:"version"`
	FileCount int64         `json:"file_count"`
	Size      int64         `json:"size"`
	Build     *BuildRefJSON `json:"build"`     // null when a person pushed it
	PushedBy  string        `json:"pushed_by"` // the user, "" when none
	// BuildScoped: the build's hand-off version (buildscope.go).
	BuildScoped bool       `json:"build_scoped,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	Files       []FileJSON `json:"files,omitempty"`
}

// PackageJSON is a package.
type PackageJSON struct {
	id           int64     // the cursor
	Name         string    `json:"name"`
	VersionCount int64     `json:"version_count"`
	Latest       string    `json:"latest"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

func (h *Handler) fileURL(a *repo.Access, pkg, version, file string) string {
	return h.publicURL + "/api/v1/repos/" + url.PathEscape(a.Org.Name) + "/" + url.PathEscape(a.Repo.Name) +
		"/artifacts/" + url.PathEscape(pkg) + "/" + url.PathEscape(version) + "/" + url.PathEscape(file)
}

func (h *Handler) fileJSON(a *repo.Access, pkg, version string, f File) FileJSON {
	return FileJSON{Package: pkg, Version: version, Name: f.Name, Size: f.Size, Digest: f.Digest, CreatedAt: f.CreatedAt,
		DownloadURL: h.fileURL(a, pkg, version, f.Name)}
}

func versionJSON(pkg string, v VersionInfo) VersionJSON {
	j := VersionJSON{id: v.ID, Package: pkg, Version: v.Version.Version, FileCount: v.FileCount, Size: v.Size, PushedBy: v.PushedByName,
		BuildScoped: v.BuildScoped, CreatedAt: v.CreatedAt}
	if v.PipelineID != nil && v.BuildNumber != nil {
		j.Build = &BuildRefJSON{Number: *v.BuildNumber, PipelineID: *v.PipelineID, Commit: v.CommitSHA}
	}
	return j
}

func (h *Handler) listPackages(c *gin.Context, a *repo.Access) error {
	return api.ListPage(c, func(page api.Page) ([]PackageJSON, error) {
		ps, err := h.svc.Packages(c.Request.Context(), a.Repo.ID, page)
		if err != nil {
			return nil, err
		}
		out := make([]PackageJSON, 0, len(ps))
		for _, p := range ps {
			out = append(out, PackageJSON{id: p.ID, Name: p.Name, VersionCount: p.VersionCount, Latest: p.Latest, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt})
		}
		return out, nil
	}, func(p PackageJSON) int64 { return p.id })
}

func (h *Handler) listVersions(c *gin.Context, a *repo.Access) error {
	return api.ListPage(c, func(page api.Page) ([]VersionJSON, error) {
		p, vs, err := h.svc.Versions(c.Request.Context(), a.Repo.ID, c.Param("package"), page)
		if err != nil {
			return nil, err
		}
		out := make([]VersionJSON, 0, len(vs))
		for _, v := range vs {
			out = append(out, versionJSON(p.Name, v))
		}
		return out, nil
	}, func(v VersionJSON) int64 { return v.id })
}

func (h *Handler) getVersion(c *gin.Context, a *repo.Access) error {
	p, v, files, err := h.svc.VersionDetail(c.Request.Context(), a.Repo.ID, c.Param("package"), c.Param("version"))
	if err != nil {
		return err
	}
	j := versionJSON(p.Name, *v)
	j.Files = make([]FileJSON, 0, len(files))
	for _, f := range files {
		j.Files = append(j.Files, h.fileJSON(a, p.Name, v.Version.Version, f))
	}
	return api.JSON(c, http.StatusOK, j)
}

// put is PUT …/artifacts/{package}/{version}/{file}: the body is the file's raw bytes.
func (h *Handler) put(c *gin.Context, a *repo.Access) error {
	d, err := checksumOf(c.Request.Header)
	if err != nil {
		return err
	}
	up := Upload{Package: c.Param("package"), Version: c.Param("version"), File: c.Param("file"), Digest: d,
		Size: c.Request.ContentLength, Body: c.Request.Body}
	e, created, err := h.svc.Put(c.Request.Context(), a, auth.From(c), up)
	if err != nil {
		return err
	}
	return stored(c, h.fileJSON(a, e.Package.Name, e.Version.Version, e.File), e.File.Digest, created)
}

// checksumOf reads the client's sha256 of an upload: X-Checksum-Sha256 (hex) or Digest
// (RFC 3230, sha-256=<base64>); both must agree when both are sent. "" when neither is.
func checksumOf(hdr http.Header) (digest.Digest, error) {
	var found []string
	if v := strings.TrimSpace(hdr.Get("X-Checksum-Sha256")); v != "" {
		b, err := hex.DecodeString(v)
		if err != nil || len(b) != 32 {
			return "", fault.BadRequest("X-Checksum-Sha256 must be 64 hex digits")
		}
		found = append(found, hex.EncodeToString(b))
	}
	for _, v := range hdr.Values("Digest") {
		for _, part := range strings.Split(v, ",") {
			alg, val, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || !strings.EqualFold(alg, "sha-256") {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(val))
			if err != nil || len(b) != 32 {
				return "", fault.BadRequest("Digest: sha-256= must be the base64 of 32 bytes")
			}
			found = append(found, hex.EncodeToString(b))
		}
	}
	if len(found) == 0 {
		return "", nil
	}
	for _, f := range found[1:] {
		if f != found[0] {
			return "", fault.BadRequest("the checksum headers disagree")
		}
	}
	return digest.NewDigestFromEncoded(digest.SHA256, found[0]), nil
}

// etag is a file's ETag: its digest, quoted.
func etag(d string) string { return `"` + d + `"` }

func (h *Handler) deleteFile(c *gin.Context, a *repo.Access) error {
	return api.Done(c, h.svc.DeleteFile(c.Request.Context(), a.Repo.ID, c.Param("package"), c.Param("version"), c.Param("file")))
}

func (h *Handler) deleteVersion(c *gin.Context, a *repo.Access) error {
	return api.Done(c, h.svc.DeleteVersion(c.Request.Context(), a.Repo.ID, c.Param("package"), c.Param("version")))
}

// usage is GET /orgs/{org}/storage: what the team stores and its quota. Members see it, with
// a session or a token that may read the registry or the repos.
func (h *Handler) usage(c *gin.Context) error {
	p := auth.From(c)
	if !p.Authenticated() {
		return fault.Unauthenticated("sign in or send a token")
	}
	o, _, err := h.orgs.Access(c.Request.Context(), p, c.Param("org"))
	if err != nil {
		return err
	}
	if !p.Has(auth.ScopeRegistryRead) && !p.Has(auth.ScopeRepoRead) {
		return fault.Forbidden("the token lacks the %s scope", auth.ScopeRegistryRead)
	}
	u, err := h.blobs.Usage(c.Request.Context(), o.ID)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, u)
}

// pipelineUses is GET /repos/{org}/{repo}/pipelines/{id}/artifacts: the model files the
// pipeline pushed and pulled.
func (h *Handler) pipelineUses(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return fault.NotFound("pipeline %s not found", c.Param("id"))
	}
	out, err := h.svc.VisibleUses(c.Request.Context(), h.repos, auth.From(c), a, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, out)
	return nil
}
