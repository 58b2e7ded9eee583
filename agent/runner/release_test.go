package runner

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/protocol"
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

func TestWorkspacePath(t *testing.T) {
	x := &run{ws: "/host/ws", mount: "/workspace"}
	for in, want := range map[string]string{
		"dist/a.bin": "/host/ws/dist/a.bin", "./x": "/host/ws/x", "/workspace/out/*": "/host/ws/out/*",
		"/opt/ddk/src.tar": "", "../etc/passwd": "", "a/../../b": "",
	} {
		got, err := x.workspacePath(in)
		if want == "" {
			if err == nil {
				t.Errorf("%q: %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != filepath.FromSlash(want) {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
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
