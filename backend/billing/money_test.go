package billing

import (
	"testing"

	"pgregory.net/rapid"
)

func TestParseAndFormat(t *testing.T) {
	tests := []struct {
		in      string
		want    Amount
		str     string
		display string
	}{
		{"10", 10 * Scale, "10.00000000", "10.0000"},
		{"12.34", 1234 * Scale / 100, "12.34000000", "12.3400"},
		{"0.00000001", 1, "0.00000001", "0.0000"},
		{"0.00005", 5000, "0.00005000", "0.0001"},
		{"0.66666666", 66666666, "0.66666666", "0.6667"},
	}
	for _, tt := range tests {
		got, err := ParseAmount(tt.in)
		if err != nil || got != tt.want || got.String() != tt.str || got.Display() != tt.display {
			t.Errorf("%q: %d %v %q %q", tt.in, got, err, got.String(), got.Display())
		}
	}
	// Text around the digits is refused: " 1" and "1\n" were read as 1 (TrimSpace), also
	// Unicode spaces such as U+00A0.
	for _, bad := range []string{"", "-1", "1e3", "1.", ".5", "1.123456789", "abc", "1,5", "12345678901",
		" 1", "1 ", "\t1", "1\n", "\u00a01", "1\u00a0", " 1.50", "1. 5", "+1", "１"} {
		if _, err := ParseAmount(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if (-Amount(15000)).Display() != "-0.0002" {
		t.Errorf("negative display %q", (-Amount(15000)).Display())
	}
}

func TestCostOf(t *testing.T) {
	gpu := Amount(Scale / 2) // 0.5 per core-hour
	if got := CostOf(16*3600, gpu); got != 8*Scale {
		t.Fatalf("16 GPU core-hours = %s, want 8", got)
	}
	if got := CostOf(1, gpu); got != 13889 {
		t.Fatalf("one GPU core-second = %d units, want 13889", got)
	}
	if got := CostOf(16*300, gpu); got.Display() != "0.6667" {
		t.Fatalf("a 5-minute GPU window = %s", got.Display())
	}
	cpu := Amount(Scale / 8) // 0.125
	if got := CostOf(8*3600, cpu); got != Scale {
		t.Fatalf("8 CPU core-hours = %s, want 1", got)
	}
}

// Rounding happens once per charge and is at most half a unit off the exact rational value.
func TestCostOfIsWithinHalfAUnit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secs := rapid.Int64Range(0, 64*18*3600).Draw(t, "core-seconds")
		price := Amount(rapid.Int64Range(0, 100*Scale).Draw(t, "price"))
		got := int64(CostOf(secs, price))
		exact2 := 2 * secs * int64(price) // 2 × 3600 × the exact cost
		if d := 2*3600*got - exact2; d < -3600 || d > 3600 {
			t.Fatalf("cost %d for %d s at %d: off by %d/7200 units", got, secs, price, d)
		}
	})
}
