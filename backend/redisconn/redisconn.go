// Package redisconn connects the server to Redis: the one at NIMBUS_REDIS_URL, or, for the
// all-in-one mode, an in-process Redis-protocol server (miniredis) bound to loopback. Redis holds
// only what can be rebuilt from the database (queues, leases, live-log fan-out, locks), so the
// embedded server losing everything on restart is acceptable: the reconciler refills it.
package redisconn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Conn is a Redis client and what must be stopped with it.
type Conn struct {
	Client redis.UniversalClient
	// Addr is the embedded server's loopback address, or "" for an external Redis.
	Addr     string
	embedded *miniredis.Miniredis
}

// Connect dials url, or starts the embedded server when url is empty, and checks that it answers.
func Connect(ctx context.Context, url string) (*Conn, error) {
	c := &Conn{}
	if url == "" {
		// A password of its own: the built-in agent's job containers share the host's network
		// (app.startAgent), and a job must not reach the queues on loopback.
		pw := make([]byte, 24)
		if _, err := rand.Read(pw); err != nil {
			return nil, fmt.Errorf("redis: embedded server password: %w", err)
		}
		password := hex.EncodeToString(pw)
		m := miniredis.NewMiniRedis()
		m.RequireAuth(password)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("redis: start embedded server: %w", err)
		}
		c.embedded = m
		c.Addr = m.Addr()
		c.Client = redis.NewClient(&redis.Options{Addr: m.Addr(), Password: password})
	} else if cluster, ok := clusterURL(url); ok {
		opts, err := redis.ParseClusterURL(cluster)
		if err != nil {
			return nil, fmt.Errorf("redis: parse NIMBUS_REDIS_URL (cluster): %w", err)
		}
		c.Client = redis.NewClusterClient(opts)
	} else {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis: parse NIMBUS_REDIS_URL: %w", err)
		}
		c.Client = redis.NewClient(opts)
	}
	if err := c.Client.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis: ping: %w", err)
	}
	return c, nil
}

// clusterURL turns a Redis Cluster URL, redis+cluster://[user:pass@]host:port,host:port,…[?opts]
// (rediss+cluster:// for TLS), into go-redis's form (redis://…@host:port?addr=host:port&…). Any
// of the nodes is enough to find the others; listing a few survives one being down at start.
// Every key Nimbus uses in one script or transaction shares a hash tag (the scheduler's {q:…}),
// so it works on a cluster as on one server.
func ClusterURL(url string) (string, bool) { return clusterURL(url) }

func clusterURL(url string) (string, bool) {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok || (scheme != "redis+cluster" && scheme != "rediss+cluster") {
		return "", false
	}
	rest, query, _ := strings.Cut(rest, "?")
	userinfo, hosts := "", rest
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo, hosts = rest[:at+1], rest[at+1:]
	}
	hosts = strings.TrimSuffix(hosts, "/")
	nodes := strings.Split(hosts, ",")
	out := strings.TrimSuffix(scheme, "+cluster") + "://" + userinfo + nodes[0]
	var params []string
	for _, n := range nodes[1:] {
		if n = strings.TrimSpace(n); n != "" {
			params = append(params, "addr="+n)
		}
	}
	if query != "" {
		params = append(params, query)
	}
	if len(params) > 0 {
		out += "?" + strings.Join(params, "&")
	}
	return out, true
}

// FlushAll empties the Redis behind c, every master of a cluster (tests).
func FlushAll(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushDB(ctx).Err() })
	}
	return c.FlushDB(ctx).Err()
}

// Close closes the client and stops the embedded server, if any.
func (c *Conn) Close() error {
	err := c.Client.Close()
	if c.embedded != nil {
		c.embedded.Close()
	}
	return err
}
