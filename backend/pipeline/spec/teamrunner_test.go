package spec

import (
	"strings"
	"testing"
)

func TestTeamRunnerTags(t *testing.T) {
	t.Run("a tag outside cnb: names a team runner", func(t *testing.T) {
		src := "main:\n  push:\n    - runner: {tags: seele-macbook}\n      stages: [make]\n"
		p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
		r := p.Runner
		if !r.Team || r.Class != "seele-macbook" || r.Cpus != 1 || r.MemoryGiB != 0 || r.GPU != "" || r.MaxDuration.Std().Hours() != 18 {
			t.Errorf("runner = %+v", r)
		}
		_, ds := Parse([]byte(src), Options{})
		d, ok := findDiag(ds, SeverityInfo, `runner tag "seele-macbook" names a team runner`)
		if !ok || d.Pos.Line != 3 || !strings.Contains(d.Hint, "--tags seele-macbook") {
			t.Errorf("want a note at line 3 with the registration hint: %v", ds)
		}
		// A tag from a variable is known at planning, and noted then.
		vsrc := "main:\n  push:\n    - runner: {tags: $BOX}\n      stages: [make]\n"
		cfg, _ := Parse([]byte(vsrc), Options{})
		_, pds, err := cfg.Plan(Trigger{Event: "push", Branch: "main", Vars: map[string]string{"BOX": "gpu-box"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := findDiag(pds, SeverityInfo, `runner tag "gpu-box" names a team runner`); !ok {
			t.Errorf("a substituted team tag: %v", pds)
		}
	})
	t.Run("cpus reserves cores on the team runner", func(t *testing.T) {
		p := onlyPipeline(t, mustPlan(t, "main:\n  push:\n    - runner: {tags: [gpu-box], cpus: 12}\n      stages: [make]\n", pushMain, Options{}))
		if p.Runner.Cpus != 12 || !p.Runner.Team {
			t.Errorf("runner = %+v", p.Runner)
		}
	})
	t.Run("platform tags are not team tags", func(t *testing.T) {
		p := onlyPipeline(t, mustPlan(t, "main:\n  push:\n    - runner: {tags: cnb:arch:amd64:gpu}\n      stages: [make]\n", pushMain, Options{}))
		if p.Runner.Team {
			t.Errorf("runner = %+v", p.Runner)
		}
	})
	for _, bad := range []struct{ tags, msg string }{
		{"[seele-macbook, cnb:arch:amd64]", `runner tags "seele-macbook" and "cnb:arch:amd64" cannot be combined`},
		{"[cnb:arch:amd64, seele-macbook]", `runner tags "cnb:arch:amd64" and "seele-macbook" cannot be combined`},
		{"[box-a, box-b]", `runner tags "box-a" and "box-b" cannot be combined`},
		{"cnb:arch:amd64:gpu:A100", `unknown runner tag "cnb:arch:amd64:gpu:A100"`},
	} {
		_, ds, err := Compile([]byte("main:\n  push:\n    - runner: {tags: "+bad.tags+"}\n      stages: [make]\n"), pushMain, Options{})
		if _, ok := findDiag(ds, SeverityError, bad.msg); err == nil || !ok {
			t.Errorf("tags %s: want %q, got %v", bad.tags, bad.msg, ds)
		}
	}
}
