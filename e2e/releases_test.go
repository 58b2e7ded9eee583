package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A tag push runs git:release, which makes the tag's release with two files of the workspace
// and notes from a file, then the cnbcool/attachments plugin adds a third; a deploy token
// downloads each with the digest the job computed itself, and the release names its build.
func TestGitReleasePublishesFiles(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	cnb := `$:
  tag_push:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: ` + w.image + ` }
      stages:
        - name: build
          script: mkdir -p dist extra && head -c 300000 /dev/urandom > dist/model.bin && echo '{"layers":12}' > dist/config.json && echo report > extra/report.txt && printf 'Notes of %s\n' "$CNB_BRANCH" > NOTES.md && sha256sum dist/* extra/*
        - name: release
          type: git:release
          options:
            title: Model ${CNB_BRANCH}
            descriptionFromFile: NOTES.md
            attachments: [dist/*]
        - name: upload
          image: cnbcool/attachments:latest
          settings:
            attachments: [extra/report.txt]
`
	w.pushFiles(map[string]string{".cnb.yml": cnb})
	gitRun(t, w.work, "tag", "v1.0")
	u, _ := url.Parse(w.base + "/ml/trainer.git")
	u.User = url.UserPassword("alice", w.token)
	gitRun(t, w.work, "push", "-q", u.String(), "refs/tags/v1.0")
	b := w.waitBuildSuccess(1, 2*time.Minute)

	log := w.jobLog(b.Pipelines[0].Stages[0].Jobs[0].ID)
	sums := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([0-9a-f]{64})  \S+/(\S+)$`).FindAllStringSubmatch(log, -1) {
		sums[m[2]] = "sha256:" + m[1]
	}
	if len(sums) != 3 {
		t.Fatalf("the build job's sums: %v\n%s", sums, log)
	}
	dt := w.alice.deployToken("ml", "trainer", "inference")
	deploy := tokenClient(t, w.base, dt.Token)
	rel := deploy.release("ml", "trainer", "v1.0")
	if rel.Title != "Model v1.0" || rel.Notes != "Notes of v1.0\n" || rel.Build == nil || rel.Build.Number != 1 || rel.Commit != b.Commit || len(rel.Files) != 3 {
		t.Fatalf("the release %+v (build %+v)", rel, rel.Build)
	}
	for _, f := range rel.Files {
		if f.Digest != sums[f.Name] {
			t.Errorf("%s: the release says %s, the job computed %s", f.Name, f.Digest, sums[f.Name])
		}
		req, _ := http.NewRequest("GET", w.base+"/api/v1/repos/ml/trainer/releases/v1.0/files/"+f.Name, nil)
		req.Header.Set("Authorization", "Bearer "+dt.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		io.Copy(h, resp.Body)
		resp.Body.Close()
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); resp.StatusCode != 200 || got != sums[f.Name] {
			t.Errorf("download of %s with a deploy token: %d, %s, want %s", f.Name, resp.StatusCode, got, sums[f.Name])
		}
	}
	if rlog := w.jobLog(b.Pipelines[0].Stages[1].Jobs[0].ID); !strings.Contains(rlog, "git:release: release v1.0 (Model v1.0) of ml/trainer") {
		t.Errorf("git:release's log:\n%s", rlog)
	}
}
