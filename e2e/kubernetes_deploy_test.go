package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/testenv"
)

// TestKubernetesDeployManifests applies deploy/kubernetes/executor, as an operator would
// (kubectl apply -k, through an overlay that names the test's image and server), to the real
// test cluster: the agent starts as a Deployment in its own namespace with its own service
// account and the RBAC of the manifests (nothing of the test's admin credentials), registers
// with the server, and runs a pipeline in a pod of nimbus-jobs.
func TestKubernetesDeployManifests(t *testing.T) {
	w := newWorld(t)
	containerd := testenv.Require(t, testenv.EnvContainerd, "The Kubernetes test cluster's containerd")
	image := "localhost/nimbus-agent:e2e-" + randomHex(4)
	files, links := agentImageFiles(t)
	importImage(t, containerd, image, files, links)

	for _, ns := range []string{"nimbus", "nimbus-jobs"} {
		w.t.Cleanup(func() { _, _ = w.kubectlErr("delete", "namespace", ns, "--wait=false") })
	}
	w.kubectl("create", "namespace", "nimbus")
	w.kubectl("-n", "nimbus", "create", "secret", "generic", "nimbus-agent", "--from-literal=NIMBUS_AGENT_TOKEN=e2e-registration")
	base, err := filepath.Abs(filepath.Join("..", "deploy", "kubernetes", "executor"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	// kustomize takes a base by a relative path only.
	if base, err = filepath.Rel(overlay, base); err != nil {
		t.Fatal(err)
	}
	env := func(name, value string) string {
		return "      - op: add\n        path: /spec/template/spec/containers/0/env/-\n        value: {name: " + name + ", value: \"" + value + "\"}\n"
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + base + "]\npatches:\n" +
		"  - target: {kind: Deployment, name: nimbus-agent}\n    patch: |-\n" +
		"      - op: replace\n        path: /spec/template/spec/containers/0/image\n        value: " + image + "\n" +
		"      - op: add\n        path: /spec/template/spec/containers/0/imagePullPolicy\n        value: Never\n" +
		// The test cluster's pods have no network: the agent, and its pipelines, use the node's
		// (loopback: the server, and the apiserver, for which no Service routes here).
		"      - op: add\n        path: /spec/template/spec/hostNetwork\n        value: true\n" +
		"      - op: replace\n        path: /spec/template/spec/containers/0/env/0/value\n        value: " + w.base + "\n" +
		env("KUBERNETES_SERVICE_HOST", "127.0.0.1") + env("KUBERNETES_SERVICE_PORT", "6443") +
		env("NIMBUS_AGENT_KUBERNETES_HOST_NETWORK", "true") + env("NIMBUS_AGENT_KUBERNETES_PULL_POLICY", "Never") +
		env("NIMBUS_AGENT_DEFAULT_IMAGE", kubeImage) +
		// hostNetwork is a host namespace, which the manifests' baseline Pod Security level
		// refuses (as it should, anywhere pods have a network of their own).
		"  - target: {kind: Namespace, name: nimbus-jobs}\n    patch: |-\n" +
		"      - op: replace\n        path: /metadata/labels/pod-security.kubernetes.io~1enforce\n        value: privileged\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	w.kubectl("apply", "-k", overlay)
	w.waitUntil(90*time.Second, "the agent registered", func() bool {
		agents, err := w.alice.api.PlatformAgents(t.Context())
		w.alice.check("agents", err)
		for _, a := range agents {
			if a.Name == "kubernetes" && a.Executor == "kubernetes" && a.Online {
				return true
			}
		}
		return false
	})
	n := w.pushKube("echo hello from the deployed agent; test -f .cnb.yml && echo the clone is there")
	b := w.waitBuildSuccess(n, 2*time.Minute)
	if log := w.jobLogIn(b, "job", "only"); !strings.Contains(log, "hello from the deployed agent\nthe clone is there") {
		t.Fatalf("the job's log:\n%s", log)
	}
	w.waitUntil(30*time.Second, "the pod gone", func() bool { return w.leasePods("nimbus-jobs") == 0 })
}

// agentImageFiles is what the agent's image holds here (deploy/Dockerfile's agent target cannot
// be built without a registry): busybox, the static nimbus-agent and nimbus of bin/, and the
// host's git with its HTTP helper and the libraries they load.
func agentImageFiles(t *testing.T) (map[string]string, map[string]string) {
	t.Helper()
	links := map[string]string{}
	files := map[string]string{
		"/bin/busybox":                "/bin/busybox",
		"/usr/local/bin/nimbus-agent": bin("nimbus-agent"),
		"/usr/local/bin/nimbus":       bin("nimbus"),
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(git, "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	execPath := strings.TrimSpace(string(out))
	files["/usr/bin/git"] = git
	// The exec path as it is (git submodule is a script there, the HTTP transport a helper),
	// except its copies of git itself, which are as many MB each.
	self, err := os.ReadFile(git)
	if err != nil {
		t.Fatal(err)
	}
	progs := []string{git}
	entries, err := os.ReadDir(execPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(execPath, e.Name())
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if fi.Size() == int64(len(self)) {
			links[p] = "/usr/bin/git"
			continue
		}
		files[p] = p
		if head, _ := os.ReadFile(p); bytes.HasPrefix(head, []byte("\x7fELF")) {
			progs = append(progs, p)
		}
	}
	lib := regexp.MustCompile(`(/\S+) \(0x`)
	for _, p := range progs {
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", p, err)
		}
		for _, m := range lib.FindAllStringSubmatch(string(out), -1) {
			files[m[1]] = m[1]
		}
	}
	return files, links
}

// importImage writes a docker-archive of an image holding files (image path → host path, links
// followed), symbolic links (path → target) and busybox's applets, and imports it into the test
// cluster's containerd.
func importImage(t *testing.T, containerd, ref string, files, links map[string]string) {
	t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	addDir := func(d string) {
		var parts []string
		for d != "/" && d != "." && !dirs[d] {
			dirs[d] = true
			parts = append(parts, d)
			d = filepath.Dir(d)
		}
		for i := len(parts) - 1; i >= 0; i-- {
			mode := int64(0o755)
			if parts[i] == "/tmp" {
				mode = 0o1777
			}
			tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(parts[i], "/") + "/", Typeflag: tar.TypeDir, Mode: mode})
		}
	}
	addDir("/tmp")
	addDir("/var/lib")
	addFile := func(name string, data []byte, mode int64) {
		addDir(filepath.Dir(name))
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(name, "/"), Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	for name, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		addFile(name, data, 0o755)
	}
	for name, target := range links {
		addDir(filepath.Dir(name))
		tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(name, "/"), Typeflag: tar.TypeSymlink, Linkname: target})
	}
	addFile("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	addFile("/etc/group", []byte("root:x:0:\n"), 0o644)
	applets, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, "Entrypoint": []string{"nimbus-agent"}, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(sum[:])}},
	})
	manifest, _ := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{ref}, "Layers": []string{"layer.tar"}}})
	archive := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	aw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {"config.json", config}, {"layer.tar", layer.Bytes()}} {
		aw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.data))})
		aw.Write(e.data)
	}
	if err := errors.Join(aw.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ctr", "-a", containerd, "-n", "k8s.io", "images", "import", archive).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ctr", "-a", containerd, "-n", "k8s.io", "images", "rm", ref).Run() })
}
