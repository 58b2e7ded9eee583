package e2e

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// pushFiles writes files (path → content) into the work tree, commits and pushes them to main,
// and returns the new build's number.
func (w *world) pushFiles(files map[string]string) int64 {
	w.t.Helper()
	w.pushes++
	w.pushFilesTo("main", files)
	return int64(w.pushes)
}

// pushFilesTo writes files into the work tree, commits them on the branch checked out and
// pushes it as branch (which starts no build unless the .cnb.yml has pipelines for it).
func (w *world) pushFilesTo(branch string, files map[string]string) {
	w.t.Helper()
	for name, content := range files {
		p := filepath.Join(w.work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
	gitRun(w.t, w.work, "add", ".")
	gitRun(w.t, w.work, "commit", "-q", "--allow-empty", "-m", "run")
	u, _ := url.Parse(w.base + "/ml/trainer.git")
	u.User = url.UserPassword("alice", w.token)
	gitRun(w.t, w.work, "push", "-q", u.String(), "HEAD:refs/heads/"+branch)
}

// registryHost is Nimbus's registry as CNB_DOCKER_REGISTRY names it.
func (w *world) registryHost() string { return strings.TrimPrefix(w.base, "http://") }

// pushImage pushes the test engine's image into Nimbus's registry as ref (alice, with a
// registry:write token) and returns the docker environment used.
func (w *world) pushImage(t *testing.T, image, ref string) {
	t.Helper()
	cfg := t.TempDir()
	env := []string{"DOCKER_HOST=" + w.docker, "DOCKER_CONFIG=" + cfg, "HOME=" + cfg}
	tok := w.alice.newToken("push-"+randomName(), "registry:write", "registry:read")
	run(t, env, "docker", "tag", image, ref)
	t.Cleanup(func() { exec.Command("docker", "-H", w.docker, "rmi", "-f", ref).Run() })
	login(t, env, w.registryHost(), "alice", tok)
	run(t, env, "docker", "push", ref)
}

func login(t *testing.T, env []string, host, user, password string) {
	t.Helper()
	cmd := exec.Command("docker", "login", "-u", user, "--password-stdin", host)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker login: %v\n%s", err, out)
	}
}

// serviceDir is where the agent with work dir dir keeps its docker services.
func serviceDir(t *testing.T, dir string) string {
	id, err := os.ReadFile(filepath.Join(dir, "agent-id"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join("/var/lib/nimbus-agent/services", strings.TrimSpace(string(id)))
}

// The journey: a busybox job builds an image FROM one in Nimbus's registry with the
// pipeline's own engine, runs it with a workspace bind mount whose output the next job reads,
// and pushes the result with no login; a deploy token then pulls it. Two such pipelines at
// once see only their own; a privileged container cannot read the host; nothing is left.
func TestDockerServiceInPipelines(t *testing.T) {
	testenv.DindUser(t)
	w := newWorld(t)
	ag, dir := w.agent("")
	reg := w.registryHost()
	base := reg + "/ml/trainer/base:1"
	w.pushImage(t, w.image, base)

	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("do-not-leak\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cnb := `main:
  push:
    - name: build
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      services: [docker]
      docker: { image: ` + w.image + ` }
      stages:
        - name: build
          script: docker build -t app:t .
        - name: run
          script: docker run --rm -v $(pwd)/out:/out app:t sh -c 'cat /built.txt > /out/result'
        - name: read
          script: test "$(cat out/result)" = built-in-the-pipeline && echo "read back"
        - name: push
          script: docker tag app:t ${CNB_DOCKER_REGISTRY}/${CNB_REPO_SLUG_LOWERCASE}:t && docker push ${CNB_DOCKER_REGISTRY}/${CNB_REPO_SLUG_LOWERCASE}:t
        - name: escape
          script: |
            docker run --rm --privileged -v /:/host ` + base + ` sh -c 'cat /host` + secret + `; cat /host/etc/shadow; touch /host/root/nimbus-escaped' 2>&1 | tee escape.txt
            ! grep -q do-not-leak escape.txt && ! grep -q '^root:' escape.txt
            grep -q 'Permission denied' escape.txt && echo "no escape"
    - name: alone-a
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      services: [docker]
      docker: { image: ` + w.image + ` }
      stages:
        - name: mine
          script: docker pull ` + base + ` >/dev/null && docker tag ` + base + ` own-a:1 && docker run -d --name box-a ` + base + ` sleep 60 && sleep 4 && docker ps -a --format '{{.Names}}' > ps.txt && docker images --format '{{.Repository}}' > images.txt && cat ps.txt images.txt && ! grep -q box-b ps.txt && ! grep -q own-b images.txt
    - name: alone-b
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      services: [docker]
      docker: { image: ` + w.image + ` }
      stages:
        - name: mine
          script: docker pull ` + base + ` >/dev/null && docker tag ` + base + ` own-b:1 && docker run -d --name box-b ` + base + ` sleep 60 && sleep 4 && docker ps -a --format '{{.Names}}' > ps.txt && docker images --format '{{.Repository}}' > images.txt && cat ps.txt images.txt && ! grep -q box-a ps.txt && ! grep -q own-a images.txt
`
	n := w.pushFiles(map[string]string{
		".cnb.yml":   cnb,
		"Dockerfile": "FROM " + base + "\nRUN echo built-in-the-pipeline > /built.txt\n",
	})
	b := w.waitFor(n, 3*time.Minute, "finished", func(b apiclient.Build) bool { return b.Status == "success" || b.Status == "failed" })
	logs := map[string]string{}
	for _, p := range b.Pipelines {
		var all strings.Builder
		for _, st := range p.Stages {
			for _, j := range st.Jobs {
				all.WriteString(w.jobLog(j.ID))
			}
		}
		logs[p.Name] = all.String()
		if p.Status != "success" {
			t.Errorf("pipeline %s: %s (%s); its log:\n%s", p.Name, p.Status, p.Reason, all.String())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for name, want := range map[string][]string{
		"build":   {"services: docker is ready", "read back", "no escape"},
		"alone-a": {"box-a", "own-a"},
		"alone-b": {"box-b", "own-b"},
	} {
		for _, s := range want {
			if !strings.Contains(logs[name], s) {
				t.Errorf("pipeline %s's log lacks %q:\n%s", name, s, logs[name])
			}
		}
	}
	if _, err := os.Stat("/root/nimbus-escaped"); err == nil {
		os.Remove("/root/nimbus-escaped")
		t.Fatal("a privileged container in the pipeline wrote into the host's /root")
	}

	// The pushed image is in Nimbus's registry: a deploy token pulls it and it runs.
	dt := w.alice.deployToken("ml", "trainer", "puller")
	cfg := t.TempDir()
	env := []string{"DOCKER_HOST=" + w.docker, "DOCKER_CONFIG=" + cfg, "HOME=" + cfg}
	ref := reg + "/ml/trainer:t"
	login(t, env, reg, "deploy", dt.Token)
	run(t, env, "docker", "pull", ref)
	t.Cleanup(func() { exec.Command("docker", "-H", w.docker, "rmi", "-f", ref).Run() })
	if out := run(t, env, "docker", "run", "--rm", "--network", "none", ref, "cat", "/built.txt"); !strings.Contains(out, "built-in-the-pipeline") {
		t.Fatalf("the pulled image: %q", out)
	}

	// Nothing of the engines is left on the host.
	svc := serviceDir(t, dir)
	if entries, err := os.ReadDir(svc); err != nil || len(entries) != 0 {
		t.Fatalf("the agent's docker services left %v (%v)", entries, err)
	}
	if out, _ := exec.Command("pgrep", "-a", "-u", testenv.DindUser(t), "dockerd").CombinedOutput(); strings.Contains(string(out), svc) {
		t.Fatalf("engines still run:\n%s", out)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), svc) {
		t.Fatal("a mount of an engine is left")
	}
	// The agent's own folder there (it is not under its work dir) goes when the agent stops.
	if err, _ := ag.stop(t, time.Minute); err != nil {
		t.Fatalf("the agent's stop: %v", err)
	}
	if _, err := os.Stat(svc); !os.IsNotExist(err) {
		t.Fatalf("the stopped agent left %s behind (%v)", svc, err)
	}
}
