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
	// A Redis Cluster of three masters on loopback (redis+cluster://host:port,…).
	EnvRedisCluster = "NIMBUS_TEST_REDIS_CLUSTER_URL"
	EnvDocker       = "NIMBUS_TEST_DOCKER_HOST" // unix:///… socket of a Docker engine
	EnvImage        = "NIMBUS_TEST_IMAGE"       // a busybox image present in that engine
	EnvStripe       = "NIMBUS_TEST_STRIPE_URL"  // http://127.0.0.1:PORT of stripe-mock
	// An S3-compatible server (MinIO) on loopback, plain HTTP, with a bucket tests share (each
	// test keeps to its own key prefix).
	EnvS3Endpoint  = "NIMBUS_TEST_S3_ENDPOINT" // 127.0.0.1:PORT
	EnvS3AccessKey = "NIMBUS_TEST_S3_ACCESS_KEY"
	EnvS3SecretKey = "NIMBUS_TEST_S3_SECRET_KEY"
	EnvS3Bucket    = "NIMBUS_TEST_S3_BUCKET"
	// Clients the registry is tested with, installed by e2e/testenv.sh.
	EnvOCIConformance = "NIMBUS_TEST_OCI_CONFORMANCE" // the distribution-spec conformance binary
	EnvOras           = "NIMBUS_TEST_ORAS"            // the oras CLI
	// The reference registry (CNCF distribution v3's registry binary) the benchmarks compare with.
	EnvReferenceRegistry = "NIMBUS_TEST_REFERENCE_REGISTRY"
	// The unprivileged user (with subordinate id ranges) the agent runs pipelines' rootless
	// docker services as.
	EnvDindUser = "NIMBUS_TEST_DIND_USER"
	// A real single-node Kubernetes on loopback (e2e/k8s): its admin kubeconfig, its kubectl, and
	// the socket of its containerd (to import test images). Its node has 2 fake nvidia.com/gpu.
	EnvKubeconfig = "NIMBUS_TEST_KUBECONFIG"
	EnvKubectl    = "NIMBUS_TEST_KUBECTL"
	EnvContainerd = "NIMBUS_TEST_K8S_CONTAINERD"
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

// RedisClusterURL is the URL of the test Redis Cluster.
func RedisClusterURL(t testing.TB) string { return Require(t, EnvRedisCluster, "Redis Cluster") }

// RedisURL is the URL of the test Redis server.
func RedisURL(t testing.TB) string { return Require(t, EnvRedis, "Redis") }

// DockerHost is the DOCKER_HOST of the test Docker engine.
func DockerHost(t testing.TB) string { return Require(t, EnvDocker, "A Docker engine") }

// Image is a busybox image loaded into the test Docker engine.
func Image(t testing.TB) string { return Require(t, EnvImage, "The busybox test image") }

// Kubernetes is the test cluster's admin kubeconfig.
func Kubernetes(t testing.TB) string { return Require(t, EnvKubeconfig, "The Kubernetes test cluster") }

// Kubectl is the test cluster's kubectl.
func Kubectl(t testing.TB) string {
	return Require(t, EnvKubectl, "The Kubernetes test cluster's kubectl")
}

// DindUser is the user rootless docker services run as.
func DindUser(t testing.TB) string {
	return Require(t, EnvDindUser, "The docker service's user (root, rootlesskit and /etc/subuid)")
}

// StripeURL is the base URL of the test stripe-mock server.
func StripeURL(t testing.TB) string { return Require(t, EnvStripe, "stripe-mock") }

// S3 is where the test S3-compatible server is.
type S3 struct {
	Endpoint, AccessKey, SecretKey, Bucket string
}

// S3Server returns the test S3-compatible server (plain HTTP on loopback).
func S3Server(t testing.TB) S3 {
	return S3{
		Endpoint:  Require(t, EnvS3Endpoint, "The S3-compatible test server"),
		AccessKey: Require(t, EnvS3AccessKey, "The S3-compatible test server"),
		SecretKey: Require(t, EnvS3SecretKey, "The S3-compatible test server"),
		Bucket:    Require(t, EnvS3Bucket, "The S3-compatible test server"),
	}
}

// OCIConformance is the path of the OCI distribution-spec conformance suite's binary.
func OCIConformance(t testing.TB) string {
	return Require(t, EnvOCIConformance, "The OCI conformance suite")
}

// Oras is the path of the oras CLI.
func Oras(t testing.TB) string { return Require(t, EnvOras, "oras") }

// ReferenceRegistry is the path of the reference registry's binary (CNCF distribution).
func ReferenceRegistry(t testing.TB) string {
	return Require(t, EnvReferenceRegistry, "The reference registry (distribution)")
}
