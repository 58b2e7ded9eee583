package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The lint of variable references. A ${NAME} in a substituted field (env.go lists them) that is
// neither a built-in, nor defined in the env of an enclosing level, nor exported by a job, nor
// possibly provided by imports or by the trigger, is left to run time: it is a repo secret or it
// is empty. Lint cannot see the repo's secrets, so such a reference is a warning. Scripts and if
// conditions are not checked: the shell expands them, from the job's environment.

// knownVarNames are the built-in variables of the reference and of this installation. A name in
// the trigger's prefixes (APPLY_TRIGGER_*, API_TRIGGER_*) is built-in too.
var knownVarNames = func() map[string]bool {
	names := []string{"CI", "CNB", "HUSKY_SKIP_INSTALL",
		"CNB_WEB_PROTOCOL", "CNB_WEB_HOST", "CNB_WEB_ENDPOINT", "CNB_API_ENDPOINT",
		"CNB_GROUP_SLUG", "CNB_GROUP_SLUG_LOWERCASE", "CNB_EVENT", "CNB_EVENT_URL",
		"CNB_BRANCH", "CNB_BRANCH_SHA", "CNB_DEFAULT_BRANCH", "CNB_TOKEN_USER_NAME", "CNB_TOKEN",
		"CNB_TOKEN_FOR_AI", "CNB_IS_CRONEVENT", "CNB_DOCKER_REGISTRY", "CNB_HELM_REGISTRY",
		"CNB_BEFORE_SHA", "CNB_COMMIT", "CNB_COMMIT_SHORT", "CNB_COMMIT_MESSAGE", "CNB_COMMIT_MESSAGE_TITLE",
		"CNB_COMMITTER", "CNB_COMMITTER_EMAIL", "CNB_NEW_COMMITS_COUNT",
		"CNB_IS_TAG", "CNB_TAG_MESSAGE", "CNB_TAG_RELEASE_TITLE", "CNB_TAG_RELEASE_DESC", "CNB_TAG_IS_RELEASE",
		"CNB_TAG_IS_PRE_RELEASE", "CNB_IS_NEW_BRANCH", "CNB_IS_NEW_BRANCH_WITH_UPDATE",
		"CNB_REPO_SLUG", "CNB_REPO_SLUG_LOWERCASE", "CNB_REPO_NAME", "CNB_REPO_NAME_LOWERCASE", "CNB_REPO_ID",
		"CNB_REPO_URL_HTTPS",
		"CNB_BUILD_ID", "CNB_BUILD_NUMBER", "CNB_BUILD_WEB_URL", "CNB_BUILD_START_TIME", "CNB_BUILD_USER",
		"CNB_BUILD_USER_ID", "CNB_BUILD_STAGE_NAME", "CNB_BUILD_JOB_NAME", "CNB_BUILD_JOB_KEY",
		"CNB_BUILD_WORKSPACE", "CNB_BUILD_FAILED_MSG", "CNB_BUILD_FAILED_STAGE_NAME",
		"CNB_PIPELINE_NAME", "CNB_PIPELINE_KEY", "CNB_PIPELINE_ID", "CNB_PIPELINE_DOCKER_IMAGE",
		"CNB_PIPELINE_STATUS", "CNB_RUNNER_IP", "CNB_CPUS", "CNB_MEMORY", "CNB_IS_RETRY",
		"CNB_PULL_REQUEST", "CNB_PULL_REQUEST_LIKE", "CNB_PULL_REQUEST_PROPOSER", "CNB_PULL_REQUEST_TITLE",
		"CNB_PULL_REQUEST_BRANCH", "CNB_PULL_REQUEST_SHA", "CNB_PULL_REQUEST_TARGET_SHA",
		"CNB_PULL_REQUEST_MERGE_SHA", "CNB_PULL_REQUEST_SLUG", "CNB_PULL_REQUEST_ACTION", "CNB_PULL_REQUEST_ID",
		"CNB_PULL_REQUEST_IID", "CNB_PULL_REQUEST_REVIEWERS", "CNB_PULL_REQUEST_REVIEW_STATE",
		"CNB_REVIEW_REVIEWED_BY", "CNB_REVIEW_LAST_REVIEWED_BY", "CNB_VSCODE_WEB_URL",
		"CNB_ISSUE_ID", "CNB_ISSUE_IID", "CNB_ISSUE_TITLE", "CNB_ISSUE_DESCRIPTION", "CNB_ISSUE_OWNER",
		"CNB_ISSUE_STATE", "CNB_ISSUE_IS_RESOLVED", "CNB_COMMENT_ID", "CNB_COMMENT_BODY"}
	m := map[string]bool{}
	for _, list := range [][]string{names, builtinVarNames, runtimeBuiltins} {
		for _, n := range list {
			m[n] = true
		}
	}
	return m
}()

func isBuiltinVar(name string) bool {
	return knownVarNames[name] || strings.HasPrefix(name, "APPLY_TRIGGER_") || strings.HasPrefix(name, "API_TRIGGER_")
}

// triggerPassesEnv says whether the event's trigger may hand the pipeline variables of its own:
// web_trigger buttons and inputs, the API and cnb:apply / cnb:trigger, deploy environments.
func triggerPassesEnv(event string) bool {
	switch eventFamily(event) {
	case EventWebTrigger, "web_trigger_*", EventAPITrigger, "api_trigger_*", "tag_deploy.*":
		return true
	}
	return false
}

// refScope is what a field can see, as lint knows it: names only.
type refScope struct {
	dc      *decoder
	env     map[string]bool // defined in env of an enclosing level
	exports map[string]bool // exported by a job of the pipeline
	open    bool            // imports in scope, or the trigger may pass variables
}

// child is the scope of an inner level; env values of the level are checked against the outer
// scope (with the level's own imports), as the planner substitutes them.
func (s *refScope) child(env []envVar, imports bool) *refScope {
	c := &refScope{dc: s.dc, env: s.env, exports: s.exports, open: s.open || imports}
	if len(env) == 0 {
		return c
	}
	outer := &refScope{dc: s.dc, env: s.env, exports: s.exports, open: c.open}
	c.env = make(map[string]bool, len(s.env)+len(env))
	for n := range s.env {
		c.env[n] = true
	}
	for _, v := range env {
		outer.checkEnvValue(v, env)
		c.env[v.name] = true
	}
	return c
}

// fieldKind says when a field is substituted. The backend finalises some before the pipeline
// runs (names, runner tags, ifModify, lock keys, allowFailure): neither secrets nor imports reach
// those; the agent expands the others.
type fieldKind bool

const (
	runTime  fieldKind = false
	planTime fieldKind = true
)

// unknownRefs returns the names referenced in raw that the scope cannot explain, in order.
func (s *refScope) unknownRefs(raw string) []string {
	if !strings.Contains(raw, "$") || s.open {
		return nil
	}
	var out []string
	protocol.ReplaceVars(raw, func(name, _ string) string {
		if !isBuiltinVar(name) && !s.env[name] && !s.exports[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
		return ""
	}, "")
	return out
}

func (s *refScope) check(raw string, pos Pos, what string, kind fieldKind) {
	for _, name := range s.unknownRefs(raw) {
		if kind == planTime {
			s.dc.d.warnf(pos, "%s: ${%s} is not a built-in variable nor defined in env; it will be empty "+
				"(this field is fixed before the pipeline runs, so repo secrets and imports do not reach it)", what, name)
			continue
		}
		s.dc.d.warnf(pos, "%s: ${%s} is not a built-in variable nor defined in env; it will be empty unless "+
			"it is a repo secret or comes from imports", what, name)
	}
}

// checkEnvValue checks one env value; a reference to a sibling gets its own message, since
// the name is defined in env, just not where the value can see it.
func (s *refScope) checkEnvValue(v envVar, level []envVar) {
	for _, name := range s.unknownRefs(v.value) {
		if slices.ContainsFunc(level, func(o envVar) bool { return o.name == name && o.name != v.name }) {
			s.dc.d.warnf(v.pos, "env %s: ${%s} refers to %s of the same env, which an env value cannot see "+
				"(only the env of outer levels); it will be empty unless it is a repo secret or comes from imports",
				v.name, name, name)
			continue
		}
		s.dc.d.warnf(v.pos, "env %s: ${%s} is not a built-in variable nor defined in env; it will be empty unless "+
			"it is a repo secret or comes from imports", v.name, name)
	}
}

func (s *refScope) checkAll(list []str, what string, kind fieldKind) {
	for _, v := range list {
		s.check(v.v, v.pos, what, kind)
	}
}

func (s *refScope) checkStr(v *str, what string, kind fieldKind) {
	if v != nil {
		s.check(v.v, v.pos, what, kind)
	}
}

func (s *refScope) checkImage(img *imageDecl, what string) {
	if img == nil {
		return
	}
	s.check(img.name.v, img.name.pos, what, runTime)
	s.check(img.user.v, img.user.pos, what+".dockerUser", runTime)
	s.check(img.password.v, img.password.pos, what+".dockerPassword", runTime)
}

// checkNode checks the strings of settings or options (their keys are not substituted).
func (s *refScope) checkNode(n *node, what string) {
	if n == nil {
		return
	}
	switch n.kind {
	case nMap:
		for _, p := range n.pairs {
			s.checkNode(p.val, what+"."+p.key.value)
		}
	case nSeq:
		for i, it := range n.items {
			s.checkNode(it, fmt.Sprintf("%s[%d]", what, i))
		}
	default:
		s.check(n.value, n.pos, what, runTime)
	}
}

func (s *refScope) checkLock(l *lockDecl) {
	if l != nil {
		s.checkStr(l.key, "lock.key", planTime)
	}
}

// checkVarRefs warns about the variable references of an event's pipelines that nothing can
// provide but a repo secret.
func (dc *decoder) checkVarRefs(e *eventDecl) {
	for _, pl := range e.pipelines {
		base := &refScope{dc: dc, exports: exportsOf(pl), open: triggerPassesEnv(e.key)}
		ps := base.child(pl.env, len(pl.imports) > 0)
		ps.checkStr(pl.name, "name", planTime)
		ps.checkAll(pl.tags, "runner.tags", planTime)
		ps.checkAll(pl.imports, "imports", runTime)
		ps.checkImage(pl.image, "docker.image")
		if b := pl.build; b != nil {
			ps.check(b.dockerfile.v, b.dockerfile.pos, "docker.build.dockerfile", runTime)
			ps.check(b.target.v, b.target.pos, "docker.build.target", runTime)
			ps.checkAll(b.by, "docker.build.by", runTime)
			ps.checkAll(b.versionBy, "docker.build.versionBy", runTime)
			ps.child(b.buildArgs, false) // checks the build args, which substitute like env
		}
		ps.checkAll(pl.volumes, "docker.volumes", runTime)
		ps.checkAll(pl.conds.ifModify, "ifModify", planTime)
		ps.checkStr(pl.allowFail, "allowFailure", planTime)
		ps.checkLock(pl.lock)
		for _, list := range [][]*stageDecl{pl.stages, pl.failStages, pl.endStages} {
			for _, s := range list {
				ps.checkStage(s)
			}
		}
	}
}

func (s *refScope) checkStage(st *stageDecl) {
	ss := s.child(st.env, len(st.imports) > 0)
	if len(st.jobs) != 1 || st.name != st.jobs[0].name { // a job written as a stage shares its name
		ss.checkStr(st.name, "name", planTime)
	}
	ss.checkAll(st.imports, "imports", runTime)
	ss.checkAll(st.conds.ifModify, "ifModify", planTime)
	ss.checkLock(st.lock)
	for _, j := range st.jobs {
		js := ss.child(j.env, len(j.imports) > 0)
		if j.name != nil && j.name.pos != j.pos { // not a name taken from a script or a key
			js.checkStr(j.name, "name", planTime)
		}
		js.checkAll(j.imports, "imports", runTime)
		img := j.image
		if img == nil && j.kind == protocol.KindScript {
			img = st.image
		}
		js.checkImage(img, "image")
		js.checkNode(j.settings, "settings")
		js.checkNode(j.options, "options")
		js.checkAll(j.settingsFrom, "settingsFrom", runTime)
		js.checkAll(j.optionsFrom, "optionsFrom", runTime)
		js.checkStr(j.allowFail, "allowFailure", planTime)
		js.checkLock(j.lock)
		js.checkAll(j.conds.ifModify, "ifModify", planTime)
	}
}
