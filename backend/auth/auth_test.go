package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/mail"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
)

// outbox records the emails the service sends.
type outbox struct {
	mu   sync.Mutex
	msgs []mail.Message
}

func (o *outbox) Send(_ context.Context, m mail.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.msgs = append(o.msgs, m)
	return nil
}

func (o *outbox) last() mail.Message {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.msgs) == 0 {
		return mail.Message{}
	}
	return o.msgs[len(o.msgs)-1]
}

type fixture struct {
	svc   *auth.Service
	clock *clock.Fake
	mail  *outbox
}

func newFixture(t *testing.T, db *gorm.DB) *fixture {
	t.Helper()
	f := &fixture{mail: &outbox{}}
	w := testworld.New(t, db, testworld.Options{Now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Mail: f.mail,
		Auth: auth.Config{PublicURL: "https://nimbus.test", LoginLimitPerAccount: 3, LoginLimitPerIP: 5, Passwords: auth.CheapPasswords()}})
	f.svc, f.clock = w.Users, w.Clock
	return f
}

func apiCode(err error) string {
	var ae *fault.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

const goodPassword = "a long enough passphrase"

func TestSignupRules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		first, err := f.svc.Signup(ctx, "alice", "alice@example.com", goodPassword)
		if err != nil {
			t.Fatal(err)
		}
		if !first.IsAdmin {
			t.Fatal("the first user must become platform admin")
		}
		second, err := f.svc.Signup(ctx, "bob", "bob@example.com", goodPassword)
		if err != nil || second.IsAdmin {
			t.Fatalf("second user: %+v %v", second, err)
		}
		tests := []struct {
			user, email, pw, code string
		}{
			{"ALICE", "other@example.com", goodPassword, fault.CodeConflict},           // usernames are case-insensitive
			{"carol", "Alice@Example.com", goodPassword, fault.CodeConflict},           // so are emails
			{"-carol", "c@example.com", goodPassword, fault.CodeValidation},            // bad username
			{"carol", "not-an-email", goodPassword, fault.CodeValidation},              // bad email
			{"carol", "c@example.com", "short", fault.CodeValidation},                  // too short
			{"carol", "c@example.com", "password123", fault.CodeValidation},            // breached
			{"carol", "c@example.com", "my-carol-password", fault.CodeValidation},      // contains the username
			{"carol", "c@example.com", strings.Repeat("x", 300), fault.CodeValidation}, // too long
		}
		for _, tt := range tests {
			if _, err := f.svc.Signup(ctx, tt.user, tt.email, tt.pw); apiCode(err) != tt.code {
				t.Errorf("signup(%q, %q, %.12q): err %v, want %s", tt.user, tt.email, tt.pw, err, tt.code)
			}
		}
		var n int64
		db.Model(&auth.User{}).Count(&n)
		if n != 2 {
			t.Fatalf("%d users after rejected sign-ups, want 2", n)
		}
	})
}

func TestConcurrentFirstSignupsMakeOneAdmin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				name := []string{"ann", "ben", "cat", "dan"}[i]
				if _, err := f.svc.Signup(context.Background(), name, name+"@example.com", goodPassword); err != nil {
					t.Error(err)
				}
			}(i)
		}
		wg.Wait()
		var admins int64
		db.Model(&auth.User{}).Where("is_admin").Count(&admins)
		if admins != 1 {
			t.Fatalf("%d admins, want exactly 1", admins)
		}
	})
}

func TestLoginAndRateLimits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		if _, err := f.svc.Signup(ctx, "alice", "alice@example.com", goodPassword); err != nil {
			t.Fatal(err)
		}
		if u, err := f.svc.Login(ctx, "ALICE@example.com", goodPassword, "10.0.0.1"); err != nil || u.Username != "alice" {
			t.Fatalf("login by email: %v", err)
		}
		// Wrong password and unknown user answer alike.
		_, e1 := f.svc.Login(ctx, "alice", "wrong password!", "10.0.0.1")
		_, e2 := f.svc.Login(ctx, "nobody", "wrong password!", "10.0.0.2")
		if apiCode(e1) != fault.CodeUnauthenticated || e1.Error() != e2.Error() {
			t.Fatalf("failures differ: %v / %v", e1, e2)
		}
		// Per account: 3 failures lock the account, even for the right password, from anywhere.
		f.svc.Login(ctx, "alice", "wrong password!", "10.0.0.3")
		f.svc.Login(ctx, "alice", "wrong password!", "10.0.0.4")
		if _, err := f.svc.Login(ctx, "alice", goodPassword, "10.0.0.5"); apiCode(err) != fault.CodeRateLimited {
			t.Fatalf("after 3 failures: %v", err)
		}
		// Per IP: 5 failures from one address lock that address for every account.
		for _, name := range []string{"x1", "x2", "x3", "x4", "x5"} {
			f.svc.Login(ctx, name, "wrong password!", "10.9.9.9")
		}
		if _, err := f.svc.Login(ctx, "someone", "whatever pass", "10.9.9.9"); apiCode(err) != fault.CodeRateLimited {
			t.Fatalf("after 5 failures from one IP: %v", err)
		}
	})
}

func TestTokensScopesRevocationExpiry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.svc.Signup(ctx, "root", "root@example.com", goodPassword) // platform admin
		u, _ := f.svc.Signup(ctx, "alice", "alice@example.com", goodPassword)

		if _, _, err := f.svc.CreateToken(ctx, u, "t", []string{"repo:read", "nope"}, nil); apiCode(err) != fault.CodeValidation {
			t.Fatalf("unknown scope: %v", err)
		}
		if _, _, err := f.svc.CreateToken(ctx, u, "t", []string{"admin"}, nil); apiCode(err) != fault.CodeForbidden {
			t.Fatalf("admin scope for a non-admin: %v", err)
		}
		if _, _, err := f.svc.CreateToken(ctx, u, "t", nil, nil); apiCode(err) != fault.CodeValidation {
			t.Fatalf("no scopes: %v", err)
		}
		exp := f.clock.Now().Add(time.Hour)
		raw, tok, err := f.svc.CreateToken(ctx, u, "ci", []string{"repo:write"}, &exp)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(raw, auth.PrefixPersonal) || tok.TokenHash == raw || strings.Contains(tok.TokenHash, raw) {
			t.Fatalf("token stored in clear or unprefixed: %q", raw)
		}
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", "Bearer "+raw)
		p, err := f.svc.Authenticate(ctx, req)
		if err != nil || p.Kind != auth.KindToken || p.User.ID != u.ID {
			t.Fatalf("bearer: %+v %v", p, err)
		}
		if !p.Has(auth.ScopeRepoRead) || !p.Has(auth.ScopeRepoWrite) || p.Has(auth.ScopeOrgWrite) || p.Has(auth.ScopeAdmin) {
			t.Fatalf("scopes: %v", p.Scopes)
		}
		// Basic with the token as password works too (git, registry).
		req = httptest.NewRequest("GET", "/", nil)
		req.SetBasicAuth("ignored", raw)
		if p, err := f.svc.Authenticate(ctx, req); err != nil || p.User.ID != u.ID {
			t.Fatalf("basic: %v", err)
		}
		// Expiry.
		f.clock.Advance(2 * time.Hour)
		req = httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", "Bearer "+raw)
		if _, err := f.svc.Authenticate(ctx, req); apiCode(err) != fault.CodeUnauthenticated {
			t.Fatalf("expired token: %v", err)
		}
		// Revocation, and someone else's id is a 404.
		raw2, tok2, _ := f.svc.CreateToken(ctx, u, "ci2", []string{"repo:read"}, nil)
		if err := f.svc.RevokeToken(ctx, u.ID+100, tok2.ID); apiCode(err) != fault.CodeNotFound {
			t.Fatalf("revoke someone else's token: %v", err)
		}
		if err := f.svc.RevokeToken(ctx, u.ID, tok2.ID); err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+raw2)
		if _, err := f.svc.Authenticate(ctx, req); apiCode(err) != fault.CodeUnauthenticated {
			t.Fatalf("revoked token: %v", err)
		}
		req.Header.Set("Authorization", "Bearer nbp_doesnotexist")
		if _, err := f.svc.Authenticate(ctx, req); apiCode(err) != fault.CodeUnauthenticated {
			t.Fatalf("unknown token: %v", err)
		}
	})
}

func TestSessionsExpireAndPasswordChangeEndsOthers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		u, _ := f.svc.Signup(ctx, "alice", "alice@example.com", goodPassword)
		rawA, sessA, _ := f.svc.CreateSession(ctx, u.ID)
		rawB, _, _ := f.svc.CreateSession(ctx, u.ID)
		withCookie := func(raw string) *auth.Principal {
			req := httptest.NewRequest("GET", "/", nil)
			req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: raw})
			p, err := f.svc.Authenticate(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		if p := withCookie(rawA); p.Kind != auth.KindSession || p.CSRFToken != sessA.CSRFToken {
			t.Fatalf("session A: %+v", p)
		}
		if err := f.svc.ChangePassword(ctx, u, "wrong current pw", "another passphrase 1", sessA.ID); apiCode(err) != fault.CodeValidation {
			t.Fatalf("wrong current password: %v", err)
		}
		if err := f.svc.ChangePassword(ctx, u, goodPassword, "another passphrase 1", sessA.ID); err != nil {
			t.Fatal(err)
		}
		if p := withCookie(rawB); p.Authenticated() {
			t.Fatal("other session survived the password change")
		}
		if p := withCookie(rawA); !p.Authenticated() {
			t.Fatal("the changing session was ended")
		}
		if _, err := f.svc.Login(ctx, "alice", "another passphrase 1", "1.1.1.1"); err != nil {
			t.Fatalf("new password: %v", err)
		}
		f.clock.Advance(15 * 24 * time.Hour)
		if p := withCookie(rawA); p.Authenticated() {
			t.Fatal("expired session still valid")
		}
	})
}

func TestPasswordResetByEmailOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		u, _ := f.svc.Signup(ctx, "alice", "alice@example.com", goodPassword)
		raw, _, _ := f.svc.CreateSession(ctx, u.ID)
		if err := f.svc.RequestPasswordReset(ctx, "nobody@example.com"); err != nil || f.mail.last().To != "" {
			t.Fatalf("unknown email must send nothing and not fail: %v", err)
		}
		if err := f.svc.RequestPasswordReset(ctx, "ALICE@example.com"); err != nil {
			t.Fatal(err)
		}
		m := f.mail.last()
		token := regexp.MustCompile(`reset-password\?token=(\S+)`).FindStringSubmatch(m.Body)
		if m.To != "alice@example.com" || token == nil || !strings.Contains(m.Body, "https://nimbus.test/") {
			t.Fatalf("reset mail: %+v", m)
		}
		if err := f.svc.ResetPassword(ctx, token[1], "short"); apiCode(err) != fault.CodeValidation {
			t.Fatalf("weak new password: %v", err)
		}
		if err := f.svc.ResetPassword(ctx, token[1], "brand new passphrase"); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.ResetPassword(ctx, token[1], "second new passphrase"); apiCode(err) != fault.CodeValidation {
			t.Fatalf("reset link reused: %v", err)
		}
		req := httptest.NewRequest("GET", "/", nil)
		req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: raw})
		if p, _ := f.svc.Authenticate(ctx, req); p.Authenticated() {
			t.Fatal("sessions survive a password reset")
		}
		if _, err := f.svc.Login(ctx, "alice", "brand new passphrase", "1.1.1.1"); err != nil {
			t.Fatal(err)
		}
		// Links expire.
		f.svc.RequestPasswordReset(ctx, "alice@example.com")
		token = regexp.MustCompile(`reset-password\?token=(\S+)`).FindStringSubmatch(f.mail.last().Body)
		f.clock.Advance(2 * time.Hour)
		if err := f.svc.ResetPassword(ctx, token[1], "third new passphrase"); apiCode(err) != fault.CodeValidation {
			t.Fatalf("expired link: %v", err)
		}
	})
}
