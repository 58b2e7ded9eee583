package scheduler

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/org"
)

// Handler serves the people's routes about agents: the platform admins' list, and teams'
// runners and runner tokens. The agents' own API is package agentapi's.
type Handler struct {
	svc  *Service
	orgs *org.Service
	log  *slog.Logger
}

// NewHandler returns the scheduler's HTTP handler; orgs authorizes the team runner routes.
func NewHandler(svc *Service, orgs *org.Service, log *slog.Logger) *Handler {
	return &Handler{svc: svc, orgs: orgs, log: log}
}

// Routes implements server.Module.
func (h *Handler) Routes(root *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.log)
	rs.GET("/admin/agents", h.listAgents)
	// Platform registration tokens (registration.go): platform admins only.
	rs.GET("/admin/registration-tokens", h.registrationTokens)
	rs.POST("/admin/registration-tokens", h.createRegistrationToken)
	rs.DELETE("/admin/registration-tokens/:id", h.deleteRegistrationToken)
	// Team runners (teams.go): members see them; admins register, pause, resume and revoke.
	rs.GET("/orgs/:org/agents", h.teamAgents)
	rs.POST("/orgs/:org/agents/:id/pause", h.pauseAgent(true))
	rs.POST("/orgs/:org/agents/:id/resume", h.pauseAgent(false))
	rs.DELETE("/orgs/:org/agents/:id", h.revokeAgent)
	rs.GET("/orgs/:org/runner-tokens", h.runnerTokens)
	rs.POST("/orgs/:org/runner-tokens", h.createRunnerToken)
	rs.DELETE("/orgs/:org/runner-tokens/:id", h.deleteRunnerToken)
}

func (h *Handler) teamAgents(c *gin.Context) error {
	o, _, err := org.Load(c, h.orgs, org.NeedMember, false)
	if err != nil {
		return err
	}
	list, err := h.svc.TeamAgents(c.Request.Context(), o.ID)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, api.List[AgentInfo]{Items: list})
}

func (h *Handler) pauseAgent(paused bool) api.HandlerFunc {
	return func(c *gin.Context) error {
		o, _, err := org.Load(c, h.orgs, org.NeedAdmin, true)
		if err != nil {
			return err
		}
		a, err := h.svc.PauseAgent(c.Request.Context(), o.ID, c.Param("id"), paused)
		if err != nil {
			return err
		}
		return api.JSON(c, http.StatusOK, a)
	}
}

func (h *Handler) revokeAgent(c *gin.Context) error {
	o, _, err := org.Load(c, h.orgs, org.NeedAdmin, true)
	if err != nil {
		return err
	}
	if err := h.svc.RevokeAgent(c.Request.Context(), o.ID, c.Param("id")); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) runnerTokens(c *gin.Context) error {
	o, _, err := org.Load(c, h.orgs, org.NeedAdmin, false)
	if err != nil {
		return err
	}
	list, err := h.svc.RunnerTokens(c.Request.Context(), o.ID)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, api.List[RunnerTokenInfo]{Items: list})
}

func (h *Handler) createRunnerToken(c *gin.Context) error {
	o, _, err := org.Load(c, h.orgs, org.NeedAdmin, true)
	if err != nil {
		return err
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	t, err := h.svc.CreateRunnerToken(c.Request.Context(), o.ID, auth.From(c).User.ID, req.Name)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, t)
}

func (h *Handler) deleteRunnerToken(c *gin.Context) error {
	o, _, err := org.Load(c, h.orgs, org.NeedAdmin, true)
	if err != nil {
		return err
	}
	id, ok := parseID(c.Param("id"))
	if !ok {
		return fault.NotFound("runner token %q not found", c.Param("id"))
	}
	if err := h.svc.DeleteRunnerToken(c.Request.Context(), o.ID, id); err != nil {
		return err
	}
	return api.NoContent(c)
}

// platformAdmin refuses everyone but platform admins (a token needs the admin scope).
func platformAdmin(c *gin.Context, what string) error {
	p := auth.From(c)
	if !p.Authenticated() {
		return fault.Unauthenticated("sign in or send a token")
	}
	if !p.IsPlatformAdmin() {
		return fault.Forbidden("only platform admins %s (a token needs the admin scope)", what)
	}
	return nil
}

func (h *Handler) registrationTokens(c *gin.Context) error {
	if err := platformAdmin(c, "see the registration tokens"); err != nil {
		return err
	}
	list, err := h.svc.RegistrationTokens(c.Request.Context())
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, api.List[RegistrationTokenInfo]{Items: list})
}

func (h *Handler) createRegistrationToken(c *gin.Context) error {
	if err := platformAdmin(c, "make registration tokens"); err != nil {
		return err
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	t, err := h.svc.CreateRegistrationToken(c.Request.Context(), auth.From(c).User.ID, req.Name)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, t)
}

func (h *Handler) deleteRegistrationToken(c *gin.Context) error {
	if err := platformAdmin(c, "delete registration tokens"); err != nil {
		return err
	}
	id, ok := parseID(c.Param("id"))
	if !ok {
		return fault.NotFound("registration token %q not found", c.Param("id"))
	}
	if err := h.svc.DeleteRegistrationToken(c.Request.Context(), id); err != nil {
		return err
	}
	return api.NoContent(c)
}

// listAgents lists every agent for platform admins: online or not, tags, capacity, what it runs
// now and when it was last heard from.
func (h *Handler) listAgents(c *gin.Context) error {
	if err := platformAdmin(c, "see the agents"); err != nil {
		return err
	}
	// Agents are few and never deleted: the cursor is a position in registration order.
	type positioned struct {
		AgentInfo
		pos int64
	}
	page, err := api.ParsePage(c)
	if err != nil {
		return err
	}
	agents, err := h.svc.Agents(c.Request.Context())
	if err != nil {
		return err
	}
	all := make([]positioned, len(agents))
	for i, a := range agents {
		all[i] = positioned{a, int64(i + 1)}
	}
	list := api.Paginate(page, all, func(a positioned) int64 { return a.pos })
	out := api.List[AgentInfo]{Items: make([]AgentInfo, len(list.Items)), NextCursor: list.NextCursor}
	for i, a := range list.Items {
		out.Items[i] = a.AgentInfo
	}
	return api.JSON(c, http.StatusOK, out)
}
