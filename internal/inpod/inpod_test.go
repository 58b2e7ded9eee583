//go:build unix

package inpod

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStepRunsTheHeadersScriptWithItsEnvironment(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name     string
		h        Header
		code     int
		stdout   string
		stderrIn string
	}{
		{name: "script and env", h: Header{Script: `echo "$GREETING $SECRET"; pwd`, Env: map[string]string{"GREETING": "hi", "SECRET": "s3"}, Dir: dir},
			stdout: "hi s3\n" + dir + "\n"},
		{name: "exit code", h: Header{Script: "echo out; echo err >&2; exit 7"}, code: 7, stdout: "out\n", stderrIn: "err"},
		{name: "args without a shell", h: Header{Args: []string{"echo", "a", "b"}}, stdout: "a b\n"},
		{name: "path append", h: Header{Script: `echo "$PATH"`, Env: map[string]string{"PATH": "/bin"}, PathAppend: []string{"/.nimbus/bin"}},
			stdout: "/bin:/.nimbus/bin\n"},
		{name: "nothing to run", h: Header{}, code: 125, stderrIn: "nothing to run"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in, out, errOut bytes.Buffer
			if err := WriteHeader(&in, c.h); err != nil {
				t.Fatal(err)
			}
			code := Main([]string{"step"}, &in, &out, &errOut)
			if code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, errOut.String())
			}
			if c.stdout != "" && out.String() != c.stdout {
				t.Fatalf("stdout %q, want %q", out.String(), c.stdout)
			}
			if !strings.Contains(errOut.String(), c.stderrIn) {
				t.Fatalf("stderr %q lacks %q", errOut.String(), c.stderrIn)
			}
		})
	}
}

// `nimbus pod kill ID` is how the agent stops a step: the whole process group goes, a
// background child included; killing a step that has ended is no error.
func TestKillEndsTheStepsProcessGroup(t *testing.T) {
	t.Setenv("NIMBUS_POD_STEPS", filepath.Join(t.TempDir(), "steps"))
	pidFile := filepath.Join(t.TempDir(), "child")
	var in bytes.Buffer
	if err := WriteHeader(&in, Header{ID: "step-1", Script: "sleep 300 & echo $! > " + pidFile + "; wait"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { done <- Main([]string{"step"}, &in, io.Discard, io.Discard) }()
	var pid []byte
	for deadline := time.Now().Add(10 * time.Second); len(pid) == 0 || !bytes.HasSuffix(pid, []byte("\n")); {
		if time.Now().After(deadline) {
			t.Fatal("the step did not start its child")
		}
		time.Sleep(20 * time.Millisecond)
		pid, _ = os.ReadFile(pidFile)
	}
	select {
	case code := <-done:
		t.Fatalf("the step ended (%d) with its stdin: only a kill may end it", code)
	case <-time.After(200 * time.Millisecond):
	}
	var errOut bytes.Buffer
	if code := Main([]string{"kill", "step-1"}, nil, io.Discard, &errOut); code != 0 {
		t.Fatalf("kill: exit %d: %s", code, errOut.String())
	}
	select {
	case code := <-done:
		if code != 128+9 {
			t.Fatalf("exit %d, want 137 (killed)", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the step outlived its kill")
	}
	proc := "/proc/" + strings.TrimSpace(string(pid))
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile(proc + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			break // gone, or a zombie waiting for a reaper that is not us
		}
		if time.Now().After(deadline) {
			t.Fatal("the step's background child outlived it")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := Main([]string{"kill", "step-1"}, nil, io.Discard, &errOut); code != 0 {
		t.Fatalf("a kill after the end: exit %d: %s", code, errOut.String())
	}
}

func TestTarUntarRoundTrip(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, ".git", "refs"), 0o755))
	must(os.WriteFile(filepath.Join(src, "train.sh"), []byte("#!/bin/sh\necho go\n"), 0o755))
	must(os.WriteFile(filepath.Join(src, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	must(os.Symlink("train.sh", filepath.Join(src, "run")))
	var buf bytes.Buffer
	must(Tar(src, &buf))
	dst := filepath.Join(t.TempDir(), "workspace")
	must(Untar(dst, &buf))
	b, err := os.ReadFile(filepath.Join(dst, "run"))
	must(err)
	if string(b) != "#!/bin/sh\necho go\n" {
		t.Fatalf("through the link: %q", b)
	}
	fi, err := os.Stat(filepath.Join(dst, "train.sh"))
	must(err)
	if fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v, want 0755", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(dst, ".git", "HEAD")); string(b) != "ref: refs/heads/main\n" {
		t.Fatalf(".git/HEAD: %q", b)
	}
	var names []string
	must(filepath.WalkDir(dst, func(p string, _ os.DirEntry, err error) error {
		rel, _ := filepath.Rel(dst, p)
		names = append(names, rel)
		return err
	}))
	want := []string{".", ".git", ".git/HEAD", ".git/refs", "run", "train.sh"}
	if !slices.Equal(names, want) {
		t.Fatalf("tree %v, want %v", names, want)
	}
}

func TestUntarRefusesNamesOutsideTheDirectory(t *testing.T) {
	for _, name := range []string{"../escape", "/etc/escape", "a/../../escape"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte("x"))
		tw.Close()
		parent := t.TempDir()
		err := Untar(filepath.Join(parent, "w"), &buf)
		if err == nil {
			t.Fatalf("%q was extracted", name)
		}
		if _, err := os.Stat(filepath.Join(parent, "escape")); err == nil {
			t.Fatalf("%q wrote outside", name)
		}
	}
	// A link pointing out, then a file written through it: refused by the root.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	outside := t.TempDir()
	tw.WriteHeader(&tar.Header{Name: "out", Linkname: outside, Typeflag: tar.TypeSymlink})
	tw.WriteHeader(&tar.Header{Name: "out/file", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	if err := Untar(filepath.Join(t.TempDir(), "w"), &buf); err == nil {
		t.Fatal("a write through a link to outside was allowed")
	}
	if _, err := os.Stat(filepath.Join(outside, "file")); err == nil {
		t.Fatal("a file was written through the link")
	}
}
