package e2e

import (
	"strings"
	"testing"
	"time"
)

// depsScript stands for a dependency download: when the cache is empty it writes 200 MiB of
// random data in 1 KiB writes (50 "packages" of 4 MiB; about 1.5 s on the reference machine, a
// mirror at some 140 MB/s, faster than most real downloads), then it reads the whole cache back
// as a build would (through a pipe in 1 MiB blocks: busybox's wc would measure itself). It
// prints its own start and end on the host's clock (/proc/uptime), which every container shares.
const depsScript = `echo "start $(cut -d' ' -f1 /proc/uptime)"
if [ ! -f /deps/.complete ]; then
  i=0; while [ $i -lt 50 ]; do dd if=/dev/urandom of=/deps/pkg-$i bs=1k count=4096 2>/dev/null; i=$((i+1)); done
  touch /deps/.complete; echo downloaded
fi
echo "read $(cat /deps/pkg-* | dd of=/dev/null bs=1M iflag=fullblock 2>&1 | head -n 1)"
echo "end $(cut -d' ' -f1 /proc/uptime)"`

// BenchmarkVolumeCache is issue 14's figure: the same pipeline twice with a copy-on-write cache
// of 200 MiB (docker.volumes: /deps). The first run fills it, the second finds it. It reports
// each run's job duration (the job's own work, from inside its container), each pipeline's
// duration as the server recorded it (clone, cache restore and save, container start included),
// and the job speed-up [target ≥ 5×].
//
// Alone: make binaries && e2e/testenv.sh env NIMBUS_E2E_BIN=$PWD/bin go test -run '^$' -bench VolumeCache -benchtime=1x ./e2e
func BenchmarkVolumeCache(b *testing.B) {
	for range b.N {
		w := newWorld(b)
		w.agent("")
		var job, pipeline [2]time.Duration
		for run := range 2 {
			bj := volumeRun(b, w, "success", volumePipeline(w, "deps", `"/deps"`, depsScript))
			log := w.jobLog(jobOf(b, bj, "deps"))
			if !strings.Contains(log, "read 200+0 records in") || strings.Contains(log, "downloaded") != (run == 0) {
				b.Fatalf("run %d: %q", run+1, log)
			}
			job[run] = uptimeSpan(b, log)
			pipeline[run] = firstPipelineDuration(b, w, int64(w.pushes))
		}
		speedup := job[0].Seconds() / job[1].Seconds()
		b.ReportMetric(job[0].Seconds(), "first-job-s")
		b.ReportMetric(job[1].Seconds(), "second-job-s")
		b.ReportMetric(speedup, "job-speedup-x")
		b.ReportMetric(pipeline[0].Seconds(), "first-pipeline-s")
		b.ReportMetric(pipeline[1].Seconds(), "second-pipeline-s")
		b.Logf("200 MiB copy-on-write cache: job %v then %v (%.1f× faster, target ≥ 5×); pipeline %v then %v",
			job[0].Round(10*time.Millisecond), job[1].Round(10*time.Millisecond), speedup,
			pipeline[0].Round(10*time.Millisecond), pipeline[1].Round(10*time.Millisecond))
	}
}

// uptimeSpan is the time between a log's "start T" and "end T" lines.
func uptimeSpan(tb testing.TB, log string) time.Duration {
	tb.Helper()
	sp := parseSpan(tb, log)
	if sp.end < sp.start {
		tb.Fatalf("end before start in %q", log)
	}
	return time.Duration((sp.end - sp.start) * float64(time.Second))
}

// firstPipelineDuration is how long the server recorded build n's first pipeline running, from
// its lease to its finish.
func firstPipelineDuration(tb testing.TB, w *world, n int64) time.Duration {
	b := w.build(n)
	if len(b.Pipelines) == 0 || b.Pipelines[0].StartedAt == nil || b.Pipelines[0].FinishedAt == nil {
		tb.Fatalf("build #%d has no pipeline times: %+v", n, b)
	}
	return b.Pipelines[0].FinishedAt.Sub(*b.Pipelines[0].StartedAt)
}
