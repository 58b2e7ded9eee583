package pull_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/git/gittest"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// BenchmarkPullRequest measures, on a repository of 10,000 commits, with the whole app behind
// its HTTP server (PostgreSQL, the test Redis):
//
//   - open-to-queued: POST /pulls until its answer, which comes after the pre-merged commit is
//     made and its refs written, the pull_request build planned and stored, and its pipeline
//     put on its Redis queue (the events fire inside the request). Target p50 < 150 ms;
//   - mergeability: git merge-tree of the source into the target, the check that names
//     conflicts. Target < 100 ms.
//
// Each source branch is one commit on main's parent, so every merge is a real three-way one.
// Alone: e2e/testenv.sh go test -run '^$' -bench PullRequest -benchtime 1x -v ./backend/pull
func BenchmarkPullRequest(b *testing.B) {
	const commits, rounds = 10_000, 30
	srv := apptest.Start(b, map[string]string{"NIMBUS_DATABASE_URL": storetest.PostgresURL(b), "NIMBUS_REDIS_URL": testenv.RedisURL(b)}, app.Options{})
	owner := srv.Signup(b, "bencher")
	o := srv.Org(b, owner, "bench")
	r := srv.Repo(b, o, "history", "private")
	path := srv.App.Repos.Path(r)
	ctx := context.Background()
	head := gittest.BigHistory(b, path, commits, "main:\n  pull_request:\n    - name: check\n      stages: [ { name: t, script: echo check } ]\n")
	parent, err := git.ResolveRef(ctx, path, head+"^")
	if err != nil {
		b.Fatal(err)
	}
	tree, err := git.TreeOf(ctx, path, parent)
	if err != nil {
		b.Fatal(err)
	}
	token := srv.Token(b, owner, auth.ScopeRepoRead, auth.ScopeRepoWrite)
	who := git.Signature{Name: "Bench", Email: "bench@example.com", When: time.Unix(1800000000, 0).UTC()}
	for b.Loop() {
		var opens, merges []time.Duration
		for i := range rounds {
			// A source of one commit on main's parent (its tree unchanged: a commit main lacks, so
			// not "nothing to merge"), merged against main's head.
			branch := fmt.Sprintf("topic-%d-%d", i, time.Now().UnixNano())
			src, err := git.CommitTree(ctx, path, git.NewCommit{Tree: tree, Parents: []string{parent}, Message: branch, Author: who, Committer: who})
			if err == nil {
				err = git.UpdateRef(ctx, path, "refs/heads/"+branch, src, git.ZeroSHA)
			}
			if err != nil {
				b.Fatal(err)
			}
			began := time.Now()
			if _, err := git.MergeTree(ctx, path, head, src); err != nil {
				b.Fatal(err)
			}
			merges = append(merges, time.Since(began))

			body := fmt.Sprintf(`{"source_branch": %q, "title": "bench %d"}`, branch, i)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/repos/bench/history/pulls", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			began = time.Now()
			resp, err := http.DefaultClient.Do(req)
			took := time.Since(began)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Fatalf("open: %d", resp.StatusCode)
			}
			opens = append(opens, took)
		}
		// Every request's pull_request pipeline is queued: the figure is the real path.
		var queued int64
		srv.App.DB.Model(&build.Pipeline{}).Joins("JOIN builds ON builds.id = pipelines.build_id").
			Where("builds.repo_id = ? AND builds.event = ? AND pipelines.status = ?", r.ID, "pull_request", build.StatusQueued).Count(&queued)
		if queued < rounds {
			b.Fatalf("%d pull_request pipelines queued after %d requests", queued, rounds)
		}
		p50 := func(ds []time.Duration) float64 {
			s := slices.Clone(ds)
			slices.Sort(s)
			return float64(s[len(s)/2].Microseconds()) / 1000
		}
		b.ReportMetric(p50(opens), "open-to-queued-p50-ms")
		b.ReportMetric(p50(merges), "mergeability-p50-ms")
		b.Logf("%d commits: open → pull_request queued p50 %.1f ms (target < 150), mergeability p50 %.1f ms (target < 100)",
			commits, p50(opens), p50(merges))
	}
}
