package spec

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Deploy environments: `.cnb/tag_deploy.yml` (../../../shared/cnb-reference.md §3.5) puts a
// "Deploy" button per environment on a tag's page; pressing it fires tag_deploy.<name> on the
// tag, whose pipelines come from the tag's .cnb.yml. This file parses and checks it;
// backend/build reads it from the repo's default branch (the policy lives there: a tag cannot
// grant itself a deploy), decides who may deploy and whether the requirements hold, and starts
// the build.
//
//	environments:
//	  - name: staging                  # fires tag_deploy.staging
//	    description: The staging cluster
//	    env: { CLUSTER: stg }          # or a list of {name, value}
//	    permissions: { roles: [owner, master], users: [ada] }
//	  - name: production
//	    require:
//	      - environment: staging       # (or environmentName) deployed successfully for this tag,
//	        after: 3600                # at least this many seconds ago
//	      - approver: …                # CNB's approval steps and annotation checks: parsed, and
//	      - annotation: …              # an environment that needs them cannot deploy here
//
// CNB's per-environment button[] and deploy[] lists (extra buttons) are not read.

// DeployFile is where the deploy environments live, read from the repo's default branch.
const DeployFile = ".cnb/tag_deploy.yml"

// Deploy is a parsed deploy file: its environments, in order.
type Deploy struct {
	Environments []Environment
}

// Environment is one deploy environment. The JSON is what the tag page shows.
type Environment struct {
	Name        string        `json:"name"`
	Description string        `json:"description"`
	Require     []Requirement `json:"require"`
	// Env is its fixed env.
	Env map[string]string `json:"-"`
	// Roles (CNB's names) and Users may deploy it; neither: everyone who may write to the repo.
	Roles []string `json:"-"`
	Users []string `json:"-"`
}

// Requirement kinds.
const (
	RequireEnvironment = "environment" // another environment deployed for the same tag
	RequireApprover    = "approver"    // CNB's approval steps: not checked here
	RequireAnnotation  = "annotation"  // CNB's annotation checks: not checked here
)

// Requirement is one precondition of an environment.
type Requirement struct {
	Kind        string `json:"kind"`
	Environment string `json:"environment,omitempty"`
	// After is how many seconds after that deploy finished this one may start.
	After int64 `json:"after_seconds,omitempty"`
}

var envNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// deployNode is a ButtonsError (the files share the format of their errors) in the deploy file.
func deployNode(n *yaml.Node, format string, args ...any) error {
	return &ButtonsError{Pos: Pos{File: DeployFile, Line: n.Line, Column: n.Column}, Msg: fmt.Sprintf(format, args...)}
}

// ParseDeploy reads a deploy file. An empty file, or one without environments, has none; a
// broken one is a *ButtonsError naming the line and column in DeployFile.
func ParseDeploy(data []byte) (Deploy, error) {
	list, err := topList(data, DeployFile, "environments")
	if err != nil || list == nil {
		return Deploy{}, err
	}
	var out Deploy
	for _, n := range list.Content {
		e, err := parseEnvironment(n)
		if err != nil {
			return Deploy{}, err
		}
		if slices.ContainsFunc(out.Environments, func(x Environment) bool { return x.Name == e.Name }) {
			return Deploy{}, deployNode(n, "environment %q is declared twice", e.Name)
		}
		out.Environments = append(out.Environments, e)
	}
	// A requirement names an environment of the file, not itself.
	for i, e := range out.Environments {
		for _, r := range e.Require {
			if r.Kind != RequireEnvironment {
				continue
			}
			if r.Environment == e.Name || !slices.ContainsFunc(out.Environments, func(x Environment) bool { return x.Name == r.Environment }) {
				return Deploy{}, deployNode(list.Content[i], "environment %q requires %q, which is not another environment of the file", e.Name, r.Environment)
			}
		}
	}
	return out, nil
}

// Get returns the environment named name.
func (d Deploy) Get(name string) (Environment, bool) {
	i := slices.IndexFunc(d.Environments, func(e Environment) bool { return e.Name == name })
	if i < 0 {
		return Environment{}, false
	}
	return d.Environments[i], true
}

// Event is the event the environment's deploy fires.
func (e Environment) Event() string { return tagDeployPrefix + e.Name }

func parseEnvironment(n *yaml.Node) (Environment, error) {
	e := Environment{Env: map[string]string{}, Require: []Requirement{}}
	if n.Kind != yaml.MappingNode {
		return e, deployNode(n, "an environment is a mapping (name, description, env, require)")
	}
	e.Name, e.Description = scalarAt(n, "name"), scalarAt(n, "description")
	if !envNameRE.MatchString(e.Name) {
		return e, deployNode(n, "environment name %q: letters, digits, '_', '.' and '-', at most 64, as in tag_deploy.<name>", e.Name)
	}
	if en := mapGet(n, "env"); en != nil {
		if err := buttonEnv(en, e.Name, e.Env); err != nil {
			var be *ButtonsError
			if errors.As(err, &be) {
				be.Pos.File, be.Msg = DeployFile, fmt.Sprintf("environment %q: env is a mapping or a list of {name, value}", e.Name)
			}
			return e, err
		}
	}
	if p := mapGet(n, "permissions"); p != nil {
		e.Roles, e.Users = scalars(mapGet(p, "roles")), scalars(mapGet(p, "users"))
	}
	req := mapGet(n, "require")
	if req == nil {
		return e, nil
	}
	if req.Kind != yaml.SequenceNode {
		return e, deployNode(req, "environment %q: require is a list", e.Name)
	}
	for _, rn := range req.Content {
		r, err := parseRequirement(rn, e.Name)
		if err != nil {
			return e, err
		}
		e.Require = append(e.Require, r)
	}
	return e, nil
}

func parseRequirement(n *yaml.Node, env string) (Requirement, error) {
	if n.Kind != yaml.MappingNode {
		return Requirement{}, deployNode(n, "environment %q: a requirement is a mapping (environment and after, approver or annotation)", env)
	}
	switch {
	case mapGet(n, "approver") != nil:
		return Requirement{Kind: RequireApprover}, nil
	case mapGet(n, "annotation") != nil:
		return Requirement{Kind: RequireAnnotation}, nil
	}
	name := scalarAt(n, "environment")
	if name == "" {
		name = scalarAt(n, "environmentName")
	}
	if name == "" {
		return Requirement{}, deployNode(n, "environment %q: a requirement names an environment, an approver or an annotation", env)
	}
	r := Requirement{Kind: RequireEnvironment, Environment: name}
	if a := mapGet(n, "after"); a != nil {
		secs, err := strconv.ParseInt(a.Value, 10, 64)
		if err != nil || secs < 0 || secs > 365*24*3600 {
			return r, deployNode(a, "environment %q: after is a number of seconds, 0 to a year", env)
		}
		r.After = secs
	}
	return r, nil
}
