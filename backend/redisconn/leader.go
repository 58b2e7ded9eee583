package redisconn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leader is a Redis lock that lets one replica at a time run a background loop. The holder
// extends it on every round; when the holder stops, the lock expires after its TTL and another
// replica takes it. (The embedded server never expires keys, which is fine: it has one process.)
type Leader struct {
	rdb   redis.UniversalClient
	key   string
	token string
	ttl   time.Duration
}

var extendScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0
`)

// NewLeader returns this replica's claim on the lock key; ttl should be a few rounds of the loop.
func NewLeader(rdb redis.UniversalClient, key string, ttl time.Duration) *Leader {
	b := make([]byte, 12)
	rand.Read(b)
	return &Leader{rdb: rdb, key: key, token: hex.EncodeToString(b), ttl: ttl}
}

// Hold takes or extends the lock and reports whether this replica leads.
func (l *Leader) Hold(ctx context.Context) bool {
	n, err := extendScript.Run(ctx, l.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int()
	return err == nil && n == 1
}
