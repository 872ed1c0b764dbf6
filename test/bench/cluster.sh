#!/usr/bin/env bash
# Performance-suite case (c): acks=all RF=3 produce on three brokers, compared with
# single-node acks=1 measured in the same run on the same machine.
#
#   1. single-acks1: one `strata serve` (embedded etcd, --durability
#      replication) on a temp data dir; topic with BENCH_CLUSTER_PARTITIONS
#      partitions, RF 1; `strata bench produce --acks 1` flat out.
#   2. etcd (/usr/bin/etcd, free loopback ports) and three brokers against it
#      (--etcd, --node-id 1..3, --durability replication, a shared file://
#      bucket that no topic here uses).
#      rf3-acks-all: the same produce on a topic with RF 3, --acks all.
#   3. rf3-sustained: the same flat-out produce for about
#      BENCH_SUSTAIN_SECONDS (12; smoke 2) at the burst's rate: records/s the
#      cluster sustains (the 400k-record burst outruns it: its followers and
#      flushing catch up after it ends).
#      rf3-half-load-p50 / -p99: a paced produce (--rate = half of the
#      sustained records/s) for BENCH_HALF_LOAD_SECONDS on another RF 3
#      topic. With --rate, strata bench counts each record's latency from its
#      intended send time (coordinated-omission corrected, test/bench/doc.go);
#      latency is produce-to-ack with acks=all, i.e. until every ISR replica
#      has the record.
#
# Topics are created with `strata topic create` and remote.storage.enable=false
# (no tier uploads: the default config tiers every topic when a bucket is set).
# All three brokers and the client share the machine's cores.
#
# Rows: single-acks1, rf3-acks-all (base single-acks1, target ge:0.33 on
# mb_per_sec), rf3-half-load-p50 (p50_ms le:2), rf3-half-load-p99 (p99_ms le:5);
# the half-load rows also carry sustained_records_per_sec and pace_kept (the
# records/s achieved over those asked; below 0.95 a warning says the run
# measured a backlog).
# Knobs: BENCH_CLUSTER_RECORDS (400000; smoke 30000), BENCH_CLUSTER_PARTITIONS
# (6), BENCH_CLUSTER_CONCURRENCY (2), BENCH_HALF_LOAD_SECONDS (20; smoke 3).
# BENCH_PPROF=1 (needs strata serve --pprof) prints the top of broker-1's CPU
# profile over the half-load run on stderr.
set -euo pipefail
export LC_ALL=C
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

records=${BENCH_CLUSTER_RECORDS:-$(pick 30000 400000)}
partitions=${BENCH_CLUSTER_PARTITIONS:-6}
concurrency=${BENCH_CLUSTER_CONCURRENCY:-2}
half_seconds=${BENCH_HALF_LOAD_SECONDS:-$(pick 3 20)}
sustain_seconds=${BENCH_SUSTAIN_SECONDS:-$(pick 2 12)}
start_timeout=60

pids=()   # the brokers started here, killed by cleanup
etcd_pid= # etcd, killed by cleanup after the brokers

# cleanup stops the brokers (SIGTERM to all at once so that their controlled
# shutdowns overlap, SIGKILL after a few seconds: the data is thrown away),
# then etcd, which the brokers need while they shut down.
cleanup() {
	local pid
	[[ -z "${profiler_pid:-}" ]] || kill -KILL "$profiler_pid" 2>/dev/null || true
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do stop_pid "$pid" 5; done
	stop_pid "${etcd_pid:-}" 10
	# The data dirs take GiBs that later cases of run.sh need.
	if [[ -n "${dir:-}" && "${BENCH_KEEP:-}" != 1 ]]; then rm -rf "$dir"; fi
	cleanup_work
}
trap cleanup EXIT
trap 'exit 130' INT # so that cleanup runs on a signal too
trap 'exit 143' TERM

ensure_strata
dir=$BENCH_WORK/cluster
mkdir -p "$dir"

# launch_broker NAME ARGS...: starts `strata serve ARGS` in the background
# (stdout in $dir/NAME.out, stderr in $dir/NAME.log) and appends its pid to
# pids. Not to be run in a subshell (pids would not reach cleanup).
launch_broker() {
	local name=$1
	shift
	"$STRATA" serve --durability replication --log-level warn --controlled-shutdown-timeout 2s \
		--data-dir "$dir/$name" "$@" >"$dir/$name.out" 2>"$dir/$name.log" &
	pids+=($!)
}

# await_broker NAME PID: prints the Kafka address of broker NAME once it serves.
await_broker() {
	local addr
	if ! addr=$(wait_kafka_line "$dir/$1.out" "$start_timeout" "$2"); then
		tail -n 30 "$dir/$1.log" >&2
		die "cluster: $1 did not start"
	fi
	say "cluster: $1 serves kafka on $addr"
	printf '%s\n' "$addr"
}


# create_topic BROKERS TOPIC RF
create_topic() {
	"$STRATA" topic create --brokers "$1" --partitions "$partitions" --replication-factor "$3" \
		--config remote.storage.enable=false "$2" >&2 || die "cluster: topic create $2 failed"
}

# produce BROKERS ARGS...: runs strata bench produce and prints its summary
# line (the last: "produce records=... mb_per_sec=... p50_ms=...").
produce() {
	local brokers=$1 out
	shift
	if ! out=$("$STRATA" bench produce --brokers "$brokers" --record-size 1024 --partitions "$partitions" "$@" \
		2>>"$dir/bench.log"); then
		printf '%s\n' "$out" >&2
		tail -n 20 "$dir/bench.log" >&2
		die "cluster: bench produce $* failed"
	fi
	printf '%s\n' "$out" >&2
	local summary
	summary=$(tail -n 1 <<<"$out")
	[[ $(field "$summary" errors) == 0 ]] || die "cluster: produce errors: $summary"
	printf '%s\n' "$summary"
}


# start_cpu_profile HTTP SECONDS: with BENCH_PPROF=1 (strata serve --pprof),
# fetches a CPU profile of that broker over the next SECONDS in the background.
start_cpu_profile() {
	[[ "${BENCH_PPROF:-}" == 1 ]] || return 0
	curl -fsS -o "$dir/cpu-broker-1.pprof" "http://$1/debug/pprof/profile?seconds=$2" &
	profiler_pid=$!
}

# print_cpu_profile: the top of the profile start_cpu_profile fetched, on stderr.
print_cpu_profile() {
	[[ -n "${profiler_pid:-}" ]] || return 0
	if wait "$profiler_pid"; then
		say "cluster: CPU profile of broker-1 during the half-load run ($dir/cpu-broker-1.pprof):"
		go tool pprof -top -nodecount=30 "$dir/cpu-broker-1.pprof" 2>/dev/null | head -n 38 >&2 || true
	else
		say "cluster: no CPU profile (strata serve --pprof missing?)"
	fi
	profiler_pid=
}

single() {
	local addr summary
	launch_broker single --listen "127.0.0.1:$(free_port)" --http "127.0.0.1:$(free_port)"
	addr=$(await_broker single "${pids[-1]}")
	create_topic "$addr" single-acks1 1
	summary=$(produce "$addr" --topic single-acks1 --records "$records" --acks 1 --concurrency "$concurrency")
	result single-acks1 "$(produce_fields "$summary")"
	# SIGKILL: its data is thrown away, and a clean shutdown takes seconds.
	kill -KILL "${pids[-1]}"
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}

three() {
	local i addrs=() brokers summary rate http http1 pprof=()
	start_etcd "$dir" || die "cluster: etcd did not start"
	if [[ "${BENCH_PPROF:-}" == 1 ]]; then pprof=(--pprof); fi
	http1=127.0.0.1:$(free_port)
	# Started together, awaited in turn: a broker's start does not need its peers.
	for i in 1 2 3; do
		http=$http1
		((i == 1)) || http=127.0.0.1:$(free_port)
		launch_broker "broker-$i" --etcd "$etcd_endpoint" --cluster bench --node-id "$i" \
			--listen "127.0.0.1:$(free_port)" --http "$http" \
			--object-store "file://$dir/objects" --default-replication-factor 3 "${pprof[@]}"
	done
	for i in 1 2 3; do addrs+=("$(await_broker "broker-$i" "${pids[-4 + i]}")"); done
	brokers=$(IFS=,; printf '%s' "${addrs[*]}")
	create_topic "$brokers" rf3-acks-all 3
	summary=$(produce "$brokers" --topic rf3-acks-all --records "$records" --acks all --concurrency "$concurrency")
	result rf3-acks-all "$(produce_fields "$summary")" base=single-acks1 target=ge:0.33

	# The burst above outruns what the cluster sustains (its followers and
	# page cache catch up afterwards), so half load is half of a sustained
	# flat-out run of about sustain_seconds.
	local burst sustained pace_kept
	burst=$(field "$summary" records_per_sec)
	create_topic "$brokers" rf3-sustained 3
	summary=$(produce "$brokers" --topic rf3-sustained --records "$(awk -v r="$burst" -v s="$sustain_seconds" \
		'BEGIN { printf "%d", r * s }')" --acks all --concurrency "$concurrency")
	sustained=$(field "$summary" records_per_sec)
	rate=$(awk -v r="$sustained" 'BEGIN { printf "%d", r / 2 }')
	((rate > 0)) || die "cluster: no rate from $summary"
	say "cluster: sustained $sustained records/s over $(field "$summary" seconds)s (burst $burst); half load: $rate records/s for ${half_seconds}s"
	create_topic "$brokers" rf3-half-load 3
	start_cpu_profile "$http1" $((half_seconds > 2 ? half_seconds - 1 : 1))
	summary=$(produce "$brokers" --topic rf3-half-load --records $((rate * half_seconds)) --rate "$rate" \
		--acks all --concurrency "$concurrency")
	print_cpu_profile
	# A client that fell behind its pace measured a backlog, not latency.
	pace_kept=$(awk -v got="$(field "$summary" records_per_sec)" -v want="$rate" 'BEGIN { printf "%.3f", got / want }')
	awk -v k="$pace_kept" 'BEGIN { exit !(k < 0.95) }' &&
		say "cluster: WARNING: the paced producer kept only $pace_kept of its pace: rf3-half-load measures a backlog"
	local extra="sustained_records_per_sec=$sustained pace_kept=$pace_kept"
	result rf3-half-load-p50 "$(produce_fields "$summary")" "$extra" metric=p50_ms target=le:2
	result rf3-half-load-p99 "$(produce_fields "$summary")" "$extra" metric=p99_ms target=le:5
}

single
three
