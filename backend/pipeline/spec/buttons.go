package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec/internal/yamlpos"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Buttons: `.cnb/web_trigger.yml` (../../../shared/cnb-reference.md §3.5) puts custom buttons on
// the repo page. A button fires its web_trigger* event on the branch it is shown for, with its
// fixed env and the inputs a person filled in as env; the pipelines still come from that
// branch's .cnb.yml. This file parses and checks it; backend/build reads it from git, decides
// who may press a button, and starts the build.
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
// "false"), radio.

// ButtonsFile is where the buttons live, read from the repo's default branch.
const ButtonsFile = ".cnb/web_trigger.yml"

// Buttons is a parsed buttons file: its branch entries, in order.
type Buttons struct {
	groups []buttonGroup
}

// buttonGroup is a branch entry of the file.
type buttonGroup struct {
	reg     *regexp.Regexp // nil: every branch
	buttons []Button
}

// Button is one button of the file. The JSON is what the repo page shows.
type Button struct {
	Name          string        `json:"name"`
	Description   string        `json:"description"`
	Event         string        `json:"event"`
	OpenWorkspace bool          `json:"open_workspace"`
	Inputs        []ButtonInput `json:"inputs"`

	// Env is the button's fixed env; pressing it adds the inputs (PressEnv).
	Env map[string]string `json:"-"`
	// Roles (CNB's names) and Users may press it; neither: everyone who may write to the repo.
	Roles []string `json:"-"`
	Users []string `json:"-"`
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

// ButtonsError is a mistake in the buttons file, at its line and column.
type ButtonsError struct {
	Pos Pos
	Msg string
}

func (e *ButtonsError) Error() string { return e.Pos.String() + ": " + e.Msg }

// badNode is a ButtonsError at a node of the file.
func badNode(n *yaml.Node, format string, args ...any) error {
	return &ButtonsError{Pos: Pos{File: ButtonsFile, Line: n.Line, Column: n.Column}, Msg: fmt.Sprintf(format, args...)}
}

// ParseButtons reads a buttons file. An empty file, or one without branch, has no buttons; a
// broken one is a *ButtonsError naming the line and column.
func ParseButtons(data []byte) (Buttons, error) {
	branches, err := topList(data, ButtonsFile, "branch")
	if err != nil || branches == nil {
		return Buttons{}, err
	}
	var out Buttons
	for _, bn := range branches.Content {
		g, err := parseButtonGroup(bn)
		if err != nil {
			return Buttons{}, err
		}
		out.groups = append(out.groups, g)
	}
	return out, nil
}

// topList reads a file that is a mapping whose key holds a list, and returns that list: nil
// when the file is empty or has no key; a *ButtonsError in file when it is broken.
func topList(data []byte, file, key string) (*yaml.Node, error) {
	var doc yaml.Node
	src := normalize(data)
	if err := yaml.Unmarshal(src, &doc); err != nil {
		at := yamlpos.Locate(src, err)
		return nil, &ButtonsError{Pos: Pos{File: file, Line: at.Line, Column: at.Column}, Msg: "invalid YAML: " + at.Msg}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	at := func(n *yaml.Node, msg string) error {
		return &ButtonsError{Pos: Pos{File: file, Line: n.Line, Column: n.Column}, Msg: msg}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, at(root, "the file is a mapping with the key "+key)
	}
	list := mapGet(root, key)
	if list == nil {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, at(list, key+" is a list")
	}
	return list, nil
}

// For lists the buttons shown for branch: those of every entry whose reg matches it, in order.
func (b Buttons) For(branch string) []Button {
	var out []Button
	for _, g := range b.groups {
		if g.reg == nil || g.reg.MatchString(branch) {
			out = append(out, g.buttons...)
		}
	}
	return out
}

func parseButtonGroup(n *yaml.Node) (buttonGroup, error) {
	var g buttonGroup
	if n.Kind != yaml.MappingNode {
		return g, badNode(n, "each branch entry is a mapping (reg, buttons)")
	}
	if r := mapGet(n, "reg"); r != nil {
		re, err := regexp.Compile(r.Value)
		if err != nil {
			return g, badNode(r, "reg: %v", err)
		}
		g.reg = re
	}
	list := mapGet(n, "buttons")
	if list == nil {
		return g, nil
	}
	if list.Kind != yaml.SequenceNode {
		return g, badNode(list, "buttons is a list")
	}
	for _, bn := range list.Content {
		b, err := parseButton(bn)
		if err != nil {
			return g, err
		}
		g.buttons = append(g.buttons, b)
	}
	return g, nil
}

func parseButton(n *yaml.Node) (Button, error) {
	b := Button{Inputs: []ButtonInput{}, Env: map[string]string{}}
	if n.Kind != yaml.MappingNode {
		return b, badNode(n, "a button is a mapping (name, event, inputs, …)")
	}
	b.Name, b.Description, b.Event = scalarAt(n, "name"), scalarAt(n, "description"), scalarAt(n, "event")
	b.OpenWorkspace = scalarAt(n, "openWorkspace") == "true"
	if b.Name == "" {
		return b, badNode(n, "a button needs a name")
	}
	if b.Event != "web_trigger" && !strings.HasPrefix(b.Event, "web_trigger_") {
		return b, badNode(n, "button %q: event must be web_trigger or web_trigger_…, not %q", b.Name, b.Event)
	}
	if e := mapGet(n, "env"); e != nil {
		if err := buttonEnv(e, b.Name, b.Env); err != nil {
			return b, err
		}
	}
	if p := mapGet(n, "permissions"); p != nil {
		b.Roles, b.Users = scalars(mapGet(p, "roles")), scalars(mapGet(p, "users"))
	}
	ins := mapGet(n, "inputs")
	if ins == nil {
		return b, nil
	}
	if ins.Kind != yaml.MappingNode {
		return b, badNode(ins, "button %q: inputs is a mapping of variable names", b.Name)
	}
	for i := 0; i+1 < len(ins.Content); i += 2 {
		in, err := parseButtonInput(ins.Content[i], ins.Content[i+1], b.Name)
		if err != nil {
			return b, err
		}
		b.Inputs = append(b.Inputs, in)
	}
	return b, nil
}

// buttonEnv reads a button's env, a mapping or a list of {name, value}, into env.
func buttonEnv(e *yaml.Node, button string, env map[string]string) error {
	switch e.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(e.Content); i += 2 {
			env[e.Content[i].Value] = e.Content[i+1].Value
		}
	case yaml.SequenceNode:
		for _, it := range e.Content {
			if k := mapGet(it, "name"); k != nil {
				env[k.Value] = ""
				if v := mapGet(it, "value"); v != nil {
					env[k.Value] = v.Value
				}
			}
		}
	default:
		return badNode(e, "button %q: env is a mapping or a list of {name, value}", button)
	}
	return nil
}

// parseButtonInput reads the input key: spec of a button. A spec that is not a mapping is a
// plain text input.
func parseButtonInput(key, spec *yaml.Node, button string) (ButtonInput, error) {
	in := ButtonInput{Key: key.Value, Type: "input", Options: []ButtonOption{}}
	if !protocol.ValidVarName(in.Key) || len(in.Key) > 128 || strings.HasPrefix(strings.ToUpper(in.Key), "CNB_") {
		return in, badNode(key, "button %q: %q cannot be a variable name", button, in.Key)
	}
	if spec.Kind == yaml.MappingNode {
		in.Name, in.Description, in.Default = scalarAt(spec, "name"), scalarAt(spec, "description"), scalarAt(spec, "default")
		if t := scalarAt(spec, "type"); t != "" {
			in.Type = t
		}
		in.Required, _ = strconv.ParseBool(scalarAt(spec, "required"))
		in.Multiple, _ = strconv.ParseBool(scalarAt(spec, "multiple"))
		if d := mapGet(spec, "default"); d != nil && d.Kind == yaml.SequenceNode {
			in.Default = strings.Join(scalars(d), ";")
		}
		if o := mapGet(spec, "options"); o != nil {
			for _, on := range o.Content {
				in.Options = append(in.Options, buttonOption(on))
			}
		}
	}
	if !slices.Contains(inputTypes, in.Type) {
		return in, badNode(spec, "button %q: input %s: type must be one of %v", button, in.Key, inputTypes)
	}
	return in, nil
}

// buttonOption reads one option: a scalar is its own name and value; a mapping has name, value
// (the name when absent) and description.
func buttonOption(n *yaml.Node) ButtonOption {
	if n.Kind == yaml.ScalarNode {
		return ButtonOption{Name: n.Value, Value: n.Value}
	}
	var opt ButtonOption
	if v := mapGet(n, "name"); v != nil {
		opt.Name = v.Value
	}
	if v := mapGet(n, "value"); v != nil {
		opt.Value = v.Value
	}
	if v := mapGet(n, "description"); v != nil {
		opt.Description = v.Value
	}
	if opt.Value == "" {
		opt.Value = opt.Name
	}
	return opt
}

// PressEnv is the env a press of b with inputs sets: its fixed env, then every input's value
// (its default when not given). An input the button does not have, or a value its input does
// not allow, is an error.
func (b Button) PressEnv(inputs map[string]string) (map[string]string, error) {
	env := map[string]string{}
	for k, v := range b.Env {
		env[k] = v
	}
	for k := range inputs {
		if !slices.ContainsFunc(b.Inputs, func(in ButtonInput) bool { return in.Key == k }) {
			return nil, fmt.Errorf("button %q has no input %s", b.Name, k)
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
	return env, nil
}

// check validates one input's value.
func (in ButtonInput) check(v string) error {
	switch {
	case in.Required && strings.TrimSpace(v) == "":
		return fmt.Errorf("%s is required", in.label())
	case in.Type == "switch" && v != "true" && v != "false" && v != "":
		return fmt.Errorf("%s is a switch: true or false", in.label())
	case (in.Type == "select" || in.Type == "radio") && v != "":
		vals := []string{v}
		if in.Multiple {
			vals = strings.Split(v, ";")
		}
		for _, x := range vals {
			if !slices.ContainsFunc(in.Options, func(o ButtonOption) bool { return o.Value == x }) {
				return fmt.Errorf("%s: %q is not one of its options", in.label(), x)
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

// scalarAt is the scalar value of key in a mapping node, or "".
func scalarAt(n *yaml.Node, key string) string {
	if v := mapGet(n, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
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
