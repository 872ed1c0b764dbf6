#!/usr/bin/env bash
# Shared shell functions of the benchmark suite (test/bench/run.sh and the case
# scripts it runs). Sourced, never executed. The protocol between a case script
# and run.sh: a case prints only `result row=NAME key=value ...` lines on
# stdout (result below) and everything else on stderr; run.sh collects them
# into one table. Keys: records_per_sec, mb_per_sec (10^6 bytes of record
# values per second), p50_ms, p99_ms, p999_ms, seconds, rss_mib, gbit_per_sec,
# base=ROW (the row this one is compared with), metric=KEY (the key compared;
# mb_per_sec by default), target=OP:X (e.g. ge:2 — ratio >= 2; le:1.2 —
# ratio <= 1.2; for absolute targets base is empty and the value itself is
# compared: le:5 on p99_ms means p99 <= 5 ms).
#
# Environment shared by the scripts:
#   STRATA      the strata binary (ensure_strata builds it when unset)
#   BENCH_WORK  a temp directory for the whole run (ensure_work makes one when unset)
#   BENCH_SMOKE=1  small sizes: the CI smoke run (every case end to end, ~1 min)

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tools_bin="$repo_root/.tools/bin"

say() { printf '%s\n' "$*" >&2; }
die() { say "bench: $*"; exit 1; }

# result ROW KEY=VALUE...: one result line on stdout.
result() {
	local row=$1
	shift
	printf 'result row=%s %s\n' "$row" "$*"
}

smoke() { [[ "${BENCH_SMOKE:-}" == 1 ]]; }

# pick SMOKE FULL: prints SMOKE under BENCH_SMOKE=1, else FULL.
pick() { if smoke; then printf '%s' "$1"; else printf '%s' "$2"; fi; }

# ensure_work: sets BENCH_WORK to a new temp dir when unset (removed at exit
# by the caller's trap through cleanup_work).
ensure_work() {
	if [[ -z "${BENCH_WORK:-}" ]]; then
		BENCH_WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/strata-bench.XXXXXX")
		export BENCH_WORK
		own_work=1
	fi
}

# cleanup_work removes BENCH_WORK if ensure_work made it (BENCH_KEEP=1 keeps it).
cleanup_work() {
	if [[ "${own_work:-}" == 1 ]]; then
		if [[ "${BENCH_KEEP:-}" == 1 ]]; then say "kept $BENCH_WORK"; else rm -rf "$BENCH_WORK"; fi
	fi
}

# ensure_strata: sets STRATA to a freshly built binary when unset.
ensure_strata() {
	ensure_work
	if [[ -z "${STRATA:-}" ]]; then
		say "building strata into $BENCH_WORK"
		(cd "$repo_root" && go build -o "$BENCH_WORK/strata" ./cmd/strata)
		STRATA="$BENCH_WORK/strata"
		export STRATA
	fi
}

# free_port: an unused loopback TCP port (bound and released by the kernel's choice).
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_http_ok URL SECONDS: waits until URL answers 2xx.
wait_http_ok() {
	local url=$1 deadline=$((SECONDS + $2))
	until curl -fsS -o /dev/null "$url" 2>/dev/null; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# start_etcd DIR: a one-member etcd with its data (DIR/etcd) and log
# (DIR/etcd.log) in DIR; sets etcd_pid and etcd_endpoint. Fails, with the
# log's tail on stderr, when it is not healthy within $start_timeout seconds.
start_etcd() {
	local dir=$1 client peer
	client=$(free_port)
	peer=$(free_port)
	/usr/bin/etcd --name bench --data-dir "$dir/etcd" --log-level warn \
		--listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
		--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "bench=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
	etcd_pid=$!
	if ! wait_http_ok "http://127.0.0.1:$client/health" "$start_timeout"; then
		tail -n 30 "$dir/etcd.log" >&2
		return 1
	fi
	etcd_endpoint=127.0.0.1:$client
}

# produce_fields SUMMARY: the result keys of a bench produce summary line.
produce_fields() {
	local k out=""
	for k in records_per_sec mb_per_sec p50_ms p99_ms p999_ms; do out+=" $k=$(field "$1" "$k")"; done
	printf '%s' "${out# }"
}

# wait_kafka_line FILE SECONDS [PID]: prints ADDR from the first
# "strata: serving kafka on ADDR" line of FILE (strata serve's stdout).
wait_kafka_line() {
	local file=$1 deadline=$((SECONDS + $2)) pid=${3:-} addr
	until addr=$(sed -n 's/^strata: serving kafka on //p' "$file" 2>/dev/null | head -n 1) && [[ -n "$addr" ]]; do
		if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
	printf '%s\n' "$addr"
}

# stop_pid PID [SECONDS]: SIGTERM, wait, then SIGKILL.
stop_pid() {
	local pid=$1 deadline=$((SECONDS + ${2:-30}))
	[[ -n "$pid" ]] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# field LINE KEY: the value of KEY=value in a key=value line.
field() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }

# proc_cpu_s PID: CPU seconds (user + system) PID used so far, from /proc.
proc_cpu_s() {
	local ticks
	ticks=$(getconf CLK_TCK)
	awk -v t="$ticks" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / t }' "/proc/$1/stat" 2>/dev/null || echo 0
}
