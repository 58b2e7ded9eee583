package protocol

import (
	"slices"
	"sort"
)

// Blockers lists what in a plan this version of the agent does not run, as short names
// ("services:<name>", "builtin:git:release"); none means
// the whole pipeline runs. `nimbus plan --explain` prints it, so what a .cnb.yml needs beyond
// this installation is visible before it is pushed. It must follow what agent/runner does:
// the runner tests of each feature are where a change here is proven.
func Blockers(p Plan) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range p.Services {
		// docker: agent/dockerservice; vscode: the workspace (agent/runner/devenv.go).
		if s.Name != "docker" && s.Name != "vscode" {
			add("services:" + s.Name)
		}
	}
	// Locks run: a pipeline's own in the scheduler (backend/scheduler/locks.go), a stage's or a
	// job's in the agent (agent/runner/locks.go).
	for _, group := range [][]Stage{p.Stages, p.FailStages, p.EndStages} {
		for _, st := range group {
			for _, j := range st.Jobs {
				switch {
				case j.Unsupported != "":
					add("builtin:" + j.Type)
				case j.Kind == KindBuiltin && !slices.Contains(AgentBuiltins(), j.Type):
					add("builtin:" + j.Type)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// AgentBuiltins are the built-in task types (type: …) the agent runs itself.
func AgentBuiltins() []string {
	return []string{"cnb:apply", "cnb:await", "cnb:resolve", "cnb:trigger", "docker:cache", "git:auto-merge", "git:release", "git:reviewer", "vscode:go"}
}
