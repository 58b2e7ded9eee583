package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Buttons: `.cnb/web_trigger.yml` puts custom buttons on the repo page (spec.ParseButtons reads
// and checks the file, and its doc shows the format). Here it is read from the repo's default
// branch, a button is offered to those who may press it, and a press starts a manual build of
// its web_trigger* event on the branch it is shown for (Manual): the pipelines still come from
// that branch's .cnb.yml. CNB's roles map to Nimbus's: master is admin; guest is nobody here
// (Nimbus has no guests); a button without permissions is for everyone who may write to the
// repo, which every button needs anyway.

// ButtonsFile is where the buttons live.
const ButtonsFile = spec.ButtonsFile

// Button is one button as the API shows it: the file's button, and whether the caller may press
// it (Why says why not).
type Button struct {
	spec.Button
	Allowed bool   `json:"allowed"`
	Why     string `json:"why,omitempty"`
}

// Buttons lists the buttons of branch ("" = the default branch), read from the default branch's
// .cnb/web_trigger.yml. No file is no buttons; a broken one is a 422 naming its line.
func (s *Service) Buttons(ctx context.Context, a *repo.Access, user *auth.User, branch string) ([]Button, error) {
	if branch == "" {
		branch = a.Repo.DefaultBranch
	}
	path := s.repos.Path(a.Repo)
	head, err := git.ResolveRef(ctx, path, "refs/heads/"+a.Repo.DefaultBranch)
	if err != nil {
		return []Button{}, nil // an empty repo has no buttons
	}
	raw, err := git.ReadFile(ctx, path, head, ButtonsFile)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, git.ErrNotExist) {
		return []Button{}, nil
	}
	if unusable(err) {
		// Over the size limit, or a directory: the author's to fix, said like a broken file.
		return nil, fault.Invalid("file", "%s: %v", ButtonsFile, fileError(err))
	}
	if err != nil {
		return nil, err
	}
	file, err := spec.ParseButtons(raw)
	if err != nil {
		return nil, fault.Invalid("file", "%v", err)
	}
	out := []Button{}
	for _, b := range file.For(branch) {
		allowed, why := mayPress(a, user, b)
		out = append(out, Button{Button: b, Allowed: allowed, Why: why})
	}
	return out, nil
}

// mayPress applies a button's permissions: repo write always, then its roles or users.
func mayPress(a *repo.Access, user *auth.User, b spec.Button) (bool, string) {
	if a.Level < repo.Write || user == nil {
		return false, "pressing a button needs write access to the repo"
	}
	if len(b.Roles) == 0 && len(b.Users) == 0 {
		return true, ""
	}
	if slices.Contains(b.Users, user.Username) {
		return true, ""
	}
	for _, r := range b.Roles {
		if cnbRole(r) == a.Role && a.Role != "" {
			return true, ""
		}
	}
	return false, fmt.Sprintf("this button is for the roles %v and the users %v", b.Roles, b.Users)
}

// cnbRole maps a CNB role to Nimbus's (guest: none).
func cnbRole(r string) org.Role {
	switch strings.ToLower(r) {
	case "owner":
		return org.Owner
	case "master", "admin":
		return org.Admin
	case "developer":
		return org.Developer
	case "reporter":
		return org.Reporter
	}
	return ""
}

// Press fires the named button of branch with the inputs a person gave, and returns the build.
func (s *Service) Press(ctx context.Context, a *repo.Access, user *auth.User, branch, name string, inputs map[string]string) (*Build, error) {
	if branch == "" {
		branch = a.Repo.DefaultBranch
	}
	bs, err := s.Buttons(ctx, a, user, branch)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(bs, func(b Button) bool { return b.Name == name })
	if i < 0 {
		return nil, fault.NotFound("no button %q for branch %s in %s", name, branch, ButtonsFile)
	}
	b := bs[i]
	if !b.Allowed {
		return nil, fault.Forbidden("%s", b.Why)
	}
	env, err := b.PressEnv(inputs)
	if err != nil {
		return nil, fault.Invalid("inputs", "%v", err)
	}
	return s.Manual(ctx, a, user, branch, b.Event, env)
}
