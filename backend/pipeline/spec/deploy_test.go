package spec

import (
	"strings"
	"testing"
)

func TestParseDeploy(t *testing.T) {
	d, err := ParseDeploy([]byte(`environments:
  - name: staging
    description: Staging
    env: [ { name: CLUSTER, value: stg } ]
  - name: production
    permissions: { roles: [master], users: [ada] }
    require:
      - environmentName: staging
        after: 60
      - annotation: { key: ok, eq: "yes" }
`))
	if err != nil {
		t.Fatal(err)
	}
	prod, ok := d.Get("production")
	if !ok || len(d.Environments) != 2 || d.Environments[0].Env["CLUSTER"] != "stg" || prod.Event() != "tag_deploy.production" ||
		len(prod.Require) != 2 || prod.Require[0] != (Requirement{Kind: RequireEnvironment, Environment: "staging", After: 60}) ||
		prod.Require[1].Kind != RequireAnnotation || prod.Roles[0] != "master" || prod.Users[0] != "ada" {
		t.Fatalf("parsed %+v", d)
	}
	if d, err := ParseDeploy(nil); err != nil || len(d.Environments) != 0 {
		t.Fatalf("an empty file: %+v %v", d, err)
	}
	for _, c := range []struct{ src, at, msg string }{
		{"environments: x\n", "1:15", "environments is a list"},
		{"environments:\n  - name: 'a b'\n", "2:5", "environment name"},
		{"environments:\n  - name: a\n  - name: a\n", "3:5", "declared twice"},
		{"environments:\n  - name: a\n    require: [ { environment: b } ]\n", "2:5", `requires "b"`},
		{"environments:\n  - name: a\n    require: [ { environment: a } ]\n", "2:5", `requires "a"`},
		{"environments:\n  - name: a\n  - name: b\n    require: [ { environment: a, after: soon } ]\n", "4:41", "after is a number"},
		{"environments:\n  - name: a\n    require: [ { after: 3 } ]\n", "3:16", "names an environment"},
		{"environments:\n  - name: a\n    env: x\n", "3:10", "env is a mapping"},
		{"environments:\n  - name: [\n", "2:11", "invalid YAML"},
	} {
		_, err := ParseDeploy([]byte(c.src))
		if err == nil || !strings.Contains(err.Error(), DeployFile+":"+c.at+": ") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v, want %s at %s", c.src, err, c.msg, c.at)
		}
	}
}
