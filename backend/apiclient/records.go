package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Record is a pipeline's reproducibility record (GET /repos/{org}/{repo}/pipelines/{id}/record):
// an in-toto Statement whose predicate is SLSA Provenance v1. The type holds the parts a caller
// reads (what went in and out, where it ran); the document has the rest.
type Record struct {
	Subject   []RecordResource `json:"subject"` // the model files the pipeline pushed
	Predicate RecordPredicate  `json:"predicate"`
}

// RecordPredicate is what was asked for (BuildDefinition) and what ran (RunDetails).
type RecordPredicate struct {
	BuildDefinition RecordDefinition `json:"buildDefinition"`
	RunDetails      RecordRun        `json:"runDetails"`
}

// RecordDefinition is the run's inputs: its runner and env, and every dependency resolved
// (the commit first, then images by digest and model files pulled).
type RecordDefinition struct {
	InternalParameters   RecordParameters `json:"internalParameters"`
	ResolvedDependencies []RecordResource `json:"resolvedDependencies"`
}

// RecordParameters is the runner class and the env the jobs saw (secrets masked).
type RecordParameters struct {
	Runner RecordRunner      `json:"runner"`
	Env    map[string]string `json:"env"`
}

// RecordRunner is the runner class a pipeline asked for.
type RecordRunner struct {
	Class string `json:"class"`
	CPUs  int    `json:"cpus"`
	GPU   string `json:"gpu"` // "" on a CPU runner
}

// RecordRun is where it ran (the builder: agent, versions, GPUs) and each job's outcome and
// timings (Byproducts).
type RecordRun struct {
	Builder    RecordBuilder    `json:"builder"`
	Byproducts []RecordResource `json:"byproducts"`
}

// RecordBuilder is the agent that ran the pipeline and its host.
type RecordBuilder struct {
	ID                  string            `json:"id"`
	Version             map[string]string `json:"version"`
	BuilderDependencies []RecordResource  `json:"builderDependencies"` // the GPUs
}

// RecordResource is a SLSA ResourceDescriptor.
type RecordResource struct {
	Name        string            `json:"name"`
	URI         string            `json:"uri"`
	Digest      map[string]string `json:"digest"`
	Annotations map[string]any    `json:"annotations"`
}

// PipelineRecord reads a pipeline's reproducibility record.
func (c *Client) PipelineRecord(ctx context.Context, org, repo string, pipeline int64) (*Record, error) {
	return call[Record](ctx, c, http.MethodGet, Path("repos", org, repo, "pipelines", strconv.FormatInt(pipeline, 10), "record"), nil)
}

// RecordDiff is what differs between two pipelines' records, and their timings apart.
type RecordDiff struct {
	Differences []RecordDifference `json:"differences"`
	Timings     []RecordTiming     `json:"timings"`
}

// RecordDifference is one fact that is not the same; A or B is nil where only the other has it.
type RecordDifference struct {
	Category string  `json:"category"`
	Key      string  `json:"key"`
	A        *string `json:"a"`
	B        *string `json:"b"`
}

// String is "category key: a → b", with "-" for a side that has no such fact.
func (d RecordDifference) String() string {
	return fmt.Sprintf("%s %s: %s → %s", d.Category, d.Key, orDash(d.A), orDash(d.B))
}

func orDash[T any](v *T) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

// RecordTiming is one duration of both runs, in milliseconds.
type RecordTiming struct {
	Key string `json:"key"`
	AMs *int64 `json:"a_ms"`
	BMs *int64 `json:"b_ms"`
}

// String is "key: a ms → b ms", with "-" for a side that has no such duration.
func (t RecordTiming) String() string {
	return fmt.Sprintf("%s: %s ms → %s ms", t.Key, orDash(t.AMs), orDash(t.BMs))
}

// CompareRecords answers what differs between the records of pipelines a and b of the repo
// (GET /repos/{org}/{repo}/records/compare).
func (c *Client) CompareRecords(ctx context.Context, org, repo string, a, b int64) (*RecordDiff, error) {
	q := url.Values{"a": {strconv.FormatInt(a, 10)}, "b": {strconv.FormatInt(b, 10)}}
	return call[RecordDiff](ctx, c, http.MethodGet, Path("repos", org, repo, "records", "compare")+"?"+q.Encode(), nil)
}
