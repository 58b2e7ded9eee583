package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// startRedis runs a redis-server of the test's own on port (no persistence: a restart comes
// back empty, the hardest case).
func startRedis(t *testing.T, port string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// Issue 18: Redis restarts (killed, then started again, empty) while pipelines run and others
// wait in its queues. Nothing is lost: the running ones finish (leases live in the database),
// the queued ones come back through the reconciler, and each runs exactly once.
func TestRedisRestartMidRun(t *testing.T) {
	t.Parallel() // waits more than it computes: it overlaps the other slow worlds (harness_test.go)
	addr := freeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	rds := startRedis(t, port)
	time.Sleep(300 * time.Millisecond)
	w := newWorld(t, "NIMBUS_REDIS_URL=redis://"+addr+"/0")
	w.agent("") // 4 cores: four of the eight pipelines run at once
	var cnb strings.Builder
	cnb.WriteString("main:\n  push:\n")
	for i := range 8 {
		fmt.Fprintf(&cnb, "    - name: p%d\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: %s }\n"+
			"      stages:\n        - name: only\n          script: echo run-$CNB_PIPELINE_ID; sleep 4; echo done-$CNB_PIPELINE_ID\n", i, w.image)
	}
	n := w.pushFiles(map[string]string{".cnb.yml": cnb.String()})
	w.waitFor(n, time.Minute, "four running, four queued", func(b apiclient.Build) bool {
		run, queued := 0, 0
		for _, p := range b.Pipelines {
			switch p.Status {
			case "running":
				run++
			case "queued":
				queued++
			}
		}
		return run == 4 && queued == 4
	})
	rds.Process.Kill()
	rds.Wait()
	time.Sleep(2 * time.Second)
	startRedis(t, port)
	restarted := time.Now()
	b := w.waitBuildSuccess(n, 2*time.Minute)
	t.Logf("the build ended %v after Redis came back", time.Since(restarted).Round(100*time.Millisecond))
	for _, p := range b.Pipelines {
		log := w.jobLog(p.Stages[0].Jobs[0].ID)
		if strings.Count(log, "run-"+itoa(p.ID)+"\n") != 1 || strings.Count(log, "done-"+itoa(p.ID)+"\n") != 1 {
			t.Errorf("pipeline %s ran other than once:\n%s", p.Name, log)
		}
	}
}
