package git

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests drive the real git client. Each gets a private HOME and no system config, so
// nothing of the machine (credential helpers, proxies, aliases) takes part, and every URL
// they use is a loopback httptest server or a local path.

// clientEnv is the environment of the test's git client.
func clientEnv(t *testing.T) []string {
	t.Helper()
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_DATE=2024-01-02T03:04:05+08:00",
		"GIT_COMMITTER_DATE=2024-01-02T04:05:06+00:00",
	}
}

// clientArgs go before every client command: an identity and no hints or helpers.
var clientArgs = []string{
	"-c", "user.name=Test Committer", "-c", "user.email=committer@example.com",
	"-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false",
	"-c", "credential.helper=", "-c", "protocol.version=2",
}

// gitTry runs the client git in dir and returns its combined output.
func gitTry(t *testing.T, env []string, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, clientArgs...), args...)...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// gitOK is gitTry that fails the test on error and returns trimmed output.
func gitOK(t *testing.T, env []string, dir string, args ...string) string {
	t.Helper()
	out, err := gitTry(t, env, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// writeFiles writes files into the work tree dir; a "" content deletes the file.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// commit writes files, commits everything in the work tree and returns the new commit's SHA.
func commit(t *testing.T, env []string, dir string, files map[string]string, msg string, extra ...string) string {
	t.Helper()
	writeFiles(t, dir, files)
	gitOK(t, env, dir, "add", "-A")
	gitOK(t, env, dir, append([]string{"commit", "-q", "--allow-empty", "-m", msg}, extra...)...)
	return gitOK(t, env, dir, "rev-parse", "HEAD")
}

// newBare creates an empty bare repository for a test.
func newBare(t *testing.T, path string) string {
	t.Helper()
	if err := InitBare(context.Background(), path, "main"); err != nil {
		t.Fatal(err)
	}
	return path
}
