package artifacts

import (
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// The release routes (releases.go):
//
//	/api/v1/repos/{org}/{repo}/releases                    GET     releases, newest first
//	                         …/releases/{tag}              GET     a release and its files
//	                                                       PUT     create or update (developer+, or the repo's job token)
//	                                                       DELETE  the release and its files (admin)
//	                         …/releases/{tag}/files/{file} PUT     publish a file (raw body, as artifacts)
//	                                                       GET     download (deploy tokens too; Range, ETag)
//	                                                       HEAD    size and digest
func (h *Handler) releaseRoutes(rs api.Routes) {
	const base = "/repos/:org/:repo/releases"
	rs.GET(base, h.on(repo.Read, h.listReleases))
	rs.GET(base+"/:tag", h.on(repo.Read, h.getRelease))
	rs.PUT(base+"/:tag", h.on(repo.Write, h.putRelease))
	rs.DELETE(base+"/:tag", h.on(repo.Admin, h.deleteRelease))
	rs.PUT(base+"/:tag/files/:file", h.on(repo.Write, h.putReleaseFile))
	rs.GET(base+"/:tag/files/:file", h.on(repo.Read, h.downloadReleaseFile))
	rs.HEAD(base+"/:tag/files/:file", h.on(repo.Read, h.downloadReleaseFile))
}

// ReleaseJSON is a release as the API shows it; Files only in a release's own answer.
type ReleaseJSON struct {
	id         int64         // the cursor
	Tag        string        `json:"tag"`
	Title      string        `json:"title"`
	Notes      string        `json:"notes"`
	PreRelease bool          `json:"pre_release"`
	Latest     bool          `json:"latest"`
	Commit     string        `json:"commit"`
	Build      *BuildRefJSON `json:"build"` // null when a person made it
	CreatedAt  time.Time     `json:"created_at"`
	UpdatedAt  time.Time     `json:"updated_at"`
	Files      []FileJSON    `json:"files,omitempty"`
}

func releaseJSON(r *Release) ReleaseJSON {
	j := ReleaseJSON{id: r.ID, Tag: r.Tag, Title: r.Title, Notes: r.Notes, PreRelease: r.PreRelease, Latest: r.Latest,
		Commit: r.CommitSHA, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.PipelineID != nil && r.BuildNumber != nil {
		j.Build = &BuildRefJSON{Number: *r.BuildNumber, PipelineID: *r.PipelineID, Commit: r.CommitSHA}
	}
	return j
}

func (h *Handler) releaseFileJSON(a *repo.Access, tag string, f File) FileJSON {
	return FileJSON{Package: ReleasePackage, Version: tag, Name: f.Name, Size: f.Size, Digest: f.Digest, CreatedAt: f.CreatedAt,
		DownloadURL: h.publicURL + "/api/v1/repos/" + url.PathEscape(a.Org.Name) + "/" + url.PathEscape(a.Repo.Name) +
			"/releases/" + url.PathEscape(tag) + "/files/" + url.PathEscape(f.Name)}
}

func (h *Handler) listReleases(c *gin.Context, a *repo.Access) error {
	return api.ListPage(c, func(page api.Page) ([]ReleaseJSON, error) {
		rs, err := h.svc.Releases(c.Request.Context(), a.Repo.ID, page)
		if err != nil {
			return nil, err
		}
		out := make([]ReleaseJSON, 0, len(rs))
		for i := range rs {
			out = append(out, releaseJSON(&rs[i]))
		}
		return out, nil
	}, func(r ReleaseJSON) int64 { return r.id })
}

func (h *Handler) releaseAnswer(c *gin.Context, a *repo.Access, r *Release, status int) error {
	files, err := h.svc.ReleaseFiles(c.Request.Context(), a.Repo.ID, r.Tag)
	if err != nil {
		return err
	}
	j := releaseJSON(r)
	j.Files = make([]FileJSON, 0, len(files))
	for _, f := range files {
		j.Files = append(j.Files, h.releaseFileJSON(a, r.Tag, f))
	}
	return api.JSON(c, status, j)
}

func (h *Handler) getRelease(c *gin.Context, a *repo.Access) error {
	r, err := h.svc.ReleaseOf(c.Request.Context(), a.Repo.ID, c.Param("tag"))
	if err != nil {
		return err
	}
	return h.releaseAnswer(c, a, r, http.StatusOK)
}

// putRelease is PUT …/releases/{tag} {title, notes, pre_release, latest, overlying}.
func (h *Handler) putRelease(c *gin.Context, a *repo.Access) error {
	var body struct {
		Title      string `json:"title"`
		Notes      string `json:"notes"`
		PreRelease bool   `json:"pre_release"`
		Latest     *bool  `json:"latest"`
		Overlying  bool   `json:"overlying"`
	}
	if err := api.Bind(c, &body); err != nil {
		return err
	}
	r, created, err := h.svc.PutRelease(c.Request.Context(), a, h.repos.Path(a.Repo), auth.From(c), ReleaseInput{Tag: c.Param("tag"),
		Title: body.Title, Notes: body.Notes, PreRelease: body.PreRelease, Latest: body.Latest, Overlying: body.Overlying})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return h.releaseAnswer(c, a, r, status)
}

func (h *Handler) deleteRelease(c *gin.Context, a *repo.Access) error {
	return api.Done(c, h.svc.DeleteRelease(c.Request.Context(), a.Repo.ID, c.Param("tag")))
}

// putReleaseFile is PUT …/releases/{tag}/files/{file}: the raw bytes, checksummed as artifacts.
func (h *Handler) putReleaseFile(c *gin.Context, a *repo.Access) error {
	d, err := checksumOf(c.Request.Header)
	if err != nil {
		return err
	}
	up := Upload{Version: c.Param("tag"), File: c.Param("file"), Digest: d, Size: c.Request.ContentLength, Body: c.Request.Body}
	e, created, err := h.svc.PutReleaseFile(c.Request.Context(), a, auth.From(c), up)
	if err != nil {
		return err
	}
	return stored(c, h.releaseFileJSON(a, e.Version.Version, e.File), e.File.Digest, created)
}

func (h *Handler) downloadReleaseFile(c *gin.Context, a *repo.Access) error {
	e, err := h.svc.Resolve(c.Request.Context(), a.Repo.ID, ReleasePackage, c.Param("tag"), c.Param("file"))
	if err != nil {
		return err
	}
	return h.serve(c, e)
}
