package build_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/internal/layering"
)

const module = "github.com/nimbus-build/nimbus"

// No code outside backend/build — tests included: their fixtures seed through buildtest —
// writes builds, pipelines, stages, jobs, schedules, commit statuses, build keys, build waits or
// metrics, and none outside backend/scheduler writes
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
		{Owner: module + "/backend/build", Tables: []string{"builds", "pipelines", "stages", "jobs", "schedules", "commit_statuses", "build_keys", "build_waits", "metrics"}},
		{Owner: module + "/backend/scheduler", Tables: []string{"agents"}},
		{Owner: module + "/backend/pull", Tables: []string{"pull_requests", "pull_reviews", "branch_rules", "pull_settings", "pull_comments", "pull_reviewers"}},
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
		{From: module + "/agent", To: module + "/backend", Why: "the agent shares with the server only the root internal/"},
		// The scheduler is queues, fairness, locks and the reaper. The agent API (backend/agentapi)
		// composes it with build and logs; billing is reached through its Meter, adapted
		// in backend/app; an end's effects come from build's OnEnded hook. Tests may build
		// worlds from the real services.
		{From: module + "/backend/scheduler", To: module + "/backend/repo", Why: "the scheduler reads secrets through its Secrets interface; imports and child builds are build's", NotTests: true},
		{From: module + "/backend/scheduler", To: module + "/backend/logs", Why: "log uploads are backend/agentapi's", NotTests: true},
		{From: module + "/backend/scheduler", To: module + "/backend/billing", Why: "the scheduler asks billing through its Meter (adapted in backend/app); settling and the billing tick are billing's own", NotTests: true},
		{From: module + "/backend/scheduler", To: module + "/backend/agentapi", Why: "the agent API composes the scheduler, never the reverse"},
		{From: module + "/backend/build", To: module + "/backend/agentapi", Why: "the agent API composes build, never the reverse"},
		{From: module + "/backend/agentapi", To: module + "/backend/repo", Why: "a job's imports and the repo a child build names are resolved in build, with the pipeline's rights"},
		// build and the workspace room show what a pipeline cost; billing computes it. The
		// figures come through build.Meter, adapted in backend/app (app.Usage).
		{From: module + "/backend/build", To: module + "/backend/billing", Why: "build shows billing's figures through build.Meter (app.Usage); it does no money", NotTests: true},
		{From: module + "/backend/workspace", To: module + "/backend/billing", Why: "workspaces show billing's figures through build.Meter (app.Usage); they do no money", NotTests: true},
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
	// What agent and backend share lives in the root internal/: the wire between them
	// (internal/protocol, internal/tunnelwire), the steps' lifeline, envflag, envfile, userpath,
	// testenv and backoff. No backend package imports the agent, except backend/app, which
	// assembles the all-in-one server and starts its built-in agent (the one composition root
	// that holds both sides; the agent never imports backend, rule above). Tests may: the
	// tunnel's and the CLI's integration tests drive a real agent.
	for _, e := range entries {
		if e.IsDir() && e.Name() != "app" {
			imports = append(imports, layering.ImportRule{From: module + "/backend/" + e.Name(), To: module + "/agent",
				Why: "agent and backend share only the root internal/ (backend/app alone starts the built-in agent)", NotTests: true})
		}
	}
	// And the root internal/ is the only room outside agent/ that the agent imports: a shared
	// package anywhere else in the tree (a new root folder, e2e's helpers, scripts) is refused.
	root, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range root {
		if e.IsDir() && !slices.Contains([]string{"agent", "internal", "backend"}, e.Name()) && !strings.HasPrefix(e.Name(), ".") {
			imports = append(imports, layering.ImportRule{From: module + "/agent", To: module + "/" + e.Name(),
				Why: "agent and backend share only the root internal/"})
		}
	}
	for _, v := range layering.CheckImports(code, imports) {
		t.Error(v)
	}
}
