package fakeserver

import (
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitUser is the user name the fake git server expects in Basic auth, with a lease's job token as
// the password.
const GitUser = "cnb"

// NewRepo creates a bare repository holding one commit with files and returns the URL to clone
// it from this server and the commit's id.
func (s *Server) NewRepo(t testing.TB, name string, files map[string]string) (cloneURL, commit string) {
	t.Helper()
	s.mu.Lock()
	if s.gitRoot == "" {
		s.gitRoot = t.TempDir()
	}
	root := s.gitRoot
	s.mu.Unlock()
	src := t.TempDir()
	gitRun(t, src, "init", "-q", "-b", "main")
	for p, content := range files {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, src, "add", "-A")
	gitRun(t, src, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first")
	commit = strings.TrimSpace(gitRun(t, src, "rev-parse", "HEAD"))
	// A second commit on top proves the agent checks out the commit it was given, not the tip.
	if err := os.WriteFile(filepath.Join(src, "later.txt"), []byte("later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, src, "add", "-A")
	gitRun(t, src, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "later")
	gitRun(t, root, "clone", "-q", "--bare", src, name+".git")
	return s.URL + "/git/" + name + ".git", commit
}

// GitAuth returns the Authorization headers the git endpoint received, in order.
func (s *Server) GitAuth() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.gitAuth...)
}

// git serves the repositories under /git/ with git http-backend, for clients that present a
// known job token as the Basic password.
func (s *Server) git(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.gitAuth = append(s.gitAuth, r.Header.Get("Authorization"))
	root := s.gitRoot
	ok := false
	if user, pass, has := r.BasicAuth(); has && user == GitUser {
		for _, l := range s.leases {
			if l.Lease.JobToken != "" && l.Lease.JobToken == pass && l.State == StateLeased {
				ok = true
			}
		}
	}
	s.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="fake"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Root: "/git",
		// REMOTE_USER: an authenticated user may push (receive-pack), as on Nimbus.
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + GitUser},
	}
	h.ServeHTTP(w, r)
}

func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// RepoFile reads path at ref in the bare repository name (what an agent pushed); ok is false
// when the ref or the path does not exist.
func (s *Server) RepoFile(t testing.TB, name, ref, path string) (content string, ok bool) {
	t.Helper()
	s.mu.Lock()
	root := s.gitRoot
	s.mu.Unlock()
	cmd := exec.Command("git", "--git-dir", filepath.Join(root, name+".git"), "show", ref+":"+path)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.Output()
	if err != nil {
		return "", false
	}
	return string(out), true
}
