// Package spec is the .cnb.yml engine: it parses, validates and matches a .cnb.yml and turns the
// pipelines a trigger selects into Plans, the contract with the agent. It also parses the
// repository's other pipeline file, .cnb/web_trigger.yml (buttons.go): every .cnb/*.yml file is
// parsed here.
//
// It is a pure library: bytes in, Plans or diagnostics out, with no I/O of its own. Included
// files are read through the FileSource the caller provides. It imports nothing else of the
// project except internal/protocol, because the Plan it produces is the agent's wire contract and
// must live where the agent (which never imports backend/) can import it, and
// backend/runnerclass, the runner classes runner: is checked against.
//
// The flow, one file per step (README.md draws it):
//
//	parse.go     YAML (yaml.v3) → position-carrying nodes; anchors, aliases, merge keys, CRLF
//	include.go   include (local, remote, inline config; 50 files) merged, then !reference
//	decode.go    nodes → declarations: branch keys, events, pipelines, stages, jobs
//	values.go    leaf values: strings, durations, images, env, locks, volumes
//	validate.go  runner classes, caps, cron, duplicate names, built-in tasks
//	match.go     trigger → pipelines: two-phase branch matching, events, schedules
//	env.go       variable substitution and env layering
//	plan.go      declarations + trigger → protocol.Plan
//	glob.go      the globstar/extglob matcher of branch keys and ifModify
//	runner.go    runner.tags and runner.cpus against the classes of backend/runnerclass
//	buttons.go   .cnb/web_trigger.yml: the repo page's buttons
//
// internal/yamlpos locates YAML syntax errors; internal/suggest makes "did you mean" hints.
package spec

import (
	"time"

	"github.com/nimbus-build/nimbus/backend/runnerclass"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Options configure the engine. The zero value works: default runner classes, Asia/Shanghai,
// the default set of fired events, no built-in tasks, and no file access.
type Options struct {
	// File names the main file in diagnostics; ".cnb.yml" when empty.
	File string
	// Files reads local includes, relative to the repository root. Nil makes a local include an
	// error (unless ignoreError).
	Files FileSource
	// Remote reads https:// includes. Nil means they are not read: lint warns and moves on. A
	// Remote that fails is an error, as at build time.
	Remote FileSource
	// Classes are the runner classes; runnerclass.Defaults() when nil.
	Classes []runnerclass.Class
	// Location is the time zone of schedules; UTC+8 (Asia/Shanghai) when nil.
	Location *time.Location
	// FiredEvents are the events this installation fires; DefaultFiredEvents() when nil.
	FiredEvents []string
	// SupportedBuiltins are the built-in task types (type: …) the agents run beyond
	// protocol.AgentBuiltins (which every agent runs); no others when nil.
	SupportedBuiltins []string
	// DefaultBuildImage and DefaultDevImage are the images of pipelines that name none, for
	// builds and for workspaces.
	DefaultBuildImage, DefaultDevImage string
	// CheckoutMount is CNB_BUILD_WORKSPACE: where every job container mounts the pipeline's
	// checkout (the job directory; "workspace" in the code is the cloud IDE).
	CheckoutMount string
	// Limits bound the pipelines, stages and jobs of one build; DefaultLimits() for zero fields.
	Limits Limits

	classes runnerClasses
}

func (o Options) withDefaults() Options {
	if o.File == "" {
		o.File = ".cnb.yml"
	}
	if o.Classes == nil {
		o.Classes = runnerclass.Defaults()
	}
	if o.Location == nil {
		o.Location = time.FixedZone("Asia/Shanghai", 8*60*60) // no DST; avoids reading tzdata
	}
	if o.FiredEvents == nil {
		o.FiredEvents = DefaultFiredEvents()
	}
	if o.DefaultBuildImage == "" {
		o.DefaultBuildImage = "cnbcool/default-build-env"
	}
	if o.DefaultDevImage == "" {
		o.DefaultDevImage = "cnbcool/default-dev-env"
	}
	if o.CheckoutMount == "" {
		o.CheckoutMount = "/workspace"
	}
	o.Limits = o.Limits.withDefaults()
	o.classes = newRunnerClasses(o.Classes)
	return o
}

// Trigger is what happened: the event and the ref it happened on, and what the caller knows.
type Trigger struct {
	// Event is an event key: push, tag_push, vscode, web_trigger_x, "crontab: 0 2 * * *", or
	// schedule (Part A's list form). "crontab" alone selects every crontab key.
	Event string
	// Branch or Tag the event is for; tag events match branch keys against Tag.
	Branch string
	Tag    string
	// Cron, for schedule and crontab events, selects only the entries with this expression.
	Cron string
	// Changed are the changed files, or nil when the event has no diff (ifModify is then
	// ignored). Only the first 300 are considered.
	Changed []string
	// IsNewBranch is CNB_IS_NEW_BRANCH, for ifNewBranch.
	IsNewBranch   bool
	DefaultBranch string
	// Vars are built-in CNB_* variables the caller knows (CNB_REPO_SLUG, CNB_COMMIT, …). The
	// engine adds the ones it derives (CNB_EVENT, CNB_BRANCH, CNB_PIPELINE_NAME, CNB_CPUS, …).
	Vars map[string]string
}

// Config is a parsed and validated .cnb.yml with its includes. It is never modified after Parse,
// so one Config may plan many triggers concurrently.
type Config struct {
	opts     Options
	branches []*branchDecl
	diags    Diagnostics
}

// Parse reads, merges, validates and decodes a .cnb.yml. It always returns a Config; when the
// diagnostics hold errors the Config plans nothing.
func Parse(src []byte, opts Options) (*Config, Diagnostics) {
	opts = opts.withDefaults()
	d := &diags{}
	b := &budget{left: maxNodes}
	l := &loader{opts: &opts, d: d, budget: b, stack: []string{opts.File, ".cnb.yml"}}
	cfg := &Config{opts: opts}
	root := l.load(opts.File, src)
	if root != nil {
		root = resolveReferences(root, b, d, l.unread)
		if b.exceeded {
			d.errorf(Pos{File: opts.File}, "the document expands to more than %d values (aliases or !reference nested too deeply)", maxNodes)
		} else {
			dc := &decoder{d: d, opts: &opts}
			cfg.branches = dc.branches(root)
			separateWorkspaces(cfg.branches, d)
		}
	}
	cfg.diags = d.sorted(opts.File)
	return cfg, cfg.diags
}

// Lint parses src and returns every diagnostic.
func Lint(src []byte, opts Options) Diagnostics {
	_, ds := Parse(src, opts)
	return ds
}

// Compile parses src and plans it for the trigger.
func Compile(src []byte, t Trigger, opts Options) (*protocol.PlanSet, Diagnostics, error) {
	cfg, ds := Parse(src, opts)
	if err := ds.Err(); err != nil {
		return nil, ds, err
	}
	return cfg.Plan(t)
}

// Diagnostics returns what Parse found.
func (c *Config) Diagnostics() Diagnostics { return c.diags }

// Fires reports whether this installation fires event (Options.FiredEvents): a pipeline under
// an event it never fires plans, but never runs.
func (c *Config) Fires(event string) bool { return fired(event, c.opts.FiredEvents) }

// Declaration is one event under one branch key, for listing what a file declares.
type Declaration struct {
	BranchKey string
	Event     string
	// Cron is the normalised expression of a crontab key; schedule entries have one each.
	Cron      []string
	Pipelines int
	Pos       Pos
}

// Declarations lists every event of every branch key, in file order.
func (c *Config) Declarations() []Declaration {
	var out []Declaration
	for _, b := range c.branches {
		for _, e := range b.events {
			d := Declaration{BranchKey: b.pattern, Event: e.key, Pipelines: len(e.pipelines), Pos: e.pos}
			if e.cron != nil {
				d.Cron = append(d.Cron, e.cron.expr)
			}
			for _, pl := range e.pipelines {
				if pl.cron != nil {
					d.Cron = append(d.Cron, pl.cron.expr)
				}
			}
			out = append(out, d)
		}
	}
	return out
}

// Schedule is one cron entry the server must fire: for every existing branch that BranchKey
// matches, at the next fire time, plan Trigger{Event: Event, Branch: b, Cron: Cron}.
type Schedule struct {
	BranchKey string
	Event     string // "crontab: …" or "schedule"
	Cron      string
	Location  *time.Location
}

// Next returns the first fire time of the schedule after t.
func (s Schedule) Next(t time.Time) time.Time {
	loc := s.Location
	if loc == nil {
		loc = time.UTC
	}
	spec, err := parseCron(s.Cron, loc)
	if err != nil {
		return time.Time{}
	}
	return spec.sched.Next(t.In(loc))
}

// Schedules lists the cron entries of the file, one per distinct (branch key, event, cron).
func (c *Config) Schedules() []Schedule {
	var out []Schedule
	seen := map[Schedule]bool{}
	add := func(s Schedule) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, b := range c.branches {
		for _, e := range b.events {
			if e.cron != nil {
				add(Schedule{BranchKey: b.pattern, Event: e.key, Cron: e.cron.expr, Location: c.opts.Location})
			}
			for _, pl := range e.pipelines {
				if pl.cron != nil {
					add(Schedule{BranchKey: b.pattern, Event: EventSchedule, Cron: pl.cron.expr, Location: c.opts.Location})
				}
			}
		}
	}
	return out
}
