package e2e

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// forkConfig is the target's .cnb.yml: the pull_request pipelines try what a stranger's code
// must not do (print a repo secret, import a secret file, push with its token); the
// pull_request.target pipeline is the trusted path and has the secret.
func forkConfig(image string) string {
	job := func(name, extra, script string) string {
		return "    - name: " + name + "\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + image + " }\n" + extra +
			"      stages:\n        - name: " + name + "\n          script: " + script + "\n"
	}
	// A git push starts with the receive-pack advertisement, which is where the server decides.
	gitURL := `http://job:${CNB_TOKEN}@${CNB_WEB_ENDPOINT#http://}/ml/trainer.git/info/refs?service=git-`
	return "main:\n" +
		"  push:\n" + job("on-push", "", `echo pushed`) +
		"  pull_request:\n" +
		job("leak", "", `echo "token=[$HF_TOKEN]" && cat tuned.txt && `+
			`(wget -q -O /dev/null "`+gitURL+`upload-pack" && echo "clone allowed") && `+
			`(wget -q -O /dev/null "`+gitURL+`receive-pack" && echo "push allowed" || echo "push refused")`) +
		job("import", "      imports: "+"https://cnb.cool/ml/keys/-/blob/main/env.yml\n", `echo "db=[$DB_PASSWORD]"`) +
		"  pull_request.target:\n" + job("trusted", "", `echo "target token=[$HF_TOKEN] commit=$CNB_COMMIT"`)
}

// A pull request from a fork, end to end: bob, of another team, forks ml/trainer and opens a
// request from his fork; nothing runs until alice, a maintainer, approves it; then its
// pull_request pipeline gets no repo secret, no secret file and a token that clones but cannot
// push, while pull_request.target, the trusted path, runs the target's config with the secret.
func TestPullRequestFromAFork(t *testing.T) {
	w := newWorld(t)
	w.agent("", "NIMBUS_AGENT_NETWORK=host") // the leak job calls the server
	w.alice.must(http.StatusOK, http.MethodPatch, "/api/v1/repos/ml/trainer", map[string]string{"visibility": "public"}, nil)
	const repoSecret, fileSecret = "hf-s3cret-value-91", "db-s3cret-value-37"
	w.alice.setSecret("ml", "trainer", "HF_TOKEN", repoSecret)
	w.alice.createRepo("ml", apiclient.NewRepo{Name: "keys", Secret: true})
	w.alice.putSecretFile("ml", "keys", "env.yml", "allow_slugs: ml/trainer\nDB_PASSWORD: "+fileSecret+"\n")
	first := w.pushFiles(map[string]string{".cnb.yml": forkConfig(w.image)})
	w.waitBuildSuccess(first, 2*time.Minute)
	mainHead := gitRun(t, w.work, "rev-parse", "HEAD")

	// bob forks into his own team: the fork has main, and says where it comes from.
	bob := newClient(t, w.base)
	bob.signup("bob")
	bob.createOrg("bobs")
	fork, err := bob.api.ForkRepo(t.Context(), "ml", "trainer", "bobs", "")
	bob.check("fork", err)
	if fork.Org != "bobs" || fork.Name != "trainer" || fork.ForkOf != "ml/trainer" || fork.Visibility != "public" {
		t.Fatalf("fork %+v", fork)
	}
	bobToken := bob.newToken("git", "repo:write")
	forkURL, _ := url.Parse(w.base + "/bobs/trainer.git")
	forkURL.User = url.UserPassword("bob", bobToken)
	if out := gitRun(t, w.work, "ls-remote", forkURL.String(), "refs/heads/main"); !strings.HasPrefix(out, mainHead) {
		t.Fatalf("the fork's main: %q, want %s", out, mainHead)
	}
	gitRun(t, w.work, "checkout", "-q", "-b", "tune")
	if err := os.WriteFile(filepath.Join(w.work, "tuned.txt"), []byte("lr=0.01\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, w.work, "add", ".")
	gitRun(t, w.work, "commit", "-q", "-m", "tune from a fork")
	gitRun(t, w.work, "push", "-q", forkURL.String(), "tune")
	head := gitRun(t, w.work, "rev-parse", "HEAD")

	pr, err := bob.api.OpenPull(t.Context(), "ml", "trainer", apiclient.NewPull{SourceRepo: "bobs/trainer", SourceBranch: "tune", Title: "Tune from a fork"})
	bob.check("open from the fork", err)
	if pr.Number != 1 || pr.SourceRepo != "bobs/trainer" || pr.HeadSHA != head || !pr.RunHeld || pr.Author != "bob" || pr.MergeSHA == "" {
		t.Fatalf("opened %+v", pr)
	}
	// Nothing runs while it waits, and bob cannot let it run himself.
	time.Sleep(3 * time.Second)
	if bs := w.api.builds("ml", "trainer", 10); len(bs) != 1 {
		t.Fatalf("%d builds while the fork's request waits for approval, want the push's only", len(bs))
	}
	if _, err := bob.api.ApprovePullRun(t.Context(), "ml", "trainer", 1); err == nil {
		t.Fatal("the request's author approved his own code to run")
	}
	approved, err := w.api.api.ApprovePullRun(t.Context(), "ml", "trainer", 1)
	w.api.check("approve and run", err)
	if approved.RunHeld || approved.RunApprovedBy == nil || *approved.RunApprovedBy != "alice" {
		t.Fatalf("after approval %+v", approved)
	}

	// pull_request (#2): no secret, no secret file, a token that clones but cannot push.
	check := w.waitFor(first+1, 2*time.Minute, "ended", func(b apiclient.Build) bool { return b.Status == "success" || b.Status == "failed" })
	if check.Event != "pull_request" || check.Commit != pr.MergeSHA {
		t.Fatalf("build #%d %+v, want pull_request on the pre-merged commit", first+1, check)
	}
	leak := w.jobLogIn(check, "leak", "leak")
	for _, want := range []string{"token=[]", "lr=0.01", "clone allowed", "push refused"} {
		if !strings.Contains(leak, want) {
			t.Errorf("the fork's job log lacks %q:\n%s", want, leak)
		}
	}
	imp := w.jobLogIn(check, "import", "import")
	if !strings.Contains(imp, "from a fork") || strings.Contains(imp, "db=[") {
		t.Errorf("the fork's import was not refused, or its job ran:\n%s", imp)
	}
	for _, log := range []string{leak, imp} {
		if strings.Contains(log, repoSecret) || strings.Contains(log, fileSecret) {
			t.Errorf("a secret reached the fork's job:\n%s", log)
		}
	}
	// pull_request.target (#3): the target's own config at its head, with the secret (masked).
	target := w.waitBuildSuccess(first+2, 2*time.Minute)
	if log := w.jobLogIn(target, "trusted", "trusted"); target.Event != "pull_request.target" ||
		!strings.Contains(log, "target token=[***] commit="+mainHead) {
		t.Errorf("build #%d %+v:\n%s", first+2, target, log)
	}

	// bob deletes his fork: the request, in alice's repository, stays, marked as such.
	w.api.check("delete the fork", bob.api.DeleteRepo(t.Context(), "bobs", "trainer"))
	kept, err := w.api.api.GetPull(t.Context(), "ml", "trainer", 1)
	w.api.check("the request after its fork's deletion", err)
	if !kept.SourceDeleted || kept.SourceRepo != "" || kept.State != "open" || kept.HeadSHA != pr.HeadSHA {
		t.Errorf("after the fork's deletion %+v", kept)
	}
}
