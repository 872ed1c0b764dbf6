#!/usr/bin/env bash
# The tiered-storage benchmark of issue 4 (not a test: it prints numbers and
# asserts nothing), with its baselines measured in the same run against the
# same MinIO (STYLE.md habit 13: report ratios, not absolute numbers).
#
# One run:
#   1. MinIO (.tools/bin/minio, scripts/install-minio.sh) on a free loopback
#      port with its data in a temp dir; a bucket made with minio-go.
#   2. `strata serve --object-store s3://...` against it, with a 1 s
#      retention check and a 0.5 s upload interval; topic "tierbench" with 4
#      partitions, 16 MiB segments (segment.bytes) and local.retention.bytes
#      16 MiB and local.retention.ms 5 s per partition, retention.ms -1
#      (nothing leaves the bucket).
#   3. ~512 MiB produced (1 KiB records, acks=all, flat out), then a wait
#      until the upload lag is 0 and local disk holds <= 10 % of the data
#      or stopped shrinking (about the active segments).
#   4. Cold catch-up, twice: a consumer (kgo defaults) reads offsets
#      [0, tiered end) of every partition, i.e. every record that is in the
#      bucket; then the raw-fetch client (tierbench rawfetch.go: kmsg Fetch
#      requests to the leader, batches CRC-checked but records not decoded,
#      so the client's CPU is mostly out of the picture) reads the same.
#      Both MB/s count the object bytes covering that range (the tier status'
#      tieredBytes), so they compare with the raw baseline: ranged GETs
#      (8 MiB, the cold path's fetch size; 8 in flight, its worker pool) of
#      the same objects through the broker's own client stack
#      (tier.OpenURL with the same URL: Retrying(Counting(aws-sdk s3))),
#      run before and after the cold read; the better one is the baseline.
#   5. GETs per GiB: the broker's /metrics strata_object_store_requests_total
#      and _bytes_total{op="GET"} (every attempt counted) over the cold read.
#   6. Hot tail: a paced producer (BENCH_RATE records/s, 1 KiB) and a tail
#      consumer; end-to-end latency from each record's intended send time
#      (coordinated-omission corrected) in test/bench's HDR histogram, first
#      without, then with a backfill (its own process) reading
#      [0, tiered end) over and over during the whole window: a kgo consumer,
#      then the raw-fetch client (BENCH_BACKFILL_CLIENT picks one).
#
# Knobs (environment): BENCH_MIB (512) BENCH_PARTITIONS (4)
#   BENCH_SEGMENT_BYTES (16 MiB) BENCH_LOCAL_RETENTION_BYTES (16 MiB)
#   BENCH_LOCAL_RETENTION_MS (5000)
#   BENCH_RATE (2000) BENCH_HOT_SECONDS (20) BENCH_DURABILITY (replication)
#   BENCH_FETCH_PARTITION_BYTES (0: kgo's 1 MiB; cold and backfill consumers)
#   BENCH_BACKFILL_MBPS (0: flat out; a client-side cap on the backfill)
#   BENCH_BACKFILL_CLIENT (both: kgo then raw; or kgo, raw)
#   BENCH_SERVE_FLAGS (extra `strata serve` flags, e.g. "--cold-workers 2")
#   BENCH_DIR (/tmp) BENCH_KEEP=1 keeps the work directory (logs, data).
# A run takes about 2 minutes on 2 cores (110 s measured), plus the build.
set -euo pipefail
export LC_ALL=C

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mib=${BENCH_MIB:-512}
partitions=${BENCH_PARTITIONS:-4}
segment_bytes=${BENCH_SEGMENT_BYTES:-16777216}
local_retention=${BENCH_LOCAL_RETENTION_BYTES:-16777216}
local_retention_ms=${BENCH_LOCAL_RETENTION_MS:-5000}
rate=${BENCH_RATE:-2000}
hot_seconds=${BENCH_HOT_SECONDS:-20}
durability=${BENCH_DURABILITY:-replication}
fetch_part=${BENCH_FETCH_PARTITION_BYTES:-0}
backfill_mbps=${BENCH_BACKFILL_MBPS:-0}
backfill_client=${BENCH_BACKFILL_CLIENT:-both}
case $backfill_client in both) backfill_clients="kgo raw" ;; kgo | raw) backfill_clients=$backfill_client ;;
*) printf 'BENCH_BACKFILL_CLIENT=%s: want both, kgo or raw\n' "$backfill_client" >&2; exit 2 ;; esac
minio_bin=${STRATA_MINIO_BIN:-$PWD/.tools/bin/minio}
topic=tierbench
bucket=strata-bench
access=strata-bench
secret=strata-bench-secret
work=$(mktemp -d "${BENCH_DIR:-/tmp}/strata-tier-bench.XXXXXX")
minio_pid="" server_pid="" backfill_pid=""

say() { printf '%s\n' "$*" >&2; }

# stop_pid PID: SIGTERM, then SIGKILL after 30 s; only processes this script started.
stop_pid() {
	local pid=$1
	[[ -n "$pid" ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + 30))
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	stop_pid "$backfill_pid"
	stop_pid "$server_pid"
	stop_pid "$minio_pid"
	if [[ "${BENCH_KEEP:-}" == 1 ]]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

fail() {
	say "$1"
	shift
	for f in "$@"; do [[ -f $f ]] && tail -n 30 "$f" >&2; done
	exit 1
}

start_minio() {
	[[ -x $minio_bin ]] || fail "MinIO binary $minio_bin missing: run scripts/install-minio.sh"
	minio_addr=$("$work/tierbench" freeport)
	MINIO_ROOT_USER=$access MINIO_ROOT_PASSWORD=$secret MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=1 \
		"$minio_bin" server --quiet --address "$minio_addr" "$work/minio" >"$work/minio.log" 2>&1 &
	minio_pid=$!
	local deadline=$((SECONDS + 60))
	until curl -fs -o /dev/null "http://$minio_addr/minio/health/ready"; do
		kill -0 "$minio_pid" 2>/dev/null && ((SECONDS < deadline)) || fail "MinIO did not start:" "$work/minio.log"
		sleep 0.2
	done
	"$work/tierbench" mkbucket --endpoint "$minio_addr" --bucket "$bucket" --access-key "$access" --secret-key "$secret"
	say "MinIO on $minio_addr"
}

start_server() {
	http_addr=$("$work/tierbench" freeport)
	(umask 077 && printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$access" "$secret" >"$work/aws-credentials")
	store_url="s3://$bucket?endpoint=http://$minio_addr&region=us-east-1&credentials-file=$work/aws-credentials"
	"$work/strata" serve --data-dir "$work/data" --listen 127.0.0.1:0 --http "$http_addr" \
		--durability "$durability" --object-store "$store_url" --log-level warn \
		--log-retention-check-interval 1s --tier-upload-interval 500ms ${BENCH_SERVE_FLAGS:-} \
		>"$work/serve.out" 2>"$work/serve.log" &
	server_pid=$!
	local deadline=$((SECONDS + 90))
	until brokers=$(sed -n 's/^strata: serving kafka on //p' "$work/serve.out") && [[ -n "$brokers" ]]; do
		kill -0 "$server_pid" 2>/dev/null && ((SECONDS < deadline)) || fail "strata serve did not start:" "$work/serve.log"
		sleep 0.2
	done
	say "strata serve --durability $durability: kafka on $brokers, http on $http_addr"
}

# field LINE KEY: the value of key=value in a summary line.
field() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }

# tb NAME ARGS...: runs tierbench, keeps its summary line in out[NAME].
declare -A out
tb() {
	local name=$1
	shift
	out[$name]=$("$work/tierbench" "$@" 2> >(tee -a "$work/tierbench.log" >&2)) ||
		fail "tierbench $name failed" "$work/serve.log"
}

calc() { awk "BEGIN { printf \"$1\", $2 }"; }

print_table() {
	local raw1 raw2 raw cold coldraw gets getb p99a c
	raw1=$(field "${out[raw1]}" mb_per_sec) raw2=$(field "${out[raw2]}" mb_per_sec)
	raw=$(calc %.2f "($raw1 > $raw2) ? $raw1 : $raw2")
	cold=$(field "${out[cold]}" mb_per_sec) coldraw=$(field "${out[coldraw]}" mb_per_sec)
	gets=$(field "${out[cold]}" gets) getb=$(field "${out[cold]}" get_bytes)
	local objb
	objb=$(field "${out[cold]}" object_bytes)
	p99a=$(field "${out[hot]}" p99_ms)
	printf '\n%-56s %12s %12s %8s\n' measurement value baseline ratio
	printf '%-56s %12s %12s %8s\n' "cold catch-up MB/s, kgo consumer, vs raw GET MB/s" "$cold" "$raw" \
		"$(calc %.2f "$cold / $raw")"
	printf '%-56s %12s %12s %8s\n' "cold catch-up MB/s, raw fetch, vs raw GET MB/s" "$coldraw" "$raw" \
		"$(calc %.2f "$coldraw / $raw")"
	printf '%-56s %12s %12s\n' "  cold catch-up MB/s of record values (kgo)" "$(field "${out[cold]}" value_mb_per_sec)" -
	printf '%-56s %12s %12s\n' "  raw GET runs (before, after the cold reads)" "$raw1" "$raw2"
	for c in $backfill_clients; do
		printf '%-56s %12s %12s %8s\n' "hot-tail e2e p99 ms: with $c backfill vs without" "$(field "${out[hotbf_$c]}" p99_ms)" "$p99a" \
			"$(calc %.2f "$(field "${out[hotbf_$c]}" p99_ms) / $p99a")"
		printf '%-56s %12s %12s\n' "  hot-tail e2e p50 ms (with $c backfill / without)" "$(field "${out[hotbf_$c]}" p50_ms)" "$(field "${out[hot]}" p50_ms)"
		printf '%-56s %12s %12s\n' "  hot-tail e2e p99.9 ms (with $c backfill / without)" "$(field "${out[hotbf_$c]}" p999_ms)" "$(field "${out[hot]}" p999_ms)"
		printf '%-56s %12s %12s\n' "  $c backfill MB/s during the hot run" "$(field "${out[backfill_$c]}" mb_per_sec)" -
	done
	printf '%-56s %12s %12s\n' "GETs per GiB (broker /metrics, per GiB GET bytes)" \
		"$(calc %.1f "$gets / ($getb / 1073741824)")" \
		"$(calc %.1f "$(field "${out[raw1]}" gets) / ($(field "${out[raw1]}" bytes) / 1073741824)")"
	printf '%-56s %12s\n' "  broker GETs per GiB of objects consumed (kgo run)" "$(calc %.1f "$gets / ($objb / 1073741824)")"
	printf '%-56s %12s\n' "  broker GETs / GET bytes during the kgo cold read" "$gets / $getb"
	printf '\nMB/s = 10^6 B/s. Cold and raw MB/s both count the bytes of the segment objects covering the\n'
	printf 'tiered range (%s B); baseline = the better raw run (8 MiB ranged GETs, 8 in flight, same client\n' "$objb"
	printf 'stack and URL as the broker). Raw fetch: kmsg Fetch requests, one in flight per broker, batch\n'
	printf 'CRC-32C checked, records not decoded. Backfill MB/s: record values (kgo) or whole batches (raw).\n'
	printf 'Hot tail: %s records/s of 1 KiB over %s partitions for %ss\n' "$rate" "$partitions" "$hot_seconds"
	printf '(first 3 s not recorded), latency from intended send time to receipt by a tail consumer.\n'
	printf 'GETs counted by the broker (every attempt, footer/index reads included); the baseline column\n'
	printf 'is the raw run'"'"'s GETs per GiB (8 MiB ranges). Goals (issue 4): cold/raw >= 0.7, p99 ratio <= 1.2.\n'
	printf 'One run on a shared 2-core machine; --durability %s; consumer FetchMaxPartitionBytes %s (0: 1 MiB);\n' "$durability" "$fetch_part"
	printf 'backfill cap %s MB/s (0: none); extra serve flags: %s\n' "$backfill_mbps" "${BENCH_SERVE_FLAGS:-none}"
}

# hot_with_backfill CLIENT: the hot-tail run again, with the backfill
# (client kgo or raw) in its own process started 2 s before and lasting
# past its end.
hot_with_backfill() {
	local client=$1
	"$work/tierbench" backfill --brokers "$brokers" --http "$http_addr" --topic "$topic" --client "$client" \
		--duration "$((hot_seconds + 4))s" --fetch-max-partition-bytes "$fetch_part" \
		--max-mb-per-sec "$backfill_mbps" >"$work/backfill.out" 2>>"$work/tierbench.log" &
	backfill_pid=$!
	sleep 2
	tb "hotbf_$client" hot --brokers "$brokers" --topic "$topic" --rate "$rate" --duration "${hot_seconds}s" \
		--label "with-$client-backfill"
	wait "$backfill_pid" || fail "backfill failed" "$work/tierbench.log"
	backfill_pid=""
	out[backfill_$client]=$(tail -n 1 "$work/backfill.out")
	say "$(tail -n 1 "$work/backfill.out")"
}

main() {
	say "building strata and tierbench into $work"
	go build -o "$work/strata" ./cmd/strata
	go build -o "$work/tierbench" ./test/bench/tierbench
	start_minio
	start_server
	"$work/strata" topic create "$topic" --brokers "$brokers" --partitions "$partitions" \
		--config "segment.bytes=$segment_bytes" --config "local.retention.bytes=$local_retention" \
		--config "local.retention.ms=$local_retention_ms" --config retention.ms=-1 >&2
	say "producing $mib MiB"
	"$work/strata" bench produce --brokers "$brokers" --topic "$topic" --partitions "$partitions" \
		--records $((mib * 1024)) --record-size 1024 --acks all | tail -n 1 >&2
	tb tiered wait-tiered --http "$http_addr" --topic "$topic"
	tb raw1 rawget --object-store "$store_url" --topic "$topic"
	tb cold cold --brokers "$brokers" --http "$http_addr" --topic "$topic" --fetch-max-partition-bytes "$fetch_part" --client kgo
	tb coldraw cold --brokers "$brokers" --http "$http_addr" --topic "$topic" --fetch-max-partition-bytes "$fetch_part" --client raw
	tb raw2 rawget --object-store "$store_url" --topic "$topic"
	tb hot hot --brokers "$brokers" --topic "$topic" --rate "$rate" --duration "${hot_seconds}s" --label alone
	local c
	for c in $backfill_clients; do hot_with_backfill "$c"; done
	print_table
}

main "$@"
