package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// limitsYAML is a .cnb.yml whose main push runs pipelines pipelines sharing jobs jobs (as evenly
// as they go, at least one each) in one parallel stage.
func limitsYAML(pipelines, jobs int) string {
	var b strings.Builder
	b.WriteString("main:\n  push:\n")
	for i := range pipelines {
		fmt.Fprintf(&b, "    - name: p%d\n      stages:\n        - name: s\n          jobs:\n", i)
		n := max(jobs/pipelines+btoi(i < jobs%pipelines), 1)
		for j := range n {
			fmt.Fprintf(&b, "            j%d: echo %d\n", j, j)
		}
	}
	return b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A push used to take a file of any size: 10,000 pipelines were a 10 s push, 5.7 MB of build
// JSON and 183 MiB of server RSS, and a .cnb.yml over 1 MiB made no build and an ERROR line.
// Against the real server on PostgreSQL, with the default limits: a file at them (256
// pipelines; 256 pipelines of 2,000 jobs) builds, its answer carries 100 pipelines and its
// pipelines list the rest page by page; the files and a file over 1 MiB each make one
// failed build that says why; nothing logs an error. It logs each push's time and the server's
// peak RSS.
func TestPushAtTheLimits(t *testing.T) {
	w := newPushWorld(t, false)
	pid := w.server.cmd.Process.Pid
	t.Logf("server started: peak RSS %d MiB", vmHWM(t, pid)>>20)
	var last int64
	push := func(name, src string) apiclient.Build {
		t.Helper()
		if err := os.WriteFile(filepath.Join(w.work, ".cnb.yml"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		gitRun(t, w.work, "add", ".")
		gitRun(t, w.work, "commit", "-q", "-m", name)
		began := time.Now()
		gitRun(t, w.work, "push", "-q", w.remote, "main")
		took := time.Since(began)
		list, err := w.api.api.Builds(t.Context(), "ml", "trainer", 1)
		w.api.check("builds", err)
		if len(list) != 1 || list[0].Number != last+1 {
			t.Fatalf("%s: want build #%d, got %+v", name, last+1, list)
		}
		last++
		var b apiclient.Build
		began = time.Now()
		var raw json.RawMessage
		w.api.must(200, "GET", fmt.Sprintf("/api/v1/repos/ml/trainer/builds/%d", last), nil, &raw)
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%d KiB): git push %v; build #%d %s, its answer %d KiB in %v; server peak RSS %d MiB",
			name, len(src)>>10, took.Round(time.Millisecond), b.Number, b.Status, len(raw)>>10,
			time.Since(began).Round(time.Millisecond), vmHWM(t, pid)>>20)
		return b
	}
	failed := func(b apiclient.Build, want string) {
		t.Helper()
		errs := 0
		for _, d := range b.Diagnostics {
			if d.Severity == "error" {
				errs++
			}
		}
		if b.Status != "failed" || b.Error == nil || !strings.Contains(b.Error.Message, want) || errs != 1 || b.PipelineCount != 0 {
			t.Errorf("build #%d: %s %+v, %d errors, %d pipelines; want it failed with %q", b.Number, b.Status, b.Error, errs, b.PipelineCount, want)
		}
	}
	built := func(b apiclient.Build, pipelines, jobs int) {
		t.Helper()
		if b.Status != "queued" || b.PipelineCount != int64(pipelines) || len(b.Pipelines) != 100 || b.PipelinesNextCursor == "" {
			t.Errorf("build #%d: %s, %d of %d pipelines, cursor %q", b.Number, b.Status, len(b.Pipelines), b.PipelineCount, b.PipelinesNextCursor)
			return
		}
		all := b.Pipelines
		for cursor := b.PipelinesNextCursor; cursor != ""; {
			page, err := w.api.api.BuildPipelines(t.Context(), "ml", "trainer", b.Number, 100, cursor)
			w.api.check("pipelines", err)
			all, cursor = append(all, page.Items...), page.NextCursor
		}
		n := 0
		for i, p := range all {
			if p.Name != fmt.Sprint("p", i) {
				t.Fatalf("pipeline %d is %s", i, p.Name)
			}
			for _, s := range p.Stages {
				n += len(s.Jobs)
			}
		}
		if len(all) != pipelines || n != jobs {
			t.Errorf("build #%d: %d pipelines and %d jobs in its pages, want %d and %d", b.Number, len(all), n, pipelines, jobs)
		}
	}

	built(push("256 pipelines", limitsYAML(256, 256)), 256, 256)
	built(push("256 pipelines of 2,000 jobs", limitsYAML(256, 2000)), 256, 2000)
	failed(push("10,000 pipelines", limitsYAML(10000, 10000)), `event "push" runs 10000 pipelines; a build may run at most 256`)
	failed(push("10,000 jobs in one stage", limitsYAML(1, 10000)), `pipeline "p0" has 10000 jobs; a pipeline may have at most 256`)
	failed(push("1.5 MiB", limitsYAML(1, 1)+"# "+strings.Repeat("x", 3<<19)+"\n"), "cannot read .cnb.yml: it is 1.5 MiB")
	if w.server.stderr.contains(`"level":"ERROR"`) {
		t.Errorf("the server logged an error:\n%s", w.server.stderr)
	}
}
