package clock

import (
	"testing"
	"time"
)

func TestFakeAdvances(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	f.Advance(5 * time.Minute)
	if got := f.Now(); !got.Equal(start.Add(5 * time.Minute)) {
		t.Fatalf("Now = %v", got)
	}
	f.Set(start)
	if !f.Now().Equal(start) {
		t.Fatal("Set did not move the clock")
	}
	var _ Clock = Real{}
	if (Real{}).Now().IsZero() {
		t.Fatal("real clock returned zero time")
	}
}
