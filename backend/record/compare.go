package record

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Diff is what differs between two records, a and b: what answers "what changed between the
// good model and the bad one". Timings always differ, so they are apart.
type Diff struct {
	Differences []Difference `json:"differences"`
	Timings     []Timing     `json:"timings"`
}

// Difference is one fact that is not the same. A or B is nil when only the other has it.
type Difference struct {
	// Category is commit, parameters, plan, image, env, secrets, runner, host, input, output
	// or outcome.
	Category string  `json:"category"`
	Key      string  `json:"key"`
	A        *string `json:"a"`
	B        *string `json:"b"`
}

// Timing is how long the pipeline or a job took in each run, in milliseconds (nil: it did not
// run, or has not ended).
type Timing struct {
	Key string `json:"key"`
	A   *int64 `json:"a_ms"`
	B   *int64 `json:"b_ms"`
}

// runIdentity are the variables that name the run itself: they differ between any two runs and
// say nothing about what ran. CNB_IS_RETRY marks a re-run.
var runIdentity = map[string]bool{
	"CNB_BUILD_ID": true, "CNB_BUILD_NUMBER": true, "CNB_PIPELINE_ID": true, "CNB_BUILD_WEB_URL": true,
	"CNB_BUILD_START_TIME": true, "CNB_IS_RETRY": true, "CNB_TOKEN": true,
}

// Compare says what differs between a and b. Files of build-scoped versions ($CNB_BUILD_ID) are
// matched by package and name: each build has its own version.
func Compare(a, b *Statement) (*Diff, error) {
	fa, ta, err := facts(a)
	if err != nil {
		return nil, err
	}
	fb, tb, err := facts(b)
	if err != nil {
		return nil, err
	}
	d := &Diff{Differences: []Difference{}, Timings: []Timing{}}
	for _, k := range union(fa, fb) {
		va, oka := fa[k]
		vb, okb := fb[k]
		if oka && okb && va == vb {
			continue
		}
		cat, key, _ := strings.Cut(k, "\x00")
		diff := Difference{Category: cat, Key: key}
		if oka {
			diff.A = &va
		}
		if okb {
			diff.B = &vb
		}
		d.Differences = append(d.Differences, diff)
	}
	for _, k := range union(ta, tb) {
		t := Timing{Key: k}
		if v, ok := ta[k]; ok {
			t.A = &v
		}
		if v, ok := tb[k]; ok {
			t.B = &v
		}
		d.Timings = append(d.Timings, t)
	}
	return d, nil
}

func union[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// facts flattens a record into comparable "category\x00key" → value pairs, and its timings.
// It reads the statement as JSON so a record read back from JSON compares like a fresh one.
func facts(st *Statement) (map[string]string, map[string]int64, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, nil, err
	}
	var s Statement
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil, err
	}
	f := map[string]string{}
	t := map[string]int64{}
	put := func(cat, key, v string) { f[cat+"\x00"+key] = v }

	bd := &s.Predicate.BuildDefinition
	ext := &bd.ExternalParameters
	put("parameters", "repository", ext.Repository)
	put("parameters", "ref", ext.Ref)
	put("parameters", "event", ext.Event)
	put("parameters", "pipeline", ext.Pipeline)
	for _, dep := range bd.ResolvedDependencies {
		switch {
		case dep.Digest["gitCommit"] != "":
			put("commit", "commit", dep.Digest["gitCommit"])
		case dep.Annotations["package"] != nil:
			put("input", fileKey(dep), dep.Digest["sha256"])
		}
	}
	for _, sub := range s.Subject {
		put("output", fileKey(sub), sub.Digest["sha256"])
	}

	var plan any
	if len(ext.Plan) > 0 {
		if err := json.Unmarshal(ext.Plan, &plan); err != nil {
			return nil, nil, fmt.Errorf("record: plan: %w", err)
		}
	}
	dropJobImages(plan)
	flatten("", plan, func(path, v string) { put("plan", path, v) })

	in := &bd.InternalParameters
	for k, v := range in.Env {
		if !runIdentity[k] {
			put("env", k, v)
		}
	}
	put("secrets", "secrets", strings.Join(in.Secrets, ", "))
	put("secrets", "imports", strings.Join(in.Imports, ", "))
	put("parameters", "triggeredBy", in.TriggeredBy)
	put("runner", "class", in.Runner.Class)
	put("runner", "tags", strings.Join(in.Runner.Tags, ", "))
	put("runner", "cpus", fmt.Sprint(in.Runner.Cpus))
	put("runner", "memoryGiB", fmt.Sprint(in.Runner.MemoryGiB))
	put("runner", "gpu", in.Runner.GPU)

	rd := &s.Predicate.RunDetails
	put("host", "agent", rd.Builder.ID)
	for k, v := range rd.Builder.Version {
		put("host", k, v)
	}
	for _, g := range rd.Builder.BuilderDependencies {
		put("host", g.Name, fmt.Sprintf("%v, %v MiB", g.Annotations["model"], g.Annotations["memoryMiB"]))
	}
	for _, bp := range rd.Byproducts {
		ann := bp.Annotations
		if ms, ok := ann["durationMs"].(float64); ok {
			t[bp.Name] = int64(ms)
		}
		put("outcome", bp.Name+" status", fmt.Sprint(ann["status"]))
		if bp.Name == "pipeline" {
			if r, _ := ann["reason"].(string); r != "" {
				put("outcome", "pipeline reason", r)
			}
			continue
		}
		if c, ok := ann["exitCode"]; ok {
			put("outcome", bp.Name+" exit code", fmt.Sprint(c))
		}
		if d, _ := ann["imageDigest"].(string); d != "" {
			put("image", bp.Name, "sha256:"+hexOf(d))
		}
	}
	return f, t, nil
}

// fileKey names a moved file for matching: a build-scoped version by its place, not its name.
func fileKey(r Resource) string {
	a := r.Annotations
	version := fmt.Sprint(a["version"])
	if scoped, _ := a["buildScoped"].(bool); scoped {
		version = "$CNB_BUILD_ID"
	}
	return fmt.Sprintf("%v/%v/%s/%v", a["repo"], a["package"], version, a["file"])
}

// dropJobImages removes the jobs' image references from a plan read as JSON: an exact re-run
// pins them to digests, and the images are compared by digest.
func dropJobImages(plan any) {
	m, _ := plan.(map[string]any)
	for _, key := range []string{"stages", "failStages", "endStages"} {
		stages, _ := m[key].([]any)
		for _, st := range stages {
			sm, _ := st.(map[string]any)
			jobs, _ := sm["jobs"].([]any)
			for _, j := range jobs {
				if jm, ok := j.(map[string]any); ok {
					delete(jm, "image")
				}
			}
		}
	}
}

// flatten calls put for every leaf of v with its JSON path.
func flatten(path string, v any, put func(path, v string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			flatten(p, e, put)
		}
	case []any:
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", path, i), e, put)
		}
	case nil:
	default:
		raw, _ := json.Marshal(x)
		put(path, string(raw))
	}
}
