package redisconn

import (
	"context"
	"testing"
	"time"
)

// One replica holds the lock and keeps it round after round; the others do not get it until it
// is released (here: deleted, as an expiry would).
func TestLeaderOneAtATime(t *testing.T) {
	ctx := context.Background()
	c, err := Connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, b := NewLeader(c.Client, "lock", time.Minute), NewLeader(c.Client, "lock", time.Minute)
	if !a.Hold(ctx) || b.Hold(ctx) || !a.Hold(ctx) || b.Hold(ctx) {
		t.Fatal("two leaders, or a leader that lost its own lock")
	}
	if ttl := c.Client.PTTL(ctx, "lock").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the lock has no TTL: %v", ttl)
	}
	c.Client.Del(ctx, "lock")
	if !b.Hold(ctx) || a.Hold(ctx) {
		t.Fatal("the lock was not taken over once free")
	}
}
