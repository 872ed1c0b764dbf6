#!/usr/bin/env bash
# Strata's performance suite: every case and its baselines in one
# run on this machine, printed as one table of measurements and one table of
# the targets as ratios (absolute numbers drift on shared machines; ratios
# measured side by side in the same run do not, much).
#
#   bash test/bench/run.sh                  full run (< 20 min on 2 cores; installs what it needs)
#   BENCH_SMOKE=1 bash test/bench/run.sh    the CI smoke run: every case end to end with tiny
#                                           sizes (~2-3 min); its ratios mean nothing
#
# Cases (each a script printing `result` lines, protocol in lib.sh):
#   baselines.sh  dd (buffered, fdatasync, dsync, cached read), iperf3 loopback,
#                 NATS JetStream file store (`nats bench`: default sync and sync_interval always)
#   produce.sh    (a) single-node produce, 1 KiB and 100 B, --durability fsync and replication,
#                 flat out and paced; (b) hot consume (raw Fetch client and kgo)
#   cluster.sh    (c) 3 brokers, acks=all RF=3 vs single-node acks=1; latency at half load
#   cold.sh       (d) cold catch-up from MinIO vs raw MinIO GETs; (e) hot-tail consumer latency
#                 with and without a cold backfill
#   node.sh       (f) ready time after kill -9 with GiBs local; (g) RSS with 1,000 partitions
#   move.sh       (h) moving a partition with its history in the bucket vs all local (Kafka's way)
#   diskless.sh   (i) diskless topics on 3 brokers over etcd and MinIO: produce latency against the
#                 linger, PUTs per GiB, inter-broker bytes per produced byte and throughput, against a
#                 classic RF=3 topic on the same brokers
#
# Environment: BENCH_CASES (space-separated subset, default all), BENCH_NO_INSTALL=1 (do not run
# the installers), BENCH_OUT=FILE (also write the tables there), BENCH_DIR (/tmp: the disk measured),
# BENCH_KEEP=1 (keep the work dir), and each case's own knobs (see its header).
set -euo pipefail
export LC_ALL=C
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cases=${BENCH_CASES:-baselines produce cluster cold node move diskless}
trap cleanup_work EXIT
ensure_work
results="$BENCH_WORK/results.txt"
: >"$results"

install_tools() {
	[[ "${BENCH_NO_INSTALL:-}" == 1 ]] && return 0
	say "installing benchmark tools (iperf3, nats-server, nats, MinIO) if missing"
	bash "$repo_root/scripts/install-bench-tools.sh" >&2
	bash "$repo_root/scripts/install-minio.sh" >&2
}

# run_case NAME: runs test/bench/NAME.sh, appending its result lines.
run_case() {
	local name=$1 start=$SECONDS out
	say "==> case $name"
	if ! out=$(bash "$repo_root/test/bench/$name.sh"); then
		printf '%s\n' "$out" | grep '^result ' >>"$results" || true
		say "case $name FAILED"
		failed+=("$name")
		return 0
	fi
	printf '%s\n' "$out" | grep '^result ' >>"$results" || true
	say "case $name took $((SECONDS - start)) s"
}

# value ROW KEY: KEY of ROW's result line ("" if absent).
value() {
	local line
	line=$(grep -m1 "^result row=$1 " "$results" || true)
	if [[ -n "$line" ]]; then field "$line" "$2"; fi
}

measurements() {
	printf '%-32s %11s %9s %9s %9s %9s  %s\n' case "records/s" "MB/s" "p50 ms" "p99 ms" "p99.9 ms" other
	local row line other k v
	while read -r line; do
		row=$(field "$line" row)
		other=""
		for k in gbit_per_sec seconds copied_mb history_mb rss_mib local_gib broker_cpu_s client_cpu_s \
			minio_cpu_s linger_ms broker_append_mean_ms puts_per_gib object_mib commit_mean_ms interbroker_bytes_per_byte \
			socket_bytes_per_byte; do
			v=$(field "$line" "$k")
			[[ -n "$v" ]] && other+="$k=$v "
		done
		printf '%-32s %11s %9s %9s %9s %9s  %s\n' "$row" "$(field "$line" records_per_sec)" \
			"$(field "$line" mb_per_sec)" "$(field "$line" p50_ms)" "$(field "$line" p99_ms)" \
			"$(field "$line" p999_ms)" "$other"
	done <"$results"
}

# The issue's targets: ROW METRIC BASE OP LIMIT. BASE "-" compares the value
# itself. OP ge: ratio (or value) >= LIMIT; le: <= LIMIT.
targets=(
	"produce-1k-replication mb_per_sec jetstream-default-1k ge 2"
	"produce-100b-replication mb_per_sec jetstream-default-100b ge 2"
	"produce-1k-fsync mb_per_sec jetstream-syncalways-1k ge 30"
	"produce-100b-fsync mb_per_sec jetstream-syncalways-100b ge 30"
	"produce-1k-replication mb_per_sec dd-buffered ge 0.5"
	"consume-1k-hot-raw mb_per_sec iperf3-loopback ge 0.25"
	"produce-100b-fsync-8p mb_per_sec - ge 146"
	"produce-100b-fsync-8p broker_mb_per_cpu_s - ge 260"
	"produce-1k-fsync-small-requests broker_cpu_per_s - le 0.35"
	"produce-1k-replication-small-requests broker_cpu_per_s - le 0.35"
	"rf3-acks-all mb_per_sec single-acks1 ge 0.33"
	"rf3-half-load-p50 p50_ms - le 2"
	"rf3-half-load-p99 p99_ms - le 5"
	"cold-catchup-raw mb_per_sec minio-raw-get ge 0.7"
	"hot-tail-with-backfill p99_ms hot-tail-alone le 1.2"
	"hot-tail-with-backfill p999_ms hot-tail-alone le 2"
	"cold-backfill-rss rss_over_cache_mib - le 128"
	"restart-after-kill9 seconds - le 5"
	"rss-1000-partitions rss_mib - le 512"
	"move-tiered seconds move-full le 0.25"
	"diskless-flat-out puts_per_gib - le 140"
	"diskless-flat-out interbroker_bytes_per_byte - le 0.01"
	"diskless-flat-out socket_bytes_per_byte - le 0.01"
	"diskless-flat-out mb_per_sec classic-rf3-flat-out ge 0.5"
	"diskless-linger-250 p99_over_linger - le 2.5"
)

target_table() {
	printf '%-38s %-26s %-26s %10s %8s  %s\n' target metric "over" ratio goal holds
	local t row metric base op limit a b r holds
	for t in "${targets[@]}"; do
		read -r row metric base op limit <<<"$t"
		a=$(value "$row" "$metric")
		if [[ $base == - ]]; then b=1; else b=$(value "$base" "$metric"); fi
		if [[ -z "$a" || -z "$b" ]]; then
			printf '%-38s %-26s %-26s %10s %8s  %s\n' "$row" "$metric" "$base" - "$op $limit" "not measured"
			continue
		fi
		r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.3g", a / b; else printf "-" }')
		holds=$(awk -v r="$r" -v op="$op" -v l="$limit" 'BEGIN {
			if (r == "-") print "-"; else if ((op == "ge" && r + 0 >= l) || (op == "le" && r + 0 <= l)) print "yes"; else print "NO" }')
		printf '%-38s %-26s %-26s %10s %8s  %s\n' "$row" "$metric" "$base" "$r" "$op $limit" "$holds"
	done
}

report() {
	printf '\nStrata performance suite, %s, %s, %s cores, %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" \
		"$(uname -m)" "$(nproc)" "$(smoke && echo 'SMOKE run (tiny sizes: ratios mean nothing)' || echo 'full run')"
	printf 'disk of %s: %s\n\n' "$BENCH_WORK" "$(df -P "$BENCH_WORK" | awk 'NR == 2 { print $1 }')"
	measurements
	printf '\nMB/s = 10^6 bytes per second (record values; raw consume: record batches; iperf3: payload).\n'
	printf 'Latency: produce-to-ack (hot-tail rows: produce to consume); paced rows count from intended send times
(coordinated omission corrected). JetStream latencies are per ack window of a batch, not per message.\n\n'
	target_table
	if ((${#failed[@]} > 0)); then printf '\nFAILED cases: %s\n' "${failed[*]}"; fi
}

main() {
	failed=()
	local start=$SECONDS
	install_tools
	ensure_strata
	local c
	for c in $cases; do run_case "$c"; done
	report | tee "${BENCH_OUT:-/dev/null}"
	say "suite took $((SECONDS - start)) s"
	((${#failed[@]} == 0))
}

main "$@"
