#!/usr/bin/env bash
# Case script of the performance suite (test/bench/run.sh) for
# (d) cold catch-up from MinIO and (e) hot-tail consumer latency with and
# without a cold backfill, with its baseline (raw MinIO GETs through the
# broker's own S3 client stack) measured in the same run against the same
# MinIO. Prints only `result ...` lines on stdout (lib.sh); the measuring
# is done by test/bench/tierbench (see its main.go). test/bench/tier.sh is a
# wrapper that runs this script alone and prints its rows as a table.
#
# One run:
#   1. MinIO (.tools/bin/minio; scripts/install-minio.sh installs it) on a
#      free loopback port, data under $BENCH_WORK; a bucket made by minio-go.
#   2. `strata serve --object-store s3://...` against it (1 s retention
#      check, 0.5 s upload interval); topic "coldbench" whose segments go to
#      the bucket and leave local disk quickly (local.retention.*), nothing
#      leaves the bucket (retention.ms -1).
#   3. BENCH_COLD_MIB of 1 KiB records produced (acks=all), then a wait until
#      the upload lag is 0 and local disk holds little (tierbench wait-tiered).
#   4. minio-raw-get: ranged GETs (8 MiB, 8 in flight: the cold path's fetch
#      size and worker pool) of the topic's segment objects through
#      tier.OpenURL with the broker's URL (Retrying(Counting(aws-sdk s3))).
#      cold-catchup-raw: raw kmsg Fetch requests (batches CRC-checked, not
#      decoded: the client's CPU mostly out of the picture) read offsets
#      [0, tiered end) of every partition through the broker, one Fetch in
#      flight. Both MB/s count the same bytes, the segment objects covering
#      that range (the tier status' tieredBytes), so the ratio is like for
#      like. The two alternate BENCH_COLD_REPS times (2; 1 in smoke) and each
#      row is its best run: the first pass of either is slower (MinIO and the
#      broker's heap warming up) and the machine is shared. cold-catchup-kgo
#      (a kgo consumer decoding every record) runs once, after the first pair.
#      The broker's block cache (--cold-cache-bytes) is smaller than the data,
#      so every pass reads the bucket.
#   5. hot-tail-alone: a paced producer (BENCH_COLD_RATE records/s of 1 KiB)
#      and a tail consumer; end-to-end latency from each record's intended
#      send time (coordinated-omission corrected), warm-up not recorded.
#      hot-tail-with-backfill: the same while a backfill (its own process,
#      started 2 s before and stopped after) reads [0, tiered end) over and
#      over, flat out, with BENCH_COLD_BACKFILL_CLIENT (raw: the broker-bound
#      case, no decoding CPU competing with the tail consumer; or kgo). The
#      two alternate BENCH_COLD_REPS times; each row is its run with the
#      lowest p99.
#   stderr gets every run's summary, with the CPU seconds the broker, MinIO
#   and the tierbench client used during it (load-independent: CPU per GB).
#   Optional (BENCH_COLD_PROFILE=1): strata serve runs with --pprof, and
#   after the measurements a CPU profile of the broker is taken during a raw
#   cold backfill and during a hot-tail run with the backfill; `go tool
#   pprof -top` goes to stderr, the profiles stay in the work directory
#   (BENCH_KEEP=1 keeps it).
#
# Rows (mb_per_sec = 10^6 B/s of segment-object bytes here, not record values):
#   minio-raw-get           mb_per_sec                      (the baseline)
#   cold-catchup-raw        mb_per_sec  base=minio-raw-get target=ge:0.7
#   cold-catchup-kgo        mb_per_sec  base=minio-raw-get  (informational)
#   hot-tail-alone          p50_ms p99_ms p999_ms
#   cold-backfill-rss       rss_mib (the broker's VmRSS at the end of a backfill run, the highest),
#                           cache_mib (--cold-cache-bytes), rss_over_cache_mib target=le:128
#   hot-tail-with-backfill  p50_ms p99_ms p999_ms backfill_mb_per_sec (the backfill's rate in that run:
#                           the cold-read governor's trade-off) base=hot-tail-alone metric=p99_ms
#                           target=le:1.2 (and p999_ms le:2 in run.sh's table)
#
# Knobs (environment; smoke / full defaults):
#   BENCH_COLD_MIB (32 / 512)  BENCH_COLD_PARTITIONS (4)  BENCH_COLD_REPS (1 / 2)
#   BENCH_COLD_SEGMENT_BYTES (2 / 16 MiB: also local.retention.bytes)
#   BENCH_COLD_LOCAL_RETENTION_MS (1000 / 5000)
#   BENCH_COLD_CACHE_BYTES (16 MiB / the broker's default, 256 MiB)
#   BENCH_COLD_RATE (1000 / 2000 records/s)  BENCH_COLD_HOT_SECONDS (3 / 15)
#   BENCH_COLD_WARMUP_SECONDS (1 / 3)  BENCH_COLD_DURABILITY (replication)
#   BENCH_COLD_BACKFILL_CLIENT (raw)  BENCH_COLD_FETCH_PARTITION_BYTES (0: 1 MiB)
#   BENCH_COLD_SERVE_FLAGS (extra `strata serve` flags, e.g. "--cold-workers 2")
#   BENCH_COLD_PROFILE (0)
# Takes ~25 s under BENCH_SMOKE=1 and ~1.7 minutes full on 2 cores (2.2 with
# BENCH_COLD_PROFILE=1), plus building tierbench.
set -euo pipefail
export LC_ALL=C
# shellcheck source=test/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mib=${BENCH_COLD_MIB:-$(pick 32 512)}
partitions=${BENCH_COLD_PARTITIONS:-4}
reps=${BENCH_COLD_REPS:-$(pick 1 2)}
segment_bytes=${BENCH_COLD_SEGMENT_BYTES:-$(pick $((2 << 20)) $((16 << 20)))}
local_retention_ms=${BENCH_COLD_LOCAL_RETENTION_MS:-$(pick 1000 5000)}
cache_bytes=${BENCH_COLD_CACHE_BYTES:-$(pick $((16 << 20)) 0)}
rate=${BENCH_COLD_RATE:-$(pick 1000 2000)}
hot_seconds=${BENCH_COLD_HOT_SECONDS:-$(pick 3 15)}
warmup_seconds=${BENCH_COLD_WARMUP_SECONDS:-$(pick 1 3)}
durability=${BENCH_COLD_DURABILITY:-replication}
backfill_client=${BENCH_COLD_BACKFILL_CLIENT:-raw}
fetch_part=${BENCH_COLD_FETCH_PARTITION_BYTES:-0}
profile=${BENCH_COLD_PROFILE:-0}
case $backfill_client in raw | kgo) ;; *) die "BENCH_COLD_BACKFILL_CLIENT=$backfill_client: want raw or kgo" ;; esac
((reps >= 1)) || die "BENCH_COLD_REPS=$reps: want >= 1"

minio_bin=${STRATA_MINIO_BIN:-$tools_bin/minio}
topic=coldbench
bucket=strata-bench
access=strata-bench
secret=strata-bench-secret
minio_pid="" server_pid="" backfill_pid="" prof_pid=""
declare -A rss_kib=() # hot_with_backfill run -> the broker's VmRSS at its end

cleanup() {
	local rc=$?
	stop_pid "$prof_pid" 5
	stop_pid "$backfill_pid" 10
	stop_pid "$server_pid" 30
	stop_pid "$minio_pid" 10
	# The bucket and log data (over 1 GB full) go now, not with the suite's
	# BENCH_WORK at the end of run.sh.
	if [[ -n "${dir:-}" && "${BENCH_KEEP:-}" != 1 ]]; then rm -rf "$dir"; fi
	cleanup_work
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# note MSG: a progress line on stderr, with the seconds since the start.
note() { say "cold [${SECONDS}s]: $*"; }

# fail MSG [LOG...]: stderr message, the logs' tails, exit 1.
fail() {
	note "$1"
	shift
	local f
	for f in "$@"; do [[ -f $f ]] && tail -n 30 "$f" >&2; done
	exit 1
}

# build: tierbench into the work dir; strata is lib.sh's $STRATA (built once
# by run.sh, or here).
build() {
	note "building tierbench into $dir"
	(cd "$repo_root" && go build -ldflags='-s -w' -o "$dir/tierbench" ./test/bench/tierbench) || fail "building tierbench failed"
	ensure_strata
	strata_bin=$STRATA
}

start_minio() {
	minio_addr=127.0.0.1:$(free_port)
	MINIO_ROOT_USER=$access MINIO_ROOT_PASSWORD=$secret MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=1 \
		"$minio_bin" server --quiet --address "$minio_addr" "$dir/minio" >"$dir/minio.log" 2>&1 &
	minio_pid=$!
	wait_http_ok "http://$minio_addr/minio/health/ready" 60 || fail "MinIO did not start" "$dir/minio.log"
	"$dir/tierbench" mkbucket --endpoint "$minio_addr" --bucket "$bucket" --access-key "$access" --secret-key "$secret" ||
		fail "making the bucket failed" "$dir/minio.log"
	note "MinIO on $minio_addr"
}

start_server() {
	http_addr=127.0.0.1:$(free_port)
	(umask 077 && printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$access" "$secret" >"$dir/aws-credentials")
	store_url="s3://$bucket?endpoint=http://$minio_addr&region=us-east-1&credentials-file=$dir/aws-credentials"
	local extra=()
	((cache_bytes > 0)) && extra+=(--cold-cache-bytes "$cache_bytes")
	[[ $profile == 1 ]] && extra+=(--pprof)
	# shellcheck disable=SC2086 # BENCH_COLD_SERVE_FLAGS is a list of flags
	"$strata_bin" serve --data-dir "$dir/data" --listen 127.0.0.1:0 --http "$http_addr" \
		--durability "$durability" --object-store "$store_url" --log-level warn \
		--log-retention-check-interval 1s --tier-upload-interval 500ms "${extra[@]}" ${BENCH_COLD_SERVE_FLAGS:-} \
		>"$dir/serve.out" 2>"$dir/serve.log" &
	server_pid=$!
	brokers=$(wait_kafka_line "$dir/serve.out" 90 "$server_pid") || fail "strata serve did not start" "$dir/serve.log"
	note "strata serve --durability $durability: kafka on $brokers, http on $http_addr"
}

# cpu_s PID: CPU seconds (user + system) process PID has used so far.
cpu_s() {
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || printf 0
}

# children_cpu: sets children_s to the CPU seconds used by this shell's
# finished children (times runs in this shell: in a pipe or $(...) it would
# report a subshell's).
children_cpu() {
	times >"$dir/times"
	children_s=$(awk 'function s(x, a) { split(x, a, "m"); sub("s", "", a[2]); return a[1] * 60 + a[2] }
		NR == 2 { printf "%.2f", s($1) + s($2) }' "$dir/times")
}

# tb NAME ARGS...: runs tierbench, keeps its summary line in out[NAME] and
# notes it with the CPU seconds the broker, MinIO and tierbench used.
declare -A out
tb() {
	local name=$1 b0 m0 c0 children_s
	shift
	b0=$(cpu_s "$server_pid") m0=$(cpu_s "$minio_pid")
	children_cpu
	c0=$children_s
	out[$name]=$("$dir/tierbench" "$@" 2>>"$dir/tierbench.log") ||
		fail "tierbench $name failed" "$dir/tierbench.log" "$dir/serve.log"
	children_cpu
	note "$name: ${out[$name]} [CPU s: broker $(calc %.2f "$(cpu_s "$server_pid") - $b0")," \
		"MinIO $(calc %.2f "$(cpu_s "$minio_pid") - $m0"), tierbench $(calc %.2f "$children_s - $c0")]"
}

calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# fill: the topic, the records, and the wait until they are in the bucket.
fill() {
	"$strata_bin" topic create "$topic" --brokers "$brokers" --partitions "$partitions" \
		--config "segment.bytes=$segment_bytes" --config "local.retention.bytes=$segment_bytes" \
		--config "local.retention.ms=$local_retention_ms" --config retention.ms=-1 >&2 ||
		fail "topic create failed" "$dir/serve.log"
	note "producing $mib MiB"
	"$strata_bin" bench produce --brokers "$brokers" --topic "$topic" --partitions "$partitions" \
		--records $((mib * 1024)) --record-size 1024 --acks all 2>>"$dir/produce.log" | tail -n 1 >&2 ||
		fail "produce failed" "$dir/produce.log" "$dir/serve.log"
	tb tiered wait-tiered --http "$http_addr" --topic "$topic"
}

# backfill_start CLIENT: the flat-out cold backfill in its own process,
# until stopped (backfill_stop) or 10 minutes.
backfill_start() {
	"$dir/tierbench" backfill --brokers "$brokers" --http "$http_addr" --topic "$topic" --client "$1" \
		--duration 10m --fetch-max-partition-bytes "$fetch_part" >"$dir/backfill.out" 2>>"$dir/tierbench.log" &
	backfill_pid=$!
}

# backfill_stop NAME: SIGTERM (the tool prints its summary and exits 0);
# the summary goes to out[NAME].
backfill_stop() {
	kill -0 "$backfill_pid" 2>/dev/null || fail "the backfill ended early" "$dir/tierbench.log"
	stop_pid "$backfill_pid" 20
	backfill_pid=""
	out[$1]=$(tail -n 1 "$dir/backfill.out")
	[[ ${out[$1]} == backfill* ]] || fail "the backfill printed no summary" "$dir/tierbench.log"
	note "$1: ${out[$1]}"
}

# hot NAME: one hot-tail run, its summary in out[NAME].
hot() {
	tb "$1" hot --brokers "$brokers" --topic "$topic" --rate "$rate" --duration "${hot_seconds}s" \
		--warmup "${warmup_seconds}s" --label "$1"
}

# hot_with_backfill NAME: the hot-tail run while the backfill runs (started
# 2 s before, so that it is at full speed during the whole window).
hot_with_backfill() {
	backfill_start "$backfill_client"
	sleep "$(pick 1 2)"
	hot "$1"
	# The broker's resident memory after the whole run beside the backfill:
	# the cold cache, the blocks still referenced and the heap's slack.
	rss_kib[$1]=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$server_pid/status")
	backfill_stop "backfill_$1"
}

cold() {
	tb "$1" cold --brokers "$brokers" --http "$http_addr" --topic "$topic" --fetch-max-partition-bytes "$fetch_part" \
		--client "$2"
}

# measure: raw GET and raw cold read alternately (the kgo read once), then
# the hot tail alone and with the backfill alternately.
measure() {
	local r
	for ((r = 1; r <= reps; r++)); do
		tb "raw$r" rawget --object-store "$store_url" --topic "$topic"
		cold "coldraw$r" raw
		if ((r == 1)); then cold coldkgo kgo; fi
	done
	for ((r = 1; r <= reps; r++)); do
		hot "hot$r"
		hot_with_backfill "hotbf$r"
	done
}

# pprof_top NAME SECONDS: a CPU profile of the broker over the next SECONDS
# into $dir/NAME.pprof, its top entries on stderr.
pprof_top() {
	local name=$1 secs=$2
	curl -fsS -o "$dir/$name.pprof" "http://$http_addr/debug/pprof/profile?seconds=$secs" ||
		fail "CPU profile $name failed"
	note "broker CPU profile, $name ($dir/$name.pprof):"
	(cd "$repo_root" && go tool pprof -top -nodecount=35 "$strata_bin" "$dir/$name.pprof") 2>&1 | sed -n '1,45p' >&2
}

# profile_runs: after the measurements, the broker's CPU during a raw cold
# backfill, then during the hot-tail run with that backfill.
profile_runs() {
	local secs
	secs=$(pick 3 10)
	backfill_start raw
	sleep 1
	pprof_top cold-raw "$secs"
	backfill_stop backfill_profiled
	backfill_start "$backfill_client"
	sleep 1
	pprof_top hot-with-backfill "$((hot_seconds - 1))" &
	prof_pid=$!
	hot hotbf_profiled
	wait "$prof_pid" || fail "profiling the hot run failed"
	prof_pid=""
	backfill_stop backfill_hotbf_profiled
}

# best max|min KEY PREFIX: the name of the run PREFIX1..PREFIX$reps whose
# KEY is largest (max) or smallest (min).
best() {
	local op=$1 key=$2 prefix=$3 r name v won="" wonv=""
	for ((r = 1; r <= reps; r++)); do
		name=$prefix$r
		v=$(field "${out[$name]}" "$key")
		if [[ -z $won ]] || awk -v a="$v" -v b="$wonv" -v op="$op" 'BEGIN { exit !(op == "max" ? a > b : a < b) }'; then
			won=$name wonv=$v
		fi
	done
	printf '%s' "$won"
}

# runs KEY PREFIX: KEY of every run PREFIX1..PREFIX$reps, for the notes.
runs() {
	local r vals=()
	for ((r = 1; r <= reps; r++)); do vals+=("$(field "${out[$2$r]}" "$1")"); done
	printf '%s' "${vals[*]}"
}

report() {
	local raw coldraw hot hotbf
	raw=$(best max mb_per_sec raw) coldraw=$(best max mb_per_sec coldraw)
	hot=$(best min p99_ms hot) hotbf=$(best min p99_ms hotbf)
	note "runs: raw GET MB/s $(runs mb_per_sec raw); cold raw MB/s $(runs mb_per_sec coldraw);" \
		"hot p99 ms $(runs p99_ms hot); with backfill $(runs p99_ms hotbf) (ack p99 $(runs ack_p99_ms hotbf));" \
		"backfill MB/s $(runs mb_per_sec backfill_hotbf)"
	result minio-raw-get "mb_per_sec=$(field "${out[$raw]}" mb_per_sec)" "seconds=$(field "${out[$raw]}" seconds)"
	result cold-catchup-raw "$(catchup "$coldraw")" base=minio-raw-get target=ge:0.7
	result cold-catchup-kgo "$(catchup coldkgo)" base=minio-raw-get
	result hot-tail-alone "$(latencies "$hot")"
	local rss=0 r cache_mib
	for r in "${rss_kib[@]}"; do ((r > rss)) && rss=$r; done
	cache_mib=$(((cache_bytes > 0 ? cache_bytes : 256 << 20) >> 20))
	result cold-backfill-rss "rss_mib=$((rss >> 10))" "cache_mib=$cache_mib" \
		"rss_over_cache_mib=$(((rss >> 10) - cache_mib))" metric=rss_over_cache_mib target=le:128
	result hot-tail-with-backfill "$(latencies "$hotbf")" "backfill_mb_per_sec=$(field "${out[backfill_$hotbf]}" mb_per_sec)" \
		base=hot-tail-alone metric=p99_ms target=le:1.2
}

catchup() {
	printf 'mb_per_sec=%s records_per_sec=%s seconds=%s' "$(field "${out[$1]}" mb_per_sec)" \
		"$(calc %.0f "$(field "${out[$1]}" records) / $(field "${out[$1]}" seconds)")" "$(field "${out[$1]}" seconds)"
}

latencies() {
	printf 'p50_ms=%s p99_ms=%s p999_ms=%s' "$(field "${out[$1]}" p50_ms)" "$(field "${out[$1]}" p99_ms)" \
		"$(field "${out[$1]}" p999_ms)"
}

main() {
	[[ -x $minio_bin ]] || die "cold: MinIO binary $minio_bin missing: run scripts/install-minio.sh"
	ensure_work
	dir=$(mktemp -d "$BENCH_WORK/cold.XXXXXX")
	build
	start_minio
	start_server
	fill
	measure
	report
	[[ $profile == 1 ]] && profile_runs
	return 0
}

main "$@"
