// Package inpod is what the nimbus CLI does inside a pipeline's Kubernetes pod for the agent's
// Kubernetes executor (agent/executor/kubernetes.go), and the wire format both sides share.
//
// The executor runs every step of a pipeline in one pod: a container per image the pipeline
// uses, each idle until the agent execs a step into it through the API server. The CLI is
// uploaded into the pod's shared tools volume once (the agent's own copy, so its version is the
// agent's), and every step is an exec of
//
//	/.nimbus/bin/nimbus pod step
//
// whose stdin carries one JSON line (a Header: the script or command, its environment, its
// directory, an id) and is then closed (an exec whose stdin stays open does not end when its
// process does). Main runs the step in a process group of its own and notes the group under
// the step's id; a cancel or a job's timeout is a second exec into the same container,
//
//	/.nimbus/bin/nimbus pod kill ID
//
// which kills that group (an exec's process is not ended when its caller goes away). Secrets
// travel in the header, over the exec stream: never in the pod's spec, where anyone who can
// read pods would see them. The agent's death ends nothing in the pod by itself: its restart
// deletes its pods, and every pod ends at the pipeline's cap (activeDeadlineSeconds).
//
// `nimbus pod untar DIR` and `nimbus pod tar DIR` move the checkout in and out of the pod's
// workspace volume with the same code the agent uses on its side (Tar, Untar).
package inpod

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// CommandName is the nimbus CLI's command (`nimbus pod …`).
const CommandName = "pod"

// ToolDir is where the CLI lives in a pipeline pod (a volume every container mounts), and CLI
// its path there.
const (
	ToolDir = "/.nimbus/bin"
	CLI     = ToolDir + "/nimbus"
)

// Header is the first line of a step's stdin.
type Header struct {
	// Script is run by `sh -c`; when empty, Args is the command.
	Script string   `json:"script,omitempty"`
	Args   []string `json:"args,omitempty"`
	// Env is added to the container's own environment (it wins).
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory; "" keeps the container's.
	Dir string `json:"dir,omitempty"`
	// PathAppend is added to the end of PATH (the tool directory).
	PathAppend []string `json:"pathAppend,omitempty"`
	// ID names the step for `nimbus pod kill` (letters, digits, '-'); "" = not killable.
	ID string `json:"id,omitempty"`
}

// StepsDir holds the process group ids of the running steps, by step id: in the tool volume,
// which any user may write. (Each container has its own process ids: a kill is exec'ed into
// the step's container.) NIMBUS_POD_STEPS overrides it, for tests.
const StepsDir = ToolDir + "/.steps"

func pidFile(id string) string {
	dir := StepsDir
	if d := os.Getenv("NIMBUS_POD_STEPS"); d != "" {
		dir = d
	}
	return filepath.Join(dir, filepath.Base(id))
}

// KillCommand is the exec command that kills the step with the id.
func KillCommand(id string) []string { return []string{CLI, CommandName, "kill", id} }

// Command is the exec command of a step.
func Command() []string { return []string{CLI, CommandName, "step"} }

// WriteHeader writes h as the first line of a step's stdin.
func WriteHeader(w io.Writer, h Header) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Main runs `nimbus pod SUBCOMMAND`: step, tar DIR or untar DIR.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: nimbus pod step | kill ID | tar DIR | untar DIR (used by nimbus-agent's Kubernetes executor)")
		return 2
	}
	switch {
	case args[0] == "step" && len(args) == 1:
		return step(stdin, stdout, stderr)
	case args[0] == "kill" && len(args) == 2:
		if err := kill(args[1]); err != nil {
			fmt.Fprintln(stderr, "nimbus pod kill:", err)
			return 1
		}
		return 0
	case args[0] == "tar" && len(args) == 2:
		if err := Tar(args[1], stdout); err != nil {
			fmt.Fprintln(stderr, "nimbus pod tar:", err)
			return 1
		}
		return 0
	case args[0] == "untar" && len(args) == 2:
		if err := Untar(args[1], stdin); err != nil {
			fmt.Fprintln(stderr, "nimbus pod untar:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "nimbus pod: unknown arguments %q\n", args)
	return 2
}

// mergeEnv lays over on base; PathAppend goes at the end of PATH.
func mergeEnv(base []string, over map[string]string, pathAppend []string) []string {
	m := map[string]string{}
	var order []string
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = v
	}
	for k, v := range over {
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = v
	}
	if len(pathAppend) > 0 {
		p, ok := m["PATH"]
		if !ok {
			p = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
			order = append(order, "PATH")
		}
		m["PATH"] = strings.Join(append([]string{p}, pathAppend...), ":")
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+m[k])
	}
	return out
}

func lookPath(name string, env []string) (string, error) {
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(p) {
				c := filepath.Join(dir, name)
				if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
					return c, nil
				}
			}
		}
	}
	return "", exec.ErrNotFound
}

// Tar writes dir's tree to w: regular files, directories and symbolic links, with their modes
// and modification times; names are relative to dir.
func Tar(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // sockets, FIFOs, devices: nothing a checkout needs
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// Untar extracts the tar stream r into dir (created when missing). A name that would land
// outside dir is refused, and so is a write through a symbolic link (os.Root).
func Untar(dir string, r io.Reader) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	type dirTime struct {
		name string
		t    time.Time
	}
	var dirs []dirTime
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(hdr.Name))
		if name == "." {
			continue
		}
		if !filepath.IsLocal(name) {
			return fmt.Errorf("%q is outside the directory", hdr.Name)
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
			_ = root.Chmod(name, mode)
			dirs = append(dirs, dirTime{name, hdr.ModTime})
		case tar.TypeReg:
			if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			_ = root.Remove(name)
			f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			err = errors.Join(err, f.Close())
			if err != nil {
				return err
			}
			_ = root.Chmod(name, mode)
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		case tar.TypeSymlink:
			if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			_ = root.Remove(name)
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		}
	}
	// Directories last: writing into one changes its modification time.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirs[i].name, dirs[i].t, dirs[i].t)
	}
	return nil
}

// Upload is the shell command that writes the CLI from stdin into ToolDir of a container that
// has only a shell, cat and chmod (what script images have): the executor's first exec into a
// pod, before any `nimbus pod` command exists there.
func Upload() []string {
	return []string{"/bin/sh", "-c", "mkdir -p " + ToolDir + " && cat > " + CLI + ".tmp && chmod 755 " + CLI + ".tmp && mv " + CLI + ".tmp " + CLI}
}
