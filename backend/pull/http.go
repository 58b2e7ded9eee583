package pull

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/code"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// JSON is a request as the API shows it.
type JSON struct {
	Number       int64      `json:"number"`
	Title        string     `json:"title"`
	Body         string     `json:"body"`
	State        string     `json:"state"`
	SourceBranch string     `json:"source_branch"`
	TargetBranch string     `json:"target_branch"`
	Author       string     `json:"author"`
	HeadSHA      string     `json:"head_sha"`
	BaseSHA      string     `json:"base_sha"`
	MergeBase    string     `json:"merge_base"`
	MergeSHA     string     `json:"merge_sha"`
	Mergeable    bool       `json:"mergeable"`
	Conflicts    []string   `json:"conflicts"`
	MergedBy     *string    `json:"merged_by"`
	MergedAt     *time.Time `json:"merged_at"`
	MergeCommit  string     `json:"merge_commit"`
	MergeMode    string     `json:"merge_mode"`
	ClosedAt     *time.Time `json:"closed_at"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	URL          string     `json:"url"`
	// ApprovedBy are the reviewers whose last word approves the current head; ChangesRequestedBy
	// those whose last word asks for changes.
	ApprovedBy         []string `json:"approved_by"`
	ChangesRequestedBy []string `json:"changes_requested_by"`
	// RequestedReviewers are the people asked to review it, in the order they were asked.
	RequestedReviewers []string `json:"requested_reviewers"`
	// Checks is the check state of an open request's head in one word (ChecksState): "",
	// pending, failure or success; "" for a closed or merged one.
	Checks string `json:"checks"`
	// Gate is where an open request stands against its merge gate (gate.go); shown by the
	// single-request read, not in lists.
	Gate *GateJSON `json:"gate,omitempty"`
	// SourceRepo is the fork the source branch is in (org/name); "" for the repository's own.
	SourceRepo string `json:"source_repo"`
	// SourceDeleted: the request came from a fork that has since been deleted. It still reads,
	// merges and closes (the target keeps its commits) but never follows a push again.
	SourceDeleted bool `json:"source_deleted"`
	// RunHeld: the request's proposed code waits for a maintainer's "Approve and run"
	// (POST …/approve-run) before any pipeline runs (Service.RunHeld).
	RunHeld bool `json:"run_held"`
	// RunApprovedBy approved the current head to run; nil when nobody has.
	RunApprovedBy *string `json:"run_approved_by"`
}

// GateJSON is the merge gate of a request as the API shows it: passed when unmet is empty.
type GateJSON struct {
	Passed bool `json:"passed"`
	// Rule is the target branch's rule pattern; "" when the target is not protected.
	Rule   string  `json:"rule"`
	Unmet  []Unmet `json:"unmet"`
	Checks []Check `json:"checks"`
}

// CommentJSON is a comment as the API shows it.
type CommentJSON struct {
	ID     int64  `json:"id"`
	Author string `json:"author"`
	// Pipeline is set when a pipeline posted it: its build's number and its name.
	Pipeline  *CommentPipeline `json:"pipeline"`
	Body      string           `json:"body"`
	Path      string           `json:"path"`
	Line      int              `json:"line"`
	Commit    string           `json:"commit"`
	Outdated  bool             `json:"outdated"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// CommentPipeline names the pipeline that posted a comment.
type CommentPipeline struct {
	ID int64 `json:"id"`
}

// ReviewJSON is a review as the API shows it.
type ReviewJSON struct {
	ID        int64     `json:"id"`
	Reviewer  string    `json:"reviewer"`
	State     string    `json:"state"`
	Body      string    `json:"body"`
	Commit    string    `json:"commit"`
	Stale     bool      `json:"stale"` // given on an older head of the source
	CreatedAt time.Time `json:"created_at"`
}

// Users names people (auth.Service).
type Users interface {
	UserByID(ctx context.Context, id int64) (*auth.User, error)
	UserByName(ctx context.Context, username string) (*auth.User, error)
}

// JobPulls names the request a job token's pipeline runs for: the event of its build and the
// request's number (ok false for a build of no request). build.Service answers it (app.New).
type JobPulls interface {
	JobPull(ctx context.Context, pipelineID int64) (event string, number int64, ok bool, err error)
}

// Members lists a team's members (org.Service): whom git:reviewer may pick.
type Members interface {
	Members(ctx context.Context, orgID int64) ([]org.MemberInfo, error)
}

// HandlerConfig is what the routes need.
type HandlerConfig struct {
	Service *Service
	Repos   *repo.Service
	// Users names authors, mergers and reviewers; Members lists a team; Jobs says which request
	// a job token may merge (git:auto-merge).
	Users   Users
	Members Members
	Jobs    JobPulls
	// Metrics compares a request's metrics with its target's (build.Service.PullMetrics, wired
	// in app); its answer is the route's JSON as it is.
	Metrics   func(ctx context.Context, repoID, number int64, target string) (any, error)
	PublicURL string
	Log       *slog.Logger
}

// Handler is the pull request routes.
type Handler struct {
	svc       *Service
	repos     *repo.Service
	users     Users
	members   Members
	jobs      JobPulls
	metrics   func(ctx context.Context, repoID, number int64, target string) (any, error)
	publicURL string
	log       *slog.Logger
}

// NewHandler returns the routes.
func NewHandler(cfg HandlerConfig) *Handler {
	return &Handler{svc: cfg.Service, repos: cfg.Repos, users: cfg.Users, members: cfg.Members, jobs: cfg.Jobs,
		metrics: cfg.Metrics, publicURL: cfg.PublicURL, log: cfg.Log}
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.log)
	rs.GET("/repos/:org/:repo/pulls", h.list)
	rs.POST("/repos/:org/:repo/pulls", h.open)
	rs.GET("/repos/:org/:repo/pulls/:number", h.get)
	rs.PATCH("/repos/:org/:repo/pulls/:number", h.update)
	rs.POST("/repos/:org/:repo/pulls/:number/merge", h.merge)
	rs.POST("/repos/:org/:repo/pulls/:number/approve-run", h.approveRun)
	rs.GET("/repos/:org/:repo/pulls/:number/files", h.files)
	rs.GET("/repos/:org/:repo/pulls/:number/commits", h.commits)
	rs.GET("/repos/:org/:repo/pulls/:number/metrics", h.metricDeltas)
	rs.GET("/repos/:org/:repo/pulls/:number/reviews", h.reviews)
	rs.POST("/repos/:org/:repo/pulls/:number/reviews", h.review)
	rs.POST("/repos/:org/:repo/pulls/:number/reviewers", h.setReviewers)
	rs.GET("/repos/:org/:repo/pulls/:number/comments", h.comments)
	rs.POST("/repos/:org/:repo/pulls/:number/comments", h.comment)
	rs.GET("/repos/:org/:repo/branch-rules", h.rules)
	rs.PUT("/repos/:org/:repo/branch-rules", h.setRule)
	rs.DELETE("/repos/:org/:repo/branch-rules/:id", h.deleteRule)
	rs.GET("/repos/:org/:repo/pull-settings", h.settings)
	rs.PUT("/repos/:org/:repo/pull-settings", h.setSettings)
}

// URL is a request's page.
func URL(publicURL, org, repoName string, number int64) string {
	return publicURL + "/" + org + "/" + repoName + "/-/pulls/" + strconv.FormatInt(number, 10)
}

func (h *Handler) json(ctx context.Context, a *repo.Access, pr *Request) JSON {
	out := JSON{Number: pr.Number, Title: pr.Title, Body: pr.Body, State: pr.State, SourceBranch: pr.SourceBranch,
		TargetBranch: pr.TargetBranch, HeadSHA: pr.HeadSHA, BaseSHA: pr.BaseSHA, MergeBase: pr.MergeBase, MergeSHA: pr.MergeSHA,
		Mergeable: pr.State == StateOpen && pr.MergeSHA != "", Conflicts: pr.ConflictPaths(), MergedAt: pr.MergedAt,
		MergeCommit: pr.MergeCommit, MergeMode: pr.MergeMode, ClosedAt: pr.ClosedAt, CreatedAt: pr.CreatedAt, UpdatedAt: pr.UpdatedAt,
		URL: URL(h.publicURL, a.Org.Name, a.Repo.Name, pr.Number)}
	if out.Conflicts == nil {
		out.Conflicts = []string{}
	}
	if u, err := h.users.UserByID(ctx, pr.AuthorID); err == nil {
		out.Author = u.Username
	}
	if pr.MergedBy != nil {
		if u, err := h.users.UserByID(ctx, *pr.MergedBy); err == nil {
			out.MergedBy = &u.Username
		}
	}
	out.SourceDeleted = pr.SourceRepoID == 0
	if pr.SourceRepoID != pr.RepoID {
		if !out.SourceDeleted {
			if from, o, err := h.repos.ByID(ctx, pr.SourceRepoID); err == nil {
				out.SourceRepo = o.Name + "/" + from.Name
			}
		}
		if pr.State == StateOpen {
			out.RunHeld, _ = h.svc.RunHeld(ctx, a.Repo, pr)
		}
		if pr.RunApprovedBy != nil && pr.RunApprovedSHA == pr.HeadSHA {
			if u, err := h.users.UserByID(ctx, *pr.RunApprovedBy); err == nil {
				out.RunApprovedBy = &u.Username
			}
		}
	}
	out.ApprovedBy, out.ChangesRequestedBy, out.RequestedReviewers = []string{}, []string{}, []string{}
	if ids, err := h.svc.Reviewers(ctx, pr); err == nil {
		out.RequestedReviewers = h.names(ctx, ids)
	}
	if reviews, err := h.svc.Reviews(ctx, pr); err == nil {
		sum := Summarize(pr, reviews)
		out.ApprovedBy, out.ChangesRequestedBy = h.names(ctx, sum.Approvals), h.names(ctx, sum.ChangesRequested)
	}
	return out
}

// names are the usernames of ids (never nil).
func (h *Handler) names(ctx context.Context, ids []int64) []string {
	out := []string{}
	for _, id := range ids {
		if u, err := h.users.UserByID(ctx, id); err == nil {
			out = append(out, u.Username)
		}
	}
	return out
}

// person is the caller as a Person: pull requests are opened, changed and merged by people
// (a session or a personal token), never by a deploy token.
func person(c *gin.Context) (Person, error) {
	p := auth.From(c)
	if p.User == nil {
		return Person{}, fault.Forbidden("pull requests are changed by people: use a session or a personal access token")
	}
	return Person{ID: p.User.ID, Name: p.User.Username, Email: p.User.Email}, nil
}

// load authorizes the route's repository at need and reads its request.
func (h *Handler) load(c *gin.Context, need repo.Level) (*repo.Access, *Request, error) {
	a, err := repo.Load(c, h.repos, need)
	if err != nil {
		return nil, nil, err
	}
	n, err := strconv.ParseInt(c.Param("number"), 10, 64)
	if err != nil || n <= 0 {
		return nil, nil, fault.NotFound("pull request not found")
	}
	pr, err := h.svc.Get(c.Request.Context(), a.Repo, n)
	return a, pr, err
}

// writer authorizes a change by a person to the route's repository and, with number, reads
// its request.
func (h *Handler) writer(c *gin.Context, number bool) (*repo.Access, *Request, Person, error) {
	var a *repo.Access
	var pr *Request
	var err error
	if number {
		a, pr, err = h.load(c, repo.Write)
	} else {
		a, err = repo.Load(c, h.repos, repo.Write)
	}
	if err != nil {
		return nil, nil, Person{}, err
	}
	who, err := person(c)
	return a, pr, who, err
}

// list is GET /repos/{org}/{repo}/pulls?state=&author=, newest first.
func (h *Handler) list(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	f := Filter{State: c.DefaultQuery("state", StateOpen)}
	if name := c.Query("author"); name != "" {
		u, err := h.users.UserByName(c.Request.Context(), name)
		if fault.KindOf(err) == fault.KindNotFound {
			return fault.Invalid("author", "no user %q", name)
		}
		if err != nil {
			return err
		}
		f.AuthorID = u.ID
	}
	if name := c.Query("reviewer"); name != "" {
		u, err := h.users.UserByName(c.Request.Context(), name)
		if fault.KindOf(err) == fault.KindNotFound {
			return fault.Invalid("reviewer", "no user %q", name)
		}
		if err != nil {
			return err
		}
		f.ReviewerID = u.ID
	}
	return api.ListPage(c, func(page api.Page) ([]JSON, error) {
		prs, err := h.svc.List(c.Request.Context(), a.Repo, f, page)
		if err != nil {
			return nil, err
		}
		out := make([]JSON, len(prs))
		for i := range prs {
			out[i] = h.json(c.Request.Context(), a, &prs[i])
			if prs[i].State == StateOpen {
				if out[i].Checks, err = h.svc.ChecksState(c.Request.Context(), a.Repo, &prs[i]); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}, func(j JSON) int64 { return j.Number })
}

func (h *Handler) get(c *gin.Context) error {
	a, pr, err := h.load(c, repo.Read)
	if err != nil {
		return err
	}
	out := h.json(c.Request.Context(), a, pr)
	if pr.State == StateOpen {
		if out.Checks, err = h.svc.ChecksState(c.Request.Context(), a.Repo, pr); err != nil {
			return err
		}
		g, err := h.svc.Gate(c.Request.Context(), a.Repo, pr, "")
		if err != nil {
			return err
		}
		gj := &GateJSON{Passed: g.Passed(), Unmet: g.Unmet, Checks: g.Checks}
		if g.Rule != nil {
			gj.Rule = g.Rule.Pattern
		}
		if gj.Unmet == nil {
			gj.Unmet = []Unmet{}
		}
		if gj.Checks == nil {
			gj.Checks = []Check{}
		}
		out.Gate = gj
	}
	return api.JSON(c, http.StatusOK, out)
}

// open is POST /repos/{org}/{repo}/pulls: 201 with the new request.
func (h *Handler) open(c *gin.Context) error {
	var req struct {
		SourceRepo   string `json:"source_repo"`
		SourceBranch string `json:"source_branch"`
		TargetBranch string `json:"target_branch"`
		Title        string `json:"title"`
		Body         string `json:"body"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	var a *repo.Access
	var who Person
	var from *repo.Repo
	var err error
	if req.SourceRepo == "" {
		if a, _, who, err = h.writer(c, false); err != nil {
			return err
		}
	} else {
		// From a fork: reading the target is enough, as on GitHub, and reading the fork.
		if a, err = repo.Load(c, h.repos, repo.Read); err != nil {
			return err
		}
		p := auth.From(c)
		if err := p.Need(auth.ScopeRepoWrite); err != nil {
			return err
		}
		if who, err = person(c); err != nil {
			return err
		}
		forkOrg, forkName, ok := strings.Cut(req.SourceRepo, "/")
		if !ok {
			return fault.Invalid("source_repo", "name the fork as org/name, not %q", req.SourceRepo)
		}
		fa, err := h.repos.Resolve(c.Request.Context(), p, forkOrg, forkName, repo.Read)
		if fault.KindOf(err) == fault.KindNotFound {
			return fault.Invalid("source_repo", "no repository %s", req.SourceRepo)
		}
		if err != nil {
			return err
		}
		from = fa.Repo
	}
	if req.TargetBranch == "" {
		req.TargetBranch = a.Repo.DefaultBranch
	}
	pr, err := h.svc.Open(c.Request.Context(), a.Repo, who, OpenInput{Source: req.SourceBranch, Target: req.TargetBranch, Title: req.Title, Body: req.Body, From: from})
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, h.json(c.Request.Context(), a, pr))
}

// update is PATCH /repos/{org}/{repo}/pulls/{number}: title, body, and state (open or closed).
func (h *Handler) update(c *gin.Context) error {
	a, pr, who, err := h.writer(c, true)
	if err != nil {
		return err
	}
	var req struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if req.State != nil && *req.State != StateOpen && *req.State != StateClosed {
		return fault.Invalid("state", "state is open or closed (merge with POST …/merge), not %q", *req.State)
	}
	ctx := c.Request.Context()
	if req.Title != nil || req.Body != nil {
		if pr, _, err = h.svc.Edit(ctx, a.Repo, pr.Number, who, req.Title, req.Body); err != nil {
			return err
		}
	}
	if req.State != nil && *req.State != pr.State {
		if *req.State == StateClosed {
			pr, err = h.svc.Close(ctx, a.Repo, pr.Number)
		} else {
			pr, err = h.svc.Reopen(ctx, a.Repo, pr.Number, who)
		}
		if err != nil {
			return err
		}
	}
	return api.JSON(c, http.StatusOK, h.json(ctx, a, pr))
}

// approveRun is POST /repos/{org}/{repo}/pulls/{number}/approve-run: a maintainer (write
// access, a person) lets a held request's current head run (Service.ApproveRun); 200 with the
// request, 409 when it is not held.
func (h *Handler) approveRun(c *gin.Context) error {
	a, pr, who, err := h.writer(c, true)
	if err != nil {
		return err
	}
	if auth.From(c).Kind == auth.KindJob {
		return fault.Forbidden("a pipeline's job token cannot approve code to run: that is a maintainer's call")
	}
	if pr, err = h.svc.ApproveRun(c.Request.Context(), a.Repo, pr.Number, who); err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, h.json(c.Request.Context(), a, pr))
}

// merge is POST /repos/{org}/{repo}/pulls/{number}/merge: 200 with the merged request.
func (h *Handler) merge(c *gin.Context) error {
	a, pr, who, err := h.writer(c, true)
	if err != nil {
		return err
	}
	if p := auth.From(c); p.Kind == auth.KindJob {
		// git:auto-merge: a pipeline merges only the request whose pull_request.mergeable build
		// it belongs to, and only as far as the gate allows (Merge checks it again).
		event, number, ok, err := h.jobs.JobPull(c.Request.Context(), p.PipelineID)
		if err != nil {
			return err
		}
		if !ok || event != EventMergeable || number != pr.Number {
			return fault.Forbidden("a pipeline's job token merges only the request of its own pull_request.mergeable build (git:auto-merge)")
		}
	}
	var req struct {
		Mode               string `json:"mode"`
		Message            string `json:"message"`
		DeleteSourceBranch bool   `json:"delete_source_branch"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	m, err := h.svc.Merge(c.Request.Context(), a.Repo, pr.Number, who, MergeInput{Mode: req.Mode, Message: req.Message, DeleteSource: req.DeleteSourceBranch})
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, h.json(c.Request.Context(), a, m.Request))
}

// reviews is GET /repos/{org}/{repo}/pulls/{number}/reviews, oldest first.
func (h *Handler) reviews(c *gin.Context) error {
	_, pr, err := h.load(c, repo.Read)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]ReviewJSON, error) {
		rs, err := h.svc.Reviews(c.Request.Context(), pr)
		if err != nil {
			return nil, err
		}
		out := make([]ReviewJSON, len(rs))
		for i, rv := range rs {
			out[i] = h.reviewJSON(c.Request.Context(), pr, &rv)
		}
		return out, nil
	}, func(r ReviewJSON) int64 { return r.ID })
}

func (h *Handler) reviewJSON(ctx context.Context, pr *Request, rv *Review) ReviewJSON {
	out := ReviewJSON{ID: rv.ID, State: rv.State, Body: rv.Body, Commit: rv.CommitSHA, Stale: rv.CommitSHA != pr.HeadSHA, CreatedAt: rv.CreatedAt}
	if u, err := h.users.UserByID(ctx, rv.ReviewerID); err == nil {
		out.Reviewer = u.Username
	}
	return out
}

// review is POST /repos/{org}/{repo}/pulls/{number}/reviews {state, body}: 201 with the review.
// Reviewing takes write access, as approving does on GitLab: a reviewer's word is a gate.
func (h *Handler) review(c *gin.Context) error {
	a, pr, who, err := h.writer(c, true)
	if err != nil {
		return err
	}
	if auth.From(c).Kind == auth.KindJob {
		// A pipeline must not approve the change it checks.
		return fault.Forbidden("a pipeline's job token cannot review: reviews are people's")
	}
	var req struct {
		State string `json:"state"`
		Body  string `json:"body"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	rv, err := h.svc.Review(c.Request.Context(), a.Repo, pr.Number, who, req.State, req.Body)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, h.reviewJSON(c.Request.Context(), pr, rv))
}

// RuleJSON is a branch rule as the API shows it.
type RuleJSON struct {
	ID int64 `json:"id"`
	RuleInput
	UpdatedAt time.Time `json:"updated_at"`
}

func ruleJSON(r *Rule) RuleJSON {
	out := RuleJSON{ID: r.ID, UpdatedAt: r.UpdatedAt, RuleInput: RuleInput{Pattern: r.Pattern, PushRoles: r.Roles(), AllowForcePush: r.AllowForcePush,
		AllowDeletion: r.AllowDeletion, RequiredApprovals: r.RequiredApprovals, RequiredChecks: r.Checks(), DismissStale: r.DismissStale}}
	if out.PushRoles == nil {
		out.PushRoles = []org.Role{}
	}
	if out.RequiredChecks == nil {
		out.RequiredChecks = []string{}
	}
	return out
}

// rules is GET /repos/{org}/{repo}/branch-rules: anyone who reads the repo sees its rules, as
// on GitHub, so a pusher can tell why a push was refused.
func (h *Handler) rules(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]RuleJSON, error) {
		rs, err := h.svc.Rules(c.Request.Context(), a.Repo)
		out := make([]RuleJSON, len(rs))
		for i := range rs {
			out[i] = ruleJSON(&rs[i])
		}
		return out, err
	}, func(r RuleJSON) int64 { return r.ID })
}

// setRule is PUT /repos/{org}/{repo}/branch-rules: the rule of a pattern, created or replaced.
// The repo's admins set rules.
func (h *Handler) setRule(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Admin)
	if err != nil {
		return err
	}
	var req RuleInput
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	r, err := h.svc.SetRule(c.Request.Context(), a.Repo, req)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, ruleJSON(r))
}

// deleteRule is DELETE /repos/{org}/{repo}/branch-rules/{id}.
func (h *Handler) deleteRule(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Admin)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return fault.NotFound("branch rule not found")
	}
	return api.Done(c, h.svc.DeleteRule(c.Request.Context(), a.Repo, id))
}

// settings is GET /repos/{org}/{repo}/pull-settings: the merge modes the repository allows.
func (h *Handler) settings(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return err
	}
	st, err := h.svc.Settings(c.Request.Context(), a.Repo)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, st)
}

// setSettings is PUT /repos/{org}/{repo}/pull-settings, by the repo's admins. A field left out
// keeps its value; at least one mode stays allowed.
func (h *Handler) setSettings(c *gin.Context) error {
	a, err := repo.Load(c, h.repos, repo.Admin)
	if err != nil {
		return err
	}
	var req struct {
		AllowMerge  *bool `json:"allow_merge"`
		AllowSquash *bool `json:"allow_squash"`
		AllowRebase *bool `json:"allow_rebase"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	st, err := h.svc.Settings(c.Request.Context(), a.Repo)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		in  *bool
		out *bool
	}{{req.AllowMerge, &st.AllowMerge}, {req.AllowSquash, &st.AllowSquash}, {req.AllowRebase, &st.AllowRebase}} {
		if f.in != nil {
			*f.out = *f.in
		}
	}
	st, err = h.svc.SetSettings(c.Request.Context(), a.Repo, *st)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, st)
}

// comments is GET /repos/{org}/{repo}/pulls/{number}/comments, oldest first.
func (h *Handler) comments(c *gin.Context) error {
	_, pr, err := h.load(c, repo.Read)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]CommentJSON, error) {
		cs, err := h.svc.Comments(c.Request.Context(), pr)
		if err != nil {
			return nil, err
		}
		out := make([]CommentJSON, len(cs))
		for i := range cs {
			out[i] = h.commentJSON(c.Request.Context(), &cs[i])
		}
		return out, nil
	}, func(j CommentJSON) int64 { return j.ID })
}

func (h *Handler) commentJSON(ctx context.Context, cm *Comment) CommentJSON {
	out := CommentJSON{ID: cm.ID, Body: cm.Body, Path: cm.Path, Line: cm.Line, Commit: cm.CommitSHA, Outdated: cm.Outdated,
		CreatedAt: cm.CreatedAt, UpdatedAt: cm.UpdatedAt}
	if u, err := h.users.UserByID(ctx, cm.AuthorID); err == nil {
		out.Author = u.Username
	}
	if cm.PipelineID != nil {
		out.Pipeline = &CommentPipeline{ID: *cm.PipelineID}
	}
	return out
}

// comment is POST /repos/{org}/{repo}/pulls/{number}/comments {"body", "path", "line"}: 201.
// Anyone signed in who reads the repo may comment, as on GitHub; a token needs repo:notes (which
// repo:write implies). A pipeline's job token comments as its build's user, marked as the
// pipeline's, even from a request's proposed code (CNB's repo-notes:rw).
func (h *Handler) comment(c *gin.Context) error {
	a, pr, err := h.load(c, repo.Read)
	if err != nil {
		return err
	}
	p := auth.From(c)
	if err := p.Need(auth.ScopeRepoNotes); err != nil {
		return err
	}
	who, err := person(c)
	if err != nil {
		return err
	}
	var req struct {
		Body string `json:"body"`
		Path string `json:"path"`
		Line int    `json:"line"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	var pipeline int64
	if p.Kind == auth.KindJob {
		pipeline = p.PipelineID
	}
	cm, err := h.svc.Comment(c.Request.Context(), a.Repo, pr.Number, who, CommentInput{Body: req.Body, Path: req.Path, Line: req.Line}, pipeline)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, h.commentJSON(c.Request.Context(), cm))
}

// reviewersCaller authorizes a change to a request's reviewers: a person with write access, or
// a job token of a pipeline of that very request (git:reviewer). The latter holds even for the
// read-only token of a request's proposed code, as CNB runs git:reviewer in pull_request
// pipelines: asking people to review is the request's own business, and changes no code.
func (h *Handler) reviewersCaller(c *gin.Context) (*repo.Access, *Request, Person, error) {
	p := auth.From(c)
	if p.Kind != auth.KindJob {
		return h.writer(c, true)
	}
	a, pr, err := h.load(c, repo.Read)
	if err != nil {
		return nil, nil, Person{}, err
	}
	_, number, ok, err := h.jobs.JobPull(c.Request.Context(), p.PipelineID)
	if err != nil {
		return nil, nil, Person{}, err
	}
	if !ok || number != pr.Number {
		if p.Has(auth.ScopeRepoWrite) {
			return h.writer(c, true)
		}
		return nil, nil, Person{}, fault.Forbidden("a pipeline's job token asks reviewers only for its own pull request")
	}
	who, err := person(c)
	return a, pr, who, err
}

// MaxPick bounds how many reviewers one call may pick at random.
const MaxPick = 10

// setReviewers is POST /repos/{org}/{repo}/pulls/{number}/reviewers {"add": [usernames],
// "remove": [usernames], "pick": n}: asks people to review, or stops asking them, and answers
// the request. pick asks n more at random among the team's members who may write to the repo
// (not the author, not those asked already), as git:reviewer's member types do; fewer when the
// team has fewer. Write access as a person, or the repo's job token (git:reviewer).
func (h *Handler) setReviewers(c *gin.Context) error {
	a, pr, who, err := h.reviewersCaller(c)
	if err != nil {
		return err
	}
	var req struct {
		Add    []string `json:"add"`
		Remove []string `json:"remove"`
		Pick   int      `json:"pick"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	ctx := c.Request.Context()
	if req.Pick < 0 || req.Pick > MaxPick {
		return fault.Invalid("pick", "pick is 0 to %d reviewers", MaxPick)
	}
	ids := func(field string, names []string, mayReview bool) ([]int64, error) {
		var out []int64
		for _, name := range names {
			u, err := h.users.UserByName(ctx, name)
			if fault.KindOf(err) == fault.KindNotFound {
				return nil, fault.Invalid(field, "no user %q", name)
			}
			if err != nil {
				return nil, err
			}
			if mayReview {
				level, err := h.repos.LevelOf(ctx, a.Org, a.Repo, u.ID)
				if err != nil {
					return nil, err
				}
				if level < repo.Write {
					return nil, fault.Invalid(field, "%s cannot review %s/%s: reviewers need write access to approve", name, a.Org.Name, a.Repo.Name)
				}
			}
			out = append(out, u.ID)
		}
		return out, nil
	}
	add, err := ids("add", req.Add, true)
	if err != nil {
		return err
	}
	remove, err := ids("remove", req.Remove, false)
	if err != nil {
		return err
	}
	if req.Pick > 0 {
		have, err := h.svc.Reviewers(ctx, pr)
		if err != nil {
			return err
		}
		ms, err := h.members.Members(ctx, a.Org.ID)
		if err != nil {
			return err
		}
		var pool []int64
		for _, m := range ms {
			if m.Role.CanWrite() && m.UserID != pr.AuthorID && !slices.Contains(have, m.UserID) && !slices.Contains(add, m.UserID) {
				pool = append(pool, m.UserID)
			}
		}
		rand.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		add = append(add, pool[:min(req.Pick, len(pool))]...)
	}
	if _, err := h.svc.SetReviewers(ctx, a.Repo, pr.Number, who, add, remove); err != nil {
		return err
	}
	if pr, err = h.svc.Get(ctx, a.Repo, pr.Number); err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, h.json(ctx, a, pr))
}

// MaxCommits is how many of a request's commits its commits route lists.
const MaxCommits = 250

// files is GET /repos/{org}/{repo}/pulls/{number}/files: the files the request changes, against
// the merge base (what GitHub's "Files changed" shows), with their patches.
func (h *Handler) files(c *gin.Context) error {
	a, pr, err := h.load(c, repo.Read)
	if err != nil {
		return err
	}
	diff, err := git.Diff(c.Request.Context(), h.repos.Path(a.Repo), pr.MergeBase, pr.HeadSHA, code.MaxDiffBytes)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, api.List[code.FileJSON]{Items: code.FilesJSON(diff)})
}

// commits is GET /repos/{org}/{repo}/pulls/{number}/commits: the request's commits (those of its
// source head that the merge base lacks), newest first, at most MaxCommits.
func (h *Handler) commits(c *gin.Context) error {
	a, pr, err := h.load(c, repo.Read)
	if err != nil {
		return err
	}
	infos, err := git.RangeLog(c.Request.Context(), h.repos.Path(a.Repo), pr.MergeBase, pr.HeadSHA, MaxCommits)
	if err != nil {
		return err
	}
	out := api.List[code.CommitJSON]{Items: make([]code.CommitJSON, 0, len(infos))}
	for _, info := range infos {
		out.Items = append(out.Items, code.CommitOf(info))
	}
	return api.JSON(c, http.StatusOK, out)
}

// metricDeltas is GET /repos/{org}/{repo}/pulls/{number}/metrics: each metric the request's
// proposed code reported, against the target's latest successful build (build.PullMetrics).
func (h *Handler) metricDeltas(c *gin.Context) error {
	a, pr, err := h.load(c, repo.Read)
	if err != nil {
		return err
	}
	if h.metrics == nil {
		return fault.Unavailable("metrics are not wired")
	}
	out, err := h.metrics(c.Request.Context(), a.Repo.ID, pr.Number, pr.TargetBranch)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, gin.H{"items": out})
}
