package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// The test cluster's images (e2e/k8s/cluster.sh imports them): busybox under two names.
const (
	kubeImage      = "localhost/busybox:local"
	kubeToolsImage = "localhost/tools:local"
)

// kubeAgent starts a nimbus-agent with the Kubernetes executor on the test cluster, its pods in
// a namespace of the test's own, in the node's network (the test cluster's pods have no other
// way to the server on loopback). It returns the agent, its work dir and the namespace.
func (w *world) kubeAgent(extraEnv ...string) (*proc, string, string) {
	w.t.Helper()
	ns := "e2e-" + randomHex(4)
	w.kubectl("create", "namespace", ns)
	w.t.Cleanup(func() { _, _ = w.kubectlErr("delete", "namespace", ns, "--wait=false") })
	dir := w.t.TempDir()
	w.t.Cleanup(func() { releaseAgentDir(w.t, dir) })
	return w.kubeAgentIn(dir, ns, extraEnv...), dir, ns
}

// kubeAgentIn starts a Kubernetes agent in work dir dir with its pods in namespace ns.
func (w *world) kubeAgentIn(dir, ns string, extraEnv ...string) *proc {
	w.t.Helper()
	env := append([]string{"NIMBUS_AGENT_EXECUTOR=kubernetes", "NIMBUS_AGENT_KUBECONFIG=" + testenv.Kubernetes(w.t),
		"NIMBUS_AGENT_KUBERNETES_NAMESPACE=" + ns, "NIMBUS_AGENT_KUBERNETES_HOST_NETWORK=true",
		"NIMBUS_AGENT_KUBERNETES_PULL_POLICY=Never", "NIMBUS_AGENT_DEFAULT_IMAGE=" + kubeImage,
		"NIMBUS_AGENT_NIMBUS_CLI=" + bin("nimbus")}, extraEnv...)
	p, _ := w.agent(dir, env...)
	return p
}

func (w *world) kubectl(args ...string) string {
	w.t.Helper()
	out, err := w.kubectlErr(args...)
	if err != nil {
		w.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (w *world) kubectlErr(args ...string) (string, error) {
	cmd := exec.Command(testenv.Kubectl(w.t), append([]string{"--kubeconfig", testenv.Kubernetes(w.t)}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// kubeCI: a parallel stage of two jobs in two images that each wait for the other's file in the
// shared workspace, then a job that reads both, prints a secret and sets an output, then one
// that gets the export. The last stage holds the pipeline a moment so the test can read its pod.
const kubeCI = `main:
  push:
    - name: on-k8s
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: together
          jobs:
            a:
              image: IMAGE
              script: echo from-a > a.txt; for i in $(seq 200); do [ -f b.txt ] && break; sleep 0.1; done; echo "a sees $(cat b.txt)"
            b:
              image: TOOLS
              script: echo from-b > b.txt; for i in $(seq 200); do [ -f a.txt ] && break; sleep 0.1; done; echo "b sees $(cat a.txt)"
        - name: report
          script: |
            cat a.txt b.txt README.md
            echo "secret is $TOKEN"
            echo "##[set-output answer=42]"
          exports: { answer: ANSWER }
        - name: use
          script: echo "answer=$ANSWER"; sleep 4
`

// TestKubernetesExecutorRunsAPipeline runs a pipeline through a real server, PostgreSQL and
// Redis on a nimbus-agent with --executor kubernetes: its jobs run in one pod on the real
// cluster, a parallel stage's jobs at the same time in their own images sharing the
// workspace (and the clone), exports reach later jobs, the secret is masked in the log and is
// nowhere in the pod's spec, and the pod is gone when the pipeline ends.
func TestKubernetesExecutorRunsAPipeline(t *testing.T) {
	w := newWorld(t)
	_, _, ns := w.kubeAgent()
	const secret = "k8s-Secret-Value-7731"
	w.alice.setSecret("ml", "trainer", "TOKEN", secret)
	ci := strings.NewReplacer("IMAGE", kubeImage, "TOOLS", kubeToolsImage).Replace(kubeCI)
	n := w.pushFiles(map[string]string{".cnb.yml": ci, "README.md": "the clone is in the pod\n"})

	// While the last job runs, the pod is there: one container per image, no secret in its spec.
	var podYAML string
	w.waitUntil(2*time.Minute, "the pipeline's pod", func() bool {
		out, err := w.kubectlErr("-n", ns, "get", "pods", "-l", "nimbus.dev/pipeline", "-o", "yaml")
		if err == nil && strings.Contains(out, "nimbus.dev/lease") {
			podYAML = out
			return true
		}
		return false
	})
	if strings.Contains(podYAML, secret) {
		t.Fatal("the secret is in the pod's spec")
	}
	for _, want := range []string{kubeImage, kubeToolsImage, "automountServiceAccountToken: false", "nimbus.dev/team: ml"} {
		if !strings.Contains(podYAML, want) {
			t.Fatalf("the pod lacks %q:\n%s", want, podYAML)
		}
	}

	b := w.waitBuildSuccess(n, 3*time.Minute)
	for job, want := range map[string][]string{
		"a":      {"a sees from-b"},
		"b":      {"b sees from-a"},
		"report": {"from-a\nfrom-b\nthe clone is in the pod", "secret is ***"},
		"use":    {"answer=42"},
	} {
		log := w.jobLogIn(b, "on-k8s", job)
		for _, s := range want {
			if !strings.Contains(log, s) {
				t.Fatalf("job %s's log lacks %q:\n%s", job, s, log)
			}
		}
		if strings.Contains(log, secret) {
			t.Fatalf("job %s's log shows the secret", job)
		}
	}
	w.waitUntil(30*time.Second, "the pod gone", func() bool {
		out, err := w.kubectlErr("-n", ns, "get", "pods", "-o", "name")
		return err == nil && strings.TrimSpace(out) == ""
	})
}

// kubeClasses is a classes file for the test cluster: its node has 2 cores, so pipelines ask
// for a little CPU (they may use their runner.cpus) and several fit at once.
func (w *world) kubeClasses() string {
	w.t.Helper()
	p := filepath.Join(w.t.TempDir(), "classes.json")
	if err := os.WriteFile(p, []byte(`{"*": {"cpuRequest": "50m"}}`), 0o644); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// pushKube pushes a one-job pipeline running script in the cluster's image.
func (w *world) pushKube(script string) int64 {
	cnb := "main:\n  push:\n    - name: job\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + kubeImage +
		" }\n      stages:\n        - name: only\n          script: " + script + "\n"
	return w.pushFiles(map[string]string{".cnb.yml": cnb})
}

// waitKubeFirstLine waits until the build's first job has printed first-line: its code runs.
func (w *world) waitKubeFirstLine(n int64) {
	w.t.Helper()
	w.waitUntil(60*time.Second, "the job's first line", func() bool {
		b := w.build(n)
		return len(b.Pipelines) > 0 && len(b.Pipelines[0].Stages) > 0 && len(b.Pipelines[0].Stages[0].Jobs) > 0 &&
			strings.Contains(w.jobLog(b.Pipelines[0].Stages[0].Jobs[0].ID), "first-line")
	})
}

// leasePods counts the pods of the namespace that carry a lease.
// It asks the API server itself (a kubectl process costs a few hundred ms on a loaded host,
// which a latency measured with it would count).
func (w *world) leasePods(ns string) int {
	w.t.Helper()
	if w.kube == nil {
		rc, err := clientcmd.BuildConfigFromFlags("", testenv.Kubernetes(w.t))
		if err != nil {
			w.t.Fatal(err)
		}
		if w.kube, err = corev1client.NewForConfig(rc); err != nil {
			w.t.Fatal(err)
		}
	}
	l, err := w.kube.Pods(ns).List(w.t.Context(), metav1.ListOptions{LabelSelector: "nimbus.dev/lease"})
	if err != nil {
		w.t.Fatalf("list pods: %v", err)
	}
	return len(l.Items)
}

// TestKubernetesCancelDeletesThePod cancels a running pipeline ten times: its pod is gone within
// 2 s at the 95th percentile (issue 36), and the build ends cancelled.
//
// Not parallel: it measures a latency, and beside four other tests on CI's 2 cores one run in
// ten took 2.8 s (p50 0.42 s) from CPU starvation of the apiserver and the agent, not from what
// the code does; alone it runs before the parallel tests start.
func TestKubernetesCancelDeletesThePod(t *testing.T) {
	w := newWorld(t)
	_, _, ns := w.kubeAgent("NIMBUS_AGENT_KUBERNETES_CLASSES=" + w.kubeClasses())
	var took []time.Duration
	for range 10 {
		n := w.pushKube("echo first-line; sleep 300")
		w.waitKubeFirstLine(n)
		begin := time.Now()
		w.api.cancelBuild("ml", "trainer", n)
		for w.leasePods(ns) != 0 {
			if time.Since(begin) > 15*time.Second {
				t.Fatal("the pod is still there 15 s after the cancel")
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = append(took, time.Since(begin))
		b := w.waitFor(n, 15*time.Second, "cancelled", func(b apiclient.Build) bool { return b.Status == "cancelled" })
		if b.Pipelines[0].Status != "cancelled" {
			t.Fatalf("pipeline %+v", b.Pipelines[0])
		}
	}
	p50, p95 := percentile(took, 50), percentile(took, 95)
	t.Logf("cancel to pod gone over %d runs: p50 %v, p95 %v", len(took), p50.Round(time.Millisecond), p95.Round(time.Millisecond))
	if p95 > 2*time.Second {
		t.Fatalf("cancel to pod gone: p95 %v, target < 2 s (%v)", p95, took)
	}
}

// TestKubernetesAgentKilledLeavesNoPod kills the agent (SIGKILL) while its pipeline's pod runs
// and starts it again in the same work dir: the restarted agent deletes the pod, so nothing
// runs on without its lease, and the server fails the pipeline (agent_lost).
func TestKubernetesAgentKilledLeavesNoPod(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "NIMBUS_LEASE_TTL=6s")
	classes := "NIMBUS_AGENT_KUBERNETES_CLASSES=" + w.kubeClasses()
	ag, dir, ns := w.kubeAgent(classes)
	n := w.pushKube("echo first-line; sleep 300")
	w.waitKubeFirstLine(n)
	w.killAgent(ag)
	if got := w.leasePods(ns); got != 1 {
		t.Fatalf("%d pods right after the kill, want the 1 that runs on", got)
	}
	restarted := time.Now()
	w.kubeAgentIn(dir, ns, classes)
	w.waitUntil(20*time.Second, "the pod deleted by the restarted agent", func() bool { return w.leasePods(ns) == 0 })
	t.Logf("the restarted agent deleted its pod %v after its start", time.Since(restarted).Round(time.Millisecond))
	b := w.waitFor(n, 60*time.Second, "the pipeline's end", func(b apiclient.Build) bool { return b.Status != "running" && b.Status != "queued" })
	if b.Pipelines[0].Status != "failed" {
		t.Fatalf("pipeline %+v, want failed (agent_lost)", b.Pipelines[0])
	}
}

// TestKubernetesGPUPipelinesWaitForTheCluster: an agent that keeps up to 3 GPU pipelines on a
// cluster with 2 (fake) GPUs takes 3: two run, each pod holding nvidia.com/gpu: 1 and its job
// seeing the device the plugin gave it; the third's pod waits Pending for a free GPU, then runs
// on the one freed. Its bill starts when its pod runs, not at its lease: the server's start of
// the third is after the first end, and it is billed for the seconds it ran.
func TestKubernetesGPUPipelinesWaitForTheCluster(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.alice.grantCredits("ml", "500", "gpu money")
	classes := filepath.Join(t.TempDir(), "classes.json")
	if err := os.WriteFile(classes, []byte(`{"*": {"cpuRequest": "50m", "memoryRequest": "64Mi"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, ns := w.kubeAgent("NIMBUS_AGENT_KUBERNETES_CLASSES="+classes, "NIMBUS_AGENT_GPUS=cluster:3:L40", "NIMBUS_AGENT_CPUS=48")
	var cnb strings.Builder
	cnb.WriteString("main:\n  push:\n")
	for i := range 3 {
		fmt.Fprintf(&cnb, "    - name: g%d\n      runner: { tags: cnb:arch:amd64:gpu:L40 }\n      docker: { image: %s }\n"+
			"      stages:\n        - name: train\n          script: echo gpu=$NVIDIA_VISIBLE_DEVICES; sleep 8\n", i, kubeImage)
	}
	n := w.pushFiles(map[string]string{".cnb.yml": cnb.String()})

	// Two pods run; the third waits for a GPU, and the scheduler says so.
	w.waitUntil(90*time.Second, "two GPU pods running and one Pending", func() bool {
		out, err := w.kubectlErr("-n", ns, "get", "pods", "-l", "nimbus.dev/lease", "-o",
			`jsonpath={range .items[*]}{.status.phase}{"|"}{.status.conditions[?(@.type=="PodScheduled")].message}{"\n"}{end}`)
		if err != nil {
			return false
		}
		running, pending := 0, 0
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			switch {
			case strings.HasPrefix(l, "Running|"):
				running++
			case strings.HasPrefix(l, "Pending|") && strings.Contains(l, "Insufficient nvidia.com/gpu"):
				pending++
			}
		}
		return running == 2 && pending == 1
	})
	// The pipeline says so too: running, waiting, its blocker the agent's reason.
	w.waitFor(n, 30*time.Second, "a pipeline waiting for a GPU", func(b apiclient.Build) bool {
		for _, p := range b.Pipelines {
			if p.Status == "running" && p.Waiting && len(p.Blockers) == 1 && p.Blockers[0].Code == "capacity" &&
				strings.Contains(p.Blockers[0].Message, "waiting for a node with a free nvidia.com/gpu") {
				return true
			}
		}
		return false
	})
	podYAML := w.kubectl("-n", ns, "get", "pods", "-l", "nimbus.dev/lease", "-o", "yaml")
	// Each pod's first container limits and requests nvidia.com/gpu: 1.
	if strings.Count(podYAML, "nvidia.com/gpu: \"1\"") < 6 {
		t.Fatalf("the three pods do not each hold nvidia.com/gpu: 1:\n%s", podYAML)
	}

	b := w.waitBuildSuccess(n, 3*time.Minute)
	full := w.build(n)
	for _, p := range full.Pipelines {
		if p.Waiting || len(p.Blockers) > 0 {
			t.Fatalf("pipeline %s still says it waits: %+v", p.Name, p.Blockers)
		}
	}
	type run struct {
		name              string
		started, finished time.Time
		coreSeconds       int64
	}
	var runs []run
	for _, p := range full.Pipelines {
		if p.StartedAt == nil || p.FinishedAt == nil {
			t.Fatalf("pipeline %+v", p)
		}
		log := w.jobLogIn(b, p.Name, "train")
		if !strings.Contains(log, "gpu=GPU-fake-") {
			t.Fatalf("pipeline %s's job saw no device of the plugin:\n%s", p.Name, log)
		}
		runs = append(runs, run{p.Name, *p.StartedAt, *p.FinishedAt, p.CoreSeconds})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].started.Before(runs[j].started) })
	third, firstEnd := runs[2], runs[0].finished
	if runs[1].finished.Before(firstEnd) {
		firstEnd = runs[1].finished
	}
	if third.started.Before(firstEnd.Add(-time.Second)) {
		t.Fatalf("the third GPU pipeline counts from %v, before a GPU was freed at %v: its wait is billed", third.started, firstEnd)
	}
	ran := third.finished.Sub(third.started)
	if limit := int64(16 * (ran.Seconds() + 2)); third.coreSeconds > limit {
		t.Fatalf("the third pipeline billed %d core-seconds for %v of running (at most %d)", third.coreSeconds, ran, limit)
	}
	t.Logf("third GPU pipeline: waited until %v after the first start, ran %v, billed %d core-seconds",
		third.started.Sub(runs[0].started).Round(time.Millisecond), ran.Round(time.Millisecond), third.coreSeconds)
}

// TestKubernetesRunsTheBriefsExample: the brief's two-pipeline example (examples/train-cpu-gpu:
// train-cpu and train-gpu handing data and the checkpoint over with cnb:resolve / cnb:await)
// runs green on one --executor kubernetes agent on the real cluster with 2 fake GPUs. The GPU
// pipeline's pod holds nvidia.com/gpu: 1 and its training sees the plugin's device; the packaged
// model lands in the registry as the commit's version, and a deploy token downloads it.
func TestKubernetesRunsTheBriefsExample(t *testing.T) {
	t.Parallel()
	// The example names no image: its pipelines run the platform's default build image.
	w := newWorld(t, "NIMBUS_DEFAULT_BUILD_IMAGE="+kubeImage)
	w.alice.grantCredits("ml", "100", "gpu money")
	classes := filepath.Join(t.TempDir(), "classes.json")
	if err := os.WriteFile(classes, []byte(`{"*": {"cpuRequest": "50m", "memoryRequest": "64Mi"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, ns := w.kubeAgent("NIMBUS_AGENT_KUBERNETES_CLASSES="+classes, "NIMBUS_AGENT_GPUS=cluster:2:L40", "NIMBUS_AGENT_CPUS=32",
		"NIMBUS_AGENT_TAGS=cnb:arch:amd64")
	files := map[string]string{}
	root := filepath.Join("..", "examples", "train-cpu-gpu")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[rel] = string(raw)
		return err
	})
	if err != nil || files[".cnb.yml"] == "" {
		t.Fatalf("the example: %v (%d files)", err, len(files))
	}
	n := w.pushFiles(files)

	// While the GPU pipeline runs, its pod holds one GPU.
	var gpuPod string
	w.waitUntil(2*time.Minute, "the GPU pipeline's pod", func() bool {
		out, err := w.kubectlErr("-n", ns, "get", "pods", "-l", "nimbus.dev/lease", "-o",
			`jsonpath={range .items[*]}{.spec.containers[0].resources.limits.nvidia\.com/gpu}{"|"}{.status.phase}{"\n"}{end}`)
		if err == nil && strings.Contains(out, "1|Running") {
			gpuPod = out
			return true
		}
		return false
	})
	b := w.waitBuildSuccess(n, 4*time.Minute)
	if log := w.jobLogIn(b, "train-gpu", "train"); !regexp.MustCompile(`train: GPU GPU-fake-\d`).MatchString(log) {
		t.Errorf("train did not get the plugin's GPU (pods %q):\n%s", gpuPod, log)
	}
	if log := w.jobLogIn(b, "train-cpu", "package"); !strings.Contains(log, "package: model sha256") {
		t.Errorf("package:\n%s", log)
	}
	model := w.alice.artifactVersion("ml", "trainer", "model", "latest")
	if model.Version != b.Commit || model.Build == nil || model.Build.Number != n || len(model.Files) != 1 {
		t.Fatalf("the packaged model: %+v, want version %s of build #%d", model, b.Commit, n)
	}
	dt := w.alice.deployToken("ml", "trainer", "inference")
	if got := download(t, w.base+"/api/v1/repos/ml/trainer/artifacts/model/"+b.Commit+"/model.tgz", dt.Token); got != model.Files[0].Digest {
		t.Errorf("the deploy token downloaded %s, the registry holds %s", got, model.Files[0].Digest)
	}
	w.waitUntil(30*time.Second, "the pods gone", func() bool { return w.leasePods(ns) == 0 })
}
