package build_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

type fixture struct {
	t      *testing.T
	db     *gorm.DB
	builds *build.Service
	repos  *repo.Service
	user   *auth.User
	users  *auth.Service
	access *repo.Access
	work   string // a working clone
	bare   string
	clock  *clock.Fake
	log    *slog.Logger
	logs   *bytes.Buffer // what log wrote (its handler serializes the writes)
}

func newFixture(t *testing.T, db *gorm.DB) *fixture {
	t.Helper()
	ctx := context.Background()
	logs := &bytes.Buffer{}
	w := testworld.New(t, db, testworld.Options{Log: slog.New(slog.NewTextHandler(logs, nil))})
	repos, users := w.Repos, w.Users
	f := &fixture{t: t, db: db, repos: repos, users: users, clock: w.Clock, log: w.Log, logs: logs, builds: w.Builds}
	var err error
	if f.user, err = users.Signup(ctx, "alice", "alice@example.com", "a long enough passphrase"); err != nil {
		t.Fatal(err)
	}
	o, err := w.Orgs.Create(ctx, f.user, "team")
	if err != nil {
		t.Fatal(err)
	}
	r, err := repos.Create(ctx, o, "trainer", repo.Private, "main", "")
	if err != nil {
		t.Fatal(err)
	}
	f.access = &repo.Access{Repo: r, Org: o, Level: repo.Admin}
	f.bare = repos.Path(r)
	f.work = t.TempDir()
	f.git("init", "-q", "-b", "main")
	return f
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Alice", "-c", "user.email=alice@example.com"}, args...)...)
	cmd.Dir = f.work
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+f.work)
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (path → content; "" deletes) and commits them on the current branch.
func (f *fixture) commit(msg string, files map[string]string) string {
	f.t.Helper()
	for p, content := range files {
		full := filepath.Join(f.work, p)
		if content == "" {
			os.Remove(full)
			continue
		}
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(content), 0o644)
	}
	f.git("add", "-A")
	f.git("commit", "-q", "--allow-empty", "-m", msg)
	return f.git("rev-parse", "HEAD")
}

// push pushes refspec to the bare repo and hands the resulting update to the trigger, as the git
// handler's post-receive hook would.
func (f *fixture) push(ref, old, refspec string) []*build.Build {
	f.t.Helper()
	f.git("push", "-q", "--force", f.bare, refspec)
	newSHA := git.ZeroSHA
	if sha, err := git.ResolveRef(context.Background(), f.bare, ref); err == nil {
		newSHA = sha
	}
	return f.builds.OnPush(context.Background(), f.access.Repo.ID, f.user, []git.RefUpdate{{Old: old, New: newSHA, Ref: ref}})
}

const twoPipelines = `
main:
  push:
    - name: train-cpu
      runner: { tags: cnb:arch:amd64, cpus: 8 }
      stages:
        - name: prepare
          script: python preprocess.py
        - name: package
          jobs:
            a: { script: echo a }
            b: { script: echo b }
    - name: train-gpu
      runner: { tags: cnb:arch:amd64:gpu }
      stages:
        - name: train
          script: python train.py
"dev/*":
  push:
    - name: dev-only
      ifModify: ["src/**"]
      stages: [ { name: t, script: "echo $CNB_BRANCH" } ]
  branch.create:
    - name: on-create
      stages: [ { name: c, script: echo created } ]
  schedule:
    - cron: "0 2 * * *"
      name: nightly-train
      stages: [ { name: train, script: python train.py } ]
  branch.delete:
    - name: cleanup
      stages: [ { name: d, script: echo bye } ]
"v*":
  tag_push:
    - name: release
      stages: [ { name: r, script: echo release } ]
`

func (f *fixture) detail(b *build.Build) map[string]any {
	f.t.Helper()
	var ps []build.Pipeline
	f.db.Where("build_id = ?", b.ID).Order("position").Find(&ps)
	out := map[string]any{"pipelines": len(ps)}
	for _, p := range ps {
		var stages []build.Stage
		f.db.Where("pipeline_id = ?", p.ID).Order("position").Find(&stages)
		var jobs int64
		f.db.Model(&build.Job{}).Where("pipeline_id = ?", p.ID).Count(&jobs)
		var plan protocol.Plan
		if err := json.Unmarshal([]byte(p.Plan), &plan); err != nil {
			f.t.Fatal(err)
		}
		out[p.Name] = map[string]any{"status": p.Status, "tag": p.RunnerTag, "cpus": p.CPUs, "stages": len(stages), "jobs": jobs, "plan": plan.Name}
	}
	return out
}

func TestPushCreatesQueuedBuildWithItsTree(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		sha := f.commit("add ci", map[string]string{".cnb.yml": twoPipelines})
		bs := f.push("refs/heads/main", git.ZeroSHA, "main")
		if len(bs) != 1 {
			t.Fatalf("%d builds", len(bs))
		}
		b := bs[0]
		if b.Number != 1 || b.Event != "push" || b.Branch != "main" || b.CommitSHA != sha || b.Status != build.StatusQueued ||
			b.CommitMessage != "add ci" || *b.TriggeredBy != f.user.ID {
			t.Fatalf("build %+v", b)
		}
		d := f.detail(b)
		cpu := d["train-cpu"].(map[string]any)
		gpu := d["train-gpu"].(map[string]any)
		if d["pipelines"] != 2 || cpu["cpus"] != 8 || cpu["stages"] != 2 || cpu["jobs"] != int64(3) || cpu["tag"] != "cnb:arch:amd64" ||
			gpu["cpus"] != 16 || gpu["tag"] != "cnb:arch:amd64:gpu" || gpu["status"] != build.StatusQueued {
			t.Fatalf("tree %v", d)
		}
		f.commit("again", nil)
		old := sha
		bs = f.push("refs/heads/main", old, "main")
		// push and commit.add: only push has pipelines here.
		if len(bs) != 1 || bs[0].Number != 2 {
			t.Fatalf("second push: %+v", bs)
		}
	})
}

func TestNewBranchEventsIfModifyAndSchedules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		base := f.commit("ci", map[string]string{".cnb.yml": twoPipelines})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		f.git("checkout", "-q", "-b", "dev/exp")
		// A new branch: push and branch.create; ifModify is ignored (no diff for a new branch).
		bs := f.push("refs/heads/dev/exp", git.ZeroSHA, "dev/exp")
		events := []string{}
		for _, b := range bs {
			events = append(events, b.Event)
		}
		if strings.Join(events, ",") != "push,branch.create" {
			t.Fatalf("events %v", events)
		}
		ss, _ := f.builds.RepoSchedules(ctx, f.access.Repo.ID)
		if len(ss) != 1 || ss[0].Branch != "dev/exp" || ss[0].Event != "schedule" || ss[0].Cron != "0 2 * * *" || ss[0].UserID != f.user.ID {
			t.Fatalf("schedules %+v", ss)
		}
		// As the repo's page lists it: the next run at 02:00 in the billing zone, who it runs
		// as, and no build yet; "Run now" builds its branch and event, and is its last build.
		shanghai, _ := time.LoadLocation("Asia/Shanghai")
		vs, err := f.builds.ScheduleViews(ctx, f.access.Repo.ID, shanghai)
		if err != nil || len(vs) != 1 || vs[0].RunAs != f.user.Username || vs[0].LastBuild != nil ||
			vs[0].Next.In(shanghai).Hour() != 2 || vs[0].Next.In(shanghai).Minute() != 0 || !vs[0].Next.After(ss[0].CreatedAt) {
			t.Fatalf("schedule views %+v %v", vs, err)
		}
		run, err := f.builds.RunSchedule(ctx, f.access, f.user, ss[0].ID)
		if err != nil || run.Event != "schedule" || run.Branch != "dev/exp" {
			t.Fatalf("run now: %+v %v", run, err)
		}
		if vs, _ := f.builds.ScheduleViews(ctx, f.access.Repo.ID, shanghai); vs[0].LastBuild == nil || *vs[0].LastBuild != run.Number || vs[0].LastFiredAt != nil {
			t.Fatalf("after run now: %+v", vs)
		}
		if _, err := f.builds.RunSchedule(ctx, f.access, f.user, ss[0].ID+1000); fault.KindOf(err) != fault.KindNotFound {
			t.Fatalf("run now of no schedule: %v", err)
		}
		// A push that changes only docs/: the ifModify pipeline does not run, so no build.
		c1 := f.commit("docs", map[string]string{"docs/a.md": "x"})
		if bs := f.push("refs/heads/dev/exp", base, "dev/exp"); len(bs) != 0 {
			t.Fatalf("ifModify ignored: %+v %v", bs[0], f.detail(bs[0]))
		}
		// A push that changes src/: it runs.
		f.commit("src", map[string]string{"src/a.py": "x"})
		if bs := f.push("refs/heads/dev/exp", c1, "dev/exp"); len(bs) != 1 || bs[0].Event != "push" {
			t.Fatalf("ifModify src: %+v", bs)
		}
		// Removing the schedule from the file removes it.
		head := f.git("rev-parse", "HEAD")
		f.commit("no schedule", map[string]string{".cnb.yml": strings.Replace(twoPipelines, "schedule:", "web_trigger_x:", 1)})
		f.push("refs/heads/dev/exp", head, "dev/exp")
		if ss, _ := f.builds.RepoSchedules(ctx, f.access.Repo.ID); len(ss) != 0 {
			t.Fatalf("schedule kept after removal: %+v", ss)
		}
	})
}

func TestTagPushAndBranchDelete(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.commit("ci", map[string]string{".cnb.yml": twoPipelines})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		f.git("tag", "v1.0")
		bs := f.push("refs/tags/v1.0", git.ZeroSHA, "v1.0")
		if len(bs) != 1 || bs[0].Event != "tag_push" || bs[0].Tag != "v1.0" || bs[0].Branch != "" {
			t.Fatalf("tag build %+v", bs)
		}
		if f.git("tag", "nope"); len(f.push("refs/tags/nope", git.ZeroSHA, "nope")) != 0 {
			t.Fatal("a tag no key matches created a build")
		}
		f.git("checkout", "-q", "-b", "dev/gone")
		old := f.git("rev-parse", "HEAD")
		f.push("refs/heads/dev/gone", git.ZeroSHA, "dev/gone")
		bs = f.push("refs/heads/dev/gone", old, ":dev/gone")
		if len(bs) != 1 || bs[0].Event != "branch.delete" || bs[0].Branch != "dev/gone" {
			t.Fatalf("branch.delete: %+v", bs)
		}
		if ss, _ := f.builds.RepoSchedules(context.Background(), f.access.Repo.ID); len(ss) != 0 {
			t.Fatalf("deleted branch keeps schedules: %+v", ss)
		}
	})
}

func TestBrokenOrMissingConfig(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		// No .cnb.yml: nothing.
		first := f.commit("readme", map[string]string{"README.md": "hi"})
		if bs := f.push("refs/heads/main", git.ZeroSHA, "main"); len(bs) != 0 {
			t.Fatalf("builds without a .cnb.yml: %+v", bs)
		}
		// No pipeline for this branch: nothing.
		second := f.commit("ci elsewhere", map[string]string{".cnb.yml": "release:\n  push:\n    - stages: [ { name: a, script: x } ]\n"})
		if bs := f.push("refs/heads/main", first, "main"); len(bs) != 0 {
			t.Fatalf("builds without a matching pipeline: %+v", bs)
		}
		// Broken YAML: one failed build that says where.
		f.commit("broken", map[string]string{".cnb.yml": "main:\n  push:\n    - stages:\n      - name: a\n        script: [oops\n"})
		bs := f.push("refs/heads/main", second, "main")
		if len(bs) != 1 || bs[0].Status != build.StatusFailed || bs[0].ErrorLine == 0 || bs[0].ErrorFile != ".cnb.yml" || bs[0].ErrorMessage == "" {
			t.Fatalf("broken file: %+v", bs)
		}
		// A runner tag that does not exist: a validation error with its line and column.
		f.git("checkout", "-q", "-b", "feature")
		f.commit("bad tag", map[string]string{".cnb.yml": "feature:\n  push:\n    - runner:\n        tags: cnb:arch:quantum\n      stages: [ { name: a, script: x } ]\n"})
		bs = f.push("refs/heads/feature", git.ZeroSHA, "feature")
		if len(bs) != 1 || bs[0].Status != build.StatusFailed || bs[0].ErrorLine != 4 || bs[0].ErrorColumn == 0 ||
			!strings.Contains(bs[0].ErrorMessage, "cnb:arch:quantum") {
			t.Fatalf("one failed build with the position expected, got %+v", bs)
		}
		// The build keeps the error with its lines for the build page, the hint included.
		var ds []build.Diagnostic
		if err := json.Unmarshal([]byte(bs[0].Diagnostics), &ds); err != nil || len(ds) != 1 {
			t.Fatalf("diagnostics %q: %v", bs[0].Diagnostics, err)
		}
		if d := ds[0]; d.Severity != "error" || d.Line != 4 || d.Column != 15 || !strings.Contains(d.Hint, "cnb:arch:amd64") ||
			d.Excerpt == nil || d.Excerpt.FirstLine != 3 || len(d.Excerpt.Lines) != 3 || d.Excerpt.Lines[1] != "        tags: cnb:arch:quantum" {
			t.Fatalf("diagnostic %+v excerpt %+v", d, d.Excerpt)
		}
		// A file that runs keeps its warnings, an include's excerpt from the include.
		f.commit("warnings", map[string]string{
			".cnb.yml":      "include: [.cnb/more.yml]\nfeature:\n  push:\n    - stages: [ { name: a, script: x, allow_failure: true } ]\n",
			".cnb/more.yml": "feature:\n  vscode:\n    - services: [vscode]\n      stags: []\n",
		})
		bs = f.push("refs/heads/feature", bs[0].CommitSHA, "feature")
		ds = nil
		if len(bs) != 1 || bs[0].Status == build.StatusFailed || json.Unmarshal([]byte(bs[0].Diagnostics), &ds) != nil || len(ds) != 2 {
			t.Fatalf("builds %+v", bs)
		}
		if ds[0].File != ".cnb.yml" || ds[0].Severity != "warning" || !strings.Contains(ds[0].Hint, `did you mean "allowFailure"`) || ds[0].Excerpt == nil ||
			ds[1].File != ".cnb/more.yml" || ds[1].Line != 4 || ds[1].Excerpt == nil || ds[1].Excerpt.Lines[1] != "      stags: []" {
			t.Fatalf("warnings %+v", ds)
		}
	})
}

func TestManualTrigger(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.commit("ci", map[string]string{".cnb.yml": `
main:
  web_trigger_train:
    - name: manual-$EPOCHS
      stages: [ { name: t, script: "python train.py --epochs $EPOCHS" } ]
`})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		b, err := f.builds.Manual(ctx, f.access, f.user, "", "web_trigger_train", map[string]string{"EPOCHS": "20"})
		if err != nil {
			t.Fatal(err)
		}
		var p build.Pipeline
		db.Where("build_id = ?", b.ID).Take(&p)
		if b.Event != "web_trigger_train" || b.Branch != "main" || p.Name != "manual-20" || !strings.Contains(p.Plan, `"EPOCHS":"20"`) {
			t.Fatalf("manual build %+v pipeline %s %s", b, p.Name, p.Plan)
		}
		tests := []struct {
			branch, event string
			env           map[string]string
		}{
			{"main", "push", nil},
			{"main", "web_trigger_other", nil},
			{"nope", "web_trigger_train", nil},
			{"main", "web_trigger_train", map[string]string{"CNB_BRANCH": "x"}},
			{"main", "web_trigger_train", map[string]string{"1BAD": "x"}},
		}
		for _, tt := range tests {
			_, err := f.builds.Manual(ctx, f.access, f.user, tt.branch, tt.event, tt.env)
			if ae, ok := err.(*fault.Error); !ok || ae.Kind != fault.KindInvalid {
				t.Errorf("manual %s %s %v: %v, want 422", tt.branch, tt.event, tt.env, err)
			}
		}
		var n int64
		db.Model(&build.Build{}).Count(&n)
		if n != 1 {
			t.Fatalf("%d builds after rejected triggers", n)
		}
	})
}

// One ref update runs three git processes whatever the file and its events: one reader for
// .cnb.yml, its includes and the commit (parsed once for every event and the schedules), and
// diff-tree and rev-list for ifModify and commit.add. Before the reader this push took 20.
func TestOnePushRunsThreeGitProcesses(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db)
	cnb := "include: [ci/train.yml]\nmain:\n  push:\n    - name: p\n      stages: [ { name: s, script: echo p } ]\n" +
		"  commit.add:\n    - name: c\n      stages: [ { name: s, script: echo c } ]\n"
	first := f.commit("ci", map[string]string{".cnb.yml": cnb,
		"ci/train.yml": "main:\n  push:\n    - name: t\n      stages: [ { name: s, script: echo t } ]\n  schedule:\n    - cron: \"0 2 * * *\"\n      stages: [ { name: n, script: echo n } ]\n"})
	f.push("refs/heads/main", git.ZeroSHA, "main")
	second := f.commit("more", map[string]string{"src/a.py": "x"})
	f.git("push", "-q", f.bare, "main")

	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	os.WriteFile(filepath.Join(dir, "git"), []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\nexec "+real+" \"$@\"\n"), 0o755)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	bs := f.builds.OnPush(context.Background(), f.access.Repo.ID, f.user, []git.RefUpdate{{Old: first, New: second, Ref: "refs/heads/main"}})
	log, _ := os.ReadFile(calls)
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(bs) != 2 || bs[0].Event != "push" || bs[1].Event != "commit.add" {
		t.Fatalf("builds %+v", bs)
	}
	if ss, _ := f.builds.RepoSchedules(context.Background(), f.access.Repo.ID); len(ss) != 1 {
		t.Fatalf("schedules from the include: %+v", ss)
	}
	if len(lines) != 3 || !strings.Contains(lines[0], "cat-file --batch-command") {
		t.Fatalf("%d git processes for one ref update, want 3:\n%s", len(lines), log)
	}
}

func TestOpenWorkspace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.commit("ws", map[string]string{".cnb.yml": `
$:
  vscode:
    - services: [vscode, docker]
      stages: [ { name: deps, script: "pip install -r requirements.txt" } ]
main:
  push:
    - stages: [ { name: build, script: "make" } ]
`})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		b, err := f.builds.OpenWorkspace(ctx, f.access, f.user, "")
		if err != nil {
			t.Fatal(err)
		}
		var ps []build.Pipeline
		db.Where("build_id = ?", b.ID).Find(&ps)
		if b.Event != "vscode" || b.Branch != "main" || len(ps) != 1 || !ps[0].Workspace || ps[0].ReadyAt != nil {
			t.Fatalf("workspace build %+v pipelines %+v", b, ps)
		}
		// The push build's pipeline is no workspace.
		var pushed build.Pipeline
		db.Joins("JOIN builds ON builds.id = pipelines.build_id").Where("builds.event = ?", "push").Take(&pushed)
		if pushed.ID == 0 || pushed.Workspace {
			t.Fatalf("the push pipeline: %+v", pushed)
		}
		if _, err := f.builds.OpenWorkspace(ctx, f.access, f.user, "nope"); err == nil {
			t.Fatal("a workspace on a branch that does not exist opened")
		} else if ae, ok := err.(*fault.Error); !ok || ae.Kind != fault.KindInvalid {
			t.Fatalf("unknown branch: %v, want 422", err)
		}
	})
}

func TestWorkspaceState(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		p    build.Pipeline
		want string
	}{
		{build.Pipeline{Status: build.StatusQueued}, build.WorkspaceQueued},
		{build.Pipeline{Status: build.StatusRunning}, build.WorkspaceStarting},
		{build.Pipeline{Status: build.StatusRunning, ReadyAt: &now}, build.WorkspaceReady},
		{build.Pipeline{Status: build.StatusRunning, ReadyAt: &now, CancelRequested: true}, build.WorkspaceStopping},
		{build.Pipeline{Status: build.StatusSuccess, ReadyAt: &now, Reason: "stopped: idle"}, build.WorkspaceStopped},
		{build.Pipeline{Status: build.StatusCancelled, ReadyAt: &now}, build.WorkspaceStopped},
		{build.Pipeline{Status: build.StatusTerminated, ReadyAt: &now, Reason: "insufficient_balance"}, build.WorkspaceStopped},
		{build.Pipeline{Status: build.StatusFailed, ReadyAt: &now, Reason: "agent_lost"}, build.WorkspaceFailed},
		{build.Pipeline{Status: build.StatusFailed}, build.WorkspaceFailed},
		{build.Pipeline{Status: build.StatusCancelled}, build.WorkspaceFailed},
	} {
		if got := build.WorkspaceState(tc.p); got != tc.want {
			t.Errorf("WorkspaceState(%s, ready %v, cancel %v) = %s, want %s", tc.p.Status, tc.p.ReadyAt != nil, tc.p.CancelRequested, got, tc.want)
		}
	}
}

// "Run a build" offers what the branch's file declares, and says why when it cannot.
func TestEventsForBranch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		if ev, err := f.builds.EventsFor(ctx, f.access, ""); err != nil || ev.Problem == "" || len(ev.Branches) != 0 {
			t.Fatalf("empty repo: %+v %v", ev, err)
		}
		first := f.commit("ci", map[string]string{".cnb.yml": `
main:
  push: [ { name: build, stages: [ { name: a, script: x } ] } ]
  web_trigger_train: [ { name: train, stages: [ { name: a, script: x } ] } ]
$:
  api_trigger: [ { stages: [ { name: a, script: x } ] } ]
`})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		ev, err := f.builds.EventsFor(ctx, f.access, "")
		if err != nil || ev.Branch != "main" || ev.Problem != "" || len(ev.Branches) != 1 || len(ev.Events) != 3 {
			t.Fatalf("main: %+v %v", ev, err)
		}
		if e := ev.Events[0]; e.Event != "push" || e.Manual || e.Pipelines != 1 {
			t.Errorf("push %+v", e)
		}
		if e := ev.Events[1]; e.Event != "web_trigger_train" || !e.Manual || e.Names[0] != "train" {
			t.Errorf("web_trigger_train %+v", e)
		}
		if e := ev.Events[2]; e.Event != "api_trigger" || !e.Manual {
			t.Errorf("api_trigger %+v", e)
		}
		if _, err := f.builds.EventsFor(ctx, f.access, "nope"); err == nil {
			t.Error("an unknown branch is an error")
		}
		f.git("checkout", "-q", "-b", "broken")
		f.commit("broken", map[string]string{".cnb.yml": "main: [oops\n"})
		f.push("refs/heads/broken", first, "broken")
		if ev, err := f.builds.EventsFor(ctx, f.access, "broken"); err != nil || !strings.Contains(ev.Problem, "cannot run: .cnb.yml:1") || len(ev.Events) != 0 || len(ev.Branches) != 2 {
			t.Fatalf("broken: %+v %v", ev, err)
		}
	})
}

// Re-run failed jobs runs again only what did not succeed, once the build has ended; every
// re-run names its original.
func TestRerunFailed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.commit("ci", map[string]string{".cnb.yml": `
main:
  push:
    - name: ok
      stages: [ { name: a, script: x } ]
    - name: broke
      stages: [ { name: a, script: x } ]
    - name: stopped
      stages: [ { name: a, script: x } ]
`})
		bs := f.push("refs/heads/main", git.ZeroSHA, "main")
		if len(bs) != 1 {
			t.Fatalf("builds %+v", bs)
		}
		orig := bs[0]
		isConflict := func(err error) bool {
			var ae *fault.Error
			return errors.As(err, &ae) && ae.Code == fault.CodeConflict
		}
		if _, err := f.builds.RerunFailed(ctx, f.access, f.user, orig); !isConflict(err) {
			t.Fatalf("a queued build's failed jobs re-run: %v", err)
		}
		for name, status := range map[string]string{"ok": build.StatusSuccess, "broke": build.StatusFailed, "stopped": build.StatusCancelled} {
			db.Model(&build.Pipeline{}).Where("build_id = ? AND name = ?", orig.ID, name).Update("status", status)
		}
		db.Model(&build.Build{}).Where("id = ?", orig.ID).Update("status", build.StatusFailed)
		orig.Status = build.StatusFailed
		nb, err := f.builds.RerunFailed(ctx, f.access, f.user, orig)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		db.Model(&build.Pipeline{}).Where("build_id = ?", nb.ID).Order("position").Pluck("name", &names)
		if strings.Join(names, ",") != "broke,stopped" || nb.RerunOf == nil || *nb.RerunOf != orig.ID {
			t.Fatalf("re-run of the failed: pipelines %v, rerun_of %v", names, nb.RerunOf)
		}
		all, err := f.builds.Rerun(ctx, f.access, f.user, orig)
		if err != nil || all.RerunOf == nil || *all.RerunOf != orig.ID {
			t.Fatalf("re-run all: %+v %v", all, err)
		}
		db.Model(&build.Pipeline{}).Where("build_id = ?", orig.ID).Update("status", build.StatusSuccess)
		if _, err := f.builds.RerunFailed(ctx, f.access, f.user, orig); !isConflict(err) {
			t.Fatalf("nothing failed, yet: %v", err)
		}
	})
}
