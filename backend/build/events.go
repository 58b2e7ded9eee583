package build

import (
	"context"
	"errors"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// BranchEvents is what "Run a build" offers for one branch: the repo's branches, and the
// events the branch's .cnb.yml declares with their pipelines. Manual ones can be run from the
// dashboard (POST …/builds); the others are listed so a user sees why theirs is missing.
type BranchEvents struct {
	Branch   string          `json:"branch"`
	Branches []string        `json:"branches"`
	Events   []BranchEventJS `json:"events"`
	// Problem says why there are no events: no .cnb.yml on the branch, or a file that does not
	// parse (its first error). "" when the file planned.
	Problem string `json:"problem,omitempty"`
}

// BranchEventJS is one declared event.
type BranchEventJS struct {
	Event     string   `json:"event"`
	Pipelines int      `json:"pipelines"`
	Names     []string `json:"names"`
	// Manual: a web_trigger*/api_trigger* event, which "Run a build" can fire.
	Manual bool `json:"manual"`
}

// maxBranches bounds the branch list offered; a repo with thousands of branches types its own.
const maxBranches = 200

// EventsFor lists the events branch's .cnb.yml declares (the default branch when "").
func (s *Service) EventsFor(ctx context.Context, a *repo.Access, branch string) (*BranchEvents, error) {
	if branch == "" {
		branch = a.Repo.DefaultBranch
	}
	path := s.repos.Path(a.Repo)
	out := &BranchEvents{Branch: branch, Branches: []string{}, Events: []BranchEventJS{}}
	branches, err := git.Branches(ctx, path)
	if err != nil {
		return nil, err
	}
	// Appended, not assigned: a repo without commits has no branches, and the document (and the
	// dashboard) expect an empty list then, not null.
	out.Branches = append(out.Branches, branches[:min(len(branches), maxBranches)]...)
	if len(branches) == 0 {
		out.Problem = "the repo has no commits yet: push one with a " + ConfigFile
		return out, nil
	}
	rd, err := git.OpenReader(ctx, path)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	commit, err := rd.Resolve("refs/heads/" + branch)
	if errors.Is(err, git.ErrUnknownRevision) || errors.Is(err, git.ErrInvalid) {
		return nil, fault.Invalid("branch", "branch %q does not exist", branch)
	}
	if err != nil {
		return nil, err
	}
	c, err := s.compile(rd, commit)
	if err != nil {
		return nil, err
	}
	if c.cfg == nil {
		out.Problem = "the branch has no " + ConfigFile
		return out, nil
	}
	if errs := c.cfg.Diagnostics().Filter(spec.SeverityError); len(errs) > 0 {
		// Broken, too large or over a limit: the first error says which.
		out.Problem = ConfigFile + " cannot run: " + errs[0].String()
		return out, nil
	}
	for _, e := range c.cfg.EventsFor(branch) {
		out.Events = append(out.Events, BranchEventJS{Event: e.Event, Pipelines: e.Pipelines, Names: e.Names, Manual: isManualEvent(e.Event)})
	}
	return out, nil
}
