package e2e

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

const trainingCI = `# the brief's training pipelines, plus a nightly schedule on dev branches
main:
  push:
    - name: train-cpu
      runner:
        tags: cnb:arch:amd64
        cpus: 8
      stages:
        - name: prepare
          script: |
            python preprocess.py --input ./data --output ./processed
        - name: package
          script: |
            python package.py --model ./ckpt/best.pt --output ./dist
    - name: train-gpu
      runner:
        tags: cnb:arch:amd64:gpu
        cpus: 16
      stages:
        - name: train
          script: |
            python train.py --data ./processed --epochs 10 --out ./ckpt
        - name: eval-and-pack
          script: |
            python evaluate.py --model ./ckpt/best.pt --report ./report.json
"dev/*":
  schedule:
    - cron: "0 2 * * *"
      name: nightly-train
      runner:
        tags: cnb:arch:amd64:gpu
        cpus: 16
      stages:
        - name: train
          script: |
            python train.py --data ./dataset --epochs 20 --out ./ckpt
`

// Issue 4's journey with the real git client against the real server on PostgreSQL and Redis:
// sign up, create a team and a repo, push a .cnb.yml, see the build; push a broken one, see
// where it breaks.
// plainServer starts nimbus-server on PostgreSQL and a Redis database of the test's own, with
// no agent, and returns its base URL.
func plainServer(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	base := "http://" + addr
	p := start(t, t.TempDir(), []string{"NIMBUS_LISTEN=" + addr, "NIMBUS_DATABASE_URL=" + storetest.PostgresURL(t),
		"NIMBUS_REDIS_URL=" + redisDB(t)}, "nimbus-server")
	waitReady(t, base, p, 30*time.Second)
	return base
}

func TestPushTurnsIntoBuilds(t *testing.T) {
	base := plainServer(t)

	alice := newClient(t, base)
	alice.signup("alice")
	alice.createOrg("ml-team")
	repo := alice.createRepo("ml-team", apiclient.NewRepo{Name: "trainer", Visibility: "private"})
	if repo.CloneURL != base+"/ml-team/trainer.git" {
		t.Fatalf("clone URL %q", repo.CloneURL)
	}
	tok := alice.newToken("laptop", "repo:write")

	// Anonymous clone of a private repo is refused; with credentials it works (empty repo).
	work := t.TempDir()
	u, _ := url.Parse(repo.CloneURL)
	u.User = url.UserPassword("alice", tok)
	gitRun(t, work, "clone", "-q", u.String(), "trainer")
	src := filepath.Join(work, "trainer")
	os.WriteFile(filepath.Join(src, ".cnb.yml"), []byte(trainingCI), 0o644)
	gitRun(t, src, "add", ".cnb.yml")
	gitRun(t, src, "commit", "-q", "-m", "Train in the pipeline")
	gitRun(t, src, "push", "-q", "origin", "main")
	head := gitRun(t, src, "rev-parse", "HEAD")

	api := tokenClient(t, base, tok)
	list := api.builds("ml-team", "trainer", 0)
	if len(list) != 1 {
		t.Fatalf("builds after the push: %+v", list)
	}
	b := list[0]
	// Queued: the GPU pipeline waits for an agent and for money (the team has none, and GPU
	// time has no free quota), the CPU one for an agent.
	if b.Number != 1 || b.Event != "push" || b.Branch != "main" || b.Commit != head || len(b.Pipelines) != 2 ||
		b.Status != "queued" {
		t.Fatalf("build %+v", b)
	}
	detail := api.build("ml-team", "trainer", 1)
	cpu, gpu := detail.Pipelines[0], detail.Pipelines[1]
	if cpu.Name != "train-cpu" || cpu.CPUs != 8 || cpu.RunnerTag != "cnb:arch:amd64" || len(cpu.Stages) != 2 ||
		cpu.Stages[0].Name != "prepare" || cpu.Stages[1].Name != "package" {
		t.Fatalf("train-cpu %+v", cpu)
	}
	if gpu.Name != "train-gpu" || gpu.CPUs != 16 || gpu.RunnerTag != "cnb:arch:amd64:gpu" || len(gpu.Stages) != 2 ||
		gpu.Stages[0].Name != "train" || gpu.Stages[1].Name != "eval-and-pack" || len(gpu.Stages[1].Jobs) != 1 {
		t.Fatalf("train-gpu %+v", gpu)
	}

	// A dev branch registers its nightly schedule.
	gitRun(t, src, "push", "-q", "origin", "main:dev/nightly")
	scheds, err := api.api.Schedules(t.Context(), "ml-team", "trainer")
	api.check("schedules", err)
	// The zone is a name browsers know (the dashboard failed on Go's "UTC+8").
	if len(scheds) != 1 || scheds[0].Branch != "dev/nightly" || scheds[0].Event != "schedule" || scheds[0].Cron != "0 2 * * *" ||
		scheds[0].Zone != "Asia/Shanghai" {
		t.Fatalf("schedules %+v", scheds)
	}

	// A broken .cnb.yml: a failed build that says where.
	os.WriteFile(filepath.Join(src, ".cnb.yml"), []byte(strings.Replace(trainingCI, "cpus: 8", "cpus: 80", 1)), 0o644)
	gitRun(t, src, "commit", "-q", "-am", "Too many cores")
	gitRun(t, src, "push", "-q", "origin", "main")
	broken := api.build("ml-team", "trainer", 2)
	if broken.Status != "failed" || broken.Error == nil || broken.Error.Line != 7 || broken.Error.Column == 0 ||
		!strings.Contains(broken.Error.Message, "80") || len(broken.Pipelines) != 0 {
		t.Fatalf("broken build %+v error %+v", broken, broken.Error)
	}
	os.WriteFile(filepath.Join(src, ".cnb.yml"), []byte("main:\n  push:\n    - stages:\n      - name: a\n        script: [unclosed\n"), 0o644)
	gitRun(t, src, "commit", "-q", "-am", "Bad YAML")
	gitRun(t, src, "push", "-q", "origin", "main")
	broken = api.build("ml-team", "trainer", 3)
	if broken.Status != "failed" || broken.Error == nil || broken.Error.Line == 0 || !strings.Contains(broken.Error.Message, "YAML") {
		t.Fatalf("bad YAML build %+v error %+v", broken, broken.Error)
	}

	// Another team sees none of it.
	eve := newClient(t, base)
	eve.signup("eve")
	if code := eve.do("GET", "/api/v1/repos/ml-team/trainer/builds", nil, nil); code != 404 {
		t.Fatalf("another team reads the builds: %d", code)
	}
}
