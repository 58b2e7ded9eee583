package scheduler

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The agent routes decode with api.BindLenient: agents are upgraded apart from the server, so
// a field one side does not know yet is ignored rather than refused (a 4xx is never retried and
// would take the agent out of service). Trailing data and wrong types are refused as anywhere.

// MaxLogChunk caps one log append; agents send far smaller chunks.
const MaxLogChunk = 4 << 20

// Handler serves the agent API (under /api/v1/agent, authenticated by agent tokens, not by the
// user middleware) and the platform admins' list of agents.
type Handler struct {
	svc      *Service
	orgs     *org.Service
	log      *slog.Logger
	draining func() <-chan struct{}
}

// NewHandler returns the scheduler's HTTP handler; draining is the server's shutdown signal,
// which releases long-polls at once. orgs authorizes the team runner routes.
func NewHandler(svc *Service, orgs *org.Service, draining func() <-chan struct{}, log *slog.Logger) *Handler {
	return &Handler{svc: svc, orgs: orgs, log: log, draining: draining}
}

// Routes implements server.Module.
func (h *Handler) Routes(root *gin.Engine, v1 *gin.RouterGroup) {
	agentAPI := api.NewRoutes(root.Group("/api/v1/agent"), h.log)
	agentAPI.POST("/register", h.register)
	agentAPI.POST("/poll", h.authAgent, h.poll)
	agentAPI.POST("/leases/:lease/renew", h.authAgent, h.renew)
	agentAPI.POST("/leases/:lease/events", h.authAgent, h.event)
	agentAPI.POST("/leases/:lease/jobs/:job/log", h.authAgent, h.appendLog)
	agentAPI.POST("/leases/:lease/finish", h.authAgent, h.finish)
	agentAPI.POST("/leases/:lease/"+protocol.PathImportsSuffix, h.authAgent, h.importFile)
	agentAPI.POST("/leases/:lease/"+protocol.PathLocksSuffix, h.authAgent, h.lock)
	agentAPI.POST("/leases/:lease/"+protocol.PathLocksReleaseSuffix, h.authAgent, h.unlock)
	agentAPI.POST("/leases/:lease/"+protocol.PathBuildsSuffix, h.authAgent, h.startBuild)
	agentAPI.POST("/leases/:lease/"+protocol.PathBuildStatusSuffix, h.authAgent, h.childBuild)
	agentAPI.POST("/leases/:lease/"+protocol.PathResolveSuffix, h.authAgent, h.resolveKey)
	agentAPI.POST("/leases/:lease/"+protocol.PathAwaitSuffix, h.authAgent, h.awaitKey)
	agentAPI.POST("/control", h.authAgent, h.control)
	agentAPI.POST("/deregister", h.authAgent, h.deregister)

	rs := api.NewRoutes(v1, h.log)
	rs.GET("/admin/agents", h.listAgents)
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

// listAgents lists every agent for platform admins: online or not, tags, capacity, what it runs
// now and when it was last heard from.
func (h *Handler) listAgents(c *gin.Context) error {
	p := auth.From(c)
	if !p.Authenticated() {
		return fault.Unauthenticated("sign in or send a token")
	}
	if !p.IsPlatformAdmin() {
		return fault.Forbidden("only platform admins see the agents (a token needs the admin scope)")
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

func bearer(c *gin.Context) string {
	scheme, tok, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

const agentKey = "nimbus.agent"

// authAgent is the agent routes' authentication: the agent's own token.
func (h *Handler) authAgent(c *gin.Context) error {
	a, err := h.svc.AgentByToken(c.Request.Context(), bearer(c))
	if err != nil {
		return err
	}
	c.Set(agentKey, a)
	c.Next()
	return nil
}

func agentOf(c *gin.Context) *Agent { return c.MustGet(agentKey).(*Agent) }

func (h *Handler) register(c *gin.Context) error {
	var req protocol.RegisterRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	resp, err := h.svc.Register(c.Request.Context(), bearer(c), req)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, resp)
}

func (h *Handler) poll(c *gin.Context) error {
	var req protocol.PollRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	lease, err := h.svc.Poll(c.Request.Context(), agentOf(c), req, h.draining())
	if err != nil {
		return err
	}
	if lease == nil {
		return api.NoContent(c)
	}
	return api.JSON(c, http.StatusOK, lease)
}

func (h *Handler) control(c *gin.Context) error {
	var req protocol.ControlRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	resp, err := h.svc.Control(c.Request.Context(), agentOf(c), req, h.draining())
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, resp)
}

func (h *Handler) deregister(c *gin.Context) error {
	if err := h.svc.Deregister(c.Request.Context(), agentOf(c)); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) renew(c *gin.Context) error {
	resp, err := h.svc.Renew(c.Request.Context(), agentOf(c), c.Param("lease"))
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, resp)
}

func (h *Handler) event(c *gin.Context) error {
	var ev protocol.Event
	if err := api.BindLenient(c, &ev); err != nil {
		return err
	}
	if err := h.svc.Event(c.Request.Context(), agentOf(c), c.Param("lease"), ev); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) importFile(c *gin.Context) error {
	var req protocol.ImportRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	f, err := h.svc.Import(c.Request.Context(), agentOf(c), c.Param("lease"), req)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, f)
}

func (h *Handler) lock(c *gin.Context) error {
	var req protocol.LockRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	out, err := h.svc.Lock(c.Request.Context(), agentOf(c), c.Param("lease"), req)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, out)
}

func (h *Handler) unlock(c *gin.Context) error {
	var req protocol.LockRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	if err := h.svc.Unlock(c.Request.Context(), agentOf(c), c.Param("lease"), req); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) startBuild(c *gin.Context) error {
	var req protocol.StartBuildRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	out, err := h.svc.StartBuild(c.Request.Context(), agentOf(c), c.Param("lease"), req)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, out)
}

func (h *Handler) childBuild(c *gin.Context) error {
	var ref protocol.ChildBuildRef
	if err := api.BindLenient(c, &ref); err != nil {
		return err
	}
	out, err := h.svc.ChildBuild(c.Request.Context(), agentOf(c), c.Param("lease"), ref)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, out)
}

func (h *Handler) resolveKey(c *gin.Context) error {
	var req protocol.KeyRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	if err := h.svc.ResolveKey(c.Request.Context(), agentOf(c), c.Param("lease"), req); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) awaitKey(c *gin.Context) error {
	var req protocol.KeyRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	out, err := h.svc.AwaitKey(c.Request.Context(), agentOf(c), c.Param("lease"), req)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, out)
}

func (h *Handler) finish(c *gin.Context) error {
	var req protocol.FinishRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	if err := h.svc.Finish(c.Request.Context(), agentOf(c), c.Param("lease"), req); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) appendLog(c *gin.Context) error {
	jobID, ok := parseID(c.Param("job"))
	offset, err := strconv.ParseInt(c.Query("offset"), 10, 64)
	if !ok || err != nil || offset < 0 {
		return fault.BadRequest("a job id and ?offset= (bytes already sent) are required")
	}
	if err := h.svc.builds.CheckJob(c.Request.Context(), agentOf(c).ID, c.Param("lease"), jobID); err != nil {
		return err
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxLogChunk))
	if err != nil {
		return fault.TooLarge("a log chunk is at most %d bytes", MaxLogChunk)
	}
	if h.svc.logs == nil {
		return fault.Unavailable("log storage is not configured")
	}
	stored, err := h.svc.logs.Append(c.Request.Context(), jobID, offset, data)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, protocol.LogAck{Offset: stored})
}
