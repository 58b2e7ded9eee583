package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// writeRepo lays files out in a temporary repository and returns its root.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func runCLI(args []string, environ map[string]string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return environ[k] }}
	code := run(context.Background(), e, args)
	return code, stdout.String(), stderr.String()
}

const goodSpec = `include:
  - .cnb/extra.yml
main:
  push:
    - name: train-gpu
      runner:
        tags: cnb:arch:amd64:gpu
        cpus: 16
      stages:
        - name: train
          script: python train.py
          allow_failure: true
`

func TestLint(t *testing.T) {
	root := writeRepo(t, map[string]string{
		".cnb.yml":       goodSpec,
		".cnb/extra.yml": "main:\n  vscode:\n    - services: [vscode]\n      stags: []\n",
		"bad.yml":        "main:\n  push:\n    - runner: {tags: cnb:arch:amd64:gpu:A100}\n      stages: [make]\n",
		"team.yml":       "main:\n  push:\n    - runner: {tags: seele-macbook}\n      stages: [make]\n",
	})
	team := filepath.Join(root, "team.yml")
	spec := filepath.Join(root, ".cnb.yml")
	bad := filepath.Join(root, "bad.yml")
	tests := []struct {
		name    string
		args    []string
		environ map[string]string
		code    int
		stdout  []string // substrings
		stderr  string
	}{
		{"warnings only", []string{"lint", spec}, nil, 0, []string{
			spec + ":12:11: warning: unknown key \"allow_failure\" in job (did you mean \"allowFailure\"?)",
			filepath.Join(root, ".cnb", "extra.yml") + ":4:7: warning: unknown key \"stags\"",
			// Each is followed by its lines and a caret, an included file's from that file.
			" 11 |           script: python train.py\n 12 |           allow_failure: true\n    |           ^\n",
			" 3 |     - services: [vscode]\n 4 |       stags: []\n   |       ^\n",
		}, ""},
		{"strict", []string{"lint", "--strict", spec}, nil, 1, []string{spec + ":12:11: error: unknown key"}, ""},
		{"strict from the environment", []string{"lint", spec}, map[string]string{"NIMBUS_LINT_STRICT": "true"}, 1, []string{": error: "}, ""},
		{"errors", []string{"lint", bad}, nil, 1, []string{bad + ":3:22: error: unknown runner tag \"cnb:arch:amd64:gpu:A100\" (known tags: ",
			" 3 |     - runner: {tags: cnb:arch:amd64:gpu:A100}\n   |                      ^\n 4 |       stages: [make]\n"}, ""},
		{"json", []string{"lint", "--json", bad}, nil, 1, []string{`"errors": [`, `"line": 3`, `"column": 22`, `"warnings": []`}, ""},
		{"a team runner's tag: fine, with a note", []string{"lint", "--strict", team}, nil, 0, []string{
			team + ":3:22: info: runner tag \"seele-macbook\" names a team runner: this pipeline runs only on an agent your team registered with that tag"}, ""},
		{"missing file", []string{"lint", filepath.Join(root, "nope.yml")}, nil, 2, nil, "no such file"},
		{"two files", []string{"lint", spec, bad}, nil, 2, nil, "at most one FILE"},
		{"help", []string{"lint", "--help"}, nil, 0, []string{"Usage: nimbus lint", "NIMBUS_LINT_STRICT"}, ""},
		{"bad flag", []string{"lint", "--nope"}, nil, 2, nil, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(tt.args, tt.environ)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr lacks %q: %s", tt.stderr, stderr)
			}
		})
	}

	// The JSON is the documented shape.
	_, stdout, _ := runCLI([]string{"lint", "--json", spec}, nil)
	var out struct {
		Errors   []map[string]any `json:"errors"`
		Warnings []struct {
			Line    int    `json:"line"`
			Column  int    `json:"column"`
			Message string `json:"message"`
		} `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 0 || len(out.Warnings) != 2 || out.Warnings[0].Line != 12 || out.Warnings[0].Column != 11 {
		t.Errorf("got %+v", out)
	}
}

func TestLintDefaultFile(t *testing.T) {
	root := writeRepo(t, map[string]string{".cnb.yml": "main:\n  push:\n    - stages: [make]\n"})
	t.Chdir(root)
	if code, stdout, stderr := runCLI([]string{"lint"}, nil); code != 0 || stdout != "" {
		t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}

func TestPlan(t *testing.T) {
	root := writeRepo(t, map[string]string{
		".cnb.yml": goodSpec + `"dev/*":
  schedule:
    - cron: "0 2 * * *"
      name: nightly-$CNB_REPO_SLUG
      stages: [make]
  "crontab: 0 3 * * *":
    - name: official
      stages: [make]
"v*":
  tag_push:
    - name: release
      ifModify: src/**
      stages: [make]
$:
  vscode:
    - runner: {tags: cnb:arch:amd64:gpu}
      services: [vscode]
`,
		".cnb/extra.yml": "main:\n  push:\n    - name: docs\n      ifModify: docs/**\n      stages: [make docs]\n",
		"dup.yml":        "main:\n  push:\n    - name: $X\n      stages: [a]\n    - name: $X\n      stages: [b]\n",
	})
	spec := filepath.Join(root, ".cnb.yml")
	type pipeline struct {
		Name   string `json:"name"`
		Event  string `json:"event"`
		Runner struct {
			Tags []string `json:"tags"`
			Cpus int      `json:"cpus"`
		} `json:"runner"`
		Conditions struct {
			Skip string `json:"skip"`
		} `json:"conditions"`
		Stages []struct {
			Name     string `json:"name"`
			Parallel bool   `json:"parallel"`
			Jobs     []struct {
				Name   string `json:"name"`
				Script string `json:"script"`
			} `json:"jobs"`
		} `json:"stages"`
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		want   []string // pipeline names
		skip   []bool
		stderr string
	}{
		{"push with includes, no diff", []string{"plan", "--event", "push", "--branch", "main", spec}, 0, []string{"docs", "train-gpu"}, []bool{false, false}, "allow_failure"},
		{"changed files", []string{"plan", "--event", "push", "--branch", "main", "--changed", "src/a.go,README.md", spec}, 0, []string{"docs", "train-gpu"}, []bool{true, false}, ""},
		{"an empty diff", []string{"plan", "--event", "push", "--branch", "main", "--changed", "", spec}, 0, []string{"docs", "train-gpu"}, []bool{true, false}, ""},
		{"repeated --changed", []string{"plan", "--event", "push", "--branch", "main", "--changed", "src/a.go", "--changed", "docs/x.md", spec}, 0, []string{"docs", "train-gpu"}, []bool{false, false}, ""},
		{"schedule with --env", []string{"plan", "--event", "schedule", "--branch", "dev/x", "--env", "CNB_REPO_SLUG=team/repo", spec}, 0, []string{"nightly-team/repo"}, nil, ""},
		{"official crontab", []string{"plan", "--event", "crontab: 0 3 * * *", "--branch", "dev/x", spec}, 0, []string{"official"}, nil, ""},
		{"tag events ignore ifModify", []string{"plan", "--event", "tag_push", "--tag", "v1.0", "--changed", "", spec}, 0, []string{"release"}, []bool{false}, ""},
		{"vscode falls back to $", []string{"plan", "--event", "vscode", "--branch", "main", spec}, 0, []string{"pipeline"}, nil, ""},
		{"nothing declared", []string{"plan", "--event", "web_trigger_x", "--branch", "main", spec}, 0, nil, nil, ""},
		{"plan-time error", []string{"plan", "--event", "push", "--branch", "main", "--env", "X=same", filepath.Join(root, "dup.yml")}, 1, nil, nil, `error: duplicate pipeline name "same"`},
		{"no event", []string{"plan", "--branch", "main", spec}, 2, nil, nil, "--event is required"},
		{"branch and tag", []string{"plan", "--event", "push", "--branch", "main", "--tag", "v1", spec}, 2, nil, nil, "exactly one of --branch and --tag"},
		{"neither branch nor tag", []string{"plan", "--event", "push", spec}, 2, nil, nil, "exactly one of --branch and --tag"},
		{"bad --env", []string{"plan", "--event", "push", "--branch", "main", "--env", "novalue", spec}, 2, nil, nil, "is not K=V"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(tt.args, nil)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr lacks %q: %s", tt.stderr, stderr)
			}
			if code != 0 {
				return
			}
			var out struct {
				Pipelines []pipeline `json:"pipelines"`
			}
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("%v\n%s", err, stdout)
			}
			if out.Pipelines == nil {
				t.Error(`"pipelines" must be a list, even an empty one`)
			}
			var names []string
			for i, p := range out.Pipelines {
				names = append(names, p.Name)
				if tt.skip != nil && (p.Conditions.Skip != "") != tt.skip[i] {
					t.Errorf("%s: skip %q", p.Name, p.Conditions.Skip)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("pipelines %v, want %v", names, tt.want)
			}
		})
	}

	// The fixed part of the shape, on the GPU pipeline.
	_, stdout, _ := runCLI([]string{"plan", "--event", "push", "--branch", "main", spec}, nil)
	var out struct {
		Pipelines []pipeline `json:"pipelines"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	gpu := out.Pipelines[1]
	if gpu.Runner.Tags[0] != "cnb:arch:amd64:gpu" || gpu.Runner.Cpus != 16 || gpu.Stages[0].Name != "train" || gpu.Stages[0].Parallel ||
		gpu.Stages[0].Jobs[0].Name != "train" || gpu.Stages[0].Jobs[0].Script != "python train.py" {
		t.Errorf("got %+v", gpu)
	}
}

func TestRepoDirStaysInside(t *testing.T) {
	root := writeRepo(t, map[string]string{"a.yml": "x"})
	d := repoDir(root)
	if _, err := d.ReadFile("a.yml"); err != nil {
		t.Error(err)
	}
	// The path rule (internal/userpath), as the server's git reader applies it.
	for _, p := range []string{"../etc/passwd", "/etc/passwd", "..", `ci\a.yml`} {
		var pe *userpath.Error
		if _, err := d.ReadFile(p); !errors.As(err, &pe) {
			t.Errorf("%s: %v, want the path rule's refusal", p, err)
		}
	}
}

func TestPlanExplain(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, ".cnb.yml")
	os.WriteFile(file, []byte(`main:
  push:
    - name: builds-images
      services: [docker]
      docker: { volumes: [node_modules] }
      stages:
        - { name: b, script: docker build . }
        - { name: notify, image: plugins/webhook, settingsFrom: ./hook.yml, settings: { urls: [a] } }
    - name: workspace
      services: [vscode, docker]
      imports: https://example.com/secrets/-/blob/main/env.yml
      stages:
        - name: s
          type: git:issue-update
`), 0o644)
	code, stdout, stderr := runCLI([]string{"plan", "--explain", "--event", "push", "--branch", "main", file}, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Pipelines []struct {
			Name     string   `json:"name"`
			Runs     bool     `json:"runs"`
			Blockers []string `json:"blockers"`
			Stages   []any    `json:"stages"`
		} `json:"pipelines"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Pipelines) != 2 || !out.Pipelines[0].Runs || len(out.Pipelines[0].Blockers) != 0 || len(out.Pipelines[0].Stages) != 2 {
		t.Fatalf("the docker pipeline: %+v", out.Pipelines)
	}
	if p := out.Pipelines[1]; p.Runs || strings.Join(p.Blockers, ",") != "builtin:git:issue-update" {
		t.Fatalf("the workspace pipeline: %+v", p)
	}

	// A pipeline under an event the installation never fires does not run, however plain its
	// jobs; the warning still goes to stderr (the file's declaration is warned about for every
	// event).
	os.WriteFile(file, []byte(`"**":
  issue.open:
    - stages:
        - { name: s, script: echo hi }
  push:
    - stages:
        - { name: s, script: echo hi }
`), 0o644)
	for _, c := range []struct {
		event, ref string
		runs       bool
		want       string
	}{{"issue.open", "--branch", false, "event:issue.open"}, {"push", "--branch", true, ""}} {
		code, stdout, stderr := runCLI([]string{"plan", "--explain", "--event", c.event, c.ref, "v1.0.0", file}, nil)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.event, code, stderr)
		}
		out.Pipelines = nil
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Pipelines) != 1 || out.Pipelines[0].Runs != c.runs || strings.Join(out.Pipelines[0].Blockers, ",") != c.want {
			t.Fatalf("%s: %+v, want runs %v, blockers %q", c.event, out.Pipelines, c.runs, c.want)
		}
		if !c.runs && !strings.Contains(stderr, `event "`+c.event+`" is not supported by this installation`) {
			t.Errorf("%s: stderr %q, want the warning", c.event, stderr)
		}
	}
}

// nimbus lint used to accept any number of pipelines, stages and jobs, and read a file of any
// size, so a file the server could not build linted clean. It now reports each limit with the
// place and the counts, at the server's defaults unless its flags or NIMBUS_* variables set
// others, and a file (or include) over the 1 MiB the server reads as too large.
func TestLintLimits(t *testing.T) {
	var many strings.Builder
	many.WriteString("main:\n  push:\n")
	for i := range 257 {
		fmt.Fprintf(&many, "    - name: p%d\n      stages: [make]\n", i)
	}
	var wide strings.Builder
	wide.WriteString("main:\n  push:\n    - name: wide\n      stages:\n        - name: all\n          jobs:\n")
	for i := range 10000 {
		fmt.Fprintf(&wide, "            j%d: make %d\n", i, i)
	}
	big := "main:\n  push:\n    - stages: [make]\n# " + strings.Repeat("x", git.MaxFileSize) + "\n"
	root := writeRepo(t, map[string]string{
		"many.yml":   many.String(),
		"wide.yml":   wide.String(),
		"big.yml":    big,
		"inc.yml":    "include: [ci/big.yml]\nmain:\n  push: [{stages: [make]}]\n",
		"ci/big.yml": big,
	})
	file := func(name string) string { return filepath.Join(root, name) }
	tests := []struct {
		name    string
		args    []string
		environ map[string]string
		code    int
		stdout  string
	}{
		{"257 pipelines", []string{"lint", file("many.yml")}, nil, 1,
			file("many.yml") + `:515:7: error: event "push" runs 257 pipelines; a build may run at most 256 (this is pipeline 257)`},
		{"the limit from a flag", []string{"lint", "--build-max-pipelines", "300", file("many.yml")}, nil, 0, ""},
		{"the limit from the environment", []string{"lint", file("many.yml")}, map[string]string{"NIMBUS_BUILD_MAX_PIPELINES": "100"}, 1,
			`runs 257 pipelines; a build may run at most 100 (this is pipeline 101)`},
		{"10,000 jobs in a stage", []string{"lint", file("wide.yml")}, nil, 1,
			file("wide.yml") + `:3:7: error: pipeline "wide" has 10000 jobs; a pipeline may have at most 256`},
		{"a file over 1 MiB", []string{"lint", file("big.yml")}, nil, 1,
			file("big.yml") + ": error: cannot read " + file("big.yml") + ": it is 1048614 bytes, over the 1 MiB (1048576 bytes) limit of a pipeline file"},
		{"an include over 1 MiB", []string{"lint", file("inc.yml")}, nil, 1,
			file("inc.yml") + ":1:11: error: cannot include ci/big.yml: it is 1048614 bytes, over the 1 MiB (1048576 bytes) limit of a pipeline file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(tt.args, tt.environ)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || (tt.stdout == "") == strings.Contains(stdout, ": error: ") {
				t.Errorf("exit %d, want %d\nstdout: %s\nwant: %s\nstderr: %s", code, tt.code, stdout, tt.stdout, stderr)
			}
		})
	}
	if code, _, stderr := runCLI([]string{"lint", "--pipeline-max-jobs", "0", file("wide.yml")}, nil); code != 2 || !strings.Contains(stderr, "NIMBUS_PIPELINE_MAX_JOBS 0: at least 1") {
		t.Errorf("a limit of 0: exit %d %s", code, stderr)
	}
	if code, stdout, _ := runCLI([]string{"lint", "--help"}, nil); code != 0 || !strings.Contains(stdout, "NIMBUS_BUILD_MAX_PIPELINES") || !strings.Contains(stdout, "--pipeline-max-stages") {
		t.Errorf("help: %s", stdout)
	}
}
