package e2e

import (
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// TestSecretRepoImports: a secret repository holds env.yml whose allow_slugs names one repo.
// That repo's pipeline gets the values as env (its own env winning), masked in its log; another
// repo's pipeline of the same team fails at its first job with the rule named; git never
// reaches the secret repository; both reads are in its audit.
func TestSecretRepoImports(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	w.alice.createRepo("ml", apiclient.NewRepo{Name: "keys", Secret: true})
	w.alice.createRepo("ml", apiclient.NewRepo{Name: "other"})
	const envYml = "allow_slugs: ml/trainer\nDOCKER_USER: robot-42\nDOCKER_PASSWORD: hunter2-s3cret\nnested:\n  token: tok-xyz-987\n"
	w.alice.putSecretFile("ml", "keys", "env.yml", envYml)
	// A file pipelines could not import is refused, and the stored one stays.
	var invalid *apiclient.Error
	if err := w.alice.api.PutSecretFile(t.Context(), "ml", "keys", "env.yml", "a: [unclosed\n"); !errors.As(err, &invalid) || invalid.Status != 422 {
		t.Fatalf("a file that does not parse: %v, want a 422", err)
	}
	file, err := w.alice.api.GetSecretFile(t.Context(), "ml", "keys", "env.yml")
	if err != nil {
		t.Fatal(err)
	}
	if file.Content != envYml {
		t.Fatalf("the stored file changed after a refused write: %q", file.Content)
	}

	// Git cannot clone it.
	u, _ := url.Parse(w.base + "/ml/keys.git")
	u.User = url.UserPassword("alice", w.token)
	dir := t.TempDir()
	cmd := exec.Command("git", "clone", "-q", u.String(), filepath.Join(dir, "keys"))
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GIT_TERMINAL_PROMPT=0"}
	// (The git client shows a 403's status, not its body.)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "403") {
		t.Fatalf("git clone of a secret repository: %v\n%s", err, out)
	}

	// A CNB-style URL: its path names the org and repo here.
	cnb := `main:
  push:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: ` + w.image + ` }
      imports: https://cnb.cool/ml/keys/-/blob/main/env.yml
      stages:
        - name: use
          env: { DOCKER_USER: from-env }
          script: echo "user=$DOCKER_USER pass=$DOCKER_PASSWORD tok=$nested_token len-${#DOCKER_PASSWORD}-$((1+1))"
        - name: notify
          image: ` + w.image + `
          settingsFrom: https://cnb.cool/ml/keys/-/blob/main/env.yml
          settings: { channel: own }
          args: [sh, -c, 'echo "plugin user=$PLUGIN_DOCKER_USER pass=$PLUGIN_DOCKER_PASSWORD nested=$PLUGIN_NESTED channel=$PLUGIN_CHANNEL"']
`
	n := w.pushFiles(map[string]string{".cnb.yml": cnb})
	b := w.waitBuildSuccess(n, 2*time.Minute)
	log := w.jobLog(b.Pipelines[0].Stages[0].Jobs[0].ID)
	if !strings.Contains(log, "user=from-env pass=*** tok=*** len-14-2") {
		t.Errorf("the job did not see the imported values, masked, with its own env winning:\n%s", log)
	}
	// settingsFrom reads the same file for a plugin, through the same rules, masked too (every
	// value of a secret repository's file is, robot-42 as well).
	plog := w.jobLog(b.Pipelines[0].Stages[1].Jobs[0].ID)
	if !strings.Contains(plog, `plugin user=*** pass=*** nested={"token":"***"} channel=own`) {
		t.Errorf("the plugin did not get the file's settings, masked, under its own:\n%s", plog)
	}
	for _, secret := range []string{"hunter2-s3cret", "tok-xyz-987"} {
		if strings.Contains(log, secret) || strings.Contains(plog, secret) {
			t.Errorf("a log shows the secret %q:\n%s\n%s", secret, log, plog)
		}
	}

	// The same file from another repo of the team: refused by allow_slugs.
	other := t.TempDir()
	gitRun(t, other, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(other, ".cnb.yml"), []byte(cnb), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, other, "add", ".")
	gitRun(t, other, "commit", "-q", "-m", "import")
	ou, _ := url.Parse(w.base + "/ml/other.git")
	ou.User = url.UserPassword("alice", w.token)
	gitRun(t, other, "push", "-q", ou.String(), "main")
	var refused apiclient.Build
	deadline := time.Now().Add(2 * time.Minute)
	for {
		refused = w.api.build("ml", "other", 1)
		if refused.Status == "failed" || refused.Status == "success" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other repo's build did not end: %+v", refused)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if refused.Status != "failed" {
		t.Fatalf("the other repo's import was not refused: %+v", refused)
	}
	olog := w.jobLog(refused.Pipelines[0].Stages[0].Jobs[0].ID)
	if !strings.Contains(olog, "allow_slugs") || !strings.Contains(olog, "ml/other") || strings.Contains(olog, "user=") {
		t.Errorf("the refusal does not name the rule, or the job ran:\n%s", olog)
	}

	// The audit has both reads.
	var reads struct {
		Items []struct {
			Reader  string `json:"reader"`
			Allowed bool   `json:"allowed"`
			Reason  string `json:"reason"`
			Path    string `json:"path"`
			Kind    string `json:"kind"`
		} `json:"items"`
	}
	w.alice.must(200, "GET", "/api/v1/repos/ml/keys/secret-reads", nil, &reads)
	// Newest first: ml/other's refused import; then ml/trainer's plugin job, which read the file
	// for settingsFrom after the pipeline's imports, and its first job's imports.
	want := []struct{ reader, kind string }{{"ml/other", "imports"}, {"ml/trainer", "settingsFrom"}, {"ml/trainer", "imports"}, {"ml/trainer", "imports"}}
	if len(reads.Items) != len(want) {
		t.Fatalf("audit %+v, want %v", reads.Items, want)
	}
	for i, it := range reads.Items {
		if it.Reader != want[i].reader || it.Kind != want[i].kind || it.Allowed != (i > 0) || it.Path != "env.yml" {
			t.Errorf("audit entry %d: %+v, want %v (allowed: %v)", i, it, want[i], i > 0)
		}
	}
}
