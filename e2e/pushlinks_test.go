package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// Issue 35: `git push` prints a link to each build it started, as GitHub prints a pull
// request's, and nothing when it started none. The real git client against the real server.
func TestPushPrintsBuildLinks(t *testing.T) {
	base := plainServer(t)

	alice := newClient(t, base)
	alice.signup("alice")
	alice.createOrg("acme")
	repo := alice.createRepo("acme", apiclient.NewRepo{Name: "app", Visibility: "private"})
	tok := alice.newToken("laptop", "repo:write")
	u, _ := url.Parse(repo.CloneURL)
	u.User = url.UserPassword("alice", tok)
	work := t.TempDir()
	gitRun(t, work, "clone", "-q", u.String(), "app")
	src := filepath.Join(work, "app")

	// No .cnb.yml: the push starts nothing and says nothing.
	os.WriteFile(filepath.Join(src, "README.md"), []byte("hi\n"), 0o644)
	gitRun(t, src, "add", "-A")
	gitRun(t, src, "commit", "-q", "-m", "readme")
	if out := gitRun(t, src, "push", "origin", "main"); strings.Contains(out, "Nimbus") {
		t.Fatalf("a push that started no build printed:\n%s", out)
	}

	ci := "main:\n  push:\n    - stages: [ { name: a, script: echo a } ]\n"
	for n := 1; n <= 2; n++ {
		os.WriteFile(filepath.Join(src, ".cnb.yml"), []byte(ci+strings.Repeat("#\n", n)), 0o644)
		gitRun(t, src, "add", "-A")
		gitRun(t, src, "commit", "-q", "-m", fmt.Sprintf("ci %d", n))
		out := gitRun(t, src, "push", "-q", "origin", "main")
		link := fmt.Sprintf("%s/acme/app/builds/%d", base, n)
		want := fmt.Sprintf("remote: Nimbus: build #%d for refs/heads/main (push): %s", n, link)
		if !containsTrimmedLine(out, want) {
			t.Fatalf("push %d printed\n%s\nwant the line %q", n, out, want)
		}
		if b := tokenClient(t, base, tok).build("acme", "app", int64(n)); b.Number != int64(n) || b.Event != "push" || b.Commit != gitRun(t, src, "rev-parse", "HEAD") {
			t.Fatalf("build %d behind the link: %+v", n, b)
		}
		// The link is a page the dashboard serves.
		if code, _ := get(t, link); code != 200 {
			t.Fatalf("GET %s = %d", link, code)
		}
	}
}

// containsTrimmedLine reports whether out has line, once git's padding spaces are trimmed.
func containsTrimmedLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimRight(l, " ") == line {
			return true
		}
	}
	return false
}
