package e2e

import (
	"testing"
	"time"
)

// BenchmarkDockerBuildCacheHit prints what docker.build's reuse saves and costs, on a real
// server and agent with the Docker executor (issue 14), as pipeline durations the server
// recorded (leased → finished):
//
//   - cold: the environment image is built (a Dockerfile whose RUN step sleeps 10 s) and pushed;
//   - hit: the same Dockerfile again, found on the engine, nothing built (median of 5);
//   - hit overhead: hit − the same pipeline with docker.image instead of docker.build (median of
//     5, interleaved with the hits) [target < 1 s].
//
// Alone: make binaries && e2e/testenv.sh env NIMBUS_E2E_BIN=$PWD/bin go test -run '^$' -bench '^BenchmarkDockerBuildCacheHit$' -benchtime=1x -v ./e2e
func BenchmarkDockerBuildCacheHit(b *testing.B) {
	for range b.N {
		w := newWorld(b)
		w.envImageEngine() // removes the images when the benchmark ends
		w.agent("")
		// The nonce keeps the engine's layer cache from skipping the sleep of an earlier run.
		dockerfile := "FROM " + w.image + "\nRUN sleep 10 && echo " + randomName() + " > /built\n"
		build := map[string]string{"Dockerfile": dockerfile, ".cnb.yml": envBenchPipeline("build: Dockerfile")}
		plain := map[string]string{".cnb.yml": envBenchPipeline("image: " + w.image)}

		cold := w.timedEnvRun(build)
		var hits, plains []time.Duration
		for range 5 {
			hits = append(hits, w.timedEnvRun(build))
			plains = append(plains, w.timedEnvRun(plain))
		}
		hit, base := median(hits), median(plains)
		b.ReportMetric(cold.Seconds(), "cold-s")
		b.ReportMetric(hit.Seconds(), "hit-s")
		b.ReportMetric(float64((hit - base).Milliseconds()), "hit-overhead-ms")
		b.Logf("docker.build: cold %v (a 10 s RUN step, built and pushed), hit %v, without docker.build %v: the hit adds %v [target < 1 s]; hits %v, plain %v",
			cold.Round(10*time.Millisecond), hit.Round(10*time.Millisecond), base.Round(10*time.Millisecond),
			(hit - base).Round(time.Millisecond), seconds(hits), seconds(plains))
		w.server.stop(b, 30*time.Second)
	}
}

// envBenchPipeline is a one-job pipeline whose environment is the docker key given.
func envBenchPipeline(docker string) string {
	return "main:\n  push:\n    - name: env\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker:\n        " + docker +
		"\n      stages:\n        - name: only\n          script: echo ok\n"
}

// timedEnvRun pushes files, waits for the build's one pipeline to succeed and returns how
// long the server recorded it running, from its lease to its finish.
func (w *world) timedEnvRun(files map[string]string) time.Duration {
	w.t.Helper()
	n := w.pushFiles(files)
	w.waitBuildSuccess(n, 2*time.Minute)
	return firstPipelineDuration(w.t, w, n)
}
