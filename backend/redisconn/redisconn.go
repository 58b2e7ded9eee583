// Package redisconn connects the server to Redis: the one at NIMBUS_REDIS_URL, or, for the
// all-in-one mode, an in-process Redis-protocol server (miniredis) bound to loopback. Redis holds
// only what can be rebuilt from the database (queues, leases, live-log fan-out, locks), so the
// embedded server losing everything on restart is acceptable: the reconciler refills it.
package redisconn

import (
	"context"
	"fmt"

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
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("redis: start embedded server: %w", err)
		}
		c.embedded = m
		c.Addr = m.Addr()
		c.Client = redis.NewClient(&redis.Options{Addr: m.Addr()})
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

// Close closes the client and stops the embedded server, if any.
func (c *Conn) Close() error {
	err := c.Client.Close()
	if c.embedded != nil {
		c.embedded.Close()
	}
	return err
}
