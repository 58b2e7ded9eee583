package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestReplaceVars(t *testing.T) {
	env := map[string]string{"A": "1", "NAME": "x", "B_2": "two"}
	repl := func(name, _ string) string { return env[name] }
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$A", "1"},
		{"${A}", "1"},
		{"pre-$NAME-post", "pre-x-post"},
		{"$B_2$A", "two1"},
		{"${A}B", "1B"},
		{"$AB", ""}, // the name runs as far as name characters go
		{"$MISSING", ""},
		{`\$A`, "$A"},
		{`\${A}`, "${A}"},
		{`\\$A`, `\$A`}, // backslashes are not escapable: the second one escapes the dollar
		{"$", "$"},
		{"$5", "$5"},
		{"${A", "${A"},
		{"${A-b}", "${A-b}"},
		{"${}", "${}"},
		{"cost: $$", "cost: $$"},
	}
	for _, tt := range tests {
		if got := ReplaceVars(tt.in, repl, "$"); got != tt.want {
			t.Errorf("ReplaceVars(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExpandVars(t *testing.T) {
	env := map[string]string{"VERSION": "1.0", "OTHER": "o"}
	got := ExpandVars(`v${VERSION} $OTHER \$VERSION ${GONE}`, []string{"VERSION", "GONE"}, env)
	if want := "v1.0 $OTHER $VERSION "; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !ValidVarName("A_1") || ValidVarName("1A") || ValidVarName("A-B") || ValidVarName("") {
		t.Error("ValidVarName")
	}
}

// A plan with every field set survives a JSON round trip unchanged.
func TestPlanRoundTrip(t *testing.T) {
	lock := &Lock{Key: "k", Expires: Duration(time.Hour), Timeout: Duration(90 * time.Second), Wait: true, CancelInWait: true}
	cond := Conditions{Skip: "why", If: "test -f x", IfModify: []string{"src/**"}, IfNewBranch: true, BreakIfModify: true, SkipIfModify: true}
	in := PlanSet{Pipelines: []Plan{{
		Key: "pipeline-0", Name: "n", Event: "push", BranchKey: "main", Ref: "main", Cron: "0 2 * * *", Workspace: true,
		Runner: Runner{Tags: []string{"cnb:arch:amd64:gpu"}, Cpus: 16, RequestedCpus: 8, Class: "cnb:arch:amd64:gpu", MemoryGiB: 32,
			GPU: "any", GPUMemoryGB: 48, MaxDuration: Duration(18 * time.Hour), NoOutputTimeout: Duration(10 * time.Minute), Namespace: "ns"},
		Image:    &Image{Name: "img", User: "u", Password: "p"},
		Build:    &DockerBuild{Dockerfile: "Dockerfile", Target: "t", By: []string{"a"}, VersionBy: []string{"b"}, BuildArgs: map[string]string{"X": "1"}, IgnoreBuildArgsInVersion: true, Sync: true},
		Volumes:  []Volume{{Group: "g", Path: "/p", Type: VolumeReadOnly}},
		Git:      Git{Enable: true, Submodules: true, SubmodulesRemote: true, LFS: true},
		Services: []Service{{Name: "vscode", Version: "1", Options: map[string]any{"keepAliveTimeout": float64(1000), "nested": map[string]any{"a": []any{true, "x", nil}}}}},
		Builtins: map[string]string{"CNB_EVENT": "push"}, Env: map[string]string{"A": "${B}"}, Imports: []string{"env.yml"},
		Label: map[string][]string{"k": {"v"}},
		Stages: []Stage{{Name: "s", Parallel: true, Retry: 1, Lock: lock, Conditions: cond, Jobs: []Job{{
			Key: "j", Name: "j", Kind: KindPlugin, Script: "make", Image: &Image{Name: "p"}, Settings: map[string]any{"a": float64(1)},
			SettingsFrom: []string{"s.yml"}, Args: []string{"--x"}, Type: "t", Options: map[string]any{"b": "c"}, OptionsFrom: []string{"o.yml"},
			Unsupported: "no", Env: map[string]string{"E": "e"}, Imports: []string{"i"}, Exports: map[string]string{"info": "OUT"},
			Timeout: Duration(time.Minute), AllowFailure: true, Retry: 2, Lock: lock, Conditions: cond, RuntimeVars: []string{"B"},
		}}}},
		FailStages: []Stage{{Name: "f", Jobs: []Job{{Key: "job-0", Kind: KindScript, Script: "echo"}}}},
		EndStages:  []Stage{{Name: "e", Jobs: []Job{{Key: "job-0", Kind: KindBuiltin, Type: "vscode:go"}}}},
		Conditions: cond, Retry: 3, AllowFailure: true, Lock: lock, RuntimeVars: []string{"B"},
	}}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out PlanSet
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip changed the plan:\n%+v\n%+v", in, out)
	}
}

func TestDurationJSON(t *testing.T) {
	b, _ := json.Marshal(Duration(90 * time.Minute))
	if string(b) != `"1h30m0s"` {
		t.Errorf("got %s", b)
	}
	var d Duration
	for in, want := range map[string]time.Duration{`"2h"`: 2 * time.Hour, `1000`: 1000} {
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.Std() != want {
			t.Errorf("%s: %v %v", in, d, err)
		}
	}
	for _, bad := range []string{`"soon"`, `true`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s should fail", bad)
		}
	}
}

// A poll carries the repositories whose caches the agent holds; an agent that holds none (or
// predates the field) sends what it always sent.
func TestPollRequestCaches(t *testing.T) {
	in := PollRequest{FreeCPUs: 8, FreeGPUs: []string{"0"}, Running: []string{"lease_1"}, Caches: []string{"42", "7"}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"freeCpus":8,"freeGpus":["0"],"running":["lease_1"],"caches":["42","7"]}`; string(data) != want {
		t.Errorf("got %s, want %s", data, want)
	}
	var out PollRequest
	if err := json.Unmarshal(data, &out); err != nil || !reflect.DeepEqual(in, out) {
		t.Errorf("round trip: %+v %v", out, err)
	}
	if data, _ := json.Marshal(PollRequest{FreeCPUs: 2}); string(data) != `{"freeCpus":2}` {
		t.Errorf("no caches: got %s", data)
	}
}
