package billing

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// The ledger names each entry's build with one call to Config.Builds per page, for the page's
// distinct pipelines (not one lookup per entry); a pipeline Builds does not name (its repo
// deleted) and an entry of no pipeline get no build, and a failed lookup fails the page.
// TestLedgerEntriesNameTheirPipelinesBuild (http_test.go) runs it against build's real read.
func TestLedgerAsksForThePagesBuildsAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		var calls [][]int64
		var fail error
		cfg := DefaultConfig()
		cfg.Builds = func(_ context.Context, ids []int64) (map[int64]BuildRef, error) {
			calls = append(calls, slices.Sorted(slices.Values(ids)))
			if fail != nil {
				return nil, fail
			}
			return map[int64]BuildRef{1: {Repo: "ml/trainer", Number: 12}, 9: {Repo: "ml/other", Number: 1}}, nil
		}
		f := newFixture(t, db, cfg)
		ctx := context.Background()
		a := f.account()
		f.grant(a, "10")
		for _, id := range []int64{1, 2} { // 2: of a repo since deleted
			if err := f.svc.Start(ctx, gpuRun(id, a.OrgID), f.clock.Now()); err != nil {
				t.Fatal(err)
			}
			if err := f.svc.Settle(ctx, id, f.clock.Now().Add(30*time.Second)); err != nil {
				t.Fatal(err)
			}
		}

		es, err := f.svc.Ledger(ctx, a.ID, paging.Page{Limit: 25})
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) != 1 || !slices.Equal(calls[0], []int64{1, 2}) {
			t.Fatalf("Builds called %v, want once with [1 2]", calls)
		}
		if len(es) != 5 {
			t.Fatalf("%d entries, want the grant and a freeze and a settlement of each pipeline", len(es))
		}
		for _, e := range es {
			switch {
			case e.PipelineID == nil:
				if e.Build != nil {
					t.Errorf("%s entry of no pipeline names build %+v", e.Kind, *e.Build)
				}
			case *e.PipelineID == 1:
				if e.Build == nil || *e.Build != (BuildRef{Repo: "ml/trainer", Number: 12}) {
					t.Errorf("%s entry of pipeline 1: build %v, want ml/trainer #12", e.Kind, e.Build)
				}
			case *e.PipelineID == 2:
				if e.Build != nil {
					t.Errorf("%s entry of pipeline 2 (repo deleted) names build %+v", e.Kind, *e.Build)
				}
			}
		}

		// A page of only the grant asks nothing.
		calls = nil
		if es, err := f.svc.Ledger(ctx, a.ID, paging.Page{Limit: 25, After: es[len(es)-2].ID}); err != nil || len(es) != 1 || len(calls) != 0 {
			t.Fatalf("grant page: %d entries, %v, calls %v", len(es), err, calls)
		}

		fail = errors.New("build is down")
		if _, err := f.svc.Ledger(ctx, a.ID, paging.Page{Limit: 25}); !errors.Is(err, fail) {
			t.Fatalf("Ledger with a failing lookup: %v", err)
		}
	})
}
