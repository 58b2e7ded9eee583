package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// Two pipelines of one push hand over through cnb:resolve / cnb:await: the awaiting one waits
// for the other's key and gets its data, deep keys included; an await of a key nobody resolves
// fails with "dead lock found.".
func TestResolveAwaitAcrossPipelines(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	pipeline := func(name, stages string) string {
		return "    - name: " + name + "\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + w.image + " }\n      stages:\n" + stages
	}
	cnb := "main:\n  push:\n" +
		pipeline("prepare", "        - name: work\n          script: sleep 2\n        - name: done\n          type: cnb:resolve\n          options: { key: data-ready, data: { path: /data/v3, stats: { rows: 1200 } } }\n") +
		pipeline("train", "        - name: wait\n          type: cnb:await\n          options: { key: data-ready }\n          exports: { path: DATA_PATH, stats.rows: ROWS }\n        - name: use\n          script: echo \"training on $DATA_PATH ($ROWS rows)\"\n") +
		pipeline("orphan", "        - name: wait\n          type: cnb:await\n          options: { key: never }\n")
	n := w.pushFiles(map[string]string{".cnb.yml": cnb})
	b := w.waitFor(n, 2*time.Minute, "the end", func(b apiclient.Build) bool { return b.Status != "queued" && b.Status != "running" })
	byName := map[string]int{}
	for i, p := range b.Pipelines {
		byName[p.Name] = i
	}
	train, orphan := b.Pipelines[byName["train"]], b.Pipelines[byName["orphan"]]
	if train.Status != "success" || b.Pipelines[byName["prepare"]].Status != "success" {
		t.Fatalf("pipelines %+v", b.Pipelines)
	}
	if log := w.jobLog(train.Stages[1].Jobs[0].ID); !strings.Contains(log, "training on /data/v3 (1200 rows)") {
		t.Errorf("the awaiting pipeline did not get the data:\n%s", log)
	}
	if log := w.jobLog(orphan.Stages[0].Jobs[0].ID); orphan.Status != "failed" || !strings.Contains(log, "dead lock found.") {
		t.Errorf("the orphan await: %s\n%s", orphan.Status, log)
	}
}

// Two pipelines that each await the key only the other resolves, after its own await: a cycle.
// Both fail with "dead lock found." within a scheduler tick (1 s here) of the cycle closing:
// the await that closes it is refused at once, the other at its next ask.
func TestAwaitCycleIsADeadLock(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	pipeline := func(name, await, resolve string) string {
		return "    - name: " + name + "\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + w.image + " }\n      stages:\n" +
			"        - name: wait\n          type: cnb:await\n          options: { key: " + await + " }\n" +
			"        - name: give\n          type: cnb:resolve\n          options: { key: " + resolve + " }\n"
	}
	n := w.pushFiles(map[string]string{".cnb.yml": "main:\n  push:\n" + pipeline("a", "x", "y") + pipeline("b", "y", "x")})
	b := w.waitFor(n, time.Minute, "the end", func(b apiclient.Build) bool { return b.Status != "queued" && b.Status != "running" })
	// Job timings as the records keep them.
	var lastStart, lastEnd time.Time
	for _, p := range b.Pipelines {
		if log := w.jobLog(p.Stages[0].Jobs[0].ID); p.Status != "failed" || !strings.Contains(log, "dead lock found.") {
			t.Errorf("pipeline %s: %s\n%s", p.Name, p.Status, log)
		}
		var start, end time.Time
		for _, bp := range w.record(p.ID).Predicate.RunDetails.Byproducts {
			if bp.Annotations["type"] == "cnb:await" {
				start, _ = time.Parse(time.RFC3339Nano, fmt.Sprint(bp.Annotations["startedOn"]))
				end, _ = time.Parse(time.RFC3339Nano, fmt.Sprint(bp.Annotations["finishedOn"]))
			}
		}
		if start.IsZero() || end.IsZero() {
			t.Fatalf("pipeline %s's await has no times in its record", p.Name)
		}
		if start.After(lastStart) {
			lastStart = start
		}
		if end.After(lastEnd) {
			lastEnd = end
		}
	}
	// The cycle closes when the second await starts; one tick (1 s) and the server's answer later,
	// both have failed.
	if d := lastEnd.Sub(lastStart); d > 1500*time.Millisecond {
		t.Errorf("the dead lock took %s to fail both awaits after the cycle closed, want within a tick", d)
	}
}
