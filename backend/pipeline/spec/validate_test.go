package spec

import (
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/runnerclass"
)

// Every validation rule, with the position and message it reports. Each case fails if its rule
// stops firing or moves.
func TestValidationRules(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		sev       Severity
		msg       string // substring of the message
		hint      string // substring of the hint, if any
		line, col int
	}{
		{
			name: "runner in a stage",
			src: `main:
  push:
    - stages:
        - name: build
          runner:
            tags: cnb:arch:amd64:gpu
          script: make
`,
			sev: SeverityError, msg: "runner belongs to the pipeline, not to a job", hint: "move runner up", line: 5, col: 11,
		},
		{
			name: "runner in a stage with jobs",
			src: `main:
  push:
    - stages:
        - name: build
          runner: {cpus: 4}
          jobs:
            - make
`,
			sev: SeverityError, msg: "runner belongs to the pipeline, not to a stage", line: 5, col: 11,
		},
		{
			name: "unknown runner tag lists the known ones",
			src: `main:
  push:
    - runner:
        tags: cnb:arch:amd64:gpu:A100
      stages: [make]
`,
			sev: SeverityError, msg: `unknown runner tag "cnb:arch:amd64:gpu:A100"`, hint: "known tags: cnb:arch:amd64, cnb:arch:default, cnb:arch:arm64:v8", line: 4, col: 15,
		},
		{
			name: "runner tags of two classes",
			src: `main:
  push:
    - runner:
        tags: [cnb:arch:amd64, cnb:arch:amd64:gpu]
      stages: [make]
`,
			sev: SeverityError, msg: "name different runner classes", line: 4, col: 16,
		},
		{
			name: "cpus above the range",
			src: `main:
  push:
    - runner:
        cpus: 65
      stages: [make]
`,
			sev: SeverityError, msg: "cpus 65 is outside 1–64 for cnb:arch:amd64", line: 4, col: 15,
		},
		{
			name: "arm64 cpus above its range",
			src: `main:
  push:
    - runner: {tags: "cnb:arch:arm64:v8", cpus: 32}
      stages: [make]
`,
			sev: SeverityError, msg: "cpus 32 is outside 1–16", line: 3, col: 49,
		},
		{
			name: "cpus above a fixed-core class",
			src: `main:
  push:
    - runner: {tags: "cnb:arch:amd64:gpu", cpus: 32}
      stages: [make]
`,
			sev: SeverityError, msg: "cpus 32 is more than the 16 cores of cnb:arch:amd64:gpu", hint: "fixed 16 cores", line: 3, col: 50,
		},
		{
			name: "cpus not a number",
			src: `main:
  push:
    - runner: {cpus: many}
      stages: [make]
`,
			sev: SeverityError, msg: `runner.cpus must be a whole number, not "many"`, line: 3, col: 22,
		},
		{
			name: "cpus zero",
			src: `main:
  push:
    - runner: {cpus: 0}
      stages: [make]
`,
			sev: SeverityError, msg: "runner.cpus must be a positive number", line: 3, col: 22,
		},
		{
			name: "timeout above the cap",
			src: `main:
  push:
    - stages:
        - name: train
          timeout: 20h
          script: python train.py
`,
			sev: SeverityWarning, msg: "timeout 20h is above the pipeline cap of 18h", line: 5, col: 20,
		},
		{
			name: "timeout malformed",
			src: `main:
  push:
    - stages:
        - name: train
          timeout: soon
          script: python train.py
`,
			sev: SeverityError, msg: "invalid timeout", line: 5, col: 20,
		},
		{
			name: "cron invalid",
			src: `main:
  "crontab: 61 * * * *":
    - stages: [make]
`,
			sev: SeverityError, msg: `cron expression "61 * * * *"`, line: 2, col: 3,
		},
		{
			name: "cron with six fields",
			src: `main:
  "crontab: 0 0 2 * * *":
    - stages: [make]
`,
			sev: SeverityError, msg: "must have 5 fields", line: 2, col: 3,
		},
		{
			name: "cron every minute",
			src: `main:
  "crontab: * * * * *":
    - stages: [make]
`,
			sev: SeverityError, msg: "more often than every 5 minutes", line: 2, col: 3,
		},
		{
			name: "cron list three minutes apart",
			src: `main:
  "crontab: 0,3 2 * * *":
    - stages: [make]
`,
			sev: SeverityError, msg: "it fires at 02:00 and again at 02:03", line: 2, col: 3,
		},
		{
			name: "cron tight only across the hour",
			src: `main:
  "crontab: 58 * * * *":
    - stages: [make]
  "crontab: 0,58 3 * * *":
    - stages: [make]
  "crontab: 59,1 * * * *":
    - stages: [make]
`,
			sev: SeverityError, msg: "it fires at 00:59 and again at 01:01", line: 6, col: 3,
		},
		{
			name: "schedule cron too frequent",
			src: `"dev/*":
  schedule:
    - cron: "*/2 * * * *"
      stages: [make]
`,
			sev: SeverityError, msg: "more often than every 5 minutes", line: 3, col: 13,
		},
		{
			name: "schedule entry without cron",
			src: `"dev/*":
  schedule:
    - name: nightly
      stages: [make]
`,
			sev: SeverityError, msg: "a schedule entry needs a cron key", line: 3, col: 7,
		},
		{
			name: "duplicate pipeline names",
			src: `main:
  push:
    - name: build
      stages: [make]
    - name: build
      stages: [make test]
`,
			sev: SeverityError, msg: `duplicate pipeline name "build" in event "push" (first at line 3)`, line: 5, col: 13,
		},
		{
			name: "explicit name colliding with a default one",
			src: `main:
  push:
    - stages: [make]
    - name: pipeline
      stages: [make test]
`,
			sev: SeverityError, msg: `duplicate pipeline name "pipeline"`, line: 4, col: 13,
		},
		{
			name: "empty stages",
			src: `main:
  push:
    - name: build
      stages: []
`,
			sev: SeverityError, msg: "stages is empty", line: 4, col: 15,
		},
		{
			name: "null stages",
			src: `main:
  push:
    - name: build
      stages:
`,
			sev: SeverityError, msg: "stages is empty", line: 4, col: 14,
		},
		{
			name: "stage without jobs",
			src: `main:
  push:
    - stages:
        - name: build
          jobs: []
`,
			sev: SeverityError, msg: `stage "build" has no jobs`, line: 5, col: 17,
		},
		{
			name: "job of no kind",
			src: `main:
  push:
    - stages:
        - name: build
          env: {A: b}
`,
			sev: SeverityError, msg: `job "build" has neither script nor image nor type`, hint: "add script", line: 4, col: 11,
		},
		{
			name: "job of no kind in a job list",
			src: `main:
  push:
    - stages:
        - name: s
          jobs:
            - name: j
              timeout: 1h
`,
			sev: SeverityError, msg: `job "j" has neither script nor image nor type`, line: 6, col: 15,
		},
		{
			name: "built-in task with a script",
			src: `main:
  push:
    - stages:
        - name: release
          type: git:release
          script: make
`,
			sev: SeverityError, msg: "cannot also have a script", line: 5, col: 17,
		},
		{
			name: "nested list from a list anchor",
			src: `.steps: &steps
  - name: a
    script: make
main:
  push:
    - stages:
        - *steps
`,
			sev: SeverityError, msg: "nested list where a stage was expected", hint: "<<: *anchor", line: 7, col: 11,
		},
		{
			name: "nested list of jobs",
			src: `main:
  push:
    - stages:
        - name: s
          jobs:
            - [make, make test]
`,
			sev: SeverityError, msg: "nested list where a job was expected", line: 6, col: 15,
		},
		{
			name: "nested list of pipelines",
			src: `main:
  push:
    - - stages: [make]
`,
			sev: SeverityError, msg: "nested list where a pipeline was expected", line: 3, col: 7,
		},
		{
			name: "unknown key with did you mean",
			src: `main:
  push:
    - stages:
        - name: lint
          script: make lint
          allow_failure: true
`,
			sev: SeverityWarning, msg: `unknown key "allow_failure" in job`, hint: `did you mean "allowFailure"?`, line: 6, col: 11,
		},
		{
			name: "misspelt pipeline key",
			src: `main:
  push:
    - stags: [make]
`,
			sev: SeverityWarning, msg: `unknown key "stags" in pipeline`, hint: `did you mean "stages"?`, line: 3, col: 7,
		},
		{
			name: "a GitLab habit: image on the pipeline",
			src: `main:
  push:
    - image: python:3.12
      stages: [make]
`,
			sev: SeverityWarning, msg: `unknown key "image" in pipeline`, hint: "did you mean `docker.image`? A pipeline's image goes under docker: { image: … }", line: 3, col: 7,
		},
		{
			name: "a GitHub Actions habit: run in a job",
			src: `main:
  push:
    - stages:
        - name: test
          run: make test
`,
			sev: SeverityWarning, msg: `unknown key "run" in job`, hint: "did you mean `script`?", line: 5, col: 11,
		},
		{
			name: "unknown event with did you mean",
			src: `main:
  pushh:
    - stages: [make]
`,
			sev: SeverityWarning, msg: `unknown event "pushh"`, hint: `did you mean "push"?`, line: 2, col: 3,
		},
		{
			name: "custom event without a prefix",
			src: `main:
  dispatch:
    - stages: [make]
`,
			sev: SeverityWarning, msg: `unknown event "dispatch"`, hint: "web_trigger_ or api_trigger_", line: 2, col: 3,
		},
		{
			name: "event never fired by this installation",
			src: `main:
  issue.open:
    - stages: [make]
`,
			sev: SeverityWarning, msg: `event "issue.open" is not supported by this installation`, line: 2, col: 3,
		},
		{
			name: "built-in task not supported",
			src: `main:
  push:
    - stages:
        - type: git:issue-update
`,
			sev: SeverityWarning, msg: `built-in task "git:issue-update" is not supported by this installation`, line: 4, col: 17,
			hint: "this installation runs cnb:apply, cnb:await, cnb:resolve, cnb:trigger, docker:cache, git:auto-merge, git:release, git:reviewer, vscode:go",
		},
		{
			name: "unknown built-in task",
			src: `main:
  push:
    - stages:
        - type: git:relase
`,
			sev: SeverityWarning, msg: `unknown built-in task type "git:relase"`, hint: `did you mean "git:release"?`, line: 4, col: 17,
		},
		{
			name: "top-level scalar",
			src: `name: my project
main:
  push:
    - stages: [make]
`,
			sev: SeverityWarning, msg: `top-level key "name" is not a branch pattern`, line: 1, col: 1,
		},
		{
			name: "invalid branch glob",
			src: `"(main|dev":
  push:
    - stages: [make]
`,
			sev: SeverityError, msg: `invalid branch pattern "(main|dev"`, line: 1, col: 1,
		},
		{
			name: "unknown volume type",
			src: `main:
  push:
    - docker:
        volumes:
          - /root/.m2:cached
      stages: [make]
`,
			sev: SeverityError, msg: `unknown type "cached"`, line: 5, col: 13,
		},
		{
			name: "lock wait with cancel-in-progress",
			src: `main:
  push:
    - lock: {wait: true, cancel-in-progress: true}
      stages: [make]
`,
			sev: SeverityError, msg: "wait and cancel-in-progress cannot be combined", line: 3, col: 13,
		},
		{
			name: "exports to an invalid name",
			src: `main:
  push:
    - stages:
        - script: echo hi
          exports:
            stdout: MY-VAR
`,
			sev: SeverityError, msg: `"MY-VAR" is not a valid variable name`, line: 6, col: 21,
		},
		{
			name: "env overriding a built-in",
			src: `main:
  push:
    - env:
        CNB_BRANCH: other
      stages: [make]
`,
			sev: SeverityWarning, msg: "CNB_BRANCH is a built-in variable", line: 4, col: 9,
		},
		{
			name: "duplicate YAML key",
			src: `main:
  push:
    - stages: [make]
main:
  vscode:
    - services: [vscode]
`,
			sev: SeverityError, msg: `duplicate key "main" (first at line 1)`, line: 4, col: 1,
		},
		{
			name: "anchor that contains itself",
			src: `main: &a
  push: [*a]
`,
			sev: SeverityError, msg: "alias *a refers to the value that contains it", line: 2, col: 10,
		},
		{
			name: "invalid YAML",
			src:  "main:\n  push: [\n",
			sev:  SeverityError, msg: "invalid YAML", line: 2, col: 9, // the '[' that is never closed
		},
		{
			name: "not a map",
			src:  "- main\n",
			sev:  SeverityError, msg: "must be a map of branch patterns", line: 1, col: 1,
		},
		{
			name: "invalid ifModify pattern",
			src: `main:
  push:
    - ifModify: "src/(a"
      stages: [make]
`,
			sev: SeverityError, msg: `invalid ifModify pattern "src/(a"`, line: 3, col: 17,
		},
		{
			name: "commands over script",
			src: `main:
  push:
    - stages:
        - script: make
          commands: [make all]
`,
			sev: SeverityWarning, msg: "commands takes priority over script", line: 4, col: 19,
		},
		{
			name: "options at the job level of a built-in task",
			src: `main:
  push:
    - endStages:
        - type: testing:coverage
          lang: go
`,
			sev: SeverityWarning, msg: `unknown key "lang" in built-in task`, hint: "go under options", line: 5, col: 11,
		},
		{
			name: "unknown service",
			src: `main:
  push:
    - services: [dockr]
      stages: [make]
`,
			sev: SeverityWarning, msg: `unknown service "dockr"`, hint: `did you mean "docker"?`, line: 3, col: 18,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := Lint([]byte(tt.src), Options{})
			d, ok := findDiag(ds, tt.sev, tt.msg)
			if !ok {
				t.Fatalf("no %s containing %q; got:\n%v", tt.sev, tt.msg, ds)
			}
			if d.Pos.File != ".cnb.yml" || d.Pos.Line != tt.line || d.Pos.Column != tt.col {
				t.Errorf("at %s, want .cnb.yml:%d:%d", d.Pos, tt.line, tt.col)
			}
			if !strings.Contains(d.Hint, tt.hint) {
				t.Errorf("hint %q does not contain %q", d.Hint, tt.hint)
			}
		})
	}
}

// The same rules stay quiet on the files that follow them.
func TestValidFilesHaveNoDiagnostics(t *testing.T) {
	for _, src := range []string{
		"main:\n  push:\n    - runner: {tags: cnb:arch:amd64:gpu:H20}\n      stages: [make]\n",
		"main:\n  push:\n    - runner: {tags: cnb:arch:amd64:gpu, cpus: 8}\n      stages: [make]\n",
		"main:\n  push:\n    - stages:\n        - name: t\n          timeout: 18h\n          script: make\n",
		"main:\n  \"crontab: */5 * * * *\":\n    - stages: [make]\n",
		"main:\n  \"crontab: 0 5,17 * * *\":\n    - stages: [make]\n",
		"main:\n  vscode:\n    - services: [vscode]\n",
		".tpl: &tpl\n  stages: [make]\nmain:\n  push:\n    - <<: *tpl\n      name: a\n    - <<: *tpl\n      name: b\n",
		"main:\n  web_trigger_deploy:\n    - stages: [make]\n  api_trigger_x:\n    - stages: [make]\n",
		// Every agent runs docker:cache, whatever the installation declares.
		"main:\n  push:\n    - stages:\n        - type: docker:cache\n          options: {dockerfile: Dockerfile}\n          exports: {name: IMAGE}\n",
	} {
		if ds := Lint([]byte(src), Options{}).Problems(); len(ds) != 0 {
			t.Errorf("%s\ngot diagnostics:\n%v", src, ds)
		}
	}
}

func TestStrictTurnsWarningsIntoErrors(t *testing.T) {
	ds := Lint([]byte("main:\n  push:\n    - stags: [make]\n"), Options{})
	if ds.HasErrors() {
		t.Fatalf("unexpected errors: %v", ds)
	}
	if !ds.Strict().HasErrors() {
		t.Fatal("strict should make the warning an error")
	}
	if ds.Strict().Err() == nil {
		t.Fatal("Err should report the strict error")
	}
}

func TestConfigurableClassesAndBuiltins(t *testing.T) {
	src := []byte("main:\n  push:\n    - runner: {tags: cnb:arch:amd64:gpu}\n      stages:\n        - type: git:issue-update\n")
	classes := runnerclass.Defaults()
	classes[2].MaxDuration = 4 * 60 * 60 * 1e9
	opts := Options{Classes: classes[:1], SupportedBuiltins: []string{"git:issue-update"}}
	ds := Lint(src, opts)
	if _, ok := findDiag(ds, SeverityError, `unknown runner tag "cnb:arch:amd64:gpu"`); !ok {
		t.Errorf("a class left out of the configuration should be unknown: %v", ds)
	}
	if _, ok := findDiag(ds, SeverityWarning, "not supported"); ok {
		t.Errorf("git:issue-update is supported here: %v", ds)
	}
	// An operator caps GPU at 4 h, as CNB does.
	ds = Lint([]byte("main:\n  push:\n    - runner: {tags: cnb:arch:amd64:gpu}\n      stages:\n        - script: make\n          timeout: 5h\n"), Options{Classes: classes})
	if _, ok := findDiag(ds, SeverityWarning, "above the pipeline cap of 4h"); !ok {
		t.Errorf("want the 4h cap: %v", ds)
	}
}

// Invalid YAML points at the line people see: yaml.v3's parser errors count lines from 0, its
// scanner errors from 1, and both must come out 1-based.
func TestInvalidYAMLLines(t *testing.T) {
	tests := []struct {
		src  string
		line int
	}{
		{"main:\n  push:\n    - stages:\n        - name: x\n          script: [a\n", 5}, // the unclosed '['
		{"a:\n  b: c\n d: e\n", 3}, // the misindented key
		{"a: b\nc: @x\n", 2},       // a scanner error
		{"a: 'unterminated\n", 1},  // the stream ended inside the quote opened here
	}
	for _, tt := range tests {
		ds := Lint([]byte(tt.src), Options{})
		errs := ds.Filter(SeverityError)
		if len(errs) == 0 || errs[0].Pos.Line != tt.line || !strings.Contains(errs[0].Message, "invalid YAML") {
			t.Errorf("%q: %v, want an invalid-YAML error on line %d", tt.src, errs, tt.line)
		}
	}
}

// docker:cache and git:release are the agents' own: their jobs are planned runnable with no
// configuration, while a task nothing runs still carries the reason it fails.
func TestAgentBuiltinsAreSupportedEverywhere(t *testing.T) {
	src := "main:\n  push:\n    - stages:\n        - type: docker:cache\n          options: {dockerfile: Dockerfile}\n        - type: git:release\n        - type: git:issue-update\n"
	p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
	for i, typ := range []string{"docker:cache", "git:release"} {
		if j := p.Stages[i].Jobs[0]; j.Type != typ || j.Unsupported != "" {
			t.Errorf("%s: %+v", typ, j)
		}
	}
	if merge := p.Stages[2].Jobs[0]; merge.Unsupported == "" {
		t.Errorf("git:issue-update is not run by anything here: %+v", merge)
	}
}

// An event whose value is one pipeline map is read as that pipeline, with a warning; a map of
// named pipelines stays one.
func TestEventValueThatIsOnePipeline(t *testing.T) {
	src := "main:\n  push:\n    runner: { cpus: 2 }\n    stages:\n      - name: s\n        script: echo one\n"
	ds := Lint([]byte(src), Options{})
	if d, ok := findDiag(ds, SeverityWarning, "is read as that one pipeline"); !ok || d.Pos.Line != 3 {
		t.Fatalf("want the one-pipeline warning on line 3: %v", ds)
	}
	if errs := ds.Filter(SeverityError); len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
	if len(p.Stages) != 1 || p.Runner.Cpus != 2 {
		t.Fatalf("the pipeline %+v", p)
	}
	named := "main:\n  push:\n    build:\n      stages: [ { name: s, script: echo } ]\n    test:\n      stages: [ { name: t, script: echo } ]\n"
	if set := mustPlan(t, named, pushMain, Options{}); len(set.Pipelines) != 2 {
		t.Fatalf("a map of two named pipelines planned %d", len(set.Pipelines))
	}
	if _, ok := findDiag(Lint([]byte(named), Options{}), SeverityWarning, "one pipeline"); ok {
		t.Fatal("a map of named pipelines was taken for one")
	}
}

// A job timeout above its class's cap is a warning, and the plan holds the cap (Part A.2).
func TestTimeoutAboveTheCapIsCapped(t *testing.T) {
	src := "main:\n  push:\n    - stages:\n        - name: s\n          timeout: 24h\n          script: sleep 1\n"
	p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
	if got := p.Stages[0].Jobs[0].Timeout.Std(); got != 18*time.Hour {
		t.Fatalf("timeout %s, want the 18h cap", got)
	}
}
