package testworld_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
)

// A world is wired as app.New wires the services: a team comes with its billing account, its
// repos live under the test's own directory, and every service reads the one fake clock.
func TestWorldIsWiredAsTheApp(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		start := time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)
		w := testworld.New(t, db, testworld.Options{Now: start})
		ctx := context.Background()
		u := w.Signup(t, "alice")
		o, err := w.Orgs.Create(ctx, u, "team")
		if err != nil {
			t.Fatal(err)
		}
		var acct billing.Account
		if err := db.Where("org_id = ?", o.ID).Take(&acct).Error; err != nil {
			t.Fatalf("the team's billing account: %v", err)
		}
		w.Clock.Advance(time.Hour)
		r, err := w.Repos.Create(ctx, o, "trainer", repo.Private, "main", "")
		if err != nil {
			t.Fatal(err)
		}
		if !r.CreatedAt.Equal(start.Add(time.Hour)) || !u.CreatedAt.Equal(start) {
			t.Fatalf("created at %v and %v, want the fake clock's %v and %v", u.CreatedAt, r.CreatedAt, start, start.Add(time.Hour))
		}
	})
}
