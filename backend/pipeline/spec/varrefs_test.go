package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A repo secret referenced from env used to become empty: the planner took every name it did not
// know for missing and substituted "". Such a name may be a secret, which only the agent sees, so
// it stays a run-time reference at every level that substitutes it.
func TestUnknownNamesAreLeftToTheAgent(t *testing.T) {
	src := `main:
  push:
    - env:
        FROM_PIPELINE: ${MYSEC}
        LITERAL: \$5
      stages:
        - name: s
          env:
            FROM_STAGE: pre-${MYSEC}
          jobs:
            - name: j
              env:
                ALIAS: ${MYSEC}
                TOKEN: ${TOKEN}
              image:
                name: registry.example/app:1
                dockerUser: robot
                dockerPassword: ${REGISTRY_PASSWORD}
              script: echo "$ALIAS"
        - name: plugin
          image: plugins/notify
          settings:
            webhook: ${WEBHOOK_SECRET}
`
	p := onlyPipeline(t, mustPlan(t, src, pushMain, Options{}))
	if p.Env["FROM_PIPELINE"] != "${MYSEC}" || !slices.Equal(p.RuntimeVars, []string{"MYSEC"}) {
		t.Errorf("pipeline env %v runtime vars %v", p.Env, p.RuntimeVars)
	}
	j := p.Stages[0].Jobs[0]
	want := map[string]string{"FROM_PIPELINE": "${MYSEC}", "LITERAL": `\$5`, "FROM_STAGE": "pre-${MYSEC}",
		"ALIAS": "${MYSEC}", "TOKEN": "${TOKEN}"}
	for k, v := range want {
		if j.Env[k] != v {
			t.Errorf("job env %s = %q, want %q", k, j.Env[k], v)
		}
	}
	if !slices.Equal(j.RuntimeVars, []string{"MYSEC", "REGISTRY_PASSWORD", "TOKEN"}) || j.Image.Password != "${REGISTRY_PASSWORD}" {
		t.Errorf("job runtime vars %v image %+v", j.RuntimeVars, j.Image)
	}
	if j.Script != `echo "$ALIAS"` {
		t.Errorf("script %q", j.Script)
	}
	plugin := p.Stages[1].Jobs[0]
	if plugin.Settings["webhook"] != "${WEBHOOK_SECRET}" || !slices.Contains(plugin.RuntimeVars, "WEBHOOK_SECRET") {
		t.Errorf("plugin settings %v runtime vars %v", plugin.Settings, plugin.RuntimeVars)
	}
	// What the agent does with the lease's secrets; a name that is no secret reads as empty.
	secrets := map[string]string{"MYSEC": "s3cr3t"}
	if got := protocol.ExpandVars(j.Env["FROM_STAGE"], j.RuntimeVars, secrets); got != "pre-s3cr3t" {
		t.Errorf("expanded %q", got)
	}
	if got := protocol.ExpandVars(j.Env["TOKEN"], j.RuntimeVars, secrets); got != "" {
		t.Errorf("a name that is no secret expanded to %q", got)
	}
	// Names, which are final when the pipeline is planned, never carry a secret.
	named := onlyPipeline(t, mustPlan(t, "main:\n  push:\n    - name: build-${MYSEC}\n      stages: [make]\n", pushMain, Options{}))
	if named.Name != "build-" {
		t.Errorf("name %q", named.Name)
	}
}

// A reference that nothing but a repo secret can provide is a lint warning; names that a
// built-in, an enclosing env, an export, imports or the trigger provide are not.
func TestLintWarnsAboutReferencesOnlyASecretCanProvide(t *testing.T) {
	const unknown = "is not a built-in variable nor defined in env; it will be empty unless it is a repo secret or comes from imports"
	tests := []struct {
		name string
		src  string
		want []string // "line:col ${NAME}" for each warning, in order
	}{
		{name: "job env", want: []string{"7:13 ${MYSEC}"}, src: `main:
  push:
    - stages:
        - name: s
          script: echo "$ALIAS"
          env:
            ALIAS: ${MYSEC}
`},
		{name: "pipeline and stage env", want: []string{"4:9 ${A_SECRET}", "8:13 ${B_SECRET}"}, src: `main:
  push:
    - env:
        FIRST: ${A_SECRET}
      stages:
        - name: s
          env:
            SECOND: pre-$B_SECRET
          jobs: [make]
`},
		{name: "CNB built-ins", src: `main:
  push:
    - env:
        IMAGE: ${CNB_DOCKER_REGISTRY}/${CNB_REPO_SLUG_LOWERCASE}:${CNB_COMMIT_SHORT}
        TOKEN: $CNB_TOKEN
        WHO: ${CNB_BUILD_USER}-${CNB_BUILD_ID}-${CI}
      stages:
        - name: s
          env: {FROM_APPLY: $APPLY_TRIGGER_BUILD_ID}
          script: make
`},
		{name: "defined in env of an enclosing level", src: `main:
  push:
    - env: {REGISTRY: docker.example}
      docker:
        image: $REGISTRY/build:1
      stages:
        - name: s
          env: {TAG: 1.0}
          jobs:
            - name: j
              env: {IMAGE: "${REGISTRY}/app:${TAG}"}
              image: ${REGISTRY}/tools:${TAG}
              script: make
`},
		{name: "imports may provide it", src: `main:
  push:
    - imports: https://cnb.example/team/secrets/-/blob/main/env.yml
      env: {USER: "${DOCKER_USER}"}
      stages:
        - name: s
          settings: {password: "${DOCKER_PASSWORD}"}
          image: plugins/docker
`},
		{name: "job imports provide it to the job only", want: []string{"9:17 ${NPM_TOKEN}"}, src: `main:
  push:
    - stages:
        - name: with
          imports: ./secret.env
          env: {T: "${NPM_TOKEN}"}
          script: make
        - name: without
          env: {T: "${NPM_TOKEN}"}
          script: make
`},
		{name: "exports of a job", src: `main:
  push:
    - stages:
        - name: version
          script: echo 1.0
          exports: {stdout: VERSION}
        - name: release
          type: git:release
          options: {tag: "v${VERSION}"}
`},
		{name: "scripts, if and args are the shell's", src: `main:
  push:
    - stages:
        - name: s
          script: echo "$MYSEC ${OTHER}"
          if: test -n "$MYSEC"
        - name: p
          image: plugins/x
          args: [--token, $MYSEC]
`},
		{name: "a script shorthand's name is not checked", src: `main:
  push:
    - stages:
        - echo $HOME
`},
		{name: "escaped dollars", src: `main:
  push:
    - env: {PRICE: \$5, REF: "\\${NOT_A_VAR}"}
      stages: [make]
`},
		{name: "the trigger may pass variables", src: `main:
  web_trigger_deploy:
    - env: {TARGET: $DEPLOY_TARGET}
      stages: [make]
  api_trigger:
    - env: {TARGET: $DEPLOY_TARGET}
      stages: [make]
`},
		{name: "image credentials and settings", want: []string{"7:29 ${REG_PASS}", "9:23 ${HOOK}"}, src: `main:
  push:
    - stages:
        - name: p
          image:
            name: plugins/x
            dockerPassword: ${REG_PASS}
          settings:
            urls: [a, "${HOOK}"]
`},
		{name: "a name of the same env", want: []string{"5:9 ${HOST}"}, src: `main:
  push:
    - env:
        HOST: example.com
        URL: https://${HOST}/x
      stages: [make]
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := Lint([]byte(tt.src), Options{})
			if ds.HasErrors() {
				t.Fatalf("errors: %v", ds)
			}
			var got []string
			for _, d := range ds {
				for _, name := range strings.Fields(d.Message) {
					if strings.HasPrefix(name, "${") && (strings.Contains(d.Message, unknown) || strings.Contains(d.Message, "of the same env")) {
						got = append(got, fmt.Sprintf("%d:%d %s", d.Pos.Line, d.Pos.Column, name))
						break
					}
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings %q, want %q\nall diagnostics:\n%v", got, tt.want, ds)
			}
		})
	}
}

// The warning says what the reference is not and when it is empty; in a field fixed before the
// pipeline runs it says that secrets do not reach it.
func TestLintWarningText(t *testing.T) {
	ds := Lint([]byte("main:\n  push:\n    - env: {ALIAS: \"${MYSEC}\"}\n      stages:\n        - name: deploy ${ENV_NAME}\n          script: make\n"), Options{})
	if d, ok := findDiag(ds, SeverityWarning, "env ALIAS: ${MYSEC}"); !ok || d.Message !=
		"env ALIAS: ${MYSEC} is not a built-in variable nor defined in env; it will be empty unless it is a repo secret or comes from imports" {
		t.Errorf("env warning %+v in %v", d, ds)
	}
	if d, ok := findDiag(ds, SeverityWarning, "name: ${ENV_NAME}"); !ok || !strings.Contains(d.Message, "repo secrets and imports do not reach it") {
		t.Errorf("name warning %+v in %v", d, ds)
	}
}
