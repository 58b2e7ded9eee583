package runner

import (
	"fmt"
	"strings"
	"testing"
)

func TestMetricValues(t *testing.T) {
	many := map[string]string{}
	for i := range 105 {
		many[fmt.Sprintf("metric.m%03d", i)] = "1"
	}
	for _, tc := range []struct {
		name   string
		values map[string]string
		want   map[string]float64
		notes  string
	}{
		{"none", map[string]string{"version": "1.2"}, nil, ""},
		{"numbers", map[string]string{"metric.accuracy": "0.91", "metric.loss": " -1.5e-3 ", "metric.eval/f1": "7", "other": "x"},
			map[string]float64{"accuracy": 0.91, "loss": -0.0015, "eval/f1": 7}, ""},
		{"not numbers", map[string]string{"metric.acc": "high", "metric.inf": "Inf", "metric.nan": "NaN", "metric.ok": "1"},
			map[string]float64{"ok": 1}, `"high" is not a finite number|"Inf" is not|"NaN" is not`},
		{"bad names", map[string]string{"metric.": "1", "metric.a b": "2", "metric." + strings.Repeat("x", 101): "3"},
			map[string]float64{}, `metric "": a name|metric "a b"`},
		// Masked, the name would no longer be one the server takes, and the value no number.
		{"secrets", map[string]string{"metric.acc-s3cr3t": "1", "metric.pin": "31415926", "metric.ok": "2"},
			map[string]float64{"ok": 2}, `metric "acc-s3cr3t": its name holds a secret|metric pin: its value holds a secret`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var notes []string
			got := metricValues(tc.values, func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) },
				newReportMasker([]string{"s3cr3t", "31415926"}).holds)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("metrics %v, want %v", got, tc.want)
			}
			for _, want := range strings.Split(tc.notes, "|") {
				if want != "" && !strings.Contains(strings.Join(notes, "\n"), want) {
					t.Errorf("notes %q lack %q", notes, want)
				}
			}
		})
	}
	var notes int
	got := metricValues(many, func(string, ...any) { notes++ }, func(string) bool { return false })
	if len(got) != 100 || notes != 5 || got["m099"] != 1 || got["m100"] != 0 {
		t.Errorf("%d metrics, %d notes", len(got), notes)
	}
}
