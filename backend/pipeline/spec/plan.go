package spec

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nimbus-build/nimbus/backend/runnerclass"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// maxChangedFiles is how many changed files ifModify considers.
const maxChangedFiles = 300

// Plan returns the pipelines the trigger runs, in declaration order, with the diagnostics of
// planning (a runner tag or pipeline name that only fails once substituted, an event this
// installation does not fire). The error is non-nil when the file or the plan has errors.
func (c *Config) Plan(t Trigger) (*protocol.PlanSet, Diagnostics, error) {
	if err := c.diags.Err(); err != nil {
		return nil, c.diags, err
	}
	d := &diags{}
	if t.Event == "" {
		d.errorf(Pos{File: c.opts.File}, "the trigger has no event")
		ds := d.sorted(c.opts.File)
		return nil, ds, ds.Err()
	}
	if eventFamily(t.Event) != "" && !fired(t.Event, c.opts.FiredEvents) {
		d.warnf(Pos{File: c.opts.File}, "event %q is not supported by this installation", t.Event)
	}
	sel := c.selectPipelines(t)
	if !c.withinLimits(sel, t, d) {
		// Nothing is planned: a build over the limits is not made, not even in memory.
		ds := d.sorted(c.opts.File)
		return nil, ds, ds.Err()
	}
	pn := newPlanner(c, t, d)
	set := &protocol.PlanSet{Pipelines: []protocol.Plan{}}
	names := map[string]Pos{}
	for i, s := range sel {
		p := pn.pipeline(i, s)
		if first, dup := names[p.Name]; dup {
			d.errorHint(s.pipeline.pos, "pipelines that run together are told apart by name",
				"duplicate pipeline name %q for %s on %s (first at %s)", p.Name, t.Event, p.Ref, first)
		}
		names[p.Name] = s.pipeline.pos
		set.Pipelines = append(set.Pipelines, p)
	}
	ds := d.sorted(c.opts.File)
	if err := ds.Err(); err != nil {
		return nil, ds, err
	}
	return set, ds, nil
}

// planner builds the plans of one trigger.
type planner struct {
	c       *Config
	t       Trigger
	d       *diags
	ref     string
	diff    bool     // ifModify is evaluated (the event has a diff)
	changed []string // at most maxChangedFiles
	// modifiedMemo remembers ifModify verdicts by pattern list: files repeat the same lists.
	modifiedMemo map[string]bool
}

func newPlanner(c *Config, t Trigger, d *diags) *planner {
	pn := &planner{c: c, t: t, d: d, ref: t.refName()}
	newBranchPush := t.IsNewBranch && (t.Event == EventPush || t.Event == EventCommitAdd)
	pn.diff = t.Changed != nil && hasDiff(t.Event) && !newBranchPush
	pn.changed = t.Changed
	if len(pn.changed) > maxChangedFiles {
		pn.changed = pn.changed[:maxChangedFiles]
	}
	return pn
}

// builtins are the variables the trigger and the engine know for one pipeline.
func (pn *planner) builtins(event, key string) map[string]string {
	t := pn.t
	b := make(map[string]string, len(t.Vars)+16)
	maps.Copy(b, t.Vars)
	if b["CNB_BUILD_WORKSPACE"] == "" {
		b["CNB_BUILD_WORKSPACE"] = pn.c.opts.CheckoutMount
	}
	if t.DefaultBranch != "" {
		b["CNB_DEFAULT_BRANCH"] = t.DefaultBranch
	}
	b["CI"] = "true"
	b["CNB"] = "true"
	b["CNB_EVENT"] = event
	b["CNB_BRANCH"] = pn.ref
	b["CNB_IS_TAG"] = strconv.FormatBool(isTagEvent(event))
	b["CNB_IS_CRONEVENT"] = strconv.FormatBool(event == EventCrontab || event == EventSchedule)
	b["CNB_IS_NEW_BRANCH"] = strconv.FormatBool(t.IsNewBranch)
	b["CNB_PIPELINE_KEY"] = key
	return b
}

func (pn *planner) pipeline(index int, s selected) protocol.Plan {
	pl := s.pipeline
	event := cnbEvent(s.event.key)
	p := protocol.Plan{
		Key:       "pipeline-" + strconv.Itoa(index),
		Event:     event,
		BranchKey: s.branch.pattern,
		Ref:       pn.ref,
	}
	switch {
	case pl.cron != nil:
		p.Cron = pl.cron.expr
	case s.event.cron != nil:
		p.Cron = s.event.cron.expr
	}
	builtins := pn.builtins(event, p.Key)
	base := &scope{builtins: builtins, exports: exportsOf(pl)}

	// Name and tags come first: CNB_PIPELINE_NAME and CNB_CPUS depend on them, and the env
	// below may reference those.
	early := base.child(pl.env)
	declared := pl.objectKey
	if pl.name != nil {
		declared = early.final(pl.name.v)
	}
	p.Name = pipelineName(declared, "", index)
	builtins["CNB_PIPELINE_NAME"] = declared
	p.Runner = pn.runner(pl, early)
	builtins["CNB_CPUS"] = strconv.Itoa(p.Runner.Cpus)
	builtins["CNB_MEMORY"] = strconv.Itoa(p.Runner.MemoryGiB)

	ps := base.child(pl.env)
	fs := newFieldSet()
	p.Env = pickEnv(ps.env, pl.env)
	fs.strMap(p.Env)
	p.Imports = tmplList(ps, pl.imports)
	for i := range p.Imports {
		fs.str(&p.Imports[i])
	}
	p.Workspace = event == EventVSCode
	for _, sv := range pl.services {
		p.Services = append(p.Services, protocol.Service{Name: sv.name, Version: sv.version, Options: anyMap(nodeToAny(sv.options, nil))})
		p.Workspace = p.Workspace || sv.name == "vscode"
	}
	pn.docker(&p, pl, ps, fs)
	p.RuntimeVars = fs.finish()
	if p.Image != nil && !strings.Contains(p.Image.Name, "$") { // final: no run-time reference
		builtins["CNB_PIPELINE_DOCKER_IMAGE"] = p.Image.Name
	}

	p.Git = gitPlan(pl.git, event)
	for k, v := range pl.label {
		if p.Label == nil {
			p.Label = map[string][]string{}
		}
		p.Label[k] = slices.Clone(v) // plans are the caller's to change; the Config is shared
	}
	p.Conditions = pn.conditions(pl.conds, ps)
	p.Retry = pl.retry
	p.AllowFailure = allowFailure(pl.allowFail, ps)
	p.Lock = lockPlan(pl.lock, ps, pn.ref+"-"+p.Name)

	p.Stages = pn.stages(pl.stages, ps, &p, pl)
	if p.Stages == nil {
		p.Stages = []protocol.Stage{} // "stages" is always present in the JSON contract
	}
	p.FailStages = pn.stages(pl.failStages, ps, &p, pl)
	p.EndStages = pn.stages(pl.endStages, ps, &p, pl)
	p.Builtins = builtins
	return p
}

// runner substitutes the tags and resolves the class and the effective cores.
func (pn *planner) runner(pl *pipelineDecl, sc *scope) protocol.Runner {
	var tags []string
	pos := pl.pos
	for _, t := range pl.tags {
		if v := sc.final(t.v); v != "" {
			tags = append(tags, v)
		}
		pos = t.pos
	}
	classes := pn.c.opts.classes
	class, err := classes.resolve(tags)
	if err != nil {
		pn.d.fromErr(pos, SeverityError, err)
		class, _ = classes.resolve(nil)
		if class == nil {
			class = &runnerclass.Class{Tags: []string{runnerclass.DefaultTag}}
		}
	}
	cpus, err := effectiveCPUs(class, pl.cpus)
	if err != nil {
		pn.d.fromErr(pl.cpusPos, SeverityError, err)
	}
	r := planRunner(class, tags, pl.cpus, cpus, pl.namespace)
	if runnerclass.IsTeamTag(class.Tags[0], classes.list) {
		r.Team = true
		if anyVar(pl.tags) { // literal tags got the note when the file was validated
			teamRunnerNote(pn.d, pos, class.Tags[0])
		}
	}
	return r
}

// docker fills the pipeline image, build and volumes as templates.
func (pn *planner) docker(p *protocol.Plan, pl *pipelineDecl, sc *scope, fs *fieldSet) {
	switch {
	case pl.build != nil:
		b := pl.build
		p.Build = &protocol.DockerBuild{
			Dockerfile:               sc.tmpl(b.dockerfile.v),
			Target:                   sc.tmpl(b.target.v),
			By:                       tmplList(sc, b.by),
			VersionBy:                tmplList(sc, b.versionBy),
			BuildArgs:                pickEnv(sc.child(b.buildArgs).env, b.buildArgs),
			IgnoreBuildArgsInVersion: b.ignoreBuildArgsInVersion,
			Sync:                     b.sync,
		}
		fs.str(&p.Build.Dockerfile)
		fs.str(&p.Build.Target)
		for i := range p.Build.By {
			fs.str(&p.Build.By[i])
		}
		for i := range p.Build.VersionBy {
			fs.str(&p.Build.VersionBy[i])
		}
		fs.strMap(p.Build.BuildArgs)
	case pl.image != nil:
		p.Image = imagePlan(pl.image, sc, fs)
	case p.Workspace:
		p.Image = &protocol.Image{Name: pn.c.opts.DefaultDevImage}
	default:
		p.Image = &protocol.Image{Name: pn.c.opts.DefaultBuildImage}
	}
	for _, v := range pl.volumes {
		vol, err := parseVolume(sc.tmpl(v.v))
		if err != nil {
			pn.d.errorf(v.pos, "%v", err)
			continue
		}
		p.Volumes = append(p.Volumes, vol)
	}
	for i := range p.Volumes {
		fs.str(&p.Volumes[i].Group)
		fs.str(&p.Volumes[i].Path)
	}
}

func imagePlan(img *imageDecl, sc *scope, fs *fieldSet) *protocol.Image {
	if img == nil {
		return nil
	}
	out := &protocol.Image{Name: sc.tmpl(img.name.v), User: sc.tmpl(img.user.v), Password: sc.tmpl(img.password.v)}
	fs.str(&out.Name)
	fs.str(&out.User)
	fs.str(&out.Password)
	return out
}

func tmplList(sc *scope, list []str) []string {
	var out []string
	for _, s := range list {
		out = append(out, sc.tmpl(s.v))
	}
	return out
}

// pickEnv returns the entries of a scope's env that a level declares.
func pickEnv(env map[string]string, declared []envVar) map[string]string {
	if len(declared) == 0 {
		return nil
	}
	out := make(map[string]string, len(declared))
	for _, v := range declared {
		out[v.name] = env[v.name]
	}
	return out
}

func anyMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// exportsOf lists the variables the jobs of a pipeline export.
func exportsOf(pl *pipelineDecl) map[string]bool {
	out := map[string]bool{}
	for _, list := range [][]*stageDecl{pl.stages, pl.failStages, pl.endStages} {
		for _, s := range list {
			for _, j := range s.jobs {
				for _, v := range j.exports {
					out[v] = true
				}
			}
		}
	}
	return out
}

func gitPlan(g gitDecl, event string) protocol.Git {
	val := func(p *bool, def bool) bool {
		if p == nil {
			return def
		}
		return *p
	}
	return protocol.Git{
		Enable:           val(g.enable, event != EventBranchDel),
		Submodules:       val(g.submodules, true),
		SubmodulesRemote: val(g.submodulesRemote, false),
		LFS:              val(g.lfs, true),
	}
}

func allowFailure(s *str, sc *scope) bool {
	if s == nil {
		return false
	}
	b, _ := boolValue(&node{kind: nScalar, value: strings.TrimSpace(sc.final(s.v))})
	return b
}

func lockPlan(l *lockDecl, sc *scope, defaultKey string) *protocol.Lock {
	if l == nil {
		return nil
	}
	key := defaultKey
	if l.key != nil {
		key = sc.final(l.key.v)
	}
	return &protocol.Lock{
		Key:              key,
		Expires:          protocol.Duration(l.expires),
		Timeout:          protocol.Duration(l.timeout),
		Wait:             l.wait,
		CancelInProgress: l.cancelInProgress,
		CancelInWait:     l.cancelInWait,
	}
}

// conditions evaluates ifModify and ifNewBranch (OR-ed, and OR-ed with if): when one holds the
// level runs; when neither does, an if script still may, and otherwise the level is skipped.
func (pn *planner) conditions(c condDecl, sc *scope) protocol.Conditions {
	out := protocol.Conditions{IfNewBranch: c.ifNewBranch, BreakIfModify: c.breakIfModify, SkipIfModify: c.skipIfModify}
	for _, m := range c.ifModify {
		out.IfModify = append(out.IfModify, sc.final(m.v))
	}
	if len(out.IfModify) == 0 && !c.ifNewBranch {
		out.If = c.ifScript
		return out
	}
	var reasons []string
	if len(out.IfModify) > 0 {
		if !pn.diff || pn.modified(out.IfModify, c.ifModify) {
			return out
		}
		reasons = append(reasons, "ifModify: no changed file matches")
	}
	if c.ifNewBranch {
		if pn.t.IsNewBranch {
			return out
		}
		reasons = append(reasons, "ifNewBranch: not a new branch")
	}
	if c.ifScript != "" {
		out.If = c.ifScript
		return out
	}
	out.Skip = strings.Join(reasons, "; ")
	return out
}

func (pn *planner) modified(patterns []string, decl []str) bool {
	key := strings.Join(patterns, "\x00")
	if v, ok := pn.modifiedMemo[key]; ok {
		return v
	}
	f, err := compilePathFilter(patterns)
	if err != nil {
		pn.d.errorf(decl[0].pos, "invalid ifModify: %v", err)
		return false
	}
	v := false
	for _, path := range pn.changed {
		if f.match(path) {
			v = true
			break
		}
	}
	if pn.modifiedMemo == nil {
		pn.modifiedMemo = map[string]bool{}
	}
	pn.modifiedMemo[key] = v
	return v
}

func (pn *planner) stages(list []*stageDecl, ps *scope, p *protocol.Plan, pl *pipelineDecl) []protocol.Stage {
	var out []protocol.Stage
	for si, s := range list {
		ss := ps.child(s.env)
		st := protocol.Stage{Parallel: s.parallel, Retry: s.retry, Jobs: make([]protocol.Job, 0, len(s.jobs))}
		if s.name != nil {
			st.Name = ss.final(s.name.v)
		}
		st.Conditions = pn.conditions(s.conds, ss)
		if s.lock != nil {
			st.Lock = lockPlan(s.lock, ss, fmt.Sprintf("%s-%s-%d", pn.ref, p.Name, si))
		}
		// Each job is built where it will stay: a Job is a few hundred bytes, and building it in a
		// local that escapes and then copying it cost a fifth of the planner's allocations.
		st.Jobs = st.Jobs[:len(s.jobs)]
		for ji, j := range s.jobs {
			pn.job(&st.Jobs[ji], j, ji, s, si, ss, p, pl)
		}
		out = append(out, st)
	}
	return out
}

// job fills in the zero Job job from its declaration.
func (pn *planner) job(job *protocol.Job, j *jobDecl, ji int, s *stageDecl, si int, ss *scope, p *protocol.Plan, pl *pipelineDecl) {
	js := ss.child(j.env)
	job.Key = j.key
	job.Kind = j.kind
	job.Script = j.script
	job.Type = j.typ
	job.Args = slices.Clone(j.args)
	job.Retry = j.retry
	if job.Key == "" {
		job.Key = "job-" + strconv.Itoa(ji)
	}
	if j.name != nil {
		job.Name = js.final(j.name.v)
	}
	if len(j.exports) > 0 {
		job.Exports = maps.Clone(j.exports)
	}
	fs := newFieldSet()
	if len(js.env) > 0 {
		job.Env = js.env
		if len(j.env) == 0 {
			job.Env = maps.Clone(js.env) // inherited: finishing it must not touch the stage's
		}
		fs.strMap(job.Env)
	}
	// Imports are rebuilt from the declarations: the plan's own copies may be finalised already.
	job.Imports = append(append(tmplList(js, pl.imports), tmplList(js, s.imports)...), tmplList(js, j.imports)...)
	for i := range job.Imports {
		fs.str(&job.Imports[i])
	}
	img := j.image
	if img == nil && j.kind == protocol.KindScript {
		img = s.image
	}
	job.Image = imagePlan(img, js, fs)
	if j.settings != nil {
		job.Settings = anyMap(nodeToAny(j.settings, js.tmpl))
		fs.anyMap(&job.Settings)
	}
	if j.options != nil {
		job.Options = anyMap(nodeToAny(j.options, js.tmpl))
		fs.anyMap(&job.Options)
	}
	job.SettingsFrom = tmplList(js, j.settingsFrom)
	job.OptionsFrom = tmplList(js, j.optionsFrom)
	for i := range job.SettingsFrom {
		fs.str(&job.SettingsFrom[i])
	}
	for i := range job.OptionsFrom {
		fs.str(&job.OptionsFrom[i])
	}
	if j.timeout > 0 {
		job.Timeout = protocol.Duration(j.timeout)
		if limit := p.Runner.MaxDuration; limit > 0 && job.Timeout > limit {
			pn.d.warnf(j.timeoutPos, "timeout %s is above the pipeline cap of %s of %s; the cap applies",
				fmtDuration(j.timeout), fmtDuration(limit.Std()), p.Runner.Class)
			job.Timeout = limit
		}
	}
	job.AllowFailure = allowFailure(j.allowFail, js)
	if j.lock != nil {
		job.Lock = lockPlan(j.lock, js, fmt.Sprintf("%s-%s-%d-%s", pn.ref, p.Name, si, job.Name))
	}
	job.Conditions = pn.conditions(j.conds, js)
	if j.kind == protocol.KindBuiltin {
		job.Unsupported = unsupportedBuiltin(j.typ, pn.c.opts.SupportedBuiltins)
	}
	// Last: finishing may finalise the job's env in place, and js substitutes from it above.
	job.RuntimeVars = fs.finish()
}
