package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Deploys: `.cnb/tag_deploy.yml` (spec.ParseDeploy shows the format) gives a tag a Deploy button
// per environment. The file is read from the repo's default branch, so a tag cannot grant itself
// a deploy; the pipelines come from the tag's own .cnb.yml, under tag_deploy.<name> (tag keys
// match as for tag_push), with CNB_BRANCH the tag and the environment's env. Who may deploy:
// write access to the repo (CNB also wants tag-push rights, which are write access here) and the
// environment's permissions, as for a button. "Deployed" is a successful tag_deploy.<name> build
// of that tag: a requirement holds once one finished, after its delay.

// Deployment is the last deploy of an environment for a tag.
type Deployment struct {
	Build      int64      `json:"build"`
	Status     string     `json:"status"`
	FinishedAt *time.Time `json:"finished_at"`
}

// Environment is a deploy environment as a tag's page shows it: may the caller deploy it now
// (Why says why not), and its last deploy of the tag.
type Environment struct {
	spec.Environment
	Allowed bool        `json:"allowed"`
	Why     string      `json:"why,omitempty"`
	Last    *Deployment `json:"last"`
}

// Environments lists the deploy environments of tag for user.
func (s *Service) Environments(ctx context.Context, a *repo.Access, user *auth.User, tag string) ([]Environment, error) {
	file, err := s.deployFile(ctx, a, tag)
	if err != nil {
		return nil, err
	}
	out := []Environment{}
	for _, e := range file.Environments {
		env := Environment{Environment: e}
		if env.Last, err = s.lastDeploy(ctx, a.Repo.ID, tag, e.Name, false); err != nil {
			return nil, err
		}
		env.Allowed, env.Why = mayDeploy(a, user, e)
		if env.Allowed {
			if env.Why, err = s.unmetRequirement(ctx, a.Repo.ID, tag, e); err != nil {
				return nil, err
			}
			env.Allowed = env.Why == ""
		}
		out = append(out, env)
	}
	return out, nil
}

// Deploy fires tag_deploy.<environment> on tag, as user, and returns the build.
func (s *Service) Deploy(ctx context.Context, a *repo.Access, user *auth.User, tag, environment string) (*Build, error) {
	if a.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived; unarchive it to deploy", a.Org.Name, a.Repo.Name)
	}
	envs, err := s.Environments(ctx, a, user, tag)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(envs, func(e Environment) bool { return e.Name == environment })
	if i < 0 {
		return nil, fault.NotFound("no environment %q in %s", environment, spec.DeployFile)
	}
	e := envs[i]
	if ok, why := mayDeploy(a, user, e.Environment); !ok {
		return nil, fault.Forbidden("%s", why)
	}
	if !e.Allowed {
		return nil, fault.Conflict("cannot deploy %s yet: %s", environment, e.Why)
	}
	if err := checkManualEnv(e.Env); err != nil {
		return nil, fault.Invalid("file", "%s: environment %q: %v", spec.DeployFile, environment, err)
	}
	rd, err := git.OpenReader(ctx, s.repos.Path(a.Repo))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	commit, err := rd.Resolve("refs/tags/" + tag)
	if err != nil {
		return nil, fault.NotFound("tag %q not found", tag)
	}
	c, err := s.compile(rd, commit)
	if err != nil {
		return nil, err
	}
	event := e.Event()
	b, err := s.create(ctx, c, request{repo: a.Repo, org: a.Org, user: user, event: event, tag: tag,
		trigger: spec.Trigger{Event: event, Tag: tag}, extraEnv: e.Env})
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fault.Invalid("environment", "the .cnb.yml of %s declares no pipeline for %s", tag, event)
	}
	return b, nil
}

// mayDeploy applies an environment's permissions as a button's (mayPress), in its own words.
func mayDeploy(a *repo.Access, user *auth.User, e spec.Environment) (bool, string) {
	ok, why := mayPress(a, user, spec.Button{Roles: e.Roles, Users: e.Users})
	why = strings.Replace(why, "pressing a button", "deploying", 1)
	return ok, strings.Replace(why, "this button", "this environment", 1)
}

// deployFile reads the deploy environments from the default branch, once the tag is known.
func (s *Service) deployFile(ctx context.Context, a *repo.Access, tag string) (spec.Deploy, error) {
	path := s.repos.Path(a.Repo)
	if _, err := git.ResolveRef(ctx, path, "refs/tags/"+tag); err != nil || tag == "" {
		return spec.Deploy{}, fault.NotFound("tag %q not found", tag)
	}
	head, err := git.ResolveRef(ctx, path, "refs/heads/"+a.Repo.DefaultBranch)
	if err != nil {
		return spec.Deploy{}, nil // no default branch: no environments
	}
	raw, err := git.ReadFile(ctx, path, head, spec.DeployFile)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, git.ErrNotExist) {
		return spec.Deploy{}, nil
	}
	if unusable(err) {
		return spec.Deploy{}, fault.Invalid("file", "%s: %v", spec.DeployFile, fileError(err))
	}
	if err != nil {
		return spec.Deploy{}, err
	}
	d, err := spec.ParseDeploy(raw)
	if err != nil {
		return spec.Deploy{}, fault.Invalid("file", "%v", err)
	}
	return d, nil
}

// lastDeploy is the newest tag_deploy.<env> build of tag (the newest successful one when
// succeeded); nil when there is none.
func (s *Service) lastDeploy(ctx context.Context, repoID int64, tag, env string, succeeded bool) (*Deployment, error) {
	q := s.db.WithContext(ctx).Where("repo_id = ? AND event = ? AND tag = ?", repoID, "tag_deploy."+env, tag)
	if succeeded {
		q = q.Where("status = ?", StatusSuccess)
	}
	var b Build
	err := q.Order("id DESC").Limit(1).Take(&b).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Deployment{Build: b.Number, Status: b.Status, FinishedAt: b.FinishedAt}, nil
}

// unmetRequirement says which requirement of e does not hold for tag now ("" when all do).
func (s *Service) unmetRequirement(ctx context.Context, repoID int64, tag string, e spec.Environment) (string, error) {
	now := s.clock.Now().UTC()
	for _, r := range e.Require {
		switch r.Kind {
		case spec.RequireApprover, spec.RequireAnnotation:
			return fmt.Sprintf("it requires an %s step, which this installation does not check: remove it from %s to deploy here", r.Kind, spec.DeployFile), nil
		}
		d, err := s.lastDeploy(ctx, repoID, tag, r.Environment, true)
		if err != nil {
			return "", err
		}
		if d == nil || d.FinishedAt == nil {
			return fmt.Sprintf("it requires %s deployed successfully for %s first", r.Environment, tag), nil
		}
		if ready := d.FinishedAt.Add(time.Duration(r.After) * time.Second); now.Before(ready) {
			return fmt.Sprintf("it requires %s deployed %ds before (build #%d finished at %s; ready at %s)",
				r.Environment, r.After, d.Build, d.FinishedAt.UTC().Format(time.RFC3339), ready.UTC().Format(time.RFC3339)), nil
		}
	}
	return "", nil
}
