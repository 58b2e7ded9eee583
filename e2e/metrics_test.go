package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const metricsCI = `main:
  push:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: evaluate
          script: |
            echo "##[set-output metric.accuracy=$(cat accuracy.txt)]"
            echo "##[set-output metric.loss=0.5]"
`

// Three builds on main each report an accuracy; the API gives the three points in build order,
// each naming the pipeline before it, and the dashboard charts them in a real Chromium, a click
// on a point opening that build with the record diff against the point before.
func TestMetricsAcrossCommits(t *testing.T) {
	w := newWorld(t)
	w.agent("", "NIMBUS_AGENT_NETWORK=none")
	values := []float64{0.71, 0.83, 0.79}
	var pipelines []int64
	for i, v := range values {
		files := map[string]string{"accuracy.txt": strconv.FormatFloat(v, 'f', -1, 64) + "\n"}
		if i == 0 {
			files[".cnb.yml"] = strings.ReplaceAll(metricsCI, "IMAGE", w.image)
		}
		b := w.waitBuildSuccess(w.pushFiles(files), 2*time.Minute)
		pipelines = append(pipelines, b.Pipelines[0].ID)
	}

	s, err := w.api.api.Metrics(t.Context(), "ml", "trainer", "", "accuracy")
	w.api.check("metrics", err)
	if s.Branch != "main" || strings.Join(s.Names, ",") != "accuracy,loss" || len(s.Points) != 3 {
		t.Fatalf("the series: %+v", s)
	}
	for i, p := range s.Points {
		if p.Build != int64(i+1) || p.PipelineID != pipelines[i] || p.Value != values[i] ||
			(i == 0) != (p.PreviousPipeline == nil) || i > 0 && *p.PreviousPipeline != pipelines[i-1] {
			t.Errorf("point %d: %+v (previous %v)", i, p, p.PreviousPipeline)
		}
	}

	b := startBrowser(t, w.base, 60)
	b.do("open the login page", 20*time.Second, chromedp.Navigate(w.base+"/login?next=%2Fml%2Ftrainer%2Fmetrics"), chromedp.WaitVisible(chromedp.CSS("input[name=login]")))
	b.do("sign in", 10*time.Second, typeInto("input[name=login]", "alice"), typeInto("input[name=password]", "a long enough passphrase"),
		clickOn("button[type=submit]"))
	b.waitJS("the accuracy chart with three points", `document.querySelectorAll('[data-metric="accuracy"] circle').length === 3`, 15*time.Second)
	got := b.text(`[data-metric="accuracy"] svg`)
	for _, n := range []string{"#1", "#2", "#3"} {
		if !strings.Contains(got, n) {
			t.Errorf("the chart does not label build %s: %q", n, got)
		}
	}
	b.shot("metrics")
	b.do("click the third point", 10*time.Second, chromedp.Evaluate[chromedp.Void](
		`document.querySelector('[data-metric="accuracy"] circle[data-build="3"]').dispatchEvent(new MouseEvent('click', {bubbles: true}))`))
	want := "/ml/trainer/builds/3?pipeline=" + itoa(pipelines[2]) + "&compare=" + itoa(pipelines[1])
	b.waitJS("build #3 with the diff against #2", `location.pathname + location.search === `+strconv.Quote(want)+` && !!document.querySelector('[data-testid=record-diff]')`, 15*time.Second)
	b.shot("metrics-diff")
}
