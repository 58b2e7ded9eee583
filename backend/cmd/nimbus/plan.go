package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/internal/envflag"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// pathList collects --changed values: comma-separated, repeatable. set tells "no diff" (flag
// absent) from "an empty diff" (--changed "").
type pathList struct {
	paths []string
	set   bool
}

func (p *pathList) String() string { return strings.Join(p.paths, ",") }

func (p *pathList) Set(v string) error {
	p.set = true
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			p.paths = append(p.paths, s)
		}
	}
	return nil
}

// varList collects repeatable --env K=V flags.
type varList map[string]string

func (v varList) String() string { return "" }

func (v varList) Set(s string) error {
	k, val, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not K=V", s)
	}
	v[k] = val
	return nil
}

func planCommand() command {
	return command{summary: "print the pipelines a .cnb.yml runs for an event, as JSON", run: runPlan}
}

func runPlan(_ context.Context, e env, args []string) int {
	var t spec.Trigger
	changed := &pathList{}
	vars := varList{}
	fs := envflag.New("plan", "Usage: nimbus plan --event EVENT (--branch B | --tag T) [--changed PATHS] [--env K=V…] [FILE]\n\n"+
		"Prints the Plans that FILE (default .cnb.yml) gives for the event, as the agent receives them.\n"+
		"EVENT is an event key: push, tag_push, vscode, web_trigger_x, \"crontab: 0 2 * * *\", or\n"+
		"schedule for the schedule: list form. Without --changed the event has no diff and ifModify\n"+
		"is ignored.")
	fs.String(&t.Event, "event", "", "", "the event (required)")
	fs.String(&t.Branch, "branch", "", "", "the branch the event is on")
	fs.String(&t.Tag, "tag", "", "", "the tag, for tag events")
	fs.String(&t.Cron, "cron", "", "", "for schedule and crontab events: only the entries with this expression")
	fs.String(&t.DefaultBranch, "default-branch", "", "", "the repository's default branch (CNB_DEFAULT_BRANCH)")
	fs.Bool(&t.IsNewBranch, "new-branch", "", false, "the branch is new (CNB_IS_NEW_BRANCH, ifNewBranch)")
	fs.Var(changed, "changed", "", "changed files, comma-separated; repeatable")
	fs.Var(vars, "env", "", "a built-in variable K=V the build would have (CNB_REPO_SLUG=…); repeatable")
	var explain bool
	fs.Bool(&explain, "explain", "", false, "add to each pipeline whether this installation runs all of it (runs) and what it does not run (blockers: an event it never fires, services, built-ins)")
	var limits spec.Limits
	config.LimitFlags(fs, &limits)
	if err := fs.Parse(args, e.getenv, e.stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(e.stderr, "nimbus:", err)
		return 2
	}
	switch {
	case t.Event == "":
		fmt.Fprintln(e.stderr, "nimbus plan: --event is required (see --help)")
		return 2
	case (t.Branch == "") == (t.Tag == ""):
		fmt.Fprintln(e.stderr, "nimbus plan: give exactly one of --branch and --tag")
		return 2
	}
	if changed.set {
		t.Changed = append([]string{}, changed.paths...)
	}
	t.Vars = vars
	src, opts, cfg, err := loadSpec(fs.Args(), limits)
	if err != nil {
		fmt.Fprintln(e.stderr, "nimbus plan:", err)
		return 2
	}
	ds := cfg.Diagnostics()
	writeDiagnostics(e.stderr, src, opts, ds)
	if ds.HasErrors() {
		return 1
	}
	set, pds, err := cfg.Plan(t)
	writeDiagnostics(e.stderr, src, opts, pds)
	if err != nil {
		return 1
	}
	var out any = set
	if explain {
		out = explained(set, t.Event, cfg.Fires(t.Event))
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(e.stderr, "nimbus plan:", err)
		return 2
	}
	return 0
}

// explainedPlan is a plan with the agent's verdict on it.
type explainedPlan struct {
	protocol.Plan
	Runs     bool     `json:"runs"`
	Blockers []string `json:"blockers,omitempty"`
}

// explained adds the verdicts. A pipeline under an event this installation never fires does not
// run, however runnable its jobs: it gets the blocker "event:<event>".
func explained(set *protocol.PlanSet, event string, fires bool) any {
	out := struct {
		Pipelines []explainedPlan `json:"pipelines"`
	}{Pipelines: []explainedPlan{}}
	for _, p := range set.Pipelines {
		b := protocol.Blockers(p)
		if !fires {
			b = append([]string{"event:" + event}, b...)
		}
		out.Pipelines = append(out.Pipelines, explainedPlan{Plan: p, Runs: len(b) == 0, Blockers: b})
	}
	return out
}
