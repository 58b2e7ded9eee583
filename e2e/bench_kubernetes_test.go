package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// BenchmarkKubernetesExecutor prints what the Kubernetes executor costs against the Docker one,
// on this machine's real single-node cluster (issue 36):
//
//   - lease → first log line on a warm image: from the build showing its pipeline running (its
//     lease) to the job's first line in the log API, p50 over 10 pushes on each executor, one
//     after the other in this run, and the ratio of the two;
//   - 50 pipelines through the executor (one build, the agent taking 10 at a time): wall time,
//     throughput, and the agent process's CPU time and peak RSS.
//
// Alone: make build && NIMBUS_E2E_BIN=$PWD/bin e2e/testenv.sh go test -run '^$' -bench KubernetesExecutor ./e2e
func BenchmarkKubernetesExecutor(b *testing.B) {
	for range b.N {
		w := newWorld(b)
		docker, _ := w.agent("")
		dockerP50 := percentile(w.leaseToFirstLine(b, w.image, 10), 50)
		docker.stop(b, 30*time.Second)

		classes := filepath.Join(b.TempDir(), "classes.json")
		if err := os.WriteFile(classes, []byte(`{"*": {"cpuRequest": "20m", "memoryRequest": "32Mi"}}`), 0o644); err != nil {
			b.Fatal(err)
		}
		kube, _, _ := w.kubeAgent("NIMBUS_AGENT_KUBERNETES_CLASSES="+classes, "NIMBUS_AGENT_CPUS=10")
		kubeP50 := percentile(w.leaseToFirstLine(b, kubeImage, 10), 50)
		ratio := float64(kubeP50) / float64(dockerP50)
		b.ReportMetric(float64(dockerP50.Milliseconds()), "docker-first-line-p50-ms")
		b.ReportMetric(float64(kubeP50.Milliseconds()), "k8s-first-line-p50-ms")
		b.ReportMetric(ratio, "k8s/docker")
		b.Logf("lease → first log line, p50 over 10: Docker %v, Kubernetes %v (%.1f×)",
			dockerP50.Round(time.Millisecond), kubeP50.Round(time.Millisecond), ratio)

		cpu0 := procCPU(b, kube.cmd.Process.Pid)
		var cnb strings.Builder
		cnb.WriteString("main:\n  push:\n")
		for i := range 50 {
			fmt.Fprintf(&cnb, "    - name: p%d\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: %s }\n"+
				"      stages:\n        - name: s\n          script: echo %d\n", i, kubeImage, i)
		}
		start := time.Now()
		n := w.pushFiles(map[string]string{".cnb.yml": cnb.String()})
		bd := w.waitFor(n, 10*time.Minute, "the end", func(b apiclient.Build) bool { return b.Status == "success" || b.Status == "failed" })
		took := time.Since(start)
		if bd.Status != "success" || bd.PipelineCount != 50 {
			b.Fatalf("build #%d: %s, %d pipelines", n, bd.Status, bd.PipelineCount)
		}
		cpu := procCPU(b, kube.cmd.Process.Pid) - cpu0
		rss := procPeakRSS(b, kube.cmd.Process.Pid)
		b.ReportMetric(50/took.Minutes(), "pipelines/min")
		b.ReportMetric(cpu.Seconds(), "agent-cpu-s")
		b.ReportMetric(float64(rss>>20), "agent-peak-rss-MiB")
		b.Logf("50 pipelines (10 at a time): %v, %.0f pipelines/min; the agent used %v of CPU (%.0f ms a pipeline), peak RSS %d MiB",
			took.Round(time.Millisecond), 50/took.Minutes(), cpu.Round(time.Millisecond), float64(cpu.Milliseconds())/50, rss>>20)
	}
}

// leaseToFirstLine pushes runs one-job pipelines in image, one after the other, and returns the
// time from each build showing its pipeline running (leased) to its first line in the log API.
func (w *world) leaseToFirstLine(tb testing.TB, image string, runs int) []time.Duration {
	var out []time.Duration
	for i := range runs {
		cnb := "main:\n  push:\n    - name: job\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + image +
			" }\n      stages:\n        - name: only\n          script: echo first-line-" + strconv.Itoa(i) + "\n"
		n := w.pushFiles(map[string]string{".cnb.yml": cnb})
		var leased time.Time
		var job int64
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				tb.Fatalf("build #%d: no first line within 60 s", n)
			}
			var b apiclient.Build
			if w.api.do("GET", "/api/v1/repos/ml/trainer/builds/"+itoa(n), nil, &b) != 200 || len(b.Pipelines) == 0 {
				continue
			}
			if leased.IsZero() && b.Pipelines[0].Status != "queued" {
				leased = time.Now()
			}
			if job == 0 && len(b.Pipelines[0].Stages) > 0 && len(b.Pipelines[0].Stages[0].Jobs) > 0 {
				job = b.Pipelines[0].Stages[0].Jobs[0].ID
			}
			if !leased.IsZero() && job != 0 && strings.Contains(w.jobLog(job), "first-line-"+strconv.Itoa(i)) {
				out = append(out, time.Since(leased))
				break
			}
		}
		w.waitBuildSuccess(n, time.Minute)
	}
	return out
}

// procCPU is the user and system CPU time the process has used.
func procCPU(tb testing.TB, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is 3rd, utime 14th, stime 15th.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// procPeakRSS is the process's peak resident set (VmHWM), in bytes.
func procPeakRSS(tb testing.TB, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	tb.Fatal("no VmHWM")
	return 0
}
