package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/internal/envflag"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// repoDir reads include files from the directory of the .cnb.yml, taken as the repository root.
type repoDir string

func (d repoDir) ReadFile(p string) ([]byte, error) {
	// spec cleans paths to be relative to the root; what it hands over follows the path rule,
	// as the server's git reader requires, so lint and the server read the same files.
	if err := userpath.Check(p); err != nil {
		return nil, err
	}
	return readLimited(filepath.Join(string(d), filepath.FromSlash(p)))
}

// readLimited reads a pipeline file, refusing one larger than the server reads from git (a
// *spec.FileTooLargeError), so a file lints as it builds.
func readLimited(name string) ([]byte, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if info.Mode().IsRegular() && info.Size() > git.MaxFileSize {
		return nil, &spec.FileTooLargeError{Size: info.Size(), Limit: git.MaxFileSize}
	}
	return os.ReadFile(name)
}

// loadSpec reads FILE (default .cnb.yml) and parses it with the limits; it returns the file's
// bytes, the engine options for it and the Config. A file over the server's size limit is not
// read: its Config says so, as a build of it would.
func loadSpec(args []string, limits spec.Limits) ([]byte, spec.Options, *spec.Config, error) {
	file := ".cnb.yml"
	switch len(args) {
	case 0:
	case 1:
		file = args[0]
	default:
		return nil, spec.Options{}, nil, fmt.Errorf("expected at most one FILE, got %d arguments", len(args))
	}
	if err := config.CheckLimits(limits); err != nil {
		return nil, spec.Options{}, nil, err
	}
	opts := spec.Options{File: file, Files: repoDir(filepath.Dir(file)), Limits: limits}
	src, err := readLimited(file)
	var tl *spec.FileTooLargeError
	if errors.As(err, &tl) {
		return nil, opts, spec.Unreadable(opts, err), nil
	}
	if err != nil {
		return nil, spec.Options{}, nil, err
	}
	cfg, _ := spec.Parse(src, opts)
	return src, opts, cfg, nil
}

// displayPath shows an included file's path beside the main file, so it can be opened as printed.
func displayPath(mainFile string, d spec.Diagnostic) string {
	if strings.HasPrefix(d.Pos.File, mainFile) || d.Pos.File == "" || strings.Contains(d.Pos.File, "://") {
		return d.Pos.File
	}
	return filepath.Join(filepath.Dir(mainFile), filepath.FromSlash(d.Pos.File))
}

// writeDiagnostics prints each diagnostic as FILE:LINE:COL: severity: message (hint), followed
// by the lines it points at with a caret under the column (for files that can be read: the
// main one and local includes).
func writeDiagnostics(w io.Writer, src []byte, opts spec.Options, ds spec.Diagnostics) {
	for _, d := range ds {
		text := src
		if d.Pos.File != opts.File {
			text = nil
			if opts.Files != nil && d.Pos.File != "" && !strings.Contains(d.Pos.File, "://") {
				text, _ = opts.Files.ReadFile(d.Pos.File)
			}
		}
		ex := spec.ExcerptAt(text, d.Pos)
		d.Pos.File = displayPath(opts.File, d)
		fmt.Fprintln(w, d.String())
		fmt.Fprint(w, ex.String())
	}
}

// jsonDiagnostic is one entry of `nimbus lint --json`.
type jsonDiagnostic struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

type jsonLint struct {
	Errors   []jsonDiagnostic `json:"errors"`
	Warnings []jsonDiagnostic `json:"warnings"`
	Info     []jsonDiagnostic `json:"info"`
}

func lintJSON(mainFile string, ds spec.Diagnostics) jsonLint {
	out := jsonLint{Errors: []jsonDiagnostic{}, Warnings: []jsonDiagnostic{}, Info: []jsonDiagnostic{}}
	for _, d := range ds {
		jd := jsonDiagnostic{File: displayPath(mainFile, d), Line: d.Pos.Line, Column: d.Pos.Column, Message: d.Message, Hint: d.Hint}
		switch d.Severity {
		case spec.SeverityError:
			out.Errors = append(out.Errors, jd)
		case spec.SeverityWarning:
			out.Warnings = append(out.Warnings, jd)
		default:
			out.Info = append(out.Info, jd)
		}
	}
	return out
}

func lintCommand() command {
	return command{summary: "check a .cnb.yml for errors and warnings", run: runLint}
}

func runLint(_ context.Context, e env, args []string) int {
	var strict, asJSON bool
	fs := envflag.New("lint", "Usage: nimbus lint [--strict] [--json] [FILE]\n\n"+
		"Checks FILE (default .cnb.yml) and the files it includes, read from FILE's directory as the\n"+
		"repository root. Prints FILE:LINE:COL: error|warning|info: message lines, each followed by\n"+
		"the lines it points at with a caret under the column, and exits 1 when\n"+
		"there are errors. Info is advice (beyond CNB) on a file that is fine as it is. Remote\n"+
		"includes are not fetched. The limits are the server's defaults unless set here: a file\n"+
		"over a limit, or over 1 MiB (the largest file the server reads), is an error.")
	fs.Bool(&strict, "strict", "NIMBUS_LINT_STRICT", false, "treat warnings as errors (info stays advice)")
	fs.Bool(&asJSON, "json", "", false, `print {"errors":[…],"warnings":[…],"info":[…]} instead of lines`)
	var limits spec.Limits
	config.LimitFlags(fs, &limits)
	if err := fs.Parse(args, e.getenv, e.stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(e.stderr, "nimbus:", err)
		return 2
	}
	src, opts, cfg, err := loadSpec(fs.Args(), limits)
	if err != nil {
		fmt.Fprintln(e.stderr, "nimbus lint:", err)
		return 2
	}
	ds := cfg.Diagnostics()
	if strict {
		ds = ds.Strict()
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(lintJSON(opts.File, ds)); err != nil {
			fmt.Fprintln(e.stderr, "nimbus lint:", err)
			return 2
		}
	} else {
		writeDiagnostics(e.stdout, src, opts, ds)
	}
	if ds.HasErrors() {
		return 1
	}
	return 0
}
