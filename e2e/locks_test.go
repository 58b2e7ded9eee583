package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// Locks with the real server, agent and engine: a second push to a cancel-in-progress pipeline
// cancels the first; one that waits shows who holds the lock and runs after it; jobs of two
// pipelines that share a job lock take turns.
func TestPipelineLocks(t *testing.T) {
	t.Parallel() // waits more than it computes: it overlaps the other slow worlds (harness_test.go)
	w := newWorld(t)
	w.agent("")
	cnb := func(lock, script string) string {
		return "main:\n  push:\n    - name: deploy\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + w.image +
			" }\n      lock: " + lock + "\n      stages:\n        - name: only\n          script: " + script + "\n"
	}
	progress := "{ key: deploy, cancel-in-progress: true }"
	first := w.pushFiles(map[string]string{".cnb.yml": cnb(progress, "sleep 60")})
	w.waitFor(first, time.Minute, "running", running)
	second := w.pushFiles(map[string]string{".cnb.yml": cnb(progress, "echo second")})
	b := w.waitFor(first, time.Minute, "cancelled", func(b apiclient.Build) bool { return b.Status == "cancelled" })
	if r := b.Pipelines[0].Reason; !strings.Contains(r, `lock "deploy" was taken by build #2`) {
		t.Errorf("the first build's reason: %q", r)
	}
	w.waitBuildSuccess(second, time.Minute)

	// wait: the next push waits, and says for whom, while the holder runs.
	wait := "{ key: gpu, wait: true }"
	holder := w.pushFiles(map[string]string{".cnb.yml": cnb(wait, "sleep 3")})
	w.waitFor(holder, time.Minute, "running", running)
	waiter := w.pushFiles(map[string]string{".cnb.yml": cnb(wait, "echo after")})
	w.waitFor(waiter, 30*time.Second, "waiting for the lock", func(b apiclient.Build) bool {
		return len(b.Pipelines) > 0 && b.Pipelines[0].Status == "queued" &&
			b.Pipelines[0].Reason == `waiting for lock "gpu" held by build #3 (pipeline deploy)`
	})
	w.waitBuildSuccess(holder, time.Minute)
	w.waitBuildSuccess(waiter, time.Minute)

	// Job locks, taken by the agent: two pipelines of one build run at once, and their locked
	// jobs one after the other.
	job := func(name string) string {
		return "    - name: " + name + "\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + w.image +
			" }\n      stages:\n        - name: migrate\n          jobs:\n            - name: db\n              lock: { key: db, wait: true }\n              script: sleep 2\n"
	}
	both := w.pushFiles(map[string]string{".cnb.yml": "main:\n  push:\n" + job("one") + job("two")})
	b = w.waitBuildSuccess(both, 2*time.Minute)
	logs := w.jobLog(b.Pipelines[0].Stages[0].Jobs[0].ID) + w.jobLog(b.Pipelines[1].Stages[0].Jobs[0].ID)
	if !strings.Contains(logs, `waiting for lock "db" held by build #5 (pipeline `) || !strings.Contains(logs, `, job "migrate/db")`) ||
		!strings.Contains(logs, `lock "db": taken`) {
		t.Errorf("neither job waited for the other's lock:\n%s", logs)
	}
}
