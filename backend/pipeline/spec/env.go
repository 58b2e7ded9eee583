package spec

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Variable substitution. The reference lists the fields that are substituted (names, runner.tags,
// docker.image/build/volumes, stage and job image, settings, options, env values, imports paths,
// ifModify, lock.key, allowFailure); scripts are not: the shell expands them.
//
// A field is first built as a template: known values are inserted with their dollars escaped,
// `\$` stays escaped, and a reference to a variable that only exists at run time stays as
// ${NAME}. Known values are the built-ins of the trigger and the env of the enclosing levels.
// Every other name is a run-time variable: one a job exports (for the rest of the pipeline), a
// built-in only the agent knows (CNB_TOKEN, …), or a name the plan cannot know: a repo secret
// (the lease carries their values, never the plan) or a variable of an imported file. The agent
// resolves those from the lease's secrets, the exports and the run-time built-ins; a name that is
// none of them is missing and becomes empty there. `nimbus lint` warns about such names
// (checkVarRefs).
//
// Fields the backend needs before the pipeline starts (names, tags, ifModify, lock keys,
// allowFailure) are then finalised: run-time references become empty and escapes become "$". The
// other fields stay templates only when they hold a run-time reference; their names go to
// RuntimeVars and the agent expands them with protocol.ExpandVars.

// runtimeBuiltins are built-in variables that only exist once a job runs on a node.
var runtimeBuiltins = []string{"CNB_TOKEN", "CNB_TOKEN_FOR_AI", "CNB_RUNNER_IP", "CNB_BUILD_STAGE_NAME",
	"CNB_BUILD_JOB_NAME", "CNB_BUILD_JOB_KEY", "CNB_PIPELINE_STATUS", "CNB_BUILD_FAILED_MSG",
	"CNB_BUILD_FAILED_STAGE_NAME", "CNB_IS_RETRY", "CNB_PIPELINE_ID", "CNB_BUILD_ID", "CNB_BUILD_START_TIME",
	"CNB_BUILD_WEB_URL", "CNB_VSCODE_WEB_URL"}

// scope is what a field can see.
type scope struct {
	builtins map[string]string // read-only: win over everything
	exports  map[string]bool   // set by jobs at run time
	env      map[string]string // env values of the outer levels, as templates
}

// child returns a scope for an inner level with env layered on top; values of env are
// substituted against the outer scope first (env values may reference outer env, not siblings).
func (s *scope) child(env []envVar) *scope {
	c := &scope{builtins: s.builtins, exports: s.exports, env: s.env}
	if len(env) == 0 {
		return c
	}
	// Its siblings are not visible to an env value: a reference to one is left to run time like
	// any other unknown name (it may be a secret of that name).
	outer := s
	c.env = maps.Clone(s.env)
	if c.env == nil {
		c.env = map[string]string{}
	}
	for _, v := range env {
		c.env[v.name] = outer.tmpl(v.value)
	}
	return c
}

// tmpl substitutes raw into a template.
func (s *scope) tmpl(raw string) string {
	return protocol.ReplaceVars(raw, func(name, _ string) string {
		if v, ok := s.builtins[name]; ok {
			return escapeDollars(v)
		}
		if s.exports[name] {
			return "${" + name + "}"
		}
		if v, ok := s.env[name]; ok {
			return v // already a template
		}
		// Exported, imported, a run-time built-in, a repo secret or missing: the agent knows.
		return "${" + name + "}"
	}, `\$`)
}

// final substitutes raw into a finished value.
func (s *scope) final(raw string) string { return finalize(s.tmpl(raw)) }

func escapeDollars(v string) string {
	if !strings.Contains(v, "$") {
		return v
	}
	return strings.ReplaceAll(v, "$", `\$`)
}

// finalize turns a template into a value: run-time references become empty, escapes "$".
func finalize(t string) string {
	return protocol.ReplaceVars(t, func(string, string) string { return "" }, "$")
}

// refs collects the run-time references of templates.
type refs map[string]bool

func (r *refs) scan(t string) {
	if !strings.Contains(t, "$") {
		return
	}
	protocol.ReplaceVars(t, func(name, _ string) string {
		if *r == nil {
			*r = refs{}
		}
		(*r)[name] = true
		return ""
	}, "")
}

func (r refs) list() []string {
	if len(r) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(r))
}

// fieldSet gathers the template fields of a plan or job so that they can be finalised together
// when none holds a run-time reference.
type fieldSet struct {
	refs refs
	strs []*string
	maps []map[string]string
	anys []*map[string]any
}

func newFieldSet() *fieldSet { return &fieldSet{} }

func (f *fieldSet) str(p *string) {
	f.refs.scan(*p)
	f.strs = append(f.strs, p)
}

func (f *fieldSet) strMap(m map[string]string) {
	for k := range m {
		f.refs.scan(m[k])
	}
	f.maps = append(f.maps, m)
}

func (f *fieldSet) anyMap(p *map[string]any) {
	walkStrings(*p, func(s string) string { f.refs.scan(s); return s })
	f.anys = append(f.anys, p)
}

// finish finalises every field when there are no run-time references and returns the sorted
// names of the run-time variables otherwise.
func (f *fieldSet) finish() []string {
	if len(f.refs) > 0 {
		return f.refs.list()
	}
	for _, p := range f.strs {
		*p = finalize(*p)
	}
	for _, m := range f.maps {
		for k, v := range m {
			m[k] = finalize(v)
		}
	}
	for _, p := range f.anys {
		walkStrings(*p, finalize) // rewrites in place
	}
	return nil
}

// walkStrings rewrites every string in a JSON-shaped value.
func walkStrings(v any, fn func(string) string) any {
	switch x := v.(type) {
	case string:
		return fn(x)
	case map[string]any:
		for k, e := range x {
			x[k] = walkStrings(e, fn)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = walkStrings(e, fn)
		}
		return x
	}
	return v
}

// nodeToAny converts settings or options into JSON-shaped values, substituting strings with
// sub (nil: no substitution). Numbers become float64 so that plans round-trip through JSON.
func nodeToAny(n *node, sub func(string) string) any {
	if n == nil {
		return nil
	}
	switch n.kind {
	case nMap:
		m := make(map[string]any, len(n.pairs))
		for _, p := range n.pairs {
			m[p.key.value] = nodeToAny(p.val, sub)
		}
		return m
	case nSeq:
		l := make([]any, len(n.items))
		for i, it := range n.items {
			l[i] = nodeToAny(it, sub)
		}
		return l
	}
	switch n.tag {
	case "!!null":
		return nil
	case "!!bool":
		b, _ := boolValue(n)
		return b
	case "!!int", "!!float":
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.value, "_", ""), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f
		}
	}
	if sub != nil {
		return sub(n.value)
	}
	return n.value
}
