package imagebuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkout writes files (path → content; a "->target" content makes a symbolic link) into a
// new folder and opens it as a root.
func checkout(t *testing.T, files map[string]string) (string, *os.Root) {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, full)
		} else {
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return dir, root
}

func baseFiles() map[string]string {
	return map[string]string{
		"Dockerfile":       "FROM busybox\nCOPY deps /deps\n",
		"deps/a.txt":       "a\n",
		"deps/sub/b.txt":   "b\n",
		"requirements.txt": "torch==2\n",
		"README.md":        "not versioned\n",
	}
}

func baseSpec() Spec {
	return Spec{Dockerfile: "Dockerfile", By: []string{"deps", "requirements.txt"},
		BuildArgs: map[string]string{"PY": "3.12"}}
}

func TestVersion(t *testing.T) {
	_, root := checkout(t, baseFiles())
	base, _, err := Version(root, baseSpec(), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if len(base) != 40 {
		t.Fatalf("version %q is not 40 hex digits", base)
	}
	cases := []struct {
		name  string
		files func(dir string) // changes to the checkout
		spec  func(s *Spec)
		arch  string
		same  bool
	}{
		{name: "nothing changed", same: true},
		{name: "the Dockerfile", files: write("Dockerfile", "FROM busybox\nRUN true\n")},
		{name: "a file in a versioned folder", files: write("deps/sub/b.txt", "b2\n")},
		{name: "a new file in a versioned folder", files: write("deps/new.txt", "n\n")},
		{name: "a versioned file", files: write("requirements.txt", "torch==3\n")},
		{name: "a file outside by and versionBy", files: write("README.md", "changed\n"), same: true},
		{name: "an empty folder (git has no such thing)", files: mkdir("deps/empty"), same: true},
		{name: "a .git folder inside", files: write("deps/.git/HEAD", "ref: x\n"), same: true},
		{name: "file times", files: touch("deps/a.txt"), same: true},
		{name: "the executable bit", files: chmod("deps/a.txt", 0o755)},
		{name: "a build arg", spec: func(s *Spec) { s.BuildArgs["PY"] = "3.13" }},
		{name: "a build arg added", spec: func(s *Spec) { s.BuildArgs["X"] = "" }},
		{name: "a build arg, ignored", spec: func(s *Spec) { s.BuildArgs["PY"] = "3.13"; s.IgnoreBuildArgsInVersion = true }},
		{name: "the target", spec: func(s *Spec) { s.Target = "runtime" }},
		{name: "the architecture", arch: "arm64"},
		{name: "the order and spelling of the paths", spec: func(s *Spec) { s.By = []string{"./requirements.txt", "deps/", "deps"} }, same: true},
		{name: "versionBy defaults to by", spec: func(s *Spec) { s.VersionBy = []string{"requirements.txt", "deps"} }, same: true},
		{name: "versionBy narrower than by", spec: func(s *Spec) { s.VersionBy = []string{"deps"} }},
		{name: "the Dockerfile's path (not its content)", files: write("docker/Dockerfile", baseFiles()["Dockerfile"]),
			spec: func(s *Spec) { s.Dockerfile = "docker/Dockerfile" }, same: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, root := checkout(t, baseFiles())
			if c.files != nil {
				c.files(dir)
			}
			s := baseSpec()
			if c.spec != nil {
				c.spec(&s)
			}
			arch := "amd64"
			if c.arch != "" {
				arch = c.arch
			}
			got, inputs, err := Version(root, s, arch)
			if err != nil {
				t.Fatal(err)
			}
			if c.same != (got == base) {
				t.Fatalf("version %s, base %s: want same=%v\ninputs:\n%s", got, base, c.same, strings.Join(inputs, "\n"))
			}
		})
	}
}

// The same inputs on another machine (another temp dir, other file times) give the same version:
// what a second agent computes.
func TestVersionIsTheSameInAnotherCheckout(t *testing.T) {
	_, a := checkout(t, baseFiles())
	time.Sleep(10 * time.Millisecond)
	_, b := checkout(t, baseFiles())
	va, _, err := Version(a, baseSpec(), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	vb, _, err := Version(b, baseSpec(), "amd64")
	if err != nil || va != vb {
		t.Fatalf("%s != %s (%v)", va, vb, err)
	}
}

func TestVersionRefusesBadPaths(t *testing.T) {
	files := baseFiles()
	files["escape"] = "->/etc"
	files["deps/up"] = "->../../outside"
	cases := []struct {
		name string
		spec Spec
		want string
	}{
		{"no dockerfile", Spec{}, "empty path"},
		{"missing dockerfile", Spec{Dockerfile: "nope/Dockerfile"}, "no such file"},
		{"absolute dockerfile", Spec{Dockerfile: "/etc/passwd"}, "stay inside"},
		{"dockerfile above the checkout", Spec{Dockerfile: "../Dockerfile"}, "stay inside"},
		{"dockerfile through a link out", Spec{Dockerfile: "escape/passwd"}, "escapes"},
		{"a folder as dockerfile", Spec{Dockerfile: "deps"}, "not a file"},
		{"missing versionBy", Spec{Dockerfile: "Dockerfile", By: []string{"nope"}}, `versionBy "nope"`},
		{"versionBy above the checkout", Spec{Dockerfile: "Dockerfile", VersionBy: []string{"deps/../.."}}, "stay inside"},
		{"versionBy through a link out", Spec{Dockerfile: "Dockerfile", VersionBy: []string{"escape/hosts"}}, "escapes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, root := checkout(t, files)
			_, _, err := Version(root, c.spec, "amd64")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	// A link that points out is hashed as a link (its target's text), never followed.
	_, root := checkout(t, files)
	if _, _, err := Version(root, Spec{Dockerfile: "Dockerfile", VersionBy: []string{"escape", "deps"}}, "amd64"); err != nil {
		t.Fatalf("links as links: %v", err)
	}
}

// A folder's id is git's tree id and a file's git's blob id: what a CNB user reads with
// `git rev-parse HEAD:<path>`.
func TestIDsAreGitsIDs(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed (the agent clones with it): ", err)
	}
	files := map[string]string{
		"src/a.b":         "dot\n", // "a.b" sorts before the folder "a" ("a/"), "a0" after it
		"src/a/x.txt":     "x\n",
		"src/a-":          "dash\n",
		"src/a0":          "zero\n",
		"src/deep/er/f":   "deep\n",
		"src/link":        "->a/x.txt",
		"src/tool.sh":     "#!/bin/sh\n",
		"src/big.bin":     strings.Repeat("weights-", 100_000),
		"src/unicodé.txt": "é\n",
	}
	dir, root := checkout(t, files)
	if err := os.Chmod(filepath.Join(dir, "src/tool.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	run("add", "-A")
	run("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "x")
	if err := os.MkdirAll(filepath.Join(dir, "src/empty/deeper"), 0o755); err != nil { // git does not see it
		t.Fatal(err)
	}
	for _, p := range []string{"src", "src/a", "src/deep"} {
		kind, id, err := pathID(root, p)
		if err != nil || kind != "dir" {
			t.Fatalf("%s: %s %v", p, kind, err)
		}
		if want := run("rev-parse", "HEAD:"+p); id != want {
			t.Errorf("tree %s: %s, git says %s", p, id, want)
		}
	}
	for _, p := range []string{"src/big.bin", "src/tool.sh", "src/link"} {
		_, id, err := pathID(root, p)
		if err != nil {
			t.Fatal(err)
		}
		if want := run("rev-parse", "HEAD:"+p); id != want {
			t.Errorf("blob %s: %s, git says %s", p, id, want)
		}
	}
}

func write(p, content string) func(string) {
	return func(dir string) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(content), 0o644)
	}
}

func mkdir(p string) func(string) {
	return func(dir string) { os.MkdirAll(filepath.Join(dir, filepath.FromSlash(p)), 0o755) }
}

func touch(p string) func(string) {
	return func(dir string) {
		old := time.Now().Add(-48 * time.Hour)
		os.Chtimes(filepath.Join(dir, filepath.FromSlash(p)), old, old)
	}
}

func chmod(p string, mode os.FileMode) func(string) {
	return func(dir string) { os.Chmod(filepath.Join(dir, filepath.FromSlash(p)), mode) }
}
