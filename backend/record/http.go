package record

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/artifacts"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Manifests says whether the built-in registry still holds a manifest (package registry).
type Manifests interface {
	HasManifest(ctx context.Context, d digest.Digest) (bool, error)
}

// Config are the Handler's dependencies.
type Config struct {
	Builds    *build.Service
	Describe  func(ctx context.Context, repoID, number int64) (build.JSON, error) // a build as the API shows it
	Files     *artifacts.Service
	Repos     *repo.Service
	Manifests Manifests
	PublicURL string
	Log       *slog.Logger
}

// Handler serves records, their comparison and exact re-runs.
type Handler struct {
	cfg Config
	// registryHost is the host of image references that name the built-in registry.
	registryHost string
}

// NewHandler returns the records' HTTP module.
func NewHandler(cfg Config) *Handler {
	h := &Handler{cfg: cfg}
	if u, err := url.Parse(cfg.PublicURL); err == nil {
		h.registryHost = u.Host
	}
	return h
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.cfg.Log)
	rs.GET("/repos/:org/:repo/pipelines/:id/record", h.get)
	rs.GET("/repos/:org/:repo/records/compare", h.compare)
	rs.POST("/repos/:org/:repo/builds/:number/rerun-exact", h.rerunExact)
}

// Of is the record of pipeline id of the repo a, as principal p may see it (files of repos p
// cannot read are left out); a pipeline of another repo is not found.
func (h *Handler) Of(ctx context.Context, p *auth.Principal, a *repo.Access, id int64) (*Statement, *build.Recorded, error) {
	rec, err := h.cfg.Builds.Recorded(ctx, a.Repo.ID, id)
	if err != nil {
		return nil, nil, err
	}
	uses, err := h.cfg.Files.VisibleUses(ctx, h.cfg.Repos, p, a, id)
	if err != nil {
		return nil, nil, err
	}
	in := Inputs{PublicURL: h.cfg.PublicURL, Org: a.Org.Name, Repo: a.Repo.Name, Rec: rec}
	for _, u := range uses.Pushed {
		in.Pushed = append(in.Pushed, moved(u))
	}
	for _, u := range uses.Pulled {
		in.Pulled = append(in.Pulled, moved(u))
	}
	st, err := Make(in)
	return st, rec, err
}

func moved(u artifacts.UseJSON) Moved {
	return Moved{Repo: u.Repo, Package: u.Package, Version: u.Version, File: u.File, Digest: u.Digest, Size: u.Size,
		BuildScoped: u.BuildScoped}
}

func pipelineID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fault.NotFound("pipeline %q not found", s)
	}
	return id, nil
}

// get is GET /repos/{org}/{repo}/pipelines/{id}/record.
func (h *Handler) get(c *gin.Context) error {
	a, err := repo.Load(c, h.cfg.Repos, repo.Read)
	if err != nil {
		return err
	}
	id, err := pipelineID(c.Param("id"))
	if err != nil {
		return err
	}
	st, _, err := h.Of(c.Request.Context(), auth.From(c), a, id)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, st)
}

// compare is GET /repos/{org}/{repo}/records/compare?a=&b=: both pipelines of the repo.
func (h *Handler) compare(c *gin.Context) error {
	a, err := repo.Load(c, h.cfg.Repos, repo.Read)
	if err != nil {
		return err
	}
	var ids [2]int64
	for i, q := range []string{"a", "b"} {
		v := c.Query(q)
		if v == "" {
			return fault.Invalid(q, "give the pipeline ids to compare as ?a=…&b=…")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fault.Invalid(q, "%q is not a pipeline id", v)
		}
		ids[i] = n
	}
	ctx := c.Request.Context()
	sa, _, err := h.Of(ctx, auth.From(c), a, ids[0])
	if err != nil {
		return err
	}
	sb, _, err := h.Of(ctx, auth.From(c), a, ids[1])
	if err != nil {
		return err
	}
	d, err := Compare(sa, sb)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, d)
}

// rerunExact is POST /repos/{org}/{repo}/builds/{number}/rerun-exact: a new build of every
// pipeline of the build from its record. Who may re-run may re-run exactly (repo write, not a
// job token).
func (h *Handler) rerunExact(c *gin.Context) error {
	p := auth.From(c)
	if p.Kind == auth.KindJob {
		return fault.Forbidden("a pipeline's job token cannot cancel or re-run builds")
	}
	a, err := repo.Load(c, h.cfg.Repos, repo.Write)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(c.Param("number"), 10, 64)
	if err != nil || n <= 0 {
		return fault.NotFound("build not found")
	}
	ctx := c.Request.Context()
	orig, err := h.cfg.Builds.Get(ctx, a.Repo.ID, n)
	if err != nil {
		return err
	}
	ids, err := h.cfg.Builds.PipelinesOf(ctx, orig.ID)
	if err != nil {
		return err
	}
	pins := map[int][]build.Pin{}
	for _, id := range ids {
		rec, err := h.cfg.Builds.Recorded(ctx, a.Repo.ID, id)
		if err != nil {
			return err
		}
		ps, err := h.pinsOf(ctx, rec)
		if err != nil {
			return err
		}
		if err := h.inputsAvailable(ctx, a, rec); err != nil {
			return err
		}
		pins[rec.Pipeline.Position] = ps
	}
	nb, err := h.cfg.Builds.RerunExact(ctx, a, p.User, orig, pins)
	if err != nil {
		return err
	}
	out, err := h.cfg.Describe(ctx, a.Repo.ID, nb.Number)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, out)
}

// pinsOf pins every job that ran an image to its recorded digest. A job that ran one the
// record does not know by digest, or whose digest the built-in registry no longer holds, makes
// an exact re-run impossible: refused with the reason.
func (h *Handler) pinsOf(ctx context.Context, rec *build.Recorded) ([]build.Pin, error) {
	stages := map[int64]*build.Stage{}
	for i := range rec.Stages {
		stages[rec.Stages[i].ID] = &rec.Stages[i]
	}
	var pins []build.Pin
	for i := range rec.Jobs {
		j := &rec.Jobs[i]
		st := stages[j.StageID]
		if st == nil || (j.Image == "" && j.ImageDigest == "") {
			continue // a built-in task, or a job that never started a container
		}
		if j.ImageDigest == "" {
			return nil, fault.Conflict("cannot re-run exactly: job %q of pipeline %s ran %s, which was not recorded by digest",
				j.Name, rec.Pipeline.Name, j.Image)
		}
		gone, err := h.imageGone(ctx, j.ImageDigest)
		if err != nil {
			return nil, err
		}
		if gone {
			return nil, fault.Conflict("cannot re-run exactly: image %s, which job %q of pipeline %s ran, is no longer in the registry (deleted or collected)",
				j.ImageDigest, j.Name, rec.Pipeline.Name)
		}
		pins = append(pins, build.Pin{Stage: st.Position, Job: j.Position, Image: j.ImageDigest})
	}
	return pins, nil
}

// imageGone says whether ref is a digest of the built-in registry whose manifest is gone.
// Images of other registries, and image ids of one host (sha256:…), cannot be checked from
// here: the agent's pull says.
func (h *Handler) imageGone(ctx context.Context, ref string) (bool, error) {
	name, dgst, ok := strings.Cut(ref, "@")
	if !ok || h.cfg.Manifests == nil || h.registryHost == "" || !strings.HasPrefix(name, h.registryHost+"/") {
		return false, nil
	}
	has, err := h.cfg.Manifests.HasManifest(ctx, digest.Digest(dgst))
	return !has, err
}

// inputsAvailable refuses when a model file the pipeline pulled is gone or changed. A build's
// own hand-off files are made again by the re-run.
func (h *Handler) inputsAvailable(ctx context.Context, a *repo.Access, rec *build.Recorded) error {
	uses, err := h.cfg.Files.Uses(ctx, rec.Pipeline.ID)
	if err != nil {
		return err
	}
	for _, u := range uses {
		if u.Direction != artifacts.UsePull {
			continue
		}
		if _, scoped := build.ParseBuildID(u.Version); scoped {
			continue
		}
		ok, err := h.cfg.Files.Available(ctx, u.RepoID, u.Package, u.Version, u.File, u.Digest)
		if err != nil {
			return err
		}
		if !ok {
			return fault.Conflict("cannot re-run exactly: pipeline %s pulled %s/%s/%s (%s), which is no longer there",
				rec.Pipeline.Name, u.Package, u.Version, u.File, u.Digest)
		}
	}
	return nil
}
