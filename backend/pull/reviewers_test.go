package pull_test

import (
	"context"
	"slices"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// Reviewers: asked in order, asking twice or removing someone not asked changes nothing, the
// author cannot be asked, and a closed request takes no more.
func TestReviewers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		bob, carol := f.w.Signup(t, "bob"), f.w.Signup(t, "carol")
		f.branch("a", map[string]string{"a.txt": "a\n"})
		pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "a", Target: "main", Title: "A"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.pulls.SetReviewers(ctx, f.repo, pr.Number, f.alice, []int64{bob.ID, carol.ID, bob.ID}, nil)
		if err != nil || !slices.Equal(got, []int64{bob.ID, carol.ID}) {
			t.Fatalf("asking bob and carol: %v %v", got, err)
		}
		if got, err = f.pulls.SetReviewers(ctx, f.repo, pr.Number, f.alice, nil, []int64{bob.ID, f.alice.ID}); err != nil || !slices.Equal(got, []int64{carol.ID}) {
			t.Fatalf("removing bob: %v %v", got, err)
		}
		_, err = f.pulls.SetReviewers(ctx, f.repo, pr.Number, f.alice, []int64{f.alice.ID}, nil)
		wantKind(t, "asking the author", err, fault.KindInvalid)
		if _, err := f.pulls.Close(ctx, f.repo, pr.Number); err != nil {
			t.Fatal(err)
		}
		_, err = f.pulls.SetReviewers(ctx, f.repo, pr.Number, f.alice, []int64{bob.ID}, nil)
		wantKind(t, "asking on a closed request", err, fault.KindConflict)
	})
}
