package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// genJobs writes a .cnb.yml with pipelines×stages×jobs jobs: parallel and serial stages, script,
// plugin and built-in jobs, env at every level, anchors and substitution.
func genJobs(pipelines, stages, jobs int) []byte {
	var b strings.Builder
	b.WriteString(".defaults: &defaults\n  runner: {tags: cnb:arch:amd64, cpus: 16}\n  docker: {image: golang:1.26, volumes: [/root/.cache:cow]}\n  env: {GOFLAGS: -mod=readonly, REGISTRY: $CNB_DOCKER_REGISTRY}\n")
	b.WriteString("main:\n  push:\n")
	for p := 0; p < pipelines; p++ {
		fmt.Fprintf(&b, "    - <<: *defaults\n      name: pipeline-%d-$CNB_BRANCH\n      ifModify: [\"**\", \"!(docs/**)\"]\n      stages:\n", p)
		for s := 0; s < stages; s++ {
			fmt.Fprintf(&b, "        - name: stage-%d\n          env: {STAGE: \"%d\"}\n          jobs:\n", s, s)
			parallel := s%2 == 0
			for j := 0; j < jobs; j++ {
				prefix := "            - "
				if parallel {
					fmt.Fprintf(&b, "            job-%d:\n", j)
					prefix = "              "
				}
				indent := strings.Repeat(" ", len(prefix))
				switch j % 3 {
				case 0:
					fmt.Fprintf(&b, "%sname: test-%d\n%sscript:\n%s  - go vet ./pkg%d/...\n%s  - go test -race ./pkg%d/...\n%senv: {PKG: pkg%d}\n%stimeout: 30m\n",
						prefix, j, indent, indent, j, indent, j, indent, j, indent)
				case 1:
					fmt.Fprintf(&b, "%sname: publish-%d\n%simage: plugins/docker\n%ssettings:\n%s  repo: $REGISTRY/app-%d\n%s  tags: [latest, \"$CNB_BRANCH\"]\n",
						prefix, j, indent, indent, indent, j, indent)
				default:
					fmt.Fprintf(&b, "%sname: await-%d\n%stype: cnb:await\n%soptions: {key: build-%d}\n%sifModify: src/**\n",
						prefix, j, indent, indent, j, indent)
				}
			}
		}
	}
	return []byte(b.String())
}

func TestGeneratedFileCompiles(t *testing.T) {
	src := genJobs(10, 10, 10)
	set := mustPlan(t, string(src), Trigger{Event: "push", Branch: "main", Changed: []string{"src/a.go"}}, Options{})
	jobs := 0
	for _, p := range set.Pipelines {
		for _, s := range p.Stages {
			jobs += len(s.Jobs)
		}
	}
	if jobs != 1000 {
		t.Fatalf("generated %d jobs, want 1000", jobs)
	}
}

// BenchmarkCompile reports what a compile costs, without a target (real files are at most a few
// hundred lines; see README.md, "One YAML parser"):
//
//   - generated-1000-jobs: parse, validate and plan a synthetic 180 KB file of 1,000 jobs;
//   - corpus-largest: parse the largest .cnb.yml of testdata/corpus with its includes, and plan
//     every event it declares, as one push of it would.
func BenchmarkCompile(b *testing.B) {
	b.Run("generated-1000-jobs", func(b *testing.B) {
		src := genJobs(10, 10, 10)
		trig := Trigger{Event: "push", Branch: "main", Changed: []string{"src/a.go"}, Vars: map[string]string{"CNB_DOCKER_REGISTRY": "docker.example"}}
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := Compile(src, trig, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("corpus-largest", func(b *testing.B) {
		dir, size := "", 0
		for d := range corpusIndex(b) {
			if info, err := os.Stat(filepath.Join("testdata", "corpus", d, ".cnb.yml")); err == nil && int(info.Size()) > size {
				dir, size = d, int(info.Size())
			}
		}
		repo := corpusRepo(b, dir)
		src := []byte(repo[".cnb.yml"])
		cfg, ds := Parse(src, Options{Files: repo})
		if ds.HasErrors() {
			b.Fatalf("%s: %v", dir, ds)
		}
		var triggers []Trigger
		for _, d := range cfg.Declarations() {
			ref := sampleRef(d.BranchKey)
			if d.BranchKey == "$" {
				ref = "zz-unmatched"
			}
			t := Trigger{Event: d.Event, Branch: ref}
			if isTagEvent(d.Event) {
				t.Tag, t.Branch = t.Branch, ""
			}
			triggers = append(triggers, t)
		}
		b.Logf("%s/.cnb.yml: %d bytes, %d events", dir, size, len(triggers))
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			cfg, ds := Parse(src, Options{Files: repo})
			if ds.HasErrors() {
				b.Fatal(ds)
			}
			for _, t := range triggers {
				if _, _, err := cfg.Plan(t); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
