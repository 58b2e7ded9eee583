package app

import (
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// TestPushOfInvalidRefNames pushes, with the real git client, a branch and a tag whose names
// are not valid UTF-8 into a repo whose .cnb.yml has a push pipeline. Such a push used to
// succeed: the refs were created, the trigger fired nothing and, on PostgreSQL, logged two
// ERRORs (the name is no text it can store). Now it is refused at receive: the client prints
// why, no ref, build or row is written, and nothing is logged at ERROR. The same commit pushed
// to main then makes its build, so the refusal is what stopped the others.
func TestPushOfInvalidRefNames(t *testing.T) {
	t.Parallel()
	mxEachDialect(t, func(t *testing.T, w *mxWorld) {
		name := w.scratchRepo()
		srv := httptest.NewServer(w.h)
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		u.User = url.UserPassword("x", w.byName["developer-token"].Bearer)
		u.Path = "/" + mxOrgA + "/" + name + ".git"
		dir := t.TempDir()
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
		git := func(args ...string) (string, error) {
			cmd := exec.Command("git", append([]string{"-c", "user.name=Matrix", "-c", "user.email=matrix@example.com",
				"-c", "credential.helper=", "-c", "protocol.version=2"}, args...)...)
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if err := os.WriteFile(filepath.Join(dir, ".cnb.yml"), []byte(mxConfigFile), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", ".cnb.yml"}, {"commit", "-q", "-m", "pipelines"},
			{"tag", "-a", "v-\xff", "-m", "t"}} {
			if out, err := git(args...); err != nil {
				t.Fatalf("git %s: %v\n%s", args[0], err, out)
			}
		}
		logged := len(w.logs.String())
		before := w.snapshot()
		for _, refspec := range []string{"HEAD:refs/heads/br-\xff", "refs/tags/v-\xff", "HEAD:refs/heads/caf\xc3"} {
			out, err := git("push", u.String(), refspec)
			if err == nil {
				t.Errorf("push %q succeeded:\n%s", refspec, out)
			}
			if !strings.Contains(out, "remote: error: refusing") || !strings.Contains(out, "[remote rejected]") ||
				!strings.Contains(out, "invalid ref name: the name is not valid UTF-8") {
				t.Errorf("push %q: the client did not say why:\n%s", refspec, out)
			}
		}
		if d := before.diff(w.snapshot()); d != "" {
			t.Errorf("the refused pushes changed the database:\n%s", d)
		}
		if logs := w.logs.String()[logged:]; strings.Contains(logs, "level=ERROR") {
			t.Errorf("the refused pushes logged an ERROR:\n%s", logs)
		}
		var r repo.Repo
		if err := w.app.DB.Where("org_id = ? AND name = ?", w.orgA.ID, name).Take(&r).Error; err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("git", "--git-dir="+w.app.Repos.Path(&r), "for-each-ref").CombinedOutput()
		if err != nil || len(out) != 0 {
			t.Errorf("the refused pushes left refs: %v %s", err, out)
		}

		if out, err := git("push", u.String(), "HEAD:refs/heads/main"); err != nil {
			t.Fatalf("push of a valid name: %v\n%s", err, out)
		}
		var builds int64
		w.app.DB.Model(&build.Build{}).Where("repo_id = ?", r.ID).Count(&builds)
		if builds == 0 {
			t.Error("the same commit pushed to main made no build")
		}
	})
}
