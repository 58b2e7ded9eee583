package build

import (
	"encoding/json"
	"strings"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
)

// Diagnostic is one finding of linting or planning the build's .cnb.yml, as the build page shows
// it: what `nimbus lint` prints, with the lines it points at.
type Diagnostic struct {
	Severity string `json:"severity"` // error, warning or info
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Message  string `json:"message"`
	// Hint says how to fix it: "did you mean …", the known tags, …
	Hint    string       `json:"hint,omitempty"`
	Excerpt *ExcerptJSON `json:"excerpt,omitempty"`
}

// ExcerptJSON is the offending line with a line of context each side; the caret goes under
// Column of Line.
type ExcerptJSON struct {
	FirstLine int      `json:"first_line"`
	Lines     []string `json:"lines"`
}

// maxDiagnostics bounds what one build keeps: a file with hundreds of findings shows the first.
const maxDiagnostics = 50

// diagnosticsOf turns diagnostics into the build's stored JSON (empty when there are none). The
// excerpts come from the main file's src and the includes the compile read from the commit; a
// remote include has none.
func (c *compiled) diagnosticsOf(ds spec.Diagnostics) string {
	if len(ds) == 0 {
		return ""
	}
	out := make([]Diagnostic, 0, min(len(ds), maxDiagnostics))
	for _, d := range ds[:min(len(ds), maxDiagnostics)] {
		j := Diagnostic{Severity: d.Severity.String(), File: d.Pos.File, Line: d.Pos.Line, Column: d.Pos.Column,
			Message: d.Message, Hint: d.Hint}
		if ex := spec.ExcerptAt(c.source(d.Pos.File), d.Pos); ex != nil {
			j.Excerpt = &ExcerptJSON{FirstLine: ex.FirstLine, Lines: ex.Lines}
		}
		out = append(out, j)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}

// source is the text of a file the compile read: the main file, or an include from the commit.
func (c *compiled) source(file string) []byte {
	if file == ConfigFile || file == "" {
		return c.src
	}
	if c.files == nil || strings.Contains(file, "://") {
		return nil
	}
	if r, ok := c.files.read[file]; ok && r.err == nil {
		return r.data
	}
	return nil
}

// parseDiagnostics reads a build's stored diagnostics; anything unreadable is none.
func parseDiagnostics(s string) []Diagnostic {
	var out []Diagnostic
	if s != "" && json.Unmarshal([]byte(s), &out) == nil {
		return out
	}
	return []Diagnostic{}
}
