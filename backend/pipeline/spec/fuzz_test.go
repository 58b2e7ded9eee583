package spec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// selfFS serves the fuzzed document under every name, so includes recurse into it.
type selfFS []byte

func (s selfFS) ReadFile(string) ([]byte, error) { return s, nil }

// FuzzCompile feeds arbitrary documents through parse, lint and planning for several triggers:
// nothing may panic, and every plan must survive a JSON round trip.
func FuzzCompile(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/brief/*.yml")
	more, _ := filepath.Glob("testdata/corpus/*/.cnb.yml")
	incs, _ := filepath.Glob("testdata/corpus/*/.cnb/*/*.yml")
	for _, p := range append(append(seeds, more...), incs...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"include: [x.yml]\n",
		".a: &a {stages: [make]}\nmain: {push: [{<<: *a, name: $X}]}\n",
		"\"**/!(main|dev)\":\n  push:\n    - ifModify: [\"**\", \"!(legacy/**)\"]\n      stages: [make]\n",
		"main:\n  \"crontab: */5 * * * *\": [{stages: [make]}]\n",
		".r: !reference [.r]\n",
		"$:\n  vscode:\n    - runner: {tags: cnb:arch:amd64:gpu, cpus: 16}\n      services: [vscode]\n",
	} {
		f.Add([]byte(s))
	}
	triggers := []Trigger{
		{Event: "push", Branch: "main", Changed: []string{"src/a.go", "README.md"}},
		{Event: "vscode", Branch: "dev/x"},
		{Event: "tag_push", Tag: "v1.0.0"},
		{Event: "schedule", Branch: "dev/nightly"},
		{Event: "crontab", Branch: "main", IsNewBranch: true},
		{Event: "web_trigger_x", Branch: "feature/a/b"},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, ds := Parse(data, Options{Files: selfFS(data), Remote: selfFS(data)})
		for _, d := range ds {
			_ = d.String()
		}
		if ds.HasErrors() {
			return
		}
		cfg.Declarations()
		cfg.Schedules()
		for _, trig := range triggers {
			set, _, err := cfg.Plan(trig)
			if err != nil {
				continue
			}
			b, err := json.Marshal(set)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var back protocol.PlanSet
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !reflect.DeepEqual(set, &back) && !strings.Contains(string(b), `\ufffd`) {
				t.Fatalf("round trip changed the plan:\n%s", b)
			}
		}
	})
}

// FuzzCron checks that no expression makes the cron parser or the interval check panic or hang.
func FuzzCron(f *testing.F) {
	for _, s := range []string{"0 2 * * *", "*/5 * * * *", "0,3 * * * *", "TZ=UTC 0 * * * *", "@daily", "0 0 31 2 *", "59 23 31 12 7", "*/0 * * * *", "1-60/7 * * * *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if c, err := parseCron(expr, nil); err == nil && c.sched == nil {
			t.Fatal("no schedule without an error")
		}
	})
}

// One Config plans many triggers at once (run with -race).
func TestConcurrentPlans(t *testing.T) {
	cfg, ds := Parse(genJobs(2, 3, 3), Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	done := make(chan error)
	for i := 0; i < 4; i++ {
		go func() {
			_, _, err := cfg.Plan(Trigger{Event: "push", Branch: "main", Changed: []string{"src/x"}})
			done <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
