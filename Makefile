# Nimbus — the two commands a newcomer needs are `make run` and `make test`.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BINARIES := bin/nimbus-server bin/nimbus-agent bin/nimbus
# The fuzz budget is a count of runs, not a duration: with a duration, Go 1.26's fuzz coordinator
# can report its own deadline as a failure ("context deadline exceeded", golang/go#75804, fixed
# in 1.27). About 20 s on this machine.
FUZZ_COMPILE_RUNS ?= 40000x

.PHONY: all run build binaries frontend test test-all test-ide vet go-test go-test-units go-test-e2e fuzz bench frontend-test gpu-check gpu-check-binaries clean
.DEFAULT_GOAL := build

all: build

## run: build everything and start the all-in-one server (SQLite, embedded Redis, built-in agent)
run: build
	bin/nimbus-server

## build: the dashboard, then the three binaries (dashboard embedded in the server) into bin/
build: frontend binaries

binaries:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/nimbus-server ./backend/cmd/nimbus-server
	# The agent is static too, as deploy/Dockerfile builds it: e2e puts it into an image for the
	# test cluster (deploy/kubernetes/executor).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/nimbus-agent ./agent/cmd/nimbus-agent
	# The CLI is static (no cgo): pipelines copy it into any image, busybox included.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/nimbus ./backend/cmd/nimbus

frontend: frontend/node_modules/.installed
	cd frontend && npm run --silent build

frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	touch $@

e2e/hfclient/node_modules/.installed: e2e/hfclient/package.json e2e/hfclient/package-lock.json
	cd e2e/hfclient && npm ci --no-audit --no-fund --loglevel=error
	touch $@

## test-ide: build code-server 4.100.3 from npm into a test image (cached in CODE_SERVER_CACHE;
## 3-4 minutes cold on 2 cores, e2e/testenv/CODE-SERVER.md) and open it through the preview proxy
test-ide: build
	e2e/testenv.sh bash -c 'out=$$(e2e/testenv/code-server.sh) && eval "$$out" && \
		NIMBUS_E2E_IDE=1 NIMBUS_E2E_BIN=$(CURDIR)/bin $(GO) test -count=1 -timeout 15m -run "CodeServer" -v ./e2e'

## test: start real PostgreSQL, Redis and Docker (e2e/testenv.sh), run every check, tear down
test: build
	e2e/testenv.sh $(MAKE) --no-print-directory test-all

# test-all expects the services of e2e/testenv.sh; run it through `make test`. One check after
# another. Tried as two lines side by side (the end-to-end tests beside the others at nice 5), on
# CI's 2 cores: on a cold build cache 37.1 min against 37.8 one after another (compiling fills
# the CPU); on a warm one the checks and the e2e package ended after 21 min instead of 27.6, but
# the timed tests ran slower (the e2e package 20 min instead of 16.6, the scheduler's SQLite half
# 235 s instead of 10) and one of them, the scheduler's warm-agent hand-over within 5 s, failed.
test-all: vet go-test-units go-test-e2e fuzz frontend-test bench

vet:
	$(GO) vet ./...

# go-test: every Go test: the packages' own, then the end-to-end tests.
go-test: go-test-units go-test-e2e

# Every test runs under the race detector except the SQLite halves of the dual-database tests,
# which the second run runs without it (scripts/dialecttests says why: the detector would
# instrument the SQLite engine, modernc's C translated to Go, at 5-10 times the cost). The third
# run is the scheduler's (queues, Lua dispatch, locks, leader) and redisconn's tests again with
# the Redis Cluster of e2e/testenv.sh as their Redis.
go-test-units:
	halves=$$($(GO) run ./scripts/dialecttests -pattern) && pkgs=$$($(GO) run ./scripts/dialecttests -packages) && \
	$(GO) test -race -count=1 -timeout 25m -skip "$$halves" $$($(GO) list ./... | grep -v '/e2e$$') && \
	$(GO) test -count=1 -timeout 10m -run "$$halves" $$pkgs
	NIMBUS_TEST_REDIS_URL=$$NIMBUS_TEST_REDIS_CLUSTER_URL $(GO) test -race -p 1 -count=1 -timeout 10m ./backend/scheduler ./backend/redisconn

# The end-to-end tests against the binaries of bin/, with the Hugging Face client of
# e2e/hfclient (@huggingface/hub from npm, like the frontend's). -parallel 4: the tests that
# mostly wait run four at a time (e2e/harness_test.go).
go-test-e2e: e2e/hfclient/node_modules/.installed
	NIMBUS_E2E_BIN=$(CURDIR)/bin $(GO) test -race -count=1 -timeout 25m -parallel 4 ./e2e

# -fuzzminimizetime bounds how long one new input may be minimised, so the run stays short.
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzCompile$$' -fuzztime=$(FUZZ_COMPILE_RUNS) -fuzzminimizetime=5s ./backend/pipeline/spec

# bench prints the figures the issues set targets for (see each benchmark's doc comment): .cnb.yml
# compile time (no target), dispatch rate and enqueue-to-lease latency, log ingest, agent overhead,
# a pipeline's own Docker engine from start to `docker version` (services: docker), a docker.build
# cache hit against a cold build (about 40 s), a 200 MiB docker.volumes cache filled then reused
# (job speed-up, target ≥ 5×; about 15 s),
# the billing tick, a pull request opened to its pull_request pipeline queued and the
# mergeability check on a repo of 10,000 commits (targets p50 < 150 ms and < 100 ms), the code
# browser's root tree and a 5,000-line diff on that repo (targets < 100 ms and < 300 ms), the reproducibility record's cost to a three-job pipeline (target < 5 %) and
# its storage for a 50-job one (target < 20 KB), a git push to its pipelines queued in Redis (with the server's git process
# count), push to a job's first log line, cancel to its container gone and a job riding out a
# server outage (Docker executor, about 1 min), and push and pull of a 1 GiB blob with oras against Nimbus's registry and the reference
# registry (with Nimbus's peak RSS; about 25 s), and on the test cluster the Kubernetes executor: its
# pod layout against a pod per job on a 3-stage pipeline (about 35 s), lease to first log line
# against the Docker executor's, and 50 pipelines' throughput with the agent's CPU and RSS (about
# 2 min). The e2e ones run the binaries of bin/. Short
# runs: figures, not a tuning session; a package's benchmarks that run the same number of times
# share one process (one link of its test binary). Alone, with the services: make build && e2e/testenv.sh make bench
bench:
	$(GO) test -run='^$$' -bench='^BenchmarkCompile$$' -benchmem ./backend/pipeline/spec
	$(GO) test -run='^$$' -bench='^(BenchmarkDispatch|BenchmarkEnqueueToLease|BenchmarkReplicas|BenchmarkGPUHostsKeptForGPUWork)$$' -benchtime=1x -v ./backend/scheduler
	$(GO) test -run='^$$' -bench='^BenchmarkAppend$$' -benchtime=20x ./backend/logs
	$(GO) test -run='^$$' -bench='^BenchmarkTick$$' -benchtime=2x ./backend/billing
	$(GO) test -run='^$$' -bench='^BenchmarkAgentOverhead$$' -benchtime=5x ./agent/runner
	$(GO) test -run='^$$' -bench='^BenchmarkTunnelEcho$$' -benchtime=2000x ./backend/tunnel
	$(GO) test -run='^$$' -bench='^BenchmarkTunnelThroughput$$' -benchtime=3x ./backend/tunnel
	$(GO) test -run='^$$' -bench='^BenchmarkRelayFloor$$' -benchtime=1x -v ./backend/tunnel
	$(GO) test -run='^$$' -bench='^BenchmarkEngineStart$$' -benchtime=5x ./agent/dockerservice
	$(GO) test -run='^$$' -bench='^BenchmarkRecordOverhead$$' -benchtime=5x ./agent/executor
	$(GO) test -run='^$$' -bench='^BenchmarkRecord50Jobs$$' -benchtime=200x ./backend/record
	$(GO) test -run='^$$' -bench='^BenchmarkPullRequest$$' -benchtime=1x -v ./backend/pull
	$(GO) test -run='^$$' -bench='^BenchmarkCodeBrowse$$' -benchtime=1x -v ./backend/code
	$(GO) test -run='^$$' -bench='^BenchmarkPodLayout$$' -benchtime=3x -v ./agent/executor/kubernetes
	NIMBUS_E2E_BIN=$(CURDIR)/bin $(GO) test -run='^$$' -bench='^(BenchmarkPushToQueued|BenchmarkAgentLatency|BenchmarkDockerBuildCacheHit|BenchmarkVolumeCache|BenchmarkGPUHandOver|BenchmarkRegistry1GiB|BenchmarkWorkspace|BenchmarkKubernetesExecutor)$$' -benchtime=1x -v ./e2e

# gpu-check runs on a host with an NVIDIA GPU (not in CI: no GPU here): the agent's GPU detection
# against the real nvidia-smi, a container given one GPU by device id seeing exactly it (where
# Docker answers), and a real pipeline training on the GPU (e2e/realgpu_test.go). See
# scripts/gpu-check.sh.
gpu-check:
	scripts/gpu-check.sh

# What gpu-check runs, for a GPU host without Go: copy bin/ there after this.
gpu-check-binaries: binaries
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/nimbus-gpucheck ./agent/cmd/nimbus-gpucheck
	$(GO) test -tags gpu -c -o bin/e2e-gpu.test ./e2e

frontend-test: frontend/node_modules/.installed
	cd frontend && npm run --silent check:api && npm test --silent

clean:
	rm -rf bin frontend/node_modules e2e/hfclient/node_modules
	find frontend/dist -mindepth 1 ! -name .gitkeep -delete
