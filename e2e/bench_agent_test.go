package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// BenchmarkAgentLatency prints what users feel of the agent path, on the Docker executor with a
// separate nimbus-agent (issue "Nothing fails because the server blinked"; targets in brackets):
//
//   - push → first log line: from the end of `git push` to the job's first line in the log API,
//     p50 and p95 over 20 pushes [p50 < 400 ms];
//   - cancel → container gone: from the cancel API call to the job's container gone from the
//     engine, p50 and p95 over the same 20 runs [p95 < 2 s];
//   - outage: a job rides out a server outage longer than the lease TTL (6 s TTL, 10 s down): the
//     time from the restarted server being ready to the lines printed meanwhile being in the log
//     API, and that the pipeline still ends success with every line once.
//
// Alone: make build && NIMBUS_E2E_BIN=$PWD/bin e2e/testenv.sh go test -run '^$' -bench AgentLatency ./e2e
func BenchmarkAgentLatency(b *testing.B) {
	for range b.N {
		w := newWorld(b, "NIMBUS_LEASE_TTL=6s")
		_, dir := w.agent("")
		var first, cancel []time.Duration
		for i := 0; i < 20; i++ {
			d, n := w.pushToFirstLine(b)
			first = append(first, d)
			cancel = append(cancel, w.cancelBuild(b, n, dir))
		}
		b.ReportMetric(float64(percentile(first, 50).Milliseconds()), "first-line-p50-ms")
		b.ReportMetric(float64(percentile(first, 95).Milliseconds()), "first-line-p95-ms")
		b.ReportMetric(float64(percentile(cancel, 50).Milliseconds()), "cancel-p50-ms")
		b.ReportMetric(float64(percentile(cancel, 95).Milliseconds()), "cancel-p95-ms")
		b.Logf("push → first log line over %d pushes: p50 %v p95 %v; cancel → container gone: p50 %v p95 %v",
			len(first), percentile(first, 50).Round(time.Millisecond), percentile(first, 95).Round(time.Millisecond),
			percentile(cancel, 50).Round(time.Millisecond), percentile(cancel, 95).Round(time.Millisecond))

		down, recovered := w.rideOutage(b, 10*time.Second)
		b.ReportMetric(down.Seconds(), "outage-survived-s")
		b.ReportMetric(float64(recovered.Milliseconds()), "outage-recovery-ms")
		b.Logf("a job survived %v without a server (lease TTL 6 s); its log caught up %v after the restart",
			down.Round(100*time.Millisecond), recovered.Round(time.Millisecond))
		w.server.stop(b, 30*time.Second)
	}
}

// pushToFirstLine pushes a long job and returns the time from the push's end to its first log
// line in the API, and the build's number.
func (w *world) pushToFirstLine(tb testing.TB) (time.Duration, int64) {
	n := w.push("echo first-line; sleep 300")
	pushed := time.Now()
	deadline := pushed.Add(30 * time.Second)
	job := int64(0)
	for time.Now().Before(deadline) {
		if job == 0 {
			var b apiclient.Build
			if w.api.do("GET", "/api/v1/repos/ml/trainer/builds/"+itoa(n), nil, &b) == 200 &&
				len(b.Pipelines) > 0 && len(b.Pipelines[0].Stages) > 0 && len(b.Pipelines[0].Stages[0].Jobs) > 0 {
				job = b.Pipelines[0].Stages[0].Jobs[0].ID
			}
		}
		if job != 0 && strings.Contains(w.jobLog(job), "first-line") {
			return time.Since(pushed), n
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatalf("build #%d: no first line 30 s after the push", n)
	return 0, 0
}

// cancelBuild cancels a running build and returns the time from the API call until its
// containers are gone; the build must end cancelled.
func (w *world) cancelBuild(tb testing.TB, n int64, dir string) time.Duration {
	w.waitContainer(dir)
	begin := time.Now()
	w.api.cancelBuild("ml", "trainer", n)
	deadline := begin.Add(15 * time.Second)
	for w.containers(dir) != 0 {
		if time.Now().After(deadline) {
			tb.Fatal("containers still there 15 s after the cancel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(begin)
	b := w.waitFor(n, 15*time.Second, "cancelled", func(b apiclient.Build) bool { return b.Status == "cancelled" })
	if b.Pipelines[0].Status != "cancelled" {
		tb.Fatalf("pipeline %+v", b.Pipelines[0])
	}
	return took
}

// rideOutage runs a counting job, stops the server gracefully for the given time once the job
// has printed line-3, restarts it, and checks the job ends success with every line once. It
// returns how long no server ran, and how long after the restart the lines printed during the
// outage were in the log API.
func (w *world) rideOutage(tb testing.TB, outage time.Duration) (time.Duration, time.Duration) {
	const lines = 25
	n := w.push(countJob(lines))
	b := w.waitFor(n, 60*time.Second, "running", running)
	job := b.Pipelines[0].Stages[0].Jobs[0].ID
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w.jobLog(job), "line-3\n") {
		if time.Now().After(deadline) {
			tb.Fatal("the job did not get to line-3")
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.server.stop(tb, 30*time.Second)
	stopped := time.Now()
	time.Sleep(outage)
	w.server = start(tb, w.dir, w.env, "nimbus-server")
	waitReady(tb, w.base, w.server, 30*time.Second)
	ready := time.Now()
	down := ready.Sub(stopped)
	// The job prints a line a second: by the restart it had printed about 3 + down of them.
	want := "line-" + itoa(int64(3+down/time.Second)-1) + "\n"
	var recovered time.Duration
	for deadline = time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(w.jobLog(job), want) {
			recovered = time.Since(ready)
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%q not in the log 30 s after the restart: %q", want, w.jobLog(job))
		}
	}
	b = w.waitFor(n, 60*time.Second, "the end", func(b apiclient.Build) bool { return b.Status != "running" && b.Status != "queued" })
	if b.Status != "success" {
		tb.Fatalf("after the outage: %s %q", b.Status, b.Pipelines[0].Reason)
	}
	log := w.jobLog(job)
	for i := 1; i <= lines; i++ {
		if c := strings.Count(log, "line-"+itoa(int64(i))+"\n"); c != 1 {
			tb.Fatalf("line-%d is in the log %d times: %q", i, c, log)
		}
	}
	return down, recovered
}
