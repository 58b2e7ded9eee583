package agent

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCPUModel(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ content, want string }{
		"x86":  {"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\nprocessor\t: 1\nmodel name\t: other\n", "Intel(R) Xeon(R) Platinum 8480+"},
		"arm":  {"processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n", ""},
		"none": {"", ""},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := cpuModel(p); got != c.want {
			t.Errorf("%s: cpuModel = %q, want %q", name, got, c.want)
		}
	}
	if got := cpuModel(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("missing file: %q", got)
	}
}
