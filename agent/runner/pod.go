package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A pipeline on an executor that runs it in one place of its own (executor.Pipelines: the
// Kubernetes executor's pod) is set up after the clone and before pipeline_started, so a pod
// waiting for capacity has run no user code and started nothing; it is taken down when the run
// ends. What such an executor does not run yet fails the pipeline at once, before anything
// starts, with the reason (unsupportedOn).

// startPipeline sets the pipeline up on a Pipelines executor; stop takes it down. Both do
// nothing on the others. waited says the pipeline waited for its place after the lease (so the
// server counts its run time from pipeline_started, protocol.Event.Waited).
func (x *run) startPipeline(ctx context.Context) (stop func(), waited bool, err error) {
	px, ok := x.cfg.Executor.(executor.Pipelines)
	if !ok {
		return func() {}, false, nil
	}
	if why := x.unsupportedOn(px.Name()); why != "" {
		return nil, false, fmt.Errorf("the %s executor does not run %s yet (agent/executor/README.md says what it runs): run this pipeline on a Docker agent", px.Name(), why)
	}
	p := &x.lease.Plan
	spec := executor.PipelineSpec{
		Lease: x.lease.ID, Team: teamOf(p.Builtins["CNB_REPO_SLUG"]), Pipeline: strconv.FormatInt(x.lease.PipelineID, 10),
		Checkout: x.checkout, CheckoutMount: x.mount,
		Images: x.podImages(),
		CPUs:   float64(p.Runner.Cpus), MemoryBytes: int64(p.Runner.MemoryGiB) << 30,
		GPU:  p.Runner.GPU != "",
		Tags: append([]string{p.Runner.Class}, p.Runner.Tags...), MaxDuration: p.Runner.MaxDuration.Std(),
		Waiting: func(reason string) {
			if reason != "" {
				x.log.Info("the pipeline waits for a place on the cluster", "reason", reason)
			}
			if len(reason) > protocol.MaxWaitReason {
				reason = strings.ToValidUTF8(reason[:protocol.MaxWaitReason], "")
			}
			x.event(protocol.Event{Kind: protocol.EventWaiting, Reason: reason})
		},
	}
	if err := px.StartPipeline(ctx, spec); err != nil {
		return nil, false, err
	}
	// A cancel, a billing termination, a lost lease or the cap ends the run's context: the
	// place goes at once (the pod deleted, which ends its steps), not after each step was
	// stopped in it and the run wound down (seconds on a loaded cluster).
	ended := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			px.EndPipeline(x.checkout)
		case <-ended:
		}
	}()
	return func() { close(ended); px.EndPipeline(x.checkout) }, true, nil
}

// unsupportedOn names what of the plan the executor cannot run yet; "" when it runs all of it.
func (x *run) unsupportedOn(name string) string {
	if name != executor.ModeKubernetes {
		return ""
	}
	p := &x.lease.Plan
	var why []string
	if p.Build != nil {
		why = append(why, "docker.build")
	}
	if len(p.Volumes) > 0 {
		why = append(why, "docker.volumes")
	}
	for _, s := range p.Services {
		why = append(why, "services: "+s.Name)
	}
	if p.Workspace {
		why = append(why, "cloud workspaces")
	}
	for _, st := range allStages(p) {
		for _, j := range st.Jobs {
			if j.Kind == protocol.KindPlugin && !(j.Image != nil && attachmentsImage(j.Image.Name)) {
				why = append(why, fmt.Sprintf("plugin jobs (%q runs its image's own command)", jobName(j)))
			}
			if j.Kind == protocol.KindBuiltin && j.Type == typeDockerCache {
				why = append(why, typeDockerCache)
			}
		}
	}
	return strings.Join(why, ", ")
}

// podImages is every image a step of the pipeline may run in, the pipeline's own first (its
// conditions run there): the executor starts them all with the pipeline.
func (x *run) podImages() []executor.PipelineImage {
	p := &x.lease.Plan
	seen := map[string]bool{}
	var out []executor.PipelineImage
	add := func(name string, auth *executor.ImageAuth) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, executor.PipelineImage{Name: name, Auth: auth})
		}
	}
	add(x.envImage(x.lease.Plan.Env))
	for _, st := range allStages(p) {
		for _, j := range st.Jobs {
			if j.Kind == protocol.KindScript || j.Kind == "" {
				add(x.jobImage(j, x.jobEnv(st, j, nil, nil)))
			}
		}
	}
	return out
}

// copyOut brings the files the jobs wrote into the agent's checkout, before the agent reads
// them itself (imports, settings_from, built-in tasks, attachments).
func (x *run) copyOut(ctx context.Context, jl *jobLog) error {
	px, ok := x.cfg.Executor.(executor.Pipelines)
	if !ok {
		return nil
	}
	if err := px.CopyOut(ctx, x.checkout); err != nil {
		jl.note("%v", err)
		return err
	}
	return nil
}

// readsCheckout says whether the agent reads files of the checkout for the job itself.
func (x *run) readsCheckout(job protocol.Job, env map[string]string) bool {
	if len(job.Imports) > 0 || len(job.SettingsFrom) > 0 || len(job.OptionsFrom) > 0 || job.Kind == protocol.KindBuiltin {
		return true
	}
	if job.Kind == protocol.KindPlugin && job.Image != nil {
		name, _ := x.jobImage(job, env)
		return attachmentsImage(name)
	}
	return false
}

func allStages(p *protocol.Plan) []protocol.Stage {
	out := append([]protocol.Stage{}, p.Stages...)
	out = append(out, p.FailStages...)
	return append(out, p.EndStages...)
}

// teamOf is the team of a repository slug ("team/repo" or "team/group/repo").
func teamOf(slug string) string {
	team, _, _ := strings.Cut(slug, "/")
	return team
}
