package e2e

import (
	"strings"
	"testing"
	"time"
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
	b := w.waitFor(n, 2*time.Minute, "the end", func(b buildJSON) bool { return b.Status != "queued" && b.Status != "running" })
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
