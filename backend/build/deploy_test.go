package build_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

const deployCI = `
v*:
  tag_push:
    - stages: [ { name: t, script: echo tagged } ]
  tag_deploy.staging:
    - name: to-staging
      stages: [ { name: d, script: "echo $CLUSTER $CNB_BRANCH" } ]
  tag_deploy.production:
    - name: to-production
      stages: [ { name: d, script: echo prod } ]
`

const deployFile = `environments:
  - name: staging
    description: The staging cluster
    env: { CLUSTER: stg }
  - name: production
    permissions: { roles: [master, owner] }
    require:
      - environment: staging
        after: 600
  - name: audited
    require:
      - approver: { users: [ada] }
`

// Deploy environments of a tag: read from the default branch, each deploy a tag_deploy.<name>
// build of the tag with the environment's env; production waits for staging to have succeeded
// ten minutes ago, is for owners and admins, and an approval step is refused as unchecked here.
func TestDeployEnvironments(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.commit("ci", map[string]string{".cnb.yml": deployCI, ".cnb/tag_deploy.yml": deployFile})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		f.git("tag", "v1.0")
		f.push("refs/tags/v1.0", git.ZeroSHA, "v1.0")
		f.access.Role = org.Owner

		why := func(name string) string {
			t.Helper()
			es, err := f.builds.Environments(ctx, f.access, f.user, "v1.0")
			if err != nil || len(es) != 3 {
				t.Fatalf("environments: %+v %v", es, err)
			}
			for _, e := range es {
				if e.Name == name {
					return e.Why
				}
			}
			t.Fatalf("no environment %s", name)
			return ""
		}
		if w := why("production"); !strings.Contains(w, "requires staging deployed successfully for v1.0 first") {
			t.Fatalf("production before staging: %q", w)
		}
		if _, err := f.builds.Deploy(ctx, f.access, f.user, "v1.0", "production"); errStatus(err) != 409 {
			t.Fatalf("deploying production before staging: %v", err)
		}
		b, err := f.builds.Deploy(ctx, f.access, f.user, "v1.0", "staging")
		if err != nil {
			t.Fatal(err)
		}
		var p build.Pipeline
		db.Where("build_id = ?", b.ID).Take(&p)
		if b.Event != "tag_deploy.staging" || b.Tag != "v1.0" || p.Name != "to-staging" || !strings.Contains(p.Plan, `"CLUSTER":"stg"`) {
			t.Fatalf("the staging deploy: %+v %s %s", b, p.Name, p.Plan)
		}
		// It succeeds now; production is ready ten minutes after.
		done := f.clock.Now().UTC()
		if err := db.Model(&build.Build{}).Where("id = ?", b.ID).Updates(map[string]any{"status": build.StatusSuccess, "finished_at": done}).Error; err != nil {
			t.Fatal(err)
		}
		if w := why("production"); !strings.Contains(w, "deployed 600s before") {
			t.Fatalf("production right after staging: %q", w)
		}
		f.clock.Advance(10 * time.Minute)
		if w := why("production"); w != "" {
			t.Fatalf("production ten minutes after staging: %q", w)
		}
		dev := &repo.Access{Repo: f.access.Repo, Org: f.access.Org, Level: repo.Write, Role: org.Developer}
		if _, err := f.builds.Deploy(ctx, dev, f.user, "v1.0", "production"); errStatus(err) != 403 {
			t.Fatalf("a developer deploying production: %v", err)
		}
		if prod, err := f.builds.Deploy(ctx, f.access, f.user, "v1.0", "production"); err != nil || prod.Event != "tag_deploy.production" {
			t.Fatalf("deploying production: %+v %v", prod, err)
		}
		if w := why("audited"); !strings.Contains(w, "approver step, which this installation does not check") {
			t.Fatalf("an approval step: %q", w)
		}
		for _, c := range []struct {
			name, tag, env string
			want           int
		}{
			{"an approval step", "v1.0", "audited", 409},
			{"no such environment", "v1.0", "qa", 404},
			{"no such tag", "v9", "staging", 404},
			{"a reader", "v1.0", "staging", 403},
		} {
			a := f.access
			if c.name == "a reader" {
				a = &repo.Access{Repo: f.access.Repo, Org: f.access.Org, Level: repo.Read, Role: org.Reporter}
			}
			if _, err := f.builds.Deploy(ctx, a, f.user, c.tag, c.env); errStatus(err) != c.want {
				t.Errorf("%s: %v, want %d", c.name, err, c.want)
			}
		}
		// A broken file is a 422 naming its line.
		f.commit("broken", map[string]string{".cnb/tag_deploy.yml": "environments:\n  - name: a\n  - name: a\n"})
		f.push("refs/heads/main", "", "main")
		if _, err := f.builds.Environments(ctx, f.access, f.user, "v1.0"); errStatus(err) != 422 || !strings.Contains(err.Error(), ".cnb/tag_deploy.yml:3:5") {
			t.Fatalf("a broken file: %v", err)
		}
	})
}
