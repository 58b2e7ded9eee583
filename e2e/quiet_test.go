package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// A healthy system under load logs no ERROR line: an ERROR always means something is wrong.
//
// The defect this guards against: an agent restarts its control long-poll by design whenever its
// running set changes, and the server logged each abandoned poll as a 500 "request failed …
// context canceled" at ERROR (about 10 per 200 pipelines); a browser leaving a live log or a log
// download half-way did the same. A client that goes away is no server error.
//
// Four Docker agents run 200 pipelines (50 pushes of 4); meanwhile clients open live-log streams
// and log downloads and leave them half-way, as browsers do. Every pipeline must succeed and the
// server's log must hold no ERROR line (nor the agents': their work went well too).
func TestLoadLogsNoErrorLines(t *testing.T) {
	t.Parallel() // waits more than it computes: it overlaps the other slow worlds (harness_test.go)
	// At debug: the agents' control polls, counted below, are logged at that level.
	w := newWorld(t, "NIMBUS_LOG_LEVEL=debug")
	agents := make([]*proc, 4)
	for i := range agents {
		agents[i], _ = w.agent("", "NIMBUS_AGENT_NAME=quiet-"+itoa(int64(i)))
	}

	const pushes, perPush = 50, 4
	var cnb strings.Builder
	cnb.WriteString("main:\n  push:\n")
	for i := 0; i < perPush; i++ {
		fmt.Fprintf(&cnb, "    - name: p%d\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: %s }\n"+
			"      stages:\n        - name: only\n          script: for i in 1 2 3; do echo line-$i; sleep 0.1; done\n", i, w.image)
	}
	if err := os.WriteFile(filepath.Join(w.work, ".cnb.yml"), []byte(cnb.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	// Browsers that leave: a live-log stream or a log download abandoned after its first bytes.
	ctx, stopLeavers := context.WithCancel(context.Background())
	var leavers sync.WaitGroup
	jobs := make(chan int64, pushes*perPush)
	var left atomic.Int64
	for range 2 {
		leavers.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case id := <-jobs:
					for _, path := range []string{"/log/stream", "/log"} {
						if w.leaveHalfway(ctx, "/api/v1/jobs/"+itoa(id)+path) {
							left.Add(1)
						}
					}
				}
			}
		})
	}

	begin := time.Now()
	first := int64(0)
	for i := 0; i < pushes; i++ {
		n := w.pushFiles(nil)
		if first == 0 {
			first = n
		}
	}
	for n := first; n < first+pushes; n++ {
		b := w.waitFor(n, 5*time.Minute, "the end", func(b apiclient.Build) bool { return b.Status != "queued" && b.Status != "running" })
		if b.Status != "success" || len(b.Pipelines) != perPush {
			t.Errorf("build #%d: %s %+v", n, b.Status, b.Pipelines)
		}
		for _, p := range b.Pipelines {
			select {
			case jobs <- p.Stages[0].Jobs[0].ID:
			default:
			}
		}
	}
	took := time.Since(begin)
	// Let the leavers work through what is queued, then stop them.
	for deadline := time.Now().Add(time.Minute); len(jobs) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	stopLeavers()
	leavers.Wait()
	if left.Load() == 0 {
		t.Fatal("no client left a stream or download half-way: the test did not exercise abandoned requests")
	}

	// The agents' own control polls must have been restarted, or the test shows nothing.
	if n := strings.Count(w.server.stderr.String(), `"path":"/api/v1/agent/control"`); n < pushes {
		t.Fatalf("only %d control polls in the server's log: the agents did not restart their polls", n)
	}
	errorLines := func(name string, p *proc) {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if isErrorLine(line) {
				t.Errorf("%s logged an ERROR on a healthy system: %s", name, line)
			}
		}
	}
	errorLines("the server", w.server)
	for i, a := range agents {
		errorLines("agent "+itoa(int64(i)), a)
	}
	t.Logf("%d pipelines on 4 agents in %v; %d streams and downloads abandoned half-way",
		pushes*perPush, took.Round(time.Second), left.Load())
}

// isErrorLine says whether a JSON log line is at level ERROR.
func isErrorLine(line string) bool {
	var rec struct {
		Level string `json:"level"`
	}
	if json.Unmarshal([]byte(line), &rec) != nil {
		return strings.Contains(line, "level=ERROR")
	}
	return rec.Level == "ERROR"
}

// leaveHalfway GETs path as alice's token, reads the first bytes of the answer and hangs up, as a
// browser tab closed mid-stream does. It says whether the request got that far.
func (w *world) leaveHalfway(ctx context.Context, path string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	buf := make([]byte, 8)
	n, _ := io.ReadFull(resp.Body, buf)
	return resp.StatusCode < 300 && n > 0
}
