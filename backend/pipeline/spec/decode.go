package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec/internal/suggest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// This file decodes the merged node tree into the declarations of model.go: branch keys, events,
// pipelines, stages and jobs. Structural problems (wrong types, unknown keys, empty stages, jobs
// of no kind, nested lists) are reported here; rules that need the runner classes or the cron
// parser are in validate.go.

var (
	pipelineKeys = []string{"name", "runner", "docker", "git", "services", "env", "imports", "label",
		"stages", "failStages", "endStages", "ifNewBranch", "ifModify", "breakIfModify", "retry", "allowFailure", "lock"}
	stageKeys = []string{"name", "jobs", "if", "ifModify", "ifNewBranch", "env", "imports", "retry", "lock", "image"}
	jobKeys   = []string{"name", "script", "commands", "image", "settings", "settingsFrom", "args", "type", "options",
		"optionsFrom", "env", "imports", "exports", "timeout", "allowFailure", "lock", "retry", "if", "ifModify",
		"ifNewBranch", "breakIfModify", "skipIfModify"}
	nestedListHint = "a list anchor used as a list item makes a nested list; anchor a map and write `- <<: *anchor`"

	// habits are the keys other CI systems (GitLab CI, GitHub Actions, Drone, Woodpecker) put
	// where .cnb.yml has another: an edit distance finds no "did you mean" for them, so each
	// names the key that does what its author meant.
	habits = map[string]map[string]string{
		"pipeline": {
			"image":         "did you mean `docker.image`? A pipeline's image goes under docker: { image: … }",
			"volumes":       "did you mean `docker.volumes`?",
			"build":         "did you mean `docker.build`?",
			"cache":         "caches are `docker.volumes` (a path, or path:mode)",
			"variables":     "did you mean `env`?",
			"environment":   "did you mean `env`?",
			"script":        "a pipeline runs `stages`; put the script in a stage: stages: [{ name: build, script: … }]",
			"steps":         "did you mean `stages`?",
			"jobs":          "did you mean `stages`? Jobs live inside a stage (its `jobs` key)",
			"runs-on":       "did you mean `runner.tags`?",
			"cpus":          "did you mean `runner.cpus`?",
			"timeout":       "a timeout is set per job (its `timeout` key)",
			"before_script": "put it in a first stage of `stages`",
			"after_script":  "did you mean `endStages`? They run whatever the result",
		},
		"stage": {
			"script":    "a stage with jobs runs its jobs' scripts: move this script into one of them, or drop jobs",
			"variables": "did you mean `env`?",
		},
		"job": {
			"run":         "did you mean `script`?",
			"variables":   "did you mean `env`?",
			"environment": "did you mean `env`?",
			"docker":      "a job's image is its `image` key (the pipeline's is docker.image)",
		},
	}
)

type decoder struct {
	d    *diags
	opts *Options
}

// branches decodes the top level: branch patterns mapping events to pipelines.
func (dc *decoder) branches(root *node) []*branchDecl {
	var out []*branchDecl
	for _, p := range root.pairs {
		k := p.key.value
		if strings.HasPrefix(k, ".") {
			continue // a template holder for anchors and !reference
		}
		if p.val.kind != nMap {
			dc.d.warnf(p.key.pos, "top-level key %q is not a branch pattern with events (its value is %s); it is ignored", k, p.val.kindName())
			continue
		}
		b := &branchDecl{pattern: k, pos: p.key.pos, fallback: k == "$"}
		if !b.fallback {
			g, err := CompileGlob(k)
			if err != nil {
				dc.d.errorf(p.key.pos, "invalid branch pattern %q: %v", k, err)
				continue
			}
			b.glob = g
		}
		for _, ep := range p.val.pairs {
			if e := dc.event(ep); e != nil {
				b.events = append(b.events, e)
			}
		}
		out = append(out, b)
	}
	return out
}

func (dc *decoder) event(p pair) *eventDecl {
	key, v := p.key.value, p.val
	e := &eventDecl{key: key, pos: p.key.pos}
	fam := eventFamily(key)
	switch {
	case fam == "":
		known := append(catalogue(), "web_trigger_<name>", "api_trigger_<name>", "tag_deploy.<env>", "crontab: <cron>")
		hint := suggest.Hint(key, known)
		if hint == "" {
			hint = "custom events must start with web_trigger_ or api_trigger_"
		}
		dc.d.warnHint(p.key.pos, hint, "unknown event %q; its pipelines never run", key)
		return nil
	case !fired(key, dc.opts.FiredEvents):
		dc.d.warnf(p.key.pos, "event %q is not supported by this installation; its pipelines never run", key)
	}
	if fam == EventCrontab {
		c, err := parseCron(strings.TrimSpace(strings.TrimPrefix(key, crontabPrefix)), dc.opts.Location)
		if err != nil {
			dc.d.fromErr(p.key.pos, SeverityError, err)
		}
		e.cron = c
	}
	e.pipelines = dc.pipelines(v, key == EventSchedule)
	dc.checkDuplicateNames(e)
	dc.checkLimits(e)
	dc.checkVarRefs(e)
	return e
}

// pipelines decodes an event's value: a list (names by position) or a map (keys become names).
func (dc *decoder) pipelines(v *node, schedule bool) []*pipelineDecl {
	var out []*pipelineDecl
	switch v.kind {
	case nSeq:
		for _, it := range v.items {
			switch it.kind {
			case nMap:
				out = append(out, dc.pipeline(it, "", schedule))
			case nSeq:
				dc.d.errorHint(it.pos, nestedListHint, "nested list where a pipeline was expected")
			default:
				dc.d.errorf(it.pos, "a pipeline must be a map, not %s", it.kindName())
			}
		}
	case nMap:
		if schedule {
			dc.d.errorf(v.pos, "schedule takes a list of pipelines, each with a cron key")
			return nil
		}
		if onePipeline(v) {
			// Real files write one pipeline straight under the event; CNB runs it.
			dc.d.warnHint(v.pos, "write it as a list: `- stages: …` under the event", "the event's value is one pipeline, not a list or a map of pipelines; it is read as that one pipeline")
			return append(out, dc.pipeline(v, "", false))
		}
		for _, p := range v.pairs {
			if p.val.kind != nMap {
				dc.d.errorf(p.val.pos, "pipeline %q must be a map, not %s", p.key.value, p.val.kindName())
				continue
			}
			out = append(out, dc.pipeline(p.val, p.key.value, false))
		}
	default:
		dc.d.errorf(v.pos, "an event takes a list or a map of pipelines, not %s", v.kindName())
	}
	return out
}

// onePipeline reports whether an event's map value is itself a pipeline rather than a map of
// named ones: it has stages, or every key is a pipeline key.
func onePipeline(v *node) bool {
	all := true
	for _, p := range v.pairs {
		if p.key.value == "stages" {
			return true
		}
		all = all && slices.Contains(pipelineKeys, p.key.value)
	}
	return all && len(v.pairs) > 0
}

func (dc *decoder) pipeline(n *node, objectKey string, schedule bool) *pipelineDecl {
	pl := &pipelineDecl{pos: n.pos, objectKey: objectKey, label: map[string][]string{}}
	known := pipelineKeys
	if schedule {
		known = append(slices.Clip(known), "cron")
	}
	for _, kv := range n.pairs {
		k, v := kv.key.value, kv.val
		switch k {
		case "name":
			pl.name = dc.str(v, "name")
		case "runner":
			dc.runner(v, pl)
		case "docker":
			dc.docker(v, pl)
		case "git":
			pl.git = dc.git(v)
		case "services":
			pl.services = dc.services(v)
		case "label":
			pl.label = dc.label(v)
		case "stages":
			pl.stages = dc.stages(v, k)
		case "failStages":
			pl.failStages = dc.stages(v, k)
		case "endStages":
			pl.endStages = dc.stages(v, k)
		case "allowFailure":
			pl.allowFail = dc.allowFailure(v)
		case "cron":
			if !schedule {
				dc.unknownKey(kv.key, "pipeline", known)
				continue
			}
			if s := dc.str(v, "cron"); s != nil {
				c, err := parseCron(s.v, dc.opts.Location)
				if err != nil {
					dc.d.fromErr(s.pos, SeverityError, err)
				}
				pl.cron = c
			}
		default:
			if !dc.common(k, v, &pl.common, "pipeline") {
				dc.unknownKey(kv.key, "pipeline", known)
			}
		}
	}
	if schedule && n.get("cron") == nil {
		dc.d.errorf(n.pos, "a schedule entry needs a cron key, like cron: \"0 2 * * *\"")
	}
	dc.validatePipeline(pl)
	return pl
}

// unknownKey warns about a key with a "did you mean" hint; runner below a pipeline is an error
// because it silently would not do what its author meant.
func (dc *decoder) unknownKey(k *node, where string, known []string) {
	if k.value == "runner" {
		dc.d.errorHint(k.pos, "move runner up to the pipeline, beside stages", "runner belongs to the pipeline, not to a %s", where)
		return
	}
	hint := suggest.Hint(k.value, known)
	if h := habits[where][k.value]; h != "" {
		hint = h
	}
	switch {
	case where == "pipeline" && k.value == "tags":
		hint = "runner tags go under runner.tags; to filter git tags, use the branch key under tag_push"
	case where == "built-in task":
		hint = "options of a built-in task go under options"
	}
	dc.d.warnHint(k.pos, hint, "unknown key %q in %s", k.value, where)
}

// isMap reports whether v is a map to decode: null counts as absent, and anything else is an
// error that says what was expected.
func (dc *decoder) isMap(v *node, what, expected string) bool {
	if v.isNull() {
		return false
	}
	if v.kind != nMap {
		dc.d.errorf(v.pos, "%s must be %s, not %s", what, expected, v.kindName())
		return false
	}
	return true
}

func (dc *decoder) runner(v *node, pl *pipelineDecl) {
	if !dc.isMap(v, "runner", "a map with tags and cpus") {
		return
	}
	for _, kv := range v.pairs {
		switch kv.key.value {
		case "tags":
			pl.tags = dc.strs(kv.val, "runner.tags")
		case "cpus":
			pl.cpus = dc.integer(kv.val, "runner.cpus")
			pl.cpusPos = kv.val.pos
			if pl.cpus <= 0 && !kv.val.isNull() {
				dc.d.errorf(kv.val.pos, "runner.cpus must be a positive number of cores")
			}
		case "namespace":
			if s := dc.str(kv.val, "runner.namespace"); s != nil {
				pl.namespace = s.v
				dc.d.warnf(s.pos, "runner.namespace is ignored: a team runner is chosen by its tag alone (a tag outside cnb:)")
			}
		default:
			dc.unknownKey(kv.key, "runner", []string{"tags", "cpus", "namespace"})
		}
	}
}

func (dc *decoder) docker(v *node, pl *pipelineDecl) {
	if !dc.isMap(v, "docker", "a map with image, build or volumes") {
		return
	}
	for _, kv := range v.pairs {
		switch kv.key.value {
		case "image":
			pl.image = dc.image(kv.val, "docker.image")
		case "build":
			pl.build = dc.build(kv.val)
		case "volumes":
			pl.volumes = dc.volumes(kv.val)
		default:
			dc.unknownKey(kv.key, "docker", []string{"image", "build", "volumes"})
		}
	}
	if pl.image != nil && pl.build != nil {
		dc.d.warnf(v.pos, "docker has both image and build; the built image is used")
	}
}

// stages decodes stages, failStages or endStages: a list of stages, jobs (a stage of one job) or
// strings (a script job).
func (dc *decoder) stages(v *node, what string) []*stageDecl {
	if v.isNull() || v.kind == nSeq && len(v.items) == 0 {
		dc.d.errorf(v.pos, "%s is empty", what)
		return nil
	}
	if v.kind != nSeq {
		dc.d.errorf(v.pos, "%s must be a list of stages, not %s", what, v.kindName())
		return nil
	}
	var out []*stageDecl
	for _, it := range v.items {
		switch {
		case it.kind == nSeq:
			dc.d.errorHint(it.pos, nestedListHint, "nested list where a stage was expected")
		case it.isNull():
			dc.d.errorf(it.pos, "empty stage in %s", what)
		case it.kind == nMap && it.get("jobs") != nil:
			out = append(out, dc.stage(it))
		default:
			if j := dc.job(it, ""); j != nil {
				out = append(out, &stageDecl{pos: it.pos, name: j.name, jobs: []*jobDecl{j}})
			}
		}
	}
	return out
}

func (dc *decoder) stage(n *node) *stageDecl {
	s := &stageDecl{pos: n.pos}
	for _, kv := range n.pairs {
		k, v := kv.key.value, kv.val
		switch k {
		case "name":
			s.name = dc.str(v, "name")
		case "jobs":
			s.jobs, s.parallel = dc.jobs(v)
		case "image":
			s.image = dc.image(v, "image")
		default:
			if !dc.common(k, v, &s.common, "stage") {
				dc.unknownKey(kv.key, "stage", stageKeys)
			}
		}
	}
	if len(s.jobs) == 0 && n.get("jobs") != nil {
		name := ""
		if s.name != nil {
			name = fmt.Sprintf(" %q", s.name.v)
		}
		dc.d.errorf(n.get("jobs").pos, "stage%s has no jobs", name)
	}
	return s
}

// jobs decodes a stage's jobs: a list runs them in order, a map runs them in parallel.
func (dc *decoder) jobs(v *node) ([]*jobDecl, bool) {
	var out []*jobDecl
	switch v.kind {
	case nSeq:
		for _, it := range v.items {
			if it.kind == nSeq {
				dc.d.errorHint(it.pos, nestedListHint, "nested list where a job was expected")
				continue
			}
			if j := dc.job(it, ""); j != nil {
				out = append(out, j)
			}
		}
		return out, false
	case nMap:
		for _, p := range v.pairs {
			if j := dc.job(p.val, p.key.value); j != nil {
				out = append(out, j)
			}
		}
		return out, true
	}
	if !v.isNull() {
		dc.d.errorf(v.pos, "jobs must be a list (run in order) or a map (run in parallel), not %s", v.kindName())
	}
	return nil, false
}

// job decodes one job: a map, or a string that is both its script and (first line) its name.
func (dc *decoder) job(n *node, key string) *jobDecl {
	j := &jobDecl{pos: n.pos, key: key}
	if key != "" {
		j.name = &str{v: key, pos: n.pos}
	}
	switch n.kind {
	case nScalar:
		if n.isNull() || n.value == "" {
			dc.d.errorf(n.pos, "empty job")
			return nil
		}
		j.kind = protocol.KindScript
		j.script = n.value
		if j.name == nil {
			first, _, _ := strings.Cut(strings.TrimSpace(n.value), "\n")
			j.name = &str{v: first, pos: n.pos}
		}
		return j
	case nSeq:
		dc.d.errorHint(n.pos, nestedListHint, "nested list where a job was expected")
		return nil
	}
	var script, commands, image, typ *node
	where := "job"
	if n.get("type") != nil {
		where = "built-in task"
	}
	for _, kv := range n.pairs {
		k, v := kv.key.value, kv.val
		switch k {
		case "name":
			j.name = dc.str(v, "name")
		case "script":
			script = v
		case "commands":
			commands = v
		case "image":
			image = v
			j.image = dc.image(v, "image")
		case "settings":
			j.settings = dc.object(v, "settings")
		case "settingsFrom":
			j.settingsFrom = dc.strs(v, "settingsFrom")
		case "args":
			for _, a := range dc.strs(v, "args") {
				j.args = append(j.args, a.v)
			}
		case "type":
			typ = v
			if s := dc.str(v, "type"); s != nil {
				j.typ = s.v
			}
		case "options":
			j.options = dc.object(v, "options")
		case "optionsFrom":
			j.optionsFrom = dc.strs(v, "optionsFrom")
		case "exports":
			j.exports = dc.exports(v)
		case "timeout":
			j.timeout = dc.timeout(v)
			j.timeoutPos = v.pos
		case "allowFailure":
			j.allowFail = dc.allowFailure(v)
		default:
			if !dc.common(k, v, &j.common, "job") {
				dc.unknownKey(kv.key, where, jobKeys)
			}
		}
	}
	switch {
	case typ != nil:
		j.kind = protocol.KindBuiltin
		if script != nil || commands != nil {
			dc.d.errorf(typ.pos, "a job is one kind: a built-in task (type) cannot also have a script")
		}
		dc.checkBuiltin(j, typ.pos)
	case commands != nil || script != nil:
		j.kind = protocol.KindScript
		if commands != nil && script != nil {
			dc.d.warnf(script.pos, "commands takes priority over script; script is ignored")
		}
		if commands != nil {
			script = commands
		}
		j.script = dc.script(script)
	case image != nil:
		j.kind = protocol.KindPlugin
	default:
		name := ""
		if j.name != nil {
			name = fmt.Sprintf(" %q", j.name.v)
		}
		dc.d.errorHint(n.pos, "add script (a shell script), image (a plugin) or type (a built-in task)",
			"job%s has neither script nor image nor type", name)
		return nil
	}
	if j.settings != nil && j.kind != protocol.KindPlugin {
		dc.d.warnf(j.settings.pos, "settings only apply to plugin jobs (image without script)")
	}
	if j.options != nil && j.kind != protocol.KindBuiltin {
		dc.d.warnf(j.options.pos, "options only apply to built-in tasks (type)")
	}
	return j
}

// script reads a script: a string, or a list joined with " && " (each item without its trailing
// newline, or the join would put "&&" at the start of a line).
func (dc *decoder) script(v *node) string {
	if v.kind == nScalar {
		if v.isNull() || v.value == "" {
			dc.d.errorf(v.pos, "script is empty")
		}
		return v.value
	}
	parts := dc.strs(v, "script")
	if len(parts) == 0 {
		dc.d.errorf(v.pos, "script is empty")
	}
	lines := make([]string, len(parts))
	for i, p := range parts {
		lines[i] = strings.TrimRight(p.v, "\n")
	}
	return strings.Join(lines, " && ")
}

// common decodes the keys every level has; it returns false for any other key.
func (dc *decoder) common(k string, v *node, c *common, level string) bool {
	switch k {
	case "env":
		c.env = dc.env(v)
	case "imports":
		c.imports = dc.strs(v, "imports")
	case "retry":
		c.retry = dc.retry(v)
	case "lock":
		c.lock = dc.lock(v, level == "pipeline")
	default:
		return dc.cond(k, v, &c.conds, level == "job")
	}
	return true
}

// cond decodes the condition keys; it returns false for any other key.
func (dc *decoder) cond(k string, v *node, c *condDecl, job bool) bool {
	switch k {
	case "if":
		c.ifScript = dc.script(v)
	case "ifModify":
		c.ifModify = dc.strs(v, "ifModify")
		for _, p := range c.ifModify {
			pat := strings.TrimPrefix(p.v, "!")
			if !strings.Contains(pat, "$") {
				if _, err := CompileGlob(pat); err != nil {
					dc.d.errorf(p.pos, "invalid ifModify pattern %q: %v", p.v, err)
				}
			}
		}
	case "ifNewBranch":
		c.ifNewBranch = dc.boolean(v, k)
	case "breakIfModify":
		c.breakIfModify = dc.boolean(v, k)
	case "skipIfModify":
		if !job {
			return false
		}
		c.skipIfModify = dc.boolean(v, k)
	default:
		return false
	}
	return true
}
