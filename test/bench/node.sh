#!/usr/bin/env bash
# Performance-suite cases (f) and (g), each on one `strata serve` (embedded etcd,
# --durability replication, loopback ports from the OS, data under
# $BENCH_WORK/node):
#
# restart-after-kill9 (f): BENCH_RESTART_GIB GiB of 1 KiB records (acks=1,
#   flat out) into a topic with BENCH_RESTART_PARTITIONS partitions and
#   remote.storage.enable=false (everything stays local), then kill -9 of the
#   broker and a new `strata serve` on the same data dir and ports. seconds =
#   from the exec of the new process until its /readyz answers 200 (set once
#   embedded etcd, metadata and every partition's log are open:
#   cmd/strata/serve.go). The log end offsets are then checked against the
#   records acknowledged before the kill. The page cache is not dropped (a
#   process crash, not a machine crash). local_gib = bytes on disk under the
#   data dir (etcd excluded). The size is scaled down, with a warning, when
#   the disk has less than 3x free.
#
# rss-1000-partitions (g): a topic with BENCH_RSS_PARTITIONS partitions
#   (created with `strata topic create`; its duration is reported on stderr),
#   a paced producer (BENCH_RSS_RATE records/s of 1 KiB, acks=all, kgo's
#   sticky partitioner: every partition gets batches) for BENCH_RSS_SECONDS
#   and a consumer reading the topic alongside; the broker's VmRSS
#   (/proc/PID/status) sampled every 0.5 s. rss_mib = the maximum;
#   rss_steady_mib = RSS a few seconds after the load stopped.
#   With BENCH_PPROF=1 (and a strata serve that has --pprof) the heap
#   profile's top is printed on stderr at the end of the load.
#
# Rows: restart-after-kill9 (metric=seconds target=le:5),
#       rss-1000-partitions (metric=rss_mib target=le:512).
# Knobs (smoke / full): BENCH_RESTART_GIB (0.2 / 10), BENCH_RESTART_PARTITIONS
# (8), BENCH_RSS_PARTITIONS (100 / 1000), BENCH_RSS_RATE (5000 / 20000),
# BENCH_RSS_SECONDS (4 / 30).
set -euo pipefail
export LC_ALL=C
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

restart_gib=${BENCH_RESTART_GIB:-$(pick 0.2 10)}
restart_partitions=${BENCH_RESTART_PARTITIONS:-8}
rss_partitions=${BENCH_RSS_PARTITIONS:-$(pick 100 1000)}
rss_rate=${BENCH_RSS_RATE:-$(pick 5000 20000)}
rss_seconds=${BENCH_RSS_SECONDS:-$(pick 4 30)}
start_timeout=120
ready_timeout=300

broker_pid= # the running broker, stopped by cleanup
helpers=()  # consumer and RSS sampler, killed by cleanup

cleanup() {
	local pid
	for pid in "${helpers[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
	for pid in "${helpers[@]}"; do wait "$pid" 2>/dev/null || true; done
	stop_pid "$broker_pid" 5
	# The data dirs take GiBs that later cases of run.sh need.
	if [[ -n "${dir:-}" && "${BENCH_KEEP:-}" != 1 ]]; then rm -rf "$dir"; fi
	cleanup_work
}
trap cleanup EXIT
trap 'exit 130' INT # so that cleanup runs on a signal too
trap 'exit 143' TERM

ensure_strata
dir=$BENCH_WORK/node
mkdir -p "$dir"

# launch NAME DATADIR KAFKA HTTP [ARGS...]: starts `strata serve` in the
# background (stdout appended to $dir/NAME.out, stderr to $dir/NAME.log) and
# sets broker_pid. Not to be run in a subshell.
launch() {
	local name=$1 data=$2 kafka=$3 http=$4
	shift 4
	"$STRATA" serve --durability replication --log-level info --controlled-shutdown-timeout 2s \
		--data-dir "$data" --listen "$kafka" --http "$http" "$@" >>"$dir/$name.out" 2>>"$dir/$name.log" &
	broker_pid=$!
}

# await NAME: waits for the broker's "serving kafka" line.
await() {
	wait_kafka_line "$dir/$1.out" "$start_timeout" "$broker_pid" >/dev/null && return 0
	tail -n 30 "$dir/$1.log" >&2
	die "node: $1 did not start"
}

# stop_broker: SIGKILL: its data is thrown away and a clean shutdown (seconds
# of draining) is not what is measured.
stop_broker() {
	kill -KILL "$broker_pid" 2>/dev/null || true
	wait "$broker_pid" 2>/dev/null || true
	broker_pid=
}

# create_topic BROKER TOPIC PARTITIONS
create_topic() {
	"$STRATA" topic create --brokers "$1" --partitions "$3" --replication-factor 1 \
		--config remote.storage.enable=false "$2" >&2 || die "node: topic create $2 failed"
}

# produce BROKER ARGS...: strata bench produce, prints its summary line.
produce() {
	local broker=$1 out summary
	shift
	out=$("$STRATA" bench produce --brokers "$broker" --record-size 1024 "$@" 2>>"$dir/bench.log") ||
		{ tail -n 20 "$dir/bench.log" >&2; die "node: bench produce $* failed"; }
	printf '%s\n' "$out" >&2
	summary=$(tail -n 1 <<<"$out")
	[[ $(field "$summary" errors) == 0 ]] || die "node: produce errors: $summary"
	printf '%s\n' "$summary"
}

# end_offsets BROKER TOPIC: prints "SUM NONEMPTY", the sum of the partitions'
# log end offsets and how many partitions hold records.
end_offsets() {
	"$STRATA" topic describe --brokers "$1" "$2" |
		awk '$1 == "PARTITION" { t = 1; next } t && $1 ~ /^[0-9]+$/ { s += $7; if ($7 > 0) n++ } END { print s + 0, n + 0 }'
}

# fit_to_disk GIB: GIB, or less (with a warning) so that 3x fits in the free space.
fit_to_disk() {
	local avail_kib
	avail_kib=$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')
	awk -v want="$1" -v avail="$avail_kib" 'BEGIN {
		max = avail / 1048576 / 3
		if (want <= max) { print want; exit }
		printf "%.2f\n", max
		printf "node: only %.1f GiB free: restart case scaled down from %s to %.2f GiB\n", avail / 1048576, want, max > "/dev/stderr"
	}'
}

# wait_ready URL PID SECONDS: polls URL (without forking a timer) until it
# answers 2xx; fails if PID exits or SECONDS pass.
wait_ready() {
	local url=$1 pid=$2 deadline=$((SECONDS + $3))
	until curl -fsS --max-time 1 -o /dev/null "$url" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || return 1
		((SECONDS < deadline)) || return 1
		sleep 0.02
	done
}

case_restart() {
	local gib records kafka http data=$dir/restart summary t0 t1 secs local_bytes got
	gib=$(fit_to_disk "$restart_gib")
	records=$(awk -v g="$gib" 'BEGIN { printf "%d", g * 1048576 }')
	((records > 1000)) || die "node: not enough disk for the restart case"
	kafka=127.0.0.1:$(free_port)
	http=127.0.0.1:$(free_port)
	launch restart "$data" "$kafka" "$http"
	await restart
	create_topic "$kafka" restart "$restart_partitions"
	say "node: producing $records records of 1 KiB ($gib GiB) to $restart_partitions partitions"
	summary=$(produce "$kafka" --topic restart --partitions "$restart_partitions" --records "$records" \
		--acks 1 --concurrency 2)
	kill -KILL "$broker_pid"
	wait "$broker_pid" 2>/dev/null || true
	local_bytes=$(du -sb --exclude=etcd "$data" | awk '{ print $1 }')
	say "node: killed -9 with $local_bytes bytes local; restarting"
	printf '\n--- restart after kill -9 ---\n' >>"$dir/restart.log"
	t0=$EPOCHREALTIME
	launch restart "$data" "$kafka" "$http"
	wait_ready "http://$http/readyz" "$broker_pid" "$ready_timeout" ||
		{ tail -n 30 "$dir/restart.log" >&2; die "node: not ready after restart"; }
	t1=$EPOCHREALTIME
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	say "node: ready ${secs}s after exec; broker log since the restart:"
	sed -n '/--- restart after kill -9 ---/,$p' "$dir/restart.log" | cut -c1-220 | head -n 20 >&2
	got=$(end_offsets "$kafka" restart)
	say "node: log end offsets after restart: ${got% *} (acknowledged before the kill: $(field "$summary" records))"
	((${got% *} >= $(field "$summary" records))) || die "node: records lost across kill -9"
	result restart-after-kill9 seconds="$secs" local_gib="$(awk -v b="$local_bytes" 'BEGIN { printf "%.2f", b / 1073741824 }')" \
		records="${got% *}" metric=seconds target=le:5
	stop_broker
	rm -rf "$data"
}

# sample_rss PID FILE: appends PID's VmRSS (KiB) to FILE every 0.5 s while it runs.
sample_rss() {
	while [[ -r /proc/$1/status ]]; do
		awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status" >>"$2" 2>/dev/null || true
		sleep 0.5
	done
}

rss_now() { awk '$1 == "VmRSS:" { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# heap_top HTTP: the top of the broker's heap profile (BENCH_PPROF=1 only).
heap_top() {
	[[ "${BENCH_PPROF:-}" == 1 ]] || return 0
	if curl -fsS -o "$dir/heap.pprof" "http://$1/debug/pprof/heap"; then
		go tool pprof -top -nodecount=25 "$dir/heap.pprof" 2>/dev/null | head -n 32 >&2 || true
	else
		say "node: no heap profile (strata serve --pprof missing?)"
	fi
}

case_rss() {
	local kafka http records t0 summary got max steady pprof=()
	kafka=127.0.0.1:$(free_port)
	http=127.0.0.1:$(free_port)
	if [[ "${BENCH_PPROF:-}" == 1 ]]; then pprof=(--pprof); fi
	launch rss "$dir/rss" "$kafka" "$http" "${pprof[@]}"
	await rss
	say "node: rss after start: $(rss_now "$broker_pid") MiB"
	t0=$EPOCHREALTIME
	create_topic "$kafka" rss "$rss_partitions"
	say "node: topic create with $rss_partitions partitions took $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')s; rss $(rss_now "$broker_pid") MiB"
	sample_rss "$broker_pid" "$dir/rss.samples" &
	helpers+=($!)
	records=$((rss_rate * rss_seconds))
	"$STRATA" bench consume --brokers "$kafka" --topic rss --records "$records" --idle-timeout 30s \
		>"$dir/consume.out" 2>>"$dir/bench.log" &
	helpers+=($!)
	local consumer=$!
	summary=$(produce "$kafka" --topic rss --partitions "$rss_partitions" --records "$records" --rate "$rss_rate")
	heap_top "$http"
	wait "$consumer" || { cat "$dir/consume.out" >&2; die "node: consumer failed"; }
	cat "$dir/consume.out" >&2
	got=$(end_offsets "$kafka" rss)
	say "node: $(field "$summary" records) records in ${got#* } of $rss_partitions partitions"
	sleep "$(pick 2 5)"
	steady=$(rss_now "$broker_pid")
	max=$(sort -n "$dir/rss.samples" | tail -n 1)
	say "node: rss max $((max / 1024)) MiB over $(wc -l <"$dir/rss.samples") samples, steady after load $steady MiB"
	result rss-1000-partitions rss_mib="$(awk -v k="$max" 'BEGIN { printf "%.1f", k / 1024 }')" rss_steady_mib="$steady" \
		partitions="$rss_partitions" records_per_sec="$(field "$summary" records_per_sec)" \
		mb_per_sec="$(field "$summary" mb_per_sec)" metric=rss_mib target=le:512
	stop_broker
}

case_restart
case_rss
