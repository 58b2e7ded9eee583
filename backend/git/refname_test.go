package git

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPushRefusesInvalidRefNames pushes, with the real client, branches and tags whose names
// are not valid UTF-8. Such a push used to succeed: git accepts any byte in a ref name, the ref
// was created, and the build trigger then failed on it (PostgreSQL refuses the name) with two
// ERROR lines and no build. Now the push is refused whole before git runs: the client prints
// the reason ("remote: …" and "! [remote rejected] … (…)"), no ref and no object is written,
// OnPush is not called, and the handler logs no ERROR.
func TestPushRefusesInvalidRefNames(t *testing.T) {
	s := newServer(t)
	bare := s.addRepo("acme", "app", false)
	env, _, wt := s.workTree("acme", "app")
	sha := commit(t, env, wt, map[string]string{"a.txt": "a\n"}, "a")
	gitOK(t, env, wt, "tag", "-a", "-m", "t", "v-\xff")

	for _, tc := range []struct {
		name string
		args []string
		bad  string // the ref refused for its name
	}{
		{"a branch", []string{"HEAD:refs/heads/br-\xff"}, "refs/heads/br-\xff"},
		{"a truncated UTF-8 sequence", []string{"HEAD:refs/heads/caf\xc3"}, "refs/heads/caf\xc3"},
		{"a tag", []string{"refs/tags/v-\xff"}, "refs/tags/v-\xff"},
		{"with a valid branch", []string{"HEAD:refs/heads/main", "HEAD:refs/heads/br-\xff"}, "refs/heads/br-\xff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := gitTry(t, env, wt, append([]string{"push", "origin"}, tc.args...)...)
			if err == nil {
				t.Fatalf("the push succeeded:\n%s", out)
			}
			for _, want := range []string{
				fmt.Sprintf("remote: error: refusing %q: the name is not valid UTF-8", tc.bad),
				"[remote rejected]", "(invalid ref name: the name is not valid UTF-8)",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the client did not print %q:\n%s", want, out)
				}
			}
			if len(tc.args) > 1 && !strings.Contains(out, "main (not updated: another ref of this push has an invalid name)") {
				t.Errorf("the valid ref of the push is not reported as not updated:\n%s", out)
			}
			if p := s.takePushes(); len(p) != 0 {
				t.Errorf("a refused push reached OnPush: %+v", p)
			}
			if empty, err := IsEmpty(context.Background(), bare); err != nil || !empty {
				t.Errorf("a refused push wrote refs: empty=%v %v", empty, err)
			}
			if objects := countObjects(t, bare); objects != "count: 0, in-pack: 0" {
				t.Errorf("a refused push wrote objects: %s", objects)
			}
		})
	}

	// The same client and work tree push a valid name at once: nothing was left half-done.
	gitOK(t, env, wt, "push", "-q", "origin", "main")
	s.wantPush(1, RefUpdate{ZeroSHA, sha, "refs/heads/main"})

	// A ref made before this check (here: by hand) can still be deleted, and fires nothing.
	if out, err := exec.Command("git", "--git-dir="+bare, "update-ref", "refs/heads/old-\xff", sha).CombinedOutput(); err != nil {
		t.Fatalf("update-ref: %v %s", err, out)
	}
	gitOK(t, env, wt, "push", "-q", "origin", "--delete", "refs/heads/old-\xff")
	if got, err := Branches(context.Background(), bare); err != nil || !slices.Equal(got, []string{"main"}) {
		t.Fatalf("branches after deleting the old ref: %q, %v", got, err)
	}
	if p := s.takePushes(); len(p) != 0 {
		t.Errorf("the deletion of a ref with an invalid name reached OnPush: %+v", p)
	}
	if strings.Contains(s.logs.String(), "level=ERROR") {
		t.Errorf("the handler logged an ERROR:\n%s", s.logs.String())
	}
}

// TestPushRefusalByHand sends receive-pack requests as other clients may: gzip-compressed, with
// and without side band, without a status report. Each invalid name is refused in the format
// the request asked for, and nothing is written.
func TestPushRefusalByHand(t *testing.T) {
	s := newServer(t)
	bare := s.addRepo("acme", "app", false)
	newSHA := strings.Repeat("1", 40)
	for _, tc := range []struct {
		name, caps string
		gzip       bool
		status     int
		want       []string
	}{
		{"side band, gzip", "report-status side-band-64k", true, 200,
			[]string{"\x02error: refusing \"refs/heads/a\\xff\"", "\x01", "ng refs/heads/a\xff invalid ref name: the name is not valid UTF-8\n"}},
		{"report only", "report-status", false, 200,
			[]string{"unpack ok\n", "ng refs/heads/a\xff invalid ref name: the name is not valid UTF-8\n"}},
		{"report-status-v2", "report-status-v2 side-band", false, 200,
			[]string{"ng refs/heads/a\xff invalid ref name"}},
		{"no report asked for", "ofs-delta", false, 400, []string{`refusing "refs/heads/a\xff"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			update := fmt.Sprintf("%s %s refs/heads/a\xff\x00%s\n", ZeroSHA, newSHA, tc.caps)
			raw := fmt.Sprintf("%04x%s0000PACK-that-is-never-read", 4+len(update), update)
			var body bytes.Buffer
			if tc.gzip {
				zw := gzip.NewWriter(&body)
				zw.Write([]byte(raw))
				zw.Close()
			} else {
				body.WriteString(raw)
			}
			req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/acme/app.git/git-receive-pack", &body)
			req.SetBasicAuth("dev", "devpass")
			req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
			if tc.gzip {
				req.Header.Set("Content-Encoding", "gzip")
			}
			got := doRequest(t, req, tc.status)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the answer lacks %q:\n%q", w, got)
				}
			}
			if empty, err := IsEmpty(context.Background(), bare); err != nil || !empty {
				t.Errorf("a refused push wrote refs: empty=%v %v", empty, err)
			}
		})
	}
	if p := s.takePushes(); len(p) != 0 {
		t.Errorf("a refused push reached OnPush: %+v", p)
	}
}

// TestCheckRefName holds the rule against git check-ref-format itself: every name the rule
// accepts, git accepts, and every name git refuses, the rule refuses; beyond git, the rule
// refuses names that are not UTF-8.
func TestCheckRefName(t *testing.T) {
	names := []string{
		"refs/heads/main", "refs/heads/feature/x", "refs/tags/v1.0.0", "refs/heads/功能", "refs/heads/café",
		"refs/heads/a-b_c+d", "refs/heads/@", "refs/heads/a@b", "refs/heads/a.b", "refs/heads/x.lockx",
		"refs/heads/a..b", "refs/heads/.a", "refs/heads/a/.b", "refs/heads/a.lock", "refs/heads/a/b.lock/c",
		"refs/heads/a/", "refs/heads/a.", "refs/heads//a", "refs/heads/a b", "refs/heads/a~1", "refs/heads/a^",
		"refs/heads/a:b", "refs/heads/a?", "refs/heads/a*", "refs/heads/a[b", `refs/heads/a\b`, "refs/heads/a@{1}",
		"refs/heads/a\x01", "refs/heads/a\x7f", "refs/heads/a\tb", "@", "refs/heads/",
	}
	for _, n := range names {
		accepted := exec.Command("git", "check-ref-format", n).Run() == nil
		err := CheckRefName(n)
		if (err == nil) != accepted {
			t.Errorf("CheckRefName(%q) = %v, git check-ref-format accepts it: %v", n, err, accepted)
		}
	}
	for _, n := range []string{"refs/heads/br-\xff", "refs/heads/caf\xc3", "refs/heads/\xc0\xaf", "refs/tags/\xed\xa0\x80"} {
		if err := CheckRefName(n); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("CheckRefName(%q) = %v, want a refusal for its bytes", n, err)
		}
		if exec.Command("git", "check-ref-format", n).Run() != nil {
			t.Errorf("git check-ref-format refuses %q: this case tests nothing beyond git", n)
		}
	}
}

// countObjects is what git count-objects says of the bare repo's loose and packed objects.
func countObjects(t *testing.T, bare string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir="+bare, "count-objects", "-v").Output()
	if err != nil {
		t.Fatal(err)
	}
	var count, inPack string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "count: "); ok {
			count = v
		}
		if v, ok := strings.CutPrefix(line, "in-pack: "); ok {
			inPack = v
		}
	}
	return "count: " + count + ", in-pack: " + inPack
}
