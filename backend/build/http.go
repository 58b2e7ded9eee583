package build

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Handler serves the build routes: the builds of a repo, one build with its tree, a manual
// trigger, cancel, rerun, and the repo's schedules.
type Handler struct {
	svc   *Service
	repos *repo.Service
	why   Explainer
	meter Meter
	zone  *time.Location // the billing time zone, which schedules are read in
	// zoneID is zone's name for browsers (zoneID).
	zoneID string
	log    *slog.Logger
}

// Explainer says what each queued pipeline waits for (the scheduler); the API shows the
// blockers and, as the pipeline's reason, their messages.
type Explainer interface {
	Explain(ctx context.Context, ps []Pipeline) map[int64][]Blocker
}

// Blocker is one thing a queued pipeline waits for, with what to do about it.
type Blocker struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Remedy names what fixes it, for the dashboard to link: RemedyTopUp, RemedySpendingCap,
	// RemedyAgents, RemedyTeamAgents, RemedyPlatformAgents; "" when there is nothing to do but wait.
	Remedy string `json:"remedy,omitempty"`
}

// Blocker codes. BlockerBusy is no blocker: the pipeline can run and waits for its turn.
const (
	BlockerLock        = "lock"
	BlockerNoAgent     = "no_agent"
	BlockerTooSmall    = "too_small"
	BlockerPaused      = "paused"
	BlockerTeamCap     = "team_cap"
	BlockerBalance     = "balance"
	BlockerSpendingCap = "spending_cap"
	BlockerBusy        = "busy"
	// BlockerCapacity: a leased pipeline waits for a place on its agent's cluster (a
	// Kubernetes pod Pending); its message is the agent's.
	BlockerCapacity = "capacity"
)

// Remedies a blocker links to.
const (
	RemedyTopUp       = "topup"
	RemedySpendingCap = "spending_cap"
	RemedyAgents      = "agents"
	RemedyTeamAgents  = "team_agents"
	// RemedyPlatformAgents: only the platform's admins can add what it needs (team runners
	// may not serve the tag); the dashboard links admins to the Agents page and tells others
	// whom to ask.
	RemedyPlatformAgents = "platform_agents"
)

// ReasonOf is the blockers as one sentence: their messages.
func ReasonOf(bs []Blocker) string {
	msgs := make([]string, len(bs))
	for i, b := range bs {
		msgs[i] = b.Message
	}
	return strings.Join(msgs, "; ")
}

// buildWaiting: no pipeline runs and one is held back.
func buildWaiting(ps []PipelineJSON) bool {
	waiting := false
	for _, p := range ps {
		if p.Status == StatusRunning {
			return false
		}
		waiting = waiting || p.Waiting
	}
	return waiting
}

// Waiting says whether blockers hold a pipeline back (more than its turn in the queue).
func Waiting(bs []Blocker) bool {
	return slices.ContainsFunc(bs, func(b Blocker) bool { return b.Code != BlockerBusy })
}

// Meter says what pipelines used and cost up to a time (billing, adapted in app.New); a
// pipeline it does not answer for cost nothing.
type Meter interface {
	PipelineUsage(ctx context.Context, until map[int64]time.Time) (map[int64]Usage, error)
}

// Usage is what a pipeline used and cost as billing displays it: build shows money and never
// computes it, so amounts arrive as billing's decimal strings.
type Usage struct {
	CoreSeconds int64
	// Cost is what it costs so far while it runs; once settled, what its account paid.
	Cost string
	// WrittenOff is, once settled, the part of its price the platform wrote off.
	WrittenOff string
	// Uncovered is, once settled, how long it ran past its last frozen window.
	Uncovered time.Duration
}

// NoCost is billing's display of a zero amount, shown for a pipeline the Meter does not answer
// for (app's meter test holds it equal to billing.Amount(0).Display()).
const NoCost = "0.0000"

// HandlerConfig is what the build routes are made of. Explain and Meter may be nil: queued
// pipelines then give no reason and cost shows as zero.
type HandlerConfig struct {
	Service *Service
	Repos   *repo.Service
	Explain Explainer
	Meter   Meter
	// Zone is the billing time zone (NIMBUS_TIMEZONE), which cron expressions are read in;
	// nil means UTC.
	Zone *time.Location
	// ZoneName is NIMBUS_TIMEZONE as configured ("Asia/Shanghai"): the name the API gives
	// browsers, whose Intl knows IANA names but not Go's fixed-zone names ("UTC+8").
	ZoneName string
	Log      *slog.Logger
}

// NewHandler returns the build HTTP handler.
func NewHandler(cfg HandlerConfig) *Handler {
	zone := cfg.Zone
	if zone == nil {
		zone = time.UTC
	}
	return &Handler{svc: cfg.Service, repos: cfg.Repos, why: cfg.Explain, meter: cfg.Meter, zone: zone,
		zoneID: zoneID(cfg.ZoneName, zone), log: cfg.Log}
}

// zoneID names a zone as browsers know it: an IANA name as configured, or, for a fixed offset
// of whole hours ("UTC+8"), tzdata's Etc/GMT name of it, whose sign is inverted
// ("Etc/GMT-8"). The dashboard failed on "UTC+8" with "Invalid time zone specified".
func zoneID(configured string, loc *time.Location) string {
	if configured != "" && !strings.HasPrefix(configured, "UTC") && !strings.HasPrefix(configured, "GMT") {
		if _, err := time.LoadLocation(configured); err == nil || strings.Contains(configured, "/") {
			return configured
		}
	}
	_, off := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Zone()
	switch {
	case off == 0:
		return "UTC"
	case off%3600 == 0:
		return fmt.Sprintf("Etc/GMT%+d", -off/3600)
	}
	return loc.String()
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.log)
	rs.GET("/repos/:org/:repo/builds", h.list)
	rs.POST("/repos/:org/:repo/builds", h.trigger)
	rs.POST("/repos/:org/:repo/auto-tag", h.autoTag)
	rs.GET("/repos/:org/:repo/builds/:number", h.get)
	rs.GET("/repos/:org/:repo/builds/:number/pipelines", h.pipelines)
	rs.POST("/repos/:org/:repo/builds/:number/cancel", h.cancel)
	rs.POST("/repos/:org/:repo/builds/:number/rerun", h.rerun)
	rs.GET("/repos/:org/:repo/schedules", h.schedules)
	rs.POST("/repos/:org/:repo/schedules/:id/run", h.runSchedule)
	rs.GET("/repos/:org/:repo/metrics", h.metrics)
	rs.GET("/repos/:org/:repo/buttons", h.buttons)
	rs.GET("/repos/:org/:repo/events", h.events)
	rs.POST("/repos/:org/:repo/buttons/press", h.press)
	rs.POST("/repos/:org/:repo/statuses/:sha", h.setStatus)
	rs.GET("/repos/:org/:repo/commits/:sha/checks", h.commitChecks)
	rs.GET("/repos/:org/:repo/deploy-environments", h.environments)
	rs.POST("/repos/:org/:repo/deployments", h.deploy)
}

// environments is GET …/deploy-environments?tag=: the .cnb/tag_deploy.yml environments of a
// tag, whether the caller may deploy each now, and each one's last deploy (deploy.go).
func (h *Handler) environments(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	tag := c.Query("tag")
	if tag == "" {
		return fault.Invalid("tag", "name the tag: ?tag=")
	}
	es, err := h.svc.Environments(c.Request.Context(), a, auth.From(c).User, tag)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, gin.H{"tag": tag, "environments": es})
}

// deploy is POST …/deployments {tag, environment}: the deploy's build (201).
func (h *Handler) deploy(c *gin.Context) error {
	var req struct {
		Tag         string `json:"tag"`
		Environment string `json:"environment"`
	}
	return h.Start(c, "deploy", &req, func(a *repo.Access, u *auth.User) (*Build, error) {
		if req.Tag == "" {
			return nil, fault.Invalid("tag", "name the tag to deploy")
		}
		if req.Environment == "" {
			return nil, fault.Invalid("environment", "name the environment to deploy to")
		}
		return h.svc.Deploy(c.Request.Context(), a, u, req.Tag, req.Environment)
	})
}

// buttons is GET …/buttons?branch=: the .cnb/web_trigger.yml buttons of a branch (buttons.go).
func (h *Handler) buttons(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	branch := c.Query("branch")
	if branch == "" {
		branch = a.Repo.DefaultBranch
	}
	bs, err := h.svc.Buttons(c.Request.Context(), a, auth.From(c).User, branch)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, gin.H{"branch": branch, "buttons": bs})
}

// events is GET …/events?branch=: what "Run a build" offers for a branch (events.go).
func (h *Handler) events(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	out, err := h.svc.EventsFor(c.Request.Context(), a, c.Query("branch"))
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, out)
}

// press is POST …/buttons/press {branch, button, inputs}: the button's build (201).
func (h *Handler) press(c *gin.Context) error {
	var req struct {
		Branch string            `json:"branch"`
		Button string            `json:"button"`
		Inputs map[string]string `json:"inputs"`
	}
	return h.Start(c, "start builds", &req, func(a *repo.Access, u *auth.User) (*Build, error) {
		if req.Button == "" {
			return nil, fault.Invalid("button", "name the button to press")
		}
		return h.svc.Press(c.Request.Context(), a, u, req.Branch, req.Button, req.Inputs)
	})
}

// JobJSON, StageJSON, PipelineJSON and JSON are the build tree as the API shows it.
type JobJSON struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Type     string `json:"type,omitempty"` // a built-in task's type (cnb:await, …)
	// Image and ImageDigest are what its container ran, as its agent reported it.
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
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
	ID     int64  `json:"id"`
	Key    string `json:"key"`
	Name   string `json:"name"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	// Waiting says a queued pipeline is held back by more than its turn: Blockers names each
	// thing it waits for (empty unless queued).
	Waiting    bool       `json:"waiting"`
	Blockers   []Blocker  `json:"blockers"`
	RunnerTag  string     `json:"runner_tag"`
	CPUs       int        `json:"cpus"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// CoreSeconds and Cost are what the pipeline used and costs so far (settled values once it
	// is settled: Cost is then what was paid); decimal strings in the billing currency, 4
	// places. WrittenOff is the part of its price the platform wrote off (it ran past what its
	// team could pay), and UncoveredMs how long it ran past its last paid window, once settled.
	CoreSeconds int64  `json:"core_seconds"`
	Cost        string `json:"cost"`
	WrittenOff  string `json:"written_off"`
	UncoveredMs *int64 `json:"uncovered_ms"`
	// Workspace pipelines stay up after their stages; ReadyAt is when their environment could
	// be entered (null while starting, and for builds), WorkspaceState where it is (null for
	// builds; see WorkspaceState).
	Workspace      bool        `json:"workspace"`
	ReadyAt        *time.Time  `json:"ready_at"`
	WorkspaceState *string     `json:"workspace_state"`
	Stages         []StageJSON `json:"stages,omitempty"`
	// AwaitedMs is how much of its run the pipeline spent in cnb:await jobs (overlapping awaits
	// count once), so far: its node was held, and billed, meanwhile. With the stages only.
	AwaitedMs *int64 `json:"awaited_ms,omitempty"`
	// Host is the agent that ran it and its host's facts at the lease. With the stages only.
	Host json.RawMessage `json:"host,omitempty"`
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
	ID            int64  `json:"id"`
	Number        int64  `json:"number"`
	Event         string `json:"event"`
	Branch        string `json:"branch"`
	Tag           string `json:"tag,omitempty"`
	Commit        string `json:"commit"`
	CommitMessage string `json:"commit_message"`
	TriggeredBy   string `json:"triggered_by"`
	Status        string `json:"status"`
	// Waiting says nothing of the build runs and a pipeline is held back by blockers (its
	// blockers say what): the dashboard shows "waiting" rather than "queued" or "running".
	Waiting    bool       `json:"waiting"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Pipelines are the first PipelinesPage of the build's pipelines, in order; PipelineCount
	// counts them all. PipelinesNextCursor, set when there are more, is the cursor of
	// GET …/builds/{number}/pipelines for the rest. Waiting looks at the blockers of the
	// pipelines here, and at whether any pipeline of the build runs.
	Pipelines           []PipelineJSON `json:"pipelines"`
	PipelineCount       int64          `json:"pipeline_count"`
	PipelinesNextCursor string         `json:"pipelines_next_cursor,omitempty"`
	Error               *ErrorJSON     `json:"error,omitempty"`
	// Parent is the build whose pipeline started this one (cnb:apply, cnb:trigger); Children
	// the builds this one's pipelines started. Only in a build's own answer.
	Parent *BuildLinkJSON `json:"parent,omitempty"`
	// RerunOf is the build this one re-runs. Only in a build's own answer.
	RerunOf  *BuildLinkJSON  `json:"rerun_of,omitempty"`
	Children []BuildLinkJSON `json:"children,omitempty"`
	// Diagnostics are the errors and warnings of the build's .cnb.yml, each with the lines it
	// points at. Only in a build's own answer.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// BuildLinkJSON names a build of any repo.
type BuildLinkJSON struct {
	Repo     string `json:"repo"` // org/repo
	Number   int64  `json:"number"`
	Status   string `json:"status"`
	Pipeline int64  `json:"pipeline_id"` // the parent's pipeline that started the child
}

func (h *Handler) list(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	return api.ListPage(c, func(page api.Page) ([]JSON, error) {
		bs, err := h.svc.List(c.Request.Context(), a.Repo.ID, page)
		if err != nil {
			return nil, err
		}
		return h.describe(c.Request.Context(), bs, false)
	}, func(j JSON) int64 { return j.Number })
}

// readBuild authorizes reading the route's build and loads it.
func (h *Handler) readBuild(c *gin.Context) (*Build, error) {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(c.Param("number"), 10, 64)
	if err != nil {
		return nil, fault.NotFound("build not found")
	}
	return h.svc.Get(c.Request.Context(), a.Repo.ID, n)
}

func (h *Handler) get(c *gin.Context) error {
	b, err := h.readBuild(c)
	if err != nil {
		return err
	}
	described, err := h.describe(c.Request.Context(), []Build{*b}, true)
	if err != nil {
		return err
	}
	out := described[0]
	// Its parent and children, those of them the caller may see.
	visible := func(slug string) bool {
		orgName, repoName, _ := strings.Cut(slug, "/")
		_, err := h.repos.Resolve(c.Request.Context(), auth.From(c), orgName, repoName, repo.Read)
		return err == nil
	}
	if err := h.svc.links(c.Request.Context(), b, &out, visible); err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, out)
}

// pipelines is GET …/builds/{number}/pipelines: a page of the build's pipelines in order, with
// their stages and jobs, as the build's own answer shows its first page.
func (h *Handler) pipelines(c *gin.Context) error {
	b, err := h.readBuild(c)
	if err != nil {
		return err
	}
	page, err := api.ParsePage(c)
	if err != nil {
		return err
	}
	ps, err := h.svc.Pipelines(c.Request.Context(), b.ID, page)
	if err != nil {
		return err
	}
	l := api.NewList(page, ps, pipelineKey)
	items, err := h.describePipelines(c.Request.Context(), l.Items, true)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, api.List[PipelineJSON]{Items: items, NextCursor: l.NextCursor})
}

func (h *Handler) trigger(c *gin.Context) error {
	var req struct {
		Branch string            `json:"branch"`
		Event  string            `json:"event"`
		Env    map[string]string `json:"env"`
	}
	return h.Start(c, "start builds", &req, func(a *repo.Access, u *auth.User) (*Build, error) {
		return h.svc.Manual(c.Request.Context(), a, u, req.Branch, req.Event, req.Env)
	})
}

// AutoTagJSON is the answer of POST …/auto-tag: the build of the default branch's auto_tag
// pipelines, or the tag the default made (and the build numbers of its tag_push).
type AutoTagJSON struct {
	Build   *JSON   `json:"build"`
	Tag     string  `json:"tag"`
	Commit  string  `json:"commit"`
	TagPush []int64 `json:"tag_push"`
}

// autoTag is POST /repos/{org}/{repo}/auto-tag: the tags page's button (AutoTag). Write access
// as a person, as running a build takes; 201.
func (h *Handler) autoTag(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Write)
	if err != nil {
		return err
	}
	if auth.From(c).Kind == auth.KindJob {
		return fault.Forbidden("a pipeline's job token cannot press the auto-tag button")
	}
	res, err := h.svc.AutoTag(c.Request.Context(), a, auth.From(c).User)
	if err != nil {
		return err
	}
	out := AutoTagJSON{Tag: res.Tag, Commit: res.Commit, TagPush: []int64{}}
	for _, b := range res.TagPush {
		out.TagPush = append(out.TagPush, b.Number)
	}
	if res.Build != nil {
		described, err := h.describe(c.Request.Context(), []Build{*res.Build}, true)
		if err != nil {
			return err
		}
		out.Build = &described[0]
	}
	return api.JSON(c, http.StatusCreated, out)
}

// Start is a route that starts a build (run a build, press a button, and package workspace's
// open a workspace): write access to the repo, never a job token (a pipeline starting pipelines
// through the API could loop forever; cnb:trigger is its way, with its own limits), the body
// bound into req, and the new build answered with 201. what names the refusal ("start
// builds").
func (h *Handler) Start(c *gin.Context, what string, req any, run func(a *repo.Access, u *auth.User) (*Build, error)) error {
	if auth.From(c).Kind == auth.KindJob {
		return fault.Forbidden("a pipeline's job token cannot %s", what)
	}
	a, err := repo.Load(c, h.repos, repo.Write)
	if err != nil {
		return err
	}
	if err := api.Bind(c, req); err != nil {
		return err
	}
	b, err := run(a, auth.From(c).User)
	if err != nil {
		return err
	}
	return h.created(c, b)
}

// created answers 201 with a new build, its pipelines, stages and jobs.
func (h *Handler) created(c *gin.Context, b *Build) error {
	out, err := h.describe(c.Request.Context(), []Build{*b}, true)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, out[0])
}

// Workspace states, as the dashboard shows them.
const (
	WorkspaceQueued   = "queued"
	WorkspaceStarting = "starting"
	WorkspaceReady    = "ready"
	WorkspaceStopping = "stopping"
	WorkspaceStopped  = "stopped"
	WorkspaceFailed   = "failed"
)

// WorkspaceState is where a workspace pipeline is: queued → starting → ready → stopping →
// stopped (ended after it was ready: cancelled by the user, idle, its lifetime cap, terminated
// for its bill), or failed (ended before it was ready, or failed after, as with agent_lost);
// the pipeline's reason says why.
func WorkspaceState(p Pipeline) string {
	switch {
	case p.Status == StatusQueued:
		return WorkspaceQueued
	case p.Status == StatusRunning && p.ReadyAt == nil:
		return WorkspaceStarting
	case p.Status == StatusRunning && p.CancelRequested:
		return WorkspaceStopping
	case p.Status == StatusRunning:
		return WorkspaceReady
	case p.ReadyAt != nil && p.Status != StatusFailed:
		return WorkspaceStopped // after it was ready: the user, idle, its cap, its bill
	}
	return WorkspaceFailed // before it was ready, or lost with its agent
}

// buildOf authorizes a change to the route's build (cancel, rerun) and loads it.
func (h *Handler) buildOf(c *gin.Context) (*repo.Access, *Build, error) {
	if auth.From(c).Kind == auth.KindJob {
		return nil, nil, fault.Forbidden("a pipeline's job token cannot cancel or re-run builds")
	}
	a, err := repo.Load(c, h.repos, repo.Write)
	if err != nil {
		return nil, nil, err
	}
	n, err := strconv.ParseInt(c.Param("number"), 10, 64)
	if err != nil || n <= 0 {
		return nil, nil, fault.NotFound("build not found")
	}
	b, err := h.svc.Get(c.Request.Context(), a.Repo.ID, n)
	return a, b, err
}

func (h *Handler) cancel(c *gin.Context) error {
	a, b, err := h.buildOf(c)
	if err != nil {
		return err
	}
	if err := h.svc.Cancel(c.Request.Context(), b.ID, ReasonCancelled); err != nil {
		return err
	}
	out, err := h.Describe(c.Request.Context(), a.Repo.ID, b.Number)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusAccepted, out)
}

func (h *Handler) rerun(c *gin.Context) error {
	a, b, err := h.buildOf(c)
	if err != nil {
		return err
	}
	var nb *Build
	switch c.Query("failed") {
	case "", "false":
		nb, err = h.svc.Rerun(c.Request.Context(), a, auth.From(c).User, b)
	case "true":
		nb, err = h.svc.RerunFailed(c.Request.Context(), a, auth.From(c).User, b)
	default:
		return fault.Invalid("failed", "failed must be true or false")
	}
	if err != nil {
		return err
	}
	out, err := h.Describe(c.Request.Context(), a.Repo.ID, nb.Number)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, out)
}

// ScheduleJSON is a registered schedule.
type ScheduleJSON struct {
	ID          int64      `json:"id"`
	Branch      string     `json:"branch"`
	Event       string     `json:"event"`
	Cron        string     `json:"cron"`
	LastFiredAt *time.Time `json:"last_fired_at"`
	// NextRunAt is the next fire time in the billing time zone (Zone), which the cron
	// expression is read in; nil when it never fires again.
	NextRunAt *time.Time `json:"next_run_at"`
	Zone      string     `json:"zone"`
	// LastBuild is the number of the newest build of its branch and event, nil before the first.
	LastBuild *int64 `json:"last_build"`
	// RunAs is who its builds run as: the author of the push that registered it ("" when that
	// user is gone, and the builds run as nobody).
	RunAs string `json:"run_as"`
}

func (h *Handler) schedules(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]ScheduleJSON, error) {
		vs, err := h.svc.ScheduleViews(c.Request.Context(), a.Repo.ID, h.zone)
		if err != nil {
			return nil, err
		}
		out := make([]ScheduleJSON, 0, len(vs))
		for _, v := range vs {
			out = append(out, scheduleJSON(v, h.zone, h.zoneID))
		}
		return out, nil
	}, func(s ScheduleJSON) int64 { return s.ID })
}

func scheduleJSON(v ScheduleView, zone *time.Location, zoneID string) ScheduleJSON {
	s := v.Schedule
	j := ScheduleJSON{ID: s.ID, Branch: s.Branch, Event: s.Event, Cron: s.Cron, LastFiredAt: s.LastFiredAt,
		Zone: zoneID, LastBuild: v.LastBuild, RunAs: v.RunAs}
	if !v.Next.IsZero() {
		n := v.Next.In(zone)
		j.NextRunAt = &n
	}
	return j
}

// runSchedule is POST /repos/{org}/{repo}/schedules/{id}/run: a repo admin's "Run now". The
// build is the schedule's (its branch and event, its cron for the pipelines it selects), run
// as the admin who asked, as GitHub runs a workflow dispatched by hand; the schedule's own
// times do not move.
func (h *Handler) runSchedule(c *gin.Context) error {
	if auth.From(c).Kind == auth.KindJob {
		return fault.Forbidden("a pipeline's job token cannot run a schedule")
	}
	a, err := repo.Load(c, h.repos, repo.Admin)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return fault.NotFound("no such schedule")
	}
	b, err := h.svc.RunSchedule(c.Request.Context(), a, auth.From(c).User, id)
	if err != nil {
		return err
	}
	return h.created(c, b)
}

// describe turns builds into their JSON, each with the first page of its pipelines, with a
// constant number of queries whatever the count; deep adds stages, jobs and diagnostics.
func (h *Handler) describe(ctx context.Context, bs []Build, deep bool) ([]JSON, error) {
	t, err := h.svc.tree(ctx, bs)
	if err != nil {
		return nil, err
	}
	pjs, err := h.describePipelines(ctx, t.pipelines, deep)
	if err != nil {
		return nil, err
	}
	pipesOf := map[int64][]PipelineJSON{}
	for i, p := range t.pipelines {
		pipesOf[p.BuildID] = append(pipesOf[p.BuildID], pjs[i])
	}
	out := make([]JSON, 0, len(bs))
	for _, b := range bs {
		j := JSON{ID: b.ID, Number: b.Number, Event: b.Event, Branch: b.Branch, Tag: b.Tag, Commit: b.CommitSHA,
			CommitMessage: b.CommitMessage, Status: b.Status, CreatedAt: b.CreatedAt, StartedAt: b.StartedAt,
			FinishedAt: b.FinishedAt, Pipelines: pipesOf[b.ID], PipelineCount: t.count[b.ID],
			Waiting: !t.running[b.ID] && buildWaiting(pipesOf[b.ID])}
		if j.PipelineCount > int64(len(j.Pipelines)) {
			j.PipelinesNextCursor = api.Cursor(PipelinesPage)
		}
		if b.Tag != "" && j.Branch == "" {
			j.Branch = b.Tag // CNB_BRANCH is the tag name for tag events
		}
		if b.TriggeredBy != nil {
			j.TriggeredBy = t.usernames[*b.TriggeredBy]
		}
		if j.Pipelines == nil {
			j.Pipelines = []PipelineJSON{}
		}
		if b.ErrorMessage != "" {
			j.Error = &ErrorJSON{Message: b.ErrorMessage, File: b.ErrorFile, Line: b.ErrorLine, Column: b.ErrorColumn}
		}
		if deep {
			j.Diagnostics = parseDiagnostics(b.Diagnostics)
		}
		out = append(out, j)
	}
	return out, nil
}

// describePipelines turns pipelines into their JSON, in the same order, with what they cost
// and what the queued ones wait for; deep adds their stages, jobs, awaited time and host.
func (h *Handler) describePipelines(ctx context.Context, ps []Pipeline, deep bool) ([]PipelineJSON, error) {
	now := h.svc.clock.Now().UTC()
	usage := map[int64]Usage{}
	if h.meter != nil && len(ps) > 0 {
		until := make(map[int64]time.Time, len(ps))
		for _, p := range ps {
			until[p.ID] = now
			if p.FinishedAt != nil {
				until[p.ID] = *p.FinishedAt // ended, settlement pending: it ran until then
			}
		}
		var err error
		if usage, err = h.meter.PipelineUsage(ctx, until); err != nil {
			return nil, err
		}
	}
	stagesOf := map[int64][]StageJSON{}
	var awaited map[int64]time.Duration
	if deep {
		stages, jobs, err := h.svc.stagesAndJobs(ctx, ps)
		if err != nil {
			return nil, err
		}
		jobsOf := map[int64][]JobJSON{}
		for _, j := range jobs {
			jobsOf[j.StageID] = append(jobsOf[j.StageID], JobJSON{ID: j.ID, Name: j.Name, Status: j.Status, ExitCode: j.ExitCode, Type: j.Type,
				Image: j.Image, ImageDigest: j.ImageDigest})
		}
		awaited = awaitedTime(jobs, now)
		for _, st := range stages {
			js := jobsOf[st.ID]
			if js == nil {
				js = []JobJSON{}
			}
			stagesOf[st.PipelineID] = append(stagesOf[st.PipelineID], StageJSON{Name: st.Name, Kind: st.Kind, Status: st.Status, Parallel: st.Parallel, Jobs: js})
		}
	}
	var blockers map[int64][]Blocker
	if h.why != nil {
		var queued []Pipeline
		for _, p := range ps {
			if p.Status == StatusQueued && (p.Reason == "" || strings.HasPrefix(p.Reason, ReasonLockWaitPrefix) || strings.HasPrefix(p.Reason, ReasonFundsWaitPrefix)) {
				queued = append(queued, p)
			}
		}
		if len(queued) > 0 {
			blockers = h.why.Explain(ctx, queued)
			for i := range ps {
				if bs, ok := blockers[ps[i].ID]; ok {
					ps[i].Reason = ReasonOf(bs)
				}
			}
		}
	}
	out := make([]PipelineJSON, 0, len(ps))
	for _, p := range ps {
		pj := PipelineJSON{ID: p.ID, Key: p.Key, Name: p.Name, Status: p.Status, Reason: p.Reason, RunnerTag: p.RunnerTag,
			CPUs: p.CPUs, StartedAt: p.StartedAt, FinishedAt: p.FinishedAt, Cost: NoCost,
			WrittenOff: NoCost, Workspace: p.Workspace, ReadyAt: p.ReadyAt, Blockers: []Blocker{}}
		if bs, ok := blockers[p.ID]; ok {
			pj.Blockers, pj.Waiting = bs, Waiting(bs)
		}
		if p.Status == StatusRunning && p.WaitReason != "" {
			pj.Blockers, pj.Waiting = []Blocker{{Code: BlockerCapacity, Message: p.WaitReason}}, true
		}
		if p.Workspace {
			st := WorkspaceState(p)
			pj.WorkspaceState = &st
		}
		if u, ok := usage[p.ID]; ok {
			pj.CoreSeconds, pj.Cost, pj.WrittenOff = u.CoreSeconds, u.Cost, u.WrittenOff
			if p.FinishedAt != nil {
				ms := u.Uncovered.Milliseconds()
				pj.UncoveredMs = &ms
			}
		}
		if deep {
			pj.Stages = stagesOf[p.ID]
			if pj.Stages == nil {
				pj.Stages = []StageJSON{}
			}
			ms := awaited[p.ID].Milliseconds()
			pj.AwaitedMs = &ms
			if p.Host != "" && json.Valid([]byte(p.Host)) {
				pj.Host = json.RawMessage(p.Host)
			}
		}
		out = append(out, pj)
	}
	return out, nil
}

// Describe returns build number n of the repo as the API shows it, stages and jobs included.
func (h *Handler) Describe(ctx context.Context, repoID, n int64) (JSON, error) {
	b, err := h.svc.Get(ctx, repoID, n)
	if err != nil {
		return JSON{}, err
	}
	out, err := h.describe(ctx, []Build{*b}, true)
	if err != nil {
		return JSON{}, err
	}
	return out[0], nil
}

// metrics is GET /repos/{org}/{repo}/metrics?branch=&name=: the metric names reported on the
// branch (the repo's default branch when none is given) and, with name, its series.
func (h *Handler) metrics(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	branch, name := c.Query("branch"), c.Query("name")
	if branch == "" {
		branch = a.Repo.DefaultBranch
	}
	if len(branch) > 255 {
		return fault.Invalid("branch", "a branch name is at most 255 characters")
	}
	if name != "" && !protocol.ValidMetricName(name) {
		return fault.Invalid("name", "a metric name is 1 to %d letters, digits and _.-/", protocol.MaxMetricName)
	}
	ctx := c.Request.Context()
	out := SeriesJSON{Branch: branch, Name: name, Points: []Point{}}
	if out.Names, err = h.svc.MetricNames(ctx, a.Repo.ID, branch); err != nil {
		return err
	}
	if name != "" {
		if out.Points, err = h.svc.Series(ctx, a.Repo.ID, branch, name); err != nil {
			return err
		}
	}
	return api.JSON(c, http.StatusOK, out)
}

// setStatus is POST …/statuses/{sha} {state, context, target_url, description}: the commit's
// status of that context (201), set by a person with write access (token scope repo:status,
// which repo:write implies) or by a pipeline's job token of the repo (CNB's repo-commit-status
// scope, which even a pull request's proposed code holds).
func (h *Handler) setStatus(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	p := auth.From(c)
	if !p.Authenticated() {
		return fault.Unauthenticated("sign in or send a token to set a commit status of %s/%s", a.Org.Name, a.Repo.Name)
	}
	if err := p.Need(auth.ScopeRepoStatus); err != nil {
		return err
	}
	if own := p.Kind == auth.KindJob && p.RepoID == a.Repo.ID; !own && a.Level < repo.Write {
		return fault.Forbidden("setting a commit status needs write access to %s/%s (you have %s)", a.Org.Name, a.Repo.Name, a.Level)
	}
	var req struct {
		State       string `json:"state"`
		Context     string `json:"context"`
		TargetURL   string `json:"target_url"`
		Description string `json:"description"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	var pipeline int64
	if p.Kind == auth.KindJob {
		pipeline = p.PipelineID
	}
	st, err := h.svc.SetStatus(c.Request.Context(), a.Repo, c.Param("sha"), p.UserID(), pipeline,
		StatusInput{Context: req.Context, State: req.State, TargetURL: req.TargetURL, Description: req.Description})
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, st)
}

// commitChecks is GET …/commits/{sha}/checks: the commit's check state, its statuses and the
// pipelines that ran on it.
func (h *Handler) commitChecks(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	sha := c.Param("sha")
	if !shaRE.MatchString(sha) {
		return fault.NotFound("commit %q not found: name it by its full SHA", sha)
	}
	out, err := h.svc.ChecksOf(c.Request.Context(), a.Repo.ID, sha)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, out)
}
