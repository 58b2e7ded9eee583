package agentapi

import (
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/scheduler"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// MaxLogChunk caps one log append; agents send far smaller chunks.
const MaxLogChunk = 4 << 20

// Routes implements server.Module: every route under /api/v1/agent, authenticated by the
// agent's own token (register by the registration token), not by the user middleware.
func (h *Handler) Routes(root *gin.Engine, _ *gin.RouterGroup) {
	agentAPI := api.NewRoutes(root.Group("/api/v1/agent"), h.log)
	agentAPI.POST("/register", h.register)
	agentAPI.POST("/facts", h.authAgent, h.facts)
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
	a, err := h.cfg.Dispatch.AgentByToken(c.Request.Context(), bearer(c))
	if err != nil {
		return err
	}
	c.Set(agentKey, a)
	c.Next()
	return nil
}

func agentOf(c *gin.Context) *scheduler.Agent { return c.MustGet(agentKey).(*scheduler.Agent) }

func (h *Handler) register(c *gin.Context) error {
	var req protocol.RegisterRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	resp, err := h.cfg.Dispatch.Register(c.Request.Context(), bearer(c), req)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, resp)
}

// facts is POST /agent/facts: a registered agent's facts at its start (scheduler.UpdateFacts).
func (h *Handler) facts(c *gin.Context) error {
	var req protocol.RegisterRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	ignored, err := h.cfg.Dispatch.UpdateFacts(c.Request.Context(), agentOf(c), req)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, protocol.FactsResponse{IgnoredTags: ignored})
}

func (h *Handler) poll(c *gin.Context) error {
	var req protocol.PollRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	lease, err := h.cfg.Dispatch.Poll(c.Request.Context(), agentOf(c), req, h.cfg.Draining())
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
	resp, err := h.cfg.Dispatch.Control(c.Request.Context(), agentOf(c), req, h.cfg.Draining())
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, resp)
}

func (h *Handler) deregister(c *gin.Context) error {
	if err := h.cfg.Dispatch.Deregister(c.Request.Context(), agentOf(c)); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) renew(c *gin.Context) error {
	resp, err := h.cfg.Dispatch.Renew(c.Request.Context(), agentOf(c), c.Param("lease"))
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
	if err := h.cfg.Runs.Event(c.Request.Context(), agentOf(c).ID, c.Param("lease"), ev); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) importFile(c *gin.Context) error {
	var req protocol.ImportRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	f, err := h.Import(c.Request.Context(), agentOf(c), c.Param("lease"), req)
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
	out, err := h.cfg.Dispatch.Lock(c.Request.Context(), agentOf(c), c.Param("lease"), req)
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
	if err := h.cfg.Dispatch.Unlock(c.Request.Context(), agentOf(c), c.Param("lease"), req); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) startBuild(c *gin.Context) error {
	var req protocol.StartBuildRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	out, err := h.StartBuild(c.Request.Context(), agentOf(c), c.Param("lease"), req)
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
	out, err := h.ChildBuild(c.Request.Context(), agentOf(c), c.Param("lease"), ref)
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
	if err := h.ResolveKey(c.Request.Context(), agentOf(c), c.Param("lease"), req); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) awaitKey(c *gin.Context) error {
	var req protocol.KeyRequest
	if err := api.BindLenient(c, &req); err != nil {
		return err
	}
	out, err := h.AwaitKey(c.Request.Context(), agentOf(c), c.Param("lease"), req)
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
	if _, _, err := h.cfg.Runs.Finish(c.Request.Context(), agentOf(c).ID, c.Param("lease"), req); err != nil {
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
	if err := h.cfg.Runs.CheckJob(c.Request.Context(), agentOf(c).ID, c.Param("lease"), jobID); err != nil {
		return err
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxLogChunk))
	if err != nil {
		return fault.TooLarge("a log chunk is at most %d bytes", MaxLogChunk)
	}
	if h.cfg.Logs == nil {
		return fault.Unavailable("log storage is not configured")
	}
	stored, err := h.cfg.Logs.Append(c.Request.Context(), jobID, offset, data)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, protocol.LogAck{Offset: stored})
}

func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}
