package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// OnPush turns the refs a push updated into builds, one per event that has pipelines:
//
//	branch pushed   → push (and branch.create for a new branch, commit.add when commits came)
//	branch deleted  → branch.delete, planned from the default branch's .cnb.yml
//	tag pushed      → tag_push
//
// and registers the schedules of each pushed branch's .cnb.yml. Each ref update reads its commit
// through one git Reader and parses .cnb.yml once, for all its events and its schedules. A
// broken .cnb.yml yields one failed build for the ref's main event. Errors are logged, never
// returned: the push itself has already succeeded.
func (s *Service) OnPush(ctx context.Context, repoID int64, pusher *auth.User, updates []git.RefUpdate) []*Build {
	began := time.Now()
	r, o, err := s.repos.ByID(ctx, repoID)
	if err != nil {
		s.log.ErrorContext(ctx, "push trigger: load repo", "repo_id", repoID, "err", err)
		return nil
	}
	var builds []*Build
	for _, u := range updates {
		bs, err := s.onRef(ctx, r, o, pusher, u)
		if err != nil {
			s.log.ErrorContext(ctx, "push trigger failed", "repo", o.Name+"/"+r.Name, "ref", u.Ref, "err", err)
		}
		builds = append(builds, bs...)
	}
	// From the ref updates git reported to every pipeline on its queue: the figure
	// BenchmarkPushToQueued (e2e) reads.
	s.log.InfoContext(ctx, "push triggered", "repo", o.Name+"/"+r.Name, "refs", len(updates), "builds", len(builds),
		"elapsed_us", time.Since(began).Microseconds())
	return builds
}

func (s *Service) onRef(ctx context.Context, r *repo.Repo, o *org.Org, pusher *auth.User, u git.RefUpdate) ([]*Build, error) {
	isBranch, isTag := strings.HasPrefix(u.Ref, "refs/heads/"), strings.HasPrefix(u.Ref, "refs/tags/")
	if !isBranch && (!isTag || git.IsZeroSHA(u.New)) {
		return nil, nil // other refs, and deleted tags, fire nothing
	}
	rd, err := git.OpenReader(ctx, s.repos.Path(r))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	if isBranch {
		branch := strings.TrimPrefix(u.Ref, "refs/heads/")
		if git.IsZeroSHA(u.New) {
			if err := s.syncSchedules(ctx, r, branch, nil, pusher); err != nil {
				return nil, err
			}
			head, err := rd.Resolve("refs/heads/" + r.DefaultBranch)
			if err != nil {
				return nil, nil // no default branch to read a config from
			}
			c, err := s.compile(rd, head)
			if err != nil {
				return nil, err
			}
			b, err := s.create(ctx, c, request{repo: r, org: o, user: pusher, event: spec.EventBranchDel, branch: branch,
				before: u.Old, trigger: spec.Trigger{Event: spec.EventBranchDel, Branch: branch}})
			return nonNil(b), err
		}
		c, err := s.compile(rd, u.New)
		if err != nil {
			return nil, err
		}
		s.registerSchedules(ctx, r, branch, c, pusher)
		if c.cfg == nil {
			return nil, nil
		}
		isNew := git.IsZeroSHA(u.Old)
		var changed []string
		if !isNew {
			if changed, err = rd.ChangedFiles(u.Old, u.New, MaxChangedFiles); err != nil {
				return nil, err
			}
			if changed == nil {
				changed = []string{}
			}
		}
		events := []string{spec.EventPush}
		if isNew {
			events = append(events, spec.EventBranchNew)
		}
		if !isNew {
			n, err := rd.NewCommits(u.Old, u.New, 99)
			if err != nil {
				// The push's own builds still come; only commit.add cannot be judged.
				s.log.ErrorContext(ctx, "push trigger: commit.add not fired: counting the new commits failed",
					"repo", o.Name+"/"+r.Name, "ref", u.Ref, "err", err)
			}
			if n > 0 {
				events = append(events, spec.EventCommitAdd)
			}
		}
		var out []*Build
		for i, ev := range events {
			b, err := s.create(ctx, c, request{repo: r, org: o, user: pusher, event: ev, branch: branch,
				before: u.Old, trigger: spec.Trigger{Event: ev, Branch: branch, Changed: changed, IsNewBranch: isNew}})
			if err != nil {
				return out, err
			}
			if b != nil && b.Status == StatusFailed {
				// One failed build per broken file, not one per event.
				if i == 0 {
					out = append(out, b)
				}
				break
			}
			out = append(out, nonNil(b)...)
		}
		return out, nil
	}
	tag := strings.TrimPrefix(u.Ref, "refs/tags/")
	commit, err := rd.Resolve(u.Ref)
	if err != nil {
		return nil, err
	}
	c, err := s.compile(rd, commit)
	if err != nil {
		return nil, err
	}
	b, err := s.create(ctx, c, request{repo: r, org: o, user: pusher, event: spec.EventTagPush, tag: tag,
		before: u.Old, trigger: spec.Trigger{Event: spec.EventTagPush, Tag: tag}})
	return nonNil(b), err
}

// PushLines are what `git push` prints about the builds one push started (OnPush's), one line
// each with the address of the build's page, for the git handler to send as "remote: …" lines:
//
//	Nimbus: build #12 for refs/heads/main (push): https://nimbus.example/acme/app/builds/12
//	Nimbus: build #13 for refs/heads/main (push) failed (.cnb.yml:7:9): https://…/builds/13
//
// A build the file could not plan says so at once, so the pusher need not open the page to
// learn the push did nothing. A push that started no build (no .cnb.yml, or no pipeline for
// the ref and event) gets no line, as GitHub prints nothing when no workflow matches: a
// repository without CI sees no noise on every push.
func (s *Service) PushLines(orgName, repoName string, builds []*Build) []string {
	lines := make([]string, 0, len(builds))
	for _, b := range builds {
		ref := "refs/heads/" + b.Branch
		if b.Tag != "" {
			ref = "refs/tags/" + b.Tag
		}
		failed := ""
		if b.Status == StatusFailed {
			failed = " failed"
			if b.ErrorFile != "" {
				at := b.ErrorFile
				if b.ErrorLine > 0 {
					at += fmt.Sprintf(":%d", b.ErrorLine)
					if b.ErrorColumn > 0 {
						at += fmt.Sprintf(":%d", b.ErrorColumn)
					}
				}
				failed += " (" + at + ")"
			}
		}
		lines = append(lines, fmt.Sprintf("Nimbus: build #%d for %s (%s)%s: %s", b.Number, ref, b.Event, failed,
			s.buildURL(orgName, repoName, b.Number)))
	}
	return lines
}

// buildURL is the address of a build's page on the dashboard (frontend/src/router.tsx:
// /:org/:repo/builds/:number). Org and repo names never need escaping (git.ValidName).
func (s *Service) buildURL(orgName, repoName string, number int64) string {
	return fmt.Sprintf("%s/%s/%s/builds/%d", s.publicURL, orgName, repoName, number)
}

func nonNil(b *Build) []*Build {
	if b == nil {
		return nil
	}
	return []*Build{b}
}

// createAt compiles the head of branch and creates the build of one event on it: the manual and
// scheduled triggers. It returns ErrUnknownRevision (wrapped) when the branch does not exist.
func (s *Service) createAt(ctx context.Context, r *repo.Repo, branch string, rq request) (*Build, error) {
	rd, err := git.OpenReader(ctx, s.repos.Path(r))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	commit, err := rd.Resolve("refs/heads/" + branch)
	if err != nil {
		return nil, err
	}
	var c *compiled
	if rq.config != nil {
		c, err = s.compileSource(rd, commit, rq.config)
		if err == nil && c.broken() {
			// A config the task gave is its input: refused, not a failed build.
			d := c.cfg.Diagnostics().Filter(spec.SeverityError)[0]
			return nil, fault.Invalid("config", "config:%d:%d: %s", d.Pos.Line, d.Pos.Column, d.Message)
		}
	} else {
		c, err = s.compile(rd, commit)
	}
	if err != nil {
		return nil, err
	}
	return s.create(ctx, c, rq)
}

// ChildRequest is a build a running pipeline starts: cnb:apply in its own repo, cnb:trigger in
// another one (the scheduler authorizes Access with the token the task names).
type ChildRequest struct {
	// Principal and Slug name another repo of this install (cnb:trigger): Slug is "org/repo",
	// which Principal must be able to write to. A nil Principal is the parent's own repo
	// (cnb:apply), which the pipeline writes to by its nature.
	Principal     *auth.Principal
	Slug          string
	UserID        *int64 // who it runs as
	Branch, Event string
	Env           map[string]string // the task's env and the APPLY_TRIGGER_* / API_TRIGGER_* variables
	Config        []byte            // a .cnb.yml to plan instead of the branch's (cnb:apply); nil: the branch's
	// OriginPrefix ("APPLY_TRIGGER_", "API_TRIGGER_") gets USER: the username the parent runs as.
	OriginPrefix string
}

// childAccess resolves the repo a child build belongs to (ChildRequest).
func (s *Service) childAccess(ctx context.Context, parent *Pipeline, rq ChildRequest) (*repo.Access, error) {
	if rq.Principal == nil {
		r, o, err := s.repos.ByID(ctx, parent.RepoID)
		if err != nil {
			return nil, err
		}
		return &repo.Access{Repo: r, Org: o, Level: repo.Write}, nil
	}
	orgName, repoName, ok := strings.Cut(rq.Slug, "/")
	if !ok {
		return nil, fault.Invalid("slug", "slug is org/repo, not %q", rq.Slug)
	}
	return s.repos.Resolve(ctx, rq.Principal, orgName, repoName, repo.Write)
}

// MaxChildDepth bounds chains of builds that start builds, so a pipeline that applies itself
// stops.
const MaxChildDepth = 5

// StartChild creates the build a running pipeline asks for and links it to that pipeline and
// its build.
func (s *Service) StartChild(ctx context.Context, parent *Pipeline, rq ChildRequest) (*ChildState, error) {
	access, err := s.childAccess(ctx, parent, rq)
	if err != nil {
		return nil, err
	}
	depth := 0
	for id := parent.BuildID; ; depth++ {
		if depth >= MaxChildDepth {
			return nil, fault.Conflict("builds started by pipelines nest at most %d deep", MaxChildDepth)
		}
		var b Build
		if err := s.db.WithContext(ctx).Select("id, parent_build_id").Take(&b, id).Error; err != nil {
			return nil, err
		}
		if b.ParentBuildID == nil {
			break
		}
		id = *b.ParentBuildID
	}
	if !strings.HasPrefix(rq.Event, spec.EventAPITrigger) || !isManualEvent(rq.Event) {
		return nil, fault.Invalid("event", "a build a pipeline starts has an api_trigger or api_trigger_* event, not %q", rq.Event)
	}
	branch := rq.Branch
	if branch == "" {
		branch = access.Repo.DefaultBranch
	}
	if err := checkManualEnv(rq.Env); err != nil {
		return nil, err
	}
	if access.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived", access.Org.Name, access.Repo.Name)
	}
	if rq.OriginPrefix != "" {
		var pb Build
		if err := s.db.WithContext(ctx).Select("id, triggered_by").Take(&pb, parent.BuildID).Error; err != nil {
			return nil, err
		}
		if pb.TriggeredBy != nil {
			if u, err := s.users.UserByID(ctx, *pb.TriggeredBy); err == nil {
				rq.Env[rq.OriginPrefix+"USER"] = u.Username
			}
		}
	}
	var user *auth.User
	if rq.UserID != nil {
		u, err := s.users.UserByID(ctx, *rq.UserID)
		if err != nil {
			return nil, err
		}
		user = u
	}
	b, err := s.createAt(ctx, access.Repo, branch, request{repo: access.Repo, org: access.Org, user: user, event: rq.Event,
		branch: branch, trigger: spec.Trigger{Event: rq.Event, Branch: branch}, extraEnv: rq.Env, config: rq.Config, parent: parent})
	if errors.Is(err, git.ErrUnknownRevision) || errors.Is(err, git.ErrInvalid) {
		return nil, fault.Invalid("branch", "branch %q does not exist", branch)
	}
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fault.Invalid("event", "the .cnb.yml of %s declares no pipeline for %s", branch, rq.Event)
	}
	return &ChildState{Build: b, Slug: access.Org.Name + "/" + access.Repo.Name}, nil
}

// ChildState is how a build a pipeline started stands.
type ChildState struct {
	Build *Build
	Slug  string
	// LastJobExports are the exports of the child's job that finished last.
	LastJobExports map[string]string
}

// Child returns build number of the repo slug ("org/repo") if the pipeline's build started it
// (404 for any other).
func (s *Service) Child(ctx context.Context, parent *Pipeline, slug string, number int64) (*ChildState, error) {
	orgName, repoName, _ := strings.Cut(slug, "/")
	var b Build
	err := s.db.WithContext(ctx).Table("builds b").Select("b.*").Joins("JOIN repos r ON r.id = b.repo_id").Joins("JOIN orgs o ON o.id = r.org_id").
		Where("o.name = ? AND r.name = ? AND b.number = ? AND b.parent_build_id = ?", orgName, repoName, number, parent.BuildID).Take(&b).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("build %s#%d was not started by this pipeline's build", slug, number)
	}
	if err != nil {
		return nil, err
	}
	st := &ChildState{Build: &b, Slug: slug, LastJobExports: map[string]string{}}
	var j Job
	err = s.db.WithContext(ctx).Table("jobs j").Select("j.*").Joins("JOIN pipelines p ON p.id = j.pipeline_id").
		Where("p.build_id = ? AND j.finished_at IS NOT NULL", b.ID).Order("j.finished_at DESC, j.id DESC").Limit(1).Take(&j).Error
	if err == nil && j.Exports != "" {
		json.Unmarshal([]byte(j.Exports), &st.LastJobExports)
	}
	return st, nil
}

// Manual starts a build of a web_trigger*/api_trigger* event on a branch's head with extra env.
func (s *Service) Manual(ctx context.Context, a *repo.Access, user *auth.User, branch, event string, env map[string]string) (*Build, error) {
	if event == "" {
		event = spec.EventWebTrigger
	}
	if !isManualEvent(event) {
		return nil, fault.Invalid("event", "manual builds use web_trigger, web_trigger_*, api_trigger or api_trigger_* events")
	}
	if branch == "" {
		branch = a.Repo.DefaultBranch
	}
	if err := checkManualEnv(env); err != nil {
		return nil, err
	}
	if a.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived; unarchive it to run builds", a.Org.Name, a.Repo.Name)
	}
	return s.manual(ctx, a, user, branch, event, env)
}

// OpenWorkspace fires the vscode event on a branch (the default one when ""): the pipelines
// the .cnb.yml declares for it (its own branch key, else "$") are workspaces.
func (s *Service) OpenWorkspace(ctx context.Context, a *repo.Access, user *auth.User, branch string) (*Build, error) {
	if branch == "" {
		branch = a.Repo.DefaultBranch
	}
	if a.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived; unarchive it to open workspaces", a.Org.Name, a.Repo.Name)
	}
	return s.manual(ctx, a, user, branch, spec.EventVSCode, nil)
}

// manual creates a build of event on branch, started by user.
func (s *Service) manual(ctx context.Context, a *repo.Access, user *auth.User, branch, event string, env map[string]string) (*Build, error) {
	b, err := s.createAt(ctx, a.Repo, branch, request{repo: a.Repo, org: a.Org, user: user, event: event, branch: branch,
		trigger: spec.Trigger{Event: event, Branch: branch}, extraEnv: env})
	if errors.Is(err, git.ErrUnknownRevision) || errors.Is(err, git.ErrInvalid) {
		return nil, fault.Invalid("branch", "branch %q does not exist", branch)
	}
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fault.Invalid("event", "the .cnb.yml of %s declares no pipeline for %s", branch, event)
	}
	return b, nil
}

func isManualEvent(e string) bool {
	return e == spec.EventWebTrigger || e == spec.EventAPITrigger ||
		(strings.HasPrefix(e, "web_trigger_") && len(e) > len("web_trigger_")) ||
		(strings.HasPrefix(e, "api_trigger_") && len(e) > len("api_trigger_"))
}

// checkManualEnv refuses env a trigger may not set: malformed names and the CNB_ built-ins.
func checkManualEnv(env map[string]string) error {
	for k := range env {
		if !envNameOK(k) {
			return fault.Invalid("env", "%q is not a valid variable name", k)
		}
		if strings.HasPrefix(strings.ToUpper(k), "CNB_") {
			return fault.Invalid("env", "%s is a built-in variable and cannot be set", k)
		}
	}
	return nil
}

func envNameOK(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i, c := range k {
		ok := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// registerSchedules syncs the branch's registered schedules with its compiled .cnb.yml. A
// broken file keeps the schedules it had (its failed build says why); no file has none. A
// failure is logged: the push's builds do not depend on it.
func (s *Service) registerSchedules(ctx context.Context, r *repo.Repo, branch string, c *compiled, pusher *auth.User) {
	if c.broken() {
		return
	}
	var want []Schedule
	if c.cfg != nil {
		want = schedulesFor(c.cfg.Schedules(), branch, r.ID)
	}
	if err := s.syncSchedules(ctx, r, branch, want, pusher); err != nil {
		s.log.ErrorContext(ctx, "schedules not registered", "branch", branch, "err", err)
	}
}

// schedulesFor picks the schedules of a file that apply to branch. Glob keys apply when they
// match; the fallback key "$" applies, per event kind (schedule or crontab), only when no glob
// key that matches the branch declares that kind — the engine's two-phase rule.
func schedulesFor(all []spec.Schedule, branch string, repoID int64) []Schedule {
	kind := func(event string) string {
		if strings.HasPrefix(event, "crontab") {
			return "crontab"
		}
		return event
	}
	var out []Schedule
	globbed := map[string]bool{}
	for _, sc := range all {
		if sc.BranchKey == "$" {
			continue
		}
		if g, err := spec.CompileGlob(sc.BranchKey); err == nil && g.Match(branch) {
			globbed[kind(sc.Event)] = true
			out = append(out, Schedule{RepoID: repoID, Branch: branch, Event: sc.Event, Cron: sc.Cron})
		}
	}
	for _, sc := range all {
		if sc.BranchKey == "$" && !globbed[kind(sc.Event)] {
			out = append(out, Schedule{RepoID: repoID, Branch: branch, Event: sc.Event, Cron: sc.Cron})
		}
	}
	return out
}

// syncSchedules makes the branch's registered schedules exactly want. An entry that stays keeps
// its author; new ones run as the pusher.
func (s *Service) syncSchedules(ctx context.Context, r *repo.Repo, branch string, want []Schedule, pusher *auth.User) error {
	now := s.clock.Now().UTC()
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		var have []Schedule
		if err := tx.Where("repo_id = ? AND branch = ?", r.ID, branch).Find(&have).Error; err != nil {
			return err
		}
		key := func(sc Schedule) string { return sc.Event + "\x00" + sc.Cron }
		wanted := map[string]bool{}
		for _, sc := range want {
			wanted[key(sc)] = true
		}
		existing := map[string]bool{}
		for _, sc := range have {
			existing[key(sc)] = true
			if !wanted[key(sc)] {
				if err := tx.Delete(&sc).Error; err != nil {
					return err
				}
			}
		}
		for _, sc := range want {
			if existing[key(sc)] || pusher == nil {
				continue
			}
			existing[key(sc)] = true
			sc.UserID, sc.CreatedAt, sc.UpdatedAt = pusher.ID, now, now
			if err := tx.Create(&sc).Error; err != nil {
				return fmt.Errorf("register schedule %s: %w", sc.Cron, err)
			}
		}
		return nil
	})
}

// fire creates the build of one schedule on the head of its branch, run as the user who last
// pushed the entry. It returns nil when the branch is gone or nothing matches any more.
func (s *Service) fire(ctx context.Context, sc *Schedule) (*Build, error) {
	r, o, err := s.repos.ByID(ctx, sc.RepoID)
	if err != nil {
		return nil, err
	}
	user, err := s.users.UserByID(ctx, sc.UserID)
	if err != nil {
		user = nil // the author left: the build runs as nobody
	}
	b, err := s.createAt(ctx, r, sc.Branch, request{repo: r, org: o, user: user, event: sc.Event, branch: sc.Branch,
		trigger: spec.Trigger{Event: sc.Event, Branch: sc.Branch, Cron: sc.Cron}})
	if errors.Is(err, git.ErrUnknownRevision) {
		return nil, nil // the branch is gone
	}
	return b, err
}

// Rerun starts a new build of the same commit, event and ref with the plans the original made,
// as the user who asked. Pipelines the original skipped are skipped again.
func (s *Service) Rerun(ctx context.Context, a *repo.Access, user *auth.User, orig *Build) (*Build, error) {
	if orig.Status == StatusFailed && orig.ErrorMessage != "" {
		return nil, fault.Conflict("build #%d never planned a pipeline (%s); push a fixed .cnb.yml instead", orig.Number, orig.ErrorMessage)
	}
	if a.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived; unarchive it to run builds", a.Org.Name, a.Repo.Name)
	}
	return s.rerun(ctx, user, orig, a.Org.ID, nil)
}

// RerunFailed re-runs, in a new build, only the original's pipelines that did not succeed
// (failed, cancelled or terminated). A pipeline's jobs share one node and checkout, so a
// pipeline with a failed job runs again whole, as GitLab retries a job with its needs. The
// original must have ended, with something that did not succeed.
func (s *Service) RerunFailed(ctx context.Context, a *repo.Access, user *auth.User, orig *Build) (*Build, error) {
	if orig.Status == StatusFailed && orig.ErrorMessage != "" {
		return nil, fault.Conflict("build #%d never planned a pipeline (%s); push a fixed .cnb.yml instead", orig.Number, orig.ErrorMessage)
	}
	if !Terminal(orig.Status) {
		return nil, fault.Conflict("build #%d is still %s: re-run its failed jobs once it has ended", orig.Number, orig.Status)
	}
	if a.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived; unarchive it to run builds", a.Org.Name, a.Repo.Name)
	}
	return s.rerunWhere(ctx, user, orig, a.Org.ID, nil, func(p Pipeline) bool {
		return p.Status == StatusFailed || p.Status == StatusCancelled || p.Status == StatusTerminated
	})
}

// rerun stores the new build of a rerun; edit, when set, changes the plan of the pipeline at
// each position first.
func (s *Service) rerun(ctx context.Context, user *auth.User, orig *Build, orgID int64, edit func(pos int, plan *protocol.Plan)) (*Build, error) {
	return s.rerunWhere(ctx, user, orig, orgID, edit, nil)
}

// rerunWhere is rerun of the pipelines keep accepts (all when nil).
func (s *Service) rerunWhere(ctx context.Context, user *auth.User, orig *Build, orgID int64, edit func(pos int, plan *protocol.Plan), keep func(Pipeline) bool) (*Build, error) {
	var ps []Pipeline
	if err := s.db.WithContext(ctx).Where("build_id = ?", orig.ID).Order("position").Find(&ps).Error; err != nil {
		return nil, err
	}
	if keep != nil {
		ps = slices.DeleteFunc(ps, func(p Pipeline) bool { return !keep(p) })
		if len(ps) == 0 {
			return nil, fault.Conflict("build #%d has no failed, cancelled or terminated pipeline to re-run", orig.Number)
		}
	}
	plans := make([]protocol.Plan, len(ps))
	for i, p := range ps {
		if err := json.Unmarshal([]byte(p.Plan), &plans[i]); err != nil {
			return nil, err
		}
		if plans[i].Builtins == nil {
			plans[i].Builtins = map[string]string{}
		}
		plans[i].Builtins["CNB_IS_RETRY"] = "true"
		if user != nil {
			plans[i].Builtins["CNB_BUILD_USER"] = user.Username
		}
		if edit != nil {
			edit(p.Position, &plans[i])
		}
	}
	origID := orig.ID
	b := &Build{RepoID: orig.RepoID, Event: orig.Event, Branch: orig.Branch, Tag: orig.Tag, CommitSHA: orig.CommitSHA,
		CommitMessage: orig.CommitMessage, Status: StatusQueued, RerunOf: &origID}
	if user != nil {
		id := user.ID
		b.TriggeredBy = &id
	}
	return b, s.store(ctx, b, orgID, plans)
}

// links fills a build's parent and children, those visible says the caller may see (a link
// names another repo, maybe another team's private one).
func (s *Service) links(ctx context.Context, b *Build, j *JSON, visible func(slug string) bool) error {
	link := func(x Build, pipeline int64) (BuildLinkJSON, bool, error) {
		r, o, err := s.repos.ByID(ctx, x.RepoID)
		if err != nil {
			return BuildLinkJSON{}, false, err
		}
		slug := o.Name + "/" + r.Name
		if x.RepoID != b.RepoID && !visible(slug) {
			return BuildLinkJSON{}, false, nil
		}
		return BuildLinkJSON{Repo: slug, Number: x.Number, Status: x.Status, Pipeline: pipeline}, true, nil
	}
	if b.RerunOf != nil {
		var orig Build
		if err := s.db.WithContext(ctx).Take(&orig, *b.RerunOf).Error; err == nil {
			// The same repo as b: always visible.
			if l, ok, err := link(orig, 0); err != nil {
				return err
			} else if ok {
				j.RerunOf = &l
			}
		}
	}
	if b.ParentBuildID != nil {
		var parent Build
		if err := s.db.WithContext(ctx).Take(&parent, *b.ParentBuildID).Error; err == nil {
			l, ok, err := link(parent, *b.ParentPipelineID)
			if err != nil {
				return err
			}
			if ok {
				j.Parent = &l
			}
		}
	}
	var kids []Build
	if err := s.db.WithContext(ctx).Where("parent_build_id = ?", b.ID).Order("id").Limit(100).Find(&kids).Error; err != nil {
		return err
	}
	for _, k := range kids {
		l, ok, err := link(k, *k.ParentPipelineID)
		if err != nil {
			return err
		}
		if ok {
			j.Children = append(j.Children, l)
		}
	}
	return nil
}
