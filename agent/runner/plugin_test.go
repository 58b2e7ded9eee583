package runner

import (
	"encoding/json"
	"testing"
)

// TestPluginValueShapes: each shape a plugin's settings can have, written as Drone's runners
// write it (the plan reaches the agent as JSON, so numbers arrive as float64).
func TestPluginValueShapes(t *testing.T) {
	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name, in, want string
	}{
		{"string", `"hello world"`, "hello world"},
		{"empty string", `""`, ""},
		{"integer", `3`, "3"},
		{"negative float", `-1.25`, "-1.25"},
		{"large integer", `1700000000`, "1700000000"},
		{"true", `true`, "true"},
		{"false", `false`, "false"},
		{"null", `null`, ""},
		{"list of strings", `["latest","1.0"]`, "latest,1.0"},
		{"list of mixed scalars", `[1,"two",true]`, "1,two,true"},
		{"empty list", `[]`, ""},
		{"list holding a map", `[{"a":1},"b"]`, `[{"a":1},"b"]`},
		{"list holding a list", `[["a"],"b"]`, `[["a"],"b"]`},
		{"map", `{"host":"h","port":22}`, `{"host":"h","port":22}`},
		{"nested map", `{"a":{"b":[1,2]}}`, `{"a":{"b":[1,2]}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := pluginValue(decode(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("pluginValue(%s) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// An await's data becomes results by dotted path, so exports can name deep keys.
func TestFlattenData(t *testing.T) {
	var data map[string]any
	json.Unmarshal([]byte(`{"path":"/d","n":3,"ok":true,"none":null,"b":{"c":2,"d":{"e":"x"}},"l":[1,2]}`), &data)
	got := flattenData("", data, map[string]string{})
	want := map[string]string{"path": "/d", "n": "3", "ok": "true", "none": "", "b": `{"c":2,"d":{"e":"x"}}`, "b.c": "2",
		"b.d": `{"e":"x"}`, "b.d.e": "x", "l": "[1,2]"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
