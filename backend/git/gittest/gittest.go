// Package gittest makes large git histories for benchmarks, fast: git fast-import, no work tree.
package gittest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/git"
)

// BigHistory writes a history of n commits on main into the bare repository at path: each
// commit changes one of 100 files under src/, the first also adds cnb as .cnb.yml (when not
// ""). It returns main's head.
func BigHistory(tb testing.TB, path string, n int, cnb string) string {
	tb.Helper()
	var in bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&in, "commit refs/heads/main\ncommitter Bench <bench@example.com> %d +0000\ndata <<EOM\nstep %d\nEOM\n", 1700000000+i, i)
		if i == 1 && cnb != "" {
			fmt.Fprintf(&in, "M 100644 inline .cnb.yml\ndata %d\n%s\n", len(cnb), cnb)
		}
		body := fmt.Sprintf("file %d, step %d\n", i%100, i)
		fmt.Fprintf(&in, "M 100644 inline src/f%02d.py\ndata %d\n%s\n", i%100, len(body), body)
	}
	FastImport(tb, path, in.Bytes())
	head, err := git.ResolveRef(context.Background(), path, "refs/heads/main")
	if err != nil {
		tb.Fatal(err)
	}
	count, err := exec.Command("git", "--git-dir="+path, "rev-list", "--count", head).Output()
	if err != nil || strings.TrimSpace(string(count)) != fmt.Sprint(n) {
		tb.Fatalf("main has %q commits, want %d (%v)", count, n, err)
	}
	return head
}

// FastImport feeds a git fast-import stream to the bare repository at path.
func FastImport(tb testing.TB, path string, stream []byte) {
	tb.Helper()
	cmd := exec.Command("git", "--git-dir="+path, "fast-import", "--quiet")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "HOME=" + tb.TempDir()}
	cmd.Stdin = bytes.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("fast-import: %v\n%s", err, out)
	}
}
