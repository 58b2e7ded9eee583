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

	"github.com/nimbus-build/nimbus/agent/protocol"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store"
)

// ConfigFile is the pipeline file at the repository root.
const ConfigFile = ".cnb.yml"

// MaxChangedFiles is how many changed paths ifModify considers (CNB's limit).
const MaxChangedFiles = 300

// Service creates and reads builds.
type Service struct {
	db        *gorm.DB
	repos     *repo.Service
	clock     clock.Clock
	log       *slog.Logger
	publicURL string
	opts      spec.Options
	// Enqueue is told about every new queued pipeline (the scheduler puts it on its queue).
	// nil until the scheduler exists: the database alone is the truth, and its reconciler
	// picks up queued pipelines either way.
	Enqueue func(ctx context.Context, p *Pipeline)
	// Explain says why each queued pipeline waits (the scheduler sets it); the API shows it as
	// the pipeline's reason.
	Explain func(ctx context.Context, ps []Pipeline) map[int64]string
}

// NewService returns the build service. opts configures the .cnb.yml engine (runner classes,
// time zone); its Files field is set per build.
func NewService(db *gorm.DB, repos *repo.Service, clk clock.Clock, publicURL string, opts spec.Options, log *slog.Logger) *Service {
	return &Service{db: db, repos: repos, clock: clk, log: log, publicURL: publicURL, opts: opts}
}

// gitFiles reads included files of the repo at the commit being built.
type gitFiles struct {
	ctx    context.Context
	path   string
	commit string
}

func (g gitFiles) ReadFile(name string) ([]byte, error) {
	return git.ReadFile(g.ctx, g.path, g.commit, name)
}

// request is one event to plan and store.
type request struct {
	repo     *repo.Repo
	org      *org.Org
	user     *auth.User
	event    string
	branch   string // branch of the event; for tag events the tag goes in tag
	tag      string
	commit   string
	before   string
	trigger  spec.Trigger // Event, Branch/Tag, Changed, IsNewBranch filled by the caller
	extraEnv map[string]string
}

// create reads .cnb.yml at the request's commit, plans it and stores the build. It returns nil
// and no error when the file is absent or no pipeline matches; a broken file becomes a failed
// build.
func (s *Service) create(ctx context.Context, rq request) (*Build, error) {
	path := s.repos.Path(rq.repo)
	src, err := git.ReadFile(ctx, path, rq.commit, ConfigFile)
	if errors.Is(err, git.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", ConfigFile, rq.commit, err)
	}
	info, err := git.Commit(ctx, path, rq.commit)
	if err != nil {
		return nil, err
	}
	opts := s.opts
	opts.File = ConfigFile
	opts.Files = gitFiles{ctx: ctx, path: path, commit: rq.commit}
	t := rq.trigger
	t.DefaultBranch = rq.repo.DefaultBranch
	t.Vars = s.builtinVars(rq, info)
	for k, v := range rq.extraEnv {
		if _, builtin := t.Vars[k]; !builtin {
			t.Vars[k] = v
		}
	}
	set, diags, planErr := spec.Compile(src, t, opts)
	b := &Build{RepoID: rq.repo.ID, Event: rq.event, Branch: rq.branch, Tag: rq.tag, CommitSHA: rq.commit,
		CommitMessage: info.Message, Status: StatusQueued}
	if rq.user != nil {
		id := rq.user.ID
		b.TriggeredBy = &id
	}
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
func (s *Service) builtinVars(rq request, info git.CommitInfo) map[string]string {
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
		"CNB_COMMIT":               rq.commit,
		"CNB_COMMIT_SHORT":         rq.commit[:min(8, len(rq.commit))],
		"CNB_BRANCH_SHA":           rq.commit,
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
	if s.Enqueue != nil {
		for _, p := range created {
			if p.Status == StatusQueued {
				s.Enqueue(ctx, p)
			}
		}
	}
	return nil
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
		RunnerTag: tag, CPUs: plan.Runner.Cpus, Plan: string(raw), OrgID: orgID, RepoID: b.RepoID,
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
				if err := tx.Create(&Job{StageID: stage.ID, PipelineID: p.ID, Position: ji, Name: j.Name, Status: status}).Error; err != nil {
					return nil, err
				}
			}
			pos++
		}
	}
	return p, nil
}
