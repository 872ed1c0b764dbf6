#!/usr/bin/env bash
# Performance-suite cases (a) and (b) on one broker (embedded etcd, no object store):
#
#   produce-{1k,100b}-{fsync,replication}   flat-out `strata bench produce`, acks=all,
#                                           BENCH_PARTITIONS partitions, BENCH_CONCURRENCY clients
#   produce-1k-{fsync,replication}-paced    the same at BENCH_PACED_RATE records/s: latency
#                                           from each record's intended send time
#                                           (coordinated-omission corrected)
#   consume-1k-hot-raw                      the 1 KiB fsync topic read back from the page cache by
#                                           raw Fetch requests (batches CRC-checked, not decoded;
#                                           MB/s of batch bytes): what the broker serves
#   consume-1k-hot-kgo                      the same with a franz-go consumer (decodes every record;
#                                           on 2 cores the client's CPU is most of the cost)
#
#   produce-1k-{fsync,replication}-small-requests  BENCH_PACED_RATE records/s on one partition from
#                                           one client without linger: about one record per request
#   produce-100b-fsync-8p                   produce-100b-fsync over 8 partitions, 3x the records (a
#                                           run of about 2 s: one under a second swung by a fifth):
#                                           small records on many partitions (targets: >= 146 MB/s
#                                           and >= 260 MB per broker CPU-second, broker_mb_per_cpu_s)
#
# Each row also carries broker_cpu_s and client_cpu_s: the CPU seconds the
# broker and the load generator used (on 2 cores they compete for the same CPU),
# broker_cpu_per_s, the broker's CPU seconds per second of the run (the
# small-requests target: at most 0.35 at 20,000 records/s), and
# broker_mb_per_cpu_s, the MB (10^6 B) of records produced per broker CPU-second.
# Each durability mode gets a fresh broker and data dir. Prints `result` lines
# (test/bench/lib.sh) on stdout. Knobs: BENCH_RECORDS_1K (400000; smoke 20000),
# BENCH_RECORDS_100 (1000000; smoke 50000), BENCH_PACED_RATE (20000; smoke 5000)
# for BENCH_PACED_SECONDS (5; smoke 1), BENCH_PARTITIONS (4), BENCH_CONCURRENCY (2).
set -euo pipefail
export LC_ALL=C
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

records_1k=${BENCH_RECORDS_1K:-$(pick 20000 400000)}
records_100=${BENCH_RECORDS_100:-$(pick 50000 1000000)}
paced_rate=${BENCH_PACED_RATE:-$(pick 5000 20000)}
paced_seconds=${BENCH_PACED_SECONDS:-$(pick 1 5)}
partitions=${BENCH_PARTITIONS:-4}
concurrency=${BENCH_CONCURRENCY:-2}
server_pid=""
brokers=""

cleanup() {
	stop_pid "$server_pid"
	cleanup_work
}
trap cleanup EXIT
ensure_strata
work="$BENCH_WORK/produce"
mkdir -p "$work"

start_server() { # MODE
	local mode=$1
	"$STRATA" serve --durability "$mode" --data-dir "$work/data-$mode" --listen 127.0.0.1:0 \
		--http "127.0.0.1:$(free_port)" --log-level warn >"$work/serve-$mode.out" 2>"$work/serve-$mode.log" &
	server_pid=$!
	if ! brokers=$(wait_kafka_line "$work/serve-$mode.out" 90 "$server_pid"); then
		tail -n 30 "$work/serve-$mode.log" >&2
		die "strata serve --durability $mode did not start"
	fi
	say "strata serve --durability $mode: kafka on $brokers"
}

# create_topic TOPIC PARTITIONS: creates the topic before a produce row, so
# that the broker CPU the row reports is the produce's, not the topic's
# creation (etcd writes, log directories: a tenth of a short 8-partition run).
create_topic() {
	"$STRATA" topic create --brokers "$brokers" --partitions "$2" "$1" >>"$work/bench.log" 2>&1 ||
		die "topic create $1 failed"
}

# bench ROW ARGS...: runs `strata bench ARGS`, prints its summary as a result line.
bench() {
	local row=$1 out summary cpu0 cpu1
	shift
	cpu0=$(proc_cpu_s "$server_pid")
	if ! out=$("$STRATA" bench "$@" --brokers "$brokers" 2>>"$work/bench.log"); then
		printf '%s\n' "$out" >&2
		tail -n 20 "$work/bench.log" >&2
		die "bench $row failed"
	fi
	cpu1=$(proc_cpu_s "$server_pid")
	summary="$(tail -n 1 <<<"$out")"
	summary+=" broker_cpu_s=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')"
	summary+=" broker_cpu_per_s=$(awk -v a="$cpu0" -v b="$cpu1" -v s="$(field "$summary" seconds)" \
		'BEGIN { printf "%.3f", (s > 0 ? (b - a) / s : 0) }')"
	summary+=" broker_mb_per_cpu_s=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$(field "$summary" bytes)" \
		'BEGIN { printf "%.1f", (b > a && n > 0 ? n / 1e6 / (b - a) : 0) }')"
	say "  $row: $summary"
	result "$row" "${summary#* }"
}

produce() { # ROW SIZE RECORDS [EXTRA...]
	local row=$1 size=$2 records=$3
	shift 3
	create_topic "$row" "$partitions"
	bench "$row" produce --topic "$row" --record-size "$size" --records "$records" \
		--partitions "$partitions" --concurrency "$concurrency" --acks all "$@"
}

for mode in fsync replication; do
	start_server "$mode"
	produce "produce-1k-$mode" 1024 "$records_1k"
	produce "produce-100b-$mode" 100 "$records_100"
	if [[ $mode == fsync ]]; then
		create_topic produce-100b-fsync-8p 8
		bench produce-100b-fsync-8p produce --topic produce-100b-fsync-8p --record-size 100 --records $((3 * records_100)) \
			--partitions 8 --concurrency "$concurrency" --acks all
	fi
	produce "produce-1k-$mode-paced" 1024 $((paced_rate * paced_seconds)) --rate "$paced_rate"
	# Small requests: one partition, one client, no linger, paced: about one
	# record per Produce request, so the broker's per-request cost shows.
	create_topic "produce-1k-$mode-small-requests" 1
	bench "produce-1k-$mode-small-requests" produce --topic "produce-1k-$mode-small-requests" --record-size 1024 \
		--records $((paced_rate * paced_seconds)) --partitions 1 --concurrency 1 --acks all --rate "$paced_rate"
	if [[ $mode == fsync ]]; then
		bench consume-1k-hot-raw consume --topic produce-1k-fsync --client raw
		bench consume-1k-hot-kgo consume --topic produce-1k-fsync --client kgo
	fi
	stop_pid "$server_pid"
	server_pid=""
done
