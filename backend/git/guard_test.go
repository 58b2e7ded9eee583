package git

import (
	"context"
	"strings"
	"testing"
)

// A Guard's verdict reaches the pusher through git itself: a refused ref fails the push with
// the rule in git's output and nothing written; a ref held to fast-forwards takes them and
// refuses a force push (the pre-receive hook, once the pack is in); other refs are untouched.
func TestGuard(t *testing.T) {
	var asked [][]RefUpdate
	s := newServer(t, func(c *HandlerConfig) {
		c.Guard = func(_ context.Context, _ Repo, updates []RefUpdate) (Verdict, error) {
			asked = append(asked, updates)
			v := Verdict{Refused: map[string]string{}, FastForwardOnly: map[string]string{}}
			for _, u := range updates {
				switch {
				case u.Ref == "refs/heads/main" && IsZeroSHA(u.New):
					v.Refused[u.Ref] = `the branch rule "main" forbids deleting it`
				case u.Ref == "refs/heads/frozen":
					v.Refused[u.Ref] = "the branch rule \"frozen\" takes no direct pushes\n(open a pull request)"
				case u.Ref == "refs/heads/main":
					v.FastForwardOnly[u.Ref] = `the branch rule "main" forbids force pushes`
				}
			}
			return v, nil
		}
	})
	bare := s.addRepo("acme", "app", false)
	env := clientEnv(t)
	wt := t.TempDir()
	gitOK(t, env, wt, "init", "-q", "-b", "main")
	gitOK(t, env, wt, "remote", "add", "origin", s.url("dev", "acme", "app"))
	c1 := commit(t, env, wt, map[string]string{"a.txt": "1\n"}, "one")
	gitOK(t, env, wt, "push", "-q", "origin", "main", "main:refs/heads/other")
	c2 := commit(t, env, wt, map[string]string{"a.txt": "2\n"}, "two")
	gitOK(t, env, wt, "push", "-q", "origin", "main") // a fast-forward
	ref := func(name string) string {
		sha, err := ResolveRef(context.Background(), bare, name)
		if err != nil {
			return ""
		}
		return sha
	}
	if ref("refs/heads/main") != c2 {
		t.Fatalf("main at %s after a fast-forward, want %s", ref("refs/heads/main"), c2)
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a force push", []string{"push", "--force", "origin", c1 + ":refs/heads/main"}, `refusing a force push to refs/heads/main: the branch rule "main" forbids force pushes`},
		{"a deletion", []string{"push", "origin", ":refs/heads/main"}, `the branch rule "main" forbids deleting it`},
		{"a push to a frozen branch", []string{"push", "origin", "main:refs/heads/frozen"}, `the branch rule "frozen" takes no direct pushes (open a pull request)`},
		{"a frozen branch beside an allowed one", []string{"push", "origin", "main:refs/heads/frozen", "main:refs/heads/fine"}, "takes no direct pushes"},
	} {
		out, err := gitTry(t, env, wt, c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: err %v, want the rule in git's output:\n%s", c.name, err, out)
		}
	}
	if ref("refs/heads/main") != c2 || ref("refs/heads/frozen") != "" || ref("refs/heads/fine") != "" {
		t.Fatalf("a refused push moved refs: main %s frozen %q fine %q", ref("refs/heads/main"), ref("refs/heads/frozen"), ref("refs/heads/fine"))
	}
	// Not held: a force push to another branch goes through.
	gitOK(t, env, wt, "push", "-q", "--force", "origin", c2+":refs/heads/other")
	gitOK(t, env, wt, "push", "-q", "--force", "origin", c1+":refs/heads/other")
	if ref("refs/heads/other") != c1 {
		t.Fatalf("other at %s, want the forced %s", ref("refs/heads/other"), c1)
	}
	if len(asked) == 0 || asked[0][0].Ref != "refs/heads/main" || !IsZeroSHA(asked[0][0].Old) || asked[0][0].New != c1 {
		t.Fatalf("the guard was asked %+v", asked)
	}
}
