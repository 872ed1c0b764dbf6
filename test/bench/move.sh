#!/usr/bin/env bash
# Performance-suite case (h): moving a partition. Strata keeps a partition's
# history in the bucket, so a moved replica copies only the leader's local
# tail; a partition whose history is all on local disk (Kafka's situation, a
# topic with remote.storage.enable=false here) copies all of it. Both moves
# run in the same run, on the same three-plus-one brokers, through the same
# reassignment code: the ratio is what tiering saves.
#
#   1. etcd and four brokers (--etcd, node ids 1..4, a shared file:// bucket,
#      fast upload and retention loops); topics of one partition, RF 3: one
#      broker holds no replica of each.
#   2. move-tiered: BENCH_MOVE_MB of history produced to a tiered topic with
#      local.retention.bytes BENCH_MOVE_LOCAL_MB; once the local logs are down
#      to that, `strata partition reassign` moves the last replica (a
#      follower) to the broker without one and waits for it to complete.
#   3. move-full: the same history on a topic with remote.storage.enable=false
#      (everything local), the same move.
#
# Rows: move-tiered and move-full with seconds (submit to completion,
# measured around the waiting command), copied_mb (the bytes the leaders
# served to the added replica, strata_reassignment_bytes_out_total) and
# history_mb. Target: move-tiered seconds over move-full le:0.25.
# Knobs: BENCH_MOVE_MB (1024; smoke 24), BENCH_MOVE_LOCAL_MB (64; smoke 4).
set -euo pipefail
export LC_ALL=C
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

history_mb=${BENCH_MOVE_MB:-$(pick 24 1024)}
local_mb=${BENCH_MOVE_LOCAL_MB:-$(pick 4 64)}
start_timeout=60

pids=()
etcd_pid=
https=() # the brokers' --http addresses, by node id - 1

cleanup() {
	local pid
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do stop_pid "$pid" 5; done
	stop_pid "${etcd_pid:-}" 10
	if [[ -n "${dir:-}" && "${BENCH_KEEP:-}" != 1 ]]; then rm -rf "$dir"; fi
	cleanup_work
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_strata
dir=$BENCH_WORK/move
mkdir -p "$dir"


start_brokers() {
	local i addr addrs=()
	for i in 1 2 3 4; do
		https+=("127.0.0.1:$(free_port)")
		"$STRATA" serve --durability replication --log-level warn --controlled-shutdown-timeout 2s \
			--data-dir "$dir/broker-$i" --etcd "$etcd_endpoint" --cluster bench --node-id "$i" \
			--listen "127.0.0.1:$(free_port)" --http "${https[-1]}" --object-store "file://$dir/objects" \
			--tier-upload-interval 250ms --log-retention-check-interval 250ms \
			>"$dir/broker-$i.out" 2>"$dir/broker-$i.log" &
		pids+=($!)
	done
	for i in 1 2 3 4; do
		addr=$(wait_kafka_line "$dir/broker-$i.out" "$start_timeout" "${pids[i - 1]}") ||
			{ tail -n 30 "$dir/broker-$i.log" >&2; die "move: broker $i did not start"; }
		addrs+=("$addr")
	done
	brokers=$(IFS=,; printf '%s' "${addrs[*]}")
}

# metric_sum NAME: NAME summed over every broker's /metrics.
metric_sum() {
	local http total=0 v
	for http in "${https[@]}"; do
		v=$(curl -fsS "http://$http/metrics" | awk -v n="$1" '$1 == n { s += $2 } END { printf "%.0f", s }')
		total=$((total + ${v:-0}))
	done
	printf '%s\n' "$total"
}

# local_bytes TOPIC: the largest local log of TOPIC's partition 0 on any broker.
local_bytes() {
	local http max=0 v
	for http in "${https[@]}"; do
		v=$(curl -fsS "http://$http/metrics" |
			awk -v t="topic=\"$1\"" '$1 ~ /^strata_log_size_bytes\{/ && index($1, t) { printf "%.0f", $2 }')
		((${v:-0} > max)) && max=$v
	done
	printf '%s\n' "$max"
}

# move ROW TOPIC CONFIGS...: creates TOPIC on brokers 1-3 with CONFIGS,
# fills it, waits until its local logs are at most the expected size, then
# times moving broker 3's replica to broker 4.
move() {
	local row=$1 topic=$2 want_local=$3 args=() c
	shift 3
	for c in "$@"; do args+=(--config "$c"); done
	"$STRATA" topic create --brokers "$brokers" --partitions 1 --replication-factor 3 "${args[@]}" "$topic" >&2 ||
		die "move: topic create $topic failed"
	local records=$((history_mb * 1024))
	"$STRATA" bench produce --brokers "$brokers" --topic "$topic" --records "$records" --record-size 1024 \
		--acks all --concurrency 2 >>"$dir/bench.log" 2>&1 || die "move: produce to $topic failed"
	local deadline=$((SECONDS + 300)) size
	until size=$(local_bytes "$topic") && ((size <= want_local)); do
		((SECONDS < deadline)) || die "move: $topic keeps $size bytes locally, want <= $want_local"
		sleep 0.5
	done
	local replicas target before after start seconds spare id
	replicas=$("$STRATA" topic describe --brokers "$brokers" --json "$topic" |
		python3 -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin)[0]["partitions"][0]["replicas"])))')
	for id in 1 2 3 4; do [[ ",$replicas," == *",$id,"* ]] || spare=$id; done
	target=$(sed "s/[0-9]*\$/$spare/" <<<"$replicas") # the last replica (a follower) moves to the spare broker
	before=$(metric_sum strata_reassignment_bytes_out_total)
	start=$(date +%s.%N)
	"$STRATA" partition reassign --brokers "$brokers" --topic "$topic" --partition 0 --replicas "$target" \
		--timeout 20m >>"$dir/reassign.log" 2>&1 || { tail -n 20 "$dir/reassign.log" >&2; die "move: reassign $topic failed"; }
	seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }')
	after=$(metric_sum strata_reassignment_bytes_out_total)
	local copied_mb
	copied_mb=$(awk -v b="$before" -v a="$after" 'BEGIN { printf "%.1f", (a - b) / 1e6 }')
	say "move: $row: $replicas -> $target in ${seconds}s, copied ${copied_mb} MB of ${history_mb} MiB"
	result "$row" "seconds=$seconds copied_mb=$copied_mb history_mb=$history_mb"
}

start_etcd "$dir" || die "move: etcd did not start"
start_brokers
segment=$((local_mb * 1024 * 1024 / 4))
move move-tiered moving-tiered $((local_mb * 1024 * 1024 + 2 * segment)) \
	"local.retention.bytes=$((local_mb * 1024 * 1024))" "segment.bytes=$((segment > 1048576 ? segment : 1048576))"
move move-full moving-full $((history_mb * 1024 * 1024 * 2)) remote.storage.enable=false
