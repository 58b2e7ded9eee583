// Package redistest gives a test package a Redis database of its own.
package redistest

import (
	"context"
	"net/url"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// Shared returns the test Redis server as it is (database 0, not flushed), or the embedded
// server on a developer machine without one (with CI=true a missing server fails the test). For
// tests whose keys are their own (class names, job ids), so packages can share it.
func Shared(t testing.TB) redis.UniversalClient {
	t.Helper()
	raw := ""
	if testenv.CI() || testenv.Has(testenv.EnvRedis) {
		raw = testenv.RedisURL(t)
	}
	return connect(t, raw)
}

// Isolated returns database index of the test Redis server, flushed, or the embedded server on
// a developer machine without one (with CI=true a missing server fails the test). Packages that
// flush, or that hold a fixed leader key other packages' servers also take, use an index of
// their own so that packages tested in parallel do not meet: the scheduler 7, billing 9. On a
// Redis Cluster (make test's second pass sets NIMBUS_TEST_REDIS_URL to one) there is one
// database: it is the whole cluster, flushed, and that pass runs one package alone.
func Isolated(t testing.TB, index int) redis.UniversalClient {
	t.Helper()
	raw := ""
	if testenv.CI() || testenv.Has(testenv.EnvRedis) {
		raw = testenv.RedisURL(t)
		if _, cluster := redisconn.ClusterURL(raw); !cluster {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/" + strconv.Itoa(index)
			raw = u.String()
		}
	}
	c := connect(t, raw)
	if err := redisconn.FlushAll(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func connect(t testing.TB, raw string) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.Connect(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Client
}
