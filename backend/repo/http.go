package repo

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/org"
)

// Handler serves the repo routes.
type Handler struct {
	svc       *Service
	orgs      *org.Service
	publicURL string
	log       *slog.Logger
}

// NewHandler returns the repo HTTP handler.
func NewHandler(svc *Service, orgs *org.Service, publicURL string, log *slog.Logger) *Handler {
	return &Handler{svc: svc, orgs: orgs, publicURL: publicURL, log: log}
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	v1.POST("/orgs/:org/repos", h.create)
	v1.GET("/orgs/:org/repos", h.list)
	v1.GET("/repos/:org/:repo", h.get)
	v1.PATCH("/repos/:org/:repo", h.update)
	v1.DELETE("/repos/:org/:repo", h.delete)
	v1.GET("/repos/:org/:repo/secrets", h.listSecrets)
	v1.PUT("/repos/:org/:repo/secrets/:name", h.putSecret)
	v1.DELETE("/repos/:org/:repo/secrets/:name", h.deleteSecret)
	v1.GET("/repos/:org/:repo/deploy-tokens", h.listDeployTokens)
	v1.POST("/repos/:org/:repo/deploy-tokens", h.createDeployToken)
	v1.DELETE("/repos/:org/:repo/deploy-tokens/:id", h.revokeDeployToken)
}

func (h *Handler) fail(c *gin.Context, err error) { api.Fail(c, h.log, err) }

// JSON is a repo as the API shows it.
type JSON struct {
	ID            int64     `json:"id"`
	Org           string    `json:"org"`
	Name          string    `json:"name"`
	FullName      string    `json:"full_name"`
	Description   string    `json:"description"`
	Visibility    string    `json:"visibility"`
	DefaultBranch string    `json:"default_branch"`
	Archived      bool      `json:"archived"`
	CloneURL      string    `json:"clone_url"`
	Permission    string    `json:"permission,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func (h *Handler) json(r *Repo, orgName string, lvl Level) JSON {
	j := JSON{ID: r.ID, Org: orgName, Name: r.Name, FullName: orgName + "/" + r.Name, Description: r.Description,
		Visibility: r.Visibility, DefaultBranch: r.DefaultBranch, Archived: r.Archived,
		CloneURL: h.publicURL + "/" + orgName + "/" + r.Name + ".git", CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if lvl > None {
		j.Permission = lvl.String()
	}
	return j
}

// Load authorizes the caller against the route's :org/:repo at level need.
func Load(c *gin.Context, svc *Service, need Level) (*Access, error) {
	return svc.Resolve(c.Request.Context(), auth.From(c), c.Param("org"), c.Param("repo"), need)
}

func (h *Handler) create(c *gin.Context) {
	o, role, err := org.Load(c, h.orgs, org.NeedMember, false)
	if err != nil {
		h.fail(c, err)
		return
	}
	if !auth.From(c).Has(auth.ScopeRepoWrite) {
		h.fail(c, api.Forbidden("the token lacks the %s scope", auth.ScopeRepoWrite))
		return
	}
	if !role.CanWrite() {
		h.fail(c, api.Forbidden("creating repos needs the developer role or above in %s (you are %s)", o.Name, role))
		return
	}
	var req struct {
		Name          string `json:"name"`
		Visibility    string `json:"visibility"`
		DefaultBranch string `json:"default_branch"`
		Description   string `json:"description"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	r, err := h.svc.Create(c.Request.Context(), o, req.Name, req.Visibility, req.DefaultBranch, req.Description)
	if err != nil {
		h.fail(c, err)
		return
	}
	lvl := Write
	if role.CanAdmin() {
		lvl = Admin
	}
	c.JSON(http.StatusCreated, h.json(r, o.Name, lvl))
}

// list shows members every repo of the org and everyone else its public repos.
func (h *Handler) list(c *gin.Context) {
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	p := auth.From(c)
	o, err := h.orgs.ByName(c.Request.Context(), c.Param("org"))
	if err != nil {
		h.fail(c, err)
		return
	}
	var role org.Role
	if p.User != nil && (p.Kind == auth.KindSession || p.Kind == auth.KindToken) {
		if role, err = h.orgs.RoleOf(c.Request.Context(), o.ID, p.User.ID); err != nil {
			h.fail(c, err)
			return
		}
	}
	if role.IsMember() && !p.Has(auth.ScopeRepoRead) {
		h.fail(c, api.Forbidden("the token lacks the %s scope", auth.ScopeRepoRead))
		return
	}
	repos, err := h.svc.List(c.Request.Context(), o.ID, role.IsMember(), page)
	if err != nil {
		h.fail(c, err)
		return
	}
	lvl := Read
	switch {
	case role.CanAdmin():
		lvl = Admin
	case role.CanWrite():
		lvl = Write
	}
	out := make([]JSON, 0, len(repos))
	for i := range repos {
		out = append(out, h.json(&repos[i], o.Name, lvl))
	}
	c.JSON(http.StatusOK, api.NewList(page, out, func(j JSON) int64 { return j.ID }))
}

func (h *Handler) get(c *gin.Context) {
	a, err := Load(c, h.svc, Read)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, h.json(a.Repo, a.Org.Name, a.Level))
}

func (h *Handler) update(c *gin.Context) {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		h.fail(c, err)
		return
	}
	var p Patch
	if err := api.Bind(c, &p); err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.Update(c.Request.Context(), a.Repo, p); err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, h.json(a.Repo, a.Org.Name, a.Level))
}

func (h *Handler) delete(c *gin.Context) {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.Delete(c.Request.Context(), a.Repo); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) listSecrets(c *gin.Context) {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		h.fail(c, err)
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.svc.ListSecrets(c.Request.Context(), a.Repo.ID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.Paginate(page, out, func(s SecretInfo) int64 { return s.ID }))
}

func (h *Handler) putSecret(c *gin.Context) {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		h.fail(c, err)
		return
	}
	var req struct {
		Value string `json:"value"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.PutSecret(c.Request.Context(), a.Repo, c.Param("name"), req.Value); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) deleteSecret(c *gin.Context) {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.DeleteSecret(c.Request.Context(), a.Repo.ID, c.Param("name")); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) listDeployTokens(c *gin.Context) {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		h.fail(c, err)
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.svc.ListDeployTokens(c.Request.Context(), a.Repo.ID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.Paginate(page, out, func(t DeployTokenInfo) int64 { return t.ID }))
}

func (h *Handler) createDeployToken(c *gin.Context) {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		h.fail(c, err)
		return
	}
	var req struct {
		Name      string     `json:"name"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	t, err := h.svc.CreateDeployToken(c.Request.Context(), a.Repo, auth.From(c).UserID(), req.Name, req.ExpiresAt)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, t)
}

func (h *Handler) revokeDeployToken(c *gin.Context) {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		h.fail(c, err)
		return
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		h.fail(c, api.NotFound("deploy token not found"))
		return
	}
	if err := h.svc.RevokeDeployToken(c.Request.Context(), a.Repo.ID, id); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
