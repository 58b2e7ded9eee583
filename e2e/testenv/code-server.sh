#!/usr/bin/env bash
# Builds a test image with code-server in it, from npm and Debian only (no download from GitHub),
# and checks that it serves the workbench:
#
#   e2e/testenv/code-server.sh [--no-image] [--browser] [--rebuild]
#
# 1. code-server (npm, CODE_SERVER_VERSION, default 4.100.3: the last release for Node 20) is
#    unpacked and its dependencies installed with --ignore-scripts; what its postinstall would
#    have done is done here instead: the native modules are built with node-gyp against the local
#    Node headers (node-gyp would otherwise download them), @vscode/ripgrep gets Debian's rg as
#    its bin/rg (its postinstall downloads one from GitHub), and the postinstall's symlinks are
#    made. The tree is checked on the host: `/` must serve the workbench, a static asset and
#    /healthz must answer.
# 2. A rootfs (busybox-static as in nimbus-test/busybox:1, the host's node and the shared
#    libraries it and the native modules need, the tree in /opt/code-server, a `code-server`
#    launcher in /usr/local/bin) is made into a tar and `docker import`ed as CODE_SERVER_IMAGE
#    (default nimbus-test/code-server:$CODE_SERVER_VERSION). A container of it (--network host)
#    must serve the workbench too.
#
# Everything is cached in CODE_SERVER_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/nimbus/code-server),
# keyed by the version, Node's ABI and the architecture: a second run only imports the tar (when
# the engine lacks the image) and runs the checks.
#
# The Docker engine: NIMBUS_TEST_DOCKER_HOST, else DOCKER_HOST, else /var/run/docker.sock, when
# one answers; else (as root, with dockerd installed) a throwaway dockerd like e2e/testenv.sh's,
# which takes the image with it when this script ends. Inside `e2e/testenv.sh` the image stays in
# that run's engine.
#
# Options:
#   --no-image  stop after the host check (no rootfs, no Docker)
#   --browser   also open the workbench in headless Chromium (playwright-core from npm, cached):
#               the explorer must list a file and the terminal must run a command
#   --rebuild   drop this version's cache first
#
# On success it prints, on stdout only, lines a caller can eval:
#   export NIMBUS_TEST_CODE_SERVER_ROOTFS=/…/rootfs-….tar
#   export NIMBUS_TEST_CODE_SERVER_IMAGE=nimbus-test/code-server:4.100.3   (not with a throwaway engine)
# On failure it says which step failed and why, shows the end of that step's log, exits non-zero.
set -euo pipefail

VERSION=${CODE_SERVER_VERSION:-4.100.3}
IMAGE=${CODE_SERVER_IMAGE:-nimbus-test/code-server:$VERSION}
CACHE=${CODE_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nimbus/code-server}
PLAYWRIGHT_VERSION=1.65
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

NO_IMAGE="" BROWSER="" REBUILD=""
for arg in "$@"; do
	case $arg in
	--no-image) NO_IMAGE=1 ;;
	--browser) BROWSER=1 ;;
	--rebuild) REBUILD=1 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "code-server.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
	esac
done

log() { printf 'code-server.sh: %s\n' "$*" >&2; }
set -E
CURRENT_STEP="starting"
WORK=$(mktemp -d /tmp/nimbus-code-server.XXXXXX)
chmod 755 "$WORK"
fail() { # fail MESSAGE...: the reason, then exit 1 (from a subshell too: the marker stops a second report)
	log "FAILED in step '$CURRENT_STEP': $*"
	: >"$WORK/.failure-reported"
	exit 1
}
# Whatever else fails (set -e) is reported by the EXIT trap with the command that failed.
LAST_ERR=""
trap 'LAST_ERR="line $LINENO: $BASH_COMMAND"' ERR

T_START=$SECONDS
TIMES=()
STEP_T0=$SECONDS
begin() { CURRENT_STEP=$1; STEP_T0=$SECONDS; log "== $1"; }
done_step() { TIMES+=("$(printf '%-34s %4ss' "$CURRENT_STEP${1:+ ($1)}" $((SECONDS - STEP_T0)))"); }

# run_in DIR LOGNAME COMMAND...: runs it in DIR with its output in $LOGS/LOGNAME.log; on failure
# shows the end of that log and fails the step.
run_in() {
	local dir=$1 name=$2; shift 2
	local f="$LOGS/$name.log"
	if ! (cd "$dir" && "$@") >"$f" 2>&1; then
		log "--- last lines of $f:"
		tail -n 40 "$f" | sed 's/^/    /' >&2
		fail "\`$*\` in $dir failed (full log: $f)"
	fi
}

SERVER_PID="" CONTAINER="" DOCKER="" DOCKERD_PID=""
cleanup() {
	local rc=$?
	set +e
	if [ "$rc" -ne 0 ] && [ ! -e "$WORK/.failure-reported" ]; then
		log "FAILED in step '$CURRENT_STEP' (exit $rc${LAST_ERR:+, $LAST_ERR})"
	fi
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	[ -n "$CONTAINER" ] && $DOCKER rm -f "$CONTAINER" >/dev/null 2>&1
	local t0=$SECONDS
	if [ -n "$DOCKERD_PID" ]; then
		log "stopping the throwaway dockerd"
		$DOCKER ps -aq 2>/dev/null | xargs -r $DOCKER rm -f >/dev/null 2>&1
		kill "$DOCKERD_PID" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$DOCKERD_PID" 2>/dev/null
		# dockerd leaves its netns bind mount (exec-root/netns/default) behind: unmount whatever is
		# still mounted under $WORK, deepest first, or rm -rf fails on it.
		awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
	fi
	rm -rf "$WORK" 2>/dev/null
	[ -z "$DOCKERD_PID" ] || log "cleaned up in $((SECONDS - t0))s"
	return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- prerequisites ---------------------------------------------------------------------------
begin prerequisites
command -v node >/dev/null || fail "node is not on PATH (code-server $VERSION needs Node 20)"
command -v npm >/dev/null || fail "npm is not on PATH"
NODE_VERSION=$(node -p process.versions.node)
NODE_MAJOR=${NODE_VERSION%%.*}
[ "$NODE_MAJOR" = 20 ] || fail "node is v$NODE_VERSION; code-server $VERSION runs on Node 20 only (its postinstall refuses other majors; newer code-server releases need Node 22)"
NODE_BIN=$(readlink -f "$(command -v node)")
NODE_DIR=$(dirname "$(dirname "$NODE_BIN")")
[ -f "$NODE_DIR/include/node/node_api.h" ] && [ -f "$NODE_DIR/include/node/common.gypi" ] \
	|| fail "no Node headers in $NODE_DIR/include/node (node-gyp would download them, which cannot work offline); install the headers that match node v$NODE_VERSION (the nodejs package from NodeSource has them; Debian: libnode-dev of the same version)"
NODE_GYP=$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js
[ -f "$NODE_GYP" ] || fail "npm's bundled node-gyp is not at $NODE_GYP"
NODE_GYP=$(readlink -f "$NODE_GYP")

APT_UPDATED=""
need_pkg() { # need_pkg PACKAGE TEST-COMMAND...
	local pkg=$1; shift
	if "$@" >/dev/null 2>&1; then return 0; fi
	[ "$(id -u)" = 0 ] || fail "Debian package $pkg is missing (\`$*\` fails) and we are not root to install it: apt-get install $pkg"
	if [ -z "$APT_UPDATED" ]; then
		log "apt-get update"
		apt-get update -qq >"$WORK/apt-update.log" 2>&1 || { tail -5 "$WORK/apt-update.log" >&2; fail "apt-get update failed"; }
		APT_UPDATED=1
	fi
	log "installing $pkg"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >"$WORK/apt-$pkg.log" 2>&1 \
		|| { tail -5 "$WORK/apt-$pkg.log" >&2; fail "apt-get install $pkg failed"; }
	"$@" >/dev/null 2>&1 || fail "$pkg is installed but \`$*\` still fails"
}
need_pkg curl command -v curl
need_pkg build-essential sh -c 'command -v make && command -v g++'
need_pkg python3 command -v python3
need_pkg libkrb5-dev command -v krb5-config  # kerberos (the native module) compiles against GSSAPI
need_pkg ripgrep test -x /usr/bin/rg         # replaces the rg @vscode/ripgrep downloads from GitHub
if [ -z "$NO_IMAGE" ]; then
	need_pkg busybox-static test -x /bin/busybox
	/bin/busybox --list >/dev/null 2>&1 || fail "/bin/busybox does not run"
	if ldd /bin/busybox >/dev/null 2>&1; then fail "/bin/busybox is dynamically linked: install busybox-static (not busybox)"; fi
fi
if [ -n "$BROWSER" ]; then
	need_pkg chromium command -v chromium
fi
ABI=$(node -p process.versions.modules)
KEY="$VERSION-node$ABI-$(uname -m)"
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
LOGS="$CACHE/logs"
mkdir -p "$LOGS"
TREE="$CACHE/tree-$KEY"
ROOTFS_TAR="$CACHE/rootfs-$KEY.tar"
if [ -n "$REBUILD" ]; then
	log "--rebuild: removing $TREE and $ROOTFS_TAR"
	rm -rf "$TREE" "$TREE.partial" "$ROOTFS_TAR" "$ROOTFS_TAR.sha256"
fi
log "node v$NODE_VERSION (ABI $ABI) from $NODE_BIN, headers in $NODE_DIR/include/node; cache $CACHE"
done_step

free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$(shuf -i 20000-59999 -n 1)
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
	fail "no free port found"
}

# --- 1. the code-server tree -----------------------------------------------------------------
build_tree() {
	local T="$TREE.partial"
	rm -rf "$T"
	mkdir -p "$T" "$CACHE/dl"

	local tgz="$CACHE/dl/code-server-$VERSION.tgz"
	if [ ! -s "$tgz" ]; then
		log "npm pack code-server@$VERSION"
		run_in "$CACHE/dl" npm-pack npm pack "code-server@$VERSION"
		[ -s "$tgz" ] || fail "npm pack did not produce $tgz (see $LOGS/npm-pack.log)"
	fi
	tar -xzf "$tgz" -C "$T" --strip-components=1 || fail "could not unpack $tgz"

	# The postinstall (postinstall.sh) would run `npm install` here, in lib/vscode and in
	# lib/vscode/extensions, letting every package's scripts run; the scripts that download
	# (argon2's node-pre-gyp, kerberos's prebuild-install, @vscode/ripgrep) cannot work offline.
	log "npm install --ignore-scripts (code-server, lib/vscode, lib/vscode/extensions)"
	local d
	for d in . lib/vscode lib/vscode/extensions; do
		local logname=npm-install-code-server
		[ "$d" = . ] || logname="npm-install-${d//\//-}"
		run_in "$T/$d" "$logname" npm install --ignore-scripts --omit=dev --no-audit --no-fund --no-update-notifier
	done

	log "  npm pack + installs took $((SECONDS - STEP_T0))s ($(du -sh "$T" | cut -f1))"

	# Native modules, built as npm would have (node-gyp rebuild) but against the local headers.
	export npm_config_nodedir="$NODE_DIR" npm_config_jobs="$JOBS"
	log "building native modules with node-gyp (-j $JOBS)"
	local t_native=$SECONDS
	local gyp dir name
	while IFS= read -r gyp; do
		dir=$(dirname "$gyp")
		name=${dir#"$T/"}
		case $name in
		*/@vscode/windows-*) continue ;;             # Windows only
		*/@parcel/watcher) continue ;;               # prebuilt: @parcel/watcher-linux-*-glibc from npm
		*/node_modules/*/node_modules/*) continue ;; # none today; nested copies are not built by code-server either
		esac
		local t0=$SECONDS
		if [ -f "$dir/package.json" ] && grep -q '"node-pre-gyp' "$dir/package.json" && [ -x "$T/node_modules/.bin/node-pre-gyp" ]; then
			# argon2: its binding.gyp needs node-pre-gyp's variables (module_name, module_path).
			PATH="$(dirname "$NODE_GYP"):$PATH" run_in "$dir" "gyp-${name//\//-}" \
				"$T/node_modules/.bin/node-pre-gyp" rebuild --build-from-source --nodedir="$NODE_DIR"
		else
			run_in "$dir" "gyp-${name//\//-}" node "$NODE_GYP" rebuild --nodedir="$NODE_DIR" -j "$JOBS"
		fi
		log "  built ${name#*node_modules/} in $((SECONDS - t0))s"
		rm -rf "$dir/build/Release/obj.target" "$dir/build/Release/.deps" "$dir/build/Release/obj" "$dir"/build-tmp-*
	done < <(find "$T" -name binding.gyp -path '*/node_modules/*' -not -path '*/test/*' -not -path '*/deps/*' | sort)

	log "  native modules took $((SECONDS - t_native))s"

	# @vscode/ripgrep: lib/index.js looks for bin/rg next to it.
	local rgdir="$T/lib/vscode/node_modules/@vscode/ripgrep"
	[ -d "$rgdir" ] || fail "@vscode/ripgrep is not in lib/vscode/node_modules"
	mkdir -p "$rgdir/bin"
	cp /usr/bin/rg "$rgdir/bin/rg"

	# The rest of postinstall.sh: symlinks, and extensions' postinstall (trims typescript).
	ln -sfn node_modules "$T/lib/vscode/node_modules.asar"
	ln -sfn code-linux.sh "$T/lib/vscode/bin/remote-cli/code-server"
	ln -sfn browser-linux.sh "$T/lib/vscode/bin/helpers/browser.sh"
	run_in "$T/lib/vscode/extensions" extensions-postinstall node ./postinstall.mjs

	# Every native module must load, with this node.
	run_in "$T/lib/vscode" load-native-modules node --input-type=module -e '
		import { createRequire } from "module";
		const req = createRequire(process.cwd() + "/x.js");
		let bad = 0;
		for (const m of ["@parcel/watcher", "@vscode/spdlog", "@vscode/deviceid", "kerberos", "native-watchdog", "node-pty"]) {
			try { req(m); console.log("ok", m); } catch (e) { bad++; console.log("FAILED to load", m + ":", e.message); }
		}
		const rg = req("@vscode/ripgrep").rgPath;
		console.log("rg:", rg);
		const reqTop = createRequire(process.cwd() + "/../../x.js");
		try { reqTop("argon2"); console.log("ok argon2"); } catch (e) { bad++; console.log("FAILED to load argon2:", e.message); }
		process.exit(bad ? 1 : 0);'
	"$rgdir/bin/rg" --version >/dev/null || fail "$rgdir/bin/rg does not run"

	echo "$KEY" >"$T/.nimbus-complete"
	rm -rf "$TREE"
	mv "$T" "$TREE"
}

begin "code-server tree"
if [ -f "$TREE/.nimbus-complete" ]; then
	log "cached: $TREE"
	done_step cached
else
	build_tree
	log "tree: $TREE ($(du -sh "$TREE" | cut -f1))"
	done_step built
fi

# check_server BASE DESCRIPTION: the workbench, a static asset it names, /healthz.
check_server() {
	local base=$1 what=$2 html="$WORK/index.html" code asset
	code=$(curl -s -L -o "$html" -w '%{http_code}' "$base/") || fail "$what: GET / failed (curl exit $?)"
	[ "$code" = 200 ] || fail "$what: GET / answered $code, not 200"
	grep -q 'workbench.js' "$html" && grep -q 'workbench-web-configuration' "$html" \
		|| fail "$what: GET / is not the workbench page (first bytes: $(head -c 200 "$html" | tr '\n' ' '))"
	asset=$(grep -o 'src="[^"]*/workbench\.js"' "$html" | head -n1 | sed 's/^src="//; s/"$//')
	[ -n "$asset" ] || fail "$what: the page names no workbench.js"
	code=$(curl -s -o "$WORK/asset" -w '%{http_code}' "$base/${asset#./}") || fail "$what: GET /$asset failed"
	[ "$code" = 200 ] && [ "$(stat -c %s "$WORK/asset")" -gt 100000 ] \
		|| fail "$what: GET /$asset answered $code with $(stat -c %s "$WORK/asset") bytes"
	code=$(curl -s -o "$WORK/icon" -w '%{http_code}' "$base/_static/src/browser/media/favicon.ico") || true
	[ "$code" = 200 ] || fail "$what: GET /_static/src/browser/media/favicon.ico answered $code"
	curl -sf "$base/healthz" | grep -q '"status"' || fail "$what: /healthz did not answer with a status"
	log "$what: / is the workbench, /$asset is $(stat -c %s "$WORK/asset") bytes, /healthz: $(curl -s "$base/healthz")"
}

# wait_http BASE SECONDS ALIVE-COMMAND...: until /healthz answers, while ALIVE-COMMAND succeeds.
wait_http() {
	local base=$1 secs=$2; shift 2
	local i
	for i in $(seq 1 $((secs * 5))); do
		curl -sf -o /dev/null "$base/healthz" && return 0
		"$@" >/dev/null 2>&1 || return 1
		sleep 0.2
	done
	return 1
}

browser_check() { # browser_check BASE FILE-IN-THE-FOLDER
	local pw="$CACHE/playwright"
	if [ ! -d "$pw/node_modules/playwright-core" ]; then
		mkdir -p "$pw"
		[ -f "$pw/package.json" ] || echo '{"private":true}' >"$pw/package.json"
		PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 run_in "$pw" npm-playwright npm install --no-audit --no-fund "playwright-core@$PLAYWRIGHT_VERSION"
	fi
	cat >"$WORK/browser-check.cjs" <<'EOF'
const { chromium } = require(process.env.PW_DIR + '/node_modules/playwright-core');
(async () => {
  const [url, file, shot] = process.argv.slice(2);
  const t0 = Date.now(), ms = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'] });
  const page = await browser.newPage();
  let step = 'loading the workbench';
  try {
    await page.goto(url);
    await page.waitForSelector('.monaco-workbench', { timeout: 90000 });
    console.log(`workbench rendered after ${ms()}`);
    step = `waiting for the explorer to list ${file}`;
    const row = name => page.locator('.explorer-folders-view .monaco-list-row', { hasText: name }).first();
    await row(file).waitFor({ timeout: 60000 });
    console.log(`explorer lists ${file} after ${ms()}`);
    step = 'opening a terminal';
    await page.keyboard.press('Control+Backquote');
    await page.locator('.terminal-wrapper .xterm').first().waitFor({ timeout: 60000 });
    // The shell drops what is typed before it is ready: retry until the file shows up (which
    // also exercises the file watcher).
    step = 'running a command in the terminal';
    const marker = `term-ok-${process.pid}`;
    let ok = false;
    for (let i = 0; i < 20 && !ok; i++) {
      await page.locator('.terminal-wrapper .xterm textarea').first().focus();
      await page.keyboard.type(`\ntouch ${marker}\n`);
      ok = await row(marker).waitFor({ timeout: 3000 }).then(() => true, () => false);
    }
    if (!ok) throw new Error(`"touch ${marker}" typed in the terminal never showed up in the explorer`);
    console.log(`terminal ran a command, explorer saw its file after ${ms()}`);
  } catch (e) {
    console.log(`browser check FAILED while ${step}: ${e.message.split('\n')[0]} (screenshot: ${shot})`);
    await page.screenshot({ path: shot }).catch(() => {});
    process.exitCode = 1;
  }
  await browser.close();
})();
EOF
	mkdir -p "$WORK/browser-home"
	if ! HOME="$WORK/browser-home" XDG_CONFIG_HOME="$WORK/browser-home/.config" XDG_CACHE_HOME="$WORK/browser-home/.cache" \
		PW_DIR="$pw" timeout 240 node "$WORK/browser-check.cjs" "$1/" "$2" "$LOGS/browser-failure.png" >"$LOGS/browser.log" 2>&1; then
		sed 's/^/    /' "$LOGS/browser.log" >&2
		fail "the workbench did not work in Chromium (log: $LOGS/browser.log)"
	fi
	sed 's/^/    /' "$LOGS/browser.log" >&2
}

CS_FLAGS=(--auth none --disable-telemetry --disable-update-check --disable-workspace-trust)

# --- host check -------------------------------------------------------------------------------
begin "host check"
PORT=$(free_port)
mkdir -p "$WORK/home" "$WORK/folder"
echo 'hello from nimbus' >"$WORK/folder/readme.txt"
HOME="$WORK/home" XDG_DATA_HOME="$WORK/home/.local/share" XDG_CONFIG_HOME="$WORK/home/.config" XDG_CACHE_HOME="$WORK/home/.cache" \
	node "$TREE/out/node/entry.js" --bind-addr "127.0.0.1:$PORT" "${CS_FLAGS[@]}" "$WORK/folder" >"$LOGS/host-server.log" 2>&1 &
SERVER_PID=$!
if ! wait_http "http://127.0.0.1:$PORT" 60 kill -0 "$SERVER_PID"; then
	tail -n 30 "$LOGS/host-server.log" | sed 's/^/    /' >&2
	fail "code-server on the host did not answer on 127.0.0.1:$PORT within 60s (log: $LOGS/host-server.log)"
fi
log "code-server answered after $((SECONDS - STEP_T0))s"
check_server "http://127.0.0.1:$PORT" "host"
[ -n "$BROWSER" ] && [ -n "$NO_IMAGE" ] && browser_check "http://127.0.0.1:$PORT" readme.txt
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
done_step

emit_results() {
	log "times:"
	local t
	for t in "${TIMES[@]}"; do log "  $t"; done
	log "  total                              $((SECONDS - T_START))s"
}

if [ -n "$NO_IMAGE" ]; then
	emit_results
	echo "export NIMBUS_TEST_CODE_SERVER_TREE=$TREE"
	exit 0
fi

# --- 2. the rootfs tar --------------------------------------------------------------------------
# libs_of FILE...: the shared libraries (and the dynamic loader) they need, one path a line.
libs_of() {
	local f out
	for f in "$@"; do
		out=$(ldd "$f" 2>&1) || { case $out in *"not a dynamic executable"*) continue ;; esac; fail "ldd $f: $out"; }
		if grep -q 'not found' <<<"$out"; then fail "ldd $f: $(grep 'not found' <<<"$out" | tr '\n' ' ')"; fi
		awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out"
	done | sort -u
}

build_rootfs() {
	local R="$WORK/rootfs" applet lib
	mkdir -p "$R/bin" "$R/etc" "$R/tmp" "$R/root" "$R/workspace" "$R/usr/bin" "$R/usr/local/bin" "$R/opt"
	chmod 1777 "$R/tmp"
	# As nimbus-test/busybox:1 (e2e/testenv.sh).
	cp /bin/busybox "$R/bin/busybox"
	for applet in $(/bin/busybox --list); do
		[ "$applet" = busybox ] || ln -sf busybox "$R/bin/$applet"
	done
	ln -sf /bin/busybox "$R/usr/bin/env" # code-server's helper scripts start with #!/usr/bin/env sh
	echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
	echo 'root:x:0:' >"$R/etc/group"
	# Hard links: no second copy of the tree on disk before tar reads it.
	cp -al "$TREE" "$R/opt/code-server" 2>/dev/null || cp -a "$TREE" "$R/opt/code-server"
	rm -f "$R/opt/code-server/.nimbus-complete"
	cp "$NODE_BIN" "$R/usr/local/bin/node"
	local natives
	mapfile -t natives < <(find "$TREE" -name '*.node' -path '*/build/Release/*' -o -name '*.node' -path '*/lib/binding/*' -o -name '*.node' -path '*/@parcel/watcher-linux-*-glibc/*')
	libs_of "$NODE_BIN" /usr/bin/rg "${natives[@]}" >"$WORK/libs"
	local n=0
	while IFS= read -r lib; do
		mkdir -p "$R$(dirname "$lib")"
		cp -L "$lib" "$R$lib"
		n=$((n + 1))
	done <"$WORK/libs"
	log "copied $n shared libraries (for node, rg and ${#natives[@]} native modules)"
	cat >"$R/usr/local/bin/code-server" <<'EOF'
#!/bin/sh
# code-server from npm, installed by e2e/testenv/code-server.sh
exec /usr/local/bin/node /opt/code-server/out/node/entry.js "$@"
EOF
	chmod 755 "$R/usr/local/bin/code-server"
	# The image must run: the loader, node and the launcher, without Docker.
	chroot "$R" /usr/local/bin/node -e 'require("/opt/code-server/lib/vscode/node_modules/node-pty")' 2>"$WORK/chroot.err" \
		|| { [ "$(id -u)" != 0 ] || fail "node does not run inside the rootfs: $(cat "$WORK/chroot.err")"; }
	tar -C "$R" -cf "$ROOTFS_TAR.partial" . || fail "tar of the rootfs failed"
	sha256sum "$ROOTFS_TAR.partial" | cut -d' ' -f1 >"$ROOTFS_TAR.sha256"
	mv "$ROOTFS_TAR.partial" "$ROOTFS_TAR"
	rm -rf "$R"
}

begin "rootfs tar"
if [ -s "$ROOTFS_TAR" ] && [ -s "$ROOTFS_TAR.sha256" ] && [ "$ROOTFS_TAR" -nt "$TREE/.nimbus-complete" ]; then
	log "cached: $ROOTFS_TAR"
	done_step cached
else
	build_rootfs
	log "rootfs: $ROOTFS_TAR ($(du -h "$ROOTFS_TAR" | cut -f1))"
	done_step built
fi
ROOTFS_SHA=$(cat "$ROOTFS_TAR.sha256")

# --- the Docker engine -------------------------------------------------------------------------
begin "docker engine"
command -v docker >/dev/null || fail "no docker client on PATH"
THROWAWAY=""
for h in "${NIMBUS_TEST_DOCKER_HOST:-}" "${DOCKER_HOST:-}" unix:///var/run/docker.sock; do
	[ -n "$h" ] || continue
	if docker -H "$h" version >/dev/null 2>&1; then DOCKER="docker -H $h"; break; fi
	[ "$h" = unix:///var/run/docker.sock ] || log "no Docker engine answers at $h"
done
if [ -z "$DOCKER" ]; then
	[ "$(id -u)" = 0 ] || fail "no Docker engine answers (NIMBUS_TEST_DOCKER_HOST, DOCKER_HOST, /var/run/docker.sock) and we are not root to start one; run inside e2e/testenv.sh, or with --no-image"
	command -v dockerd >/dev/null || need_pkg docker.io command -v dockerd
	mkdir -p "$WORK/docker"
	dockerd --bridge=none --iptables=false --ip6tables=false \
		--host "unix://$WORK/docker/docker.sock" --data-root "$WORK/docker/data" \
		--exec-root "$WORK/docker/exec" --pidfile "$WORK/docker/dockerd.pid" \
		>"$WORK/docker/dockerd.log" 2>&1 &
	DOCKERD_PID=$!
	DOCKER="docker -H unix://$WORK/docker/docker.sock"
	for _ in $(seq 1 300); do $DOCKER version >/dev/null 2>&1 && break; kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.2; done
	$DOCKER version >/dev/null 2>&1 || { tail -n 20 "$WORK/docker/dockerd.log" >&2; fail "the throwaway dockerd did not come up"; }
	THROWAWAY=1
	log "throwaway dockerd at unix://$WORK/docker/docker.sock (the image goes with it)"
else
	log "engine: ${DOCKER#docker -H }"
fi
done_step

begin "docker import"
have=$($DOCKER image inspect -f '{{ index .Config.Labels "nimbus.code-server.rootfs-sha256" }}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$ROOTFS_SHA" ]; then
	log "$IMAGE is already this rootfs"
	done_step cached
else
	$DOCKER import \
		--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'ENV HOME=/root' --change 'ENV SHELL=/bin/sh' \
		--change 'CMD ["/bin/sh"]' \
		--change "LABEL nimbus.code-server.version=$VERSION nimbus.code-server.rootfs-sha256=$ROOTFS_SHA" \
		"$ROOTFS_TAR" "$IMAGE" >"$LOGS/docker-import.log" 2>&1 \
		|| { tail -n 10 "$LOGS/docker-import.log" >&2; fail "docker import $ROOTFS_TAR $IMAGE failed"; }
	log "imported $IMAGE ($($DOCKER image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%d MB", $1 / 1e6 }'))"
	done_step imported
fi

# --- container check --------------------------------------------------------------------------
begin "container check"
PORT=$(free_port)
CONTAINER="nimbus-code-server-check-$$"
$DOCKER run -d --name "$CONTAINER" --network host "$IMAGE" \
	code-server --bind-addr "127.0.0.1:$PORT" "${CS_FLAGS[@]}" /tmp >"$LOGS/docker-run.log" 2>&1 \
	|| { cat "$LOGS/docker-run.log" >&2; fail "docker run $IMAGE failed"; }
container_running() { [ "$($DOCKER inspect -f '{{.State.Running}}' "$CONTAINER" 2>/dev/null)" = true ]; }
if ! wait_http "http://127.0.0.1:$PORT" 60 container_running; then
	$DOCKER logs "$CONTAINER" 2>&1 | tail -n 30 | sed 's/^/    /' >&2
	fail "code-server in $IMAGE did not answer on 127.0.0.1:$PORT within 60s (state: $($DOCKER inspect -f '{{.State.Status}} exit {{.State.ExitCode}}' "$CONTAINER" 2>&1))"
fi
log "code-server in the container answered after $((SECONDS - STEP_T0))s"
check_server "http://127.0.0.1:$PORT" "container"
# What Nimbus's agent asks before it starts the IDE (agent/runner/devenv.go).
$DOCKER exec "$CONTAINER" /bin/sh -c 'command -v code-server' >/dev/null \
	|| fail "\`/bin/sh -c 'command -v code-server'\` fails in $IMAGE"
if [ -n "$BROWSER" ]; then
	$DOCKER exec "$CONTAINER" /bin/sh -c 'echo "hello from nimbus" >/tmp/readme.txt'
	browser_check "http://127.0.0.1:$PORT" readme.txt
fi
$DOCKER logs "$CONTAINER" >"$LOGS/container-server.log" 2>&1 || true
$DOCKER rm -f "$CONTAINER" >/dev/null 2>&1
CONTAINER=""
done_step

emit_results
log "image $IMAGE, rootfs $ROOTFS_TAR ($(du -h "$ROOTFS_TAR" | cut -f1)), tree $TREE ($(du -sh "$TREE" | cut -f1))"
echo "export NIMBUS_TEST_CODE_SERVER_ROOTFS=$ROOTFS_TAR"
if [ -n "$THROWAWAY" ]; then
	log "the image was imported into a throwaway engine only; run inside e2e/testenv.sh to keep it for tests"
else
	echo "export NIMBUS_TEST_CODE_SERVER_IMAGE=$IMAGE"
fi
