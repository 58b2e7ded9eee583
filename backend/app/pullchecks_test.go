package app_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// The merge gate reads its checks through app's adapter: a commit status on a request's head
// counts as the required check its context names, pending, failed or passed.
func TestCommitStatusIsARequiredCheck(t *testing.T) {
	ctx := context.Background()
	s := apptest.Start(t, nil, app.Options{})
	alice := s.Signup(t, "alice")
	r := s.Repo(t, s.Org(t, alice, "ml"), "trainer", repo.Private)
	bare := s.App.Repos.Path(r)
	gitOut := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"--git-dir=" + bare}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tree := gitOut("", "mktree")
	base := gitOut("", "commit-tree", tree, "-m", "base")
	gitOut("", "update-ref", "refs/heads/main", base)
	head := gitOut("", "commit-tree", tree, "-p", base, "-m", "tune")
	gitOut("", "update-ref", "refs/heads/tune", head)

	who := pull.Person{ID: alice.ID, Name: alice.Username, Email: alice.Email}
	pr, err := s.App.Pulls.Open(ctx, r, who, pull.OpenInput{Source: "tune", Target: "main", Title: "Tune"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Pulls.SetRule(ctx, r, pull.RuleInput{Pattern: "main", RequiredChecks: []string{"eval"}}); err != nil {
		t.Fatal(err)
	}
	gate := func() []string {
		t.Helper()
		g, err := s.App.Pulls.Gate(ctx, r, pr, "")
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, u := range g.Unmet {
			out = append(out, u.Code)
		}
		return out
	}
	for _, c := range []struct {
		state string
		want  []string
	}{
		{"", []string{"checks_missing"}},
		{build.StatePending, []string{"checks_pending"}},
		{build.StateError, []string{"checks_failed"}},
		{build.StateSuccess, []string{}},
	} {
		if c.state != "" {
			if _, err := s.App.Builds.SetStatus(ctx, r, head, alice.ID, 0, build.StatusInput{Context: "eval", State: c.state}); err != nil {
				t.Fatal(err)
			}
		}
		if got := gate(); !slices.Equal(got, c.want) {
			t.Errorf("eval %q: the gate says %q, want %q", c.state, got, c.want)
		}
	}
	// A status on another commit (the target) does not count for the request.
	if _, err := s.App.Builds.SetStatus(ctx, r, base, alice.ID, 0, build.StatusInput{Context: "eval", State: build.StateFailure}); err != nil {
		t.Fatal(err)
	}
	if got := gate(); len(got) != 0 {
		t.Errorf("a status on the target changed the request's gate: %q", got)
	}
}
