package envfile

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	big := strings.Repeat("x", maxValueLen)
	tests := []struct {
		name    string
		file    string
		content string
		want    map[string]string
	}{
		{
			name: "yaml nested", file: "env.yml",
			content: "a:\n  b:\n    c: 1\n  d: two\ntop: value\n",
			want:    map[string]string{"a_b_c": "1", "a_d": "two", "top": "value"},
		},
		{
			name: "yaml scalars keep their text", file: "env.yaml",
			content: "int: 1\nfloat: 1.5\ntrailing: 1.50\nexp: 1e3\nyes: true\nno: false\n" +
				"hex: 0x1F\nunderscore: 1_000\nhalf: .5\ninf: .inf\nquoted: \"007\"\ndate: 2001-12-14\n",
			want: map[string]string{
				"int": "1", "float": "1.5", "trailing": "1.50", "exp": "1e3", "yes": "true", "no": "false",
				"hex": "31", "underscore": "1000", "half": "0.5", "inf": "Infinity", "quoted": "007", "date": "2001-12-14",
			},
		},
		{
			name: "yaml null is empty", file: "env.yml",
			content: "a: null\nb: ~\nc:\nd: [1, null, 2]\n",
			want:    map[string]string{"a": "", "b": "", "c": "", "d": "1,,2", "d_0": "1", "d_1": "", "d_2": "2"},
		},
		{
			name: "json nested", file: "env.json",
			content: `{"a": {"b": {"c": 1}}, "s": "text", "f": 1.50, "big": 12345678901234567890, "t": true, "n": null}`,
			want: map[string]string{
				"a_b_c": "1", "s": "text", "f": "1.50", "big": "12345678901234567890", "t": "true", "n": "",
			},
		},
		{
			name: "array of scalars", file: "env.yml",
			content: "key: [x, y, z]\n",
			want:    map[string]string{"key": "x,y,z", "key_0": "x", "key_1": "y", "key_2": "z"},
		},
		{
			name: "array with an object element", file: "env.json",
			content: `{"key": ["x", {"a": 1, "b": {"c": 2}}]}`,
			want: map[string]string{
				"key": "x,[object Object]", "key_0": "x", "key_1": "[object Object]", "key_1_a": "1", "key_1_b_c": "2",
			},
		},
		{
			name: "nested and empty arrays", file: "env.yml",
			content: "m: [[1, 2], [3]]\ne: []\n",
			want: map[string]string{
				"m": "1,2,3", "m_0": "1,2", "m_0_0": "1", "m_0_1": "2", "m_1": "3", "m_1_0": "3", "e": "",
			},
		},
		{
			name: "yaml anchors and merge keys", file: "env.yml",
			content: "base: &base\n  host: h\n  port: 1\nprod:\n  <<: *base\n  port: 2\nsame: *base\n",
			want: map[string]string{
				"base_host": "h", "base_port": "1", "prod_host": "h", "prod_port": "2", "same_host": "h", "same_port": "1",
			},
		},
		{
			name: "extension is case-insensitive", file: "ENV.YML",
			content: "a: 1\n",
			want:    map[string]string{"a": "1"},
		},
		{
			name: "empty yaml", file: "env.yml",
			content: "# nothing yet\n",
			want:    map[string]string{},
		},
		{
			name: "certificate", file: "certs/server.crt",
			content: "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n",
			want:    map[string]string{"server_crt": "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"},
		},
		{
			name: "certificate with several dots and an upper-case extension", file: "id.rsa.PEM",
			content: "k",
			want:    map[string]string{"id_rsa_PEM": "k"},
		},
		{
			name: "every certificate extension", file: "a.cer",
			content: "1",
			want:    map[string]string{"a_cer": "1"},
		},
		{
			name: "certificate with an invalid name is dropped", file: "my-server.key",
			content: "secret",
			want:    map[string]string{},
		},
		{
			name: "key value", file: ".env",
			content: "# comment\n\n  # indented comment\nA=1\nexport B=two\nexport\tTAB=t\n" +
				"C = spaced \nD=\"double \\\"q\\\" \\\\ \\n\\t\\x\"\nE='single \\n'\nF=\nG=a=b\nH=\"unbalanced\nexportX=1\n",
			want: map[string]string{
				"A": "1", "B": "two", "TAB": "t", "C": "spaced", "D": "double \"q\" \\ \n\t\\x", "E": "single \\n",
				"F": "", "G": "a=b", "H": "\"unbalanced", "exportX": "1",
			},
		},
		{
			name: "key value with CRLF and a byte order mark", file: "vars.txt",
			content: "\ufeffA=1\r\nB=\"2\"\r\n",
			want:    map[string]string{"A": "1", "B": "2"},
		},
		{
			name: "invalid names are dropped", file: "env.yml",
			content: "ok_1: a\n1abc: b\na-b: c\nnested:\n  bad-key: d\n  good: e\nlist-x: [1]\n",
			want:    map[string]string{"ok_1": "a", "nested_good": "e"},
		},
		{
			name: "invalid key value names are dropped", file: "env",
			content: "my-var=1\n=2\n_ok=3\n",
			want:    map[string]string{"_ok": "3"},
		},
		{
			name: "value over 100 KiB is dropped", file: "env",
			content: "KEEP=" + big + "\nDROP=" + big + "y\n",
			want:    map[string]string{"KEEP": big},
		},
		{
			name: "joined array over 100 KiB is dropped but its elements stay", file: "env.json",
			content: `{"l": ["` + big[:maxValueLen/2] + `", "` + big[:maxValueLen/2] + `"]}`,
			want:    map[string]string{"l_0": big[:maxValueLen/2], "l_1": big[:maxValueLen/2]},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.file, []byte(tt.content))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse =\n%v\nwant\n%v", short(got), short(tt.want))
			}
		})
	}
}

// short abbreviates long values so that a failure stays readable.
func short(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if len(v) > 40 {
			v = v[:20] + "..." + v[len(v)-20:]
		}
		out[k] = v
	}
	return out
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		content string
		want    []string // substrings of the error
	}{
		{
			name: "bad yaml", file: "env.yml",
			content: "a: 1\nb: c: d\n",
			want:    []string{"env.yml: line 2: invalid YAML: mapping values are not allowed"},
		},
		{
			name: "bad yaml on the first line", file: "env.yml",
			content: "@a: 1\nb: 2\n",
			want:    []string{"env.yml: line 1: invalid YAML"},
		},
		{
			name: "bad yaml reported where the block went wrong", file: "env.yml",
			content: "a: 1\nb:\n  - 1\n  c: 2\n",
			want:    []string{"env.yml: line 4: invalid YAML: did not find expected '-' indicator"},
		},
		{
			name: "unclosed yaml flow sequence", file: "env.yml",
			content: "a: 1\nb: [1, 2\nc: 3\n",
			want:    []string{"env.yml: line 2: invalid YAML"},
		},
		{
			name: "unclosed yaml quote reported where it opens", file: "env.yml",
			content: "a: \"x\ny\nz\n",
			want:    []string{"env.yml: line 1: invalid YAML: found unexpected end of stream"},
		},
		{
			name: "unknown yaml anchor", file: "env.yml",
			content: "a: 1\nb: *missing\n",
			want:    []string{"env.yml: line 2: invalid YAML: unknown anchor 'missing' referenced"},
		},
		{
			name: "yaml anchor inside itself", file: "env.yml",
			content: "a: &x [1, *x]\n",
			want:    []string{"env.yml: line 1, column 11: alias *x is inside its own anchor"},
		},
		{
			name: "duplicate yaml key", file: "env.yml",
			content: "a: 1\nb: 2\na: 3\n",
			want:    []string{"env.yml: line 3, column 1: mapping key \"a\" already defined at line 1"},
		},
		{
			name: "several yaml documents", file: "env.yml",
			content: "a: 1\n---\nb: 2\n",
			want:    []string{"env.yml: line 2", "more than one document"},
		},
		{
			name: "top-level yaml list", file: "env.yaml",
			content: "- a\n- b\n",
			want:    []string{"env.yaml: line 1, column 1: the top level must be a mapping, not a sequence"},
		},
		{
			name: "top-level yaml scalar", file: "env.yml",
			content: "just text\n",
			want:    []string{"the top level must be a mapping, not a scalar"},
		},
		{
			name: "bad json", file: "env.json",
			content: "{\n  \"a\": 1,\n  \"b\": 2,\n}\n",
			want:    []string{"env.json: line 4, column 1: invalid JSON: invalid character '}'"},
		},
		{
			name: "truncated json", file: "env.json",
			content: "{\n  \"a\": 1,\n  \"b\": 2\n",
			want:    []string{"env.json: line 3", "invalid JSON: unexpected end of JSON input"},
		},
		{
			name: "json with trailing data", file: "env.json",
			content: "{\"a\": 1}\n{\"b\": 2}\n",
			want:    []string{"env.json: line 2, column 1: invalid JSON"},
		},
		{
			name: "top-level json array", file: "env.json",
			content: "\n  [1, 2]\n",
			want:    []string{"env.json: line 2, column 3: the top level must be an object, not an array"},
		},
		{
			name: "key value line without =", file: ".env",
			content: "A=1\n# comment\nTOPSECRET\n",
			want:    []string{".env: line 3: expected KEY=VALUE"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.file, []byte(tt.content))
			if err == nil {
				t.Fatal("Parse: no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "TOPSECRET") {
				t.Errorf("error %q quotes the file's content", err)
			}
		})
	}
}

func TestYAMLAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 8; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	_, err := Parse("bomb.yml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "aliases expand to more than") {
		t.Fatalf("Parse = %v, want the alias limit", err)
	}
}

func TestObject(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		content string
		want    map[string]any
	}{
		{
			name: "yaml", file: "settings.yml",
			content: "s: text\nn: 1.50\nb: true\nz: null\nl: [1, {k: v}]\nm: {x: y}\n1: numeric key\n",
			want: map[string]any{
				"s": "text", "n": json.Number("1.50"), "b": true, "z": nil,
				"l": []any{json.Number("1"), map[string]any{"k": "v"}}, "m": map[string]any{"x": "y"},
				"1": "numeric key",
			},
		},
		{
			name: "yaml non-scalar key", file: "settings.yml",
			content: "? [a, b]\n: v\n",
			want:    map[string]any{"[a b]": "v"},
		},
		{
			name: "json", file: "settings.json",
			content: `{"s": "text", "n": 2, "l": [true, null], "m": {"x": 1}}`,
			want: map[string]any{
				"s": "text", "n": json.Number("2"), "l": []any{true, nil}, "m": map[string]any{"x": json.Number("1")},
			},
		},
		{
			name: "key value keeps invalid names", file: "vars.env",
			content: "A=1\nmy-var=x\n",
			want:    map[string]any{"A": "1", "my-var": "x"},
		},
		{
			name: "certificate", file: "deploy.pub",
			content: "ssh-ed25519 AAAA",
			want:    map[string]any{"deploy_pub": "ssh-ed25519 AAAA"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Object(tt.file, []byte(tt.content))
			if err != nil {
				t.Fatalf("Object: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Object =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

func TestFlatten(t *testing.T) {
	tests := []struct {
		name string
		obj  map[string]any
		want map[string]string
	}{
		{
			name: "go values",
			obj: map[string]any{
				"i": 3, "f": 2.5, "million": 1e6, "tiny": 1e-7, "nan": math.NaN(), "neg": math.Inf(-1),
				"f32": float32(1.1), "b": false, "n": nil,
			},
			want: map[string]string{
				"i": "3", "f": "2.5", "million": "1000000", "tiny": "1e-07", "nan": "NaN", "neg": "-Infinity",
				"f32": "1.1", "b": "false", "n": "",
			},
		},
		{
			name: "colliding paths resolve the same way every time",
			obj:  map[string]any{"a_b": "flat", "a": map[string]any{"b": "nested"}},
			want: map[string]string{"a_b": "flat"},
		},
		{
			name: "empty",
			obj:  map[string]any{},
			want: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := 0; i < 5; i++ { // map order changes between runs
				if got := Flatten(tt.obj); !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("Flatten = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"A", true},
		{"_", true},
		{"a_b_0", true},
		{"_9", true},
		{"", false},
		{"9a", false},
		{"a-b", false},
		{"a.b", false},
		{"a b", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := ValidName(tt.name); got != tt.want {
			t.Errorf("ValidName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
