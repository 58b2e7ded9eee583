package build

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Handler serves the build routes.
type Handler struct {
	svc   *Service
	repos *repo.Service
	log   *slog.Logger
}

// NewHandler returns the build HTTP handler.
func NewHandler(svc *Service, repos *repo.Service, log *slog.Logger) *Handler {
	return &Handler{svc: svc, repos: repos, log: log}
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	v1.GET("/repos/:org/:repo/builds", h.list)
	v1.POST("/repos/:org/:repo/builds", h.trigger)
	v1.GET("/repos/:org/:repo/builds/:number", h.get)
	v1.GET("/repos/:org/:repo/schedules", h.schedules)
}

func (h *Handler) fail(c *gin.Context, err error) { api.Fail(c, h.log, err) }

// JobJSON, StageJSON, PipelineJSON and JSON are the build tree as the API shows it.
type JobJSON struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// StageJSON is one stage of a pipeline.
type StageJSON struct {
	Name     string    `json:"name"`
	Kind     string    `json:"kind,omitempty"` // "fail" for failStages, "end" for endStages
	Status   string    `json:"status"`
	Parallel bool      `json:"parallel"`
	Jobs     []JobJSON `json:"jobs"`
}

// PipelineJSON is one pipeline of a build.
type PipelineJSON struct {
	ID         int64      `json:"id"`
	Key        string     `json:"key"`
	Name       string     `json:"name"`
	Status     string     `json:"status"`
	Reason     string     `json:"reason"`
	RunnerTag  string     `json:"runner_tag"`
	CPUs       int        `json:"cpus"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// CoreSeconds and Cost are what the pipeline used and costs so far (settled values once it
	// is settled); Cost is a decimal string in the billing currency, 4 places.
	CoreSeconds int64       `json:"core_seconds"`
	Cost        string      `json:"cost"`
	Stages      []StageJSON `json:"stages,omitempty"`
}

// ErrorJSON is why a build failed before any pipeline existed (its .cnb.yml).
type ErrorJSON struct {
	Message string `json:"message"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
}

// JSON is a build.
type JSON struct {
	ID            int64          `json:"id"`
	Number        int64          `json:"number"`
	Event         string         `json:"event"`
	Branch        string         `json:"branch"`
	Tag           string         `json:"tag,omitempty"`
	Commit        string         `json:"commit"`
	CommitMessage string         `json:"commit_message"`
	TriggeredBy   string         `json:"triggered_by"`
	Status        string         `json:"status"`
	CreatedAt     time.Time      `json:"created_at"`
	StartedAt     *time.Time     `json:"started_at"`
	FinishedAt    *time.Time     `json:"finished_at"`
	Pipelines     []PipelineJSON `json:"pipelines"`
	Error         *ErrorJSON     `json:"error,omitempty"`
}

func (h *Handler) list(c *gin.Context) {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		h.fail(c, err)
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	bs, err := h.svc.List(c.Request.Context(), a.Repo.ID, page)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.svc.describe(c.Request.Context(), bs, false)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.NewList(page, out, func(j JSON) int64 { return j.Number }))
}

func (h *Handler) get(c *gin.Context) {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		h.fail(c, err)
		return
	}
	n, err := strconv.ParseInt(c.Param("number"), 10, 64)
	if err != nil {
		h.fail(c, api.NotFound("build not found"))
		return
	}
	b, err := h.svc.Get(c.Request.Context(), a.Repo.ID, n)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.svc.describe(c.Request.Context(), []Build{*b}, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, out[0])
}

func (h *Handler) trigger(c *gin.Context) {
	if auth.From(c).Kind == auth.KindJob {
		// A pipeline starting pipelines through the API could loop forever.
		h.fail(c, api.Forbidden("a pipeline's job token cannot start builds"))
		return
	}
	a, err := repo.Load(c, h.repos, repo.Write)
	if err != nil {
		h.fail(c, err)
		return
	}
	var req struct {
		Branch string            `json:"branch"`
		Event  string            `json:"event"`
		Env    map[string]string `json:"env"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	b, err := h.svc.Manual(c.Request.Context(), a, auth.From(c).User, req.Branch, req.Event, req.Env)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.svc.describe(c.Request.Context(), []Build{*b}, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, out[0])
}

// ScheduleJSON is a registered schedule.
type ScheduleJSON struct {
	ID          int64      `json:"id"`
	Branch      string     `json:"branch"`
	Event       string     `json:"event"`
	Cron        string     `json:"cron"`
	LastFiredAt *time.Time `json:"last_fired_at"`
}

func (h *Handler) schedules(c *gin.Context) {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		h.fail(c, err)
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	ss, err := h.svc.Schedules(c.Request.Context(), a.Repo.ID)
	if err != nil {
		h.fail(c, err)
		return
	}
	out := make([]ScheduleJSON, 0, len(ss))
	for _, s := range ss {
		out = append(out, ScheduleJSON{ID: s.ID, Branch: s.Branch, Event: s.Event, Cron: s.Cron, LastFiredAt: s.LastFiredAt})
	}
	c.JSON(http.StatusOK, api.Paginate(page, out, func(s ScheduleJSON) int64 { return s.ID }))
}

// List returns a page of the repo's builds, newest first (the cursor is the build number).
func (s *Service) List(ctx context.Context, repoID int64, page api.Page) ([]Build, error) {
	q := s.db.WithContext(ctx).Where("repo_id = ?", repoID)
	if page.After > 0 {
		q = q.Where("number < ?", page.After)
	}
	var out []Build
	err := q.Order("number DESC").Limit(page.Limit + 1).Find(&out).Error
	return out, err
}

// Get returns build number n of the repo.
func (s *Service) Get(ctx context.Context, repoID, n int64) (*Build, error) {
	var b Build
	err := s.db.WithContext(ctx).Where("repo_id = ? AND number = ?", repoID, n).Take(&b).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, api.NotFound("build #%d not found", n)
	}
	return &b, err
}

// describe turns builds into their JSON, with a constant number of queries whatever the count;
// deep adds stages and jobs.
func (s *Service) describe(ctx context.Context, bs []Build, deep bool) ([]JSON, error) {
	db := s.db.WithContext(ctx)
	now := s.clock.Now().UTC()
	ids := make([]int64, 0, len(bs))
	userIDs := []int64{}
	for _, b := range bs {
		ids = append(ids, b.ID)
		if b.TriggeredBy != nil {
			userIDs = append(userIDs, *b.TriggeredBy)
		}
	}
	var users []auth.User
	if len(userIDs) > 0 {
		if err := db.Where("id IN ?", userIDs).Find(&users).Error; err != nil {
			return nil, err
		}
	}
	names := map[int64]string{}
	for _, u := range users {
		names[u.ID] = u.Username
	}
	var ps []Pipeline
	if len(ids) > 0 {
		if err := db.Omit("plan").Where("build_id IN ?", ids).Order("build_id, position").Find(&ps).Error; err != nil {
			return nil, err
		}
	}
	pids := make([]int64, 0, len(ps))
	for _, p := range ps {
		pids = append(pids, p.ID)
	}
	costOf := map[int64]billing.PipelineBilling{}
	if len(pids) > 0 {
		var pbs []billing.PipelineBilling
		if err := db.Where("pipeline_id IN ?", pids).Find(&pbs).Error; err != nil {
			return nil, err
		}
		for _, pb := range pbs {
			costOf[pb.PipelineID] = pb
		}
	}
	stagesOf := map[int64][]StageJSON{}
	if deep && len(ps) > 0 {
		var stages []Stage
		if err := db.Where("pipeline_id IN ?", pids).Order("pipeline_id, position").Find(&stages).Error; err != nil {
			return nil, err
		}
		var jobs []Job
		if err := db.Where("pipeline_id IN ?", pids).Order("stage_id, position").Find(&jobs).Error; err != nil {
			return nil, err
		}
		jobsOf := map[int64][]JobJSON{}
		for _, j := range jobs {
			jobsOf[j.StageID] = append(jobsOf[j.StageID], JobJSON{ID: j.ID, Name: j.Name, Status: j.Status, ExitCode: j.ExitCode})
		}
		for _, st := range stages {
			js := jobsOf[st.ID]
			if js == nil {
				js = []JobJSON{}
			}
			stagesOf[st.PipelineID] = append(stagesOf[st.PipelineID], StageJSON{Name: st.Name, Kind: st.Kind, Status: st.Status, Parallel: st.Parallel, Jobs: js})
		}
	}
	if s.Explain != nil {
		var queued []Pipeline
		for _, p := range ps {
			if p.Status == StatusQueued && p.Reason == "" {
				queued = append(queued, p)
			}
		}
		if len(queued) > 0 {
			why := s.Explain(ctx, queued)
			for i := range ps {
				if r, ok := why[ps[i].ID]; ok {
					ps[i].Reason = r
				}
			}
		}
	}
	pipesOf := map[int64][]PipelineJSON{}
	for _, p := range ps {
		pj := PipelineJSON{ID: p.ID, Key: p.Key, Name: p.Name, Status: p.Status, Reason: p.Reason, RunnerTag: p.RunnerTag,
			CPUs: p.CPUs, StartedAt: p.StartedAt, FinishedAt: p.FinishedAt, Cost: billing.Amount(0).Display()}
		if pb, ok := costOf[p.ID]; ok {
			end := now
			if p.FinishedAt != nil {
				end = *p.FinishedAt // ended, settlement pending: it ran until then
			}
			cs, cost := pb.SoFar(end)
			pj.CoreSeconds, pj.Cost = cs, cost.Display()
		}
		if deep {
			pj.Stages = stagesOf[p.ID]
			if pj.Stages == nil {
				pj.Stages = []StageJSON{}
			}
		}
		pipesOf[p.BuildID] = append(pipesOf[p.BuildID], pj)
	}
	out := make([]JSON, 0, len(bs))
	for _, b := range bs {
		j := JSON{ID: b.ID, Number: b.Number, Event: b.Event, Branch: b.Branch, Tag: b.Tag, Commit: b.CommitSHA,
			CommitMessage: b.CommitMessage, Status: b.Status, CreatedAt: b.CreatedAt, StartedAt: b.StartedAt,
			FinishedAt: b.FinishedAt, Pipelines: pipesOf[b.ID]}
		if b.Tag != "" && j.Branch == "" {
			j.Branch = b.Tag // CNB_BRANCH is the tag name for tag events
		}
		if b.TriggeredBy != nil {
			j.TriggeredBy = names[*b.TriggeredBy]
		}
		if j.Pipelines == nil {
			j.Pipelines = []PipelineJSON{}
		}
		if b.ErrorMessage != "" {
			j.Error = &ErrorJSON{Message: b.ErrorMessage, File: b.ErrorFile, Line: b.ErrorLine, Column: b.ErrorColumn}
		}
		out = append(out, j)
	}
	return out, nil
}

// Describe returns build number n of the repo as the API shows it, stages and jobs included.
func (s *Service) Describe(ctx context.Context, repoID, n int64) (JSON, error) {
	b, err := s.Get(ctx, repoID, n)
	if err != nil {
		return JSON{}, err
	}
	out, err := s.describe(ctx, []Build{*b}, true)
	if err != nil {
		return JSON{}, err
	}
	return out[0], nil
}

// JobRepo names the org and repo a job belongs to, for authorizing access to its log.
func (s *Service) JobRepo(ctx context.Context, jobID int64) (orgName, repoName string, err error) {
	var row struct {
		OrgName  string
		RepoName string
	}
	err = s.db.WithContext(ctx).Table("jobs").Select("orgs.name AS org_name, repos.name AS repo_name").
		Joins("JOIN pipelines ON pipelines.id = jobs.pipeline_id").Joins("JOIN builds ON builds.id = pipelines.build_id").
		Joins("JOIN repos ON repos.id = builds.repo_id").Joins("JOIN orgs ON orgs.id = repos.org_id").
		Where("jobs.id = ?", jobID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", "", api.NotFound("job %d not found", jobID)
	}
	return row.OrgName, row.RepoName, err
}
