package app_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// The merge gate reads its checks through app's adapter: a commit status on a request's head
// counts as the required check its context names, pending, failed or passed.
func TestCommitStatusIsARequiredCheck(t *testing.T) {
	ctx := context.Background()
	s, alice, r, pr, head := openTune(t)
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
	if _, err := s.App.Builds.SetStatus(ctx, r, pr.BaseSHA, alice.ID, 0, build.StatusInput{Context: "eval", State: build.StateFailure}); err != nil {
		t.Fatal(err)
	}
	if got := gate(); len(got) != 0 {
		t.Errorf("a status on the target changed the request's gate: %q", got)
	}
}

// openTune starts a server where alice owns ml/trainer (private) with an empty main and a
// branch tune one commit ahead, and opens request #1 of tune into main as alice; it returns
// them, the request and tune's head.
func openTune(t *testing.T) (*apptest.Server, *auth.User, *repo.Repo, *pull.Request, string) {
	t.Helper()
	s := apptest.Start(t, nil, app.Options{})
	u := s.Signup(t, "alice")
	r := s.Repo(t, s.Org(t, u, "ml"), "trainer", repo.Private)
	bare := s.App.Repos.Path(r)
	gitOut := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"--git-dir=" + bare}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tree := gitOut("mktree")
	base := gitOut("commit-tree", tree, "-m", "base")
	gitOut("update-ref", "refs/heads/main", base)
	head := gitOut("commit-tree", tree, "-p", base, "-m", "tune")
	gitOut("update-ref", "refs/heads/tune", head)
	who := pull.Person{ID: u.ID, Name: u.Username, Email: u.Email}
	pr, err := s.App.Pulls.Open(context.Background(), r, who, pull.OpenInput{Source: "tune", Target: "main", Title: "Tune"})
	if err != nil {
		t.Fatal(err)
	}
	return s, u, r, pr, head
}

// A pull request's proposed code gets CNB's reduced CNB_TOKEN (§3.2): it reads the repo and its
// registry, sets commit statuses and comments on its request, and can neither push, publish,
// merge, edit the request nor start builds. pull_request.target runs the target's own code and
// keeps the token a push build has.
func TestPullRequestJobTokenIsReduced(t *testing.T) {
	ctx := context.Background()
	s, alice, r, _, head := openTune(t)

	// token is the job token of a running build of event for request pull (0: none).
	token := func(t *testing.T, n int64, event string, pull int64) string {
		t.Helper()
		seeded, err := buildtest.Seed(s.App.DB, buildtest.Running{RepoID: r.ID, OrgID: r.OrgID, Number: n, Commit: head, TriggeredBy: alice.ID, Event: event})
		if err != nil {
			t.Fatal(err)
		}
		if pull != 0 {
			if err := buildtest.ForPull(s.App.DB, seeded.BuildID, pull); err != nil {
				t.Fatal(err)
			}
		}
		return seeded.JobToken
	}
	call := func(t *testing.T, tok, method, path, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, s.URL+"/api/v1/repos/ml/trainer"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}

	for i, tc := range []struct {
		event   string
		reduced bool
	}{
		{"pull_request", true}, {"pull_request.update", true}, {"pull_request.approved", true},
		{"pull_request.changes_requested", true}, {"pull_request.comment", true},
		{"pull_request.target", false}, {"pull_request.merged", false}, {"push", false},
	} {
		t.Run(tc.event, func(t *testing.T) {
			tok := token(t, int64(i+1), tc.event, 1)
			p, err := s.App.Builds.ResolveJobToken(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			// Reads: the repo (clone) and its registry (pull).
			if _, err := s.App.Repos.Resolve(ctx, p, "ml", "trainer", repo.Read); err != nil {
				t.Errorf("clone: %v", err)
			}
			if _, err := s.App.Repos.ResolveRegistry(ctx, p, "ml", "trainer", repo.Read); err != nil {
				t.Errorf("registry pull: %v", err)
			}
			// Writes: a push and a publish are what the reduced token lacks.
			_, pushErr := s.App.Repos.Resolve(ctx, p, "ml", "trainer", repo.Write)
			_, pubErr := s.App.Repos.ResolveRegistry(ctx, p, "ml", "trainer", repo.Write)
			for what, err := range map[string]error{"push": pushErr, "publish": pubErr} {
				if tc.reduced && fault.KindOf(err) != fault.KindForbidden {
					t.Errorf("%s with the reduced token: %v, want forbidden", what, err)
				}
				if !tc.reduced && err != nil {
					t.Errorf("%s with the full token: %v", what, err)
				}
			}
			// What even proposed code may do: a commit status and a comment on its request.
			if got := call(t, tok, "POST", "/statuses/"+head, `{"state":"success","context":"eval/`+tc.event+`"}`); got != http.StatusCreated {
				t.Errorf("commit status: %d, want 201", got)
			}
			if got := call(t, tok, "POST", "/pulls/1/comments", `{"body":"loss 0.1"}`); got != http.StatusCreated {
				t.Errorf("comment: %d, want 201", got)
			}
			// What it may not: edit the request, start a build.
			want := http.StatusForbidden
			if !tc.reduced {
				want = http.StatusOK
			}
			if got := call(t, tok, "PATCH", "/pulls/1", `{"title":"Tune `+tc.event+`"}`); got != want {
				t.Errorf("edit the request: %d, want %d", got, want)
			}
			// git:reviewer: a pipeline of the request asks reviewers for it, even a reduced one.
			if got := call(t, tok, "POST", "/pulls/1/reviewers", `{"remove":["alice"]}`); got != http.StatusOK {
				t.Errorf("git:reviewer on its own request: %d, want 200", got)
			}
		})
	}
	// A reduced token of another request's build asks reviewers for nothing here.
	t.Run("another request's pipeline", func(t *testing.T) {
		if got := call(t, token(t, 99, "pull_request", 2), "POST", "/pulls/1/reviewers", `{"remove":["alice"]}`); got != http.StatusForbidden {
			t.Errorf("git:reviewer of request #2 on #1: %d, want 403", got)
		}
	})
}
