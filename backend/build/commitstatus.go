package build

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Commit statuses: a token sets an external status on a commit (GitHub's commit statuses, CNB's
// repo-commit-status scope), one per context, the newest state winning. A commit's check state
// is made of them and of the pipelines of the builds that ran on it; the merge gate counts a
// status as a required check by its context (backend/pull/gate.go, through app).

// Commit status states.
const (
	StatePending = "pending"
	StateSuccess = "success"
	StateFailure = "failure"
	StateError   = "error"
)

// MaxStatusesPerCommit bounds the contexts of one commit, so a loop in a script cannot fill the
// table.
const MaxStatusesPerCommit = 1000

// CommitStatus is the latest status of one context on a commit (table commit_statuses).
type CommitStatus struct {
	ID          int64  `gorm:"primaryKey" json:"-"`
	RepoID      int64  `gorm:"not null" json:"-"`
	CommitSHA   string `gorm:"column:commit_sha;not null" json:"commit"`
	Context     string `gorm:"not null" json:"context"`
	State       string `gorm:"not null" json:"state"`
	TargetURL   string `gorm:"column:target_url;not null" json:"target_url"`
	Description string `gorm:"not null" json:"description"`
	// CreatorID is who set it; PipelineID the pipeline whose job token did.
	CreatorID  *int64    `json:"-"`
	PipelineID *int64    `json:"pipeline_id"`
	CreatedAt  time.Time `gorm:"not null" json:"created_at"`
	UpdatedAt  time.Time `gorm:"not null" json:"updated_at"`
}

// TableName is the table of CommitStatus.
func (CommitStatus) TableName() string { return "commit_statuses" }

// StatusInput is a status to set.
type StatusInput struct {
	Context     string
	State       string
	TargetURL   string
	Description string
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// SetStatus sets the status of in.Context on commit sha of r, by user (pipelineID for a job
// token, else 0). The commit must exist in the repository.
func (s *Service) SetStatus(ctx context.Context, r *repo.Repo, sha string, userID, pipelineID int64, in StatusInput) (*CommitStatus, error) {
	if in.Context == "" {
		in.Context = "default" // GitHub's default context
	}
	switch {
	case len(in.Context) > 255 || !utf8.ValidString(in.Context) || strings.ContainsFunc(in.Context, func(c rune) bool { return c < ' ' || c == 0x7f }):
		return nil, fault.Invalid("context", "a context is one line of UTF-8, at most 255 bytes")
	case in.State != StatePending && in.State != StateSuccess && in.State != StateFailure && in.State != StateError:
		return nil, fault.Invalid("state", "state is pending, success, failure or error, not %q", in.State)
	case len(in.Description) > 1024 || !utf8.ValidString(in.Description):
		return nil, fault.Invalid("description", "a description is UTF-8 of at most 1024 bytes")
	}
	if in.TargetURL != "" {
		u, err := url.Parse(in.TargetURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(in.TargetURL) > 2048 {
			return nil, fault.Invalid("target_url", "target_url is an http or https URL of at most 2048 bytes")
		}
	}
	if !shaRE.MatchString(sha) {
		return nil, fault.NotFound("commit %q not found: name it by its full SHA", sha)
	}
	rd, err := git.OpenReader(ctx, s.repos.Path(r))
	if err != nil {
		return nil, err
	}
	_, err = rd.Commit(sha)
	rd.Close()
	if err != nil {
		return nil, fault.NotFound("commit %s not found in %s", sha, r.Name)
	}
	now := s.clock.Now().UTC()
	st := &CommitStatus{RepoID: r.ID, CommitSHA: sha, Context: in.Context, State: in.State, TargetURL: in.TargetURL,
		Description: in.Description, CreatedAt: now, UpdatedAt: now}
	if userID != 0 {
		st.CreatorID = &userID
	}
	if pipelineID != 0 {
		st.PipelineID = &pipelineID
	}
	db := s.db.WithContext(ctx)
	var n int64
	if err := db.Model(&CommitStatus{}).Where("repo_id = ? AND commit_sha = ? AND context <> ?", r.ID, sha, in.Context).Count(&n).Error; err != nil {
		return nil, err
	}
	if n >= MaxStatusesPerCommit {
		return nil, fault.Conflict("commit %s has %d status contexts, the most it may have", sha, n)
	}
	err = db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "repo_id"}, {Name: "commit_sha"}, {Name: "context"}},
		DoUpdates: clause.AssignmentColumns([]string{"state", "target_url", "description", "creator_id", "pipeline_id", "updated_at"})}).Create(st).Error
	if err != nil {
		return nil, err
	}
	var out CommitStatus
	err = db.Where("repo_id = ? AND commit_sha = ? AND context = ?", r.ID, sha, in.Context).Take(&out).Error
	return &out, err
}

// Statuses returns the statuses of commit sha of repoID, by context.
func (s *Service) Statuses(ctx context.Context, repoID int64, sha string) ([]CommitStatus, error) {
	var out []CommitStatus
	err := s.db.WithContext(ctx).Where("repo_id = ? AND commit_sha = ?", repoID, sha).Order("context").Find(&out).Error
	return out, err
}

// CommitPipeline is a pipeline of a build that ran on a commit.
type CommitPipeline struct {
	Build  int64  `json:"build"`
	Event  string `json:"event"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

// CommitChecks is a commit's check state: its statuses and the pipelines of the newest build of
// each event that ran on it, and the state they make together: failure when one failed (or was
// cancelled, terminated, errored), else pending while one runs, else success; "" with nothing.
type CommitChecks struct {
	Commit    string           `json:"commit"`
	State     string           `json:"state"`
	Statuses  []CommitStatus   `json:"statuses"`
	Pipelines []CommitPipeline `json:"pipelines"`
}

// ChecksOf reads the check state of commit sha of repoID.
func (s *Service) ChecksOf(ctx context.Context, repoID int64, sha string) (*CommitChecks, error) {
	out := &CommitChecks{Commit: sha, Statuses: []CommitStatus{}, Pipelines: []CommitPipeline{}}
	var err error
	if out.Statuses, err = s.Statuses(ctx, repoID, sha); err != nil {
		return nil, err
	}
	var builds []Build
	if err := s.db.WithContext(ctx).Where("repo_id = ? AND commit_sha = ?", repoID, sha).Order("id DESC").Limit(200).Find(&builds).Error; err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, b := range builds {
		if seen[b.Event] {
			continue
		}
		seen[b.Event] = true
		var ps []Pipeline
		if err := s.db.WithContext(ctx).Omit("plan").Where("build_id = ?", b.ID).Order("position").Find(&ps).Error; err != nil {
			return nil, err
		}
		for _, p := range ps {
			out.Pipelines = append(out.Pipelines, CommitPipeline{Build: b.Number, Event: b.Event, Name: p.Name, Status: p.Status})
		}
	}
	statuses := make([]string, len(out.Statuses))
	for i, st := range out.Statuses {
		statuses[i] = st.State
	}
	pipelines := make([]string, len(out.Pipelines))
	for i, p := range out.Pipelines {
		pipelines[i] = p.Status
	}
	out.State = checkState(statuses, pipelines)
	return out, nil
}

// checkState makes one state of a commit's external status states and pipeline statuses:
// failure when one failed (or was cancelled, terminated, errored), else pending while one
// runs, else success; "" with nothing.
func checkState(statuses, pipelines []string) string {
	var failed, pending bool
	for _, st := range statuses {
		switch st {
		case StateFailure, StateError:
			failed = true
		case StatePending:
			pending = true
		}
	}
	for _, p := range pipelines {
		switch p {
		case StatusSuccess, StatusSkipped:
		case StatusQueued, StatusRunning:
			pending = true
		default:
			failed = true
		}
	}
	switch {
	case failed:
		return StateFailure
	case pending:
		return StatePending
	case len(statuses)+len(pipelines) > 0:
		return StateSuccess
	}
	return ""
}

// StatesOf reads the check state of many commits of repoID at once (a page of commits, the
// branches list), as ChecksOf makes it for one: three queries whatever the number of commits.
// A commit with no checks is absent from the map.
func (s *Service) StatesOf(ctx context.Context, repoID int64, shas []string) (map[string]string, error) {
	out := map[string]string{}
	if len(shas) == 0 {
		return out, nil
	}
	statuses := map[string][]string{}
	var sts []CommitStatus
	if err := s.db.WithContext(ctx).Select("commit_sha", "state").Where("repo_id = ? AND commit_sha IN ?", repoID, shas).Find(&sts).Error; err != nil {
		return nil, err
	}
	for _, st := range sts {
		statuses[st.CommitSHA] = append(statuses[st.CommitSHA], st.State)
	}
	// The newest build of each event on each commit, as ChecksOf reads them.
	var builds []Build
	if err := s.db.WithContext(ctx).Select("id", "commit_sha", "event").Where("repo_id = ? AND commit_sha IN ?", repoID, shas).
		Order("id DESC").Find(&builds).Error; err != nil {
		return nil, err
	}
	type key struct{ sha, event string }
	seen := map[key]bool{}
	shaOf := map[int64]string{}
	var ids []int64
	for _, b := range builds {
		if k := (key{b.CommitSHA, b.Event}); !seen[k] {
			seen[k] = true
			shaOf[b.ID] = b.CommitSHA
			ids = append(ids, b.ID)
		}
	}
	pipelines := map[string][]string{}
	if len(ids) > 0 {
		var ps []Pipeline
		if err := s.db.WithContext(ctx).Select("build_id", "status").Where("build_id IN ?", ids).Find(&ps).Error; err != nil {
			return nil, err
		}
		for _, p := range ps {
			sha := shaOf[p.BuildID]
			pipelines[sha] = append(pipelines[sha], p.Status)
		}
	}
	for _, sha := range shas {
		if st := checkState(statuses[sha], pipelines[sha]); st != "" {
			out[sha] = st
		}
	}
	return out, nil
}
