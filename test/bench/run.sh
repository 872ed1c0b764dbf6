#!/usr/bin/env bash
# Strata's first benchmark, with its baselines measured in the same run on the
# same disk (STYLE.md habit 13: report ratios, not absolute numbers).
#
#   strata: `strata serve` on a temp data dir (free ports), then
#     - produce 1 KiB and 100 B records (acks=all) with --durability fsync,
#     - a hot consume of the 1 KiB topic (page cache),
#     - the two produce runs again after restarting with --durability replication;
#   dd: the same byte volumes written buffered, with conv=fdatasync (one sync at
#     the end), and with oflag=dsync at the record size (one sync per write: the
#     floor a broker that fsyncs every record would hit); plus a cached read.
#
# Prints one table: MB/s (10^6 B/s) and strata/dd ratios. A full run takes
# about 1-3 minutes. Knobs (environment):
#   BENCH_RECORDS_1K (400000)  BENCH_RECORDS_100 (1000000)  BENCH_PARTITIONS (4)
#   BENCH_PACED_RATE (20000 records/s for 5 s: latency at a fixed offered load)
#   BENCH_DSYNC_WRITES (2000)  BENCH_DIR (/tmp: must be on the disk to measure)
#   BENCH_KEEP=1 keeps the work directory (logs, data) for inspection.
set -euo pipefail
export LC_ALL=C

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
records_1k=${BENCH_RECORDS_1K:-400000}
records_100=${BENCH_RECORDS_100:-1000000}
paced_rate=${BENCH_PACED_RATE:-20000}
partitions=${BENCH_PARTITIONS:-4}
dsync_writes=${BENCH_DSYNC_WRITES:-2000}
work=$(mktemp -d "${BENCH_DIR:-/tmp}/strata-bench.XXXXXX")
server_pid=""
brokers=""

cleanup() {
	stop_server
	if [[ "${BENCH_KEEP:-}" == 1 ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

say() { printf '%s\n' "$*" >&2; }

# start_server MODE: starts strata with --durability MODE and sets $brokers
# from its "strata: serving kafka on ADDR" line.
start_server() {
	local mode=$1 out="$work/serve-$1.out"
	"$work/strata" serve --durability "$mode" --data-dir "$work/data-$mode" \
		--listen 127.0.0.1:0 --http 127.0.0.1:0 --log-level warn >"$out" 2>"$work/serve-$mode.log" &
	server_pid=$!
	local deadline=$((SECONDS + 90))
	until brokers=$(sed -n 's/^strata: serving kafka on //p' "$out") && [[ -n "$brokers" ]]; do
		if ! kill -0 "$server_pid" 2>/dev/null || ((SECONDS > deadline)); then
			say "strata serve ($mode) did not start:"
			tail -n 30 "$work/serve-$mode.log" >&2
			exit 1
		fi
		sleep 0.2
	done
	say "strata serve --durability $mode: kafka on $brokers"
}

stop_server() {
	[[ -n "$server_pid" ]] || return 0
	kill -TERM "$server_pid" 2>/dev/null || true
	local deadline=$((SECONDS + 40))
	while kill -0 "$server_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
	kill -KILL "$server_pid" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
	server_pid=""
}

declare -A mbps recps p50 p99 p999

# field LINE KEY: the value of key=value in a summary line.
field() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }

# run_bench NAME ARGS...: runs strata bench, records its summary line.
run_bench() {
	local name=$1
	shift
	local out
	if ! out=$("$work/strata" bench "$@" --brokers "$brokers" 2>>"$work/bench.log"); then
		say "bench $name failed:"
		printf '%s\n' "$out" >&2
		tail -n 20 "$work/bench.log" >&2
		exit 1
	fi
	local summary
	summary=$(tail -n 1 <<<"$out")
	mbps[$name]=$(field "$summary" mb_per_sec)
	recps[$name]=$(field "$summary" records_per_sec)
	# Latency keys exist for produce only (a backlog consume measures age).
	p50[$name]=$(field "$summary" p50_ms)
	p99[$name]=$(field "$summary" p99_ms)
	p999[$name]=$(field "$summary" p999_ms)
	say "  $name: ${mbps[$name]} MB/s, ${recps[$name]} records/s, p99 ${p99[$name]} ms"
}

produce() { # NAME SIZE RECORDS
	run_bench "$1" produce --topic "$1" --record-size "$2" --records "$3" --partitions "$partitions" --acks all
}

# dd_once ARGS...: runs dd and prints MB/s (10^6 B/s) from its byte count and time.
dd_once() {
	local line
	line=$(dd "$@" 2>&1 | grep ' copied, ')
	awk '{ for (i = 1; i <= NF; i++) if ($i == "s,") secs = $(i-1); printf "%.2f\n", $1 / secs / 1e6 }' <<<"$line"
}

# dd_mbps ARGS...: the median of three dd runs (a shared machine is noisy;
# the first write to a fresh file also pays for page allocation). The output
# file, if any (of=...), is removed after each run.
dd_mbps() {
	local i arg file=""
	for arg in "$@"; do [[ $arg == of=/dev/null ]] || [[ $arg != of=* ]] || file=${arg#of=}; done
	for i in 1 2 3; do
		dd_once "$@"
		if [[ -n "$file" ]]; then rm -f "$file"; fi
	done | sort -n | sed -n 2p
}

# baselines NAME BYTES: dd write (buffered, fdatasync) and cached read of BYTES.
baselines() {
	local name=$1 count=$(($2 / 1048576)) file="$work/dd.bin"
	mbps[dd-buffered-$name]=$(dd_mbps if=/dev/zero of="$file" bs=1M count="$count")
	dd_once if=/dev/zero of="$file" bs=1M count="$count" >/dev/null
	mbps[dd-read-cached-$name]=$(dd_mbps if="$file" of=/dev/null bs=1M)
	rm -f "$file"
	mbps[dd-fdatasync-$name]=$(dd_mbps if=/dev/zero of="$file" bs=1M count="$count" conv=fdatasync)
	say "  dd $name: buffered ${mbps[dd-buffered-$name]}, fdatasync ${mbps[dd-fdatasync-$name]}, cached read ${mbps[dd-read-cached-$name]} MB/s"
}

dsync_baseline() { # SIZE
	local file="$work/dd-dsync.bin"
	mbps[dd-dsync-$1]=$(dd_mbps if=/dev/zero of="$file" bs="$1" count="$dsync_writes" oflag=dsync)
	say "  dd oflag=dsync bs=$1: ${mbps[dd-dsync-$1]} MB/s"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }

print_table() {
	printf '\n%-30s %10s %10s %9s %9s %9s   %-8s %-8s %-8s\n' case "records/s" "MB/s" "p50 ms" "p99 ms" "p99.9 ms" "/dd-buf" "/dd-fds" "/dd-dsync"
	local row size vol
	for row in produce-1k-fsync produce-100b-fsync produce-1k-fsync-paced \
		produce-1k-replication produce-100b-replication produce-1k-replication-paced; do
		if [[ $row == *1k* ]]; then size=1024 vol=1k; else size=100 vol=100b; fi
		local ratios=(- - -) # a paced run's throughput is the offered rate: no ratio
		if [[ $row != *paced ]]; then
			ratios=("$(ratio "${mbps[$row]}" "${mbps[dd-buffered-$vol]}")"
				"$(ratio "${mbps[$row]}" "${mbps[dd-fdatasync-$vol]}")"
				"$(ratio "${mbps[$row]}" "${mbps[dd-dsync-$size]}")")
		fi
		printf '%-32s %10s %10s %9s %9s %9s   %-8s %-8s %-8s\n' "$row" "${recps[$row]}" "${mbps[$row]}" \
			"${p50[$row]}" "${p99[$row]}" "${p999[$row]}" "${ratios[@]}"
	done
	printf '%-32s %10s %10s %9s %9s %9s   %-8s (vs dd cached read)\n' consume-1k-hot "${recps[consume-1k-hot]}" \
		"${mbps[consume-1k-hot]}" "-" "-" "-" "$(ratio "${mbps[consume-1k-hot]}" "${mbps[dd-read-cached-1k]}")"
	for vol in 1k 100b; do
		printf '%-32s %10s %10s\n' "dd buffered ($vol volume)" - "${mbps[dd-buffered-$vol]}"
		printf '%-32s %10s %10s\n' "dd conv=fdatasync ($vol volume)" - "${mbps[dd-fdatasync-$vol]}"
	done
	printf '%-32s %10s %10s\n' "dd cached read (1k volume)" - "${mbps[dd-read-cached-1k]}"
	printf '%-32s %10s %10s\n' "dd oflag=dsync bs=1024" - "${mbps[dd-dsync-1024]}"
	printf '%-32s %10s %10s\n' "dd oflag=dsync bs=100" - "${mbps[dd-dsync-100]}"
	printf '\nMB/s = 10^6 bytes of record values per second; latency = produce-to-ack (acks=all), %d partitions;\n' "$partitions"
	printf 'flat-out latency includes time queued in the client; -paced rows offer %d records/s and count from each\n' "$paced_rate"
	printf "record's intended send time. dd rows are the median of 3 runs.\n"
	printf 'Ratios are strata MB/s over dd MB/s of the same byte volume (dsync: same write size), same disk, same run.\n'
}

main() {
	say "building strata into $work"
	go build -o "$work/strata" ./cmd/strata
	say "baselines on $(df -P "$work" | awk 'NR == 2 { print $1 }')"
	baselines 1k $((records_1k * 1024))
	baselines 100b $((records_100 * 100))
	dsync_baseline 1024
	dsync_baseline 100
	for mode in fsync replication; do
		start_server "$mode"
		produce "produce-1k-$mode" 1024 "$records_1k"
		produce "produce-100b-$mode" 100 "$records_100"
		# Latency at a fixed offered load, corrected for coordinated omission
		# (flat-out runs measure mostly the client's queue).
		run_bench "produce-1k-$mode-paced" produce --topic "produce-1k-$mode-paced" --record-size 1024 \
			--records $((paced_rate * 5)) --rate "$paced_rate" --partitions "$partitions" --acks all
		if [[ $mode == fsync ]]; then
			run_bench consume-1k-hot consume --topic "produce-1k-$mode"
		fi
		stop_server
	done
	print_table
}

main "$@"
