package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// countJob prints line-1 … line-N, one a second.
func countJob(n int) string {
	return fmt.Sprintf("for i in $(seq 1 %d); do echo line-$i; sleep 1; done", n)
}

// checkCounted fails unless the log holds line-1 … line-N, each once and in order.
func checkCounted(t *testing.T, log string, n int) {
	t.Helper()
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("line-%d", i))
	}
	if got := strings.Fields(log); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the log is not line-1 … line-%d once each: %q", n, log)
	}
}

// A server outage longer than the lease TTL used to fail every running pipeline agent_lost at
// the restart, and its agent then killed the job. Now a 60 s job rides out 45 s without any
// server — after a graceful stop and after kill -9 — and ends success, with its whole log,
// no line doubled, billed for its real run time.
func TestJobSurvivesServerOutage(t *testing.T) {
	for _, how := range []string{"graceful", "kill-9"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.agent("")
			n := w.push(countJob(60))
			b := w.waitFor(n, 60*time.Second, "running", running)
			job := b.Pipelines[0].Stages[0].Jobs[0].ID
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(w.jobLog(job), "line-5") {
				if time.Now().After(deadline) {
					t.Fatal("the job did not get to line-5")
				}
				time.Sleep(100 * time.Millisecond)
			}
			if how == "graceful" {
				if err, _ := w.server.stop(t, 30*time.Second); err != nil {
					t.Fatalf("server stop: %v", err)
				}
			} else {
				w.server.cmd.Process.Kill()
				err := <-w.server.done
				w.server.done <- err
			}
			down := time.Now()
			time.Sleep(45 * time.Second)
			w.server = start(t, w.dir, w.env, "nimbus-server")
			waitReady(t, w.base, w.server, 30*time.Second)
			t.Logf("server away %v", time.Since(down).Round(time.Second))
			b = w.waitFor(n, 60*time.Second, "the end", func(b apiclient.Build) bool { return b.Status != "running" && b.Status != "queued" })
			if b.Status != "success" {
				t.Fatalf("after a %s outage of 45 s: %s, pipeline %s %q", how, b.Status, b.Pipelines[0].Status, b.Pipelines[0].Reason)
			}
			checkCounted(t, w.jobLog(job), 60)
			full := w.build(n)
			p := full.Pipelines[0]
			ran := p.FinishedAt.Sub(*p.StartedAt)
			// One core: billed core-seconds are the run time, which is the job's 60 s plus the
			// clone and the container start, and not more because reports came late.
			if ran < 60*time.Second || ran > 75*time.Second || p.CoreSeconds < 60 || p.CoreSeconds > 75 {
				t.Fatalf("run time %v, billed %d core-seconds, for a 60 s job", ran, p.CoreSeconds)
			}
			t.Logf("run time %v, billed %d core-seconds", ran.Round(100*time.Millisecond), p.CoreSeconds)
		})
	}
}

// cancelLatency pushes a long job and cancels it once it runs: its first line is in the log
// (cancelBuild).
func (w *world) cancelLatency(t testing.TB, dir string) time.Duration {
	_, n := w.pushToFirstLine(t)
	return w.cancelBuild(t, n, dir)
}

// percentile is the p-th percentile (0–100) of ds, nearest rank.
func percentile(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}
