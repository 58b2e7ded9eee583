package repo

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
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
	rs := api.NewRoutes(v1, h.log)
	rs.POST("/orgs/:org/repos", h.create)
	rs.GET("/orgs/:org/repos", h.list)
	rs.GET("/repos/:org/:repo", h.get)
	rs.POST("/repos/:org/:repo/forks", h.fork)
	rs.PATCH("/repos/:org/:repo", h.update)
	rs.DELETE("/repos/:org/:repo", h.delete)
	rs.GET("/repos/:org/:repo/secrets", h.listSecrets)
	rs.PUT("/repos/:org/:repo/secrets/:name", h.putSecret)
	rs.DELETE("/repos/:org/:repo/secrets/:name", h.deleteSecret)
	rs.GET("/repos/:org/:repo/deploy-tokens", h.listDeployTokens)
	rs.POST("/repos/:org/:repo/deploy-tokens", h.createDeployToken)
	rs.DELETE("/repos/:org/:repo/deploy-tokens/:id", h.revokeDeployToken)
	rs.GET("/repos/:org/:repo/secret-files", h.listSecretFiles)
	rs.GET("/repos/:org/:repo/secret-files/*path", h.getSecretFile)
	rs.PUT("/repos/:org/:repo/secret-files/*path", h.putSecretFile)
	rs.DELETE("/repos/:org/:repo/secret-files/*path", h.deleteSecretFile)
	rs.GET("/repos/:org/:repo/secret-reads", h.listSecretReads)
}

// JSON is a repo as the API shows it.
type JSON struct {
	ID            int64  `json:"id"`
	Org           string `json:"org"`
	Name          string `json:"name"`
	FullName      string `json:"full_name"`
	Description   string `json:"description"`
	Visibility    string `json:"visibility"`
	DefaultBranch string `json:"default_branch"`
	Archived      bool   `json:"archived"`
	Secret        bool   `json:"secret"`
	CloneURL      string `json:"clone_url"`
	Permission    string `json:"permission,omitempty"`
	// ForkOf is the org/name of the repo this one was forked from, shown to those who may read
	// it (the single-repo answers; lists leave it out).
	ForkOf    *string   `json:"fork_of,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (h *Handler) json(r *Repo, orgName string, lvl Level) JSON {
	j := JSON{ID: r.ID, Org: orgName, Name: r.Name, FullName: orgName + "/" + r.Name, Description: r.Description,
		Visibility: r.Visibility, DefaultBranch: r.DefaultBranch, Archived: r.Archived, Secret: r.Secret,
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

func (h *Handler) create(c *gin.Context) error {
	o, role, err := org.Load(c, h.orgs, org.NeedMember, false)
	if err != nil {
		return err
	}
	if err := auth.From(c).Need(auth.ScopeRepoWrite); err != nil {
		return err
	}
	if !role.CanWrite() {
		return fault.Forbidden("creating repos needs the developer role or above in %s (you are %s)", o.Name, role)
	}
	var req struct {
		Name          string `json:"name"`
		Visibility    string `json:"visibility"`
		DefaultBranch string `json:"default_branch"`
		Description   string `json:"description"`
		Secret        bool   `json:"secret"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	var r *Repo
	if req.Secret {
		// A secret repository is private, and its files are on no branch but its own.
		if req.Visibility != "" && req.Visibility != Private {
			return fault.Invalid("visibility", "a secret repository is private")
		}
		if req.DefaultBranch != "" && req.DefaultBranch != "main" {
			return fault.Invalid("default_branch", "a secret repository's files are on main")
		}
		if !role.CanAdmin() {
			return fault.Forbidden("creating a secret repository needs the admin role or above in %s (you are %s)", o.Name, role)
		}
		r, err = h.svc.CreateSecretRepo(c.Request.Context(), o, req.Name, req.Description)
	} else {
		r, err = h.svc.Create(c.Request.Context(), o, req.Name, req.Visibility, req.DefaultBranch, req.Description)
	}
	if err != nil {
		return err
	}
	lvl := Write
	if role.CanAdmin() {
		lvl = Admin
	}
	return api.JSON(c, http.StatusCreated, h.json(r, o.Name, lvl))
}

// list shows members every repo of the org and everyone else its public repos.
func (h *Handler) list(c *gin.Context) error {
	// The page is parsed before the org is looked up (a bad ?limit= is a 400 even for an org
	// that does not exist), so the lookup and the authorization run inside fetch, which
	// ListPage calls after parsing.
	return api.ListPage(c, func(page api.Page) ([]JSON, error) {
		p := auth.From(c)
		o, role, err := h.svc.VisibleOrg(c.Request.Context(), p, c.Param("org"))
		if err != nil {
			return nil, err
		}
		if role.IsMember() {
			if err := p.Need(auth.ScopeRepoRead); err != nil {
				return nil, err
			}
		}
		repos, err := h.svc.List(c.Request.Context(), o.ID, role.IsMember(), page)
		if err != nil {
			return nil, err
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
		return out, nil
	}, func(j JSON) int64 { return j.ID })
}

func (h *Handler) get(c *gin.Context) error {
	a, err := Load(c, h.svc, Read)
	if err != nil {
		return err
	}
	j := h.json(a.Repo, a.Org.Name, a.Level)
	j.ForkOf = h.svc.forkOf(c.Request.Context(), auth.From(c), a.Repo)
	return api.JSON(c, http.StatusOK, j)
}

// fork is POST /repos/{org}/{repo}/forks {"org", "name"}: 201 with the new repo in team org
// (the caller's developer role or above there; name defaults to the source's). Reading the
// source is enough, as on GitHub: that is how someone outside a team proposes a change to its
// public repo. A private repo forks only within its own team (GitHub's default for
// organisations). A job token does not fork.
func (h *Handler) fork(c *gin.Context) error {
	a, err := Load(c, h.svc, Read)
	if err != nil {
		return err
	}
	p := auth.From(c)
	if !p.Authenticated() {
		return fault.Unauthenticated("sign in or send a token to fork %s/%s", a.Org.Name, a.Repo.Name)
	}
	if err := p.Need(auth.ScopeRepoWrite); err != nil {
		return err
	}
	if p.User == nil || p.Kind == auth.KindJob {
		return fault.Forbidden("forking takes a person: sign in or use a personal access token")
	}
	var req struct {
		Org  string `json:"org"`
		Name string `json:"name"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if req.Org == "" {
		return fault.Invalid("org", "name the team to fork into")
	}
	o, err := h.orgs.ByName(c.Request.Context(), req.Org)
	if fault.KindOf(err) == fault.KindNotFound {
		return fault.Invalid("org", "no team %q that you belong to", req.Org)
	}
	if err != nil {
		return err
	}
	role, err := h.orgs.RoleOf(c.Request.Context(), o.ID, p.User.ID)
	if err != nil {
		return err
	}
	if !role.IsMember() {
		return fault.Invalid("org", "no team %q that you belong to", req.Org)
	}
	if !role.CanWrite() {
		return fault.Forbidden("forking into %s needs the developer role or above there (you are %s)", o.Name, role)
	}
	if a.Repo.Visibility != Public && o.ID != a.Org.ID {
		// GitHub's default for organisations: a team's private code stays in the team.
		return fault.Forbidden("%s/%s is private: it forks only within %s", a.Org.Name, a.Repo.Name, a.Org.Name)
	}
	r, err := h.svc.Fork(c.Request.Context(), a.Repo, o, req.Name)
	if err != nil {
		return err
	}
	lvl, err := h.svc.LevelOf(c.Request.Context(), o, r, p.User.ID)
	if err != nil {
		return err
	}
	j := h.json(r, o.Name, lvl)
	from := a.Org.Name + "/" + a.Repo.Name
	j.ForkOf = &from
	return api.JSON(c, http.StatusCreated, j)
}

func (h *Handler) update(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	var p Patch
	if err := api.Bind(c, &p); err != nil {
		return err
	}
	if err := h.svc.Update(c.Request.Context(), a.Repo, p); err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, h.json(a.Repo, a.Org.Name, a.Level))
}

func (h *Handler) delete(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(c.Request.Context(), a.Repo); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) listSecrets(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]SecretInfo, error) {
		return h.svc.ListSecrets(c.Request.Context(), a.Repo.ID)
	}, func(s SecretInfo) int64 { return s.ID })
}

func (h *Handler) putSecret(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	var req struct {
		Value string `json:"value"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if err := h.svc.PutSecret(c.Request.Context(), a.Repo, c.Param("name"), req.Value); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) deleteSecret(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteSecret(c.Request.Context(), a.Repo.ID, c.Param("name")); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) listDeployTokens(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]DeployTokenInfo, error) {
		return h.svc.ListDeployTokens(c.Request.Context(), a.Repo.ID)
	}, func(t DeployTokenInfo) int64 { return t.ID })
}

func (h *Handler) createDeployToken(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	var req struct {
		Name      string     `json:"name"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	t, err := h.svc.CreateDeployToken(c.Request.Context(), a.Repo, auth.From(c).UserID(), req.Name, req.ExpiresAt)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, t)
}

func (h *Handler) revokeDeployToken(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return fault.NotFound("deploy token not found")
	}
	if err := h.svc.RevokeDeployToken(c.Request.Context(), a.Repo.ID, id); err != nil {
		return err
	}
	return api.NoContent(c)
}

// The files of a secret repository, and the audit of their reads: its admins only (a member who
// may only read the repo gets 403, anyone else 404, as for repo secrets).

func (h *Handler) listSecretFiles(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	// A secret repository holds a handful of files: one page, by path.
	files, err := h.svc.ListSecretFiles(c.Request.Context(), a.Repo)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, api.List[SecretFileInfo]{Items: files})
}

// secretFilePath is the file path a secret-files route names: what follows
// …/secret-files/ in the URL, exactly. gin's catch-all keeps the "/" that separates it; only
// that one goes, so …/secret-files//etc/x.yml names "/etc/x.yml", which the path rule refuses.
func secretFilePath(c *gin.Context) string { return strings.TrimPrefix(c.Param("path"), "/") }

func (h *Handler) getSecretFile(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	f, err := h.svc.SecretFileContent(c.Request.Context(), a.Repo, secretFilePath(c))
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, f)
}

func (h *Handler) putSecretFile(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	var req struct {
		Content *string `json:"content"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if req.Content == nil {
		return fault.Invalid("content", "content is required (the whole file)")
	}
	info, err := h.svc.PutSecretFile(c.Request.Context(), a.Repo, auth.From(c).UserID(), secretFilePath(c), *req.Content)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, info)
}

func (h *Handler) deleteSecretFile(c *gin.Context) error {
	a, err := Load(c, h.svc, Admin)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteSecretFile(c.Request.Context(), a.Repo, secretFilePath(c)); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) listSecretReads(c *gin.Context) error {
	return api.ListPage(c, func(page api.Page) ([]SecretFileReadJSON, error) {
		a, err := Load(c, h.svc, Admin)
		if err != nil {
			return nil, err
		}
		return h.svc.SecretFileReads(c.Request.Context(), a.Repo, page)
	}, func(r SecretFileReadJSON) int64 { return r.ID })
}
