package spec

import (
	"strings"
	"testing"
)

func TestSeparateWorkspacesAdvice(t *testing.T) {
	const (
		a        = "    - name: a\n      stages:\n        - name: x\n          script: make\n"
		b        = "    - name: b\n      stages:\n        - name: y\n          script: make\n"
		c        = "    - name: c\n      stages:\n        - name: z\n          script: make\n"
		resolveK = "    - name: a\n      stages:\n        - name: r\n          type: cnb:resolve\n          options: {key: k}\n"
		awaitK   = "    - name: b\n      stages:\n        - name: w\n          type: cnb:await\n          options: {key: k}\n"
	)
	tests := []struct {
		name, src string
		want      string // "" = no advice
	}{
		{"two apart", "main:\n  push:\n" + a + b, "the pipelines a and b of push run in parallel"},
		{"tied by a key", "main:\n  push:\n" + resolveK + awaitK, ""},
		{"two tied, one apart", "main:\n  push:\n" + resolveK + awaitK + c, "the pipelines a + b and c of push"},
		{"one pipeline", "main:\n  push:\n" + a, ""},
		{"no stages", "main:\n  vscode:\n    - services: [vscode]\n    - services: [vscode]\n", ""},
		{"schedule entries have their own times", "main:\n  schedule:\n    - cron: \"0 1 * * *\"\n      stages: [make]\n    - cron: \"0 2 * * *\"\n      stages: [make]\n", ""},
		{"events apart", "main:\n  push:\n" + a + "  tag_push:\n" + b, ""},
		// The advice on a file of 256 pipelines named all 256 of them.
		{"many apart: ten named", genPipelines("main", "push", 256, 1, 1), "the pipelines p0, p1, p2, p3, p4, p5, p6, p7, p8, p9 and 246 more of push run in parallel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := Lint([]byte(tt.src), Options{})
			if len(ds.Problems()) != 0 {
				t.Fatalf("problems: %v", ds)
			}
			info := ds.Filter(SeverityInfo)
			if tt.want == "" {
				if len(info) != 0 {
					t.Fatalf("advice on a file that needs none: %v", info)
				}
				return
			}
			if len(info) != 1 || !strings.Contains(info[0].Message, tt.want) || !strings.Contains(info[0].Hint, "cnb:await") {
				t.Fatalf("advice %v, want one with %q", info, tt.want)
			}
			if st := ds.Strict(); st.HasErrors() {
				t.Fatalf("--strict made advice an error: %v", st)
			}
		})
	}
}
