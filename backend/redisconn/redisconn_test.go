package redisconn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/internal/testenv"
)

func roundTrip(t *testing.T, c *Conn) {
	t.Helper()
	ctx := context.Background()
	key := "redisconn-test:" + t.Name()
	if err := c.Client.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Client.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("get = %q, %v", got, err)
	}
	c.Client.Del(ctx, key)
}

func TestEmbeddedServerOnLoopback(t *testing.T) {
	c, err := Connect(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Addr, "127.0.0.1:") {
		t.Fatalf("embedded server on %q, want loopback", c.Addr)
	}
	roundTrip(t, c)
	// Another process on the host (a job container on the host's network) gets nothing
	// without the password.
	stranger := redis.NewClient(&redis.Options{Addr: c.Addr})
	defer stranger.Close()
	if err := stranger.Get(context.Background(), "anything").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("a client without the password: %v, want NOAUTH", err)
	}
	c.Close()
	if err := c.Client.Ping(context.Background()).Err(); err == nil {
		t.Fatal("client still answers after Close")
	}
}

func TestExternalRedis(t *testing.T) {
	c, err := Connect(context.Background(), testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Addr != "" {
		t.Fatalf("external connection reports embedded addr %q", c.Addr)
	}
	roundTrip(t, c)
}

func TestConnectErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Connect(ctx, "redis://127.0.0.1:1/0"); err == nil || !strings.Contains(err.Error(), "redis: ping") {
		t.Fatalf("unreachable: err = %v", err)
	}
	if _, err := Connect(ctx, "redis://:bad:port"); err == nil {
		t.Fatal("bad URL accepted")
	}
}

func TestClusterURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002": "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002",
		"rediss+cluster://u:p@a:1,b:2/?dial_timeout=3s":                "rediss://u:p@a:1?addr=b:2&dial_timeout=3s",
		"redis+cluster://a:1": "redis://a:1",
	} {
		if got, ok := ClusterURL(in); !ok || got != want {
			t.Errorf("ClusterURL(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := ClusterURL("redis://a:1/0"); ok {
		t.Error("a plain URL is not a cluster URL")
	}
}
