package human

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{14 * 24 * time.Hour, "14 days"},
		{24 * time.Hour, "24 hours"},
		{36 * time.Hour, "36 hours"},
		{time.Hour, "1 hour"},
		{90 * time.Minute, "90 minutes"},
		{5 * time.Minute, "5 minutes"},
		{time.Minute, "1 minute"},
		{45 * time.Second, "45 seconds"},
		{1500 * time.Millisecond, "2 seconds"},
		{time.Second, "1 second"},
		{0, "0 seconds"},
	}
	for _, tt := range tests {
		if got := Duration(tt.d); got != tt.want {
			t.Errorf("Duration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
