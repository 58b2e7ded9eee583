package spec

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// buttonsSample is build's test file (build/buttons_test.go) in other words: flow style, keys in
// another order, and entries for every branch.
const buttonsSample = `branch:
  - buttons:
      - name: Deploy
        event: web_trigger_deploy
        description: Deploy to ${TARGET}
        inputs:
          REGION: { name: Region, type: select, required: true, options: [ { name: Europe, value: eu }, { name: Asia, value: ap } ] }
          DRY_RUN: { type: switch, default: true }
          ZONES: { type: select, multiple: true, options: [a, b, c] }
        env: { TARGET: prod }
      - { name: Admins only, event: web_trigger_deploy, env: [ { name: A, value: "1" }, { name: B } ], permissions: { roles: [master], users: ada } }
    reg: "^main$"
  - { reg: "^release/", buttons: [ { name: Release, event: web_trigger_deploy } ] }
  - buttons:
      - name: Everywhere
        event: web_trigger
`

func TestParseButtons(t *testing.T) {
	file, err := ParseButtons([]byte(buttonsSample))
	if err != nil {
		t.Fatal(err)
	}
	names := func(bs []Button) (out []string) {
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	for branch, want := range map[string][]string{
		"main":      {"Deploy", "Admins only", "Everywhere"},
		"release/1": {"Release", "Everywhere"},
		"dev":       {"Everywhere"},
	} {
		if got := names(file.For(branch)); !slices.Equal(got, want) {
			t.Errorf("buttons of %s: %v, want %v", branch, got, want)
		}
	}
	bs := file.For("main")
	d := bs[0]
	if d.Event != "web_trigger_deploy" || d.Description != "Deploy to ${TARGET}" || d.Env["TARGET"] != "prod" || len(d.Inputs) != 3 ||
		d.Inputs[0].Key != "REGION" || d.Inputs[0].Type != "select" || !d.Inputs[0].Required || len(d.Inputs[0].Options) != 2 ||
		d.Inputs[0].Options[1] != (ButtonOption{Name: "Asia", Value: "ap"}) || d.Inputs[1].Default != "true" ||
		d.Inputs[2].Options[1] != (ButtonOption{Name: "b", Value: "b"}) || !d.Inputs[2].Multiple {
		t.Errorf("the Deploy button %+v", d)
	}
	a := bs[1]
	if a.Env["A"] != "1" || a.Env["B"] != "" || len(a.Env) != 2 || !slices.Equal(a.Roles, []string{"master"}) || !slices.Equal(a.Users, []string{"ada"}) {
		t.Errorf("the Admins button %+v", a)
	}
	for _, empty := range []string{"", "# nothing yet\n", "other: 1\n"} {
		if file, err := ParseButtons([]byte(empty)); err != nil || len(file.For("main")) != 0 {
			t.Errorf("%q: %v %v, want no buttons", empty, file, err)
		}
	}
}

// Every mistake names its line and column; YAML syntax errors too (they used to name none).
func TestParseButtonsErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"branch:\n  - buttons:\n      - name: x\n        event: push\n", `.cnb/web_trigger.yml:3:9: button "x": event must be web_trigger`},
		{"branch:\n  - reg: \"(\"\n", ".cnb/web_trigger.yml:2:10: reg:"},
		{"branch: [unclosed\n", ".cnb/web_trigger.yml:1:9: invalid YAML: '[' is never closed"},
		{"branch:\n  - buttons:\n      - name: x\n        event: web_trigger\n        inputs: { V: { type: slider } }\n", `.cnb/web_trigger.yml:5:22: button "x": input V: type must be one of`},
		{"- a\n", ".cnb/web_trigger.yml:1:1: the file is a mapping with the key branch"},
		{"branch: {}\n", ".cnb/web_trigger.yml:1:9: branch is a list"},
		{"branch: [x]\n", ".cnb/web_trigger.yml:1:10: each branch entry is a mapping"},
		{"branch:\n  - buttons: x\n", ".cnb/web_trigger.yml:2:14: buttons is a list"},
		{"branch:\n  - buttons: [x]\n", ".cnb/web_trigger.yml:2:15: a button is a mapping"},
		{"branch:\n  - buttons:\n      - event: web_trigger\n", ".cnb/web_trigger.yml:3:9: a button needs a name"},
		{"branch:\n  - buttons:\n      - {name: x, event: web_trigger, env: 1}\n", `.cnb/web_trigger.yml:3:44: button "x": env is a mapping or a list`},
		{"branch:\n  - buttons:\n      - {name: x, event: web_trigger, inputs: [a]}\n", `.cnb/web_trigger.yml:3:47: button "x": inputs is a mapping`},
		{"branch:\n  - buttons:\n      - {name: x, event: web_trigger, inputs: {CNB_X: {}}}\n", `.cnb/web_trigger.yml:3:48: button "x": "CNB_X" cannot be a variable name`},
	} {
		_, err := ParseButtons([]byte(c.file))
		var be *ButtonsError
		if !errors.As(err, &be) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want a ButtonsError starting %q", c.file, err, c.want)
		}
	}
}

// A press sets the fixed env and every input (its default when not given), and refuses what the
// inputs do not allow.
func TestPressEnv(t *testing.T) {
	file, err := ParseButtons([]byte(buttonsSample))
	if err != nil {
		t.Fatal(err)
	}
	deploy := file.For("main")[0]
	env, err := deploy.PressEnv(map[string]string{"REGION": "eu", "ZONES": "a;c"})
	if err != nil || len(env) != 4 || env["TARGET"] != "prod" || env["REGION"] != "eu" || env["DRY_RUN"] != "true" || env["ZONES"] != "a;c" {
		t.Fatalf("env %v %v", env, err)
	}
	for _, c := range []struct {
		inputs map[string]string
		want   string
	}{
		{map[string]string{}, "Region (REGION) is required"},
		{map[string]string{"REGION": "us"}, `Region (REGION): "us" is not one of its options`},
		{map[string]string{"REGION": "eu", "X": "1"}, `button "Deploy" has no input X`},
		{map[string]string{"REGION": "eu", "DRY_RUN": "maybe"}, "DRY_RUN is a switch: true or false"},
		{map[string]string{"REGION": "eu", "ZONES": "a;z"}, `ZONES: "z" is not one of its options`},
	} {
		if _, err := deploy.PressEnv(c.inputs); err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.inputs, err, c.want)
		}
	}
}

// Whatever the bytes, ParseButtons returns buttons that keep the file's rules, or an error that
// names the file and, when it names a place, a place inside the text.
func FuzzParseButtons(f *testing.F) {
	f.Add([]byte(buttonsSample))
	f.Add([]byte("branch:\n  - buttons:\n      - name: x\n        event: push\n"))
	f.Add([]byte("branch: [unclosed\n"))
	f.Add([]byte("branch:\n  - buttons:\n      - {name: x, event: web_trigger, inputs: {V: {type: radio, options: [{value: 1}], default: [1]}}}\n"))
	f.Add([]byte("branch:\n  - reg: \"(\"\n"))
	f.Add([]byte("\xef\xbb\xbfbranch:\r\n  - buttons: &a []\r\n  - buttons: *a\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseButtons(data)
		if err != nil {
			var be *ButtonsError
			if !errors.As(err, &be) || be.Pos.File != ButtonsFile || be.Msg == "" {
				t.Fatalf("error %v (%T) is no ButtonsError naming the file", err, err)
			}
			// YAML breaks lines at "\n", "\r\n" and a lone "\r".
			lines := strings.Count(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n") + strings.Count(string(data), "\r") - strings.Count(string(data), "\r\n") + 1
			if be.Pos.Line < 0 || be.Pos.Line > lines || be.Pos.Column < 0 {
				t.Fatalf("error at %s, outside a file of %d lines", be.Pos, lines)
			}
			return
		}
		for _, branch := range []string{"main", "release/1", ""} {
			for _, b := range file.For(branch) {
				if b.Name == "" || b.Event != "web_trigger" && !strings.HasPrefix(b.Event, "web_trigger_") || b.Inputs == nil || b.Env == nil {
					t.Fatalf("button %+v", b)
				}
				for _, in := range b.Inputs {
					if !slices.Contains(inputTypes, in.Type) || strings.HasPrefix(strings.ToUpper(in.Key), "CNB_") || in.Options == nil {
						t.Fatalf("button %q: input %+v", b.Name, in)
					}
				}
			}
		}
	})
}
