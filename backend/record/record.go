// Package record makes a pipeline's reproducibility record: what ran, on what, with what, as the
// backend and the agent observed it — never as a job says. The record is assembled on read from
// what other packages kept at the time (package build: the commit, the plan as it was leased, the
// agent and host snapshot of the lease, the names of the secrets it handed out, each job's image
// by digest, timings and exit codes; package artifacts: every model file the pipeline's job token
// pushed or pulled, with its digest), so it costs a run nothing but those few writes.
//
// It reads as an in-toto Statement v1 with a SLSA Provenance v1 predicate, so existing tools
// read it: the subjects are the files the pipeline pushed, by sha256; the build definition holds
// the repository, ref, event and resolved plan (external) and the runner class, env and secret
// names (internal); the resolved dependencies are the commit, every image by digest and every
// file pulled; the run details name the agent and its host (driver, CUDA, CPU, GPUs) and carry
// each job's status, exit code and timings as byproducts.
//
// Around it: Compare says what differs between two records (timings apart), and an exact re-run
// (Handler) starts a build from a record with its commit, its plan and its images pinned to the
// recorded digests, refusing when something it needs is gone.
package record

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The statement's fixed type URIs.
const (
	StatementType = "https://in-toto.io/Statement/v1"
	PredicateType = "https://slsa.dev/provenance/v1"
	BuildType     = "https://nimbus.build/provenance/cnb-pipeline/v1"
)

// Statement is an in-toto Statement v1 whose predicate is SLSA Provenance v1.
type Statement struct {
	Type          string     `json:"_type"`
	Subject       []Resource `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     Provenance `json:"predicate"`
}

// Resource is SLSA's ResourceDescriptor.
type Resource struct {
	Name        string            `json:"name,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest,omitempty"`
	Annotations map[string]any    `json:"annotations,omitempty"`
}

// Provenance is the SLSA v1 predicate.
type Provenance struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition is what was asked for (external) and how the platform resolved it (internal).
type BuildDefinition struct {
	BuildType            string     `json:"buildType"`
	ExternalParameters   External   `json:"externalParameters"`
	InternalParameters   Internal   `json:"internalParameters"`
	ResolvedDependencies []Resource `json:"resolvedDependencies"`
}

// External are the parameters a person controls: the repo, the ref and event that triggered,
// and the pipeline of its .cnb.yml, resolved (include, anchors, substitution done).
type External struct {
	Repository string `json:"repository"` // org/name
	Ref        string `json:"ref"`        // refs/heads/… or refs/tags/…
	Event      string `json:"event"`
	Pipeline   string `json:"pipeline"` // CNB_PIPELINE_KEY
	Name       string `json:"pipelineName"`
	// Plan is the resolved plan. Image credentials are masked; the built-in variables are in
	// Internal.Env instead.
	Plan json.RawMessage `json:"plan"`
}

// Internal are what the platform chose: the runner class, the env every job started from and
// the names (only) of the secrets it handed out.
type Internal struct {
	Runner Runner `json:"runner"`
	// Env is the pipeline-level env, the built-ins and the run's identity variables, with their
	// values; jobs' own env is in the plan.
	Env map[string]string `json:"env"`
	// Secrets are names only: the repo secrets the lease handed the jobs, CNB_TOKEN, and the
	// env files (imports) read at run time.
	Secrets     []string `json:"secrets"`
	Imports     []string `json:"imports"`
	TriggeredBy string   `json:"triggeredBy,omitempty"`
}

// Runner is the runner class the pipeline ran in.
type Runner struct {
	Class       string   `json:"class"`
	Tags        []string `json:"tags"`
	Cpus        int      `json:"cpus"`
	MemoryGiB   int      `json:"memoryGiB"`
	GPU         string   `json:"gpu,omitempty"`
	GPUMemoryGB int      `json:"gpuMemoryGB,omitempty"`
}

// RunDetails are who ran it and what came of it.
type RunDetails struct {
	Builder    Builder    `json:"builder"`
	Metadata   Metadata   `json:"metadata"`
	Byproducts []Resource `json:"byproducts"`
}

// Builder is the agent; Version its and its host's versions; BuilderDependencies its GPUs.
type Builder struct {
	ID                  string            `json:"id"`
	Version             map[string]string `json:"version,omitempty"`
	BuilderDependencies []Resource        `json:"builderDependencies,omitempty"`
}

// Metadata of the run.
type Metadata struct {
	InvocationID string     `json:"invocationId"`
	StartedOn    *time.Time `json:"startedOn,omitempty"`
	FinishedOn   *time.Time `json:"finishedOn,omitempty"`
}

// Moved is a model file the pipeline pushed or pulled, as package artifacts wrote it down.
type Moved struct {
	Repo, Package, Version, File string
	Digest                       string // sha256:…
	Size                         int64
	BuildScoped                  bool
}

// Inputs is everything a record is made of.
type Inputs struct {
	PublicURL string
	Org, Repo string
	Rec       *build.Recorded
	Pushed    []Moved
	Pulled    []Moved
}

// Make builds the record of one pipeline. It is pure: the same inputs give the same statement.
func Make(in Inputs) (*Statement, error) {
	r := in.Rec
	p := &r.Pipeline
	slug := in.Org + "/" + in.Repo
	var host build.HostSnapshot
	if p.Host != "" {
		if err := json.Unmarshal([]byte(p.Host), &host); err != nil {
			return nil, fmt.Errorf("record: host of pipeline %d: %w", p.ID, err)
		}
	}
	var secretNames []string
	if p.SecretNames != "" {
		if err := json.Unmarshal([]byte(p.SecretNames), &secretNames); err != nil {
			return nil, fmt.Errorf("record: secrets of pipeline %d: %w", p.ID, err)
		}
	}

	env := map[string]string{}
	maps.Copy(env, r.Plan.Env)
	maps.Copy(env, r.Plan.Builtins)
	// What the lease added for this run (package scheduler's leaseFor), CNB_TOKEN aside.
	env["CNB_BUILD_ID"] = build.BuildIDOf(r.Build.ID)
	env["CNB_BUILD_NUMBER"] = strconv.FormatInt(r.Build.Number, 10)
	env["CNB_PIPELINE_ID"] = strconv.FormatInt(p.ID, 10)
	env["CNB_BUILD_WEB_URL"] = in.PublicURL + "/" + slug + "/builds/" + strconv.FormatInt(r.Build.Number, 10)
	if p.StartedAt != nil {
		env["CNB_BUILD_START_TIME"] = p.StartedAt.UTC().Format(time.RFC1123)
	}
	for _, name := range secretNames {
		env[name] = "***"
	}
	secrets := append(slices.Clone(secretNames), "CNB_TOKEN")
	slices.Sort(secrets)

	plan, err := json.Marshal(publicPlan(r.Plan))
	if err != nil {
		return nil, err
	}
	imports := collectImports(&r.Plan)

	ref := "refs/heads/" + r.Build.Branch
	if r.Build.Tag != "" {
		ref = "refs/tags/" + r.Build.Tag
	}
	deps := []Resource{{
		URI:    "git+" + in.PublicURL + "/" + slug + ".git@" + ref,
		Digest: map[string]string{"gitCommit": r.Build.CommitSHA},
	}}
	deps = append(deps, imageDeps(r)...)
	for _, m := range in.Pulled {
		deps = append(deps, fileResource(in.PublicURL, m))
	}
	subjects := []Resource{}
	for _, m := range in.Pushed {
		subjects = append(subjects, fileResource(in.PublicURL, m))
	}

	st := &Statement{
		Type:          StatementType,
		Subject:       subjects,
		PredicateType: PredicateType,
		Predicate: Provenance{
			BuildDefinition: BuildDefinition{
				BuildType: BuildType,
				ExternalParameters: External{Repository: slug, Ref: ref, Event: r.Build.Event, Pipeline: r.Plan.Key,
					Name: p.Name, Plan: plan},
				InternalParameters: Internal{
					Runner: Runner{Class: r.Plan.Runner.Class, Tags: r.Plan.Runner.Tags, Cpus: r.Plan.Runner.Cpus,
						MemoryGiB: r.Plan.Runner.MemoryGiB, GPU: r.Plan.Runner.GPU, GPUMemoryGB: r.Plan.Runner.GPUMemoryGB},
					Env: env, Secrets: secrets, Imports: imports, TriggeredBy: r.TriggeredBy,
				},
				ResolvedDependencies: deps,
			},
			RunDetails: RunDetails{
				Builder: builder(in.PublicURL, &host),
				Metadata: Metadata{
					InvocationID: env["CNB_BUILD_WEB_URL"] + "?pipeline=" + strconv.FormatInt(p.ID, 10),
					StartedOn:    utc(p.StartedAt), FinishedOn: utc(p.FinishedAt),
				},
				Byproducts: byproducts(r),
			},
		},
	}
	return st, nil
}

// publicPlan is the plan as the record shows it: registry credentials masked, and the
// built-ins left to the env (they hold the run's identity, which Compare sets apart).
func publicPlan(plan protocol.Plan) protocol.Plan {
	mask := func(im *protocol.Image) *protocol.Image {
		if im == nil {
			return nil
		}
		c := *im
		if c.User != "" {
			c.User = "***"
		}
		if c.Password != "" {
			c.Password = "***"
		}
		return &c
	}
	plan.Builtins = nil
	plan.Image = mask(plan.Image)
	for _, list := range []*[]protocol.Stage{&plan.Stages, &plan.FailStages, &plan.EndStages} {
		stages := slices.Clone(*list)
		for i := range stages {
			jobs := slices.Clone(stages[i].Jobs)
			for k := range jobs {
				jobs[k].Image = mask(jobs[k].Image)
			}
			stages[i].Jobs = jobs
		}
		*list = stages
	}
	return plan
}

func collectImports(plan *protocol.Plan) []string {
	seen := map[string]bool{}
	out := []string{}
	add := func(list []string) {
		for _, s := range list {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	add(plan.Imports)
	for _, list := range [][]protocol.Stage{plan.Stages, plan.FailStages, plan.EndStages} {
		for _, st := range list {
			for _, j := range st.Jobs {
				add(j.Imports)
			}
		}
	}
	return out
}

// jobKey names a job in a record: its stage's and its own name, with the positions that keep
// two of one name apart.
func jobKey(st *build.Stage, j *build.Job) string {
	return fmt.Sprintf("%d.%d %s / %s", st.Position, j.Position, st.Name, j.Name)
}

// imageDeps are the images the jobs ran, one resource per digest with the jobs that ran it.
func imageDeps(r *build.Recorded) []Resource {
	stages := map[int64]*build.Stage{}
	for i := range r.Stages {
		stages[r.Stages[i].ID] = &r.Stages[i]
	}
	var out []Resource
	at := map[string]int{}
	for i := range r.Jobs {
		j := &r.Jobs[i]
		st := stages[j.StageID]
		if j.ImageDigest == "" || st == nil {
			continue
		}
		if k, ok := at[j.ImageDigest]; ok {
			ann := out[k].Annotations
			ann["jobs"] = append(ann["jobs"].([]string), jobKey(st, j))
			continue
		}
		at[j.ImageDigest] = len(out)
		out = append(out, Resource{
			URI:         "oci://" + j.Image,
			Digest:      map[string]string{"sha256": hexOf(j.ImageDigest)},
			Annotations: map[string]any{"ref": j.ImageDigest, "image": j.Image, "jobs": []string{jobKey(st, j)}},
		})
	}
	return out
}

// hexOf is the hex of a "sha256:…" digest, or of the digest in "repo@sha256:…".
func hexOf(d string) string {
	if i := strings.LastIndex(d, "@"); i >= 0 {
		d = d[i+1:]
	}
	return strings.TrimPrefix(d, "sha256:")
}

func fileResource(publicURL string, m Moved) Resource {
	return Resource{
		Name:   m.Repo + "/" + m.Package + "/" + m.Version + "/" + m.File,
		URI:    publicURL + "/api/v1/repos/" + m.Repo + "/artifacts/" + m.Package + "/" + m.Version + "/" + m.File,
		Digest: map[string]string{"sha256": hexOf(m.Digest)},
		Annotations: map[string]any{"repo": m.Repo, "package": m.Package, "version": m.Version, "file": m.File,
			"size": m.Size, "buildScoped": m.BuildScoped},
	}
}

func builder(publicURL string, h *build.HostSnapshot) Builder {
	b := Builder{ID: publicURL + "/agents/" + h.AgentID, Version: map[string]string{}}
	if h.AgentID == "" {
		b.ID = publicURL + "/agents/unknown"
	}
	for k, v := range map[string]string{
		"nimbus-agent": h.Version, "executor": h.Executor, "agent-name": h.Name, "os": h.Host.OS, "kernel": h.Host.Kernel,
		"cpu-model": h.Host.CPUModel, "nvidia-driver": h.Host.GPUDriver, "cuda": h.Host.CUDAVersion, "docker-engine": h.Host.Engine,
	} {
		if v != "" {
			b.Version[k] = v
		}
	}
	for _, g := range h.GPUs {
		b.BuilderDependencies = append(b.BuilderDependencies, Resource{
			Name:        "gpu" + strconv.Itoa(g.Index),
			Annotations: map[string]any{"model": g.Name, "memoryMiB": g.MemoryMiB, "uuid": g.UUID},
		})
	}
	return b
}

// byproducts are the pipeline's and each job's outcome and timings.
func byproducts(r *build.Recorded) []Resource {
	out := []Resource{{Name: "pipeline", Annotations: map[string]any{
		"status": r.Pipeline.Status, "reason": r.Pipeline.Reason, "durationMs": millis(r.Pipeline.StartedAt, r.Pipeline.FinishedAt),
	}}}
	stages := map[int64]*build.Stage{}
	for i := range r.Stages {
		stages[r.Stages[i].ID] = &r.Stages[i]
	}
	jobs := slices.Clone(r.Jobs)
	slices.SortStableFunc(jobs, func(a, b build.Job) int {
		sa, sb := stages[a.StageID], stages[b.StageID]
		if sa != nil && sb != nil && sa.Position != sb.Position {
			return sa.Position - sb.Position
		}
		return a.Position - b.Position
	})
	for i := range jobs {
		j := &jobs[i]
		st := stages[j.StageID]
		if st == nil {
			continue
		}
		ann := map[string]any{"stage": st.Name, "job": j.Name, "stagePosition": st.Position, "jobPosition": j.Position,
			"status": j.Status, "durationMs": millis(j.StartedAt, j.FinishedAt)}
		if st.Kind != "" {
			ann["stageKind"] = st.Kind
		}
		if j.Type != "" {
			ann["type"] = j.Type
		}
		if j.ExitCode != nil {
			ann["exitCode"] = *j.ExitCode
		}
		if j.StartedAt != nil {
			ann["startedOn"] = j.StartedAt.UTC()
		}
		if j.FinishedAt != nil {
			ann["finishedOn"] = j.FinishedAt.UTC()
		}
		if j.Image != "" {
			ann["image"] = j.Image
		}
		if j.ImageDigest != "" {
			ann["imageDigest"] = j.ImageDigest
		}
		out = append(out, Resource{Name: jobKey(st, j), Annotations: ann})
	}
	return out
}

func millis(from, to *time.Time) any {
	if from == nil || to == nil {
		return nil
	}
	return to.Sub(*from).Milliseconds()
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
