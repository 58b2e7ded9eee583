#!/usr/bin/env bash
# Starts the real services Nimbus's tests need, runs a command with their addresses exported, and
# tears everything down afterwards, whatever the command's outcome:
#
#   e2e/testenv.sh go test ./...
#
# - a throwaway PostgreSQL cluster (initdb in a temp dir, random port, run as an unprivileged user
#   when we are root)                               -> NIMBUS_TEST_POSTGRES_URL
# - redis-server on a random port, no persistence  -> NIMBUS_TEST_REDIS_URL
# - a Docker engine: the one that answers, else dockerd --bridge=none --iptables=false with its own
#   socket, data root and exec root                 -> NIMBUS_TEST_DOCKER_HOST
# - a busybox image made by `docker import`         -> NIMBUS_TEST_IMAGE
# - stripe-mock (Stripe's API fake; `go install`ed once into $(go env GOPATH)/bin)
#                                                   -> NIMBUS_TEST_STRIPE_URL
# - MinIO, an S3-compatible server (`go install`ed once, about 4 minutes on 2 cores), with a
#   bucket for the artifact storage tests          -> NIMBUS_TEST_S3_ENDPOINT, _ACCESS_KEY,
#                                                     _SECRET_KEY, _BUCKET
# - the OCI distribution-spec conformance suite and oras (`go install`ed once)
#                                                   -> NIMBUS_TEST_OCI_CONFORMANCE, NIMBUS_TEST_ORAS
# - the reference registry (CNCF distribution v3, `go install`ed once; the benchmarks start it)
#                                                   -> NIMBUS_TEST_REFERENCE_REGISTRY
# - what the agent needs for `services: docker` (rootless dockerd per pipeline): rootlesskit and
#   uidmap from Debian, and an unprivileged user with /etc/subuid and /etc/subgid ranges
#                                                   -> NIMBUS_TEST_DIND_USER
#
# Missing Debian packages (postgresql, redis-server, docker.io, busybox-static, git, chromium) are
# installed with apt when running as root. Everything binds to 127.0.0.1 only.
set -euo pipefail

log() { printf 'testenv: %s\n' "$*" >&2; }

TMP=$(mktemp -d /tmp/nimbus-testenv.XXXXXX)
chmod 755 "$TMP"
PIDS_TO_STOP=()
PG_DATA=""
PG_CTL=""
DOCKERD_PID=""
K8S_STOP=""
K8S_CLUSTER="$(cd "$(dirname "$0")" && pwd)/k8s/cluster.sh"

cleanup() {
	set +e
	if [ -n "$K8S_STOP" ]; then
		"$K8S_CLUSTER" down "$K8S_STOP" >/dev/null 2>&1
	fi
	if [ -n "$DOCKERD_PID" ]; then
		# Containers a failed test left behind go with the engine.
		docker -H "$NIMBUS_TEST_DOCKER_HOST" ps -aq 2>/dev/null | xargs -r docker -H "$NIMBUS_TEST_DOCKER_HOST" rm -f >/dev/null 2>&1
		kill "$DOCKERD_PID" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$DOCKERD_PID" 2>/dev/null
		umount -R "$TMP/docker" 2>/dev/null
	fi
	if [ -n "$PG_DATA" ]; then
		as_pg "$PG_CTL" -D "$PG_DATA" -m immediate stop >/dev/null 2>&1
	fi
	for p in "${PIDS_TO_STOP[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$TMP" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- packages -------------------------------------------------------------------------------
APT_UPDATED=""
need_pkg() { # need_pkg PACKAGE TEST-COMMAND...
	local pkg=$1; shift
	if "$@" >/dev/null 2>&1; then return 0; fi
	if [ "$(id -u)" != 0 ]; then
		log "package $pkg is missing and we are not root to install it"
		return 1
	fi
	if [ -z "$APT_UPDATED" ]; then
		log "apt-get update"
		apt-get update -qq >/dev/null
		APT_UPDATED=1
	fi
	log "installing $pkg"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
}
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1; }

need_pkg postgresql test -x "$(pg_bin)/initdb"
need_pkg redis-server command -v redis-server
need_pkg busybox-static test -x /bin/busybox
need_pkg git command -v git
need_pkg chromium command -v chromium
if ! { [ -n "${DOCKER_HOST:-}" ] || [ -S /var/run/docker.sock ]; } || ! command -v docker >/dev/null; then
	need_pkg docker.io command -v dockerd
fi
# services: docker runs the host's dockerd (from docker.io) rootless, one per pipeline.
need_pkg docker.io command -v dockerd
need_pkg rootlesskit command -v rootlesskit
need_pkg uidmap command -v newuidmap
# nimbus workspace ssh is tested with the real OpenSSH client as its ProxyCommand's caller.
need_pkg openssh-client command -v ssh

# --- helpers --------------------------------------------------------------------------------
free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$(shuf -i 20000-59999 -n 1)
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
	log "no free port found"; return 1
}
wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
	local secs=$1 what=$2; shift 2
	for _ in $(seq 1 $((secs * 5))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	log "$what did not come up in ${secs}s"; return 1
}
PG_USER=""
as_pg() {
	if [ -n "$PG_USER" ]; then runuser -u "$PG_USER" -- "$@"; else "$@"; fi
}

# --- PostgreSQL -----------------------------------------------------------------------------
PGBIN=$(pg_bin)
PG_CTL="$PGBIN/pg_ctl"
if [ "$(id -u)" = 0 ]; then
	PG_USER=postgres
	id -u "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home "$PG_USER"
fi
PG_DATA="$TMP/pg/data"
mkdir -p "$TMP/pg"
[ -n "$PG_USER" ] && chown "$PG_USER" "$TMP/pg"
PG_PORT=$(free_port)
as_pg "$PGBIN/initdb" -D "$PG_DATA" -U nimbus --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$TMP/pg/initdb.log" 2>&1 \
	|| { cat "$TMP/pg/initdb.log" >&2; exit 1; }
as_pg "$PG_CTL" -D "$PG_DATA" -l "$TMP/pg/server.log" -w -t 30 \
	-o "-p $PG_PORT -h 127.0.0.1 -k $TMP/pg -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
	start >/dev/null || { cat "$TMP/pg/server.log" >&2; exit 1; }
export NIMBUS_TEST_POSTGRES_URL="postgres://nimbus@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
log "PostgreSQL on 127.0.0.1:$PG_PORT"

# --- Redis ----------------------------------------------------------------------------------
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
	--daemonize yes --pidfile "$TMP/redis.pid" --logfile "$TMP/redis.log"
wait_for 10 redis test -s "$TMP/redis.pid"
PIDS_TO_STOP+=("$(cat "$TMP/redis.pid")")
export NIMBUS_TEST_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
log "Redis on 127.0.0.1:$REDIS_PORT"

# --- Redis Cluster: three masters on loopback (make test runs the scheduler's and the locks'
# tests on it too). A node's cluster bus is its port + 10000, so both must be free.
cluster_port() {
	local p
	for _ in $(seq 1 100); do
		p=$(shuf -i 20000-55000 -n 1)
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 10000))") 2>/dev/null; then
			echo "$p"; return
		fi
	done
	log "no free cluster port found"; return 1
}
CLUSTER_NODES=()
for i in 1 2 3; do
	port=$(cluster_port)
	mkdir -p "$TMP/redis-cluster-$i"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/redis-cluster-$i" \
		--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
		--daemonize yes --pidfile "$TMP/redis-cluster-$i/redis.pid" --logfile "$TMP/redis-cluster-$i/redis.log"
	wait_for 10 "redis cluster node $i" test -s "$TMP/redis-cluster-$i/redis.pid"
	PIDS_TO_STOP+=("$(cat "$TMP/redis-cluster-$i/redis.pid")")
	wait_for 10 "redis cluster node $i" redis-cli -h 127.0.0.1 -p "$port" ping
	CLUSTER_NODES+=("127.0.0.1:$port")
done
redis-cli --cluster create "${CLUSTER_NODES[@]}" --cluster-replicas 0 --cluster-yes >"$TMP/redis-cluster.log" 2>&1 \
	|| { cat "$TMP/redis-cluster.log" >&2; exit 1; }
cluster_ok() { for n in "${CLUSTER_NODES[@]}"; do redis-cli -h "${n%:*}" -p "${n#*:}" cluster info | grep -q 'cluster_state:ok' || return 1; done; }
wait_for 20 "the redis cluster" cluster_ok
export NIMBUS_TEST_REDIS_CLUSTER_URL="redis+cluster://$(IFS=,; echo "${CLUSTER_NODES[*]}")"
log "Redis Cluster on ${CLUSTER_NODES[*]}"

# --- Docker ---------------------------------------------------------------------------------
if [ -n "${DOCKER_HOST:-}" ] && docker info >/dev/null 2>&1; then
	export NIMBUS_TEST_DOCKER_HOST="$DOCKER_HOST"
elif [ -S /var/run/docker.sock ] && docker -H unix:///var/run/docker.sock info >/dev/null 2>&1; then
	export NIMBUS_TEST_DOCKER_HOST="unix:///var/run/docker.sock"
else
	mkdir -p "$TMP/docker"
	dockerd --bridge=none --iptables=false --ip6tables=false \
		--host "unix://$TMP/docker/docker.sock" --data-root "$TMP/docker/data" \
		--exec-root "$TMP/docker/exec" --pidfile "$TMP/docker/dockerd.pid" \
		>"$TMP/docker/dockerd.log" 2>&1 &
	DOCKERD_PID=$!
	export NIMBUS_TEST_DOCKER_HOST="unix://$TMP/docker/docker.sock"
	wait_for 60 dockerd docker -H "$NIMBUS_TEST_DOCKER_HOST" version || { tail -20 "$TMP/docker/dockerd.log" >&2; exit 1; }
	log "dockerd at $NIMBUS_TEST_DOCKER_HOST"
fi

# --- test image -----------------------------------------------------------------------------
export NIMBUS_TEST_IMAGE="nimbus-test/busybox:1"
if ! docker -H "$NIMBUS_TEST_DOCKER_HOST" image inspect "$NIMBUS_TEST_IMAGE" >/dev/null 2>&1; then
	rootfs="$TMP/rootfs"
	mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc" "$rootfs/workspace"
	chmod 1777 "$rootfs/tmp"
	cp /bin/busybox "$rootfs/bin/busybox"
	for applet in $(/bin/busybox --list); do
		[ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"
	done
	echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
	echo 'root:x:0:' >"$rootfs/etc/group"
	tar -C "$rootfs" -c . | docker -H "$NIMBUS_TEST_DOCKER_HOST" import \
		--change 'ENV PATH=/bin' --change 'CMD ["/bin/sh"]' - "$NIMBUS_TEST_IMAGE" >/dev/null
	log "imported $NIMBUS_TEST_IMAGE"
fi

# --- the docker service's user -------------------------------------------------------------
# Pipelines' own Docker engines run rootless as this user: root in their containers is this
# user on the host, and their other ids come from its subordinate ranges. As an operator does
# once per agent host (see agent/dockerservice/README.md).
if [ "$(id -u)" = 0 ]; then
	DIND_USER=nimbus-dind
	id -u "$DIND_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$DIND_USER"
	for f in /etc/subuid /etc/subgid; do
		grep -q "^$DIND_USER:" "$f" 2>/dev/null || echo "$DIND_USER:200000:65536" >>"$f"
	done
	export NIMBUS_TEST_DIND_USER="$DIND_USER"
	log "docker service user $DIND_USER"
fi

# --- stripe-mock ----------------------------------------------------------------------------
# The billing tests create Stripe customers and Checkout Sessions against it. Installed with the
# Go toolchain (it is a Go program); a failed install leaves the variable unset, so the Stripe
# tests skip, or fail under CI=true.
STRIPE_MOCK_VERSION=v0.203.0
STRIPE_MOCK="$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin/stripe-mock"
if [ ! -x "$STRIPE_MOCK" ]; then
	log "installing stripe-mock $STRIPE_MOCK_VERSION"
	GOFLAGS= go install "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION" >"$TMP/stripe-mock-install.log" 2>&1 \
		|| { tail -5 "$TMP/stripe-mock-install.log" >&2; log "stripe-mock could not be installed"; }
fi
if [ -x "$STRIPE_MOCK" ]; then
	STRIPE_PORT=$(free_port)
	# HTTPS must be given an address too: with only -http-addr, stripe-mock also serves HTTPS on
	# port 12112 of every interface.
	"$STRIPE_MOCK" -http-addr "127.0.0.1:$STRIPE_PORT" -https-addr 127.0.0.1:0 >"$TMP/stripe-mock.log" 2>&1 &
	PIDS_TO_STOP+=("$!")
	wait_for 20 stripe-mock bash -c "exec 3<>/dev/tcp/127.0.0.1/$STRIPE_PORT" || { tail -5 "$TMP/stripe-mock.log" >&2; exit 1; }
	export NIMBUS_TEST_STRIPE_URL="http://127.0.0.1:$STRIPE_PORT"
	log "stripe-mock on 127.0.0.1:$STRIPE_PORT"
fi

# --- Go-installed test peers ---------------------------------------------------------------
# go_tool BINARY PACKAGE VERSION installs PACKAGE@VERSION into $(go env GOPATH)/bin unless BINARY
# there is already that version. A failed install is logged; the peer's variables then stay
# unset, so its tests skip, or fail under CI=true.
GOBIN_DIR="$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"
go_tool() {
	local bin="$GOBIN_DIR/$1" pkg=$2 version=$3
	if [ -x "$bin" ] && [ "$(go version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3 }')" = "$version" ]; then
		return 0
	fi
	log "installing $1 $version"
	GOFLAGS= go install "$pkg@$version" >"$TMP/$1-install.log" 2>&1 && return 0
	tail -5 "$TMP/$1-install.log" >&2
	log "$1 could not be installed"
	return 1
}

# --- MinIO (S3-compatible) ------------------------------------------------------------------
# The S3 storage backend is tested against it (the first install takes about 4 minutes on 2
# cores). Its console is bound to loopback too.
if go_tool minio github.com/minio/minio v0.0.0-20260212201848-7aac2a2c5b7c; then
	MINIO_PORT=$(free_port)
	MINIO_CONSOLE_PORT=$(free_port)
	mkdir -p "$TMP/minio"
	export NIMBUS_TEST_S3_ACCESS_KEY=nimbus-test
	NIMBUS_TEST_S3_SECRET_KEY=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
	export NIMBUS_TEST_S3_SECRET_KEY
	MINIO_ROOT_USER=$NIMBUS_TEST_S3_ACCESS_KEY MINIO_ROOT_PASSWORD=$NIMBUS_TEST_S3_SECRET_KEY MINIO_BROWSER=off \
		MINIO_UPDATE=off MINIO_CI_CD=1 "$GOBIN_DIR/minio" server --quiet --address "127.0.0.1:$MINIO_PORT" \
		--console-address "127.0.0.1:$MINIO_CONSOLE_PORT" "$TMP/minio" >"$TMP/minio.log" 2>&1 &
	PIDS_TO_STOP+=("$!")
	wait_for 60 MinIO bash -c "exec 3<>/dev/tcp/127.0.0.1/$MINIO_PORT" || { tail -5 "$TMP/minio.log" >&2; exit 1; }
	export NIMBUS_TEST_S3_ENDPOINT="127.0.0.1:$MINIO_PORT"
	# The storage backend creates the bucket when it is missing.
	export NIMBUS_TEST_S3_BUCKET=nimbus-test
	log "MinIO on 127.0.0.1:$MINIO_PORT"
fi

# --- OCI conformance suite and oras ---------------------------------------------------------
# The registry's end-to-end tests run the official conformance suite and round-trip with oras.
if go_tool conformance github.com/opencontainers/distribution-spec/conformance v0.0.0-20260831232431-97274622c111; then
	export NIMBUS_TEST_OCI_CONFORMANCE="$GOBIN_DIR/conformance"
fi
if go_tool oras oras.land/oras/cmd/oras v1.3.6; then
	export NIMBUS_TEST_ORAS="$GOBIN_DIR/oras"
fi

# --- the reference registry -----------------------------------------------------------------
# CNCF distribution, the registry the benchmarks compare Nimbus's with (push and pull of a 1 GiB
# blob with oras). v3.1.2 builds with Go 1.26. The benchmark starts it itself, on loopback.
if go_tool registry github.com/distribution/distribution/v3/cmd/registry v3.1.2; then
	export NIMBUS_TEST_REFERENCE_REGISTRY="$GOBIN_DIR/registry"
fi

# --- Kubernetes -----------------------------------------------------------------------------
# A real single-node cluster for the Kubernetes executor (e2e/k8s/README.md): its binaries are
# built from the Go module proxy (about 8 minutes the first time, then a relink of seconds from
# the Go build cache), its bring-up takes 10-15 s. Only as root (containerd, the kubelet). A
# failed build or bring-up leaves the variables unset: the tests skip, or fail under CI=true.
if [ "$(id -u)" = 0 ]; then
	need_pkg etcd-server command -v etcd
	need_pkg containerd command -v containerd
	need_pkg runc command -v runc
	need_pkg containernetworking-plugins test -x /usr/lib/cni/loopback
	K8S_DIR="$TMP/k8s"
	if "$K8S_CLUSTER" build >"$TMP/k8s-build.log" 2>&1 \
		&& "$K8S_CLUSTER" up "$K8S_DIR" >"$TMP/k8s-up.out" 2>"$TMP/k8s-up.log"; then
		K8S_STOP="$K8S_DIR"
		eval "$(sed -n 's/^\(KUBECONFIG\|KUBECTL\|CONTAINERD\)=/K8S_&/p' "$TMP/k8s-up.out")"
		export NIMBUS_TEST_KUBECONFIG="$K8S_KUBECONFIG" NIMBUS_TEST_KUBECTL="$K8S_KUBECTL" NIMBUS_TEST_K8S_CONTAINERD="$K8S_CONTAINERD"
		log "Kubernetes up ($(tail -1 "$TMP/k8s-up.log" | sed 's/^k8s: //')): KUBECONFIG=$NIMBUS_TEST_KUBECONFIG"
	else
		tail -20 "$TMP/k8s-build.log" "$TMP/k8s-up.log" >&2 2>/dev/null
		log "the Kubernetes test cluster could not be started"
		K8S_STOP="$K8S_DIR"
	fi
fi

# --- run ------------------------------------------------------------------------------------
set +e
"$@"
status=$?
set -e
exit "$status"
