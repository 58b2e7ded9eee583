package spec

import (
	"fmt"
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

// BenchmarkCompile parses, validates and plans a 1,000-job file (target: under 20 ms and 20 MB
// per compile on a 2-core machine).
func BenchmarkCompile(b *testing.B) {
	src := genJobs(10, 10, 10)
	trig := Trigger{Event: "push", Branch: "main", Changed: []string{"src/a.go"}, Vars: map[string]string{"CNB_DOCKER_REGISTRY": "docker.example"}}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Compile(src, trig, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
