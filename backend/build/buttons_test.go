package build_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

const buttonsCI = `
$:
  web_trigger_deploy:
    - name: deploy-$REGION
      stages: [ { name: d, script: "echo $REGION $DRY_RUN $TARGET" } ]
`

const buttonsFile = `branch:
  - reg: "^main$"
    buttons:
      - name: Deploy
        description: Deploy to ${TARGET}
        event: web_trigger_deploy
        env: { TARGET: prod }
        inputs:
          REGION:
            name: Region
            type: select
            required: true
            options: [ { name: Europe, value: eu }, { name: Asia, value: ap } ]
          DRY_RUN: { type: switch, default: true }
          ZONES: { type: select, multiple: true, options: [a, b, c] }
      - name: Admins only
        event: web_trigger_deploy
        permissions: { roles: [master] }
  - reg: "^release/"
    buttons:
      - name: Release
        event: web_trigger_deploy
`

func errStatus(err error) int {
	var ae *fault.Error
	if errors.As(err, &ae) {
		return api.Status(ae.Kind)
	}
	return 0
}

func TestButtons(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.commit("ci", map[string]string{".cnb.yml": buttonsCI, ".cnb/web_trigger.yml": buttonsFile})
		f.push("refs/heads/main", git.ZeroSHA, "main")

		bs, err := f.builds.Buttons(ctx, f.access, f.user, "main")
		if err != nil || len(bs) != 2 {
			t.Fatalf("buttons of main: %+v %v", bs, err)
		}
		d := bs[0]
		if d.Name != "Deploy" || d.Event != "web_trigger_deploy" || !d.Allowed || len(d.Inputs) != 3 || d.Inputs[0].Key != "REGION" ||
			d.Inputs[0].Type != "select" || !d.Inputs[0].Required || len(d.Inputs[0].Options) != 2 || d.Inputs[1].Default != "true" ||
			d.Inputs[2].Options[1].Value != "b" || !d.Inputs[2].Multiple {
			t.Fatalf("the Deploy button %+v", d)
		}
		// Owner alice is no master (admin): the second button is not hers.
		dev := &repo.Access{Repo: f.access.Repo, Org: f.access.Org, Level: repo.Write, Role: org.Developer}
		if bs, _ := f.builds.Buttons(ctx, dev, f.user, "main"); bs[1].Allowed || !strings.Contains(bs[1].Why, "master") {
			t.Fatalf("a developer may press the admins' button: %+v", bs[1])
		}
		if bs, _ := f.builds.Buttons(ctx, f.access, f.user, "release/1"); len(bs) != 1 || bs[0].Name != "Release" {
			t.Fatalf("buttons of release/1: %+v", bs)
		}

		b, err := f.builds.Press(ctx, f.access, f.user, "main", "Deploy", map[string]string{"REGION": "eu", "ZONES": "a;c"})
		if err != nil {
			t.Fatal(err)
		}
		var p build.Pipeline
		db.Where("build_id = ?", b.ID).Take(&p)
		for _, want := range []string{`"REGION":"eu"`, `"DRY_RUN":"true"`, `"TARGET":"prod"`, `"ZONES":"a;c"`} {
			if !strings.Contains(p.Plan, want) {
				t.Errorf("the plan lacks %s: %s", want, p.Plan)
			}
		}
		if b.Event != "web_trigger_deploy" || p.Name != "deploy-eu" {
			t.Fatalf("build %+v pipeline %s", b, p.Name)
		}
		for _, c := range []struct {
			access *repo.Access
			button string
			inputs map[string]string
			want   int
		}{
			{f.access, "Deploy", map[string]string{}, 422},                         // REGION is required
			{f.access, "Deploy", map[string]string{"REGION": "us"}, 422},           // not an option
			{f.access, "Deploy", map[string]string{"REGION": "eu", "X": "1"}, 422}, // no such input
			{f.access, "Deploy", map[string]string{"REGION": "eu", "DRY_RUN": "maybe"}, 422},
			{f.access, "Deploy", map[string]string{"REGION": "eu", "ZONES": "a;z"}, 422},
			{f.access, "Nope", nil, 404},
			{dev, "Admins only", nil, 403},
			{&repo.Access{Repo: f.access.Repo, Org: f.access.Org, Level: repo.Read, Role: org.Reporter}, "Deploy", map[string]string{"REGION": "eu"}, 403},
		} {
			if _, err := f.builds.Press(ctx, c.access, f.user, "main", c.button, c.inputs); errStatus(err) != c.want {
				t.Errorf("press %s %v: %v, want %d", c.button, c.inputs, err, c.want)
			}
		}
	})
}

func TestButtonsFileErrorsNameTheLine(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		for i, c := range []struct{ file, want string }{
			{"branch:\n  - buttons:\n      - name: x\n        event: push\n", ":3:9: button \"x\": event must be web_trigger"},
			{"branch:\n  - reg: \"(\"\n", ":2:10: reg:"},
			{"branch: [unclosed\n", "invalid YAML"},
			{"branch:\n  - buttons:\n      - name: x\n        event: web_trigger\n        inputs: { V: { type: slider } }\n", ":5:22: button \"x\": input V: type must be one of"},
		} {
			f.commit("buttons", map[string]string{".cnb.yml": buttonsCI, ".cnb/web_trigger.yml": c.file})
			f.push("refs/heads/main", "", "main")
			_, err := f.builds.Buttons(ctx, f.access, f.user, "main")
			if errStatus(err) != 422 || !strings.Contains(err.Error(), c.want) {
				t.Errorf("file %d: %v, want a 422 with %q", i, err, c.want)
			}
		}
	})
}
