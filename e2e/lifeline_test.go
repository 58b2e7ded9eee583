package e2e

// What an agent started must end when the agent dies, with nobody restarting it
// (internal/lifeline): kill -9 of a real nimbus-agent mid-pipeline, then the host is searched for
// what still runs.

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	docker "github.com/docker/docker/client"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/lifeline/lifelinetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// killedAgentCI runs, side by side, what a pipeline's jobs run as: a plain long job, one whose
// shell ignores SIGTERM, one that leaves its process group and session (setsid), and a job's
// `if` condition that takes long. Every long-running process is `sleep MARK`, so that the host
// can be searched for it.
const killedAgentCI = `
main:
  push:
    - name: long
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: work
          jobs:
            plain:
              script: echo started; sleep MARK
            stubborn:
              script: trap '' TERM INT HUP; echo started; while :; do sleep MARK; done
            detached:
              script: setsid sleep MARK & echo started; sleep MARK
            condition:
              if: sleep MARK
              script: echo the condition held
`

// kill -9 of an agent used to leave its jobs' containers running, unbilled, until someone
// restarted the agent: on a GPU host a training job holding its GPU for hours. Now, five times
// over, every container and process of the pipeline (parallel jobs, one ignoring SIGTERM, one
// in a session of its own, a long `if` condition) is gone within 10 s of the kill, with no
// restart; the server still fails the pipeline agent_lost one lease TTL later and bills it to
// the agent's last renewal; a restarted agent removes the stopped containers.
func TestAgentKilledEndsItsContainers(t *testing.T) {
	w := newWorld(t, "NIMBUS_LEASE_TTL=6s")
	var took []time.Duration
	var dir string
	for range 5 {
		ag, d := w.agent("")
		dir = d
		mark := newMark()
		w.leaveNothing(dir, mark)
		n := w.pushFiles(map[string]string{".cnb.yml": strings.NewReplacer("IMAGE", w.image, "MARK", mark).Replace(killedAgentCI)})
		w.waitFor(n, 60*time.Second, "running", running)
		w.waitUntil(30*time.Second, "the four containers running", func() bool {
			return w.runningContainers(dir) == 4 && len(lifelinetest.Processes(" "+mark)) >= 5
		})
		killed := w.killAgent(ag)
		took = append(took, w.waitGone(killed, dir, mark))
		w.checkLostAndBilled(n, killed)
		if all := w.containers(dir); all != 4 {
			t.Fatalf("%d stopped containers of the killed agent, want its 4 until it is started again", all)
		}
	}
	p50, most := percentile(took, 50), percentile(took, 100)
	t.Logf("kill -9 of the agent → its last container and process gone, over %d runs: p50 %v, max %v (%v)",
		len(took), p50.Round(time.Millisecond), most.Round(time.Millisecond), took)
	// The agent's next start removes what its crash left.
	w.agent(dir)
	w.waitUntil(20*time.Second, "the restarted agent removing the stopped containers", func() bool { return w.containers(dir) == 0 })
}

// leaveNothing makes sure, when the test ends, that a failed run leaves no week-long sleep on the
// shared test engine and host: the containers of the agent with work dir dir are removed, and the
// processes sleeping mark killed, and those whose command line has one of more.
func (w *world) leaveNothing(dir, mark string, more ...string) {
	w.t.Cleanup(func() {
		if id, err := os.ReadFile(filepath.Join(dir, "agent-id")); err == nil {
			if cli, err := docker.NewClientWithOpts(docker.WithHost(w.docker), docker.WithAPIVersionNegotiation()); err == nil {
				list, _ := cli.ContainerList(context.Background(), container.ListOptions{All: true,
					Filters: filters.NewArgs(filters.Arg("label", "nimbus.agent="+strings.TrimSpace(string(id))))})
				for _, c := range list {
					cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
				}
				cli.Close()
			}
		}
		for _, p := range lifelinetest.Processes(append(more, " "+mark)...) {
			pid, _, _ := strings.Cut(p, ":")
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
}

// newMark is a number of seconds that no other process on the host sleeps: a week and some.
func newMark() string { return strconv.Itoa(600_000 + rand.IntN(300_000)) }

// killAgent sends the agent SIGKILL and returns when it was sent, once the process is gone.
func (w *world) killAgent(ag *proc) time.Time {
	w.t.Helper()
	if err := ag.cmd.Process.Kill(); err != nil {
		w.t.Fatal(err)
	}
	killed := time.Now()
	ag.done <- <-ag.done // for the test's cleanup
	return killed
}

// waitGone waits until neither a running container of the agent with work dir dir nor a
// process sleeping mark is left, and returns how long after killed that was. More than 10 s
// fails the test.
func (w *world) waitGone(killed time.Time, dir, mark string) time.Duration {
	w.t.Helper()
	for {
		running, procs := w.runningContainers(dir), lifelinetest.Processes(" "+mark)
		if running == 0 && len(procs) == 0 {
			return time.Since(killed)
		}
		if time.Since(killed) > 10*time.Second {
			w.t.Fatalf("10 s after kill -9 of the agent, %d of its containers run, and these processes:\n%s",
				running, strings.Join(procs, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkLostAndBilled checks that the server failed build n's pipeline agent_lost and billed it
// up to the agent's last renewal before killed: at most a third of the TTL (6 s) earlier.
func (w *world) checkLostAndBilled(n int64, killed time.Time) {
	w.t.Helper()
	b := w.waitFor(n, 20*time.Second, "failed", func(b apiclient.Build) bool { return b.Pipelines[0].Status == "failed" })
	if b.Pipelines[0].Reason != "agent_lost" {
		w.t.Fatalf("the killed agent's pipeline failed with %q, want agent_lost", b.Pipelines[0].Reason)
	}
	p := w.build(n)
	if p.Pipelines[0].StartedAt == nil || p.Pipelines[0].FinishedAt == nil {
		w.t.Fatalf("the lost pipeline has no start or end: %+v", p.Pipelines[0])
	}
	end := *p.Pipelines[0].FinishedAt
	if end.After(killed) || end.Before(killed.Add(-3*time.Second)) {
		w.t.Fatalf("billed until %v; the agent was killed at %v and renewed every 2 s", end, killed)
	}
	if secs := end.Sub(*p.Pipelines[0].StartedAt).Seconds(); p.Pipelines[0].CoreSeconds > int64(secs+1) {
		w.t.Fatalf("%d core-seconds for %.1f s on one core", p.Pipelines[0].CoreSeconds, secs)
	}
}

// waitUntil polls cond every 100 ms for up to within.
func (w *world) waitUntil(within time.Duration, what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runningContainers counts the running containers of the agent with work dir dir.
func (w *world) runningContainers(dir string) int { return w.agentContainers(dir, false) }

// killedAgentBuildCI has what the agent starts beside the jobs: an environment image being built
// (docker.build, its RUN in a container of the engine's builder, which carries no agent label)
// and a pipeline's own Docker engine (services: docker, host processes of their own user) with
// a container that a job started in it.
const killedAgentBuildCI = `
main:
  push:
    - name: env
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker:
        build: { dockerfile: env.Dockerfile }
      stages:
        - name: never
          script: echo the image was built
    - name: dind
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      services: [docker]
      docker: { image: IMAGE }
      stages:
        - name: inner
          script: docker pull BASE >/dev/null && docker run -d BASE sleep MARK && echo started && sleep MARK
`

// The same for an environment image being built and a pipeline's own Docker engine: after kill
// -9 of the agent the build's container, the engine (dockerd, containerd, rootlesskit) and the
// container a job ran in it are gone within 10 s, with no restart.
func TestAgentKilledEndsItsBuildAndEngine(t *testing.T) {
	testenv.DindUser(t)
	w := newWorld(t, "NIMBUS_LEASE_TTL=6s")
	base := w.registryHost() + "/ml/trainer/base:1"
	w.pushImage(t, w.image, base)
	ag, dir := w.agent("")
	w.waitUntil(30*time.Second, "the agent's id", func() bool {
		_, err := os.Stat(filepath.Join(dir, "agent-id"))
		return err == nil
	})
	engines := serviceDir(t, dir)
	mark := newMark()
	w.leaveNothing(dir, mark, engines)
	n := w.pushFiles(map[string]string{
		".cnb.yml":       strings.NewReplacer("IMAGE", w.image, "BASE", base, "MARK", mark).Replace(killedAgentBuildCI),
		"env.Dockerfile": "FROM " + w.image + "\nRUN sleep " + mark + "\n",
	})
	w.waitFor(n, 60*time.Second, "running", func(b apiclient.Build) bool {
		return b.Pipelines[0].Status == "running" && b.Pipelines[1].Status == "running"
	})
	// The build's RUN, the job's shell and sleep, and the engine's container.
	w.waitUntil(90*time.Second, "the build and the engine's container running", func() bool {
		return len(lifelinetest.Processes(" "+mark)) >= 4 && len(lifelinetest.Processes(engines)) > 0
	})
	killed := w.killAgent(ag)
	took := w.waitGone(killed, dir, mark)
	for len(lifelinetest.Processes(engines)) > 0 {
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("10 s after kill -9 of the agent its docker service still runs:\n%s", strings.Join(lifelinetest.Processes(engines), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("kill -9 of the agent → the build's container, the job's and the engine's gone after %v, the engine's processes after %v",
		took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	b := w.waitFor(n, 20*time.Second, "failed", func(b apiclient.Build) bool { return b.Status == "failed" })
	for _, p := range b.Pipelines {
		if p.Reason != "agent_lost" {
			t.Fatalf("pipeline %s ended %s (%q), want agent_lost", p.Name, p.Status, p.Reason)
		}
	}
	// The restarted agent removes the engine's state and the stopped containers.
	w.agent(dir)
	w.waitUntil(30*time.Second, "the restarted agent removing what the crash left", func() bool {
		_, err := os.Stat(engines)
		entries, _ := os.ReadDir(engines)
		return w.containers(dir) == 0 && (err != nil || len(entries) == 0)
	})
}

// The shell executor's jobs are host processes: after kill -9 of the agent a job, its
// background child and a loop that ignores SIGTERM are gone within 10 s, with no restart.
func TestShellAgentKilledEndsItsJobs(t *testing.T) {
	w := newWorld(t, "NIMBUS_LEASE_TTL=6s")
	ag, dir := w.agent("", "NIMBUS_AGENT_EXECUTOR=shell")
	mark := newMark()
	w.leaveNothing(dir, mark)
	n := w.push(`"sleep ` + mark + ` & trap '' TERM INT HUP; echo started; while :; do sleep ` + mark + `; done"`)
	w.waitFor(n, 60*time.Second, "running", running)
	w.waitUntil(30*time.Second, "the job's processes running", func() bool { return len(lifelinetest.Processes(" "+mark)) >= 3 })
	killed := w.killAgent(ag)
	took := w.waitGone(killed, dir, mark)
	t.Logf("kill -9 of the agent → its shell job's processes gone after %v", took.Round(time.Millisecond))
	w.checkLostAndBilled(n, killed)
}

// agentContainers counts the containers (all, or the running ones) that the agent with work dir
// dir started on the test engine. Other packages' tests share the engine, so counting every
// Nimbus container would see theirs.
func (w *world) agentContainers(dir string, all bool) int {
	raw, err := os.ReadFile(filepath.Join(dir, "agent-id"))
	if err != nil {
		if os.IsNotExist(err) {
			return 0 // not started yet: nothing of it can run
		}
		w.t.Fatal(err)
	}
	cli, err := docker.NewClientWithOpts(docker.WithHost(w.docker), docker.WithAPIVersionNegotiation())
	if err != nil {
		w.t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(w.t.Context(), container.ListOptions{All: all,
		Filters: filters.NewArgs(filters.Arg("label", "nimbus.agent="+strings.TrimSpace(string(raw))))})
	if err != nil {
		w.t.Fatal(err)
	}
	return len(list)
}
