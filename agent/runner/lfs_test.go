package runner

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log destination for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gitWithoutLFS returns a git executable for the runner whose PATH holds git and nothing else,
// so `git lfs` is not found whatever the host has installed; with fakeLFS, a git-lfs is there
// too, which answers everything and records its arguments in the returned file.
func gitWithoutLFS(t *testing.T, fakeLFS bool) (gitPath, record string) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is not installed: the agent clones with it, so its tests need it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(bin, "git")); err != nil {
		t.Fatal(err)
	}
	record = filepath.Join(dir, "lfs-calls")
	if fakeLFS {
		script := "#!/bin/sh\necho \"$*\" >> " + record + "\necho 'git-lfs/3.0.0 (fake)'\n"
		if err := os.WriteFile(filepath.Join(bin, "git-lfs"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitPath = filepath.Join(dir, "git")
	wrapper := "#!/bin/sh\nPATH=" + bin + " exec " + real + " \"$@\"\n"
	if err := os.WriteFile(gitPath, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return gitPath, record
}

// lfsRun clones a repository of files with git.lfs on (its default) and returns the agent's log
// and what the fake git-lfs was asked, if there was one.
func lfsRun(t *testing.T, files map[string]string, fakeLFS bool) (agentLog, lfsCalls string) {
	t.Helper()
	h := newHarness(t, "shell")
	gitPath, record := gitWithoutLFS(t, fakeLFS)
	var logs syncBuffer
	r, err := New(Config{API: h.api, Executor: h.exec, WorkDir: h.workDir, GitPath: gitPath,
		HeartbeatInterval: h.srv.Intervals.HeartbeatInterval.Std(),
		LogFlushInterval:  h.srv.Intervals.LogFlushInterval.Std(),
		Log:               slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.runner = r
	url, commit := h.srv.NewRepo(t, "acme/lfs", files)
	p := plan(serial("s", script("look", "cat README")))
	p.Git.Enable, p.Git.LFS = true, true
	l := lease("lfs", p)
	l.CloneURL, l.Commit, l.JobToken = url, commit, "job-token-lfs"
	res, rec := h.run(t, l)
	if res.Status != StatusSuccess || !strings.Contains(logOf(rec, jobID(0, 0)), "readme") {
		t.Fatalf("result %+v job log %q", res, logOf(rec, jobID(0, 0)))
	}
	calls, _ := os.ReadFile(record)
	return logs.String(), string(calls)
}

const lfsWarning = "git-lfs is not installed"

// Every pipeline used to log that git-lfs is not installed, LFS files or not: the warning is
// only for a commit whose .gitattributes puts files in LFS.
func TestNoLFSWarningForARepositoryWithoutLFS(t *testing.T) {
	got, _ := lfsRun(t, map[string]string{
		"README":         "readme\n",
		".gitattributes": "# *.bin filter=lfs diff=lfs merge=lfs -text\n*.sh text eol=lf\n",
	}, false)
	if strings.Contains(got, lfsWarning) {
		t.Fatalf("warned about git-lfs for a repository without LFS files:\n%s", got)
	}
}

func TestLFSWarningWhenTheCommitUsesLFSAndGitLFSIsMissing(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"root":   {"README": "readme\n", ".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\n", "a.bin": "x"},
		"nested": {"README": "readme\n", "assets/.gitattributes": "*.png filter=lfs diff=lfs merge=lfs -text\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, _ := lfsRun(t, files, false)
			if !strings.Contains(got, lfsWarning) || !strings.Contains(got, "level=WARN") {
				t.Fatalf("no git-lfs warning for a commit with LFS files:\n%s", got)
			}
		})
	}
}

// With git-lfs installed, LFS files are pulled only when the commit has some.
func TestLFSPullOnlyWhenTheCommitUsesLFS(t *testing.T) {
	got, calls := lfsRun(t, map[string]string{"README": "readme\n", ".gitattributes": "*.bin filter=lfs -text\n"}, true)
	if strings.Contains(got, lfsWarning) || !strings.Contains(calls, "pull") {
		t.Fatalf("git-lfs calls %q, agent log:\n%s", calls, got)
	}
	if _, calls := lfsRun(t, map[string]string{"README": "readme\n"}, true); strings.Contains(calls, "pull") {
		t.Fatalf("git lfs pull ran for a commit without LFS files: %q", calls)
	}
}
