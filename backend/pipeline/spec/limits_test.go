package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// genPipelines writes a file whose event under key declares n pipelines of stages stages of
// jobs parallel jobs each.
func genPipelines(key, event string, n, stages, jobs int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q:\n  %s:\n", key, event)
	for p := 0; p < n; p++ {
		fmt.Fprintf(&b, "    - name: p%d\n      stages:\n", p)
		for s := 0; s < stages; s++ {
			fmt.Fprintf(&b, "        - name: s%d\n          jobs:\n", s)
			for j := 0; j < jobs; j++ {
				fmt.Fprintf(&b, "            j%d: {script: echo %d}\n", j, j)
			}
		}
	}
	return b.String()
}

// A file over a limit used to be accepted whatever its size: one push of 10,000 pipelines, or
// of 10,000 jobs in one stage, was planned and stored whole. Each limit is now an error at the
// place that passes it, with the count and the limit, in lint and in planning alike; a file at
// the limit is fine.
func TestLimits(t *testing.T) {
	small := Limits{Pipelines: 3, Stages: 2, Jobs: 4, BuildJobs: 6}
	tests := []struct {
		name   string
		src    string
		limits Limits
		msg    string // substring of the one error; "" = no error
		line   int
	}{
		{name: "pipelines at the limit", src: genPipelines("main", "push", 3, 1, 1), limits: small},
		{name: "pipelines over the limit", src: genPipelines("main", "push", 4, 1, 1), limits: small,
			msg: `event "push" runs 4 pipelines; a build may run at most 3 (this is pipeline 4)`, line: 18},
		{name: "stages at the limit", src: genPipelines("main", "push", 1, 2, 1), limits: small},
		{name: "stages over the limit, failStages and endStages counted",
			src:    "main:\n  push:\n    - name: big\n      stages: [a]\n      failStages: [b]\n      endStages: [c]\n",
			limits: small, msg: `pipeline "big" has 3 stages; a pipeline may have at most 2`, line: 3},
		{name: "jobs of a pipeline over the limit", src: genPipelines("main", "push", 1, 1, 5), limits: small,
			msg: `pipeline "p0" has 5 jobs; a pipeline may have at most 4`, line: 3},
		{name: "jobs of a build over the limit", src: genPipelines("main", "push", 2, 1, 4), limits: small,
			msg: `event "push" runs 8 jobs in 2 pipelines; a build may run at most 6 jobs (this pipeline passes it)`, line: 11},
		{name: "a schedule counts each cron apart",
			src: "main:\n  schedule:\n" + strings.Repeat("    - cron: \"0 1 * * *\"\n      stages: [x]\n", 3) +
				strings.Repeat("    - cron: \"0 2 * * *\"\n      stages: [x]\n", 3),
			limits: small},
		{name: "a schedule over the limit for one cron",
			src:    "main:\n  schedule:\n" + strings.Repeat("    - cron: \"0 1 * * *\"\n      stages: [x]\n", 4),
			limits: small, msg: `schedule "0 1 * * *" runs 4 pipelines; a build may run at most 3`, line: 9},
		// The files, at the default limits.
		{name: "10,000 jobs in one stage", src: genPipelines("main", "push", 1, 1, 10000),
			msg: `pipeline "p0" has 10000 jobs; a pipeline may have at most 256`, line: 3},
		{name: "257 pipelines", src: genPipelines("main", "push", 257, 1, 1),
			msg: `event "push" runs 257 pipelines; a build may run at most 256 (this is pipeline 257)`, line: 3 + 256*5},
		{name: "256 pipelines", src: genPipelines("main", "push", 256, 1, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := Lint([]byte(tt.src), Options{Limits: tt.limits}).Filter(SeverityError)
			if tt.msg == "" {
				if len(ds) != 0 {
					t.Fatalf("errors within the limits: %v", ds)
				}
				return
			}
			if len(ds) != 1 || !strings.Contains(ds[0].Message, tt.msg) || ds[0].Pos.Line != tt.line || ds[0].Hint == "" {
				t.Fatalf("want one error %q at line %d with a hint, got %v", tt.msg, tt.line, ds)
			}
			// The build fails with the same words: nothing is planned.
			_, pds, err := Compile([]byte(tt.src), Trigger{Event: "push", Branch: "main"}, Options{Limits: tt.limits})
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(pds.Filter(SeverityError)[0].Message, tt.msg) {
				t.Fatalf("planning: %v %v", err, pds)
			}
		})
	}
}

// Two branch keys that match the same ref each within the limits, together over them: the
// file lints clean (another branch may match only one), and planning that ref fails naming the
// keys, the count and the limit, without planning a pipeline.
func TestLimitsAcrossBranchKeys(t *testing.T) {
	lim := Limits{Pipelines: 3, BuildJobs: 5}
	src := genPipelines("main", "push", 2, 1, 2) + genPipelines("**", "push", 2, 1, 1)
	cfg, ds := Parse([]byte(src), Options{Limits: lim})
	if ds.HasErrors() {
		t.Fatalf("each key is within the limits: %v", ds)
	}
	if set, _, err := cfg.Plan(Trigger{Event: "push", Branch: "dev"}); err != nil || len(set.Pipelines) != 2 {
		t.Fatalf("dev matches only **: %v", err)
	}
	set, ds, err := cfg.Plan(Trigger{Event: "push", Branch: "main"})
	errs := ds.Filter(SeverityError)
	if err == nil || set != nil || len(errs) != 1 ||
		errs[0].Message != `the push build of main runs 4 pipelines (from "main", "**"); a build may run at most 3 (this is pipeline 4)` ||
		errs[0].Pos.Line != 22 {
		t.Fatalf("main: %v %v", set, ds)
	}
	// Within the pipeline limit, over the build's jobs: the pipeline that passes it is named.
	lim.Pipelines = 4
	cfg, _ = Parse([]byte(src), Options{Limits: lim})
	_, ds, err = cfg.Plan(Trigger{Event: "push", Branch: "main"})
	errs = ds.Filter(SeverityError)
	if err == nil || len(errs) != 1 ||
		errs[0].Message != `the push build of main runs 6 jobs in 4 pipelines (from "main", "**"); a build may run at most 5 jobs (this pipeline passes it)` ||
		errs[0].Pos.Line != 22 {
		t.Fatalf("jobs: %v", ds)
	}
}

// An included file over the size limit used to be reported with the reader's raw error, and
// not at all under ignoreError, so the build ran without it. Now it is an error that names its
// size and the limit whether or not ignoreError is set; ignoreError still skips a missing file,
// and only that.
func TestIncludeTooLarge(t *testing.T) {
	repo := sizedFS{files: mapFS{"ci/ok.yml": "main:\n  push: [{stages: [x]}]\n"}, big: map[string]int64{"ci/big.yml": 3 << 19}}
	for src, line := range map[string]int{"include: [ci/big.yml]\n": 1, "include:\n  - path: ci/big.yml\n    ignoreError: true\n": 2} {
		ds := Lint([]byte(src), Options{Files: repo})
		errs := ds.Filter(SeverityError)
		if len(errs) != 1 || errs[0].Message != "cannot include ci/big.yml: it is 1.5 MiB (1572864 bytes), over the 1 MiB limit of a pipeline file" ||
			errs[0].Pos.Line != line || !strings.Contains(errs[0].Hint, "split it") {
			t.Errorf("%q: %v", src, ds)
		}
	}
	if ds := Lint([]byte("include:\n  - path: nope.yml\n    ignoreError: true\n  - ci/ok.yml\n"), Options{Files: repo}); len(ds) != 0 {
		t.Errorf("ignoreError skips a missing file: %v", ds)
	}
	repo.broken = errors.New("ci/dir.yml is a directory, not a file")
	ds := Lint([]byte("include:\n  - path: ci/dir.yml\n    ignoreError: true\n"), Options{Files: repo})
	if _, ok := findDiag(ds, SeverityError, "cannot include ci/dir.yml: ci/dir.yml is a directory"); !ok {
		t.Errorf("ignoreError skipped a file that is there and unusable: %v", ds)
	}
}

// A main file the caller could not read is a Config like a broken file's: it plans nothing, and
// its one error is at the file and says why.
func TestUnreadable(t *testing.T) {
	cfg := Unreadable(Options{File: "ci.yml"}, &FileTooLargeError{Size: 1<<20 + 1, Limit: 1 << 20})
	ds := cfg.Diagnostics()
	if len(ds) != 1 || ds[0].Pos != (Pos{File: "ci.yml"}) || ds[0].Severity != SeverityError ||
		ds[0].Message != "cannot read ci.yml: it is 1048577 bytes, over the 1 MiB (1048576 bytes) limit of a pipeline file" {
		t.Fatalf("got %v", ds)
	}
	if _, _, err := cfg.Plan(Trigger{Event: "push", Branch: "main"}); err == nil {
		t.Fatal("an unreadable file planned")
	}
}

// sizedFS is a repository whose big files are refused for their size, as git's reader refuses
// them, and whose other unknown files are broken when broken is set.
type sizedFS struct {
	files  mapFS
	big    map[string]int64
	broken error
}

func (s sizedFS) ReadFile(p string) ([]byte, error) {
	if n, ok := s.big[p]; ok {
		return nil, &FileTooLargeError{Size: n, Limit: 1 << 20}
	}
	if _, ok := s.files[p]; !ok && s.broken != nil {
		return nil, s.broken
	}
	return s.files.ReadFile(p)
}
