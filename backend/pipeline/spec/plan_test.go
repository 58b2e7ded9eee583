package spec

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

var pushMain = Trigger{Event: "push", Branch: "main"}

func TestPipelineForms(t *testing.T) {
	t.Run("array form: default names by position", func(t *testing.T) {
		set := mustPlan(t, "main:\n  push:\n    - stages: [a]\n    - name: named\n      stages: [b]\n    - stages: [c]\n", pushMain, Options{})
		if got := pipelineNames(set); !slices.Equal(got, []string{"pipeline", "named", "pipeline-2"}) {
			t.Errorf("names %v", got)
		}
		for i, p := range set.Pipelines {
			if want := "pipeline-" + strconv.Itoa(i); p.Key != want || p.Builtins["CNB_PIPELINE_KEY"] != want {
				t.Errorf("key %q, CNB_PIPELINE_KEY %q, want %q", p.Key, p.Builtins["CNB_PIPELINE_KEY"], want)
			}
		}
		if set.Pipelines[0].Builtins["CNB_PIPELINE_NAME"] != "" || set.Pipelines[1].Builtins["CNB_PIPELINE_NAME"] != "named" {
			t.Error("CNB_PIPELINE_NAME is empty for an unnamed pipeline and the name otherwise")
		}
	})
	t.Run("object form: keys are names", func(t *testing.T) {
		set := mustPlan(t, "main:\n  push:\n    build:\n      stages: [a]\n    test:\n      name: unit-tests\n      stages: [b]\n", pushMain, Options{})
		if got := pipelineNames(set); !slices.Equal(got, []string{"build", "unit-tests"}) {
			t.Errorf("names %v", got)
		}
		if set.Pipelines[0].Builtins["CNB_PIPELINE_NAME"] != "build" {
			t.Errorf("CNB_PIPELINE_NAME %q", set.Pipelines[0].Builtins["CNB_PIPELINE_NAME"])
		}
	})
	t.Run("stage shorthands and job forms", func(t *testing.T) {
		src := `main:
  push:
    - stages:
        - echo hello
        - name: single
          image: alpine
          script: [make, "make test\n"]
        - name: serial
          jobs:
            - make a
            - name: b
              commands: make b
        - name: parallel
          jobs:
            lint: make lint
            unit:
              script: make unit
            release:
              type: git:issue-update
              options: {tag: v1}
            notify:
              image: plugins/notify
              settings: {to: team, count: 3, nested: {a: [1, "x"]}}
              args: [--verbose]
`
		p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
		if got := stageNames(p); !slices.Equal(got, []string{"echo hello", "single", "serial", "parallel"}) {
			t.Fatalf("stages %v", got)
		}
		s0 := p.Stages[0]
		if s0.Parallel || s0.Jobs[0].Script != "echo hello" || s0.Jobs[0].Kind != protocol.KindScript || s0.Jobs[0].Key != "job-0" {
			t.Errorf("bare string stage: %+v", s0)
		}
		j1 := p.Stages[1].Jobs[0]
		if j1.Script != "make && make test" || j1.Image.Name != "alpine" || j1.Kind != protocol.KindScript {
			t.Errorf("script list join and image: %+v", j1)
		}
		serial := p.Stages[2]
		if serial.Parallel || len(serial.Jobs) != 2 || serial.Jobs[0].Name != "make a" || serial.Jobs[1].Script != "make b" {
			t.Errorf("serial: %+v", serial)
		}
		par := p.Stages[3]
		if !par.Parallel || len(par.Jobs) != 4 {
			t.Fatalf("parallel: %+v", par)
		}
		byKey := map[string]protocol.Job{}
		for _, j := range par.Jobs {
			byKey[j.Key] = j
		}
		if j := byKey["lint"]; j.Name != "lint" || j.Script != "make lint" {
			t.Errorf("string job in a map: %+v", j)
		}
		if j := byKey["release"]; j.Kind != protocol.KindBuiltin || j.Type != "git:issue-update" || j.Options["tag"] != "v1" ||
			j.Unsupported != `built-in task "git:issue-update" is not supported by this installation` {
			t.Errorf("builtin: %+v", j)
		}
		want := map[string]any{"to": "team", "count": float64(3), "nested": map[string]any{"a": []any{float64(1), "x"}}}
		if j := byKey["notify"]; j.Kind != protocol.KindPlugin || j.Image.Name != "plugins/notify" || !reflect.DeepEqual(j.Settings, want) || !slices.Equal(j.Args, []string{"--verbose"}) {
			t.Errorf("plugin: %+v", j)
		}
	})
}

func TestSubstitution(t *testing.T) {
	src := `main:
  push:
    - name: build-$CNB_BRANCH
      runner:
        tags: cnb:arch:$ARCH
      env:
        ARCH: amd64
        IMAGE: golang
        PRICE: \$5
        FROM_BUILTIN: ${CNB_EVENT}
      docker:
        image: $IMAGE:1.26
        volumes:
          - ${CNB_BUILD_WORKSPACE}/cache:data
      lock:
        key: lock-$CNB_PIPELINE_NAME
      label: {image: $IMAGE}
      ifModify: $DIR/**
      stages:
        - name: stage-$IMAGE
          image: ${IMAGE}:tools
          script: echo $NOT_SUBSTITUTED
          if: test "$IMAGE" = golang
          exports: {$IMAGE: OUT}
        - name: plugin
          image: plugins/x:$MISSING
          args: [--image, $IMAGE]
          settings:
            cost: $PRICE
            literal: \${IMAGE}
            list: [$IMAGE, "$CNB_CPUS cores"]
          allowFailure: $ALLOW
`
	trig := Trigger{Event: "push", Branch: "main", Changed: []string{"x"}}
	p := onlyPipeline(t, mustPlan(t, src, trig, Options{}))
	// MISSING may be a repo secret, which only the agent knows: the plugin job's fields stay
	// templates, and expanding them as the agent does with no such secret gives the plain values.
	plugin := p.Stages[1].Jobs[0]
	if !slices.Equal(plugin.RuntimeVars, []string{"MISSING"}) || plugin.Image.Name != "plugins/x:${MISSING}" {
		t.Errorf("plugin job: image %q runtime vars %v", plugin.Image.Name, plugin.RuntimeVars)
	}
	atRunTime := func(s string) string { return protocol.ExpandVars(s, plugin.RuntimeVars, nil) }
	checks := []struct{ field, got, want string }{
		{"name", p.Name, "build-main"},
		{"tags", p.Runner.Tags[0], "cnb:arch:amd64"},
		{"image", p.Image.Name, "golang:1.26"},
		{"volume", p.Volumes[0].Path, "/workspace/cache"},
		{"lock key", p.Lock.Key, "lock-build-main"},
		{"ifModify: missing is empty", p.Conditions.IfModify[0], "/**"},
		{"escaped env value", p.Env["PRICE"], "$5"},
		{"env from builtin", p.Env["FROM_BUILTIN"], "push"},
		{"stage name", p.Stages[0].Name, "stage-golang"},
		{"stage image for its jobs", p.Stages[0].Jobs[0].Image.Name, "golang:tools"},
		{"scripts are left to the shell", p.Stages[0].Jobs[0].Script, "echo $NOT_SUBSTITUTED"},
		{"missing variable", atRunTime(plugin.Image.Name), "plugins/x:"},
		{"escape survives substitution of a value", atRunTime(plugin.Settings["cost"].(string)), "$5"},
		{"escaped reference", atRunTime(plugin.Settings["literal"].(string)), "${IMAGE}"},
		{"lists in settings", p.Stages[1].Jobs[0].Settings["list"].([]any)[1].(string), "8 cores"},
		// Fields outside the reference's list are not substituted.
		{"if", p.Stages[0].Jobs[0].Conditions.If, `test "$IMAGE" = golang`},
		{"exports", p.Stages[0].Jobs[0].Exports["$IMAGE"], "OUT"},
		{"args", p.Stages[1].Jobs[0].Args[1], "$IMAGE"},
		{"label", p.Label["image"][0], "$IMAGE"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.field, c.got, c.want)
		}
	}
	if plugin.AllowFailure || len(p.RuntimeVars) != 0 || len(p.Stages[0].Jobs[0].RuntimeVars) != 0 {
		t.Errorf("only MISSING is a run-time variable: %v %v", p.RuntimeVars, p.Stages[0].Jobs[0].RuntimeVars)
	}

	// Variables from the caller, and allowFailure from a variable.
	trig.Vars = map[string]string{"CNB_REPO_SLUG": "team/repo", "CNB_EVENT": "spoofed"}
	src2 := "main:\n  push:\n    - env: {OK: \"true\"}\n      stages:\n        - name: $CNB_REPO_SLUG on $CNB_EVENT\n          script: make\n          allowFailure: $OK\n"
	p = onlyPipeline(t, mustPlan(t, src2, trig, Options{}))
	if p.Stages[0].Name != "team/repo on push" || !p.Stages[0].Jobs[0].AllowFailure {
		t.Errorf("stage %q allowFailure %v", p.Stages[0].Name, p.Stages[0].Jobs[0].AllowFailure)
	}
}

func TestRuntimeVariables(t *testing.T) {
	src := `main:
  push:
    - imports: https://cnb.cool/team/secrets/-/blob/main/env.yml
      env:
        TARGET: ${server}
        PLAIN: \$HOME
      stages:
        - name: version
          script: echo 1.0
          exports:
            info: VERSION
        - name: release
          type: git:release
          options:
            title: v${VERSION} for $TARGET
            token: $CNB_TOKEN
`
	p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
	if p.Env["TARGET"] != "${server}" || !slices.Equal(p.RuntimeVars, []string{"server"}) || p.Env["PLAIN"] != `\$HOME` {
		t.Errorf("pipeline env %v runtime %v", p.Env, p.RuntimeVars)
	}
	rel := p.Stages[1].Jobs[0]
	if got := rel.Options["title"]; got != "v${VERSION} for ${server}" {
		t.Errorf("title %q", got)
	}
	if !slices.Equal(rel.RuntimeVars, []string{"CNB_TOKEN", "VERSION", "server"}) {
		t.Errorf("runtime vars %v", rel.RuntimeVars)
	}
	// What the agent does when the job starts.
	runEnv := map[string]string{"VERSION": "1.0", "server": "prod", "CNB_TOKEN": "t0k"}
	if got := protocol.ExpandVars(rel.Options["title"].(string), rel.RuntimeVars, runEnv); got != "v1.0 for prod" {
		t.Errorf("expanded title %q", got)
	}
	if got := protocol.ExpandVars(rel.Env["PLAIN"], rel.RuntimeVars, runEnv); got != "$HOME" {
		t.Errorf("expanded escape %q", got)
	}
	if !slices.Equal(rel.Imports, []string{"https://cnb.cool/team/secrets/-/blob/main/env.yml"}) {
		t.Errorf("imports %v", rel.Imports)
	}
}

func TestEnvPrecedence(t *testing.T) {
	src := `main:
  push:
    - env: {LEVEL: pipeline, P: p, OUTER: base}
      imports: [a.yml]
      stages:
        - name: s
          env: {LEVEL: stage, S: s-$OUTER}
          imports: b.yml
          jobs:
            - name: j
              env: {LEVEL: job}
              imports: c.yml
              script: env
            - name: plugin
              image: plugins/x
              settings: {level: $LEVEL}
`
	p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
	j := p.Stages[0].Jobs[0]
	want := map[string]string{"LEVEL": "job", "P": "p", "OUTER": "base", "S": "s-base"}
	if !maps.Equal(j.Env, want) {
		t.Errorf("job env %v, want %v", j.Env, want)
	}
	if !slices.Equal(j.Imports, []string{"a.yml", "b.yml", "c.yml"}) {
		t.Errorf("imports %v", j.Imports)
	}
	if got := p.Stages[0].Jobs[1].Settings["level"]; got != "stage" {
		t.Errorf("plugin settings see stage env: %v", got)
	}
	if p.Env["LEVEL"] != "pipeline" {
		t.Errorf("pipeline env %v", p.Env)
	}
}

func TestConditions(t *testing.T) {
	src := `main:
  push: &pipes
    - name: docs
      ifModify: ["**", "!(legacy/**)", "!(**/*.md)", "!*.md"]
      stages:
        - name: on-new-branch
          ifNewBranch: true
          script: make init
        - name: scripted
          if: test -f Makefile
          ifModify: src/**
          script: make
        - name: either
          ifModify: src/**
          ifNewBranch: true
          script: make
        - name: flags
          script: make
          breakIfModify: true
          skipIfModify: true
  web_trigger: *pipes
`
	tests := []struct {
		name      string
		trig      Trigger
		pipeSkip  bool
		stageSkip []bool
		ifScript  string // expected If of "scripted"
	}{
		{"markdown only: pipeline skipped", Trigger{Event: "push", Branch: "main", Changed: []string{"README.md", "docs/a.md"}}, true, []bool{true, false, true, false}, "test -f Makefile"},
		{"legacy only: pipeline skipped", Trigger{Event: "push", Branch: "main", Changed: []string{"legacy/x.go"}}, true, []bool{true, false, true, false}, "test -f Makefile"},
		{"a source change runs", Trigger{Event: "push", Branch: "main", Changed: []string{"README.md", "src/main.go"}}, false, []bool{true, false, false, false}, ""},
		{"no diff: ifModify ignored", Trigger{Event: "push", Branch: "main"}, false, []bool{true, false, false, false}, ""},
		{"event without diff ignores the list", Trigger{Event: "web_trigger", Branch: "main", Changed: []string{"README.md"}}, false, []bool{true, false, false, false}, ""},
		{"new branch push: no diff, ifNewBranch holds", Trigger{Event: "push", Branch: "main", IsNewBranch: true, Changed: []string{"README.md"}}, false, []bool{false, false, false, false}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := onlyPipeline(t, mustPlan(t, src, tt.trig, Options{}))
			if (p.Conditions.Skip != "") != tt.pipeSkip {
				t.Errorf("pipeline skip %q", p.Conditions.Skip)
			}
			for i, want := range tt.stageSkip {
				if got := p.Stages[i].Jobs[0].Conditions.Skip != ""; got != want {
					t.Errorf("stage %s skip %v (%q), want %v", p.Stages[i].Name, got, p.Stages[i].Jobs[0].Conditions.Skip, want)
				}
			}
			if got := p.Stages[1].Jobs[0].Conditions.If; got != tt.ifScript {
				t.Errorf("if %q, want %q", got, tt.ifScript)
			}
		})
	}
	p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
	if c := p.Stages[3].Jobs[0].Conditions; !c.BreakIfModify || !c.SkipIfModify {
		t.Errorf("flags %+v", c)
	}
	if c := p.Stages[0].Jobs[0].Conditions; c.Skip != "ifNewBranch: not a new branch" {
		t.Errorf("reason %q", c.Skip)
	}
}

func TestChangedFileCap(t *testing.T) {
	changed := make([]string, 301)
	for i := range changed {
		changed[i] = "docs/" + strconv.Itoa(i) + ".md"
	}
	changed[300] = "src/main.go" // the 301st file is not considered
	src := "main:\n  push:\n    - ifModify: src/**\n      stages: [make]\n"
	p := onlyPipeline(t, mustPlan(t, src, Trigger{Event: "push", Branch: "main", Changed: changed}, Options{}))
	if p.Conditions.Skip == "" {
		t.Error("only the first 300 changed files count")
	}
	changed[299] = "src/main.go"
	p = onlyPipeline(t, mustPlan(t, src, Trigger{Event: "push", Branch: "main", Changed: changed}, Options{}))
	if p.Conditions.Skip != "" {
		t.Errorf("the 300th file counts: %q", p.Conditions.Skip)
	}
}

func TestPipelineDefaults(t *testing.T) {
	src := `main:
  push:
    - name: gpu
      runner: {tags: cnb:arch:amd64:gpu:H20, cpus: 8}
      services: [docker:24, {name: vscode, options: {keepAliveTimeout: 600000}}]
      lock: true
      git: {submodules: {enable: false}, lfs: false}
      label: {team: ml, kind: [train, gpu]}
      stages:
        - name: s
          lock: {key: k}
          jobs:
            - name: j
              script: make
              timeout: 90m
              retry: 2
              lock: true
  branch.delete:
    - stages: [make]
`
	p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
	if p.Runner.Cpus != 32 || p.Runner.RequestedCpus != 8 || p.Runner.MemoryGiB != 64 || p.Runner.GPU != "H20" || p.Runner.GPUMemoryGB != 96 {
		t.Errorf("fixed-core class uses its cores: %+v", p.Runner)
	}
	if p.Builtins["CNB_CPUS"] != "32" || p.Builtins["CNB_MEMORY"] != "64" {
		t.Errorf("CNB_CPUS %q CNB_MEMORY %q", p.Builtins["CNB_CPUS"], p.Builtins["CNB_MEMORY"])
	}
	if !p.Workspace || p.Image.Name != "cnbcool/default-dev-env" {
		t.Errorf("a vscode service makes a workspace: %v %v", p.Workspace, p.Image)
	}
	if p.Services[0].Name != "docker" || p.Services[0].Version != "24" || p.Services[1].Options["keepAliveTimeout"] != float64(600000) {
		t.Errorf("services %+v", p.Services)
	}
	if p.Lock.Key != "main-gpu" || p.Lock.Expires.Std() != time.Hour || p.Stages[0].Lock.Key != "k" || p.Stages[0].Jobs[0].Lock.Key != "main-gpu-0-j" {
		t.Errorf("locks %+v %+v %+v", p.Lock, p.Stages[0].Lock, p.Stages[0].Jobs[0].Lock)
	}
	if p.Git != (protocol.Git{Enable: true, Submodules: false, LFS: false}) {
		t.Errorf("git %+v", p.Git)
	}
	if !slices.Equal(p.Label["kind"], []string{"train", "gpu"}) || p.Label["team"][0] != "ml" {
		t.Errorf("label %v", p.Label)
	}
	if j := p.Stages[0].Jobs[0]; j.Timeout.Std() != 90*time.Minute || j.Retry != 2 {
		t.Errorf("job %+v", j)
	}
	del := onlyPipeline(t, mustPlan(t, src, Trigger{Event: "branch.delete", Branch: "main"}, Options{}))
	if del.Git.Enable || del.Image.Name != "cnbcool/default-build-env" || del.Runner.Cpus != 8 || del.Runner.Tags[0] != "cnb:arch:default" {
		t.Errorf("branch.delete defaults: %+v %+v %+v", del.Git, del.Image, del.Runner)
	}
}

func TestPlanTimeErrors(t *testing.T) {
	src := "main:\n  push:\n    - runner: {tags: cnb:arch:$ARCH}\n      stages: [make]\n    - name: $N\n      stages: [make]\n    - name: $N\n      stages: [make]\n"
	cfg, ds := Parse([]byte(src), Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	_, ds, err := cfg.Plan(Trigger{Event: "push", Branch: "main", Vars: map[string]string{"N": "x"}})
	if err == nil {
		t.Fatal("want errors")
	}
	if _, ok := findDiag(ds, SeverityError, `unknown runner tag "cnb:arch:"`); !ok {
		t.Errorf("tags are checked once substituted: %v", ds)
	}
	if d, ok := findDiag(ds, SeverityError, `duplicate pipeline name "x"`); !ok || d.Pos.Line != 7 {
		t.Errorf("names are compared once substituted: %v", ds)
	}
	// Two keys that both match: duplicate names across them.
	_, ds, err = Compile([]byte("main:\n  push:\n    - name: a\n      stages: [x]\n\"**\":\n  push:\n    - name: a\n      stages: [x]\n"), pushMain, Options{})
	if _, ok := findDiag(ds, SeverityError, `duplicate pipeline name "a"`); err == nil || !ok {
		t.Errorf("got %v", ds)
	}
	if _, _, err := Compile([]byte("main:\n  push: [{stages: [x]}]\n"), Trigger{Branch: "main"}, Options{}); err == nil {
		t.Error("a trigger needs an event")
	}
	if _, ds, _ := Compile([]byte("main:\n  issue.open: [{stages: [x]}]\n"), Trigger{Event: "issue.open", Branch: "main"}, Options{}); len(ds.Filter(SeverityWarning)) != 1 {
		t.Errorf("planning an unfired event warns: %v", ds)
	}
	if _, _, err := Compile([]byte("main: [\n"), pushMain, Options{}); err == nil {
		t.Error("a file with errors plans nothing")
	}
}

// Plans survive a JSON round trip unchanged, for every fixture.
func TestPlanJSONRoundTrip(t *testing.T) {
	srcs := map[string]string{
		"everything": `main:
  push:
    - name: all
      runner: {tags: cnb:arch:amd64:gpu:L40}
      docker:
        build: {dockerfile: .ide/Dockerfile, target: dev, by: [a, b], versionBy: a, buildArgs: {X: "1"}, sync: true}
        volumes: ["g:/cache:ro", /data:data]
      services: [docker, {name: vscode, options: {onlyPreview: true, n: 1.5}}]
      imports: env.yml
      env: {A: "1", R: $FROM_IMPORT}
      label: {k: v}
      ifModify: ["**"]
      ifNewBranch: true
      lock: {key: k, expires: 60, timeout: 2m, wait: true, cancel-in-wait: true}
      retry: 1
      allowFailure: true
      stages:
        - name: s
          if: "true"
          retry: 3
          jobs:
            a:
              script: make
              timeout: 1500
              exports: {info: OUT}
              allowFailure: true
            b:
              image: {name: p/x, dockerUser: u, dockerPassword: $CNB_TOKEN}
              settings: {k: [1, true, null, {x: y}]}
      failStages: [echo failed]
      endStages: [echo done]
`,
	}
	for _, f := range briefFiles(t) {
		srcs[f.name] = f.src
	}
	for name, src := range srcs {
		cfg, ds := Parse([]byte(src), Options{})
		if ds.HasErrors() {
			t.Fatalf("%s: %v", name, ds)
		}
		for _, d := range cfg.Declarations() {
			trig := Trigger{Event: d.Event, Branch: "main", Changed: []string{"a"}}
			if d.BranchKey != "$" && d.BranchKey != "main" {
				trig.Branch = sampleRef(d.BranchKey)
			}
			set, _, err := cfg.Plan(trig)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			data, err := json.Marshal(set)
			if err != nil {
				t.Fatal(err)
			}
			var back protocol.PlanSet
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(set, &back) {
				t.Errorf("%s %s: round trip changed the plan\nbefore %+v\nafter  %+v", name, d.Event, set, back)
			}
		}
	}
}

type namedSrc struct{ name, src string }

func briefFiles(t *testing.T) []namedSrc {
	t.Helper()
	var out []namedSrc
	for _, name := range []string{"train-main-push", "nightly-schedule", "vscode-gpu", "gpu-train", "feature-l40"} {
		out = append(out, namedSrc{name, readTestdata(t, "brief/"+name+".yml")})
	}
	return out
}

// sampleRef returns a ref name that a branch key matches, for the keys used in the fixtures.
func sampleRef(key string) string {
	r := strings.NewReplacer("**", "x/y", "*", "x", "(", "", ")", "")
	s := r.Replace(key)
	if i := strings.Index(s, "|"); i >= 0 {
		s = s[:i]
	}
	return s
}

// CNB tags that real files name beyond the current node page: the older L20 GPU node and the
// containerd-snapshotter amd64 node (Part A.10).
func TestPublishedRunnerTagsBeyondTheNodePage(t *testing.T) {
	for _, tc := range []struct {
		tag       string
		cpus, mem int
		gpu       string
	}{
		{"cnb:arch:amd64:gpu:L20", 16, 32, "L20"},
		{"cnb:arch:amd64:containerd-snapshotter", 4, 8, ""},
	} {
		src := "main:\n  push:\n    - runner: {tags: " + tc.tag + ", cpus: 4}\n      stages: [make]\n"
		p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
		if p.Runner.Class != tc.tag || p.Runner.Cpus != tc.cpus || p.Runner.MemoryGiB != tc.mem || p.Runner.GPU != tc.gpu {
			t.Errorf("%s: %+v", tc.tag, p.Runner)
		}
	}
}
