package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// nimbus pr against a whole server: create, list, checkout into a clone, merge; and the refusals
// a person reads.
func TestPRCommands(t *testing.T) {
	s := apptest.Start(t, nil, app.Options{})
	u := s.Signup(t, "ada")
	s.Repo(t, s.Org(t, u, "ml"), "trainer", repo.Private)
	token := s.Token(t, u, auth.ScopeRepoRead, auth.ScopeRepoWrite)
	remote := strings.Replace(s.URL, "http://", "http://ada:"+token+"@", 1) + "/ml/trainer.git"
	work := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=Ada", "-c", "user.email=ada@example.com"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "train.py"), []byte("lr = 0.1\n"), 0o644)
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "base")
	git(work, "push", "-q", remote, "main")
	git(work, "checkout", "-q", "-b", "lower-lr")
	os.WriteFile(filepath.Join(work, "train.py"), []byte("lr = 0.01\n"), 0o644)
	git(work, "commit", "-q", "-am", "lower the learning rate")
	head := git(work, "rev-parse", "HEAD")
	git(work, "push", "-q", remote, "lower-lr")

	cli := func(args ...string) (int, string, string) { return runCLIFast(args, s.URL, token) }
	code, out, errOut := cli("pr", "create", "ml/trainer", "--source", "lower-lr", "--title", "Lower the learning rate")
	if code != 0 || !strings.Contains(out, "pull request #1: lower-lr into main") || !strings.Contains(out, "/ml/trainer/-/pulls/1") {
		t.Fatalf("create: %d %q %q", code, out, errOut)
	}
	code, out, errOut = cli("pr", "create", "ml/trainer", "--source", "lower-lr", "--title", "Again")
	if code != 1 || !strings.Contains(errOut, "already proposes lower-lr") {
		t.Fatalf("a second create: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = cli("pr", "list", "ml/trainer"); code != 0 || !strings.Contains(out, "#1") || !strings.Contains(out, "lower-lr → main") ||
		!strings.Contains(out, "Lower the learning rate") {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}

	// checkout, in a clone of main only: the request's commits arrive on pr-1.
	clone := t.TempDir()
	git(clone, "clone", "-q", "--branch", "main", remote, ".")
	if code, out, errOut = cli("pr", "checkout", "ml/trainer", "1", "-C", clone); code != 0 || !strings.Contains(out, "checked out on pr-1") {
		t.Fatalf("checkout: %d %q %q", code, out, errOut)
	}
	if got := git(clone, "rev-parse", "HEAD"); got != head || git(clone, "rev-parse", "--abbrev-ref", "HEAD") != "pr-1" {
		t.Fatalf("checked out %s on %s, want %s on pr-1", got, git(clone, "rev-parse", "--abbrev-ref", "HEAD"), head)
	}
	if cfg := git(clone, "config", "--list", "--local"); strings.Contains(cfg, "extraheader") || strings.Contains(strings.ReplaceAll(cfg, remote, ""), token) {
		t.Fatalf("the token was written into the clone's config:\n%s", cfg)
	}

	if code, out, errOut = cli("pr", "merge", "ml/trainer", "1", "--mode", "squash", "--delete-branch"); code != 0 ||
		!strings.Contains(out, "pull request #1 merged into main (squash)") {
		t.Fatalf("merge: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = cli("pr", "list", "ml/trainer", "--state", "merged"); code != 0 || !strings.Contains(out, "merged") {
		t.Fatalf("list merged: %d %q %q", code, out, errOut)
	}

	// --from: a request from a fork, and list's filters.
	if _, err := apiclient.New(s.URL, apiclient.WithToken(token)).ForkRepo(t.Context(), "ml", "trainer", "ml", "trainer-fork"); err != nil {
		t.Fatal(err)
	}
	git(work, "checkout", "-q", "-b", "tune", "lower-lr")
	os.WriteFile(filepath.Join(work, "epochs.txt"), []byte("20\n"), 0o644)
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "more epochs")
	git(work, "push", "-q", strings.TrimSuffix(remote, ".git")+"-fork.git", "tune")
	code, out, errOut = cli("pr", "create", "ml/trainer", "--from", "ml/trainer-fork", "--source", "tune", "--title", "More epochs")
	if code != 0 || !strings.Contains(out, "pull request #2") {
		t.Fatalf("create --from: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = cli("pr", "list", "ml/trainer", "--author", "ada"); code != 0 || !strings.Contains(out, "ml/trainer-fork:tune → main") ||
		!strings.Contains(out, "CHECKS") {
		t.Fatalf("list --author ada: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = cli("pr", "list", "ml/trainer", "--reviewer", "ada"); code != 0 || !strings.Contains(out, "no open pull requests that match") {
		t.Fatalf("list --reviewer ada: %d %q %q", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pr", "merge", "ml/trainer", "1"}, 1, "is merged"},
		{[]string{"pr", "merge", "ml/trainer", "x"}, 2, "is not a pull request number"},
		{[]string{"pr", "list", "trainer"}, 2, "is not ORG/REPO"},
		{[]string{"pr", "create", "ml/trainer", "--source", "x"}, 2, "--source and --title are required"},
		{[]string{"pr", "rebase"}, 2, "Usage: nimbus pr"},
		{[]string{"pr", "checkout", "ml/trainer", "7", "-C", clone}, 1, "not found"},
	} {
		code, _, errOut := cli(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %q, want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// nimbus pr metrics prints a request's metrics against its target and, with --fail-worse,
// exits 1 on a regression past its limit, absolute or relative: the check a pipeline fails.
func TestPRMetricsFailsOnARegression(t *testing.T) {
	s := apptest.Start(t, nil, app.Options{})
	u := s.Signup(t, "ada")
	r := s.Repo(t, s.Org(t, u, "ml"), "trainer", repo.Private)
	token := s.Token(t, u, auth.ScopeRepoRead)
	sha := strings.Repeat("a", 40)
	report := func(n int64, branch string, values map[string]float64) {
		t.Helper()
		seeded, err := buildtest.Seed(s.App.DB, buildtest.Running{RepoID: r.ID, OrgID: r.OrgID, Number: n, Commit: sha, TriggeredBy: u.ID})
		if err != nil {
			t.Fatal(err)
		}
		if err := buildtest.Ended(s.App.DB, seeded.BuildID, time.Now()); err != nil {
			t.Fatal(err)
		}
		for name, v := range values {
			m := build.Metric{RepoID: r.ID, BuildID: seeded.BuildID, PipelineID: seeded.PipelineID, JobID: seeded.JobID, BuildNumber: n,
				Branch: branch, CommitSHA: sha, Name: name, Value: v, CreatedAt: time.Now()}
			if err := buildtest.Report(s.App.DB, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The request is #1 of ml/trainer; metrics are all the command reads of it.
	report(1, "main", map[string]float64{"loss": 0.30, "accuracy": 0.90})
	report(2, build.PullSeries(1), map[string]float64{"loss": 0.33, "accuracy": 0.89})
	openPull(t, s, u, r)

	cli := func(args ...string) (int, string, string) { return runCLIFast(args, s.URL, token) }
	code, out, errOut := cli("pr", "metrics", "ml/trainer", "1")
	if code != 0 || !strings.Contains(out, "loss (lower is better)") || !strings.Contains(out, "0.03") || !strings.Contains(out, "worse") {
		t.Fatalf("metrics: %d %q %q", code, out, errOut)
	}
	for _, c := range []struct {
		limits string
		want   int
	}{
		{"loss=0.05", 0},   // 0.03 worse, within 0.05
		{"loss=0.01", 1},   // past it
		{"accuracy=2%", 0}, // 0.01 of 0.90 is 1.1%
		{"accuracy=1%", 1}, // past it
		{"*=0", 1},         // no regression at all
		{"unknown=0", 0},   // a metric the request did not report
		{"loss=much", 2},   // not a limit
	} {
		code, out, errOut := cli("pr", "metrics", "ml/trainer", "1", "--fail-worse", c.limits)
		if code != c.want {
			t.Errorf("--fail-worse %s: exit %d, want %d\n%s%s", c.limits, code, c.want, out, errOut)
		}
		if c.want == 1 && !strings.Contains(out, "past the limit") {
			t.Errorf("--fail-worse %s: the table does not say which limit:\n%s", c.limits, out)
		}
	}
}

// openPull opens request #1 of r: a branch tune one empty commit ahead of main.
func openPull(t *testing.T, s *apptest.Server, u *auth.User, r *repo.Repo) {
	t.Helper()
	bare := s.App.Repos.Path(r)
	run := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"--git-dir=" + bare}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	base := run("commit-tree", run("mktree"), "-m", "base")
	run("update-ref", "refs/heads/main", base)
	run("update-ref", "refs/heads/tune", run("commit-tree", run("mktree"), "-p", base, "-m", "tune"))
	who := pull.Person{ID: u.ID, Name: u.Username, Email: u.Email}
	if _, err := s.App.Pulls.Open(t.Context(), r, who, pull.OpenInput{Source: "tune", Target: "main", Title: "Tune"}); err != nil {
		t.Fatal(err)
	}
}
