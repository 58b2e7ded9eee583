package layering

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var buildRule = Rule{Owner: "github.com/nimbus-build/nimbus/backend/build", Tables: []string{"builds", "pipelines", "stages", "jobs", "schedules"}}

// The check finds every kind of write in testdata/writer (a package outside build that writes
// build's tables) and none of its reads.
func TestCheckFindsEveryWriteAndNoRead(t *testing.T) {
	code, err := Load(".", "./testdata/writer")
	if err != nil {
		t.Fatal(err)
	}
	got := Check(code, []Rule{buildRule})
	var lines []string
	for _, v := range got {
		if v.Owner != buildRule.Owner {
			t.Errorf("unexpected violation %s", v)
		}
		lines = append(lines, fmt.Sprintf("%s:%d", filepath.Base(v.Pos.Filename), v.Pos.Line))
	}
	want := []string{"writer.go:16", "writer.go:18", "writer.go:20", "writer.go:21", "writer.go:22", "writer.go:24",
		"writer_ext_test.go:12", "writer_test.go:14"}
	if !slices.Equal(lines, want) {
		t.Fatalf("violations at %v, want %v:\n%v", lines, want, got)
	}
	if s := got[0].String(); !strings.Contains(s, "Update on build.Pipeline") || !strings.Contains(s, "only github.com/nimbus-build/nimbus/backend/build may write") {
		t.Fatalf("message %q", s)
	}
	// The owner itself may write its tables (and models of other packages are no rule's here).
	own := Rule{Owner: "github.com/nimbus-build/nimbus/backend/internal/layering/testdata/writer", Tables: buildRule.Tables}
	if got := Check(code, []Rule{own}); len(got) != 0 {
		t.Fatalf("the owner's own writes were reported: %v", got)
	}
}

func TestCheckImports(t *testing.T) {
	code, err := Load(".", "./testdata/writer")
	if err != nil {
		t.Fatal(err)
	}
	got := CheckImports(code, []ImportRule{{From: "github.com/nimbus-build/nimbus/backend/internal", To: "github.com/nimbus-build/nimbus/backend/build", Why: "test"}})
	if len(got) != 1 || !strings.Contains(got[0], "imports github.com/nimbus-build/nimbus/backend/build: test") {
		t.Fatalf("import violations %v", got)
	}
	// The same import from a test file only is not reported under NotTests.
	got = CheckImports(code, []ImportRule{{From: "github.com/nimbus-build/nimbus/backend/internal", To: "testing", Why: "test", NotTests: true}})
	if len(got) != 0 {
		t.Fatalf("a test file's import was reported under NotTests: %v", got)
	}
	if got = CheckImports(code, []ImportRule{{From: "github.com/nimbus-build/nimbus/backend/internal", To: "testing", Why: "test"}}); len(got) != 1 {
		t.Fatalf("a test file's import was not reported: %v", got)
	}
}

// CheckReads finds every way testdata/writer names build's tables or models when it reads them
// (and the writes that name them too), but nothing that touches other tables; the owner reads
// freely.
func TestCheckReadsFindsEveryRead(t *testing.T) {
	code, err := Load(".", "./testdata/writer")
	if err != nil {
		t.Fatal(err)
	}
	got := CheckReads(code, []Rule{buildRule}, false)
	var lines []string
	for _, v := range got {
		lines = append(lines, fmt.Sprintf("%s:%d", filepath.Base(v.Pos.Filename), v.Pos.Line))
	}
	want := []string{"writer.go:16", "writer.go:20", "writer.go:22", "writer.go:30", "writer.go:32", "writer.go:33", "writer.go:34", "writer.go:34"}
	if !slices.Equal(lines, want) {
		t.Fatalf("reads at %v, want %v:\n%v", lines, want, got)
	}
	if s := got[5].String(); !strings.Contains(s, `Table of table "pipelines"`) || !strings.Contains(s, "which only github.com/nimbus-build/nimbus/backend/build may read") {
		t.Fatalf("message %q", s)
	}
	own := Rule{Owner: "github.com/nimbus-build/nimbus/backend/internal/layering/testdata/writer", Tables: buildRule.Tables}
	if got := CheckReads(code, []Rule{own}, true); len(got) != 0 {
		t.Fatalf("the owner's own reads were reported: %v", got)
	}
}

// CheckHTTP finds, outside the files the handler rule accepts, each import of a framework
// package, each http.Status… constant (under any import name), http.Error and WriteHeader with
// a plain number, and nothing a client may do.
func TestCheckHTTP(t *testing.T) {
	code, err := Load(".", "./testdata/httpuse")
	if err != nil {
		t.Fatal(err)
	}
	framework := []string{"github.com/gin-gonic/gin", "github.com/nimbus-build/nimbus/backend/api"}
	handler := func(_, file string) bool { return file == "http.go" }
	var lines []string
	for _, u := range CheckHTTP(code, framework, handler) {
		lines = append(lines, fmt.Sprintf("%s:%d %s", filepath.Base(u.Pos.Filename), u.Pos.Line, u.What))
	}
	want := []string{"client.go:19 names http.StatusNoContent",
		`service.go:11 imports "github.com/nimbus-build/nimbus/backend/api"`,
		"service.go:18 names http.StatusNotFound",
		"service.go:24 names http.Error",
		"service.go:27 calls WriteHeader",
		`service.go:9 imports "github.com/gin-gonic/gin"`}
	if !slices.Equal(lines, want) {
		t.Fatalf("found\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// The handler files are the rule's to name: with every file a handler file, nothing is found.
	if got := CheckHTTP(code, framework, func(string, string) bool { return true }); len(got) != 0 {
		t.Fatalf("handler files reported: %v", got)
	}
}
