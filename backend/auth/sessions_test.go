package auth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

func TestListAndRevokeSessions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		alice, _ := f.svc.Signup(ctx, "alice", "alice@example.com", goodPassword)
		bob, _ := f.svc.Signup(ctx, "bob", "bob@example.com", goodPassword)
		rawOld, old, _ := f.svc.CreateSession(ctx, alice.ID)
		f.clock.Advance(time.Hour)
		_, recent, _ := f.svc.CreateSession(ctx, alice.ID)
		_, bobs, _ := f.svc.CreateSession(ctx, bob.ID)

		list, err := f.svc.ListSessions(ctx, alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].ID != recent.ID || list[1].ID != old.ID {
			t.Fatalf("alice's sessions, most recently seen first: %+v", list)
		}

		pub := auth.PublicSessionID(old.ID)
		if pub == old.ID || pub == rawOld || len(pub) != 16 || pub != auth.PublicSessionID(old.ID) {
			t.Fatalf("public id %q: short, stable, neither the cookie nor the lookup key", pub)
		}

		for _, tc := range []struct {
			name string
			user int64
			id   string
			want string // the API error code; "" for success
		}{
			{"unknown id", alice.ID, "0123456789abcdef", fault.CodeNotFound},
			{"empty id", alice.ID, "", fault.CodeNotFound},
			{"the lookup key instead of the public id", alice.ID, old.ID, fault.CodeNotFound},
			{"another user's session", alice.ID, auth.PublicSessionID(bobs.ID), fault.CodeNotFound},
			{"own session", alice.ID, pub, ""},
			{"own session again", alice.ID, pub, fault.CodeNotFound},
		} {
			err := f.svc.RevokeSession(ctx, tc.user, tc.id)
			if got := apiCode(err); got != tc.want || (tc.want == "" && err != nil) {
				t.Errorf("%s: got %v, want code %q", tc.name, err, tc.want)
			}
		}

		req := httptest.NewRequest("GET", "/", nil)
		req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: rawOld})
		if p, err := f.svc.Authenticate(ctx, req); err != nil || p.Authenticated() {
			t.Fatalf("a revoked session still signs in: %+v %v", p, err)
		}
		if list, _ := f.svc.ListSessions(ctx, bob.ID); len(list) != 1 {
			t.Fatalf("bob's session was touched: %+v", list)
		}
		if list, _ := f.svc.ListSessions(ctx, alice.ID); len(list) != 1 || list[0].ID != recent.ID {
			t.Fatalf("alice's sessions after the revoke: %+v", list)
		}

		f.clock.Advance(15 * 24 * time.Hour)
		if list, _ := f.svc.ListSessions(ctx, alice.ID); len(list) != 0 {
			t.Fatalf("expired sessions are listed: %+v", list)
		}
		if err := f.svc.RevokeSession(ctx, alice.ID, auth.PublicSessionID(recent.ID)); apiCode(err) != fault.CodeNotFound {
			t.Fatalf("revoking an expired session: %v", err)
		}
	})
}
