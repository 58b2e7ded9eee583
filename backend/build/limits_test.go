package build_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// oneFailure checks that a push made exactly one failed build, with no pipeline, whose error
// and one error diagnostic (as the build's answer shows them) hold want at file:line, and
// returns it.
func (f *fixture) oneFailure(bs []*build.Build, file string, line int, want string) *build.Build {
	f.t.Helper()
	if len(bs) != 1 || bs[0].Status != build.StatusFailed {
		f.t.Fatalf("want one failed build, got %+v", bs)
	}
	b := bs[0]
	var n int64
	f.db.Model(&build.Pipeline{}).Where("build_id = ?", b.ID).Count(&n)
	if n != 0 {
		f.t.Fatalf("a failed build with %d pipelines", n)
	}
	h := build.NewHandler(build.HandlerConfig{Service: f.builds, Repos: f.repos, Log: f.log})
	j, err := h.Describe(context.Background(), b.RepoID, b.Number)
	if err != nil {
		f.t.Fatal(err)
	}
	if j.Status != build.StatusFailed || j.Error == nil || j.Error.File != file || j.Error.Line != line || !strings.Contains(j.Error.Message, want) {
		f.t.Fatalf("error %+v, want %q at %s:%d", j.Error, want, file, line)
	}
	var errs []build.Diagnostic
	for _, d := range j.Diagnostics {
		if d.Severity == "error" {
			errs = append(errs, d)
		}
	}
	if len(errs) != 1 || errs[0].File != file || errs[0].Line != line || !strings.Contains(errs[0].Message, want) {
		f.t.Fatalf("diagnostics %.500v, want one error %q at %s:%d", j.Diagnostics, want, file, line)
	}
	return b
}

// noErrorLogged fails the test when the service logged at ERROR: what the author of a file can
// fix is no error of the server's.
func (f *fixture) noErrorLogged() {
	f.t.Helper()
	if logs := f.logs.String(); strings.Contains(logs, "level=ERROR") {
		f.t.Fatalf("the push logged an error:\n%s", logs)
	}
}

// bigYAML is a valid .cnb.yml of size bytes or a little more: one pipeline and a long comment.
func bigYAML(size int) string {
	head := "main:\n  push:\n    - stages: [make]\n# "
	return head + strings.Repeat("x", max(size-len(head), 0)) + "\n"
}

// A .cnb.yml over 1 MiB, or an include over it, used to make no build at all: the push
// succeeded, the trigger logged "push trigger failed" at ERROR (or, for an include under
// ignoreError, ran without it), and the author saw nothing. A .cnb.yml that is a directory was
// dropped the same way. Each is now one failed build whose error and diagnostics name the file,
// its size and the limit (or what it is), shown like a file that does not parse; the push logs
// no error, and the branch keeps the schedules its last good file registered.
func TestUnusableFileFailsItsBuild(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		good := f.commit("ci", map[string]string{".cnb.yml": "main:\n  push:\n    - stages: [make]\n  schedule:\n    - cron: \"0 2 * * *\"\n      stages: [make]\n"})
		f.push("refs/heads/main", git.ZeroSHA, "main")

		size := git.MaxFileSize + 38
		prev := f.commit("too large", map[string]string{".cnb.yml": bigYAML(size)})
		b := f.oneFailure(f.push("refs/heads/main", good, "main"), ".cnb.yml", 0,
			fmt.Sprintf("cannot read .cnb.yml: it is %d bytes, over the 1 MiB (1048576 bytes) limit of a pipeline file", size+1))
		if b.CommitSHA != prev {
			t.Fatalf("build of %s, want %s", b.CommitSHA, prev)
		}
		if ss, _ := f.builds.RepoSchedules(ctx, f.access.Repo.ID); len(ss) != 1 {
			t.Fatalf("a too-large file dropped the branch's schedules: %+v", ss)
		}

		include := "include: [ci/big.yml]\nmain:\n  push: [{stages: [make]}]\n"
		ignored := "include:\n  - path: ci/big.yml\n    ignoreError: true\nmain:\n  push: [{stages: [make]}]\n"
		for name, c := range map[string]struct {
			src  string
			line int
		}{"an include": {include, 1}, "an include under ignoreError": {ignored, 2}} {
			next := f.commit(name, map[string]string{".cnb.yml": c.src, "ci/big.yml": bigYAML(3 << 19)})
			f.oneFailure(f.push("refs/heads/main", prev, "main"), ".cnb.yml", c.line,
				"cannot include ci/big.yml: it is 1.5 MiB (1572865 bytes), over the 1 MiB limit of a pipeline file")
			prev = next
		}

		f.git("rm", "-q", ".cnb.yml")
		next := f.commit("a directory", map[string]string{".cnb.yml/push.yml": "main: {}\n", "ci/big.yml": ""})
		f.oneFailure(f.push("refs/heads/main", prev, "main"), ".cnb.yml", 0,
			"cannot read .cnb.yml: it is a directory or a submodule, not a file")
		prev = next

		// A manual build of such a file fails the same way.
		f.git("rm", "-q", "-r", ".cnb.yml")
		f.commit("too large again", map[string]string{".cnb.yml": bigYAML(size)})
		f.git("push", "-q", f.bare, "main")
		mb, err := f.builds.Manual(ctx, f.access, f.user, "main", "web_trigger", nil)
		if err != nil {
			t.Fatal(err)
		}
		f.oneFailure([]*build.Build{mb}, ".cnb.yml", 0, "over the 1 MiB (1048576 bytes) limit")
		f.noErrorLogged()
	})
}

// The other readers of a branch's files said the same of a file over the size limit in their own
// wrong ways: "Run a build" said a too-large .cnb.yml "does not parse", and the buttons route
// answered a too-large .cnb/web_trigger.yml with a 500 (logged at ERROR). Both now name the
// size and the limit, the buttons as the 422 of any broken file.
func TestUnusableFileReaders(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.commit("too large", map[string]string{".cnb.yml": bigYAML(git.MaxFileSize + 1), ".cnb/web_trigger.yml": bigYAML(git.MaxFileSize + 1)})
		f.push("refs/heads/main", git.ZeroSHA, "main")

		ev, err := f.builds.EventsFor(ctx, f.access, "main")
		if err != nil || !strings.Contains(ev.Problem, "cannot run: .cnb.yml") || !strings.Contains(ev.Problem, "limit") ||
			strings.Contains(ev.Problem, "parse") || len(ev.Events) != 0 {
			t.Fatalf("events of a too-large file: %+v %v", ev, err)
		}
		_, err = f.builds.Buttons(ctx, f.access, f.user, "main")
		if errStatus(err) != 422 || !strings.Contains(err.Error(), ".cnb/web_trigger.yml") || !strings.Contains(err.Error(), "the limit is 1048576") {
			t.Fatalf("buttons of a too-large file: %v, want a 422 naming the file and the limit", err)
		}
		f.noErrorLogged()
	})
}

// pipelinesYAML is a .cnb.yml whose main push runs n pipelines of jobs jobs each.
func pipelinesYAML(n, jobs int) string {
	var b strings.Builder
	b.WriteString("main:\n  push:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - name: p%d\n      stages:\n        - name: s\n          jobs:\n", i)
		for j := range jobs {
			fmt.Fprintf(&b, "            j%d: echo %d\n", j, j)
		}
	}
	return b.String()
}

// A push of a file with thousands of pipelines, or a pipeline of 10,000 jobs, used to be
// planned and stored whole (10,000 pipelines: a 10 s push, 5.7 MB of build JSON). Over a limit,
// the push now makes one failed build naming the count and the limit, at the pipeline that
// passes it, and stores no pipeline; a file at the limit builds.
func TestOversizedPlanFailsItsBuild(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		lines := func(n int) int { return 3 + n*5 } // where pipeline n (from 0) of pipelinesYAML(…, 1) starts
		first := f.commit("too many pipelines", map[string]string{".cnb.yml": pipelinesYAML(257, 1)})
		f.oneFailure(f.push("refs/heads/main", git.ZeroSHA, "main"), ".cnb.yml", lines(256),
			`event "push" runs 257 pipelines; a build may run at most 256 (this is pipeline 257)`)

		second := f.commit("a wide stage", map[string]string{".cnb.yml": pipelinesYAML(1, 10000)})
		f.oneFailure(f.push("refs/heads/main", first, "main"), ".cnb.yml", 3,
			`pipeline "p0" has 10000 jobs; a pipeline may have at most 256`)

		f.commit("too many jobs", map[string]string{".cnb.yml": pipelinesYAML(8, 251)})
		f.oneFailure(f.push("refs/heads/main", second, "main"), ".cnb.yml", 3+7*(4+251),
			`event "push" runs 2008 jobs in 8 pipelines; a build may run at most 2000 jobs (this pipeline passes it)`)
		f.noErrorLogged()

		head := f.git("rev-parse", "HEAD")
		f.commit("at the limit", map[string]string{".cnb.yml": pipelinesYAML(256, 1)})
		began := time.Now()
		bs := f.push("refs/heads/main", head, "main")
		took := time.Since(began)
		if len(bs) != 1 || bs[0].Status != build.StatusQueued {
			t.Fatalf("a file at the limit: %+v", bs)
		}
		var n int64
		f.db.Model(&build.Pipeline{}).Where("build_id = ?", bs[0].ID).Count(&n)
		if n != 256 {
			t.Fatalf("%d pipelines, want 256", n)
		}
		t.Logf("a push of 256 pipelines: %s", took.Round(time.Millisecond))
	})
}

// The build's answer of a build with 256 pipelines used to carry all of them with their stages
// and jobs (a build of 10,000 pipelines answered 5.7 MB). It now carries the first 100, the
// count and the cursor of GET …/builds/{n}/pipelines, whose pages hold the rest in order.
func TestBuildAnswerPagesItsPipelines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.commit("many", map[string]string{".cnb.yml": pipelinesYAML(256, 1)})
		b := f.push("refs/heads/main", git.ZeroSHA, "main")[0]
		h := build.NewHandler(build.HandlerConfig{Service: f.builds, Repos: f.repos, Log: f.log})
		j, err := h.Describe(context.Background(), b.RepoID, b.Number)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(j)
		if len(j.Pipelines) != build.PipelinesPage || j.PipelineCount != 256 || j.PipelinesNextCursor == "" ||
			j.Pipelines[0].Name != "p0" || j.Pipelines[99].Name != "p99" || len(j.Pipelines[99].Stages) != 1 {
			t.Fatalf("%d pipelines, count %d, cursor %q", len(j.Pipelines), j.PipelineCount, j.PipelinesNextCursor)
		}
		t.Logf("the build's answer: %d bytes", len(raw))
		got := pagesOf(t, f, b, j.PipelinesNextCursor)
		if len(got) != 156 || got[0] != "p100" || got[155] != "p255" {
			t.Fatalf("the rest: %d pipelines, %v … %v", len(got), got[:1], got[len(got)-1:])
		}
	})
}

// pagesOf reads GET …/builds/{n}/pipelines through the routes, from cursor to the last page
// (pages of 60, so the cursor is followed), as alice with a token, and returns the pipelines'
// names in order. A bad cursor or limit is refused with the envelope.
func pagesOf(t *testing.T, f *fixture, b *build.Build, cursor string) []string {
	t.Helper()
	token, _, err := f.users.CreateToken(context.Background(), f.user, "read", []string{auth.ScopeRepoRead}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.TestMode)
	engine := gin.New()
	engine.Use(auth.NewHandler(f.users, f.log).Middleware)
	build.NewHandler(build.HandlerConfig{Service: f.builds, Repos: f.repos, Log: f.log}).Routes(engine, engine.Group("/api/v1"))
	srv := httptest.NewServer(engine)
	defer srv.Close()
	get := func(query string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/v1/repos/team/trainer/builds/%d/pipelines?%s", srv.URL, b.Number, query), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, body
	}
	for _, q := range []string{"cursor=%21%21", "cursor=LTE" /* -1 */, "limit=0", "limit=101"} {
		code, body := get(q)
		var env struct {
			Error struct{ Code string } `json:"error"`
		}
		if json.Unmarshal(body, &env); code != http.StatusBadRequest || env.Error.Code != "bad_request" {
			t.Errorf("?%s: %d %.200s", q, code, body)
		}
	}
	var names []string
	for pages := 0; cursor != ""; pages++ {
		code, body := get("limit=60&cursor=" + url.QueryEscape(cursor))
		var page struct {
			Items      []build.PipelineJSON `json:"items"`
			NextCursor string               `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil || pages > 5 {
			t.Fatalf("page %d: %d %.200s", pages, code, body)
		}
		for _, p := range page.Items {
			if len(p.Stages) != 1 || len(p.Stages[0].Jobs) != 1 {
				t.Fatalf("pipeline %s without its stage and job: %+v", p.Name, p.Stages)
			}
			names = append(names, p.Name)
		}
		cursor = page.NextCursor
	}
	return names
}
