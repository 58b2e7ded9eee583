#!/usr/bin/env bash
# A real single-node Kubernetes on loopback for the Kubernetes executor's tests (README.md here):
#
#   e2e/k8s/cluster.sh build        the five binaries and the fake GPU plugin, from the Go module
#                                   proxy through wrapper/ (cold about 8 min on 2 cores, then the
#                                   Go build cache makes it a relink of seconds)
#   e2e/k8s/cluster.sh up DIR       etcd, kube-apiserver, controller-manager, scheduler, a private
#                                   containerd and the kubelet (node "localhost"), 2 fake
#                                   nvidia.com/gpu; state in DIR; prints KUBECONFIG=… (10-15 s)
#   e2e/k8s/cluster.sh down DIR     stops all of it, unmounts, restores what the kubelet changed
#
# Needs root, Debian's containerd, runc, etcd-server, containernetworking-plugins and
# busybox-static (e2e/testenv.sh installs them). Fixed loopback ports: 6443 (apiserver), 2379-2381
# (etcd), 10248/10250 (kubelet): one cluster per machine.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
V=v1.34.4
BIN=${NIMBUS_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/nimbus/k8s-$V}
log() { printf 'k8s: %s\n' "$*" >&2; }

build() {
	mkdir -p "$BIN"
	# Linking the five binaries takes about 30 s even from a warm build cache: skip it when what
	# they were built from has not changed.
	local stamp
	stamp=$(cat "$HERE/wrapper/go.mod" "$HERE/wrapper/go.sum" "$HERE/wrapper/cmd/fake-gpu-plugin/main.go" "$0" | sha256sum | cut -c1-16)
	if [ "$(cat "$BIN/.built" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	cd "$HERE/wrapper"
	# go.mod and go.sum are settled (go mod tidy once, committed): a build that edited them would
	# miss most of the build cache (a 1 s relink became a 5 min rebuild).
	export GOFLAGS=-mod=readonly CGO_ENABLED=0
	local vf="" maj=1 min=${V#v1.}
	min=${min%%.*}
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		# Unstamped, they say v0.0.0-master+$Format:%H$, which kubectl and clients cannot parse.
		vf="$vf -X $pkg.gitVersion=$V -X $pkg.gitMajor=$maj -X $pkg.gitMinor=$min -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	local s t
	s=$(date +%s)
	for t in kube-apiserver kubelet kubectl kube-controller-manager kube-scheduler; do
		go build -p 2 -trimpath -ldflags="-s -w $vf" -o "$BIN/$t" "k8s.io/kubernetes/cmd/$t"
	done
	go build -trimpath -ldflags='-s -w' -o "$BIN/fake-gpu-plugin" ./cmd/fake-gpu-plugin
	echo "$stamp" > "$BIN/.built"
	log "binaries in $BIN ($(( $(date +%s) - s )) s)"
}

# --- up -------------------------------------------------------------------------------------
certs() { # a CA, serving and client certificates, kubeconfigs (about 1 s)
	local d=$1
	mkdir -p "$d"
	(
		cd "$d"
		ossl() { openssl "$@" 2>/dev/null; }
		ossl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=nimbus-test-ca"
		sign() { # sign NAME CN ORG [SAN]
			local n=$1 cn=$2 o=$3 san=${4:-} subj="/CN=$2"
			[ -n "$o" ] && subj="/O=$o/CN=$cn"
			ossl req -newkey rsa:2048 -nodes -keyout "$n.key" -out "$n.csr" -subj "$subj"
			{
				echo "basicConstraints=CA:FALSE"
				echo "keyUsage=digitalSignature,keyEncipherment"
				if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
				else echo "extendedKeyUsage=clientAuth"; fi
			} > "$n.ext"
			ossl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$n.crt" -days 3650 -extfile "$n.ext"
			rm -f "$n.csr" "$n.ext"
		}
		sign apiserver kube-apiserver "" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.0.0.1"
		sign admin admin system:masters
		sign apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
		sign kubelet-client system:node:localhost system:nodes
		sign kubelet-serving system:node:localhost system:nodes "DNS:localhost,IP:127.0.0.1"
		sign controller-manager system:kube-controller-manager ""
		sign scheduler system:kube-scheduler ""
		ossl genrsa -out sa.key 2048
		ossl rsa -in sa.key -pubout -out sa.pub
		for pair in admin:admin kubelet:kubelet-client controller-manager:controller-manager scheduler:scheduler; do
			cat > "${pair%%:*}.kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$d/ca.crt"}
users:
- name: u
  user: {client-certificate: "$d/${pair##*:}.crt", client-key: "$d/${pair##*:}.key"}
contexts:
- name: local
  context: {cluster: local, user: u}
current-context: local
EOK
		done
	)
}

images() { # docker-archive tarballs from busybox-static: localhost/busybox:local (and :tools), localhost/pause:local
	local out=$1 bb w
	bb=$(command -v busybox)
	w=$(mktemp -d)
	mkdir -p "$out"
	mk() { # mk REF ENTRYPOINT-JSON CMD-JSON
		local ref=$1 d
		d="$w/$(echo "$1" | tr '/:' '__')"
		mkdir -p "$d/rootfs/bin" "$d/rootfs/etc" "$d/rootfs/tmp" "$d/rootfs/proc" "$d/rootfs/sys" "$d/rootfs/dev"
		cp "$bb" "$d/rootfs/bin/busybox"
		for a in $("$bb" --list); do [ "$a" = busybox ] || ln -sf busybox "$d/rootfs/bin/$a"; done
		echo 'root:x:0:0:root:/root:/bin/sh' > "$d/rootfs/etc/passwd"
		echo 'root:x:0:' > "$d/rootfs/etc/group"
		chmod 1777 "$d/rootfs/tmp"
		tar --numeric-owner --owner=0 --group=0 --mtime='2020-01-01' --sort=name -C "$d/rootfs" -cf "$d/layer.tar" .
		local diffid
		diffid=sha256:$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
		cat > "$d/config.json" <<EOC
{"architecture":"amd64","os":"linux","created":"2020-01-01T00:00:00Z",
 "config":{"Env":["PATH=/bin"],"Entrypoint":$2,"Cmd":$3,"WorkingDir":"/"},
 "rootfs":{"type":"layers","diff_ids":["$diffid"]}}
EOC
		echo "[{\"Config\":\"config.json\",\"RepoTags\":[\"$ref\"],\"Layers\":[\"layer.tar\"]}]" > "$d/manifest.json"
		tar -C "$d" -cf "$out/$(echo "${ref#localhost/}" | tr '/:' '__').tar" manifest.json config.json layer.tar
	}
	mk localhost/busybox:local 'null' '["sh"]'
	mk localhost/tools:local 'null' '["sh"]' # the same, under a second name: a pipeline of two images
	mk localhost/pause:local '["/bin/busybox","sleep","2147483647"]' 'null'
	rm -rf "$w"
}

wait_until() { # wait_until SECONDS WHAT PIDFILE COMMAND...
	local secs=$1 what=$2 pidf=$3 i
	shift 3
	for i in $(seq 1 $((secs * 5))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		if [ -n "$pidf" ] && ! kill -0 "$(cat "$pidf")" 2>/dev/null; then log "$what died"; return 1; fi
		sleep 0.2
	done
	log "$what not ready after ${secs}s"
	return 1
}

up() {
	local R=$1 P=$1/pki s
	s=$(date +%s)
	for b in kube-apiserver kubelet kubectl kube-controller-manager kube-scheduler fake-gpu-plugin; do
		[ -x "$BIN/$b" ] || { log "missing $BIN/$b: run $0 build"; return 1; }
	done
	mkdir -p "$R/cni/net.d" "$R/cni/bin" "$R/kubelet" "$R/pod-logs"
	certs "$P" >/dev/null
	images "$R/images"

	# containerd of its own (Debian 1.6), CRI with the isolated CNI: a pod gets lo and an eth0
	# connected to nothing (containerd 1.6 rejects a loopback-only result; the kernel has no dummy
	# links). Pods that must reach loopback services use hostNetwork.
	ln -sf /usr/lib/cni/loopback "$R/cni/bin/loopback"
	cp "$HERE/cni-isolated-eth0" "$R/cni/bin/"
	cat > "$R/cni/net.d/10-isolated.conflist" <<EOC
{"cniVersion":"0.4.0","name":"isolated","plugins":[{"type":"loopback"},{"type":"cni-isolated-eth0","prefix":"169.254.200","state":"$R/cni/ipam"}]}
EOC
	cat > "$R/containerd.toml" <<EOC
version = 2
root = "$R/containerd-root"
state = "$R/containerd-state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs","io.containerd.snapshotter.v1.btrfs","io.containerd.snapshotter.v1.zfs","io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$R/containerd.sock"
[ttrpc]
  address = "$R/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:local"
  enable_cdi = false
  # runc cannot set the sandbox's oom_score_adj=-998 without CAP_SYS_RESOURCE ("can't get final
  # child's PID from pipe: EOF"): clamp it to containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$R/cni/bin"
    conf_dir = "$R/cni/net.d"
EOC
	containerd --config "$R/containerd.toml" --log-level warn > "$R/containerd.log" 2>&1 &
	echo $! > "$R/containerd.pid"
	wait_until 10 containerd "$R/containerd.pid" ctr -a "$R/containerd.sock" version
	for f in "$R"/images/*.tar; do ctr -a "$R/containerd.sock" -n k8s.io images import "$f" >/dev/null; done

	etcd --name local --data-dir "$R/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster local=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
		--unsafe-no-fsync > "$R/etcd.log" 2>&1 &
	echo $! > "$R/etcd.pid"
	wait_until 20 etcd "$R/etcd.pid" curl -fs http://127.0.0.1:2379/health

	"$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 \
		--endpoint-reconciler-type=none \
		--tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
		--client-ca-file="$P/ca.crt" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
		--service-cluster-ip-range=10.0.0.0/24 --authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction \
		--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$P/ca.crt" --kubelet-preferred-address-types=Hostname \
		--allow-privileged=true --profiling=false --v=0 > "$R/apiserver.log" 2>&1 &
	echo $! > "$R/apiserver.pid"
	wait_until 120 kube-apiserver "$R/apiserver.pid" \
		curl -fs --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" https://127.0.0.1:6443/readyz

	"$BIN/kube-controller-manager" --kubeconfig="$P/controller-manager.kubeconfig" \
		--secure-port=0 --leader-elect=false --use-service-account-credentials=true \
		--root-ca-file="$P/ca.crt" --service-account-private-key-file="$P/sa.key" \
		--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" --v=0 \
		> "$R/kube-controller-manager.log" 2>&1 &
	echo $! > "$R/kube-controller-manager.pid"
	"$BIN/kube-scheduler" --kubeconfig="$P/scheduler.kubeconfig" --secure-port=0 --leader-elect=false --v=0 \
		> "$R/kube-scheduler.log" 2>&1 &
	echo $! > "$R/kube-scheduler.pid"

	# The kubelet sets vm.overcommit_memory, kernel.panic and friends on the host: keep them for down.
	[ -e /var/lib/kubelet ] || touch "$R/var-lib-kubelet.created"
	for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
		echo "$k=$(sysctl -n "$k")"
	done > "$R/sysctl.saved"
	cat > "$R/kubelet-config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: AlwaysAllow}
tlsCertFile: $P/kubelet-serving.crt
tlsPrivateKeyFile: $P/kubelet-serving.key
containerRuntimeEndpoint: unix://$R/containerd.sock
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
podLogsDir: $R/pod-logs
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
maxPods: 60
serializeImagePulls: false
EOC
	# Node "localhost": the kubelet refuses a loopback --node-ip, and the apiserver reaches it by
	# its Hostname address instead (--kubelet-preferred-address-types=Hostname).
	"$BIN/kubelet" --config="$R/kubelet-config.yaml" --kubeconfig="$P/kubelet.kubeconfig" \
		--root-dir="$R/kubelet" --hostname-override=localhost --v=0 > "$R/kubelet.log" 2>&1 &
	echo $! > "$R/kubelet.pid"
	local K="$BIN/kubectl --kubeconfig=$P/admin.kubeconfig"
	node_ready() { [ "$($K get node localhost -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
	wait_until 150 kubelet "$R/kubelet.pid" node_ready
	wait_until 60 "the default service account" "$R/kube-controller-manager.pid" $K -n default get sa default

	# Two fake nvidia.com/gpu through the kubelet's real device-plugin API (its socket directory
	# is fixed at /var/lib/kubelet/device-plugins whatever --root-dir says).
	"$BIN/fake-gpu-plugin" -dir /var/lib/kubelet/device-plugins -n 2 > "$R/fake-gpu-plugin.log" 2>&1 &
	echo $! > "$R/fake-gpu-plugin.pid"
	gpus() { [ "$($K get node localhost -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 2 ]; }
	wait_until 60 "the fake GPU plugin" "$R/fake-gpu-plugin.pid" gpus
	log "cluster up in $(( $(date +%s) - s )) s"
	echo "KUBECONFIG=$P/admin.kubeconfig"
	echo "KUBECTL=$BIN/kubectl"
	echo "CONTAINERD=$R/containerd.sock"
}

down() {
	local R=$1 P=$1/pki
	[ -d "$R" ] || return 0
	stop() {
		local f=$R/$1.pid p
		[ -f "$f" ] || return 0
		p=$(cat "$f")
		if kill -0 "$p" 2>/dev/null; then
			kill "$p"
			for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
			kill -9 "$p" 2>/dev/null || true
		fi
		rm -f "$f"
	}
	# Pods first, while the kubelet runs: it unmounts their volumes.
	if [ -f "$R/kubelet.pid" ] && [ -x "$BIN/kubectl" ]; then
		timeout 30 "$BIN/kubectl" --kubeconfig="$P/admin.kubeconfig" delete pods --all -A --grace-period=0 --force --wait=true >/dev/null 2>&1 || true
	fi
	stop fake-gpu-plugin
	stop kube-scheduler
	stop kube-controller-manager
	stop kubelet
	local sock=$R/containerd.sock t c
	if [ -S "$sock" ]; then
		for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
		sleep 0.5
		for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1; done
		for c in $(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io containers delete "$c" >/dev/null 2>&1; done
	fi
	stop containerd
	stop apiserver
	stop etcd
	# Leftover mounts (netns, shm, projected volumes, overlay roots), deepest first.
	grep -E " $R" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	local h
	for h in /sys/fs/cgroup/*/; do [ -d "${h}kubepods" ] && find "${h}kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null; done
	if [ -f "$R/sysctl.saved" ]; then
		while IFS== read -r k v; do sysctl -qw "$k=$v"; done < "$R/sysctl.saved"
		rm -f "$R/sysctl.saved"
	fi
	if [ -f "$R/var-lib-kubelet.created" ]; then rm -rf /var/lib/kubelet; fi
	rm -f /var/lib/kubelet/device-plugins/fake-gpu.sock 2>/dev/null || true
	return 0
}

case "${1:-}" in
build) build ;;
up) up "${2:?state directory}" ;;
down) down "${2:?state directory}" ;;
*) echo "usage: $0 build | up DIR | down DIR" >&2; exit 2 ;;
esac
