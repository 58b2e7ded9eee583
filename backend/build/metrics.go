package build

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Metrics across commits: a job reports a number as `##[set-output metric.<name>=<number>]`
// on its stdout (the agent reads it like any set-output line and sends the metrics with the
// job's end); the server keeps one row per job and name, with its build's branch, number and
// commit, and GET …/metrics gives the series of one name over a branch's builds, one point a
// build (the last job of the build that reported it), so a chart shows how a model's quality
// moved from commit to commit. Each point names its pipeline and the previous point's, for the
// record diff that says what changed.

// Metric is one number a job reported (migration 00022).
type Metric struct {
	ID          int64     `gorm:"primaryKey"`
	RepoID      int64     `gorm:"not null"`
	BuildID     int64     `gorm:"not null"`
	PipelineID  int64     `gorm:"not null"`
	JobID       int64     `gorm:"not null"`
	BuildNumber int64     `gorm:"not null"`
	Branch      string    `gorm:"not null"`
	CommitSHA   string    `gorm:"not null"`
	Name        string    `gorm:"not null"`
	Value       float64   `gorm:"not null"`
	CreatedAt   time.Time `gorm:"not null"`
}

// MaxSeriesPoints bounds a series: the latest builds of the branch.
const MaxSeriesPoints = 200

// keepMetrics writes a finished job's metrics in its job_finished transaction. The agent
// checked them; a bad one here is a bad client, refused whole.
func keepMetrics(tx *gorm.DB, p *Pipeline, jobID int64, metrics map[string]float64, now time.Time) error {
	if len(metrics) > protocol.MaxMetricsPerJob {
		return fault.Invalid("metrics", "a job reports at most %d metrics", protocol.MaxMetricsPerJob)
	}
	var b Build
	if err := tx.Where("id = ?", p.BuildID).Take(&b).Error; err != nil {
		return err
	}
	branch := b.Branch
	if b.PullNumber != nil && ProposedCode(b.Event) {
		// A request's proposed code is not its target branch's history: its metrics chart
		// under the request (PullMetrics), never in the target's series.
		branch = PullSeries(*b.PullNumber)
	}
	rows := make([]Metric, 0, len(metrics))
	for name, v := range metrics {
		if !protocol.ValidMetricName(name) || math.IsNaN(v) || math.IsInf(v, 0) {
			return fault.Invalid("metrics", "metric %q=%v: a name of letters, digits and _.-/ and a finite number", name, v)
		}
		rows = append(rows, Metric{RepoID: p.RepoID, BuildID: b.ID, PipelineID: p.ID, JobID: jobID, BuildNumber: b.Number,
			Branch: branch, CommitSHA: b.CommitSHA, Name: name, Value: v, CreatedAt: now})
	}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error
}

// PullSeries is the series name of request number's metrics: "pull:<number>", which no branch
// can be (git refuses ':' in a ref name).
func PullSeries(number int64) string { return fmt.Sprintf("pull:%d", number) }

// Point is one build's value of a metric.
type Point struct {
	Build      int64     `json:"build"`
	BuildID    int64     `json:"build_id"`
	PipelineID int64     `json:"pipeline_id"`
	JobID      int64     `json:"job_id"`
	Commit     string    `json:"commit"`
	Value      float64   `json:"value"`
	At         time.Time `json:"at"`
	// PreviousPipelineID is the pipeline of the point before (nil for the first): what the
	// dashboard diffs this point's record against.
	PreviousPipelineID *int64 `json:"previous_pipeline_id"`
}

// MetricNames are the names of the metrics reported on a branch of the repo, sorted.
func (s *Service) MetricNames(ctx context.Context, repoID int64, branch string) ([]string, error) {
	names := []string{}
	err := s.db.WithContext(ctx).Model(&Metric{}).Where("repo_id = ? AND branch = ?", repoID, branch).
		Distinct("name").Order("name").Limit(1000).Pluck("name", &names).Error
	return names, err
}

// Series is metric name over the latest MaxSeriesPoints builds of branch that reported it,
// oldest first: one point a build, from the job that reported it last.
func (s *Service) Series(ctx context.Context, repoID int64, branch, name string) ([]Point, error) {
	var rows []Metric
	// The rows of the latest builds (a build may hold several reports of one name), newest
	// first; bounded generously, then cut to the builds.
	err := s.db.WithContext(ctx).Where("repo_id = ? AND branch = ? AND name = ?", repoID, branch, name).
		Order("build_number DESC, id DESC").Limit(MaxSeriesPoints * 10).Find(&rows).Error
	if err != nil {
		return nil, err
	}
	points := []Point{}
	for _, m := range rows {
		if n := len(points); n > 0 && points[n-1].Build == m.BuildNumber {
			continue // an earlier report of the same build
		}
		if len(points) == MaxSeriesPoints {
			break
		}
		points = append(points, Point{Build: m.BuildNumber, BuildID: m.BuildID, PipelineID: m.PipelineID, JobID: m.JobID,
			Commit: m.CommitSHA, Value: m.Value, At: m.CreatedAt})
	}
	slices.Reverse(points)
	for i := 1; i < len(points); i++ {
		prev := points[i-1].PipelineID
		points[i].PreviousPipelineID = &prev
	}
	return points, nil
}

// SeriesJSON is GET /repos/{org}/{repo}/metrics.
type SeriesJSON struct {
	Branch string   `json:"branch"`
	Names  []string `json:"names"`
	Name   string   `json:"name"`
	Points []Point  `json:"points"`
}
