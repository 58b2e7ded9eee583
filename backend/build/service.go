package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// ConfigFile is the pipeline file at the repository root.
const ConfigFile = ".cnb.yml"

// MaxChangedFiles is how many changed paths ifModify considers (CNB's limit).
const MaxChangedFiles = 300

// Service creates builds and makes every change of their status.
type Service struct {
	db        *gorm.DB
	repos     *repo.Service
	users     Users
	queue     Queue
	agents    Agents
	logs      Logs
	clock     clock.Clock
	log       *slog.Logger
	publicURL string
	opts      spec.Options
	// ended are the subscribers to a pipeline's end (OnEnded), in registration order.
	ended []func(ctx context.Context, p *Pipeline)
	// started hear the late starts of pipelines that waited for their place (OnStarted).
	started []func(ctx context.Context, pipelineID int64, at time.Time)
}

// Users finds the people builds name (package auth).
type Users interface {
	UserByID(ctx context.Context, id int64) (*auth.User, error)
	Usernames(ctx context.Context, ids []int64) (map[int64]string, error)
}

// Queue is told about every pipeline that becomes queued: the scheduler puts it on its Redis
// queue. The database alone is the truth; a pipeline the queue missed (Redis down, a crash
// between the commit and the call) is found by the scheduler's reconciler.
type Queue interface {
	Enqueue(ctx context.Context, p *Pipeline) error
}

// Agents is told when running pipelines must stop (a cancel, or billing's termination), so
// their agents hear it at once instead of at their next renew (the scheduler's Intake, which
// wakes the agents' control long-polls on every replica).
type Agents interface {
	StopRequested(ctx context.Context, agentIDs []string)
}

// Logs is told when a job's log is complete, because the job reached a final status on whatever
// path (agent report, cancel, reaper): its readers stop waiting for more (package logs).
type Logs interface {
	Complete(ctx context.Context, jobID int64) error
}

// Config is what the build service is made of. Queue, Agents and Logs may be nil (tests of the
// trigger alone): nothing is enqueued, no agent is woken, no log is told it is complete.
type Config struct {
	DB        *gorm.DB
	Repos     *repo.Service
	Users     Users
	Queue     Queue
	Agents    Agents
	Logs      Logs
	Clock     clock.Clock
	Log       *slog.Logger
	PublicURL string
	// Spec configures the .cnb.yml engine (runner classes, time zone, default image); its File
	// and Files fields are set per build.
	Spec spec.Options
}

// NewService returns the build service.
func NewService(cfg Config) *Service {
	return &Service{db: cfg.DB, repos: cfg.Repos, users: cfg.Users, queue: cfg.Queue, agents: cfg.Agents, logs: cfg.Logs, clock: cfg.Clock,
		log: cfg.Log, publicURL: cfg.PublicURL, opts: cfg.Spec}
}

// gitFiles serves the included files of the commit being built from the trigger's Reader, each
// read once however often the engine asks for it.
type gitFiles struct {
	rd     *git.Reader
	commit string
	read   map[string]fileRead
}

type fileRead struct {
	data []byte
	err  error
}

func (g *gitFiles) ReadFile(name string) ([]byte, error) {
	if r, ok := g.read[name]; ok {
		return r.data, r.err
	}
	data, err := g.rd.ReadFile(g.commit, name)
	err = fileError(err)
	g.read[name] = fileRead{data, err}
	return data, err
}

// unusable reports whether the reader refused a file that is there but cannot be a pipeline
// file: over the size limit, or a directory. Such a file fails its build with the reason, as a
// file that does not parse does; it is the author's to fix, not the server's.
func unusable(err error) bool {
	return errors.Is(err, git.ErrTooLarge) || errors.Is(err, git.ErrNotFile)
}

// fileError puts the reader's refusal of a file in the words a diagnostic shows. A refusal for
// size keeps its TooLarge method, from which the engine writes the size and the limit.
func fileError(err error) error {
	if errors.Is(err, git.ErrNotFile) {
		return errors.New("it is a directory or a submodule, not a file")
	}
	return err
}

// compiled is one commit's .cnb.yml, parsed once for every event a ref update fires and for
// its schedules.
type compiled struct {
	commit string
	info   git.CommitInfo
	cfg    *spec.Config // nil: the commit has no .cnb.yml
	src    []byte       // the .cnb.yml
	files  *gitFiles    // the includes it read, for the excerpts of diagnostics
}

// compile reads .cnb.yml and its includes at commit, and the commit, through rd, and parses the
// file. A broken file is not an error here: its diagnostics are in cfg, and each event turns
// them into a failed build. So is a file that cannot be used (over the size limit, a
// directory): its one diagnostic says why.
func (s *Service) compile(rd *git.Reader, commit string) (*compiled, error) {
	src, err := rd.ReadFile(commit, ConfigFile)
	switch {
	case errors.Is(err, git.ErrNotExist):
		return &compiled{commit: commit}, nil
	case unusable(err):
		c, opts, cerr := s.compiling(rd, commit)
		if cerr != nil {
			return nil, cerr
		}
		c.cfg = spec.Unreadable(opts, fileError(err))
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("read %s at %s: %w", ConfigFile, commit, err)
	}
	return s.compileSource(rd, commit, src)
}

// compileSource parses src as the commit's .cnb.yml (its includes still come from the commit).
func (s *Service) compileSource(rd *git.Reader, commit string, src []byte) (*compiled, error) {
	c, opts, err := s.compiling(rd, commit)
	if err != nil {
		return nil, err
	}
	c.src = src
	c.cfg, _ = spec.Parse(src, opts)
	return c, nil
}

// compiling starts the compile of commit: the commit read, and the engine's options with the
// commit's files.
func (s *Service) compiling(rd *git.Reader, commit string) (*compiled, spec.Options, error) {
	info, err := rd.Commit(commit)
	if err != nil {
		return nil, spec.Options{}, err
	}
	opts := s.opts
	opts.File = ConfigFile
	files := &gitFiles{rd: rd, commit: commit, read: map[string]fileRead{}}
	opts.Files = files
	return &compiled{commit: commit, info: info, files: files}, opts, nil
}

// broken reports whether the file is there and does not parse.
func (c *compiled) broken() bool { return c.cfg != nil && c.cfg.Diagnostics().HasErrors() }

// request is one event to plan and store.
type request struct {
	repo     *repo.Repo
	org      *org.Org
	user     *auth.User
	event    string
	branch   string // branch of the event; for tag events the tag goes in tag
	tag      string
	before   string
	trigger  spec.Trigger // Event, Branch/Tag, Changed, IsNewBranch filled by the caller
	extraEnv map[string]string
	config   []byte     // a .cnb.yml to plan instead of the commit's (cnb:apply's config)
	parent   *Pipeline  // the pipeline that starts this build (cnb:apply, cnb:trigger)
	pull     *PullEvent // the pull request event (pull.go)
}

// create plans the compiled file for one event and stores the build. It returns nil and no
// error when the commit has no .cnb.yml or no pipeline matches; a broken file becomes a failed
// build.
func (s *Service) create(ctx context.Context, c *compiled, rq request) (*Build, error) {
	if c.cfg == nil {
		return nil, nil
	}
	t := rq.trigger
	t.DefaultBranch = rq.repo.DefaultBranch
	t.Vars = s.builtinVars(rq, c)
	for k, v := range rq.extraEnv {
		if _, builtin := t.Vars[k]; !builtin {
			t.Vars[k] = v
		}
	}
	b := &Build{RepoID: rq.repo.ID, Event: rq.event, Branch: rq.branch, Tag: rq.tag, CommitSHA: c.commit,
		CommitMessage: c.info.Message, Status: StatusQueued}
	if rq.parent != nil {
		// In the same insert: a child is never without its link.
		b.ParentBuildID, b.ParentPipelineID = &rq.parent.BuildID, &rq.parent.ID
	}
	if rq.pull != nil {
		n := rq.pull.Number
		b.PullNumber, b.PullHeadSHA = &n, rq.pull.HeadSHA
		b.Untrusted = rq.pull.Fork && ProposedCode(rq.event)
	}
	if rq.user != nil {
		id := rq.user.ID
		b.TriggeredBy = &id
	}
	diags := c.cfg.Diagnostics()
	planErr := diags.Err()
	var set *protocol.PlanSet
	if planErr == nil {
		var planned spec.Diagnostics
		set, planned, planErr = c.cfg.Plan(t)
		// The file's warnings, then what planning found.
		diags = append(append(spec.Diagnostics{}, diags...), planned...)
	}
	b.Diagnostics = c.diagnosticsOf(diags)
	if planErr != nil {
		var ve *spec.ValidationError
		if !errors.As(planErr, &ve) {
			return nil, planErr
		}
		errs := diags.Filter(spec.SeverityError)
		first := errs[0]
		lines := make([]string, 0, len(errs))
		for _, d := range errs {
			lines = append(lines, d.String())
		}
		b.Status = StatusFailed
		b.ErrorMessage = first.Message
		if len(errs) > 1 {
			b.ErrorMessage = strings.Join(lines, "\n")
		}
		b.ErrorFile, b.ErrorLine, b.ErrorColumn = first.Pos.File, first.Pos.Line, first.Pos.Column
		return b, s.store(ctx, b, rq.org.ID, nil)
	}
	// A pipeline whose own ifModify/ifNewBranch ruled it out is kept as "skipped" (it says why),
	// unless every pipeline is: like a paths filter, such a push creates nothing.
	runnable := 0
	for i := range set.Pipelines {
		if set.Pipelines[i].Conditions.Skip == "" {
			runnable++
		}
	}
	if runnable == 0 {
		return nil, nil
	}
	return b, s.store(ctx, b, rq.org.ID, set.Pipelines)
}

// builtinVars are the CNB_* variables known when the build is created. The agent adds the ones
// that exist only at run time (CNB_BUILD_ID, CNB_TOKEN, …).
func (s *Service) builtinVars(rq request, c *compiled) map[string]string {
	info := c.info
	slug := rq.org.Name + "/" + rq.repo.Name
	host := s.publicURL
	if u, err := url.Parse(s.publicURL); err == nil {
		host = u.Host
	}
	v := map[string]string{
		"CI": "true", "CNB": "true",
		"CNB_WEB_ENDPOINT":         s.publicURL,
		"CNB_API_ENDPOINT":         s.publicURL + "/api/v1",
		"CNB_DOCKER_REGISTRY":      host,
		"CNB_HELM_REGISTRY":        host,
		"CNB_GROUP_SLUG":           rq.org.Name,
		"CNB_GROUP_SLUG_LOWERCASE": strings.ToLower(rq.org.Name),
		"CNB_REPO_SLUG":            slug,
		"CNB_REPO_SLUG_LOWERCASE":  strings.ToLower(slug),
		"CNB_REPO_NAME":            rq.repo.Name,
		"CNB_REPO_NAME_LOWERCASE":  strings.ToLower(rq.repo.Name),
		"CNB_REPO_ID":              strconv.FormatInt(rq.repo.ID, 10),
		"CNB_REPO_URL_HTTPS":       s.publicURL + "/" + slug,
		"CNB_DEFAULT_BRANCH":       rq.repo.DefaultBranch,
		"CNB_COMMIT":               c.commit,
		"CNB_COMMIT_SHORT":         c.commit[:min(8, len(c.commit))],
		"CNB_BRANCH_SHA":           c.commit,
		"CNB_COMMIT_MESSAGE":       info.Message,
		"CNB_COMMIT_MESSAGE_TITLE": info.Title,
		"CNB_COMMITTER":            info.CommitterName,
		"CNB_COMMITTER_EMAIL":      info.CommitterEmail,
		"CNB_IS_TAG":               strconv.FormatBool(rq.tag != ""),
		"CNB_IS_NEW_BRANCH":        strconv.FormatBool(rq.trigger.IsNewBranch),
		"CNB_TOKEN_USER_NAME":      "cnb",
	}
	if rq.before != "" {
		v["CNB_BEFORE_SHA"] = rq.before
	}
	if rq.user != nil {
		v["CNB_BUILD_USER"] = rq.user.Username
		v["CNB_BUILD_USER_ID"] = strconv.FormatInt(rq.user.ID, 10)
	}
	if rq.event == spec.EventBranchDel {
		v["CNB_BRANCH_SHA"] = ""
	}
	if rq.pull != nil {
		pullVars(rq.pull, v)
	}
	return v
}

// store writes the build and its pipeline tree in one transaction, numbering the build per repo.
func (s *Service) store(ctx context.Context, b *Build, orgID int64, plans []protocol.Plan) error {
	now := s.clock.Now().UTC()
	b.CreatedAt, b.UpdatedAt = now, now
	if b.Status == StatusFailed {
		b.FinishedAt = &now
	}
	var created []*Pipeline
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := store.Lock(tx, fmt.Sprintf("build-number:%d", b.RepoID)); err != nil {
			return err
		}
		var last int64
		if err := tx.Model(&Build{}).Where("repo_id = ?", b.RepoID).Select("COALESCE(MAX(number), 0)").Scan(&last).Error; err != nil {
			return err
		}
		b.Number = last + 1
		if err := tx.Create(b).Error; err != nil {
			return err
		}
		for i := range plans {
			p, err := createPipeline(tx, b, orgID, i, &plans[i], now)
			if err != nil {
				return err
			}
			created = append(created, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range created {
		if p.Status == StatusQueued {
			s.enqueue(ctx, p)
		}
	}
	return nil
}

// enqueue tells the queue about a pipeline the database already says is queued.
func (s *Service) enqueue(ctx context.Context, p *Pipeline) {
	if s.queue == nil {
		return
	}
	if err := s.queue.Enqueue(ctx, p); err != nil {
		s.log.WarnContext(ctx, "enqueue failed; the reconciler will retry", "pipeline", p.ID, "err", err)
	}
}

func createPipeline(tx *gorm.DB, b *Build, orgID int64, pos int, plan *protocol.Plan, now time.Time) (*Pipeline, error) {
	raw, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	tag := plan.Runner.Class
	if tag == "" && len(plan.Runner.Tags) > 0 {
		tag = plan.Runner.Tags[0]
	}
	status, reason := StatusQueued, ""
	queued := &now
	if plan.Conditions.Skip != "" {
		status, reason, queued = StatusSkipped, plan.Conditions.Skip, nil
	}
	p := &Pipeline{BuildID: b.ID, Position: pos, Key: plan.Key, Name: plan.Name, Status: status, Reason: reason,
		RunnerTag: tag, CPUs: plan.Runner.Cpus, Plan: string(raw), OrgID: orgID, RepoID: b.RepoID, Workspace: plan.Workspace,
		CreatedAt: now, UpdatedAt: now, QueuedAt: queued}
	if err := tx.Create(p).Error; err != nil {
		return nil, err
	}
	// Stage positions run on through failStages and endStages, as the agent's JobRefs count them.
	pos = 0
	for _, group := range []struct {
		kind   string
		stages []protocol.Stage
	}{{"", plan.Stages}, {StageFail, plan.FailStages}, {StageEnd, plan.EndStages}} {
		for _, st := range group.stages {
			stage := &Stage{PipelineID: p.ID, Position: pos, Name: st.Name, Parallel: st.Parallel, Kind: group.kind, Status: status}
			if err := tx.Create(stage).Error; err != nil {
				return nil, err
			}
			for ji, j := range st.Jobs {
				typ := ""
				if j.Kind == protocol.KindBuiltin {
					typ = j.Type
				}
				if err := tx.Create(&Job{StageID: stage.ID, PipelineID: p.ID, Position: ji, Name: j.Name, Status: status, Type: typ}).Error; err != nil {
					return nil, err
				}
			}
			pos++
		}
	}
	return p, nil
}
