package runner

import (
	"reflect"
	"strings"
	"testing"
)

func TestResults(t *testing.T) {
	big := strings.Repeat("x", maxValue)
	tests := []struct {
		name    string
		exports map[string]string
		stdout  []string // writes, in order
		stderr  string
		want    map[string]string
	}{
		{"set-output split across writes", nil,
			[]string{"##[set-out", "put ver=1.0]\r\n##[set-output a=b=c]\n"}, "",
			map[string]string{"ver": "1.0", "a": "b=c", "code": "0"}},
		{"base64 and escapes", nil,
			[]string{"##[set-output x=base64,bGluZTEKbGluZTI=]\n##[set-output y=50%25%0Adone]\n"}, "",
			map[string]string{"x": "line1\nline2", "y": "50%\ndone", "code": "0"}},
		{"bad base64, no key, not at the end of a line are ignored", nil,
			[]string{"##[set-output x=base64,@@@]\n##[set-output =v]\necho ##[set-output z=1] later\n"}, "",
			map[string]string{"code": "0"}},
		{"a last line without newline counts", nil, []string{"##[set-output last=yes]"}, "",
			map[string]string{"last": "yes", "code": "0"}},
		{"values of 100 KiB or more are ignored", nil, []string{"##[set-output big=" + big + "]\n"}, "",
			map[string]string{"code": "0"}},
		{"streams when asked for", map[string]string{"stdout": "O", "stderr": "E", "info": "I"},
			[]string{"one\n", "two\n\n"}, "err\n",
			map[string]string{"stdout": "one\ntwo", "stderr": "err", "info": "one\ntwo\n\nerr", "code": "0"}},
		{"too big a stream is not a value", map[string]string{"stdout": "O"}, []string{big, "y"}, "",
			map[string]string{"code": "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResults(tt.exports)
			out, errw := r.writer(false), r.writer(true)
			for _, w := range tt.stdout {
				out.Write([]byte(w))
			}
			errw.Write([]byte(tt.stderr))
			code := 0
			if got := r.finish(&code); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestEnvKey(t *testing.T) {
	for in, want := range map[string]string{"message": "MESSAGE", "list-items": "LIST_ITEMS", "a.b": "A_B", "camelCase": "CAMELCASE", "x_1": "X_1"} {
		if got := envKey(in); got != want {
			t.Errorf("envKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidLeaseID(t *testing.T) {
	for id, ok := range map[string]bool{"l-1": true, "01HZX.abc_D": true, "": false, ".": false, "..": false,
		"a/b": false, "../x": false, "a b": false, strings.Repeat("a", 201): false} {
		if validLeaseID(id) != ok {
			t.Errorf("validLeaseID(%q) = %v", id, !ok)
		}
	}
}
