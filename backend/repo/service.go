package repo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/secrets"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Service holds the repo logic.
type Service struct {
	db    *gorm.DB
	orgs  *org.Service
	box   *secrets.Box
	clock clock.Clock
	log   *slog.Logger
	root  string // directory of the bare repositories
}

// NewService returns the repo service; root is where bare repositories live.
func NewService(db *gorm.DB, orgs *org.Service, box *secrets.Box, clk clock.Clock, root string, log *slog.Logger) *Service {
	s := &Service{db: db, orgs: orgs, box: box, clock: clk, log: log, root: root}
	orgs.OnDelete(func(ctx context.Context, tx *gorm.DB, o *org.Org) error {
		var n int64
		if err := tx.Model(&Repo{}).Where("org_id = ?", o.ID).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return fault.Conflict("org %s still has %d repo(s); delete them first", o.Name, n)
		}
		return nil
	})
	return s
}

// Path is the repo's bare git directory.
func (s *Service) Path(r *Repo) string { return filepath.Join(s.root, fmt.Sprintf("%d.git", r.ID)) }

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	branchRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)
)

// ValidateName checks a repo name: it becomes a URL and directory segment, so it is strict.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) || strings.HasSuffix(strings.ToLower(name), ".git") || strings.Contains(name, "..") {
		return fault.Invalid("name", "repo name must be 1–100 letters, digits, '.', '-' or '_', start with a letter or digit, and not end in .git")
	}
	return nil
}

func validateBranch(b string) error {
	if !branchRE.MatchString(b) || strings.Contains(b, "..") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") || strings.Contains(b, "//") {
		return fault.Invalid("default_branch", "%q is not a valid branch name", b)
	}
	return nil
}

func validateVisibility(v string) error {
	if v != Private && v != Public {
		return fault.Invalid("visibility", "visibility must be private or public")
	}
	return nil
}

// Create makes a repo in the org with an empty bare repository on disk.
func (s *Service) Create(ctx context.Context, o *org.Org, name, visibility, defaultBranch, description string) (*Repo, error) {
	if visibility == "" {
		visibility = Private
	}
	if defaultBranch == "" {
		defaultBranch = "main"
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := validateVisibility(visibility); err != nil {
		return nil, err
	}
	if err := validateBranch(defaultBranch); err != nil {
		return nil, err
	}
	if len(description) > 1000 {
		return nil, fault.Invalid("description", "description must be at most 1000 characters")
	}
	now := s.clock.Now().UTC()
	r := &Repo{OrgID: o.ID, Name: name, Description: description, Visibility: visibility, DefaultBranch: defaultBranch, CreatedAt: now, UpdatedAt: now}
	return s.insert(ctx, o, r, nil)
}

// CreateSecretRepo makes a secret repository (secretfiles.go): always private, with an empty
// bare repository on disk that git never reaches (GitResolver refuses it), so the code that
// reads repos sees an empty one.
func (s *Service) CreateSecretRepo(ctx context.Context, o *org.Org, name, description string) (*Repo, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if len(description) > 1000 {
		return nil, fault.Invalid("description", "description must be at most 1000 characters")
	}
	now := s.clock.Now().UTC()
	r := &Repo{OrgID: o.ID, Name: name, Description: description, Visibility: Private, DefaultBranch: "main",
		Secret: true, CreatedAt: now, UpdatedAt: now}
	return s.insert(ctx, o, r, nil)
}

// MaxForkDepth bounds a chain of forks of forks: git follows at most five levels of borrowed
// objects (objects/info/alternates).
const MaxForkDepth = 4

// Fork copies src into team o as name ("" keeps src's name), as GitHub's fork does: the same
// visibility, description and default branch, every branch and tag, and no pull requests,
// secrets, settings or builds. The fork borrows src's git objects instead of copying them
// (git.ShareObjects), so forking costs nothing on disk and takes as long for a large history as
// for a small one. A secret repository has no git content to fork.
func (s *Service) Fork(ctx context.Context, src *Repo, o *org.Org, name string) (*Repo, error) {
	if name == "" {
		name = src.Name
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if src.Secret {
		return nil, fault.Invalid("repo", "a secret repository holds sealed files, not code: it cannot be forked")
	}
	// The new fork's depth is src's (how many fork_of links lead up from it) plus one.
	depth := 1
	for up := src.ForkOf; up != nil && depth <= MaxForkDepth; depth++ {
		var parent Repo
		if err := s.db.WithContext(ctx).Select("id", "fork_of").Take(&parent, *up).Error; err != nil {
			return nil, err
		}
		up = parent.ForkOf
	}
	if depth > MaxForkDepth {
		return nil, fault.Invalid("repo", "forks of forks go %d deep at most: fork the repository this one was forked from", MaxForkDepth)
	}
	now := s.clock.Now().UTC()
	id := src.ID
	r := &Repo{OrgID: o.ID, Name: name, Description: src.Description, Visibility: src.Visibility, DefaultBranch: src.DefaultBranch,
		ForkOf: &id, CreatedAt: now, UpdatedAt: now}
	from := s.Path(src)
	return s.insert(ctx, o, r, func(path string) error {
		if err := git.ShareObjects(ctx, path, from); err != nil {
			return err
		}
		if err := git.CopyRefs(ctx, path, from); err != nil {
			return err
		}
		return git.SetHEAD(ctx, path, src.DefaultBranch)
	})
}

// insert stores r and makes its bare repository, together: the directory is created inside
// the transaction, so if git fails no row remains, and if the commit fails the directory this
// call made is removed. fill, when not nil, fills the new bare repository (a fork's refs)
// inside the transaction too.
//
// A directory already at the new repo's path belongs to no row: the data directory is out of
// step with the database (a database restored from a backup older than the data directory,
// which then reuses the ids of repos made since). It is never touched, the repo is not made,
// the caller gets a 409 that says so, and the log an error naming the directory, since only
// an operator can reconcile the two.
func (s *Service) insert(ctx context.Context, o *org.Org, r *Repo, fill func(path string) error) (*Repo, error) {
	name, defaultBranch := r.Name, r.DefaultBranch
	created := false
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := tx.Create(r).Error; err != nil {
			return err
		}
		if err := git.InitBare(ctx, s.Path(r), defaultBranch); err != nil {
			return err
		}
		created = true
		if fill != nil {
			return fill(s.Path(r))
		}
		return nil
	})
	switch {
	case err == nil:
		return r, nil
	case store.IsUniqueViolation(err):
		return nil, fault.Conflict("repo %s/%s already exists", o.Name, name)
	case errors.Is(err, fs.ErrExist):
		s.log.ErrorContext(ctx, "repository storage is out of step with the database: a directory without a repo row "+
			"is where a new repo would go; nothing was created and the directory was left as it is", "dir", s.Path(r),
			"repo_id", r.ID, "org", o.Name, "repo", name)
		return nil, fault.Conflict("repo %s/%s was not created: the server's repository storage already holds a repository "+
			"where this one would go (its data directory is out of step with its database, as after restoring an older "+
			"database backup). Nothing was created or overwritten; an administrator must reconcile them (the server log "+
			"names the directory)", o.Name, name)
	}
	if created {
		os.RemoveAll(s.Path(r))
	}
	return nil, err
}

// Access is a resolved repo with what the caller may do to it.
type Access struct {
	Repo  *Repo
	Org   *org.Org
	Level Level
	Role  org.Role // the caller's role in the org, "" for non-members
}

// Resolve loads org/name for a principal and checks it may act at level need. A caller who may
// not even read the repo gets 404 (private repos of other teams do not exist for them); a caller
// who may read it but not do more gets 403, as does a token without the needed scope.
func (s *Service) Resolve(ctx context.Context, p *auth.Principal, orgName, name string, need Level) (*Access, error) {
	return s.resolve(ctx, p, orgName, name, need, auth.ScopeRepoRead, auth.ScopeRepoWrite)
}

// ResolveRegistry is Resolve for the repo's artifacts (OCI images, model files): the same
// levels and answers, but a token needs registry:read to read and registry:write to write or
// delete, instead of the repo scopes.
func (s *Service) ResolveRegistry(ctx context.Context, p *auth.Principal, orgName, name string, need Level) (*Access, error) {
	return s.resolve(ctx, p, orgName, name, need, auth.ScopeRegistryRead, auth.ScopeRegistryWrite)
}

func (s *Service) resolve(ctx context.Context, p *auth.Principal, orgName, name string, need Level, readScope, writeScope string) (*Access, error) {
	notFound := fault.NotFound("repo %s/%s not found", orgName, name)
	o, err := s.orgs.ByName(ctx, orgName)
	if err != nil {
		var ae *fault.Error
		if errors.As(err, &ae) && ae.Code == fault.CodeNotFound {
			return nil, notFound
		}
		return nil, err
	}
	var r Repo
	err = s.db.WithContext(ctx).Where("org_id = ? AND lower(name) = lower(?)", o.ID, name).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	a := &Access{Repo: &r, Org: o}
	if err := s.levelOf(ctx, p, a); err != nil {
		return nil, err
	}
	if a.Level == None {
		return nil, notFound
	}
	scope := readScope
	if need >= Write {
		scope = writeScope
	}
	// Scopes bound credentials; an anonymous caller has none to check, only its level.
	if p.Authenticated() {
		if err := p.Need(scope); err != nil {
			return nil, err
		}
	}
	if a.Level < need {
		if !p.Authenticated() {
			return nil, fault.Unauthenticated("sign in or send a token to %s %s/%s", need, o.Name, r.Name)
		}
		return nil, fault.Forbidden("this needs %s access to %s/%s (you have %s)", need, o.Name, r.Name, a.Level)
	}
	return a, nil
}

// LevelOf is the access user userID has to r of o, as a session of theirs would have: who may
// be asked to review, for instance.
func (s *Service) LevelOf(ctx context.Context, o *org.Org, r *Repo, userID int64) (Level, error) {
	a := &Access{Repo: r, Org: o}
	err := s.levelOf(ctx, &auth.Principal{Kind: auth.KindSession, User: &auth.User{ID: userID}}, a)
	return a.Level, err
}

func (s *Service) levelOf(ctx context.Context, p *auth.Principal, a *Access) error {
	public := a.Repo.Visibility == Public
	floor := None
	if public {
		floor = Read
	}
	switch p.Kind {
	case auth.KindSession, auth.KindToken:
		role, err := s.orgs.RoleOf(ctx, a.Org.ID, p.UserID())
		if err != nil {
			return err
		}
		a.Role = role
		switch {
		case role.CanAdmin():
			a.Level = Admin
		case role.CanWrite():
			a.Level = Write
		case role.IsMember():
			a.Level = Read
		default:
			a.Level = floor
		}
	case auth.KindDeploy:
		a.Level = floor
		if p.RepoID == a.Repo.ID {
			a.Level = Read
		}
	case auth.KindJob:
		// A pipeline writes its own repo, unless it runs a pull request's proposed code: then
		// its token lacks repo:write and it reads (build.JobScopes).
		a.Level = floor
		if p.RepoID == a.Repo.ID {
			a.Level = Read
			if p.Scopes.Has(auth.ScopeRepoWrite) {
				a.Level = Write
			}
		}
	default:
		a.Level = floor
	}
	return nil
}

// VisibleOrg loads the team name for p under the one rule of who sees a team
// (backend/org/README.md): its members always; anyone else (anonymous callers, other teams,
// deploy and job tokens) only while it has a public repo. A team p may not see is
// org.NotFound, the answer for a name no team has. It returns p's role, "" for a non-member.
func (s *Service) VisibleOrg(ctx context.Context, p *auth.Principal, name string) (*org.Org, org.Role, error) {
	o, err := s.orgs.ByName(ctx, name)
	if err != nil {
		return nil, "", err
	}
	var role org.Role
	if p.User != nil && (p.Kind == auth.KindSession || p.Kind == auth.KindToken) {
		if role, err = s.orgs.RoleOf(ctx, o.ID, p.User.ID); err != nil {
			return nil, "", err
		}
	}
	if role.IsMember() {
		return o, role, nil
	}
	var public []int64
	err = s.db.WithContext(ctx).Model(&Repo{}).Where("org_id = ? AND visibility = ?", o.ID, Public).Limit(1).Pluck("id", &public).Error
	if err != nil {
		return nil, "", err
	}
	if len(public) == 0 {
		return nil, "", org.NotFound(name)
	}
	return o, "", nil
}

// List returns the org's repos that the caller may see: all of them for members, the public ones
// for everyone else.
func (s *Service) List(ctx context.Context, orgID int64, member bool, page paging.Page) ([]Repo, error) {
	q := s.db.WithContext(ctx).Where("org_id = ? AND id > ?", orgID, page.After)
	if !member {
		q = q.Where("visibility = ?", Public)
	}
	var out []Repo
	err := q.Order("id").Limit(page.Limit + 1).Find(&out).Error
	return out, err
}

// Patch holds the changeable fields of a repo; nil means unchanged.
type Patch struct {
	Name          *string `json:"name"`
	Description   *string `json:"description"`
	Visibility    *string `json:"visibility"`
	DefaultBranch *string `json:"default_branch"`
	Archived      *bool   `json:"archived"`
}

// Update applies a patch, validating every field before changing any.
func (s *Service) Update(ctx context.Context, r *Repo, p Patch) error {
	changes := map[string]any{}
	if p.Name != nil {
		if err := ValidateName(*p.Name); err != nil {
			return err
		}
		changes["name"] = *p.Name
	}
	if p.Description != nil {
		if len(*p.Description) > 1000 {
			return fault.Invalid("description", "description must be at most 1000 characters")
		}
		changes["description"] = *p.Description
	}
	if p.Visibility != nil {
		if err := validateVisibility(*p.Visibility); err != nil {
			return err
		}
		if err := s.mayShow(ctx, r, *p.Visibility); err != nil {
			return err
		}
		changes["visibility"] = *p.Visibility
	}
	if p.DefaultBranch != nil {
		if err := validateBranch(*p.DefaultBranch); err != nil {
			return err
		}
		changes["default_branch"] = *p.DefaultBranch
	}
	if p.Archived != nil {
		changes["archived"] = *p.Archived
	}
	if len(changes) == 0 {
		return fault.Invalid("", "nothing to change")
	}
	if p.Visibility != nil && *p.Visibility == Private && r.Visibility != Private {
		if err := s.splitForks(ctx, r); err != nil {
			return err
		}
	}
	changes["updated_at"] = s.clock.Now().UTC()
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := tx.Model(&Repo{}).Where("id = ?", r.ID).Updates(changes).Error; err != nil {
			return err
		}
		if p.DefaultBranch != nil {
			return git.SetHEAD(ctx, s.Path(r), *p.DefaultBranch)
		}
		return nil
	})
	if store.IsUniqueViolation(err) {
		return fault.Conflict("a repo named %q already exists in this org", *p.Name)
	}
	if err != nil {
		return err
	}
	return s.db.WithContext(ctx).Take(r, r.ID).Error
}

// A fork borrows its source's object store (git.ShareObjects), so anyone who can read the fork
// can read any object of the source by its id, those pushed after the fork included: git's
// upload-pack and the code routes serve a commit asked for by SHA. GitHub has the same shape
// and the same two rules, which keep that from ever showing what a reader could not see in the
// source itself:
//   - a fork of a private repository stays private (mayShow), and private forks live only in
//     the source's team (Fork), whose members read the source anyway;
//   - a repository that becomes private first splits off (splitForks) every fork that is
//     public or in another team: each gets its own copy of what it borrows and stops
//     borrowing, so what is pushed to the source from then on is out of its reach.

// mayShow refuses to make a fork of a private repository public.
func (s *Service) mayShow(ctx context.Context, r *Repo, visibility string) error {
	if visibility != Public || r.ForkOf == nil {
		return nil
	}
	var src Repo
	err := s.db.WithContext(ctx).Select("id", "visibility").Take(&src, *r.ForkOf).Error
	if err != nil {
		return err
	}
	if src.Visibility == Private {
		return fault.Invalid("visibility", "a fork of a private repository stays private: it shares the source's git objects")
	}
	return nil
}

// splitForks detaches the forks of r that could read r's objects without reading r once it
// is private: the public ones, and those of other teams.
func (s *Service) splitForks(ctx context.Context, r *Repo) error {
	var forks []Repo
	if err := s.db.WithContext(ctx).Where("fork_of = ? AND (visibility = ? OR org_id <> ?)", r.ID, Public, r.OrgID).Find(&forks).Error; err != nil {
		return err
	}
	for i := range forks {
		if err := git.Dissociate(ctx, s.Path(&forks[i])); err != nil {
			return fmt.Errorf("repo %d: split off fork %d: %w", r.ID, forks[i].ID, err)
		}
		if err := s.db.WithContext(ctx).Model(&Repo{}).Where("id = ?", forks[i].ID).Update("fork_of", nil).Error; err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the repo, its secrets and deploy tokens, and its git directory. Its forks
// first get their own copy of every object they borrow (git.Dissociate): a fork outlives its
// source. A fork that cannot be given its copy stops the delete, so no fork breaks.
func (s *Service) Delete(ctx context.Context, r *Repo) error {
	var forks []Repo
	if err := s.db.WithContext(ctx).Where("fork_of = ?", r.ID).Find(&forks).Error; err != nil {
		return err
	}
	for i := range forks {
		if err := git.Dissociate(ctx, s.Path(&forks[i])); err != nil {
			return fmt.Errorf("repo %d: give fork %d its own objects: %w", r.ID, forks[i].ID, err)
		}
	}
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := tx.Model(&Repo{}).Where("fork_of = ?", r.ID).Update("fork_of", nil).Error; err != nil {
			return err
		}
		for _, m := range []any{&Secret{}, &DeployToken{}, &SecretFile{}, &SecretFileRead{}} {
			if err := tx.Where("repo_id = ?", r.ID).Delete(m).Error; err != nil {
				return err
			}
		}
		return tx.Delete(r).Error
	})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(s.Path(r)); err != nil {
		s.log.ErrorContext(ctx, "repo directory not removed", "repo_id", r.ID, "err", err)
	}
	return nil
}

// forkOf names the repo r was forked from, if p may read it (a private source stays unnamed to
// those who cannot see it).
func (s *Service) forkOf(ctx context.Context, p *auth.Principal, r *Repo) *string {
	if r.ForkOf == nil {
		return nil
	}
	src, o, err := s.ByID(ctx, *r.ForkOf)
	if err != nil {
		return nil
	}
	a := &Access{Repo: src, Org: o}
	if err := s.levelOf(ctx, p, a); err != nil || a.Level == None {
		return nil
	}
	name := o.Name + "/" + src.Name
	return &name
}

// ByID loads a repo and its org without authorization (for internal callers such as triggers).
func (s *Service) ByID(ctx context.Context, id int64) (*Repo, *org.Org, error) {
	var r Repo
	if err := s.db.WithContext(ctx).Take(&r, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, nil, fault.NotFound("repo not found")
		}
		return nil, nil, err
	}
	o, err := s.orgs.ByID(ctx, r.OrgID)
	return &r, o, err
}
