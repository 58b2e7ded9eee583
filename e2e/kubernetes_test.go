package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/testenv"
)

// The test cluster's images (e2e/k8s/cluster.sh imports them): busybox under two names.
const (
	kubeImage      = "localhost/busybox:local"
	kubeToolsImage = "localhost/tools:local"
)

// kubeAgent starts a nimbus-agent with the Kubernetes executor on the test cluster, its pods in
// a namespace of the test's own, in the node's network (the test cluster's pods have no other
// way to the server on loopback). It returns the agent and the namespace.
func (w *world) kubeAgent(extraEnv ...string) (*proc, string) {
	w.t.Helper()
	kubeconfig := testenv.Kubernetes(w.t)
	ns := "e2e-" + randomHex(4)
	w.kubectl("create", "namespace", ns)
	w.t.Cleanup(func() { _, _ = w.kubectlErr("delete", "namespace", ns, "--wait=false") })
	env := append([]string{"NIMBUS_AGENT_EXECUTOR=kubernetes", "NIMBUS_AGENT_KUBECONFIG=" + kubeconfig,
		"NIMBUS_AGENT_KUBERNETES_NAMESPACE=" + ns, "NIMBUS_AGENT_KUBERNETES_HOST_NETWORK=true",
		"NIMBUS_AGENT_KUBERNETES_PULL_POLICY=Never", "NIMBUS_AGENT_DEFAULT_IMAGE=" + kubeImage,
		"NIMBUS_AGENT_NIMBUS_CLI=" + bin("nimbus")}, extraEnv...)
	p, _ := w.agent("", env...)
	return p, ns
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
	_, ns := w.kubeAgent()
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
