#!/usr/bin/env bash
# Baselines of the benchmark suite: what this machine's disk, loopback network
# and the peer system (NATS JetStream) do, measured in the same run on the same
# disk as Strata (the disk of $BENCH_WORK), so run.sh can print ratios rather
# than absolute numbers (STYLE.md habit 13). Prints only `result ...` lines on
# stdout (protocol: lib.sh); progress and tool output go to stderr.
#
# Rows (MB/s = 10^6 bytes per second; dd rows are the median of 3 runs):
#   dd-buffered      dd if=/dev/zero of=F bs=1M count=VOLUME_MB              (page cache write)
#   dd-fdatasync     dd if=/dev/zero of=F bs=1M count=VOLUME_MB conv=fdatasync (one sync at the end)
#   dd-read-cached   dd if=F of=/dev/null bs=1M       (F just written: read from the page cache)
#   dd-dsync-1024    dd if=/dev/zero of=F bs=1024 count=DSYNC_WRITES oflag=dsync (a sync per write:
#   dd-dsync-100     dd if=/dev/zero of=F bs=100  count=DSYNC_WRITES oflag=dsync  the per-record-fsync floor)
#   iperf3-loopback  iperf3 -s -1 -p PORT -B 127.0.0.1; iperf3 -c 127.0.0.1 -p PORT -t SECS -J
#                    (one TCP stream; end.sum_received.bits_per_second): gbit_per_sec and mb_per_sec
#   jetstream-default-1k, jetstream-default-100b, jetstream-syncalways-1k, jetstream-syncalways-100b
#                    records_per_sec, mb_per_sec (message payload bytes), p50_ms, p99_ms.
#
# JetStream: .tools/bin/nats-server (v2.15.2, scripts/install-bench-tools.sh) on a free loopback port,
# one server per sync mode, with the config
#     listen: 127.0.0.1:PORT
#     http: 127.0.0.1:HTTP_PORT                      (checked: /varz jetstream.config.sync_always)
#     jetstream { store_dir: "DIR" }                 (default: fsync in the background every 2 min)
#     jetstream { store_dir: "DIR"; sync_interval: always }   (fsync after every stored message)
# and natscli v0.5.0 (.tools/bin/nats) as the client, one fresh stream per run (removed after it):
#     nats -s nats://127.0.0.1:PORT --no-context --timeout 60s bench js pub fast SUBJECT
#          --create --stream NAME --storage file --replicas 1 --maxbytes 16GB
#          --size 1024|100 --msgs N --clients 1 --batch 10000 --max-outstanding-acks 4 --no-progress
# i.e. an R1 file-storage stream fed by JetStream's fast batch publishing (server 2.14+): the client
# streams messages without waiting, the server stores them and acknowledges each flow window
# (--batch messages; the server may shrink it) once stored, and the client keeps at most
# --max-outstanding-acks windows unacknowledged; the run ends with a commit the server acknowledges,
# so every message counted was stored and acknowledged (JetStream's equivalent of acks=all on one
# node). This was the fastest configuration tried on this 2-core machine: `js pub async` (a
# PubAckFuture per message; 1-4 clients, batches of 500-2000 outstanding; 5000 stalls the client)
# and fast batch with 2-4 clients or smaller windows reached 50-90% of it. BENCH_JS_MODE=async
# switches to `js pub async` (then --max-outstanding-acks is not passed).
# records_per_sec is nats bench's aggregate rate (all messages over first start to last end);
# mb_per_sec = records_per_sec * size / 10^6 (payload bytes only, as for strata). nats bench's
# latencies are per batch, not per message (fast: the time between successive window acks;
# async: publish of a batch's first message to its last ack): the jetstream rows' p50_ms/p99_ms are
# those, marked latency=per-batch; do not compare them with per-record produce latencies.
#
# Knobs (environment; full / BENCH_SMOKE=1 values):
#   BENCH_VOLUME_MB (400 / 50)         dd volume: the bytes of strata's 1 KiB produce run
#   BENCH_DSYNC_WRITES (2000 / 200)    writes per oflag=dsync dd run
#   BENCH_IPERF_SECONDS (10 / 2)
#   BENCH_JS_MSGS_1K (400000 / 20000)  BENCH_JS_MSGS_100 (1000000 / 50000)      default sync
#   BENCH_JS_SYNC_MSGS_1K (20000 / 1000)  BENCH_JS_SYNC_MSGS_100 (20000 / 1000)  sync_interval: always
#     (about 1-2.5k messages/s here: each stored message waits for an fsync)
#   BENCH_JS_MODE (fast)  BENCH_JS_CLIENTS (1)  BENCH_JS_BATCH (10000)  BENCH_JS_ACKS (4)
#   BENCH_DIR, BENCH_KEEP: see lib.sh. Full run: about 2-3 minutes; smoke: about 20 s.
set -euo pipefail
export LC_ALL=C
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

volume_mb=${BENCH_VOLUME_MB:-$(pick 50 400)}
dsync_writes=${BENCH_DSYNC_WRITES:-$(pick 200 2000)}
iperf_secs=${BENCH_IPERF_SECONDS:-$(pick 2 10)}
js_msgs_1k=${BENCH_JS_MSGS_1K:-$(pick 20000 400000)}
js_msgs_100=${BENCH_JS_MSGS_100:-$(pick 50000 1000000)}
js_sync_msgs_1k=${BENCH_JS_SYNC_MSGS_1K:-$(pick 1000 20000)}
js_sync_msgs_100=${BENCH_JS_SYNC_MSGS_100:-$(pick 1000 20000)}
js_mode=${BENCH_JS_MODE:-fast}
js_clients=${BENCH_JS_CLIENTS:-1}
js_batch=${BENCH_JS_BATCH:-10000}
js_acks=${BENCH_JS_ACKS:-4}

nats_server="$tools_bin/nats-server"
nats_cli="$tools_bin/nats"
work=""
pids=()     # background processes to stop at exit (start_bg, run_fg)
nats_opts=()

cleanup() {
	local pid
	for pid in "${pids[@]}"; do stop_pid "$pid" 10; done
	if [[ -n "$work" && "${BENCH_KEEP:-}" != 1 ]]; then rm -rf "$work"; fi
	cleanup_work
}

# start_bg LOG CMD...: runs CMD in the background (stdout and stderr to LOG),
# remembered for cleanup; sets $bg_pid.
start_bg() {
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	bg_pid=$!
	pids+=("$bg_pid")
}

# stop_bg PID: stops a process started by start_bg and forgets it.
stop_bg() {
	stop_pid "$1" 10
	forget_pid "$1"
}

# run_fg CMD...: runs CMD to completion like a foreground command, but as a
# remembered background job that is waited for: bash defers a trap until a
# foreground command ends, while `wait` returns at once on a signal, so an
# interrupted run stops its tools (cleanup) instead of waiting for them. CMD
# must be a program, not a function: its pid is what cleanup signals.
run_fg() {
	local rc=0
	"$@" &
	local pid=$!
	pids+=("$pid")
	wait "$pid" || rc=$?
	forget_pid "$pid"
	return "$rc"
}

# forget_pid PID: drops PID from the cleanup list.
forget_pid() {
	local kept=() p
	for p in "${pids[@]}"; do [[ $p == "$1" ]] || kept+=("$p"); done
	pids=("${kept[@]}")
}

# fmt2 X: X with two decimals.
fmt2() { awk -v x="$1" 'BEGIN { printf "%.2f", x }'; }

# dd_once ARGS...: runs dd and prints MB/s (10^6 B/s) from its byte count and time.
dd_once() {
	local line
	run_fg dd "$@" 2>"$work/dd.log" || { cat "$work/dd.log" >&2; die "dd $* failed"; }
	line=$(grep ' copied, ' "$work/dd.log") || die "dd $*: no summary line"
	awk '{ for (i = 1; i <= NF; i++) if ($i == "s,") secs = $(i-1); printf "%.2f\n", $1 / secs / 1e6 }' <<<"$line"
}

# dd_mbps ARGS...: the median of three dd runs (a shared machine is noisy;
# the first write to a fresh file also pays for page allocation). The output
# file, if any (of=...), is removed after each run.
dd_mbps() {
	local _ arg file="" runs=()
	for arg in "$@"; do [[ $arg == of=/dev/null ]] || [[ $arg != of=* ]] || file=${arg#of=}; done
	for _ in 1 2 3; do
		runs+=("$(dd_once "$@")")
		if [[ -n "$file" ]]; then rm -f "$file"; fi
	done
	printf '%s\n' "${runs[@]}" | sort -n | sed -n 2p
}

dd_baselines() {
	local file="$work/dd.bin" v
	say "dd on $(df -P "$work" | awk 'NR == 2 { print $1 }'): $volume_mb MB, $dsync_writes dsync writes"
	v=$(dd_mbps if=/dev/zero of="$file" bs=1M count="$volume_mb")
	result dd-buffered "mb_per_sec=$v"
	v=$(dd_mbps if=/dev/zero of="$file" bs=1M count="$volume_mb" conv=fdatasync)
	result dd-fdatasync "mb_per_sec=$v"
	dd_once if=/dev/zero of="$file" bs=1M count="$volume_mb" >/dev/null
	v=$(dd_mbps if="$file" of=/dev/null bs=1M)
	rm -f "$file"
	result dd-read-cached "mb_per_sec=$v"
	local bs
	for bs in 1024 100; do
		v=$(dd_mbps if=/dev/zero of="$work/dd-dsync.bin" bs="$bs" count="$dsync_writes" oflag=dsync)
		result "dd-dsync-$bs" "mb_per_sec=$v"
	done
}

# json_get FILE EXPR: a scalar from a JSON file (EXPR is a jq path like
# .end.sum_received.bits_per_second); jq when installed, else python3. Fails
# when the value is missing or null.
json_get() {
	local v
	if command -v jq >/dev/null 2>&1; then
		v=$(jq -r "$2" "$1") || return 1
	else
		v=$(python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].strip(".").split("."): v = v.get(k) if isinstance(v, dict) else None
print(json.dumps(v))' "$1" "$2") || return 1
	fi
	[[ -n "$v" && "$v" != null ]] || return 1
	printf '%s\n' "$v"
}

# wait_listen PORT SECONDS PID: waits until something listens on 127.0.0.1:PORT
# (checked with ss: a probe connection would use up iperf3 -s -1's one test).
wait_listen() {
	local port=$1 deadline=$((SECONDS + $2)) pid=$3
	until ss -Hltn "sport = :$port" | grep -q .; do
		kill -0 "$pid" 2>/dev/null || return 1
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

iperf_baseline() {
	command -v iperf3 >/dev/null 2>&1 || die "iperf3 is not installed: run scripts/install-bench-tools.sh"
	local port bps
	port=$(free_port)
	start_bg "$work/iperf3-server.log" iperf3 -s -1 -p "$port" -B 127.0.0.1
	local server=$bg_pid
	wait_listen "$port" 10 "$server" || { cat "$work/iperf3-server.log" >&2; die "iperf3 server did not start"; }
	say "iperf3 loopback: $iperf_secs s on port $port"
	run_fg iperf3 -c 127.0.0.1 -p "$port" -t "$iperf_secs" -J >"$work/iperf3.json" ||
		{ cat "$work/iperf3.json" >&2; die "iperf3 client failed"; }
	stop_bg "$server"
	bps=$(json_get "$work/iperf3.json" .end.sum_received.bits_per_second) || die "no bits_per_second in iperf3 output"
	result iperf3-loopback "gbit_per_sec=$(fmt2 "$(awk -v b="$bps" 'BEGIN { print b / 1e9 }')")" \
		"mb_per_sec=$(fmt2 "$(awk -v b="$bps" 'BEGIN { print b / 8 / 1e6 }')")"
}

# start_nats NAME SYNC_LINE: starts nats-server with JetStream on a free
# loopback port (and its monitoring port); sets $nats_url and $nats_pid, and
# checks through /varz that sync_always is on exactly when SYNC_LINE asks.
start_nats() {
	local name=$1 sync_line=$2 dir="$work/nats-$1" port http_port want=false got
	mkdir -p "$dir/store"
	port=$(free_port)
	http_port=$(free_port)
	cat >"$dir/nats.conf" <<-EOF
		listen: 127.0.0.1:$port
		http: 127.0.0.1:$http_port
		jetstream {
		  store_dir: "$dir/store"
		  $sync_line
		}
	EOF
	start_bg "$dir/server.log" "$nats_server" -c "$dir/nats.conf"
	nats_pid=$bg_pid
	if ! wait_http_ok "http://127.0.0.1:$http_port/healthz?js-enabled-only=true" 30; then
		tail -n 30 "$dir/server.log" >&2
		die "nats-server ($name) did not start"
	fi
	curl -fsS "http://127.0.0.1:$http_port/varz" >"$dir/varz.json" || die "nats-server /varz failed"
	[[ -z "$sync_line" ]] || want=true
	got=$(json_get "$dir/varz.json" .jetstream.config.sync_always) || got=false
	[[ "$got" == "$want" ]] || die "nats-server ($name): sync_always is $got, want $want"
	nats_url="nats://127.0.0.1:$port"
	nats_opts=(-s "$nats_url" --no-context --timeout 60s)
	say "nats-server ($name, sync_always=$got) on $nats_url"
}

# nats_cmd ARGS...: the nats CLI against $nats_url, ignoring any user context.
nats_cmd() { "$nats_cli" "${nats_opts[@]}" "$@"; }

# us_to_ms X: "1,234.5" microseconds (nats bench's format) as milliseconds.
us_to_ms() { awk -v x="${1//,/}" 'BEGIN { printf "%.3f", x / 1000 }'; }

# js_bench ROW SIZE MSGS: one nats bench publish run into a fresh stream.
js_bench() {
	local row=$1 size=$2 msgs=$3 out="$work/$1.out" stream=${1//-/_}
	local args=(bench js pub "$js_mode" "bench.$stream" --create --stream "$stream" --storage file
		--replicas 1 --maxbytes 16GB --size "$size" --msgs "$msgs" --clients "$js_clients"
		--batch "$js_batch" --no-progress)
	[[ $js_mode != fast ]] || args+=(--max-outstanding-acks "$js_acks")
	say "  $row: nats ${args[*]}"
	# The binary itself (not nats_cmd): run_fg's cleanup signals this pid.
	if ! run_fg "$nats_cli" "${nats_opts[@]}" "${args[@]}" >"$out" 2>"$work/$row.log"; then
		cat "$out" "$work/$row.log" >&2
		die "nats bench $row failed"
	fi
	if grep -q 'WARNING' "$work/$row.log"; then
		cat "$work/$row.log" >&2
		die "nats bench $row reported a warning"
	fi
	nats_cmd stream rm -f "$stream" >/dev/null 2>>"$work/$row.log" || die "nats stream rm $stream failed"
	parse_js "$row" "$size" "$out"
}

# parse_js ROW SIZE OUT: the result row from nats bench's report: the
# aggregated line when there are several clients, else the one stats line.
parse_js() {
	local row=$1 size=$2 out=$3 rate_line lat_line rate p50 p99
	rate_line=$(grep 'aggregated stats:' "$out" || grep ' stats: ' "$out") || { cat "$out" >&2; die "$row: no stats line"; }
	lat_line=$(grep 'latencies per operation' "$out" || printf '%s' "$rate_line")
	rate=$(sed -n 's/.*stats: \([0-9,]*\) msgs\/sec.*/\1/p' <<<"$rate_line" | head -n 1)
	rate=${rate//,/}
	[[ -n "$rate" ]] || { cat "$out" >&2; die "$row: cannot parse msgs/sec"; }
	p50=$(sed -n 's/.*P50:\{0,1\} \([0-9,.]*\)us.*/\1/p' <<<"$lat_line" | head -n 1)
	p99=$(sed -n 's/.*P99:\{0,1\} \([0-9,.]*\)us.*/\1/p' <<<"$lat_line" | head -n 1)
	local keys=("records_per_sec=$rate" "mb_per_sec=$(awk -v r="$rate" -v s="$size" 'BEGIN { printf "%.2f", r * s / 1e6 }')")
	[[ -z "$p50" ]] || keys+=("p50_ms=$(us_to_ms "$p50")")
	[[ -z "$p99" ]] || keys+=("p99_ms=$(us_to_ms "$p99")")
	[[ -z "$p50$p99" ]] || keys+=(latency=per-batch)
	result "$row" "${keys[@]}"
}

jetstream_baselines() {
	[[ -x "$nats_server" && -x "$nats_cli" ]] || die "nats-server/nats missing in $tools_bin: run scripts/install-bench-tools.sh"
	start_nats default ""
	js_bench jetstream-default-1k 1024 "$js_msgs_1k"
	js_bench jetstream-default-100b 100 "$js_msgs_100"
	stop_bg "$nats_pid"
	rm -rf "$work/nats-default"
	start_nats syncalways "sync_interval: always"
	js_bench jetstream-syncalways-1k 1024 "$js_sync_msgs_1k"
	js_bench jetstream-syncalways-100b 100 "$js_sync_msgs_100"
	stop_bg "$nats_pid"
	rm -rf "$work/nats-syncalways"
}

main() {
	ensure_work
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	work=$(mktemp -d "$BENCH_WORK/baselines.XXXXXX")
	local start=$SECONDS
	dd_baselines
	iperf_baseline
	jetstream_baselines
	say "baselines done in $((SECONDS - start)) s"
}

main "$@"
