package envflag

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1000000", 1000000, true}, {"512MiB", 512 << 20, true}, {"20 GiB", 20 << 30, true},
		{"1.5GB", 0, false}, {"1500MB", 1500000000, true}, {"10kb", 10000, true}, {"7B", 7, true}, {"2tib", 2 << 40, true},
		{"", 0, false}, {"-1", 0, false}, {"ten", 0, false}, {"5 parsecs", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for n, want := range map[int64]string{20 << 30: "20GiB", 1500: "1500B", 0: "0B", 3 << 20: "3MiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{812: "812 B", 1536: "1.5 KiB", 40 << 20: "40.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSizeFlagFromEnv(t *testing.T) {
	s := New("x", "x")
	var v int64
	s.Size(&v, "budget", "NIMBUS_X_BUDGET", 1<<30, "budget")
	if err := s.Parse(nil, func(k string) string { return map[string]string{"NIMBUS_X_BUDGET": "2GiB"}[k] }, nil); err != nil || v != 2<<30 {
		t.Fatalf("v = %d, err %v", v, err)
	}
	if err := s.Parse([]string{"--budget", "lots"}, func(string) string { return "" }, nil); err == nil {
		t.Fatal("a bad size was taken")
	}
}
