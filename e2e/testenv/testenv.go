// Package testenv tells tests where the real services started by `make test` are
// (e2e/testenv.sh exports their addresses) and enforces the house rule: with CI=true a test
// whose service is missing fails; on a developer machine without it, the test is skipped with
// the command that would provide it.
package testenv

import (
	"os"
	"testing"
)

// Variables exported by e2e/testenv.sh.
const (
	EnvPostgres = "NIMBUS_TEST_POSTGRES_URL" // admin URL of a throwaway cluster; tests create their own databases
	EnvRedis    = "NIMBUS_TEST_REDIS_URL"
	EnvDocker   = "NIMBUS_TEST_DOCKER_HOST" // unix:///… socket of a Docker engine
	EnvImage    = "NIMBUS_TEST_IMAGE"       // a busybox image present in that engine
	EnvStripe   = "NIMBUS_TEST_STRIPE_URL"  // http://127.0.0.1:PORT of stripe-mock
)

// Require returns the value of the variable, or stops the test: Fatal under CI=true, Skip
// otherwise.
func Require(t testing.TB, name, what string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := what + " is not available: " + name + " is unset (run `make test`, which starts it)"
	if CI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Has reports whether the service variable is set, without failing or skipping.
func Has(name string) bool { return os.Getenv(name) != "" }

// CI reports whether the tests run in CI, where nothing may be skipped.
func CI() bool { return os.Getenv("CI") == "true" }

// PostgresURL is the admin URL of the test PostgreSQL cluster.
func PostgresURL(t testing.TB) string { return Require(t, EnvPostgres, "PostgreSQL") }

// RedisURL is the URL of the test Redis server.
func RedisURL(t testing.TB) string { return Require(t, EnvRedis, "Redis") }

// DockerHost is the DOCKER_HOST of the test Docker engine.
func DockerHost(t testing.TB) string { return Require(t, EnvDocker, "A Docker engine") }

// Image is a busybox image loaded into the test Docker engine.
func Image(t testing.TB) string { return Require(t, EnvImage, "The busybox test image") }

// StripeURL is the base URL of the test stripe-mock server.
func StripeURL(t testing.TB) string { return Require(t, EnvStripe, "stripe-mock") }
