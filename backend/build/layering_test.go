package build_test

import (
	"os"
	"slices"
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
	// Reads too: build's tables are read through build's exported reads (reads.go), so a
	// renamed column breaks build alone. Tests may look at rows to assert what a service did.
	for _, v := range layering.CheckReads(code, rules[:1], false) {
		t.Error(v)
	}
	checkHTTP(t, code) // only handler files speak HTTP (httprule_test.go)
	domains := []string{"artifacts", "auth", "billing", "build", "git", "logs", "org", "registry", "repo", "scheduler"}
	imports := []layering.ImportRule{
		{From: module + "/backend/build", To: module + "/backend/scheduler", Why: "the scheduler drives builds through build.Lifecycle, never the reverse"},
		{From: module + "/agent", To: module + "/backend", Why: "the agent shares with the server only agent/protocol, agent/tunnel and the root internal/"},
		{From: module + "/backend/billing", To: module + "/backend/pipeline/spec", Why: "billing prices runner classes, which live in backend/runnerclass, not in the .cnb.yml engine"},
		// The root internal/ (backoff, …) is what agent and backend both import; it stays neutral.
		{From: module + "/internal", To: module + "/backend", Why: "internal/ is shared by agent and backend, so it imports neither"},
		{From: module + "/internal", To: module + "/agent", Why: "internal/ is shared by agent and backend, so it imports neither"},
	}
	for _, d := range domains {
		imports = append(imports, layering.ImportRule{From: module + "/backend/server", To: module + "/backend/" + d,
			Why: "server wires routes and middleware; backend/app assembles the domains"})
	}
	// Every .cnb/*.yml file is parsed in pipeline/spec: no other backend package parses YAML.
	// Allowed: server reads the OpenAPI document (openapi.yaml), and config's tests read the
	// deploy manifests; neither is a pipeline file. backend/pipeline holds spec alone.
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !slices.Contains([]string{"pipeline", "server", "config"}, e.Name()) {
			imports = append(imports, layering.ImportRule{From: module + "/backend/" + e.Name(), To: "gopkg.in/yaml.v3",
				Why: "every .cnb/*.yml file is parsed in backend/pipeline/spec"})
		}
	}
	// What agent and backend share lives in the root internal/ (envflag, envfile, userpath,
	// testenv, backoff) or is the wire between them (agent/protocol, agent/tunnel's frames): no
	// backend package reaches into the rest of the agent. backend/app (the all-in-one server's
	// built-in agent) and backend/cmd (the CLI is the steps' lifeline init) assemble binaries and
	// may; the root agent package has no subpath to name, and only those two import it.
	agentDirs, err := os.ReadDir("../../agent")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "app" || e.Name() == "cmd" {
			continue
		}
		for _, a := range agentDirs {
			if a.IsDir() && a.Name() != "protocol" && a.Name() != "tunnel" {
				imports = append(imports, layering.ImportRule{From: module + "/backend/" + e.Name(), To: module + "/agent/" + a.Name(),
					Why: "shared code lives in the root internal/; backend talks to the agent only through agent/protocol and agent/tunnel"})
			}
		}
	}
	for _, v := range layering.CheckImports(code, imports) {
		t.Error(v)
	}
}
