package build

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"strings"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A pull request's effect on the model: each metric its proposed code's pipelines report
// (series PullSeries(n)), beside the same metric on the target branch's latest successful build,
// with the delta and whether it got better. Which way is better is declared per metric by the
// pipeline env NIMBUS_METRICS_BETTER ("loss=lower accuracy=higher", spaces or commas), and
// otherwise guessed from the name: losses, errors, perplexities, latencies and durations are
// better lower, everything else higher (accuracy, F1, AUC, BLEU, throughput, …).

// MetricsBetterVar is the pipeline env that declares which way each metric is better.
const MetricsBetterVar = "NIMBUS_METRICS_BETTER"

// MetricValue is one build's value of a metric.
type MetricValue struct {
	Value      float64 `json:"value"`
	Build      int64   `json:"build"`
	PipelineID int64   `json:"pipeline_id"`
	Commit     string  `json:"commit"`
}

// MetricDelta is one metric of a request against its target.
type MetricDelta struct {
	Name string `json:"name"`
	// Head is the request's newest build that reported it; Base the target's latest successful
	// build that did (nil: the target has none yet).
	Head *MetricValue `json:"head"`
	Base *MetricValue `json:"base"`
	// Delta is head - base; nil without a base.
	Delta *float64 `json:"delta"`
	// Better is lower or higher; Declared says the pipeline declared it (else it is guessed).
	Better   string `json:"better"`
	Declared bool   `json:"declared"`
	// Verdict is better, worse or same; "" without a base.
	Verdict string `json:"verdict"`
}

// lowerIsBetter are name parts of metrics that are better lower.
var lowerIsBetter = []string{"loss", "error", "err", "perplexity", "ppl", "latency", "duration", "time", "mse", "mae", "rmse", "wer", "cer", "fid"}

// guessBetter says which way a metric is better from its name.
func guessBetter(name string) string {
	for _, part := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return !('a' <= r && r <= 'z') }) {
		for _, low := range lowerIsBetter {
			if part == low || strings.HasSuffix(part, low) && low != "err" && low != "time" {
				return "lower"
			}
		}
	}
	return "higher"
}

// ParseMetricsBetter reads NIMBUS_METRICS_BETTER: name=lower|higher pairs; anything else is
// left out.
func ParseMetricsBetter(v string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\n' || r == '\t' }) {
		name, dir, ok := strings.Cut(pair, "=")
		if dir = strings.ToLower(strings.TrimSpace(dir)); ok && (dir == "lower" || dir == "higher") && protocol.ValidMetricName(name) {
			out[name] = dir
		}
	}
	return out
}

// PullMetrics compares the metrics of request number of repoID with target's.
func (s *Service) PullMetrics(ctx context.Context, repoID, number int64, target string) ([]MetricDelta, error) {
	latest := func(q func() ([]Metric, error)) (map[string]Metric, error) {
		rows, err := q()
		if err != nil {
			return nil, err
		}
		out := map[string]Metric{}
		for _, m := range rows { // newest first: the first of a name wins
			if _, seen := out[m.Name]; !seen {
				out[m.Name] = m
			}
		}
		return out, nil
	}
	head, err := latest(func() (rows []Metric, err error) {
		err = s.db.WithContext(ctx).Where("repo_id = ? AND branch = ?", repoID, PullSeries(number)).
			Order("build_number DESC, id DESC").Limit(MaxSeriesPoints * 10).Find(&rows).Error
		return rows, err
	})
	if err != nil {
		return nil, err
	}
	if len(head) == 0 {
		return []MetricDelta{}, nil
	}
	names := make([]string, 0, len(head))
	for n := range head {
		names = append(names, n)
	}
	sort.Strings(names)
	base, err := latest(func() (rows []Metric, err error) {
		err = s.db.WithContext(ctx).Table("metrics").Select("metrics.*").Joins("JOIN builds ON builds.id = metrics.build_id").
			Where("metrics.repo_id = ? AND metrics.branch = ? AND metrics.name IN ? AND builds.status = ?", repoID, target, names, StatusSuccess).
			Order("metrics.build_number DESC, metrics.id DESC").Limit(MaxSeriesPoints * 10).Find(&rows).Error
		return rows, err
	})
	if err != nil {
		return nil, err
	}
	declared, err := s.metricsBetter(ctx, head)
	if err != nil {
		return nil, err
	}
	out := make([]MetricDelta, 0, len(names))
	for _, n := range names {
		h := head[n]
		d := MetricDelta{Name: n, Head: &MetricValue{Value: h.Value, Build: h.BuildNumber, PipelineID: h.PipelineID, Commit: h.CommitSHA}}
		d.Better, d.Declared = declared[n], declared[n] != ""
		if !d.Declared {
			d.Better = guessBetter(n)
		}
		if b, ok := base[n]; ok {
			d.Base = &MetricValue{Value: b.Value, Build: b.BuildNumber, PipelineID: b.PipelineID, Commit: b.CommitSHA}
			delta := h.Value - b.Value
			d.Delta = &delta
			switch {
			case math.Abs(delta) <= 1e-12*math.Max(1, math.Abs(b.Value)):
				d.Verdict = "same"
			case (delta < 0) == (d.Better == "lower"):
				d.Verdict = "better"
			default:
				d.Verdict = "worse"
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// metricsBetter reads NIMBUS_METRICS_BETTER from the plans of the pipelines that reported the
// head values (a pipeline's own env, then its jobs').
func (s *Service) metricsBetter(ctx context.Context, head map[string]Metric) (map[string]string, error) {
	ids := map[int64]bool{}
	for _, m := range head {
		ids[m.PipelineID] = true
	}
	keys := make([]int64, 0, len(ids))
	for id := range ids {
		keys = append(keys, id)
	}
	var ps []Pipeline
	if err := s.db.WithContext(ctx).Select("id", "plan").Where("id IN ?", keys).Find(&ps).Error; err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range ps {
		var plan protocol.Plan
		if json.Unmarshal([]byte(p.Plan), &plan) != nil {
			continue
		}
		for k, v := range ParseMetricsBetter(plan.Env[MetricsBetterVar]) {
			out[k] = v
		}
	}
	return out, nil
}
