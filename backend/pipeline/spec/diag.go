package spec

import (
	"fmt"
	"sort"
	"strings"
)

// Severity says whether a diagnostic stops a build.
type Severity int

const (
	// SeverityError makes the file unusable: nothing is planned.
	SeverityError Severity = iota
	// SeverityWarning is reported by lint and otherwise ignored (lint --strict makes it an error).
	SeverityWarning
	// SeverityInfo is advice on a file that is fine as it is (beyond CNB): lint prints it, and
	// even --strict leaves it advice.
	SeverityInfo
)

func (s Severity) String() string {
	switch s {
	case SeverityWarning:
		return "warning"
	case SeverityInfo:
		return "info"
	}
	return "error"
}

// Pos is a place in a file; Line and Column are 1-based and 0 when unknown.
type Pos struct {
	File   string
	Line   int
	Column int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Column == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Diagnostic is one finding of lint or plan.
type Diagnostic struct {
	Pos      Pos
	Severity Severity
	Message  string
	// Hint, when set, says how to fix it ("did you mean …", the known tags, …).
	Hint string
}

// String formats the diagnostic as FILE:LINE:COL: severity: message (hint).
func (d Diagnostic) String() string {
	s := fmt.Sprintf("%s: %s: %s", d.Pos, d.Severity, d.Message)
	if d.Hint != "" {
		s += " (" + d.Hint + ")"
	}
	return s
}

// Diagnostics is a list of findings, sorted by file and position once collected.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Filter returns the diagnostics of one severity.
func (ds Diagnostics) Filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// Problems returns the errors and warnings: everything but advice.
func (ds Diagnostics) Problems() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity != SeverityInfo {
			out = append(out, d)
		}
	}
	return out
}

// Strict returns the list with every warning turned into an error (lint --strict); advice
// stays advice.
func (ds Diagnostics) Strict() Diagnostics {
	out := make(Diagnostics, len(ds))
	for i, d := range ds {
		if d.Severity == SeverityWarning {
			d.Severity = SeverityError
		}
		out[i] = d
	}
	return out
}

// Err returns a *ValidationError holding the errors, or nil when there are none.
func (ds Diagnostics) Err() error {
	errs := ds.Filter(SeverityError)
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Diagnostics: errs}
}

// ValidationError is returned when a .cnb.yml has errors; errors.As gets at the diagnostics.
type ValidationError struct {
	Diagnostics Diagnostics
}

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// diags collects diagnostics while a file is processed.
type diags struct {
	list Diagnostics
	seen map[Diagnostic]bool
	// unchecked are the positions of references lint left to unread remote includes: the
	// errors their stand-in values cause there are not the file's (resolveReferences).
	unchecked map[Pos]bool
}

func (d *diags) add(pos Pos, sev Severity, hint, format string, args ...any) {
	if sev == SeverityError && d.unchecked[pos] {
		return
	}
	diag := Diagnostic{Pos: pos, Severity: sev, Message: fmt.Sprintf(format, args...), Hint: hint}
	// An anchor used twice reports its problems once.
	if d.seen == nil {
		d.seen = map[Diagnostic]bool{}
	}
	if d.seen[diag] {
		return
	}
	d.seen[diag] = true
	d.list = append(d.list, diag)
}

func (d *diags) errorf(pos Pos, format string, args ...any) {
	d.add(pos, SeverityError, "", format, args...)
}

func (d *diags) warnf(pos Pos, format string, args ...any) {
	d.add(pos, SeverityWarning, "", format, args...)
}

func (d *diags) infoHint(pos Pos, hint, format string, args ...any) {
	d.add(pos, SeverityInfo, hint, format, args...)
}

// errorHint and warnHint carry a hint.
func (d *diags) errorHint(pos Pos, hint, format string, args ...any) {
	d.add(pos, SeverityError, hint, format, args...)
}

func (d *diags) warnHint(pos Pos, hint, format string, args ...any) {
	d.add(pos, SeverityWarning, hint, format, args...)
}

// fromErr records err at pos, keeping the hint of a *hintError.
func (d *diags) fromErr(pos Pos, sev Severity, err error) {
	if he, ok := err.(*hintError); ok {
		d.add(pos, sev, he.hint, "%s", he.msg)
		return
	}
	d.add(pos, sev, "", "%s", err.Error())
}

// sorted returns the diagnostics ordered by file, line and column, the main file first.
func (d *diags) sorted(mainFile string) Diagnostics {
	out := append(Diagnostics(nil), d.list...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.File != b.File {
			if a.File == mainFile || b.File == mainFile {
				return a.File == mainFile
			}
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return out
}
