package build

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// RunInfo is what an agent needs to know of a claimed pipeline beyond its Plan: its build, the
// repo to clone, and the ids of its jobs.
type RunInfo struct {
	BuildID     int64
	BuildNumber int64
	CommitSHA   string
	OrgName     string
	RepoName    string
	RepoID      int64
	Event       string
	Branch      string // "" for tag events
	TriggeredBy int64  // 0 when nobody (a schedule whose author left)
	Jobs        []protocol.JobRef
	// Untrusted: a fork's proposed code (Build.Untrusted); PullNumber its request.
	Untrusted  bool
	PullNumber int64
}

// RunInfo implements Lifecycle, in two queries whatever the pipeline: dispatch speed is bounded
// by these round trips.
func (s *Service) RunInfo(ctx context.Context, p *Pipeline) (*RunInfo, error) {
	var b struct {
		ID          int64
		Number      int64
		CommitSHA   string
		RepoName    string
		OrgName     string
		RepoID      int64
		Event       string
		Branch      string
		TriggeredBy *int64
		Untrusted   bool
		PullNumber  *int64
	}
	if err := s.db.WithContext(ctx).Table("builds").
		Select("builds.id, builds.number, builds.commit_sha, repos.name AS repo_name, orgs.name AS org_name, "+
			"builds.repo_id, builds.event, builds.branch, builds.triggered_by, builds.untrusted, builds.pull_number").
		Joins("JOIN repos ON repos.id = builds.repo_id").Joins("JOIN orgs ON orgs.id = repos.org_id").
		Where("builds.id = ?", p.BuildID).Take(&b).Error; err != nil {
		return nil, err
	}
	var jobs []struct {
		ID            int64
		Position      int
		StagePosition int
	}
	if err := s.db.WithContext(ctx).Table("jobs").Select("jobs.id, jobs.position, stages.position AS stage_position").
		Joins("JOIN stages ON stages.id = jobs.stage_id").Where("jobs.pipeline_id = ?", p.ID).
		Order("stages.position, jobs.position").Scan(&jobs).Error; err != nil {
		return nil, err
	}
	refs := make([]protocol.JobRef, 0, len(jobs))
	for _, j := range jobs {
		refs = append(refs, protocol.JobRef{Stage: j.StagePosition, Job: j.Position, ID: j.ID})
	}
	info := &RunInfo{BuildID: b.ID, BuildNumber: b.Number, CommitSHA: b.CommitSHA, OrgName: b.OrgName, RepoName: b.RepoName,
		RepoID: b.RepoID, Event: b.Event, Branch: b.Branch, Jobs: refs, Untrusted: b.Untrusted}
	if b.TriggeredBy != nil {
		info.TriggeredBy = *b.TriggeredBy
	}
	if b.PullNumber != nil {
		info.PullNumber = *b.PullNumber
	}
	return info, nil
}

// ReadImport reads a file a job of the running pipeline p imports (imports, settings and
// options from other repos), with the pipeline's own rights: the repo, event, branch and user
// it runs as, which repo.ReadImport checks and audits.
func (s *Service) ReadImport(ctx context.Context, p *Pipeline, raw, kind, image string) (protocol.ImportFile, error) {
	run, err := s.RunInfo(ctx, p)
	if err != nil {
		return protocol.ImportFile{}, err
	}
	rd := repo.Reader{OrgID: p.OrgID, RepoID: run.RepoID, Slug: run.OrgName + "/" + run.RepoName, Event: run.Event,
		Branch: run.Branch, UserID: run.TriggeredBy, PipelineID: p.ID, BuildNumber: run.BuildNumber, Untrusted: run.Untrusted}
	return s.repos.ReadImport(ctx, rd, raw, kind, image)
}

// Stopping implements Lifecycle.
func (s *Service) Stopping(ctx context.Context, agentID string, leaseIDs []string) ([]Pipeline, error) {
	if len(leaseIDs) == 0 {
		return nil, nil
	}
	var out []Pipeline
	err := s.db.WithContext(ctx).Select("id, lease_id, reason").
		Where("agent_id = ? AND lease_id IN ? AND status = ? AND cancel_requested = ?", agentID, leaseIDs, StatusRunning, true).
		Find(&out).Error
	return out, err
}

// Queued implements Lifecycle. The order is the queue's (QueuedSince, then id): the reconciler
// re-enqueues in it, so a rebuilt Redis hands out a team's pipelines in the order they came.
func (s *Service) Queued(ctx context.Context) ([]Pipeline, error) {
	var out []Pipeline
	err := s.db.WithContext(ctx).Select("id, org_id, repo_id, runner_tag, cpus, workspace, queued_at, created_at").
		Where("status = ?", StatusQueued).Order("COALESCE(queued_at, created_at), id").Find(&out).Error
	return out, err
}

// RunningCount is how many pipelines of one team run on one runner class.
type RunningCount struct {
	RunnerTag string
	OrgID     int64
	N         int
}

// RunningCounts implements Lifecycle.
func (s *Service) RunningCounts(ctx context.Context) ([]RunningCount, error) {
	var out []RunningCount
	err := s.db.WithContext(ctx).Model(&Pipeline{}).Select("runner_tag, org_id, count(*) AS n").
		Where("status = ?", StatusRunning).Group("runner_tag, org_id").Scan(&out).Error
	return out, err
}

// Held is a running pipeline an agent holds a lease on.
type Held struct {
	ID          int64
	Name        string
	RunnerTag   string
	CPUs        int
	StartedAt   *time.Time
	AgentID     string
	BuildNumber int64
	Org         string
	Repo        string
}

// Held implements Lifecycle.
func (s *Service) Held(ctx context.Context) ([]Held, error) {
	var out []Held
	err := s.db.WithContext(ctx).Table("pipelines").
		Select("pipelines.id, pipelines.name, pipelines.runner_tag, pipelines.cpus, pipelines.started_at, pipelines.agent_id, "+
			"builds.number AS build_number, repos.name AS repo, orgs.name AS org").
		Joins("JOIN builds ON builds.id = pipelines.build_id").
		Joins("JOIN repos ON repos.id = pipelines.repo_id").
		Joins("JOIN orgs ON orgs.id = pipelines.org_id").
		Where("pipelines.status = ? AND pipelines.agent_id <> ''", StatusRunning).
		Order("pipelines.id").Scan(&out).Error
	return out, err
}

// Schedules implements Lifecycle.
func (s *Service) Schedules(ctx context.Context) ([]Schedule, error) {
	var out []Schedule
	err := s.db.WithContext(ctx).Order("id").Find(&out).Error
	return out, err
}

// RepoSchedules lists the repo's registered schedules.
func (s *Service) RepoSchedules(ctx context.Context, repoID int64) ([]Schedule, error) {
	var out []Schedule
	err := s.db.WithContext(ctx).Where("repo_id = ?", repoID).Order("id").Find(&out).Error
	return out, err
}

// ScheduleView is a schedule as its repo's page lists it.
type ScheduleView struct {
	Schedule
	Next      time.Time // the next fire time; zero when it never fires again
	LastBuild *int64    // the newest build of its branch and event
	RunAs     string    // its author's username; "" when the author is gone
}

// ScheduleViews lists a repo's schedules with their next fire time (cron read in zone), their
// last build and who they run as, in three queries whatever the count.
func (s *Service) ScheduleViews(ctx context.Context, repoID int64, zone *time.Location) ([]ScheduleView, error) {
	ss, err := s.RepoSchedules(ctx, repoID)
	if err != nil || len(ss) == 0 {
		return nil, err
	}
	var last []struct {
		Branch, Event string
		Number        int64
	}
	if err := s.db.WithContext(ctx).Model(&Build{}).Select("branch, event, MAX(number) AS number").
		Where("repo_id = ? AND (event = ? OR event LIKE ?)", repoID, spec.EventSchedule, "crontab%").
		Group("branch, event").Scan(&last).Error; err != nil {
		return nil, err
	}
	lastOf := map[[2]string]int64{}
	for _, l := range last {
		lastOf[[2]string{l.Branch, l.Event}] = l.Number
	}
	ids := make([]int64, 0, len(ss))
	for _, sc := range ss {
		ids = append(ids, sc.UserID)
	}
	names, err := s.users.Usernames(ctx, ids)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := make([]ScheduleView, len(ss))
	for i, sc := range ss {
		out[i] = ScheduleView{Schedule: sc, Next: spec.Schedule{Cron: sc.Cron, Location: zone}.Next(now), RunAs: names[sc.UserID]}
		if n, ok := lastOf[[2]string{sc.Branch, sc.Event}]; ok {
			out[i].LastBuild = &n
		}
	}
	return out, nil
}

// RunSchedule builds a schedule's branch and event now, as user (a repo admin's "Run now"),
// leaving its fire times as they are.
func (s *Service) RunSchedule(ctx context.Context, a *repo.Access, user *auth.User, id int64) (*Build, error) {
	var sc Schedule
	err := s.db.WithContext(ctx).Where("id = ? AND repo_id = ?", id, a.Repo.ID).Take(&sc).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("no such schedule")
	}
	if err != nil {
		return nil, err
	}
	if a.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived; unarchive it to run builds", a.Org.Name, a.Repo.Name)
	}
	b, err := s.createAt(ctx, a.Repo, sc.Branch, request{repo: a.Repo, org: a.Org, user: user, event: sc.Event, branch: sc.Branch,
		trigger: spec.Trigger{Event: sc.Event, Branch: sc.Branch, Cron: sc.Cron}})
	if errors.Is(err, git.ErrUnknownRevision) {
		return nil, fault.Conflict("the branch %s of this schedule is gone", sc.Branch)
	}
	return b, err
}

// ResolveJobToken authenticates a pipeline's CNB_TOKEN: valid only while the pipeline runs,
// scoped to its repo (clone, push, registry; read-only for a pull request's proposed code, see
// JobScopes), acting for the user who triggered the build.
func (s *Service) ResolveJobToken(ctx context.Context, token string) (*auth.Principal, error) {
	bad := fault.Unauthenticated("the job token is invalid or its pipeline has finished")
	var p Pipeline
	err := s.db.WithContext(ctx).Omit("plan").Where("job_token_hash = ? AND status = ?", auth.HashToken(token), StatusRunning).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, bad
	}
	if err != nil {
		return nil, err
	}
	var b Build
	if err := s.db.WithContext(ctx).Take(&b, p.BuildID).Error; err != nil {
		return nil, err
	}
	pr := &auth.Principal{Kind: auth.KindJob, RepoID: p.RepoID, PipelineID: p.ID,
		Scopes: JobScopes(b.Event)}
	if b.TriggeredBy != nil {
		if u, err := s.users.UserByID(ctx, *b.TriggeredBy); err == nil {
			pr.User = u
		}
	}
	return pr, nil
}

// Producer is the build a pipeline belongs to, as a published artifact records it.
type Producer struct {
	PipelineID, BuildID, BuildNumber int64
	CommitSHA                        string
}

// ProducerOf returns the build and commit of a pipeline.
func (s *Service) ProducerOf(ctx context.Context, pipelineID int64) (Producer, error) {
	var row Producer
	err := s.db.WithContext(ctx).Table("pipelines").
		Select("pipelines.id AS pipeline_id, builds.id AS build_id, builds.number AS build_number, builds.commit_sha").
		Joins("JOIN builds ON builds.id = pipelines.build_id").Where("pipelines.id = ?", pipelineID).Take(&row).Error
	return row, err
}

// List returns a page of the repo's builds, newest first (the cursor is the build number).
func (s *Service) List(ctx context.Context, repoID int64, page paging.Page) ([]Build, error) {
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
		return nil, fault.NotFound("build #%d not found", n)
	}
	return &b, err
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
		return "", "", fault.NotFound("job %d not found", jobID)
	}
	return row.OrgName, row.RepoName, err
}

// PipelinesPage is how many pipelines a build's JSON carries: the API's largest page. A build
// with more also carries the cursor of GET …/builds/{number}/pipelines for the rest, so one
// build of hundreds of pipelines never makes one answer megabytes long.
const PipelinesPage = 100

// tree is the first page of the pipelines of some builds and the names of who triggered them:
// what the API shows of builds, read in a constant number of queries.
type tree struct {
	pipelines []Pipeline
	usernames map[int64]string
	// count is how many pipelines each build has, and running which builds have a pipeline
	// running beyond the first page: asked only of builds that fill the page.
	count   map[int64]int64
	running map[int64]bool
}

func (s *Service) tree(ctx context.Context, bs []Build) (*tree, error) {
	db := s.db.WithContext(ctx)
	t := &tree{usernames: map[int64]string{}, count: map[int64]int64{}, running: map[int64]bool{}}
	ids := make([]int64, 0, len(bs))
	userIDs := []int64{}
	for _, b := range bs {
		ids = append(ids, b.ID)
		if b.TriggeredBy != nil {
			userIDs = append(userIDs, *b.TriggeredBy)
		}
	}
	if len(userIDs) > 0 {
		names, err := s.users.Usernames(ctx, userIDs)
		if err != nil {
			return nil, err
		}
		t.usernames = names
	}
	if len(ids) == 0 {
		return t, nil
	}
	if err := db.Omit("plan").Where("build_id IN ? AND position < ?", ids, PipelinesPage).Order("build_id, position").
		Find(&t.pipelines).Error; err != nil {
		return nil, err
	}
	var full []int64
	for _, p := range t.pipelines {
		if t.count[p.BuildID]++; t.count[p.BuildID] == PipelinesPage {
			full = append(full, p.BuildID)
		}
	}
	if len(full) == 0 {
		return t, nil
	}
	var rows []struct {
		BuildID int64
		N       int64
		Running int64
	}
	if err := db.Model(&Pipeline{}).Select("build_id, COUNT(*) AS n, SUM(CASE WHEN status = ? THEN 1 ELSE 0 END) AS running", StatusRunning).
		Where("build_id IN ?", full).Group("build_id").Scan(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		t.count[r.BuildID] = r.N
		t.running[r.BuildID] = r.Running > 0
	}
	return t, nil
}

// Pipelines returns a page of a build's pipelines in order, up to Limit+1 of them (api.NewList
// wants the extra one): those after the page's cursor, pipelineKey of the last one seen.
func (s *Service) Pipelines(ctx context.Context, buildID int64, page paging.Page) ([]Pipeline, error) {
	var out []Pipeline
	err := s.db.WithContext(ctx).Omit("plan").Where("build_id = ? AND position >= ?", buildID, page.After).
		Order("position").Limit(page.Limit + 1).Find(&out).Error
	return out, err
}

// pipelineKey is a pipeline's sort key in the pages of its build: its position, from 1.
func pipelineKey(p Pipeline) int64 { return int64(p.Position) + 1 }

// stagesAndJobs reads the stages and jobs of pipelines, in order.
func (s *Service) stagesAndJobs(ctx context.Context, ps []Pipeline) ([]Stage, []Job, error) {
	if len(ps) == 0 {
		return nil, nil, nil
	}
	db := s.db.WithContext(ctx)
	pids := make([]int64, 0, len(ps))
	for _, p := range ps {
		pids = append(pids, p.ID)
	}
	var stages []Stage
	var jobs []Job
	if err := db.Where("pipeline_id IN ?", pids).Order("pipeline_id, position").Find(&stages).Error; err != nil {
		return nil, nil, err
	}
	if err := db.Where("pipeline_id IN ?", pids).Order("stage_id, position").Find(&jobs).Error; err != nil {
		return nil, nil, err
	}
	return stages, jobs, nil
}
