package org_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/mail"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
)

type sink struct{ sent []mail.Message }

func (s *sink) Send(_ context.Context, m mail.Message) error { s.sent = append(s.sent, m); return nil }

type fixture struct {
	users *auth.Service
	orgs  *org.Service
	clock *clock.Fake
	mail  *sink
	db    *gorm.DB
}

func newFixture(t *testing.T, db *gorm.DB) *fixture {
	f := &fixture{mail: &sink{}, db: db}
	w := testworld.New(t, db, testworld.Options{Mail: f.mail, PublicURL: "https://nimbus.test"})
	f.users, f.orgs, f.clock = w.Users, w.Orgs, w.Clock
	return f
}

func (f *fixture) user(t *testing.T, name string) *auth.User {
	u, err := f.users.Signup(context.Background(), name, name+"@example.com", "a long enough passphrase")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func code(err error) string {
	var ae *fault.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

func TestCreateOpensBillingAccountAndValidatesNames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		alice := f.user(t, "alice")
		o, err := f.orgs.Create(ctx, alice, "ml-team")
		if err != nil {
			t.Fatal(err)
		}
		var acct billing.Account
		if err := db.Where("org_id = ?", o.ID).Take(&acct).Error; err != nil || acct.Currency != "CNY" {
			t.Fatalf("billing account: %+v %v", acct, err)
		}
		if role, _ := f.orgs.RoleOf(ctx, o.ID, alice.ID); role != org.Owner {
			t.Fatalf("creator role %q", role)
		}
		for name, want := range map[string]string{"ML-TEAM": fault.CodeConflict, "api": fault.CodeValidation,
			"a_b": fault.CodeValidation, "-x": fault.CodeValidation, "../x": fault.CodeValidation, "": fault.CodeValidation} {
			if _, err := f.orgs.Create(ctx, alice, name); code(err) != want {
				t.Errorf("create %q: %v, want %s", name, err, want)
			}
		}
		var n int64
		db.Model(&billing.Account{}).Count(&n)
		if n != 1 {
			t.Fatalf("%d billing accounts after rejected creates", n)
		}
	})
}

func TestRolesAndTheLastOwner(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		owner, adm, dev := f.user(t, "owner"), f.user(t, "adm"), f.user(t, "dev")
		o, _ := f.orgs.Create(ctx, owner, "team")
		for _, u := range []*auth.User{adm, dev} {
			inv, err := f.orgs.Invite(ctx, o, owner, org.Owner, u.Username, "", org.Developer)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.orgs.RespondInvitation(ctx, u, inv.ID, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.orgs.SetRole(ctx, o, org.Owner, "adm", org.Admin); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			do   func() error
			want string
		}{
			{"admin cannot grant owner", func() error { return f.orgs.SetRole(ctx, o, org.Admin, "dev", org.Owner) }, fault.CodeForbidden},
			{"admin cannot demote the owner", func() error { return f.orgs.SetRole(ctx, o, org.Admin, "owner", org.Developer) }, fault.CodeForbidden},
			{"last owner cannot be demoted", func() error { return f.orgs.SetRole(ctx, o, org.Owner, "owner", org.Admin) }, fault.CodeConflict},
			{"last owner cannot leave", func() error { return f.orgs.RemoveMember(ctx, o, owner, org.Owner, "owner") }, fault.CodeConflict},
			{"developer cannot remove others", func() error { return f.orgs.RemoveMember(ctx, o, dev, org.Developer, "adm") }, fault.CodeForbidden},
			{"admin cannot remove an owner", func() error { return f.orgs.RemoveMember(ctx, o, adm, org.Admin, "owner") }, fault.CodeForbidden},
			{"unknown role", func() error { return f.orgs.SetRole(ctx, o, org.Owner, "dev", "god") }, fault.CodeValidation},
			{"not a member", func() error { return f.orgs.SetRole(ctx, o, org.Owner, "nobody", org.Admin) }, fault.CodeNotFound},
			{"admin sets developer to billing", func() error { return f.orgs.SetRole(ctx, o, org.Admin, "dev", org.Billing) }, ""},
			{"owner makes a second owner", func() error { return f.orgs.SetRole(ctx, o, org.Owner, "adm", org.Owner) }, ""},
			{"then the first owner may leave", func() error { return f.orgs.RemoveMember(ctx, o, owner, org.Owner, "owner") }, ""},
			{"a member leaves by themself", func() error { return f.orgs.RemoveMember(ctx, o, dev, org.Billing, "dev") }, ""},
		}
		for _, tt := range tests {
			if got := code(tt.do()); got != tt.want {
				t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
			}
		}
		ms, _ := f.orgs.Members(ctx, o.ID)
		if len(ms) != 1 || ms[0].Username != "adm" || ms[0].Role != org.Owner {
			t.Fatalf("members at the end: %+v", ms)
		}
	})
}

func TestInvitations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		owner, bob := f.user(t, "owner"), f.user(t, "bob")
		o, _ := f.orgs.Create(ctx, owner, "team")

		if _, err := f.orgs.Invite(ctx, o, owner, org.Admin, "bob", "", org.Owner); code(err) != fault.CodeForbidden {
			t.Fatalf("admin inviting an owner: %v", err)
		}
		if _, err := f.orgs.Invite(ctx, o, owner, org.Owner, "bob", "bob@example.com", org.Developer); code(err) != fault.CodeValidation {
			t.Fatalf("both username and email: %v", err)
		}
		if _, err := f.orgs.Invite(ctx, o, owner, org.Owner, "owner", "", org.Developer); code(err) != fault.CodeConflict {
			t.Fatalf("inviting a member: %v", err)
		}
		inv, err := f.orgs.Invite(ctx, o, owner, org.Owner, "bob", "", org.Reporter)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.orgs.Invite(ctx, o, owner, org.Owner, "bob", "", org.Reporter); code(err) != fault.CodeConflict {
			t.Fatalf("duplicate invitation: %v", err)
		}
		if len(f.mail.sent) != 1 || f.mail.sent[0].To != "bob@example.com" {
			t.Fatalf("invitation mail: %+v", f.mail.sent)
		}
		// Someone else cannot accept bob's invitation.
		if err := f.orgs.RespondInvitation(ctx, owner, inv.ID, true); code(err) != fault.CodeNotFound {
			t.Fatalf("foreign accept: %v", err)
		}
		mine, _ := f.orgs.MyInvitations(ctx, bob)
		if len(mine) != 1 || mine[0].Org != "team" || mine[0].InvitedBy != "owner" {
			t.Fatalf("bob's invitations: %+v", mine)
		}
		if err := f.orgs.RespondInvitation(ctx, bob, inv.ID, true); err != nil {
			t.Fatal(err)
		}
		if r, _ := f.orgs.RoleOf(ctx, o.ID, bob.ID); r != org.Reporter {
			t.Fatalf("bob's role %q", r)
		}
		// By email: nobody is matched by address (addresses are not verified); whoever has the
		// link from the email joins, once.
		if _, err := f.orgs.Invite(ctx, o, owner, org.Owner, "", "carol@example.com", org.Developer); err != nil {
			t.Fatal(err)
		}
		carol := f.user(t, "carol")
		if mine, _ = f.orgs.MyInvitations(ctx, carol); len(mine) != 0 {
			t.Fatalf("an email invitation matched an account by its address: %+v", mine)
		}
		link := f.mail.sent[len(f.mail.sent)-1]
		token := link.Body[strings.Index(link.Body, "token=")+len("token="):]
		token = strings.Fields(token)[0]
		if link.To != "carol@example.com" || token == "" {
			t.Fatalf("invitation mail %+v", link)
		}
		// The accept page names the team and the role before anyone accepts; nothing changes.
		if inv, err := f.orgs.InvitationByToken(ctx, token); err != nil || inv.Org != o.Name || inv.Role != org.Developer || inv.InvitedBy != owner.Username {
			t.Fatalf("preview %+v: %v", inv, err)
		}
		if _, err := f.orgs.InvitationByToken(ctx, "wrong"); code(err) != fault.CodeNotFound {
			t.Fatalf("preview of a wrong token: %v", err)
		}
		if err := f.orgs.AcceptInvitationToken(ctx, carol, "wrong"); code(err) != fault.CodeNotFound {
			t.Fatalf("wrong token: %v", err)
		}
		if err := f.orgs.AcceptInvitationToken(ctx, carol, token); err != nil {
			t.Fatal(err)
		}
		if r, _ := f.orgs.RoleOf(ctx, o.ID, carol.ID); r != org.Developer {
			t.Fatalf("carol's role %q", r)
		}
		if err := f.orgs.AcceptInvitationToken(ctx, bob, token); code(err) != fault.CodeNotFound {
			t.Fatalf("a used link accepted again: %v", err)
		}
		if _, err := f.orgs.InvitationByToken(ctx, token); code(err) != fault.CodeNotFound {
			t.Fatalf("preview of a used link: %v", err)
		}
		// Invitations expire.
		dan := f.user(t, "dan")
		inv, _ = f.orgs.Invite(ctx, o, owner, org.Owner, "dan", "", org.Developer)
		f.clock.Advance(org.InvitationTTL + time.Minute)
		if err := f.orgs.RespondInvitation(ctx, dan, inv.ID, true); code(err) != fault.CodeNotFound {
			t.Fatalf("expired invitation accepted: %v", err)
		}
	})
}

// Without a mail server (mail.Log), an invitation says it was not emailed and carries the link
// to hand over: the secret link of an email invitation (which then works), the invitations page
// for an account. With one, it says it was mailed and carries no link; the email says "14 days".
func TestInvitationLinkWithoutMail(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		owner := f.user(t, "olive")
		o, err := f.orgs.Create(ctx, owner, "lab")
		if err != nil {
			t.Fatal(err)
		}
		inv, err := f.orgs.Invite(ctx, o, owner, org.Owner, "", "erin@example.com", org.Developer)
		if err != nil || inv.Mailed == nil || !*inv.Mailed || inv.Link != "" {
			t.Fatalf("with mail: %+v %v", inv, err)
		}
		if body := f.mail.sent[len(f.mail.sent)-1].Body; !strings.Contains(body, "within 14 days") {
			t.Fatalf("the email's duration: %q", body)
		}
		quiet := org.NewService(db, f.users, f.clock, mail.Log{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, "https://nimbus.test",
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		inv, err = quiet.Invite(ctx, o, owner, org.Owner, "", "fay@example.com", org.Reporter)
		if err != nil || inv.Mailed == nil || *inv.Mailed || !strings.HasPrefix(inv.Link, "https://nimbus.test/invitations/accept?token=") {
			t.Fatalf("without mail: %+v %v", inv, err)
		}
		fay := f.user(t, "fay")
		if err := quiet.AcceptInvitationToken(ctx, fay, strings.TrimPrefix(inv.Link, "https://nimbus.test/invitations/accept?token=")); err != nil {
			t.Fatal(err)
		}
		if r, _ := f.orgs.RoleOf(ctx, o.ID, fay.ID); r != org.Reporter {
			t.Fatalf("fay's role %q", r)
		}
		f.user(t, "gil")
		inv, err = quiet.Invite(ctx, o, owner, org.Owner, "gil", "", org.Developer)
		if err != nil || *inv.Mailed || inv.Link != "https://nimbus.test/invitations" {
			t.Fatalf("an account's invitation without mail: %+v %v", inv, err)
		}
	})
}
