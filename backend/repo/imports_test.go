package repo_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

func TestParseFileRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want repo.FileRef
		ok   bool
	}{
		{"https://nimbus.example/team/keys/-/blob/main/env.yml", repo.FileRef{Org: "team", Repo: "keys", Ref: "main", Path: "env.yml"}, true},
		{"https://cnb.cool/team/keys/-/blob/v1/prod/env.json", repo.FileRef{Org: "team", Repo: "keys", Ref: "v1", Path: "prod/env.json"}, true},
		{"http://127.0.0.1:8080/team/keys/-/blob/main/a", repo.FileRef{Org: "team", Repo: "keys", Ref: "main", Path: "a"}, true},
		{"https://cnb.cool/group/sub/keys/-/blob/main/env.yml", repo.FileRef{}, false}, // nested groups have no repo here
		{"https://cnb.cool/team/keys/-/tree/main/env.yml", repo.FileRef{}, false},
		{"https://cnb.cool/team/keys/-/blob/main", repo.FileRef{}, false},
		{"./env.yml", repo.FileRef{}, false},
		{"ftp://x/team/keys/-/blob/main/a", repo.FileRef{}, false},
	} {
		got, err := repo.ParseFileRef(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseFileRef(%q) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	// The file's path follows the path rule as written. …/blob/main//etc/x.yml was read as
	// "/etc/x.yml" (a secret repository's lookup then dropped the "/"), a trailing "/" was
	// dropped, and "../x" reached git, whose refusal came back as a 500.
	for _, tc := range []struct{ in, reason string }{
		{"https://nimbus.example/team/keys/-/blob/main//etc/x.yml", `starts with "/"`},
		{"https://nimbus.example/team/keys/-/blob/main/a//b.yml", "empty segment"},
		{"https://nimbus.example/team/keys/-/blob/main/env.yml/", "empty segment"},
		{"https://nimbus.example/team/keys/-/blob/main/../x.yml", `".." segment`},
		{"https://nimbus.example/team/keys/-/blob/main/%2e%2e/x.yml", `".." segment`},
		{"https://nimbus.example/team/keys/-/blob/main/a%5Cb.yml", "backslash"},
		{"https://nimbus.example/team/keys/-/blob/main/a%0Ab.yml", "control character"},
	} {
		_, err := repo.ParseFileRef(tc.in)
		var pe *userpath.Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Reason, tc.reason) || status(err) != 400 {
			t.Errorf("ParseFileRef(%q) = %v, want a 400 saying the path %s", tc.in, err, tc.reason)
		}
	}
}

func TestSecretFilesAreSealedAndChecked(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		keys, err := f.repos.CreateSecretRepo(ctx, f.team, "keys", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.repos.PutSecretFile(ctx, keys, f.by["admin"].ID, "prod/env.yml", "TOKEN: s3cret-value\n"); err != nil {
			t.Fatal(err)
		}
		var raw []repo.SecretFile
		db.Find(&raw)
		if len(raw) != 1 || bytes.Contains(raw[0].Sealed, []byte("s3cret")) {
			t.Fatalf("stored files: %d, sealed %q", len(raw), raw[0].Sealed)
		}
		for _, tc := range []struct{ path, content string }{
			{"bad.yml", "a: [unclosed\n"}, {"bad.json", "{\"a\": }"}, {"env", "no equals sign\n"},
		} {
			if _, err := f.repos.PutSecretFile(ctx, keys, f.by["admin"].ID, tc.path, tc.content); status(err) != 422 {
				t.Errorf("file %q %q: %v, want 422", tc.path, tc.content, err)
			}
		}
		// Paths follow the path rule as written: "/etc/x.yml" was stored as "etc/x.yml" (and
		// through the API, …/secret-files//etc/x.yml as "/etc/x.yml"), while "a//b.yml" was
		// refused.
		for _, p := range []string{"/etc/x.yml", "//etc/x.yml", "../env.yml", "a//b.yml", "a/./b.yml", "", "a\\b.yml", "a\x00.yml"} {
			_, err := f.repos.PutSecretFile(ctx, keys, f.by["admin"].ID, p, "A: 1\n")
			var pe *userpath.Error
			if !errors.As(err, &pe) || pe.Path != p {
				t.Errorf("file %q: %v, want the path rule's refusal naming it", p, err)
			}
		}
		if _, err := f.repos.PutSecretFile(ctx, keys, 1, "big.env", strings.Repeat("A=1\n", repo.MaxSecretFileSize)); status(err) != 413 {
			t.Errorf("a file over the cap: %v, want 413", err)
		}
		got, err := f.repos.SecretFileContent(ctx, keys, "prod/env.yml")
		if err != nil || got.Content != "TOKEN: s3cret-value\n" {
			t.Fatalf("content %+v %v", got, err)
		}
		list, _ := f.repos.ListSecretFiles(ctx, keys)
		if len(list) != 1 || list[0].Path != "prod/env.yml" {
			t.Fatalf("list %+v", list)
		}
		plain, _ := f.repos.Create(ctx, f.team, "model", repo.Private, "", "")
		if _, err := f.repos.ListSecretFiles(ctx, plain); status(err) != 404 {
			t.Errorf("an ordinary repo's secret files: %v, want 404", err)
		}
		if err := f.repos.DeleteSecretFile(ctx, keys, "prod/env.yml"); err != nil {
			t.Fatal(err)
		}
		if err := f.repos.DeleteSecretFile(ctx, keys, "prod/env.yml"); status(err) != 404 {
			t.Errorf("delete twice: %v", err)
		}
	})
}

// commitFile commits one file to r's bare repository on its default branch.
func commitFile(t *testing.T, bare, name, content string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir, cmd.Env = dir, []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
	run("add", ".")
	run("commit", "-q", "-m", "env")
	run("push", "-q", bare, "main")
}

func TestReadImportRules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		keys, _ := f.repos.CreateSecretRepo(ctx, f.team, "keys", "")
		put := func(p, c string) {
			if _, err := f.repos.PutSecretFile(ctx, keys, 1, p, c); err != nil {
				t.Fatal(err)
			}
		}
		put("plain.yml", "K: v\n")
		put("slugs.yml", "allow_slugs: [team/app, team/ml-*]\nK: v\n")
		put("all.yml", "allow_slugs: team/**\nallow_events: [push, web_trigger_*]\nallow_branches: release/*\nallow_images: node:*\nK: v\n")
		put("env", "allow_events=tag_push\nK=v\n")
		model, _ := f.repos.Create(ctx, f.team, "model", repo.Private, "", "")
		commitFile(t, f.repos.Path(model), "env.yml", "MODEL: yes\n")
		theirs, _ := f.repos.Create(ctx, f.other, "private", repo.Private, "", "")
		commitFile(t, f.repos.Path(theirs), "env.yml", "THEIRS: yes\n")
		public, _ := f.repos.Create(ctx, f.other, "shared", repo.Public, "", "")
		commitFile(t, f.repos.Path(public), "env.yml", "SHARED: yes\n")
		// A file over the size limit was an internal error (a 500, logged at ERROR) for the job
		// importing it; it is the pipeline author's to fix, and the refusal says why.
		big, _ := f.repos.Create(ctx, f.team, "big", repo.Private, "", "")
		commitFile(t, f.repos.Path(big), "env.yml", "K: "+strings.Repeat("x", git.MaxFileSize)+"\n")

		reader := func(slug, event, branch, user string) repo.Reader {
			var uid int64
			if user != "" {
				uid = f.by[user].ID
			}
			return repo.Reader{OrgID: f.team.ID, Slug: slug, Event: event, Branch: branch, UserID: uid, PipelineID: 7, BuildNumber: 3}
		}
		untrusted := func(rd repo.Reader) repo.Reader { rd.Untrusted = true; return rd }
		const host = "https://cnb.cool/"
		for _, tc := range []struct {
			name  string
			rd    repo.Reader
			url   string
			image string
			want  int    // 200, or the refusal's status
			rule  string // in the refusal's message
		}{
			{"no rules: an admin's pipeline", reader("team/app", "push", "main", "admin"), host + "team/keys/-/blob/main/plain.yml", "", 200, ""},
			{"no rules: the owner's pipeline", reader("team/app", "push", "main", "owner"), host + "team/keys/-/blob/HEAD/plain.yml", "", 200, ""},
			{"no rules: a developer's pipeline", reader("team/app", "push", "main", "developer"), host + "team/keys/-/blob/main/plain.yml", "", 403, "no allow_* rule"},
			{"no rules: nobody's (a schedule)", reader("team/app", "crontab", "main", ""), host + "team/keys/-/blob/main/plain.yml", "", 403, "no allow_* rule"},
			{"allow_slugs: listed", reader("team/app", "push", "main", "developer"), host + "team/keys/-/blob/main/slugs.yml", "", 200, ""},
			{"allow_slugs: by glob", reader("team/ml-train", "push", "dev", ""), host + "team/keys/-/blob/main/slugs.yml", "", 200, ""},
			{"allow_slugs: not listed, even for the owner", reader("team/web", "push", "main", "owner"), host + "team/keys/-/blob/main/slugs.yml", "", 403, "allow_slugs"},
			{"all rules pass", reader("team/x", "web_trigger_deploy", "release/1.2", ""), host + "team/keys/-/blob/main/all.yml", "node:20", 200, ""},
			{"allow_events fails", reader("team/x", "pull_request", "release/1.2", ""), host + "team/keys/-/blob/main/all.yml", "node:20", 403, "allow_events"},
			{"allow_branches fails", reader("team/x", "push", "main", ""), host + "team/keys/-/blob/main/all.yml", "node:20", 403, "allow_branches"},
			{"allow_images fails", reader("team/x", "push", "release/1", ""), host + "team/keys/-/blob/main/all.yml", "busybox", 403, "allow_images"},
			{"KEY=VALUE rules", reader("team/x", "tag_push", "", ""), host + "team/keys/-/blob/main/env", "", 200, ""},
			{"another ref of a secret repo", reader("team/app", "push", "main", "admin"), host + "team/keys/-/blob/dev/plain.yml", "", 404, "one version"},
			{"a missing secret file", reader("team/app", "push", "main", "admin"), host + "team/keys/-/blob/main/nope.yml", "", 404, ""},
			{"a fork's code: no secret file, even one with no rule for the owner", untrusted(reader("team/app", "pull_request", "main", "owner")), host + "team/keys/-/blob/main/plain.yml", "", 403, "from a fork"},
			{"a fork's code: a plain file reads", untrusted(reader("team/app", "pull_request", "main", "")), host + "team/model/-/blob/main/env.yml", "", 200, ""},
			{"own team's repo", reader("team/app", "push", "main", ""), host + "team/model/-/blob/main/env.yml", "", 200, ""},
			{"own team's repo, unknown ref", reader("team/app", "push", "main", ""), host + "team/model/-/blob/nope/env.yml", "", 404, ""},
			{"another team's private repo", reader("team/app", "push", "main", "owner"), host + "other/private/-/blob/main/env.yml", "", 404, ""},
			{"another team's public repo", reader("team/app", "push", "main", ""), host + "other/shared/-/blob/main/env.yml", "", 200, ""},
			{"a file over the size limit", reader("team/app", "push", "main", ""), host + "team/big/-/blob/main/env.yml", "", 422, "the limit is 1048576"},
			{"not a file URL", reader("team/app", "push", "main", ""), "team/keys/env.yml", "", 400, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := f.repos.ReadImport(ctx, tc.rd, tc.url, protocol.ImportEnv, tc.image)
				if status(err) != tc.want {
					t.Fatalf("status %d (%v), want %d", status(err), err, tc.want)
				}
				var ae *fault.Error
				if tc.want == 403 && (!errors.As(err, &ae) || ae.Code != protocol.CodeImportRefused) {
					t.Errorf("a refusal with code %v, want %s", err, protocol.CodeImportRefused)
				}
				if err != nil && !strings.Contains(err.Error(), tc.rule) {
					t.Errorf("the error %q does not name %q", err, tc.rule)
				}
				if err == nil && (got.Content == "" || got.Secret != strings.Contains(tc.url, "/keys/")) {
					t.Errorf("file %+v", got)
				}
			})
		}
		// Every read of the secret repository that reached a file is audited, allowed or not.
		var reads []repo.SecretFileRead
		db.Where("repo_id = ?", keys.ID).Order("id").Find(&reads)
		if len(reads) != 13 {
			t.Fatalf("%d audited reads, want 13", len(reads))
		}
		if r := reads[2]; r.Allowed || r.Reader != "team/app" || r.PipelineID != 7 || r.BuildNumber != 3 || r.UserID != f.by["developer"].ID ||
			r.Path != "plain.yml" || r.Kind != protocol.ImportEnv || !strings.Contains(r.Reason, "no allow_* rule") {
			t.Errorf("audit row %+v", r)
		}
		page, err := f.repos.SecretFileReads(ctx, keys, api.Page{Limit: 5})
		if err != nil || len(page) != 6 || page[0].ID < page[1].ID {
			t.Errorf("audit page: %d rows, %v (want 5+1, newest first)", len(page), err)
		}
		if r := reads[12]; r.Allowed || r.Reader != "team/app" || !strings.Contains(r.Reason, "from a fork") {
			t.Errorf("the fork's refused read: %+v", r)
		}
	})
}
