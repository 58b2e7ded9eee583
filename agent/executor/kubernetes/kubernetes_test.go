package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/lifeline/lifelinetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// cli is the static nimbus CLI the pods get, built once by TestMain.
var cli string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "nimbus-cli-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if cli, err = lifelinetest.Build(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

// Images of the test cluster (e2e/k8s/cluster.sh imports them): busybox, under two names, so a
// pipeline can have two images.
const (
	kubeImageA = "localhost/busybox:local"
	kubeImageB = "localhost/tools:local"
)

// newKube is a Kubernetes executor on the test cluster, in a namespace of the test's own
// (deleted at its end), with hostNetwork off: these tests need no network.
func newKube(t *testing.T) *Executor { return newKubeB(t) }

func newKubeB(t testing.TB) *Executor {
	t.Helper()
	kubeconfig := testenv.Kubernetes(t)
	ctx := context.Background()
	ns := "nimbus-test-" + randHex(4)
	boot, err := New(ctx, Config{Kubeconfig: kubeconfig, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := boot.core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = boot.core.Namespaces().Delete(context.Background(), ns, deleteNow()) })
	k, err := New(ctx, Config{Kubeconfig: kubeconfig, Namespace: ns, AgentID: "agent-" + randHex(4),
		PullPolicy: corev1.PullNever, CLI: cli, StartTimeout: 30 * time.Second,
		Classes: map[string]Class{"cnb:arch:amd64:gpu": {GPUs: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// As the agent does at its start: no leftovers, and the anchor that owns its pods.
	if err := k.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	return k
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startKubePipeline starts a pipeline pod for a checkout holding hello.txt.
func startKubePipeline(t *testing.T, k *Executor, spec executor.PipelineSpec) executor.PipelineSpec {
	t.Helper()
	if spec.Checkout == "" {
		spec.Checkout = t.TempDir()
		if err := os.WriteFile(filepath.Join(spec.Checkout, "hello.txt"), []byte("from the clone\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if spec.Lease == "" {
		spec.Lease = "lease-" + randHex(6)
	}
	if len(spec.Images) == 0 {
		spec.Images = []executor.PipelineImage{{Name: kubeImageA}, {Name: kubeImageB}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := k.StartPipeline(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.EndPipeline(spec.Checkout) })
	return spec
}

func (k *Executor) runScript(t *testing.T, ctx context.Context, spec executor.PipelineSpec, image, script string, env map[string]string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	code, err := k.Run(ctx, executor.Step{Image: image, Script: script, Env: env, Checkout: spec.Checkout, Output: w})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return code, out.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// One pod runs the pipeline: the checkout is in it, steps of two images run in their own
// containers at the same time and see each other's files, exit codes come back, the secrets of
// a step are nowhere in the pod's spec, what the steps wrote comes back to the agent's checkout,
// and the end of the pipeline deletes the pod.
func TestKubernetesRunsAPipelineInOnePod(t *testing.T) {
	k := newKube(t)
	const secret = "s3cret-Kq81"
	spec := startKubePipeline(t, k, executor.PipelineSpec{Team: "ml", Pipeline: "42", CPUs: 0.2, MemoryBytes: 256 << 20, MaxDuration: time.Hour})
	ctx := context.Background()

	code, out := k.runScript(t, ctx, spec, kubeImageA, `cat hello.txt; pwd; echo "token=$TOKEN"; test -x /.nimbus/bin/nimbus`, map[string]string{"TOKEN": secret})
	if code != 0 || out != "from the clone\n/workspace\ntoken="+secret+"\n" {
		t.Fatalf("exit %d, output %q", code, out)
	}
	if code, out := k.runScript(t, ctx, spec, kubeImageB, "exit 3", nil); code != 3 {
		t.Fatalf("exit %d, want 3: %s", code, out)
	}

	// Two steps of a parallel stage, in two images: each waits for the other's file.
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			img := []string{kubeImageA, kubeImageB}[i]
			script := "echo " + pair[0] + " > " + pair[0] + ".txt; for i in $(seq 100); do [ -f " + pair[1] + ".txt ] && break; sleep 0.1; done; cat " + pair[1] + ".txt"
			c, o := k.runScript(t, ctx, spec, img, script, nil)
			results[i] = strings.TrimSpace(o) + "/" + string(rune('0'+c))
		}()
	}
	wg.Wait()
	if results[0] != "b/0" || results[1] != "a/0" {
		t.Fatalf("parallel steps saw %q: they did not run at the same time in one workspace", results)
	}

	pod, err := k.core.Pods(k.cfg.Namespace).Get(ctx, PodName(spec.Lease), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(pod)
	if bytes.Contains(raw, []byte(secret)) {
		t.Fatal("the secret is in the pod's spec")
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Fatal("the pod mounts a service account token")
	}
	if pod.Labels[KubeLabelTeam] != "ml" || pod.Labels[KubeLabelPipeline] != "42" || pod.Labels[KubeLabelLease] == "" {
		t.Fatalf("labels %v", pod.Labels)
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d == nil || *d != 3600 {
		t.Fatalf("activeDeadlineSeconds %v, want 3600", d)
	}
	if len(pod.Spec.Containers) != 2 {
		t.Fatalf("%d containers, want one per image", len(pod.Spec.Containers))
	}
	if own := pod.OwnerReferences; len(own) != 1 || own[0].Kind != "ConfigMap" || own[0].Name != AnchorName(k.cfg.AgentID) {
		t.Fatalf("owners %+v, want the agent's anchor", own)
	}

	if err := k.CopyOut(ctx, spec.Checkout); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(spec.Checkout, "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("a.txt in the agent's checkout: %q %v", b, err)
	}

	started := time.Now()
	k.EndPipeline(spec.Checkout)
	for {
		_, err := k.core.Pods(k.cfg.Namespace).Get(ctx, PodName(spec.Lease), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Since(started) > 10*time.Second {
			t.Fatalf("the pod is still there 10 s after the pipeline ended (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("pod gone %v after the pipeline ended", time.Since(started))
}

// A step's context ending (a cancel, a job's timeout) kills its processes in the pod, whatever
// they started, and the pod goes on for the next step.
func TestKubernetesStepEndsWithItsContext(t *testing.T) {
	k := newKube(t)
	spec := startKubePipeline(t, k, executor.PipelineSpec{Images: []executor.PipelineImage{{Name: kubeImageA}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := k.Run(ctx, executor.Step{Image: kubeImageA, Script: "sleep 301 & sleep 302; echo never", Checkout: spec.Checkout})
		done <- err
	}()
	count := func() string {
		_, out := k.runScript(t, context.Background(), spec, kubeImageA, "ps -o args | grep -c '^sleep 30[12]' || true", nil)
		return strings.TrimSpace(out)
	}
	for deadline := time.Now().Add(20 * time.Second); count() != "2"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the step did not start")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled step returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled step did not return")
	}
	for deadline := time.Now().Add(10 * time.Second); count() != "0"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the step's processes outlived its cancel: %s still run", count())
		}
	}
}

// GPU pipelines request the class's GPUs; one the cluster has no free GPU for waits, says why,
// and starts when a GPU is free. Cleanup deletes what an earlier run of the agent left.
func TestKubernetesGPUPipelinesWaitForAFreeGPU(t *testing.T) {
	k := newKube(t)
	gpu := executor.PipelineSpec{GPU: true, Tags: []string{"cnb:arch:amd64:gpu"}, Images: []executor.PipelineImage{{Name: kubeImageA}}}
	first := startKubePipeline(t, k, gpu)
	startKubePipeline(t, k, gpu)
	_, out := k.runScript(t, context.Background(), first, kubeImageA, "echo $NVIDIA_VISIBLE_DEVICES", nil)
	if !strings.HasPrefix(out, "GPU-fake-") {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES=%q: the device plugin gave the pod no GPU", out)
	}

	third := gpu
	third.Checkout, third.Lease = t.TempDir(), "lease-"+randHex(6)
	var mu sync.Mutex
	var reasons []string
	third.Waiting = func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() }
	started := make(chan error, 1)
	go func() { started <- k.StartPipeline(context.Background(), third) }()
	t.Cleanup(func() { k.EndPipeline(third.Checkout) })
	waitingFor := func() string {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range reasons {
			if r != "" {
				return r
			}
		}
		return ""
	}
	for deadline := time.Now().Add(30 * time.Second); waitingFor() == ""; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the third GPU pipeline did not say it waits")
		}
	}
	if r := waitingFor(); !strings.Contains(r, "waiting for a node with a free nvidia.com/gpu") {
		t.Fatalf("waiting reason %q", r)
	}
	select {
	case err := <-started:
		t.Fatalf("the third GPU pipeline started (%v) while both GPUs were held", err)
	case <-time.After(time.Second):
	}
	k.EndPipeline(first.Checkout)
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the third GPU pipeline did not start after a GPU was freed")
	}
	mu.Lock()
	last := reasons[len(reasons)-1]
	mu.Unlock()
	if last != "" {
		t.Fatalf("the waiting reason was not cleared: %q", last)
	}

	// A restarted agent deletes its pods.
	if err := k.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		l, err := k.core.Pods(k.cfg.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: KubeLabelAgent + "=" + k.cfg.AgentID})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods left after Cleanup", len(l.Items))
		}
	}
}

func TestKubernetesNames(t *testing.T) {
	for _, c := range []struct{ in, pod, label string }{
		{"01J9ZQ-Lease", "nimbus-01j9zq-lease", "01J9ZQ-Lease"},
		{"a/b c", "nimbus-a-b-c", "a_b_c"},
		{"-x-", "nimbus--x", "x"},
		{strings.Repeat("z", 80), "nimbus-" + strings.Repeat("z", 56), strings.Repeat("z", 63)},
	} {
		if got := PodName(c.in); got != c.pod {
			t.Errorf("PodName(%q) = %q, want %q", c.in, got, c.pod)
		}
		if got := labelValue(c.in); got != c.label {
			t.Errorf("labelValue(%q) = %q, want %q", c.in, got, c.label)
		}
	}
}

// Deleting an agent's anchor has Kubernetes' garbage collector delete its pods: nothing of a
// retired agent runs on.
func TestKubernetesPodsGoWithTheirAnchor(t *testing.T) {
	k := newKube(t)
	spec := startKubePipeline(t, k, executor.PipelineSpec{Images: []executor.PipelineImage{{Name: kubeImageA}}})
	ctx := context.Background()
	if err := k.core.ConfigMaps(k.cfg.Namespace).Delete(ctx, AnchorName(k.cfg.AgentID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := k.core.Pods(k.cfg.Namespace).Get(ctx, PodName(spec.Lease), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod outlived its anchor by 60 s (%v)", err)
		}
	}
}

func TestRegistryOf(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.example.com/ml/train:1": "registry.example.com",
		"localhost:5000/x":                "localhost:5000",
		"localhost/busybox:local":         "localhost",
		"pytorch/pytorch:2":               "https://index.docker.io/v1/",
		"busybox":                         "https://index.docker.io/v1/",
	} {
		if got := registryOf(ref); got != want {
			t.Errorf("registryOf(%q) = %q, want %q", ref, got, want)
		}
	}
}

// An image with registry credentials gets them through a pull secret of the pod's own: the pod
// names it, its values are nowhere in the pod, and it goes with the pod. (The pull itself is not
// tried: the test cluster has no registry it pulls from.)
func TestKubernetesPullSecretGoesWithThePod(t *testing.T) {
	k := newKube(t)
	const password = "pull-Passw0rd-k8s"
	spec := startKubePipeline(t, k, executor.PipelineSpec{Images: []executor.PipelineImage{
		{Name: kubeImageA, Auth: &executor.ImageAuth{User: "robot", Password: password}}}})
	ctx := context.Background()
	pod, err := k.core.Pods(k.cfg.Namespace).Get(ctx, PodName(spec.Lease), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(pod)
	if bytes.Contains(raw, []byte(password)) || len(pod.Spec.ImagePullSecrets) != 1 {
		t.Fatalf("pull secrets %+v (or the password in the pod)", pod.Spec.ImagePullSecrets)
	}
	name := pod.Spec.ImagePullSecrets[0].Name
	sec, err := k.core.Secrets(k.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Auths map[string]struct{ Username, Password string } `json:"auths"`
	}
	if err := json.Unmarshal(sec.Data[corev1.DockerConfigJsonKey], &cfg); err != nil || cfg.Auths["localhost"].Password != password ||
		sec.Type != corev1.SecretTypeDockerConfigJson {
		t.Fatalf("pull secret %s: %+v %v", name, cfg, err)
	}
	k.EndPipeline(spec.Checkout)
	if _, err := k.core.Secrets(k.cfg.Namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pull secret outlived its pod: %v", err)
	}
}
