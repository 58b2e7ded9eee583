package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/agent/protocol"
	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store"
)

// OnPush turns the refs a push updated into builds, one per event that has pipelines:
//
//	branch pushed   → push (and branch.create for a new branch, commit.add when commits came)
//	branch deleted  → branch.delete, planned from the default branch's .cnb.yml
//	tag pushed      → tag_push
//
// and registers the schedules of each pushed branch's .cnb.yml. A broken .cnb.yml yields one
// failed build for the ref's main event. Errors are logged, never returned: the push itself has
// already succeeded.
func (s *Service) OnPush(ctx context.Context, repoID int64, pusher *auth.User, updates []git.RefUpdate) []*Build {
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
	return builds
}

func (s *Service) onRef(ctx context.Context, r *repo.Repo, o *org.Org, pusher *auth.User, u git.RefUpdate) ([]*Build, error) {
	path := s.repos.Path(r)
	switch {
	case strings.HasPrefix(u.Ref, "refs/heads/"):
		branch := strings.TrimPrefix(u.Ref, "refs/heads/")
		if git.IsZeroSHA(u.New) {
			if err := s.syncSchedules(ctx, r, branch, nil, pusher); err != nil {
				return nil, err
			}
			head, err := git.ResolveRef(ctx, path, "refs/heads/"+r.DefaultBranch)
			if err != nil {
				return nil, nil // no default branch to read a config from
			}
			b, err := s.create(ctx, request{repo: r, org: o, user: pusher, event: spec.EventBranchDel, branch: branch,
				commit: head, before: u.Old, trigger: spec.Trigger{Event: spec.EventBranchDel, Branch: branch}})
			return nonNil(b), err
		}
		isNew := git.IsZeroSHA(u.Old)
		var changed []string
		if !isNew {
			var err error
			if changed, err = git.ChangedFiles(ctx, path, u.Old, u.New, MaxChangedFiles); err != nil {
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
		if n, err := git.NewCommits(ctx, path, u.Old, u.New, 99); err == nil && n > 0 && !isNew {
			events = append(events, spec.EventCommitAdd)
		}
		if err := s.registerSchedules(ctx, r, branch, u.New, pusher); err != nil {
			s.log.ErrorContext(ctx, "schedules not registered", "branch", branch, "err", err)
		}
		var out []*Build
		for i, ev := range events {
			b, err := s.create(ctx, request{repo: r, org: o, user: pusher, event: ev, branch: branch, commit: u.New,
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
	case strings.HasPrefix(u.Ref, "refs/tags/"):
		if git.IsZeroSHA(u.New) {
			return nil, nil
		}
		tag := strings.TrimPrefix(u.Ref, "refs/tags/")
		commit, err := git.ResolveRef(ctx, path, u.Ref)
		if err != nil {
			return nil, err
		}
		b, err := s.create(ctx, request{repo: r, org: o, user: pusher, event: spec.EventTagPush, tag: tag, commit: commit,
			before: u.Old, trigger: spec.Trigger{Event: spec.EventTagPush, Tag: tag}})
		return nonNil(b), err
	}
	return nil, nil
}

func nonNil(b *Build) []*Build {
	if b == nil {
		return nil
	}
	return []*Build{b}
}

// Manual starts a build of a web_trigger*/api_trigger* event on a branch's head with extra env.
func (s *Service) Manual(ctx context.Context, a *repo.Access, user *auth.User, branch, event string, env map[string]string) (*Build, error) {
	if event == "" {
		event = spec.EventWebTrigger
	}
	if !isManualEvent(event) {
		return nil, api.Invalid("event", "manual builds use web_trigger, web_trigger_*, api_trigger or api_trigger_* events")
	}
	if branch == "" {
		branch = a.Repo.DefaultBranch
	}
	for k := range env {
		if !envNameOK(k) {
			return nil, api.Invalid("env", "%q is not a valid variable name", k)
		}
		if strings.HasPrefix(strings.ToUpper(k), "CNB_") {
			return nil, api.Invalid("env", "%s is a built-in variable and cannot be set", k)
		}
	}
	if a.Repo.Archived {
		return nil, api.Conflict("%s/%s is archived; unarchive it to run builds", a.Org.Name, a.Repo.Name)
	}
	commit, err := git.ResolveRef(ctx, s.repos.Path(a.Repo), "refs/heads/"+branch)
	if err != nil {
		return nil, api.Invalid("branch", "branch %q does not exist", branch)
	}
	b, err := s.create(ctx, request{repo: a.Repo, org: a.Org, user: user, event: event, branch: branch, commit: commit,
		trigger: spec.Trigger{Event: event, Branch: branch}, extraEnv: env})
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, api.Invalid("event", "the .cnb.yml of %s declares no pipeline for %s", branch, event)
	}
	return b, nil
}

func isManualEvent(e string) bool {
	return e == spec.EventWebTrigger || e == spec.EventAPITrigger ||
		(strings.HasPrefix(e, "web_trigger_") && len(e) > len("web_trigger_")) ||
		(strings.HasPrefix(e, "api_trigger_") && len(e) > len("api_trigger_"))
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

// registerSchedules reads the branch's .cnb.yml at commit and syncs its schedules.
func (s *Service) registerSchedules(ctx context.Context, r *repo.Repo, branch, commit string, pusher *auth.User) error {
	path := s.repos.Path(r)
	src, err := git.ReadFile(ctx, path, commit, ConfigFile)
	if errors.Is(err, git.ErrNotExist) {
		return s.syncSchedules(ctx, r, branch, nil, pusher)
	}
	if err != nil {
		return err
	}
	opts := s.opts
	opts.File = ConfigFile
	opts.Files = gitFiles{ctx: ctx, path: path, commit: commit}
	cfg, diags := spec.Parse(src, opts)
	if diags.HasErrors() {
		return nil // a broken file keeps the schedules it had; the failed build says why
	}
	return s.syncSchedules(ctx, r, branch, schedulesFor(cfg.Schedules(), branch, r.ID), pusher)
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

// Schedules lists the repo's registered schedules.
func (s *Service) Schedules(ctx context.Context, repoID int64) ([]Schedule, error) {
	var out []Schedule
	err := s.db.WithContext(ctx).Where("repo_id = ?", repoID).Order("id").Find(&out).Error
	return out, err
}

// FireSchedule creates the build of one schedule on the head of its branch, run as the user who
// last pushed the entry. It returns nil when the branch is gone or nothing matches any more.
func (s *Service) FireSchedule(ctx context.Context, sc *Schedule) (*Build, error) {
	r, o, err := s.repos.ByID(ctx, sc.RepoID)
	if err != nil {
		return nil, err
	}
	commit, err := git.ResolveRef(ctx, s.repos.Path(r), "refs/heads/"+sc.Branch)
	if err != nil {
		return nil, nil
	}
	var user *auth.User
	var u auth.User
	if s.db.WithContext(ctx).Take(&u, sc.UserID).Error == nil {
		user = &u
	}
	return s.create(ctx, request{repo: r, org: o, user: user, event: sc.Event, branch: sc.Branch, commit: commit,
		trigger: spec.Trigger{Event: sc.Event, Branch: sc.Branch, Cron: sc.Cron}})
}

// Rerun starts a new build of the same commit, event and ref with the plans the original made,
// as the user who asked. Pipelines the original skipped are skipped again.
func (s *Service) Rerun(ctx context.Context, a *repo.Access, user *auth.User, orig *Build) (*Build, error) {
	if orig.Status == StatusFailed && orig.ErrorMessage != "" {
		return nil, api.Conflict("build #%d never planned a pipeline (%s); push a fixed .cnb.yml instead", orig.Number, orig.ErrorMessage)
	}
	if a.Repo.Archived {
		return nil, api.Conflict("%s/%s is archived; unarchive it to run builds", a.Org.Name, a.Repo.Name)
	}
	var ps []Pipeline
	if err := s.db.WithContext(ctx).Where("build_id = ?", orig.ID).Order("position").Find(&ps).Error; err != nil {
		return nil, err
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
	}
	b := &Build{RepoID: orig.RepoID, Event: orig.Event, Branch: orig.Branch, Tag: orig.Tag, CommitSHA: orig.CommitSHA,
		CommitMessage: orig.CommitMessage, Status: StatusQueued}
	if user != nil {
		id := user.ID
		b.TriggeredBy = &id
	}
	return b, s.store(ctx, b, a.Org.ID, plans)
}
