package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

func TestAttachmentsImage(t *testing.T) {
	for image, want := range map[string]bool{
		"cnbcool/attachments": true, "cnbcool/attachments:latest": true, "docker.cnb.cool/cnbcool/attachments:v1": true,
		"cnbcool/attachments@sha256:abc": true, "cnbcool/attachments-x": false, "other/attachments": false,
		"localhost:5000/cnbcool/attachments": false,
	} {
		if got := attachmentsImage(image); got != want {
			t.Errorf("attachmentsImage(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestCheckoutRel(t *testing.T) {
	x := &run{checkout: "/host/checkout", mount: "/workspace"}
	for in, want := range map[string]string{
		"dist/a.bin": "dist/a.bin", "./x": "x", "/workspace/out/*": "out/*",
		"/opt/ddk/src.tar": "", "../etc/passwd": "", "a/../../b": "",
	} {
		got, err := x.checkoutRel(in)
		if want == "" {
			if err == nil {
				t.Errorf("%q: %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	// The path rule (internal/userpath) applies to checkout paths too, with the server's reasons:
	// a backslash or a control character went on to the file system as it was.
	for in, reason := range map[string]string{`dist\a.bin`: "backslash", "a\nb": "control character", "../x": "leads out"} {
		_, err := x.checkoutRel(in)
		var pe *userpath.Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Reason, reason) {
			t.Errorf("%q: %v, want the path rule's refusal (%s)", in, err, reason)
		}
	}
}

// A symlink a job planted in the checkout does not lead the agent to a file of its host.
func TestCheckoutFilesDoNotFollowSymlinksOut(t *testing.T) {
	checkout := t.TempDir()
	outside := filepath.Join(t.TempDir(), "agent-secret")
	os.WriteFile(outside, []byte("host secret"), 0o600)
	os.Symlink(outside, filepath.Join(checkout, "link"))
	os.WriteFile(filepath.Join(checkout, "ok.txt"), []byte("fine"), 0o644)
	x := &run{checkout: checkout, mount: "/workspace"}
	if b, err := x.readCheckoutFile("ok.txt"); err != nil || string(b) != "fine" {
		t.Fatalf("a plain file: %q %v", b, err)
	}
	if b, err := x.readCheckoutFile("link"); err == nil {
		t.Fatalf("read %q through a symlink out of the checkout", b)
	}
	if files, err := x.releaseFiles([]any{"*"}); err != nil || len(files) != 1 || files["ok.txt"] != "ok.txt" {
		t.Fatalf("attachments %v %v: the symlink must not be one", files, err)
	}
}

// Before anything reaches the server, a release task without a tag, or whose globs match
// nothing, fails with a message that says so.
func TestReleaseTasksRefuseWhatCannotWork(t *testing.T) {
	h := newHarness(t, executor.ModeShell)
	noTag := protocol.Job{Key: "r", Name: "r", Kind: protocol.KindBuiltin, Type: typeGitRelease, AllowFailure: true}
	noFile := protocol.Job{Key: "a", Name: "a", Kind: protocol.KindPlugin, Image: &protocol.Image{Name: "cnbcool/attachments:latest"},
		Settings: map[string]any{"tag": "v1", "attachments": []any{"dist/*.bin"}}, AllowFailure: true}
	escape := protocol.Job{Key: "e", Name: "e", Kind: protocol.KindBuiltin, Type: typeGitRelease,
		Options: map[string]any{"tag": "v1", "attachments": "/etc/passwd"}, AllowFailure: true}
	_, rec := h.run(t, lease("release-refusals", plan(serial("s", noTag, noFile, escape))))
	for i, want := range []string{"git:release: no tag", `cnbcool/attachments: attachments: "dist/*.bin" matches no file`, "/etc/passwd is outside the workspace"} {
		if st, _ := status(t, rec, jobID(0, i)); st != StatusFailed || !strings.Contains(logOf(rec, jobID(0, i)), want) {
			t.Errorf("job %d: %s %q, want %q", i, st, logOf(rec, jobID(0, i)), want)
		}
	}
}
