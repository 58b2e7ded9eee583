package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestYAMLFeatures(t *testing.T) {
	t.Run("anchors, aliases and merge keys", func(t *testing.T) {
		src := `.base: &base
  runner: {cpus: 4}
  docker: {image: node:20}
  stages:
    - name: test
      script: npm test
.extra: &extra
  env: {A: "1"}
main:
  push:
    - <<: [*base, *extra]
      name: ci
      docker: {image: node:22}
`
		p := onlyPipeline(t, mustPlan(t, src, Trigger{Event: "push", Branch: "main"}, Options{}))
		if p.Runner.Cpus != 4 || p.Image.Name != "node:22" || p.Env["A"] != "1" || p.Name != "ci" {
			t.Errorf("merge: cpus %d image %q env %v name %q", p.Runner.Cpus, p.Image.Name, p.Env, p.Name)
		}
		if got := stageNames(p); !slices.Equal(got, []string{"test"}) {
			t.Errorf("stages %v", got)
		}
	})
	t.Run("first merged map wins", func(t *testing.T) {
		src := ".a: &a\n  name: from-a\n.b: &b\n  name: from-b\n  stages: [make]\nmain:\n  push:\n    - <<: [*a, *b]\n"
		p := onlyPipeline(t, mustPlan(t, src, Trigger{Event: "push", Branch: "main"}, Options{}))
		if p.Name != "from-a" {
			t.Errorf("name %q, want from-a", p.Name)
		}
	})
	t.Run("CRLF line ends", func(t *testing.T) {
		src := strings.ReplaceAll("main:\n  push:\n    - stages:\n        - name: build\n          script: |\n            make\n            make test\n", "\n", "\r\n")
		p := onlyPipeline(t, mustPlan(t, src, Trigger{Event: "push", Branch: "main"}, Options{}))
		if got := p.Stages[0].Jobs[0].Script; got != "make\nmake test\n" {
			t.Errorf("script %q", got)
		}
		ds := Lint([]byte(strings.ReplaceAll("main:\n  push:\n    - stags: [make]\n", "\n", "\r\n")), Options{})
		if d, ok := findDiag(ds, SeverityWarning, "stags"); !ok || d.Pos.Line != 3 || d.Pos.Column != 7 {
			t.Errorf("positions must survive CRLF: %v", ds)
		}
	})
	t.Run("byte order mark", func(t *testing.T) {
		mustPlan(t, "\xef\xbb\xbfmain:\n  push:\n    - stages: [make]\n", Trigger{Event: "push", Branch: "main"}, Options{})
	})
	t.Run("dot keys are silent template holders", func(t *testing.T) {
		if ds := Lint([]byte(".anything:\n  not: [a, pipeline]\n.x: 3\n"), Options{}); len(ds) != 0 {
			t.Errorf("got %v", ds)
		}
	})
	t.Run("billion laughs", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
		for i := 1; i < 9; i++ {
			fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
		}
		ds := Lint([]byte(b.String()), Options{})
		if _, ok := findDiag(ds, SeverityError, "expands to more than"); !ok {
			t.Errorf("want an expansion error, got %v", ds)
		}
	})
	t.Run("duplicate keys in a large map", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("main:\n  push:\n    - stages: [make]\n      env:\n")
		for i := 0; i < 30; i++ {
			fmt.Fprintf(&b, "        V%d: x\n", i)
		}
		b.WriteString("        V7: again\n")
		ds := Lint([]byte(b.String()), Options{})
		if d, ok := findDiag(ds, SeverityError, `duplicate key "V7" (first at line 12)`); !ok || d.Pos.Line != 35 {
			t.Errorf("got %v", ds)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		set := mustPlan(t, "", Trigger{Event: "push", Branch: "main"}, Options{})
		if len(set.Pipelines) != 0 {
			t.Errorf("got %v", set.Pipelines)
		}
	})
}

func TestInclude(t *testing.T) {
	repo := mapFS{
		"ci/a.yml":       "main:\n  push:\n    - name: from-a\n      stages: [make a]\n",
		"ci/b.yml":       "main:\n  push:\n    - name: from-b\n      stages: [make b]\n",
		"ci/nested.yml":  "include:\n  - ci/a.yml\n$:\n  vscode:\n    - services: [vscode]\n",
		"ci/self.yml":    "include: [ci/self.yml]\n",
		"ci/bad.yml":     "main: [\n",
		"ci/empty.yml":   "",
		"ci/vars.yml":    ".vars:\n  image: golang:1.26\n  script: go test ./...\n",
		"ci/trigger.yml": "branch:\n  - reg: \".*\"\n    buttons:\n      - name: x\n",
	}
	push := Trigger{Event: "push", Branch: "main"}
	names := func(src string) []string {
		t.Helper()
		return pipelineNames(mustPlan(t, src, push, Options{Files: repo}))
	}

	t.Run("arrays append in order, the local file last", func(t *testing.T) {
		got := names("include:\n  - ci/a.yml\n  - path: ci/b.yml\nmain:\n  push:\n    - name: local\n      stages: [make]\n")
		if !slices.Equal(got, []string{"from-a", "from-b", "local"}) {
			t.Errorf("got %v", got)
		}
	})
	t.Run("nested includes", func(t *testing.T) {
		set := mustPlan(t, "include: [ci/nested.yml]\n", Trigger{Event: "vscode", Branch: "dev"}, Options{Files: repo})
		if len(set.Pipelines) != 1 {
			t.Errorf("vscode from the nested file: %v", pipelineNames(set))
		}
		if got := names("include: [ci/nested.yml]\n"); !slices.Equal(got, []string{"from-a"}) {
			t.Errorf("push from the doubly nested file: %v", got)
		}
	})
	t.Run("inline config, as a map and as a string", func(t *testing.T) {
		got := names("include:\n  - config:\n      main:\n        push:\n          - name: inline\n            stages: [make]\n  - config: |\n      main:\n        push:\n          - name: text\n            stages: [make]\n")
		if !slices.Equal(got, []string{"inline", "text"}) {
			t.Errorf("got %v", got)
		}
	})
	t.Run("maps merge key by key, scalars are overridden", func(t *testing.T) {
		inc := mapFS{"x.yml": "main:\n  push:\n    p:\n      name: included\n      runner: {cpus: 2}\n      stages: [make]\n"}
		src := "include: [x.yml]\nmain:\n  push:\n    p:\n      runner: {cpus: 6}\n"
		p := onlyPipeline(t, mustPlan(t, src, push, Options{Files: inc}))
		if p.Name != "included" || p.Runner.Cpus != 6 || len(p.Stages) != 1 {
			t.Errorf("got name %q cpus %d stages %d", p.Name, p.Runner.Cpus, len(p.Stages))
		}
	})
	t.Run("array against object keeps the array", func(t *testing.T) {
		inc := mapFS{"x.yml": "main:\n  push:\n    - name: array\n      stages: [make]\n"}
		src := "include: [x.yml]\nmain:\n  push:\n    obj:\n      stages: [make]\n"
		if got := pipelineNames(mustPlan(t, src, push, Options{Files: inc})); !slices.Equal(got, []string{"array"}) {
			t.Errorf("included array vs local object: %v", got)
		}
		inc = mapFS{"x.yml": "main:\n  push:\n    obj:\n      stages: [make]\n"}
		src = "include: [x.yml]\nmain:\n  push:\n    - name: array\n      stages: [make]\n"
		if got := pipelineNames(mustPlan(t, src, push, Options{Files: inc})); !slices.Equal(got, []string{"array"}) {
			t.Errorf("included object vs local array: %v", got)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		ds := Lint([]byte("include:\n  - nope.yml\n"), Options{Files: repo})
		if d, ok := findDiag(ds, SeverityError, "cannot include nope.yml"); !ok || d.Pos.Line != 2 || d.Pos.Column != 5 {
			t.Errorf("got %v", ds)
		}
		if ds := Lint([]byte("include:\n  - path: nope.yml\n    ignoreError: true\n"), Options{Files: repo}); len(ds) != 0 {
			t.Errorf("ignoreError: got %v", ds)
		}
	})
	t.Run("errors in an included file name that file", func(t *testing.T) {
		ds := Lint([]byte("include: [ci/bad.yml]\n"), Options{Files: repo})
		if d, ok := findDiag(ds, SeverityError, "invalid YAML"); !ok || d.Pos.File != "ci/bad.yml" {
			t.Errorf("got %v", ds)
		}
	})
	t.Run("an included file without pipelines only warns", func(t *testing.T) {
		ds := Lint([]byte("include: [ci/trigger.yml, ci/empty.yml]\n"), Options{Files: repo})
		if ds.HasErrors() || len(ds) != 1 || ds[0].Pos.File != "ci/trigger.yml" {
			t.Errorf("got %v", ds)
		}
	})
	t.Run("cycle", func(t *testing.T) {
		ds := Lint([]byte("include: [ci/self.yml]\n"), Options{Files: repo})
		if _, ok := findDiag(ds, SeverityError, "include cycle"); !ok {
			t.Errorf("got %v", ds)
		}
	})
	t.Run("50-file limit", func(t *testing.T) {
		fs := mapFS{}
		var b strings.Builder
		b.WriteString("include:\n")
		for i := 0; i < 51; i++ {
			fs[fmt.Sprintf("f%d.yml", i)] = fmt.Sprintf(".f%d: 1\n", i)
			fmt.Fprintf(&b, "  - f%d.yml\n", i)
		}
		ds := Lint([]byte(b.String()), Options{Files: fs})
		if d, ok := findDiag(ds, SeverityError, "more than 50 included files"); !ok || d.Pos.Line != 52 {
			t.Errorf("got %v", ds)
		}
		fs["f50.yml"] = ""
		lines := strings.Split(b.String(), "\n")
		if ds := Lint([]byte(strings.Join(lines[:51], "\n")), Options{Files: fs}); len(ds) != 0 {
			t.Errorf("50 files are allowed: %v", ds)
		}
	})
	t.Run("remote includes", func(t *testing.T) {
		src := []byte("include:\n  - https://example.invalid/-/blob/main/x.yml\n")
		ds := Lint(src, Options{})
		if _, ok := findDiag(ds, SeverityWarning, "remote include"); !ok || ds.HasErrors() {
			t.Errorf("lint warns: %v", ds)
		}
		remote := mapFS{"https://example.invalid/-/blob/main/x.yml": "main:\n  push:\n    - name: remote\n      stages: [make]\n"}
		if got := pipelineNames(mustPlan(t, string(src), push, Options{Remote: remote})); !slices.Equal(got, []string{"remote"}) {
			t.Errorf("got %v", got)
		}
		ds = Lint([]byte("include:\n  - https://example.invalid/other.yml\n"), Options{Remote: remote})
		if _, ok := findDiag(ds, SeverityError, "cannot include https://example.invalid/other.yml"); !ok {
			t.Errorf("a build fails on an unreadable remote include: %v", ds)
		}
	})
	t.Run("a !reference into a remote include is a warning in lint", func(t *testing.T) {
		src := "include:\n  - https://example.invalid/common.yml\n" +
			"main:\n  push:\n    - stages:\n        - name: test\n          script: !reference [.common, test]\n" +
			"        - name: steps\n          jobs: !reference [.common, jobs]\n"
		ds := Lint([]byte(src), Options{})
		if ds.HasErrors() {
			t.Fatalf("lint errs on what it cannot read: %v", ds)
		}
		d, ok := findDiag(ds, SeverityWarning, "!reference [.common]: no such value here; it may be defined in a remote include")
		if !ok || d.Pos.Line != 7 || !strings.Contains(d.Hint, "https://example.invalid/common.yml") {
			t.Errorf("the warning: %+v in %v", d, ds)
		}
		// With the remote include read (a build), the reference resolves; without any remote
		// include, a missing value is still an error.
		remote := mapFS{"https://example.invalid/common.yml": ".common:\n  test: make test\n  jobs: [{ name: a, script: 'true' }]\n"}
		if ds := Lint([]byte(src), Options{Remote: remote}); len(ds) != 0 {
			t.Errorf("with the include read: %v", ds)
		}
		local := "main:\n  push:\n    - stages:\n        - name: test\n          script: !reference [.common, test]\n"
		if _, ok := findDiag(Lint([]byte(local), Options{}), SeverityError, "no such value"); !ok {
			t.Error("a reference to nothing, with no remote include, is an error")
		}
	})
	t.Run("paths are relative to the repository root", func(t *testing.T) {
		got := names("include: [./ci/../ci/a.yml, /ci/b.yml]\n")
		if !slices.Equal(got, []string{"from-a", "from-b"}) {
			t.Errorf("got %v", got)
		}
	})
	t.Run("!reference across files", func(t *testing.T) {
		src := "include: [ci/vars.yml]\nmain:\n  push:\n    - docker:\n        image: !reference [.vars, image]\n      stages:\n        - name: test\n          script: !reference [.vars, script]\n"
		p := onlyPipeline(t, mustPlan(t, src, push, Options{Files: repo}))
		if p.Image.Name != "golang:1.26" || p.Stages[0].Jobs[0].Script != "go test ./..." {
			t.Errorf("image %q script %q", p.Image.Name, p.Stages[0].Jobs[0].Script)
		}
	})
}

func TestReference(t *testing.T) {
	t.Run("list index and nested references", func(t *testing.T) {
		src := ".a:\n  steps: [first, second]\n.b:\n  step: !reference [.a, steps, 1]\nmain:\n  push:\n    - stages:\n        - !reference [.b, step]\n"
		p := onlyPipeline(t, mustPlan(t, src, Trigger{Event: "push", Branch: "main"}, Options{}))
		if p.Stages[0].Jobs[0].Script != "second" {
			t.Errorf("got %q", p.Stages[0].Jobs[0].Script)
		}
	})
	t.Run("ten levels are fine, eleven are not", func(t *testing.T) {
		chain := func(n int) string {
			var b strings.Builder
			b.WriteString(".r0: make\n")
			for i := 1; i <= n; i++ {
				fmt.Fprintf(&b, ".r%d: !reference [.r%d]\n", i, i-1)
			}
			fmt.Fprintf(&b, "main:\n  push:\n    - stages: [!reference [.r%d]]\n", n)
			return b.String()
		}
		if ds := Lint([]byte(chain(9)), Options{}); ds.HasErrors() {
			t.Errorf("10 levels: %v", ds)
		}
		ds := Lint([]byte(chain(10)), Options{})
		if _, ok := findDiag(ds, SeverityError, "nested more than 10 levels"); !ok {
			t.Errorf("11 levels: %v", ds)
		}
	})
	t.Run("cycle", func(t *testing.T) {
		ds := Lint([]byte(".a: !reference [.b]\n.b: !reference [.a]\n"), Options{})
		if _, ok := findDiag(ds, SeverityError, "nested more than 10 levels"); !ok {
			t.Errorf("got %v", ds)
		}
	})
	t.Run("missing path", func(t *testing.T) {
		ds := Lint([]byte("main:\n  push:\n    - stages: !reference [.nope, x]\n"), Options{})
		if d, ok := findDiag(ds, SeverityError, "!reference [.nope]: no such value"); !ok || d.Pos.Line != 3 || d.Pos.Column != 15 {
			t.Errorf("got %v", ds)
		}
	})
	t.Run("replaces, does not merge", func(t *testing.T) {
		src := ".env: {A: a}\nmain:\n  push:\n    - env: !reference [.env]\n      stages: [make]\n"
		p := onlyPipeline(t, mustPlan(t, src, Trigger{Event: "push", Branch: "main"}, Options{}))
		if p.Env["A"] != "a" || len(p.Env) != 1 {
			t.Errorf("env %v", p.Env)
		}
	})
}
