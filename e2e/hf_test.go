package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An inference service pulls a model with the official Hugging Face Hub JS client
// (@huggingface/hub from npm, e2e/hfclient): a person publishes a model's files, a deploy
// token reads them through HF_ENDPOINT={server}/api/v1/hf, and the client's modelInfo,
// listFiles, fileExists and downloadFile agree with the published sha256 (npm ci of the
// client's lock once, then cached by a stamp).
func TestHuggingFaceClientPullsModel(t *testing.T) {
	dir := hfClient(t)
	w := newWorld(t)
	reg := tokenClient(t, w.base, w.alice.newToken("publish", "registry:write"))

	weights := make([]byte, 3<<20)
	rand.Read(weights)
	sum := sha256.Sum256(weights)
	want := hex.EncodeToString(sum[:])
	for name, data := range map[string][]byte{"model.safetensors": weights, "config.json": []byte(`{"hidden_size": 8}`)} {
		hfPut(t, reg, "/api/v1/repos/ml/trainer/artifacts/trainer/v1/"+name, data)
	}
	dt := w.alice.deployToken("ml", "trainer", "inference")

	// The default package (named like the repo) as ml/trainer, and the same as ml.trainer/trainer.
	for _, model := range []string{"ml/trainer", "ml.trainer/trainer"} {
		out := runHFClient(t, dir, w.base+"/api/v1/hf", dt.Token, model, "model.safetensors", want)
		var res struct {
			OK     bool   `json:"ok"`
			Files  int    `json:"files"`
			Size   int    `json:"size"`
			SHA256 string `json:"sha256"`
		}
		if err := json.Unmarshal([]byte(lastLine(out)), &res); err != nil || !res.OK || res.Files != 2 || res.Size != len(weights) || res.SHA256 != want {
			t.Fatalf("%s: the client said %q (%v)", model, out, err)
		}
	}
	// The script does check: a wrong token is the API's 401, another digest a failure.
	for _, c := range []struct{ token, sha, says string }{
		{"nbd_wrong", want, "status=401"},
		{dt.Token, strings.Repeat("0", 64), "FAIL: listFiles"},
	} {
		cmd := exec.Command("node", "check.mjs", w.base+"/api/v1/hf", c.token, "ml/trainer", "model.safetensors", c.sha)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), c.says) {
			t.Fatalf("want %q: %v %s", c.says, err, out)
		}
	}
}

func hfPut(t *testing.T, c *client, path string, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	req, err := c.api.NewRequest(t.Context(), "PUT", path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Checksum-Sha256", hex.EncodeToString(sum[:]))
	res, err := c.api.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT %s: %d", path, res.StatusCode)
	}
}

func runHFClient(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("node", append([]string{"check.mjs"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node check.mjs %s: %v\n%s", args[2], err, out)
	}
	return string(out)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// hfClient returns e2e/hfclient with its packages installed: npm ci once, then again only when
// package.json or package-lock.json changed (the stamp is the Makefile's, which CI runs first).
func hfClient(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("hfclient")
	if err != nil {
		t.Fatal(err)
	}
	stamp := filepath.Join(dir, "node_modules", ".installed")
	fresh := false
	if st, err := os.Stat(stamp); err == nil {
		fresh = true
		for _, f := range []string{"package.json", "package-lock.json"} {
			if in, err := os.Stat(filepath.Join(dir, f)); err != nil || in.ModTime().After(st.ModTime()) {
				fresh = false
			}
		}
	}
	if !fresh {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
		if err := os.WriteFile(stamp, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("npm ci in e2e/hfclient: %s", time.Since(start).Round(time.Millisecond))
	}
	return dir
}
