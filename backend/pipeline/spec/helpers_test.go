package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// mapFS is an in-memory repository for includes.
type mapFS map[string]string

func (m mapFS) ReadFile(p string) ([]byte, error) {
	s, ok := m[p]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	return []byte(s), nil
}

// findDiag returns the first diagnostic of severity sev whose message contains substr.
func findDiag(ds Diagnostics, sev Severity, substr string) (Diagnostic, bool) {
	for _, d := range ds {
		if d.Severity == sev && strings.Contains(d.Message, substr) {
			return d, true
		}
	}
	return Diagnostic{}, false
}

// mustPlan compiles src for the trigger and fails the test on any error.
func mustPlan(t *testing.T, src string, trig Trigger, opts Options) *protocol.PlanSet {
	t.Helper()
	set, ds, err := Compile([]byte(src), trig, opts)
	if err != nil {
		var ve *ValidationError
		errors.As(err, &ve)
		t.Fatalf("Compile: %v\nall diagnostics:\n%v", err, ds)
	}
	return set
}

// onlyPipeline returns the single pipeline of a plan set.
func onlyPipeline(t *testing.T, set *protocol.PlanSet) protocol.Plan {
	t.Helper()
	if len(set.Pipelines) != 1 {
		t.Fatalf("got %d pipelines, want 1: %+v", len(set.Pipelines), set.Pipelines)
	}
	return set.Pipelines[0]
}

func pipelineNames(set *protocol.PlanSet) []string {
	var out []string
	for _, p := range set.Pipelines {
		out = append(out, p.Name)
	}
	return out
}

func stageNames(p protocol.Plan) []string {
	var out []string
	for _, s := range p.Stages {
		out = append(out, s.Name)
	}
	return out
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
