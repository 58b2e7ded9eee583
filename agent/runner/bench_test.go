package runner

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/lifeline"
	"github.com/nimbus-build/nimbus/internal/lifeline/lifelinetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// BenchmarkAgentOverhead is the agent-overhead figure: a pipeline of three serial jobs
// running `true`, leased from the fake control plane and run to its finish (events, logs,
// checkout and all), against three plain `docker run --rm IMAGE true` on the same engine. The
// target ratio is at most 1.3. It also reports the same three steps run straight through the
// executor, which is the part of the cost that is Docker's alone. Steps run under lifelines, as
// the agent runs them.
//
//	e2e/testenv.sh go test -run '^$' -bench AgentOverhead -benchtime 10x ./agent/runner
func BenchmarkAgentOverhead(b *testing.B) {
	h := newHarness(b, executor.ModeDocker)
	// As the agent runs them: every step under its lifeline (internal/lifeline), whose cost is part
	// of the overhead.
	lines, err := lifeline.New(context.Background(), filepath.Join(b.TempDir(), "lifelines"), lifelinetest.Init(b))
	if err != nil {
		b.Fatal(err)
	}
	h.exec.(*executor.Docker).Lifelines = lines
	host := testenv.DockerHost(b)
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Fatalf("the docker CLI is needed for the baseline: %v", err)
	}
	p := plan(serial("s", script("a", "true"), script("b", "true"), script("c", "true")))
	dockerRun := func() {
		for range 3 {
			if out, err := exec.Command(docker, "-H", host, "run", "--rm", "--network", "none", h.image, "true").CombinedOutput(); err != nil {
				b.Fatalf("docker run: %v\n%s", err, out)
			}
		}
	}
	direct := func() {
		for _, name := range []string{"a", "b", "c"} {
			code, err := h.exec.Run(context.Background(), executor.Step{Name: name, Image: h.image, Script: "true"})
			if err != nil || code != 0 {
				b.Fatalf("step: %d %v", code, err)
			}
		}
	}
	// One of each first, so image and engine caches are warm for all three.
	dockerRun()
	direct()
	h.run(b, lease("warmup", p))

	var agent, cli, raw time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, _ := h.run(b, lease(fmt.Sprintf("bench-%d", i), p))
		agent += time.Since(start)
		if res.Status != StatusSuccess {
			b.Fatalf("result %+v", res)
		}
		start = time.Now()
		dockerRun()
		cli += time.Since(start)
		start = time.Now()
		direct()
		raw += time.Since(start)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(agent.Milliseconds())/n, "pipeline-ms/op")
	b.ReportMetric(float64(cli.Milliseconds())/n, "docker-run-ms/op")
	b.ReportMetric(float64(raw.Milliseconds())/n, "executor-ms/op")
	b.ReportMetric(float64(agent)/float64(cli), "ratio")
	b.Logf("3 serial `true` jobs: pipeline %v, 3× docker run --rm %v, 3 executor steps %v; ratio %.2f (target ≤ 1.3)",
		agent/time.Duration(b.N), cli/time.Duration(b.N), raw/time.Duration(b.N), float64(agent)/float64(cli))
}
