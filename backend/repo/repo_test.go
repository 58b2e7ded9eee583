package repo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/secrets"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

type fixture struct {
	users *auth.Service
	orgs  *org.Service
	repos *repo.Service
	clock *clock.Fake
	team  *org.Org
	other *org.Org
	by    map[string]*auth.User
}

func newFixture(t *testing.T, db *gorm.DB) *fixture {
	ctx := context.Background()
	w := testworld.New(t, db, testworld.Options{})
	f := &fixture{clock: w.Clock, users: w.Users, orgs: w.Orgs, repos: w.Repos, by: map[string]*auth.User{}}
	for _, n := range []string{"owner", "admin", "developer", "reporter", "billing", "outsider"} {
		u, err := f.users.Signup(ctx, n, n+"@example.com", "a long enough passphrase")
		if err != nil {
			t.Fatal(err)
		}
		f.by[n] = u
	}
	f.team, _ = f.orgs.Create(ctx, f.by["owner"], "team")
	f.other, _ = f.orgs.Create(ctx, f.by["outsider"], "other")
	for _, n := range []string{"admin", "developer", "reporter", "billing"} {
		inv, err := f.orgs.Invite(ctx, f.team, f.by["owner"], org.Owner, n, "", org.Role(n))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.orgs.RespondInvitation(ctx, f.by[n], inv.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func session(u *auth.User) *auth.Principal { return &auth.Principal{Kind: auth.KindSession, User: u} }

// status is the HTTP status api.Fail gives err: its fault's kind's (api.Status), 400 for a path the path
// rule refused, 500 for anything else.
func status(err error) int {
	var ae *fault.Error
	var pe *userpath.Error
	switch {
	case errors.As(err, &ae):
		return api.Status(ae.Kind)
	case errors.As(err, &pe):
		return 400
	}
	if err != nil {
		return 500
	}
	return 200
}

func TestResolveLevels(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		priv, err := f.repos.Create(ctx, f.team, "model", repo.Private, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.repos.Create(ctx, f.team, "open", repo.Public, "main", ""); err != nil {
			t.Fatal(err)
		}
		deploy, err := f.repos.CreateDeployToken(ctx, priv, f.by["owner"].ID, "inference", nil)
		if err != nil {
			t.Fatal(err)
		}
		deployP, err := f.repos.ResolveDeployToken(ctx, deploy.Token)
		if err != nil {
			t.Fatal(err)
		}
		readOnlyToken := &auth.Principal{Kind: auth.KindToken, User: f.by["developer"], Scopes: auth.Scopes{auth.ScopeRepoRead}}
		anon := &auth.Principal{Kind: auth.KindAnonymous}
		job := &auth.Principal{Kind: auth.KindJob, RepoID: priv.ID, Scopes: auth.Scopes{auth.ScopeRepoWrite}}
		// want: status for Read, Write, Admin on the private repo, then Read and Write on the public one.
		tests := []struct {
			name string
			p    *auth.Principal
			want [5]int
		}{
			{"owner", session(f.by["owner"]), [5]int{200, 200, 200, 200, 200}},
			{"admin", session(f.by["admin"]), [5]int{200, 200, 200, 200, 200}},
			{"developer", session(f.by["developer"]), [5]int{200, 200, 403, 200, 200}},
			{"reporter", session(f.by["reporter"]), [5]int{200, 403, 403, 200, 403}},
			{"billing", session(f.by["billing"]), [5]int{200, 403, 403, 200, 403}},
			{"outsider", session(f.by["outsider"]), [5]int{404, 404, 404, 200, 403}},
			{"anonymous", anon, [5]int{404, 404, 404, 200, 401}},
			{"token without repo:write", readOnlyToken, [5]int{200, 403, 403, 200, 403}},
			{"deploy token", deployP, [5]int{200, 403, 403, 200, 403}},
			{"job token of the repo", job, [5]int{200, 200, 403, 200, 403}},
		}
		for _, tt := range tests {
			var got [5]int
			for i, c := range []struct {
				name string
				lvl  repo.Level
			}{{"model", repo.Read}, {"model", repo.Write}, {"model", repo.Admin}, {"open", repo.Read}, {"open", repo.Write}} {
				_, err := f.repos.Resolve(ctx, tt.p, "TEAM", c.name, c.lvl)
				got[i] = status(err)
			}
			if got != tt.want {
				t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
			}
		}
		// A missing repo and another team's private repo look the same.
		_, e1 := f.repos.Resolve(ctx, session(f.by["outsider"]), "team", "model", repo.Read)
		_, e2 := f.repos.Resolve(ctx, session(f.by["outsider"]), "team", "nosuch", repo.Read)
		if status(e1) != 404 || status(e2) != 404 {
			t.Fatalf("%v / %v", e1, e2)
		}
	})
}

func TestSecretsAreSealedAndWriteOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		r, _ := f.repos.Create(ctx, f.team, "model", repo.Private, "", "")
		if err := f.repos.PutSecret(ctx, r, "HF_TOKEN", "hf_secret_value"); err != nil {
			t.Fatal(err)
		}
		if err := f.repos.PutSecret(ctx, r, "HF_TOKEN", "hf_rotated"); err != nil {
			t.Fatal(err)
		}
		var raw []repo.Secret
		db.Find(&raw)
		if len(raw) != 1 || bytes.Contains(raw[0].Sealed, []byte("hf_")) {
			t.Fatalf("stored secrets: %d, sealed %q", len(raw), raw[0].Sealed)
		}
		list, _ := f.repos.ListSecrets(ctx, r.ID)
		if len(list) != 1 || list[0].Name != "HF_TOKEN" {
			t.Fatalf("list %+v", list)
		}
		vals, err := f.repos.SecretValues(ctx, r.ID)
		if err != nil || vals["HF_TOKEN"] != "hf_rotated" {
			t.Fatalf("values %v %v", vals, err)
		}
		for name, value := range map[string]string{"1BAD": "x", "CNB_TOKEN": "x", "has-dash": "x", "OK": ""} {
			if err := f.repos.PutSecret(ctx, r, name, value); status(err) != 422 {
				t.Errorf("secret %q=%q: %v", name, value, err)
			}
		}
		if err := f.repos.DeleteSecret(ctx, r.ID, "NOPE"); status(err) != 404 {
			t.Fatalf("delete missing: %v", err)
		}
	})
}

func TestUpdateDeleteAndNames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		r, err := f.repos.Create(ctx, f.team, "model", repo.Private, "", "")
		if err != nil {
			t.Fatal(err)
		}
		head, _ := os.ReadFile(f.repos.Path(r) + "/HEAD")
		if string(head) != "ref: refs/heads/main\n" {
			t.Fatalf("HEAD %q", head)
		}
		for _, name := range []string{"../x", "a/b", "x.git", ".hidden", "", "a..b"} {
			if _, err := f.repos.Create(ctx, f.team, name, "", "", ""); status(err) != 422 {
				t.Errorf("name %q: %v", name, err)
			}
		}
		if _, err := f.repos.Create(ctx, f.team, "MODEL", "", "", ""); status(err) != 409 {
			t.Fatalf("duplicate name: %v", err)
		}
		if _, err := f.repos.Create(ctx, f.team, "x", "secret", "", ""); status(err) != 422 {
			t.Fatalf("bad visibility: %v", err)
		}
		name, branch, vis := "model2", "develop", repo.Public
		if err := f.repos.Update(ctx, r, repo.Patch{Name: &name, DefaultBranch: &branch, Visibility: &vis}); err != nil {
			t.Fatal(err)
		}
		head, _ = os.ReadFile(f.repos.Path(r) + "/HEAD")
		if r.Name != "model2" || r.Visibility != repo.Public || string(head) != "ref: refs/heads/develop\n" {
			t.Fatalf("after update %+v HEAD %q", r, head)
		}
		bad := "bad..branch"
		if err := f.repos.Update(ctx, r, repo.Patch{DefaultBranch: &bad, Name: &name}); status(err) != 422 {
			t.Fatalf("bad branch: %v", err)
		}
		if err := f.orgs.Delete(ctx, f.team); status(err) != 409 {
			t.Fatalf("deleting an org with repos: %v", err)
		}
		if err := f.repos.Delete(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(f.repos.Path(r)); !os.IsNotExist(err) {
			t.Fatalf("git dir survives: %v", err)
		}
		if err := f.orgs.Delete(ctx, f.team); err != nil {
			t.Fatalf("deleting the emptied org: %v", err)
		}
	})
}

func TestDeployTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		r, _ := f.repos.Create(ctx, f.team, "model", repo.Private, "", "")
		exp := f.clock.Now().Add(time.Hour)
		tok, err := f.repos.CreateDeployToken(ctx, r, f.by["owner"].ID, "prod", &exp)
		if err != nil {
			t.Fatal(err)
		}
		p, err := f.repos.ResolveDeployToken(ctx, tok.Token)
		if err != nil || p.Kind != auth.KindDeploy || p.RepoID != r.ID || p.Has(auth.ScopeRepoWrite) || !p.Has(auth.ScopeRegistryRead) {
			t.Fatalf("principal %+v %v", p, err)
		}
		list, _ := f.repos.ListDeployTokens(ctx, r.ID)
		if len(list) != 1 || list[0].Token != "" {
			t.Fatalf("list leaks the secret: %+v", list)
		}
		f.clock.Advance(2 * time.Hour)
		if _, err := f.repos.ResolveDeployToken(ctx, tok.Token); status(err) != 401 {
			t.Fatalf("expired deploy token: %v", err)
		}
		tok2, _ := f.repos.CreateDeployToken(ctx, r, f.by["owner"].ID, "prod2", nil)
		if err := f.repos.RevokeDeployToken(ctx, r.ID+1, tok2.ID); status(err) != 404 {
			t.Fatalf("revoke through another repo: %v", err)
		}
		f.repos.RevokeDeployToken(ctx, r.ID, tok2.ID)
		if _, err := f.repos.ResolveDeployToken(ctx, tok2.Token); status(err) != 401 {
			t.Fatalf("revoked deploy token: %v", err)
		}
	})
}

// A data directory out of step with the database (an older database backup restored beside a
// newer data directory) holds a repository where the next repo would go. Creating that repo
// answered a 500 (git: init …: mkdir …: file exists), and then removed the directory, another
// repository's history, as if it were its own leftover.
func TestCreateNeverTakesOverADirectory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		var logs bytes.Buffer
		box, _ := secrets.NewBox(bytes.Repeat([]byte{1}, 32))
		repos := repo.NewService(db, f.orgs, box, f.clock, t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil)))
		first, err := repos.Create(ctx, f.team, "first", repo.Private, "", "")
		if err != nil {
			t.Fatal(err)
		}
		orphan := repos.Path(&repo.Repo{ID: first.ID + 1})
		if err := git.InitBare(ctx, orphan, "main"); err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(orphan, "description")
		if err := os.WriteFile(marker, []byte("a repository the database lost"), 0o644); err != nil {
			t.Fatal(err)
		}

		_, err = repos.Create(ctx, f.team, "second", repo.Private, "", "")
		if b, err := os.ReadFile(marker); err != nil || string(b) != "a repository the database lost" {
			t.Errorf("the directory there was changed: %q %v", b, err)
		}
		if status(err) != 409 || !strings.Contains(err.Error(), "out of step with its database") {
			t.Fatalf("creating over a directory: %d %v, want a 409 that says what is wrong", status(err), err)
		}
		var n int64
		if err := db.Model(&repo.Repo{}).Where("name = ?", "second").Count(&n).Error; err != nil || n != 0 {
			t.Fatalf("a refused repo left %d rows (%v)", n, err)
		}
		if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), orphan) {
			t.Fatalf("the operator is not told which directory: %s", logs.String())
		}
	})
}

// Who sees a team (backend/org/README.md): its members always, anyone else only while it has a
// public repo; otherwise the answer is byte for byte that of a name no team has. The list of a
// team's repos answered non-members an empty list for a team without public repos, and a 404
// for a name nobody has: it told which teams exist.
func TestVisibleOrg(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		if _, err := f.repos.Create(ctx, f.team, "model", repo.Private, "", ""); err != nil {
			t.Fatal(err)
		}
		theirs, err := f.repos.Create(ctx, f.other, "theirs", repo.Private, "", "")
		if err != nil {
			t.Fatal(err)
		}
		// Callers who are no members of "team".
		others := map[string]*auth.Principal{
			"anonymous":                        {Kind: auth.KindAnonymous},
			"outsider":                         session(f.by["outsider"]),
			"job token of another team's repo": {Kind: auth.KindJob, User: f.by["outsider"], RepoID: theirs.ID},
		}
		_, _, ghost := f.repos.VisibleOrg(ctx, session(f.by["outsider"]), "nobody-has-this")
		for name, p := range others {
			_, _, err := f.repos.VisibleOrg(ctx, p, "team")
			if status(err) != 404 || strings.ReplaceAll(err.Error(), "team", "nobody-has-this") != ghost.Error() {
				t.Errorf("%s, a team without public repos: %v, want what a name nobody has gets (%v)", name, err, ghost)
			}
		}
		if o, role, err := f.repos.VisibleOrg(ctx, session(f.by["reporter"]), "TEAM"); err != nil || o.ID != f.team.ID || role != org.Reporter {
			t.Errorf("a member: %v %q %v", o, role, err)
		}

		if _, err := f.repos.Create(ctx, f.team, "open", repo.Public, "main", ""); err != nil {
			t.Fatal(err)
		}
		for name, p := range others {
			if o, role, err := f.repos.VisibleOrg(ctx, p, "team"); err != nil || o.ID != f.team.ID || role != "" {
				t.Errorf("%s, a team with a public repo: %v %q %v", name, o, role, err)
			}
		}
	})
}

// A fork copies the source's settings and refs, borrows its objects, chains at most
// MaxForkDepth deep, refuses a secret repository, and outlives its source.
func TestFork(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		src, err := f.repos.Create(ctx, f.team, "model", repo.Public, "dev", "a model")
		if err != nil {
			t.Fatal(err)
		}
		work := t.TempDir()
		gitCmd := func(dir string, args ...string) string { t.Helper(); return runGit(t, dir, args...) }
		gitCmd(work, "init", "-q", "-b", "dev")
		gitCmd(work, "commit", "-q", "--allow-empty", "-m", "one")
		gitCmd(work, "push", "-q", f.repos.Path(src), "dev", "dev:refs/heads/other")
		head := gitCmd(work, "rev-parse", "HEAD")

		fork, err := f.repos.Fork(ctx, src, f.other, "")
		if err != nil {
			t.Fatal(err)
		}
		if fork.Name != "model" || fork.Visibility != repo.Public || fork.DefaultBranch != "dev" || fork.Description != "a model" ||
			fork.ForkOf == nil || *fork.ForkOf != src.ID || fork.OrgID != f.other.ID {
			t.Errorf("fork %+v", fork)
		}
		for _, ref := range []string{"refs/heads/dev", "refs/heads/other"} {
			if got, err := git.ResolveRef(ctx, f.repos.Path(fork), ref); err != nil || got != head {
				t.Errorf("fork's %s = %q, %v", ref, got, err)
			}
		}
		if _, err := f.repos.Fork(ctx, src, f.other, ""); status(err) != 409 {
			t.Errorf("a second fork of the same name: %v", err)
		}
		// A chain of forks stops at MaxForkDepth.
		up := fork
		for i := 2; i <= repo.MaxForkDepth; i++ {
			if up, err = f.repos.Fork(ctx, up, f.other, fmt.Sprintf("model-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.repos.Fork(ctx, up, f.other, "too-deep"); status(err) != 422 {
			t.Errorf("a fork %d deep: %v", repo.MaxForkDepth+1, err)
		}
		sealed, err := f.repos.CreateSecretRepo(ctx, f.team, "keys", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.repos.Fork(ctx, sealed, f.other, ""); status(err) != 422 {
			t.Errorf("forking a secret repository: %v", err)
		}
		// The source goes; its fork keeps its history and no longer names it.
		if err := f.repos.Delete(ctx, src); err != nil {
			t.Fatal(err)
		}
		if _, err := git.TreeOf(ctx, f.repos.Path(fork), head); err != nil {
			t.Errorf("the fork lost its history with its source: %v", err)
		}
		again, _, err := f.repos.ByID(ctx, fork.ID)
		if err != nil || again.ForkOf != nil {
			t.Errorf("after the source's deletion: %+v, %v", again, err)
		}
	})
}

// A fork borrows its source's objects, so it must never show what its readers could not read
// in the source: a repository made private first splits off its public forks and those of
// other teams (they keep their history, but what is pushed to the source later is out of
// their reach), and a fork of a private repository cannot be made public.
func TestForksOfAPrivateSourceSeeNothingNew(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		src, err := f.repos.Create(ctx, f.team, "model", repo.Public, "main", "")
		if err != nil {
			t.Fatal(err)
		}
		work := t.TempDir()
		gitCmd := func(args ...string) string { t.Helper(); return runGit(t, work, args...) }
		gitCmd("init", "-q", "-b", "main")
		gitCmd("commit", "-q", "--allow-empty", "-m", "public")
		gitCmd("push", "-q", f.repos.Path(src), "main")
		old := gitCmd("rev-parse", "HEAD")

		theirs, err := f.repos.Fork(ctx, src, f.other, "")
		if err != nil {
			t.Fatal(err)
		}
		ownPublic, err := f.repos.Fork(ctx, src, f.team, "model-public")
		if err != nil {
			t.Fatal(err)
		}
		ownPrivate, err := f.repos.Fork(ctx, src, f.team, "model-private")
		if err != nil {
			t.Fatal(err)
		}
		private, public := repo.Private, repo.Public
		if err := f.repos.Update(ctx, ownPrivate, repo.Patch{Visibility: &private}); err != nil {
			t.Fatal(err)
		}
		if err := f.repos.Update(ctx, src, repo.Patch{Visibility: &private}); err != nil {
			t.Fatal(err)
		}
		gitCmd("commit", "-q", "--allow-empty", "-m", "secret")
		gitCmd("push", "-q", f.repos.Path(src), "main")
		secret := gitCmd("rev-parse", "HEAD")

		for _, c := range []struct {
			fork  *repo.Repo
			split bool
		}{{theirs, true}, {ownPublic, true}, {ownPrivate, false}} {
			again, _, err := f.repos.ByID(ctx, c.fork.ID)
			if err != nil {
				t.Fatal(err)
			}
			path := f.repos.Path(again)
			_, errOld := git.TreeOf(ctx, path, old)
			_, errNew := git.TreeOf(ctx, path, secret)
			if errOld != nil || (again.ForkOf == nil) != c.split || (errNew != nil) != c.split {
				t.Errorf("%s: fork_of %v, its history %v, the source's new commit %v (split off: %v)", again.Name, again.ForkOf, errOld, errNew, c.split)
			}
		}
		if err := f.repos.Update(ctx, ownPrivate, repo.Patch{Visibility: &public}); status(err) != 422 {
			t.Errorf("a fork of a private repository made public: %v", err)
		}
	})
}

// runGit runs git in dir as author and committer "a" and returns its trimmed output.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
