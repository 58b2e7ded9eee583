package e2e

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecretRepoImports: a secret repository holds env.yml whose allow_slugs names one repo.
// That repo's pipeline gets the values as env (its own env winning), masked in its log; another
// repo's pipeline of the same team fails at its first job with the rule named; git never
// reaches the secret repository; both reads are in its audit.
func TestSecretRepoImports(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	w.alice.must(201, "POST", "/api/v1/orgs/ml/repos", map[string]any{"name": "keys", "secret": true}, nil)
	w.alice.must(201, "POST", "/api/v1/orgs/ml/repos", map[string]any{"name": "other"}, nil)
	const envYml = "allow_slugs: ml/trainer\nDOCKER_USER: robot-42\nDOCKER_PASSWORD: hunter2-s3cret\nnested:\n  token: tok-xyz-987\n"
	w.alice.must(200, "PUT", "/api/v1/repos/ml/keys/secret-files/env.yml", map[string]string{"content": envYml}, nil)
	// A file pipelines could not import is refused, and the stored one stays.
	w.alice.must(422, "PUT", "/api/v1/repos/ml/keys/secret-files/env.yml", map[string]string{"content": "a: [unclosed\n"}, nil)
	var file struct{ Content string }
	w.alice.must(200, "GET", "/api/v1/repos/ml/keys/secret-files/env.yml", nil, &file)
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
`
	n := w.pushFiles(map[string]string{".cnb.yml": cnb})
	b := w.waitBuildSuccess(n, 2*time.Minute)
	log := w.jobLog(b.Pipelines[0].Stages[0].Jobs[0].ID)
	if !strings.Contains(log, "user=from-env pass=*** tok=*** len-14-2") {
		t.Errorf("the job did not see the imported values, masked, with its own env winning:\n%s", log)
	}
	for _, secret := range []string{"hunter2-s3cret", "tok-xyz-987"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log shows the secret %q:\n%s", secret, log)
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
	var refused buildJSON
	deadline := time.Now().Add(2 * time.Minute)
	for {
		w.api.must(200, "GET", "/api/v1/repos/ml/other/builds/1", nil, &refused)
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
		} `json:"items"`
	}
	w.alice.must(200, "GET", "/api/v1/repos/ml/keys/secret-reads", nil, &reads)
	if len(reads.Items) != 2 || reads.Items[0].Reader != "ml/other" || reads.Items[0].Allowed ||
		reads.Items[1].Reader != "ml/trainer" || !reads.Items[1].Allowed || reads.Items[1].Path != "env.yml" {
		t.Errorf("audit %+v, want the refused read of ml/other, then the allowed one of ml/trainer", reads.Items)
	}
}
