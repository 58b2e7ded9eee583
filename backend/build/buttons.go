package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Buttons: `.cnb/web_trigger.yml` (../../shared/cnb-reference.md §3.5), read from the repo's
// default branch, puts custom buttons on the repo page. A button fires its web_trigger* event on
// the branch it is shown for, with its fixed env and the inputs a person filled in as env, the
// way a manual build does (Manual): the pipelines still come from that branch's .cnb.yml.
//
//	branch:
//	  - reg: "^release/.*"        # the branches it applies to (Go regexp; all when absent)
//	    buttons:
//	      - name: Deploy
//	        description: Deploy ${TARGET}
//	        event: web_trigger_deploy
//	        env: { TARGET: prod }    # or a list of {name, value}
//	        permissions: { roles: [owner, master], users: [ada] }
//	        inputs:
//	          REGION: { name: Region, type: select, options: [{name: EU, value: eu}], required: true }
//	          DRY_RUN: { type: switch, default: true }
//
// Input types: input, textarea, select (multiple values joined with ";"), switch ("true" or
// "false"), radio. CNB's roles map to Nimbus's: master is admin; guest is nobody here (Nimbus
// has no guests); a button without permissions is for everyone who may write to the repo, which
// every button needs anyway.

// ButtonsFile is where the buttons live.
const ButtonsFile = ".cnb/web_trigger.yml"

// Button is one button as the API shows it.
type Button struct {
	Name          string        `json:"name"`
	Description   string        `json:"description"`
	Event         string        `json:"event"`
	OpenWorkspace bool          `json:"open_workspace"`
	Inputs        []ButtonInput `json:"inputs"`
	// Allowed says whether the caller may press it; Why says why not.
	Allowed bool   `json:"allowed"`
	Why     string `json:"why,omitempty"`

	env   map[string]string
	roles []string
	users []string
}

// ButtonInput is one input of a button.
type ButtonInput struct {
	Key         string         `json:"key"` // the variable it sets
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Type        string         `json:"type"`
	Required    bool           `json:"required"`
	Default     string         `json:"default"`
	Multiple    bool           `json:"multiple"`
	Options     []ButtonOption `json:"options"`
}

// ButtonOption is a choice of a select or radio input.
type ButtonOption struct {
	Name        string `json:"name"`
	Value       string `json:"value"`
	Description string `json:"description"`
}

var inputTypes = []string{"input", "textarea", "select", "switch", "radio"}

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
		return nil, api.Invalid("file", "%s: %v", ButtonsFile, fileError(err))
	}
	if err != nil {
		return nil, err
	}
	all, err := parseButtons(raw)
	if err != nil {
		return nil, err
	}
	var out []Button
	for _, g := range all {
		if !g.matches(branch) {
			continue
		}
		for _, b := range g.buttons {
			b.Allowed, b.Why = mayPress(a, user, b)
			out = append(out, b)
		}
	}
	if out == nil {
		out = []Button{}
	}
	return out, nil
}

// mayPress applies a button's permissions: repo write always, then its roles or users.
func mayPress(a *repo.Access, user *auth.User, b Button) (bool, string) {
	if a.Level < repo.Write || user == nil {
		return false, "pressing a button needs write access to the repo"
	}
	if len(b.roles) == 0 && len(b.users) == 0 {
		return true, ""
	}
	if slices.Contains(b.users, user.Username) {
		return true, ""
	}
	for _, r := range b.roles {
		if cnbRole(r) == a.Role && a.Role != "" {
			return true, ""
		}
	}
	return false, fmt.Sprintf("this button is for the roles %v and the users %v", b.roles, b.users)
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
		return nil, api.NotFound("no button %q for branch %s in %s", name, branch, ButtonsFile)
	}
	b := bs[i]
	if !b.Allowed {
		return nil, api.Forbidden("%s", b.Why)
	}
	env := map[string]string{}
	for k, v := range b.env {
		env[k] = v
	}
	for k := range inputs {
		if !slices.ContainsFunc(b.Inputs, func(in ButtonInput) bool { return in.Key == k }) {
			return nil, api.Invalid("inputs", "button %q has no input %s", name, k)
		}
	}
	for _, in := range b.Inputs {
		v, given := inputs[in.Key]
		if !given {
			v = in.Default
		}
		if err := in.check(v); err != nil {
			return nil, err
		}
		env[in.Key] = v
	}
	return s.Manual(ctx, a, user, branch, b.Event, env)
}

// check validates one input's value.
func (in ButtonInput) check(v string) error {
	switch {
	case in.Required && strings.TrimSpace(v) == "":
		return api.Invalid("inputs", "%s is required", in.label())
	case in.Type == "switch" && v != "true" && v != "false" && v != "":
		return api.Invalid("inputs", "%s is a switch: true or false", in.label())
	case (in.Type == "select" || in.Type == "radio") && v != "":
		vals := []string{v}
		if in.Multiple {
			vals = strings.Split(v, ";")
		}
		for _, x := range vals {
			if !slices.ContainsFunc(in.Options, func(o ButtonOption) bool { return o.Value == x }) {
				return api.Invalid("inputs", "%s: %q is not one of its options", in.label(), x)
			}
		}
	}
	return nil
}

func (in ButtonInput) label() string {
	if in.Name != "" {
		return in.Name + " (" + in.Key + ")"
	}
	return in.Key
}

// buttonGroup is a branch entry of the file.
type buttonGroup struct {
	reg     *regexp.Regexp
	buttons []Button
}

func (g buttonGroup) matches(branch string) bool { return g.reg == nil || g.reg.MatchString(branch) }

// parseButtons reads the file; errors name the line (and column).
func parseButtons(raw []byte) ([]buttonGroup, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, api.Invalid("file", "%s: invalid YAML: %v", ButtonsFile, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	bad := func(n *yaml.Node, format string, args ...any) error {
		return api.Invalid("file", "%s:%d:%d: %s", ButtonsFile, n.Line, n.Column, fmt.Sprintf(format, args...))
	}
	if root.Kind != yaml.MappingNode {
		return nil, bad(root, "the file is a mapping with the key branch")
	}
	branches := mapGet(root, "branch")
	if branches == nil {
		return nil, nil
	}
	if branches.Kind != yaml.SequenceNode {
		return nil, bad(branches, "branch is a list")
	}
	var out []buttonGroup
	for _, bn := range branches.Content {
		if bn.Kind != yaml.MappingNode {
			return nil, bad(bn, "each branch entry is a mapping (reg, buttons)")
		}
		var g buttonGroup
		if r := mapGet(bn, "reg"); r != nil {
			re, err := regexp.Compile(r.Value)
			if err != nil {
				return nil, bad(r, "reg: %v", err)
			}
			g.reg = re
		}
		list := mapGet(bn, "buttons")
		if list == nil {
			continue
		}
		if list.Kind != yaml.SequenceNode {
			return nil, bad(list, "buttons is a list")
		}
		for _, n := range list.Content {
			b, err := parseButton(n, bad)
			if err != nil {
				return nil, err
			}
			g.buttons = append(g.buttons, b)
		}
		out = append(out, g)
	}
	return out, nil
}

func parseButton(n *yaml.Node, bad func(*yaml.Node, string, ...any) error) (Button, error) {
	b := Button{Inputs: []ButtonInput{}, env: map[string]string{}}
	if n.Kind != yaml.MappingNode {
		return b, bad(n, "a button is a mapping (name, event, inputs, …)")
	}
	str := func(key string) string {
		if v := mapGet(n, key); v != nil && v.Kind == yaml.ScalarNode {
			return v.Value
		}
		return ""
	}
	b.Name, b.Description, b.Event = str("name"), str("description"), str("event")
	b.OpenWorkspace = str("openWorkspace") == "true"
	if b.Name == "" {
		return b, bad(n, "a button needs a name")
	}
	if b.Event != "web_trigger" && !strings.HasPrefix(b.Event, "web_trigger_") {
		return b, bad(n, "button %q: event must be web_trigger or web_trigger_…, not %q", b.Name, b.Event)
	}
	if e := mapGet(n, "env"); e != nil {
		switch e.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(e.Content); i += 2 {
				b.env[e.Content[i].Value] = e.Content[i+1].Value
			}
		case yaml.SequenceNode:
			for _, it := range e.Content {
				if k := mapGet(it, "name"); k != nil {
					v := mapGet(it, "value")
					if v == nil {
						v = &yaml.Node{}
					}
					b.env[k.Value] = v.Value
				}
			}
		default:
			return b, bad(e, "button %q: env is a mapping or a list of {name, value}", b.Name)
		}
	}
	if p := mapGet(n, "permissions"); p != nil {
		b.roles, b.users = scalars(mapGet(p, "roles")), scalars(mapGet(p, "users"))
	}
	if ins := mapGet(n, "inputs"); ins != nil {
		if ins.Kind != yaml.MappingNode {
			return b, bad(ins, "button %q: inputs is a mapping of variable names", b.Name)
		}
		for i := 0; i+1 < len(ins.Content); i += 2 {
			key, spec := ins.Content[i], ins.Content[i+1]
			in := ButtonInput{Key: key.Value, Type: "input", Options: []ButtonOption{}}
			if !envNameOK(in.Key) || strings.HasPrefix(strings.ToUpper(in.Key), "CNB_") {
				return b, bad(key, "button %q: %q cannot be a variable name", b.Name, in.Key)
			}
			if spec.Kind == yaml.MappingNode {
				get := func(k string) string {
					if v := mapGet(spec, k); v != nil && v.Kind == yaml.ScalarNode {
						return v.Value
					}
					return ""
				}
				in.Name, in.Description, in.Default = get("name"), get("description"), get("default")
				if t := get("type"); t != "" {
					in.Type = t
				}
				in.Required, _ = strconv.ParseBool(get("required"))
				in.Multiple, _ = strconv.ParseBool(get("multiple"))
				if d := mapGet(spec, "default"); d != nil && d.Kind == yaml.SequenceNode {
					in.Default = strings.Join(scalars(d), ";")
				}
				if o := mapGet(spec, "options"); o != nil {
					for _, on := range o.Content {
						opt := ButtonOption{}
						if on.Kind == yaml.ScalarNode {
							opt.Name, opt.Value = on.Value, on.Value
						} else {
							for _, f := range []struct {
								k   string
								dst *string
							}{{"name", &opt.Name}, {"value", &opt.Value}, {"description", &opt.Description}} {
								if v := mapGet(on, f.k); v != nil {
									*f.dst = v.Value
								}
							}
							if opt.Value == "" {
								opt.Value = opt.Name
							}
						}
						in.Options = append(in.Options, opt)
					}
				}
			}
			if !slices.Contains(inputTypes, in.Type) {
				return b, bad(spec, "button %q: input %s: type must be one of %v", b.Name, in.Key, inputTypes)
			}
			b.Inputs = append(b.Inputs, in)
		}
	}
	return b, nil
}

// mapGet is the value of key in a mapping node, or nil.
func mapGet(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// scalars are the values of a list of scalars (one scalar is a list of one).
func scalars(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		if c.Kind == yaml.ScalarNode {
			out = append(out, c.Value)
		}
	}
	return out
}
