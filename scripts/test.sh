#!/usr/bin/env bash
# The one test command of Strata (README, .ci/run): on a fresh Debian machine
# it installs what the tests need (etcd, kcat, MinIO and SeaweedFS through
# scripts/install-minio.sh and install-seaweedfs.sh, node with the pinned
# kafkajs), then runs
#   1. go vet ./...
#   2. every fuzz target for a bounded time (scripts/fuzz.sh)
#   3. go test for every package except the end-to-end suite
#   4. the end-to-end suite (test/e2e) with embedded etcd
#   5. the end-to-end suite again with STRATA_TEST_ETCD=external (the e2e
#      harness starts /usr/bin/etcd itself)
#   6. the multi-process cluster tests (test/cluster)
#   7. the benchmark suite's smoke run (BENCH_SMOKE=1 test/bench/run.sh:
#      every case end to end at tiny sizes; asserts only that it runs)
# Every step runs even if an earlier one failed; the exit status is non-zero
# if any failed. With CI=true a missing dependency is an error: the install
# must succeed here, and the tests' helpers fail (not skip) without etcd/kcat.
#
# Environment:
#   STRATA_TEST_RACE=1   add -race to the unit tests (slower)
#   STRATA_TEST_SKIP_E2E=1  run only steps 1-3 (quick local loop; never in CI)
#   FUZZTIME=5s          fuzzing time per fuzz target (scripts/fuzz.sh)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

ci=false
if [[ "${CI:-}" == "true" ]]; then ci=true; fi

log() { printf '\n==> %s\n' "$*"; }
die() { printf 'test.sh: %s\n' "$*" >&2; exit 1; }

# ensure_go puts the Go toolchain on PATH (Debian images keep it in /usr/local/go).
ensure_go() {
	if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
		export PATH="/usr/local/go/bin:$PATH"
	fi
	command -v go >/dev/null 2>&1 || die "go is not installed (https://go.dev/dl/)"
}

# ensure_test_deps installs etcd (package etcd-server), kcat, and gcc with
# librdkafka1 (the e2e test of a librdkafka transactional producer builds a
# small C program) from Debian when they are missing. Failures are fatal under CI=true, warnings otherwise
# (the tests that need them then skip locally).
ensure_test_deps() {
	local missing=()
	command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
	command -v kcat >/dev/null 2>&1 || missing+=(kcat)
	command -v gcc >/dev/null 2>&1 || missing+=(gcc)
	have_librdkafka || missing+=(librdkafka1)
	if ((${#missing[@]} == 0)); then
		return 0
	fi
	log "installing missing test dependencies: ${missing[*]}"
	if ! install_packages "${missing[@]}"; then
		if $ci; then die "could not install ${missing[*]} (required under CI=true)"; fi
		echo "test.sh: warning: could not install ${missing[*]}; tests needing them will skip" >&2
		return 0
	fi
	command -v etcd >/dev/null 2>&1 && command -v kcat >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 &&
		have_librdkafka && return 0
	if $ci; then die "etcd, kcat, gcc or librdkafka1 still missing after installing ${missing[*]}"; fi
}

have_librdkafka() {
	ldconfig -p 2>/dev/null | grep -q 'librdkafka\.so\.1'
}

# ensure_minio builds the pinned MinIO server into .tools/bin (idempotent;
# minutes on first run) for the tier tests and the tiering e2e tests, which
# fail without it under CI=true.
ensure_minio() {
	log "installing MinIO for the tier tests: scripts/install-minio.sh"
	if ! scripts/install-minio.sh; then
		if $ci; then die "could not install MinIO (required under CI=true)"; fi
		echo "test.sh: warning: MinIO not installed; tests needing it will skip" >&2
	fi
}

# ensure_seaweedfs builds the pinned SeaweedFS into .tools/bin (idempotent):
# the second real S3 server of the object-store contract tests and of one
# tiering e2e test, which fail without it under CI=true.
ensure_seaweedfs() {
	log "installing SeaweedFS for the object-store tests: scripts/install-seaweedfs.sh"
	if ! scripts/install-seaweedfs.sh >/dev/null; then
		if $ci; then die "could not install SeaweedFS (required under CI=true)"; fi
		echo "test.sh: warning: SeaweedFS not installed; tests needing it will skip" >&2
	fi
}

# ensure_kafkajs installs node and npm from Debian when missing, then the
# pinned kafkajs of test/e2e/kafkajs (package-lock.json) from the npm
# registry, for the kafkajs e2e test (which fails without it under CI=true).
ensure_kafkajs() {
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		log "installing node and npm for the kafkajs e2e test"
		install_packages nodejs npm || { $ci && die "could not install nodejs and npm (required under CI=true)"; }
	fi
	[[ -f test/e2e/kafkajs/node_modules/kafkajs/package.json ]] && return 0
	log "installing kafkajs for the e2e test: npm ci --prefix test/e2e/kafkajs"
	if ! npm ci --prefix test/e2e/kafkajs --no-audit --no-fund >/dev/null; then
		if $ci; then die "could not install kafkajs (required under CI=true)"; fi
		echo "test.sh: warning: kafkajs not installed; its e2e test will skip" >&2
	fi
}

# ensure_bench_tools installs the benchmark suite's baselines (iperf3 from
# Debian; pinned nats-server and natscli into .tools/bin) for step 7.
ensure_bench_tools() {
	log "installing benchmark tools for the suite's smoke run: scripts/install-bench-tools.sh"
	if ! scripts/install-bench-tools.sh; then
		if $ci; then die "could not install the benchmark tools (required under CI=true)"; fi
		echo "test.sh: warning: benchmark tools not installed; the benchmark smoke run will fail" >&2
	fi
}

install_packages() {
	if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		echo "test.sh: need root and apt-get to install $*" >&2
		return 1
	fi
	# The package lists may be missing on a fresh image: update once, then install.
	if ! apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; then
		apt-get update -q || return 1
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" || return 1
	fi
}

failed=()
# step NAME CMD...: runs a step, remembers a failure, never stops the script.
# Nothing is printed after a passing step, so that go test's own closing
# lines end the output of a green run.
step() {
	local name=$1
	shift
	log "$name ($(date +%T)): $*"
	if ! "$@"; then
		echo "test.sh: step failed: $name"
		failed+=("$name")
	fi
}

# step_pair NAME1 CMD1 NAME2 CMD2: runs two steps at once (each command a
# string, split on spaces), then prints each one's output in turn and
# remembers the failures, as step does.
step_pair() {
	local name1=$1 cmd1=$2 name2=$3 cmd2=$4 out1 out2 rc1=0 rc2=0
	out1=$(mktemp) out2=$(mktemp)
	log "$name1 and $name2, side by side ($(date +%T)): $cmd1 | $cmd2"
	# shellcheck disable=SC2086 # the commands are word-split on purpose
	$cmd1 >"$out1" 2>&1 &
	local pid1=$!
	# shellcheck disable=SC2086
	$cmd2 >"$out2" 2>&1 &
	local pid2=$!
	wait "$pid1" || rc1=$?
	wait "$pid2" || rc2=$?
	log "$name1 (output)"
	cat "$out1"
	log "$name2 (output, ended $(date +%T))"
	cat "$out2"
	rm -f "$out1" "$out2"
	if ((rc1 != 0)); then
		echo "test.sh: step failed: $name1"
		failed+=("$name1")
	fi
	if ((rc2 != 0)); then
		echo "test.sh: step failed: $name2"
		failed+=("$name2")
	fi
}

e2e_present() {
	compgen -G "test/e2e/*_test.go" >/dev/null
}

main() {
	ensure_go
	ensure_test_deps
	ensure_minio
	ensure_seaweedfs
	ensure_kafkajs
	ensure_bench_tools
	go version

	local race=()
	if [[ "${STRATA_TEST_RACE:-}" == 1 ]]; then race=(-race); fi
	local unit_pkgs
	unit_pkgs=$(go list ./... | grep -v -e '/test/e2e$' -e '/test/cluster$') || die "go list ./... failed"

	step "go vet" go vet ./...
	# Every fuzz target for a bounded time (FUZZTIME, default 5s each).
	step "fuzz (bounded)" scripts/fuzz.sh
	# shellcheck disable=SC2086 # word splitting of the package list is intended
	step "unit and integration tests" go test -count=1 -timeout 600s "${race[@]}" $unit_pkgs

	if [[ "${STRATA_TEST_SKIP_E2E:-}" == 1 ]] && ! $ci; then
		echo "test.sh: STRATA_TEST_SKIP_E2E=1: end-to-end suite not run"
	elif ! e2e_present; then
		echo "test.sh: warning: no end-to-end tests in test/e2e" >&2
		failed+=("e2e suite missing")
	else
		# Build the binary once for both e2e runs (the harness honours STRATA_BIN).
		bindir=$(mktemp -d) # global: the EXIT trap runs after main returned
		trap 'rm -rf "$bindir"' EXIT
		step "build strata" go build -o "$bindir/strata" ./cmd/strata
		export STRATA_BIN="$bindir/strata"
		step "e2e (embedded etcd)" go test -count=1 -timeout 720s -v ./test/e2e/
		# The e2e suite again against an external etcd process, beside the
		# clusters of broker processes behind fault-injecting proxies: the
		# two together take the time of the longer one, and each runs
		# under the other's load (both must hold under load anyway).
		# Their outputs are kept apart and printed one after the other.
		step_pair "e2e (external etcd)" "env STRATA_TEST_ETCD=external go test -count=1 -timeout 900s -v ./test/e2e/" \
			"cluster (brokers as processes, faults)" "go test -count=1 -timeout 1200s -v ./test/cluster/"
		# The performance suite end to end at tiny sizes, so it cannot rot;
		# its numbers mean nothing (test/bench/run.sh).
		step "benchmark suite (smoke)" env BENCH_SMOKE=1 BENCH_NO_INSTALL=1 bash test/bench/run.sh
	fi

	if ((${#failed[@]} > 0)); then
		printf '\ntest.sh: FAILED steps: %s\n' "${failed[*]}"
		return 1
	fi
}

main "$@"
