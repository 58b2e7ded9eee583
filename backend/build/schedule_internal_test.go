package build

import (
	"testing"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
)

func TestSchedulesForBranch(t *testing.T) {
	all := []spec.Schedule{
		{BranchKey: "dev/*", Event: "schedule", Cron: "0 2 * * *"},
		{BranchKey: "main", Event: "crontab: 30 5 * * *", Cron: "30 5 * * *"},
		{BranchKey: "$", Event: "schedule", Cron: "0 3 * * *"},
		{BranchKey: "$", Event: "crontab: 0 4 * * *", Cron: "0 4 * * *"},
	}
	tests := []struct {
		branch string
		want   []string
	}{
		{"dev/x", []string{"0 2 * * *", "0 4 * * *"}},   // the glob's schedule; $ still gives the crontab kind
		{"main", []string{"30 5 * * *", "0 3 * * *"}},   // the glob's crontab; $ gives the schedule kind
		{"feature", []string{"0 3 * * *", "0 4 * * *"}}, // nothing matched: $ for both
	}
	for _, tt := range tests {
		got := schedulesFor(all, tt.branch, 1)
		var crons []string
		for _, s := range got {
			crons = append(crons, s.Cron)
			if s.Branch != tt.branch || s.RepoID != 1 {
				t.Errorf("%s: %+v", tt.branch, s)
			}
		}
		if len(crons) != len(tt.want) {
			t.Errorf("%s: %v, want %v", tt.branch, crons, tt.want)
			continue
		}
		for i := range crons {
			if crons[i] != tt.want[i] {
				t.Errorf("%s: %v, want %v", tt.branch, crons, tt.want)
			}
		}
	}
}
