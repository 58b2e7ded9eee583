package runner

import (
	"context"
	"maps"
	"sync"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// What a pipeline needs before its first stage, beside the checkout and the clone, is prepared
// here, in this order, and released when the run ends, whatever its outcome:
//
//  1. the environment image of docker.build (envimage.go): reused from the engine or the
//     registry when its content hash is known, else built and pushed;
//  2. the docker service (services.go): a Docker engine of the pipeline's own;
//  3. the cache volumes of docker.volumes (volumes.go).
//
// Each adds to extras what every job step of the pipeline gets. What they print goes to the log
// of the pipeline's first job (setupLog), which is reported started as soon as something is
// written there: the user sees it where the run begins. A preparation that fails fails that job
// and the pipeline with its error, and nothing of the stages runs.

// extras are added to every job step of the pipeline.
type extras struct {
	mu         sync.Mutex
	mounts     []executor.Mount
	env        map[string]string // under the job's env: a job may set DOCKER_HOST itself
	pathAppend []string
	image      string // the environment image docker.build made; "" = none
	notes      []string
}

func (e *extras) addMounts(m ...executor.Mount) {
	e.mu.Lock()
	e.mounts = append(e.mounts, m...)
	e.mu.Unlock()
}

func (e *extras) addEnv(env map[string]string) {
	e.mu.Lock()
	if e.env == nil {
		e.env = map[string]string{}
	}
	maps.Copy(e.env, env)
	e.mu.Unlock()
}

// apply adds the extras to a step.
func (e *extras) apply(s *executor.Step) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s.Mounts = append(s.Mounts, e.mounts...)
	s.PathAppend = append(s.PathAppend, e.pathAppend...)
	if len(e.env) > 0 {
		env := maps.Clone(e.env)
		maps.Copy(env, s.Env)
		s.Env = env
	}
}

// release undoes a preparation at the end of the run; success says whether the pipeline
// succeeded (copy-on-write caches keep their changes only then).
type release func(success bool)

// prepare runs the preparations. On error the ones already done are released.
func (x *run) prepare(ctx context.Context) (release, error) {
	var done []release
	undo := func(success bool) {
		for i := len(done) - 1; i >= 0; i-- {
			done[i](success)
		}
	}
	for _, step := range []func(context.Context) (release, error){x.prepareImage, x.prepareServices, x.prepareVolumes} {
		r, err := step(ctx)
		if err != nil {
			undo(false)
			return nil, err
		}
		if r != nil {
			done = append(done, r)
		}
	}
	return undo, nil
}

// setupLog is the log of the pipeline's first job, for what the preparations print. That job
// is reported started at the first call.
func (x *run) setupLog() *jobLog {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.setup == nil {
		id := x.firstJobID()
		x.setup = x.openLogLocked(id)
		x.setupID = id
		if id != 0 {
			x.event(protocol.Event{Kind: protocol.EventJobStarted, JobID: id})
		}
	}
	return x.setup
}

// takeSetupLog hands the setup log to its job when that job starts, so what it prints follows
// what the preparations printed; nil for any other job.
func (x *run) takeSetupLog(id int64) *jobLog {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.setup == nil || x.setupID != id || id == 0 {
		return nil
	}
	jl := x.setup
	x.setup = nil
	return jl
}

// failSetup ends the first job with the error of a preparation.
func (x *run) failSetup(err error) {
	jl := x.setupLog()
	jl.note("%v", err)
	x.mu.Lock()
	id := x.setupID
	x.setup = nil
	x.mu.Unlock()
	jl.close()
	x.reportFinished(id, jobResult{status: StatusFailed, msg: err.Error()}, jl.stream)
}

// closeSetupLog ends a setup log no job took (the first job never ran).
func (x *run) closeSetupLog() {
	x.mu.Lock()
	jl := x.setup
	x.setup = nil
	x.mu.Unlock()
	if jl != nil {
		jl.close()
	}
}

// firstJobID is the server's id of the first job of the plan's stages; 0 when there is none.
func (x *run) firstJobID() int64 {
	best := [2]int{-1, -1}
	var id int64
	for _, j := range x.lease.Jobs {
		if j.Stage >= len(x.lease.Plan.Stages) {
			continue // failStages and endStages
		}
		k := [2]int{j.Stage, j.Job}
		if best[0] < 0 || k[0] < best[0] || k[0] == best[0] && k[1] < best[1] {
			best, id = k, j.ID
		}
	}
	return id
}
