package git

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// pkt is s as one pkt-line.
func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// pushAnswer is a receive-pack answer on side-band-64k as git 2.39 writes it: the report
// (itself pkt-lines, ending in its own flush) on band 1, a hook's line on band 2, a keep-alive,
// and the flush that ends it all.
var pushAnswer = pkt("\x01"+pkt("unpack ok\n")+pkt("ok refs/heads/main\n")+"0000") +
	pkt("\x02hello from a hook\n") + pkt("\x01") + "0000"

// newReplyRecorder is a replyWriter over a recorder, with the headers of git's answer set.
func newReplyRecorder(status int, contentType string) (*replyWriter, *httptest.ResponseRecorder) {
	rec := httptest.NewRecorder()
	w := newReplyWriter(rec, maxPktLen-4)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	return w, rec
}

// TestReplyWriterAddsLinesBeforeTheLastFlush: git's bytes pass as they come but for the last
// flush-pkt, and finish puts the lines on band 2 in front of it, however git's writes are cut.
func TestReplyWriterAddsLinesBeforeTheLastFlush(t *testing.T) {
	want := strings.TrimSuffix(pushAnswer, "0000") + pkt("\x02Nimbus: build #1\n") + pkt("\x02Nimbus: build #2\n") + "0000"
	for _, size := range []int{len(pushAnswer), 1, 2, 3, 5, 7, 13} {
		t.Run(fmt.Sprintf("writes of %d", size), func(t *testing.T) {
			w, rec := newReplyRecorder(http.StatusOK, pushResultType)
			for b := []byte(pushAnswer); len(b) > 0; {
				n := min(size, len(b))
				if got, err := w.Write(b[:n]); got != n || err != nil {
					t.Fatalf("Write = %d, %v", got, err)
				}
				b = b[n:]
				// Nothing but a pkt-line header split across writes, or the flush, waits.
				sent := len(pushAnswer) - len(b)
				if held := sent - rec.Body.Len(); held < 0 || held > 4 || held == 4 && len(b) > 0 {
					t.Fatalf("after %d bytes %d are held back", sent, held)
				}
			}
			if got := rec.Body.String(); got != strings.TrimSuffix(pushAnswer, "0000") {
				t.Fatalf("before finish the client got\n%q\nwant git's answer without its last flush", got)
			}
			added, err := w.finish([]string{"Nimbus: build #1", "Nimbus: build #2"})
			if !added || err != nil {
				t.Fatalf("finish = %v, %v", added, err)
			}
			if got := rec.Body.String(); got != want {
				t.Fatalf("the client got\n%q\nwant\n%q", got, want)
			}
			if !rec.Flushed {
				t.Error("finish did not flush")
			}
		})
	}
}

// TestReplyWriterPassesOtherAnswersUnchanged: whatever is not a side-band answer ending in a
// flush-pkt reaches the client byte for byte, and no line is added.
func TestReplyWriterPassesOtherAnswersUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
	}{
		{"git's error status", "text/plain; charset=utf-8", "Request not supported: '/x'\n", http.StatusForbidden},
		{"another content type", "text/plain", "0000", http.StatusOK},
		{"no flush at the end (git died)", pushResultType, pkt("\x01" + pkt("unpack ok\n")), http.StatusOK},
		{"a header cut short at the end", pushResultType, pkt("\x02a\n") + "00", http.StatusOK},
		{"a pkt-line cut short at the end", pushResultType, pkt("\x02abc\n")[:6], http.StatusOK},
		{"not hex", pushResultType, "zzzz" + pkt("\x02a\n") + "0000", http.StatusOK},
		{"no side band", pushResultType, pkt("unpack ok\n") + pkt("ok refs/heads/main\n") + "0000", http.StatusOK},
		{"a fatal error on band 3", pushResultType, pkt("\x03fatal: no\n") + "0000", http.StatusOK},
		{"a delim-pkt", pushResultType, "0001" + "0000", http.StatusOK},
		{"a pkt-line too long", pushResultType, "fff1" + strings.Repeat("x", 0xfff1-4) + "0000", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, rec := newReplyRecorder(tc.status, tc.contentType)
			if n, err := w.Write([]byte(tc.body)); n != len(tc.body) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			added, err := w.finish([]string{"Nimbus: build #1"})
			if added || err != nil {
				t.Errorf("finish = %v, %v; want no lines added", added, err)
			}
			if got := rec.Body.String(); got != tc.body {
				t.Errorf("the client got\n%q\nwant it unchanged\n%q", got, tc.body)
			}
			if rec.Code != tc.status {
				t.Errorf("status %d, want %d", rec.Code, tc.status)
			}
		})
	}
}

// TestReplyWriterHoldsOnlyTheLastFlush: a flush-pkt that more pkt-lines follow goes on in its
// place; only the one git ends with has the lines in front of it.
func TestReplyWriterHoldsOnlyTheLastFlush(t *testing.T) {
	w, rec := newReplyRecorder(http.StatusOK, pushResultType)
	body := pkt("\x02one\n") + "0000" + pkt("\x02two\n") + "0000"
	for _, part := range []string{body[:11], body[11:13], body[13:]} {
		w.Write([]byte(part))
	}
	if _, err := w.finish(nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.Body.String(); got != body {
		t.Fatalf("with no lines the client got\n%q\nwant\n%q", got, body)
	}

	w, rec = newReplyRecorder(http.StatusOK, pushResultType)
	w.Write([]byte(body))
	w.finish([]string{"three"})
	if got, want := rec.Body.String(), pkt("\x02one\n")+"0000"+pkt("\x02two\n")+pkt("\x02three\n")+"0000"; got != want {
		t.Fatalf("the client got\n%q\nwant\n%q", got, want)
	}
}

// TestReplyWriterLines: a line is one pkt-line whatever it holds: control characters become
// spaces, and a long line is cut to the side band's size, never inside a character.
func TestReplyWriterLines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload int
		line    string
		want    string
	}{
		{"control characters", maxPktLen - 4, "a\nb\r\x1b[31mc\x00", "a b  [31mc "},
		{"64k", maxPktLen - 4, strings.Repeat("x", 70000), strings.Repeat("x", maxPktLen-6)},
		{"side-band", 1000 - 4, strings.Repeat("x", 2000), strings.Repeat("x", 1000-6)},
		{"not inside a character", 1000 - 4, strings.Repeat("x", 993) + "é", strings.Repeat("x", 993)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := newReplyWriter(rec, tc.payload)
			w.Header().Set("Content-Type", pushResultType)
			w.Write([]byte("0000"))
			if added, err := w.finish([]string{tc.line}); !added || err != nil {
				t.Fatalf("finish = %v, %v", added, err)
			}
			want := pkt("\x02"+tc.want+"\n") + "0000"
			if got := rec.Body.String(); got != want {
				t.Fatalf("got %d bytes %.60q…, want %d bytes %.60q…", len(got), got, len(want), want)
			}
			if len(want)-4 > tc.payload+4 || !utf8.ValidString(tc.want) {
				t.Fatalf("the test's own want is too long or broken")
			}
		})
	}
}

func TestSideBandPayload(t *testing.T) {
	for caps, want := range map[string]int{
		"report-status side-band-64k quiet": 65516,
		"report-status side-band":           996,
		"side-band side-band-64k":           65516,
		"report-status":                     0,
		"":                                  0,
	} {
		if got := sideBandPayload(strings.Fields(caps)); got != want {
			t.Errorf("sideBandPayload(%q) = %d, want %d", caps, got, want)
		}
	}
}

// TestPushPrintsOnPushLines pushes with the real client: the lines OnPush returns are printed
// as "remote: …" before the client's own summary, one per line, for every push that reached
// OnPush, and a push git refused, or one with no OnPush, prints nothing more than before.
func TestPushPrintsOnPushLines(t *testing.T) {
	s := newServer(t)
	s.addRepo("acme", "app", false)
	s.mu.Lock()
	s.reply = func(repo Repo, updates []RefUpdate) []string {
		var out []string
		for i, u := range updates {
			out = append(out, fmt.Sprintf("Nimbus: build #%d for %s (push): http://nimbus.test/acme/app/builds/%d\x1b[0m", i+1, u.Ref, i+1))
		}
		return out
	}
	s.mu.Unlock()
	env, _, wt := s.workTree("acme", "app")

	commit(t, env, wt, map[string]string{"a": "a\n"}, "one")
	out := gitOK(t, env, wt, "push", "origin", "main", "main:refs/heads/dev")
	want := []string{
		"remote: Nimbus: build #1 for refs/heads/main (push): http://nimbus.test/acme/app/builds/1 [0m",
		"remote: Nimbus: build #2 for refs/heads/dev (push): http://nimbus.test/acme/app/builds/2 [0m",
	}
	if got := remoteLines(out); !slices.Equal(got, want) {
		t.Fatalf("remote lines %q, want %q; the whole output:\n%s", got, want, out)
	}
	if strings.Index(out, "remote: Nimbus") > strings.Index(out, "To http://") {
		t.Errorf("the lines came after the push summary:\n%s", out)
	}
	if !strings.Contains(out, "[new branch]      main -> main") {
		t.Errorf("the push summary is missing:\n%s", out)
	}

	// Quiet pushes print them too: they are what the pusher came for, as on GitHub.
	commit(t, env, wt, map[string]string{"a": "b\n"}, "two")
	out = gitOK(t, env, wt, "push", "-q", "origin", "main")
	if got := remoteLines(out); len(got) != 1 || !strings.HasPrefix(got[0], "remote: Nimbus: build #1 for refs/heads/main") {
		t.Fatalf("push -q printed %q:\n%s", got, out)
	}

	// A push git refuses (not a fast-forward) reaches no OnPush and prints no line.
	s.takePushes()
	gitOK(t, env, wt, "reset", "-q", "--hard", "HEAD~1")
	commit(t, env, wt, map[string]string{"a": "c\n"}, "three")
	out, err := gitTry(t, env, wt, "push", "origin", "main")
	if err == nil || !strings.Contains(out, "[rejected]") {
		t.Fatalf("a non-fast-forward push: %v\n%s", err, out)
	}
	if got := remoteLines(out); len(got) != 0 {
		t.Fatalf("a refused push printed %q", got)
	}
	if p := s.takePushes(); len(p) != 0 {
		t.Fatalf("a refused push reached OnPush: %+v", p)
	}

	// Through a writer that cannot flush, the lines still come (with the rest, at the end).
	s.mu.Lock()
	s.hideWriter = true
	s.mu.Unlock()
	out = gitOK(t, env, wt, "push", "-f", "origin", "main")
	if got := remoteLines(out); len(got) != 1 {
		t.Fatalf("through a writer without Unwrap: %q\n%s", got, out)
	}
}

// TestPushWithoutOnPush: a handler with no OnPush serves pushes as before.
func TestPushWithoutOnPush(t *testing.T) {
	s := newServer(t, func(c *HandlerConfig) { c.OnPush = nil })
	bare := s.addRepo("acme", "app", false)
	env, _, wt := s.workTree("acme", "app")
	sha := commit(t, env, wt, map[string]string{"a": "a\n"}, "one")
	out := gitOK(t, env, wt, "push", "origin", "main")
	if got := remoteLines(out); len(got) != 0 {
		t.Fatalf("remote lines %q", got)
	}
	if got, err := ResolveRef(context.Background(), bare, "refs/heads/main"); err != nil || got != sha {
		t.Fatalf("main on the server = %s, %v; want %s", got, err, sha)
	}
}

// TestPushLinesByHand deletes a branch by hand (no pack needed) as other clients may ask:
// with side-band-64k the answer is git's with OnPush's line on band 2 before its last flush;
// without a side band it is git's answer, unchanged, and the line is dropped.
func TestPushLinesByHand(t *testing.T) {
	s := newServer(t)
	s.addRepo("acme", "app", false)
	s.mu.Lock()
	s.reply = func(Repo, []RefUpdate) []string { return []string{"Nimbus: deleted"} }
	s.mu.Unlock()
	env, _, wt := s.workTree("acme", "app")
	sha := commit(t, env, wt, map[string]string{"a": "a\n"}, "one")
	gitOK(t, env, wt, "push", "-q", "origin", "main:refs/heads/x", "main:refs/heads/y")
	s.takePushes()

	for _, tc := range []struct {
		ref, caps, want string
	}{
		{"refs/heads/x", "report-status delete-refs side-band-64k",
			pkt("\x01"+pkt("unpack ok\n")+pkt("ok refs/heads/x\n")+"0000") + pkt("\x02Nimbus: deleted\n") + "0000"},
		{"refs/heads/y", "report-status delete-refs",
			pkt("unpack ok\n") + pkt("ok refs/heads/y\n") + "0000"},
	} {
		update := fmt.Sprintf("%s %s %s\x00%s\n", sha, ZeroSHA, tc.ref, tc.caps)
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/acme/app.git/git-receive-pack",
			bytes.NewBufferString(pkt(update)+"0000"))
		req.SetBasicAuth("dev", "devpass")
		req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
		if got := doRequest(t, req, http.StatusOK); got != tc.want {
			t.Errorf("%s: the answer is\n%q\nwant\n%q", tc.caps, got, tc.want)
		}
		s.wantPush(1, RefUpdate{sha, ZeroSHA, tc.ref})
	}
	if _, err := ResolveRef(context.Background(), filepath.Join(s.root, "1.git"), "refs/heads/x"); err == nil {
		t.Error("refs/heads/x is still there")
	}
}

// remoteLines are the "remote: Nimbus…" lines of git's output, without the spaces git pads
// them with.
func remoteLines(out string) []string {
	var got []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, " ")
		if strings.HasPrefix(line, "remote: Nimbus") {
			got = append(got, line)
		}
	}
	return got
}
