package build_test

import (
	"testing"

	"github.com/nimbus-build/nimbus/backend/internal/layering"
)

const module = "github.com/nimbus-build/nimbus"

// No code outside backend/build — tests included: their fixtures seed through buildtest —
// writes builds, pipelines, stages, jobs or schedules, and none outside backend/scheduler writes
// agents: everything else calls their services. The checker's own test
// (backend/internal/layering) shows it catches each way of writing.
func TestOnlyBuildWritesBuildRows(t *testing.T) {
	code, err := layering.Load("../..", "./...")
	if err != nil {
		t.Fatal(err)
	}
	if len(code.Packages) < 30 {
		t.Fatalf("loaded %d packages: the pattern missed the module", len(code.Packages))
	}
	rules := []layering.Rule{
		{Owner: module + "/backend/build", Tables: []string{"builds", "pipelines", "stages", "jobs", "schedules"}},
		{Owner: module + "/backend/scheduler", Tables: []string{"agents"}},
	}
	for _, v := range layering.Check(code, rules) {
		t.Error(v)
	}
	domains := []string{"artifacts", "auth", "billing", "build", "git", "logs", "org", "registry", "repo", "scheduler"}
	imports := []layering.ImportRule{
		{From: module + "/backend/build", To: module + "/backend/scheduler", Why: "the scheduler drives builds through build.Lifecycle, never the reverse"},
		{From: module + "/agent", To: module + "/backend", Why: "the agent shares only agent/protocol with the server"},
		// The root internal/ (backoff, …) is what agent and backend both import; it stays neutral.
		{From: module + "/internal", To: module + "/backend", Why: "internal/ is shared by agent and backend, so it imports neither"},
		{From: module + "/internal", To: module + "/agent", Why: "internal/ is shared by agent and backend, so it imports neither"},
	}
	for _, d := range domains {
		imports = append(imports, layering.ImportRule{From: module + "/backend/server", To: module + "/backend/" + d,
			Why: "server wires routes and middleware; backend/app assembles the domains"})
	}
	for _, v := range layering.CheckImports(code, imports) {
		t.Error(v)
	}
}
