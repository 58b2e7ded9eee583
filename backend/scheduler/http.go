package scheduler

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/agent/protocol"
	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// MaxLogChunk caps one log append; agents send far smaller chunks.
const MaxLogChunk = 4 << 20

// Handler serves the agent API (under /api/v1/agent, authenticated by agent tokens, not by the
// user middleware) and the build controls that go through the scheduler (cancel, rerun).
type Handler struct {
	svc      *Service
	builds   *build.Service
	repos    *repo.Service
	log      *slog.Logger
	draining func() <-chan struct{}
}

// NewHandler returns the scheduler's HTTP handler; draining is the server's shutdown signal,
// which releases long-polls at once.
func NewHandler(svc *Service, builds *build.Service, repos *repo.Service, draining func() <-chan struct{}, log *slog.Logger) *Handler {
	return &Handler{svc: svc, builds: builds, repos: repos, log: log, draining: draining}
}

// Routes implements server.Module.
func (h *Handler) Routes(root *gin.Engine, v1 *gin.RouterGroup) {
	agentAPI := root.Group("/api/v1/agent")
	agentAPI.POST("/register", h.register)
	leased := agentAPI.Group("", h.authAgent)
	leased.POST("/poll", h.poll)
	leased.POST("/leases/:lease/renew", h.renew)
	leased.POST("/leases/:lease/events", h.event)
	leased.POST("/leases/:lease/jobs/:job/log", h.appendLog)
	leased.POST("/leases/:lease/finish", h.finish)

	v1.POST("/repos/:org/:repo/builds/:number/cancel", h.cancel)
	v1.POST("/repos/:org/:repo/builds/:number/rerun", h.rerun)
	v1.GET("/admin/agents", h.listAgents)
}

// listAgents lists every agent for platform admins: online or not, tags, capacity, what it runs
// now and when it was last heard from.
func (h *Handler) listAgents(c *gin.Context) {
	p := auth.From(c)
	if !p.Authenticated() {
		h.fail(c, api.Unauthenticated("sign in or send a token"))
		return
	}
	if !p.IsPlatformAdmin() {
		h.fail(c, api.Forbidden("only platform admins see the agents (a token needs the admin scope)"))
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	agents, err := h.svc.Agents(c.Request.Context())
	if err != nil {
		h.fail(c, err)
		return
	}
	// Agents are few and never deleted: the cursor is a position in registration order.
	type positioned struct {
		AgentInfo
		pos int64
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
	c.JSON(http.StatusOK, out)
}

func (h *Handler) fail(c *gin.Context, err error) { api.Fail(c, h.log, err) }

func bearer(c *gin.Context) string {
	scheme, tok, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

const agentKey = "nimbus.agent"

func (h *Handler) authAgent(c *gin.Context) {
	a, err := h.svc.AgentByToken(c.Request.Context(), bearer(c))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Set(agentKey, a)
	c.Next()
}

func agentOf(c *gin.Context) *Agent { return c.MustGet(agentKey).(*Agent) }

func (h *Handler) register(c *gin.Context) {
	var req protocol.RegisterRequest
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	resp, err := h.svc.Register(c.Request.Context(), bearer(c), req)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, resp)
}

func (h *Handler) poll(c *gin.Context) {
	var req protocol.PollRequest
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	lease, err := h.svc.Poll(c.Request.Context(), agentOf(c), req, h.draining())
	if err != nil {
		h.fail(c, err)
		return
	}
	if lease == nil {
		c.Status(http.StatusNoContent)
		return
	}
	c.JSON(http.StatusOK, lease)
}

func (h *Handler) renew(c *gin.Context) {
	resp, err := h.svc.Renew(c.Request.Context(), agentOf(c), c.Param("lease"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, resp)
}

func (h *Handler) event(c *gin.Context) {
	var ev protocol.Event
	if err := api.Bind(c, &ev); err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.Event(c.Request.Context(), agentOf(c), c.Param("lease"), ev); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) finish(c *gin.Context) {
	var req protocol.FinishRequest
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.Finish(c.Request.Context(), agentOf(c), c.Param("lease"), req); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) appendLog(c *gin.Context) {
	jobID, ok := parseID(c.Param("job"))
	offset, err := strconv.ParseInt(c.Query("offset"), 10, 64)
	if !ok || err != nil || offset < 0 {
		h.fail(c, api.BadRequest("a job id and ?offset= (bytes already sent) are required"))
		return
	}
	p, err := h.svc.pipelineOfLease(c.Request.Context(), agentOf(c), c.Param("lease"))
	if err != nil {
		h.fail(c, err)
		return
	}
	var n int64
	h.svc.db.WithContext(c.Request.Context()).Model(&build.Job{}).Where("id = ? AND pipeline_id = ?", jobID, p.ID).Count(&n)
	if n == 0 {
		h.fail(c, api.NotFound("job %d is not part of this pipeline", jobID))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxLogChunk))
	if err != nil {
		h.fail(c, api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "a log chunk is at most %d bytes", MaxLogChunk))
		return
	}
	if h.svc.logs == nil {
		h.fail(c, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "log storage is not configured"))
		return
	}
	stored, err := h.svc.logs.Append(c.Request.Context(), jobID, offset, data)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, protocol.LogAck{Offset: stored})
}

func (h *Handler) buildOf(c *gin.Context) (*repo.Access, *build.Build, error) {
	if auth.From(c).Kind == auth.KindJob {
		return nil, nil, api.Forbidden("a pipeline's job token cannot cancel or re-run builds")
	}
	a, err := repo.Load(c, h.repos, repo.Write)
	if err != nil {
		return nil, nil, err
	}
	n, ok := parseID(c.Param("number"))
	if !ok {
		return nil, nil, api.NotFound("build not found")
	}
	b, err := h.builds.Get(c.Request.Context(), a.Repo.ID, n)
	return a, b, err
}

func (h *Handler) cancel(c *gin.Context) {
	a, b, err := h.buildOf(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.CancelBuild(c.Request.Context(), b.ID, ReasonCancelled); err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.builds.Describe(c.Request.Context(), a.Repo.ID, b.Number)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, out)
}

func (h *Handler) rerun(c *gin.Context) {
	a, b, err := h.buildOf(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	nb, err := h.builds.Rerun(c.Request.Context(), a, auth.From(c).User, b)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.builds.Describe(c.Request.Context(), a.Repo.ID, nb.Number)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, out)
}
