#!/usr/bin/env bash
# Performance-suite case (i): diskless topics (diskless.enable=true) on three
# brokers over etcd and MinIO, against a classic RF=3 topic (acks=all) on the
# same brokers in the same run. A diskless produce is acknowledged once the
# broker has buffered it for up to --diskless-append-linger (or until
# --diskless-append-max-bytes are buffered), PUT one shared object and
# committed its coordinates in etcd; nothing is replicated between brokers.
#
#   1. MinIO (STRATA_MINIO_BIN, else .tools/bin/minio, else minio on PATH;
#      scripts/install-minio.sh installs it) on a free loopback port, its
#      bucket made by curl (SigV4), and /usr/bin/etcd.
#   2. For each linger L in BENCH_DISKLESS_LINGERS (ms; "50 100 250"): three
#      brokers (--etcd, node ids 1..3, --durability replication, the MinIO
#      bucket, --diskless-append-linger L, --diskless-merge-age 1h so that no
#      merge runs during the measurements) are (re)started on the same data
#      dirs. diskless-linger-L: a paced `strata bench produce` (acks=all,
#      BENCH_DISKLESS_RATE records/s of 1 KiB for BENCH_DISKLESS_PACED_SECONDS,
#      latency from each record's intended send time, test/bench/doc.go) to a
#      new diskless topic, after a short flat-out warm-up of the brokers'
#      connections. p99_over_linger is p99 / L. broker_append_mean_ms and
#      broker_append_p99_le_ms are the brokers' side of the same run, from
#      strata_diskless_append_latency_seconds (a produce partition's arrival
#      to its answer: the mean, and the histogram bound under which 99 % fall).
#      The client's latency is the larger: a Kafka client keeps at most 5
#      requests in flight per broker, and without a client linger it sends
#      them at the start of the broker's window, so records produced later in
#      the window wait in the client for the next one (BENCH_DISKLESS_CLIENT_LINGER
#      spreads them).
#   3. On the last linger's brokers (250 ms, the default, unless the knob says
#      otherwise): classic-rf3-paced, the same paced produce to a classic RF=3
#      topic (the latency the same machine gives without a bucket in the path).
#      Then BENCH_DISKLESS_REPS pairs of flat-out runs, each of
#      BENCH_DISKLESS_MIB MiB to a new topic, the same `strata bench produce`
#      command for both: diskless-flat-out (default --diskless-append-max-bytes,
#      8 MiB) and classic-rf3-flat-out (remote.storage.enable=false: no tier
#      uploads beside it). Each row is its run with the highest MB/s; stderr
#      has every run. Measured around each run, summed over the brokers'
#      /metrics and /proc:
#        puts_per_gib        strata_diskless_puts_total (ok + error) per GiB
#                            (2^30 B) of record values produced. A full
#                            object is 8 MiB and up to one produce request
#                            more (128 per GiB or a little fewer); the short
#                            ones are each broker's first and last of a run,
#                            and the rest after a full object was taken from
#                            a backlog, which is already a linger old
#        object_mib          strata_diskless_object_bytes_total over
#                            strata_diskless_objects_total (MiB per object)
#        commit_mean_ms      the etcd part of writing one object, the mean
#                            of strata_diskless_commit_latency_seconds (a
#                            broker writes one object at a time: PUT, then
#                            commit)
#        interbroker_bytes_per_byte
#                            strata_topic_replication_bytes_out_total over
#                            strata_topic_bytes_in_total of the topic: the
#                            record bytes leaders sent followers per byte
#                            produced (2 for RF=3, 0 for diskless)
#        socket_bytes_per_byte
#                            every byte both ways on the TCP connections one
#                            broker opened to another's Kafka port (ss -ti's
#                            bytes_sent + bytes_received on the connecting
#                            side, sampled every 0.5 s) per byte of record
#                            values: what crossed between brokers whatever
#                            counter the code keeps, metadata and idle fetch
#                            polls included (a connection that closes during
#                            the run loses its last half second)
#        broker_cpu_s, minio_cpu_s  CPU seconds used during the run
#
# Rows: diskless-linger-{L} (p50_ms p99_ms p999_ms, linger_ms,
# p99_over_linger, broker_append_*, pace_kept: records/s over the rate; the
# run's seconds include the last acknowledgement, so below S/(S+1) a warning
# says the client fell behind), classic-rf3-paced, diskless-flat-out,
# classic-rf3-flat-out. Targets (run.sh): diskless-flat-out puts_per_gib
# le:140, interbroker_bytes_per_byte le:0.01, socket_bytes_per_byte le:0.01,
# mb_per_sec over classic-rf3-flat-out ge:0.5; diskless-linger-250
# p99_over_linger le:2.5 (a record may wait out the window in progress, then
# its own: two lingers, and half of one for the PUTs and commits).
# Everything (three brokers, MinIO, etcd, the load generator) shares the
# machine's cores: on 2 cores the numbers are noisy, run it twice. Takes
# about 2 minutes on 2 cores, 30-40 s under BENCH_SMOKE=1.
# Knobs (smoke / full): BENCH_DISKLESS_LINGERS ("50 250" / "50 100 250"),
# BENCH_DISKLESS_RATE (1000 / 2000), BENCH_DISKLESS_PACED_SECONDS (2 / 15),
# BENCH_DISKLESS_MIB (32 / 1024), BENCH_DISKLESS_REPS (1 / 2),
# BENCH_DISKLESS_PARTITIONS (12), BENCH_DISKLESS_CONCURRENCY (2),
# BENCH_DISKLESS_BUFFERED_RECORDS (40000 per client; kgo's default 10,000 is
# about 3 MiB per broker, less than one object), BENCH_DISKLESS_CLIENT_LINGER
# (0s: kgo's default; every row's producer).
set -euo pipefail
export LC_ALL=C
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lingers=${BENCH_DISKLESS_LINGERS:-$(pick "50 250" "50 100 250")}
rate=${BENCH_DISKLESS_RATE:-$(pick 1000 2000)}
paced_seconds=${BENCH_DISKLESS_PACED_SECONDS:-$(pick 2 15)}
mib=${BENCH_DISKLESS_MIB:-$(pick 32 1024)}
reps=${BENCH_DISKLESS_REPS:-$(pick 1 2)}
partitions=${BENCH_DISKLESS_PARTITIONS:-12}
concurrency=${BENCH_DISKLESS_CONCURRENCY:-2}
buffered=${BENCH_DISKLESS_BUFFERED_RECORDS:-40000}
client_linger=${BENCH_DISKLESS_CLIENT_LINGER:-0s}
((reps >= 1)) || die "diskless: BENCH_DISKLESS_REPS=$reps: want >= 1"
start_timeout=60

bucket=strata-bench
access=strata-bench
secret=strata-bench-secret
pids=()   # the brokers, by node id - 1
https=()  # their --http addresses
addrs=()  # their Kafka addresses
etcd_pid='' minio_pid='' socket_watch_pid=''

cleanup() {
	local pid
	[[ -z $socket_watch_pid ]] || kill "$socket_watch_pid" 2>/dev/null || true
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do stop_pid "$pid" 5; done
	stop_pid "${etcd_pid:-}" 10
	stop_pid "${minio_pid:-}" 10
	# The bucket and the classic topics' logs take GiBs that later cases need.
	if [[ -n "${dir:-}" && "${BENCH_KEEP:-}" != 1 ]]; then rm -rf "$dir"; fi
	cleanup_work
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

note() { say "diskless [${SECONDS}s]: $*"; }

# fail MSG [LOG...]: MSG and the logs' tails on stderr, exit 1.
fail() {
	note "$1"
	shift
	local f
	for f in "$@"; do [[ -f $f ]] && tail -n 30 "$f" >&2; done
	exit 1
}

calc() { awk "BEGIN { printf \"$1\", $2 }"; }

minio_binary() {
	local bin=${STRATA_MINIO_BIN:-$tools_bin/minio}
	[[ -x $bin ]] || bin=$(command -v minio || true)
	[[ -n $bin ]] || die "diskless: no MinIO binary (STRATA_MINIO_BIN, $tools_bin/minio or PATH): run scripts/install-minio.sh"
	printf '%s\n' "$bin"
}

start_minio() {
	local bin
	bin=$(minio_binary)
	minio_addr=127.0.0.1:$(free_port)
	MINIO_ROOT_USER=$access MINIO_ROOT_PASSWORD=$secret MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=1 \
		"$bin" server --quiet --address "$minio_addr" "$dir/minio" >"$dir/minio.log" 2>&1 &
	minio_pid=$!
	wait_http_ok "http://$minio_addr/minio/health/ready" "$start_timeout" || fail "MinIO did not start" "$dir/minio.log"
	curl -fsS -X PUT --user "$access:$secret" --aws-sigv4 aws:amz:us-east-1:s3 "http://$minio_addr/$bucket" ||
		fail "making the bucket failed" "$dir/minio.log"
	(umask 077 && printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$access" "$secret" \
		>"$dir/aws-credentials")
	store_url="s3://$bucket?endpoint=http://$minio_addr&region=us-east-1&credentials-file=$dir/aws-credentials"
	note "MinIO on $minio_addr"
}


# start_brokers LINGER_MS: brokers 1..3 on their data dirs (kept across
# restarts), with new ports; sets brokers, addrs, https and pids.
start_brokers() {
	local linger=$1 i addr
	pids=() https=() addrs=()
	for i in 1 2 3; do
		# The last run's line must not be read for this one's: the
		# redirection below truncates only once the child runs.
		rm -f "$dir/broker-$i.out"
		https+=("127.0.0.1:$(free_port)")
		"$STRATA" serve --durability replication --log-level warn --controlled-shutdown-timeout 2s \
			--data-dir "$dir/broker-$i" --etcd "$etcd_endpoint" --cluster bench --node-id "$i" \
			--listen "127.0.0.1:$(free_port)" --http "${https[-1]}" --object-store "$store_url" \
			--default-replication-factor 3 --diskless-append-linger "${linger}ms" --diskless-merge-age 1h \
			>"$dir/broker-$i.out" 2>>"$dir/broker-$i.log" &
		pids+=($!)
	done
	for i in 1 2 3; do
		addr=$(wait_kafka_line "$dir/broker-$i.out" "$start_timeout" "${pids[i - 1]}") ||
			fail "broker $i did not start" "$dir/broker-$i.log"
		addrs+=("$addr")
	done
	brokers=$(IFS=,; printf '%s' "${addrs[*]}")
	note "brokers with --diskless-append-linger ${linger}ms on $brokers"
}

# stop_brokers: SIGTERM to all three at once (their controlled shutdowns
# overlap), each awaited.
stop_brokers() {
	local pid
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do stop_pid "$pid" 20; done
	pids=()
}

# create_topic TOPIC CONFIG...: TOPIC with BENCH_DISKLESS_PARTITIONS
# partitions, RF 3 (which a diskless topic keeps in name only).
create_topic() {
	local topic=$1 args=() c
	shift
	for c in "$@"; do args+=(--config "$c"); done
	"$STRATA" topic create --brokers "$brokers" --partitions "$partitions" --replication-factor 3 "${args[@]}" \
		"$topic" >&2 || fail "topic create $topic failed" "$dir/broker-1.log"
}

diskless_topic() { create_topic "$1" diskless.enable=true; }
classic_topic() { create_topic "$1" remote.storage.enable=false; } # no tier uploads beside the produce

# produce TOPIC ARGS...: strata bench produce (acks=all, 1 KiB records, the
# same clients for every row), printing its summary line.
produce() {
	local topic=$1 out summary
	shift
	out=$("$STRATA" bench produce --brokers "$brokers" --topic "$topic" --partitions "$partitions" \
		--record-size 1024 --acks all --concurrency "$concurrency" --max-buffered-records "$buffered" \
		--linger "$client_linger" "$@" \
		2>>"$dir/bench.log") || { printf '%s\n' "$out" >&2; fail "bench produce to $topic failed" "$dir/bench.log"; }
	summary=$(tail -n 1 <<<"$out")
	[[ $(field "$summary" errors) == 0 ]] || fail "produce errors: $summary"
	printf '%s\n' "$summary"
}

# socket_sample: one line per open TCP connection from one broker to
# another's Kafka port, "LOCAL>PEER BYTES" with BYTES sent and received so
# far, counted on the connecting side (so each connection once).
socket_sample() {
	local pid_list addr_list
	pid_list=$(IFS=,; printf '%s' "${pids[*]}")
	addr_list=$(IFS=,; printf '%s' "${addrs[*]}")
	ss -tinpH state established | awk -v pids="$pid_list" -v addrs="$addr_list" '
		BEGIN { split(pids, p, ","); for (i in p) own["pid=" p[i] ","] = 1; split(addrs, a, ","); for (i in a) peer[a[i]] = 1 }
		/^[^ \t]/ { key = ""; if (!($4 in peer)) next; for (k in own) if (index($0, k)) key = $3 ">" $4; next }
		key != "" {
			s = 0
			for (i = 1; i <= NF; i++) if ($i ~ /^bytes_(sent|received):/) { split($i, kv, ":"); s += kv[2] }
			print key, s
			key = ""
		}'
}

# socket_watch_start FILE: samples the connections between brokers into
# FILE every 0.5 s until socket_watch_stop, so that a connection that closes
# during a run loses at most its last 0.5 s.
socket_watch_start() {
	local file=$1
	socket_sample >"$file"
	echo -- >>"$file"
	# One write per sample, so that the kill never leaves half a line.
	(while :; do s=$(socket_sample) && printf '%s\n--\n' "$s" >>"$file"; sleep 0.5; done) &
	socket_watch_pid=$!
}

# socket_watch_stop FILE: stops the sampler and takes a last sample.
socket_watch_stop() {
	kill "$socket_watch_pid" 2>/dev/null || true
	wait "$socket_watch_pid" 2>/dev/null || true
	socket_watch_pid=
	socket_sample >>"$1"
}

# socket_bytes FILE: the bytes that crossed between brokers while FILE was
# sampled: per connection, its last count less its count in the first
# sample (0 for one opened since).
socket_bytes() {
	awk '$1 == "--" { later = 1; next }
		NF == 2 && $2 ~ /^[0-9]+$/ { if (later) last[$1] = $2; else first[$1] = $2 }
		END { for (k in last) s += last[k] - first[k]; printf "%.0f\n", s }' "$1"
}

# append_histogram: the brokers' strata_diskless_append_latency_seconds
# (arrival of a produce partition to its answer), summed: "le count" lines
# (cumulative), then "sum S" and "count N".
append_histogram() {
	local http
	for http in "${https[@]}"; do curl -fsS "http://$http/metrics"; done | awk '
		index($1, "strata_diskless_append_latency_seconds_bucket{") == 1 {
			le = $1; sub(/.*le="/, "", le); sub(/".*/, "", le); c[le] += $2 }
		$1 == "strata_diskless_append_latency_seconds_sum" { sum += $2 }
		$1 == "strata_diskless_append_latency_seconds_count" { n += $2 }
		END { for (le in c) printf "%s %.0f\n", le, c[le]; printf "sum %.6f\ncount %.0f\n", sum, n }'
}

# append_latency BEFORE AFTER: from two append_histogram outputs, the mean
# and the bucket bound holding the 99th percentile of the produce
# partitions answered in between, as result keys (ms).
append_latency() {
	awk 'NR == FNR { b[$1] = $2; next } { d[$1] = $2 - b[$1] }
		END {
			n = d["count"]; if (n <= 0) exit
			printf "broker_append_mean_ms=%.1f", 1000 * d["sum"] / n
			p99 = "+Inf"; best = -1
			for (le in d) if (le != "sum" && le != "count" && le != "+Inf" && d[le] >= 0.99 * n && (best < 0 || le + 0 < best)) best = le + 0
			if (best >= 0) p99 = 1000 * best
			printf " broker_append_p99_le_ms=%s\n", p99
		}' <(printf '%s\n' "$1") <(printf '%s\n' "$2")
}

brokers_cpu() {
	local pid total=0
	for pid in "${pids[@]}"; do total=$(calc %.2f "$total + $(proc_cpu_s "$pid")"); done
	printf '%s\n' "$total"
}


# paced ROW TOPIC [LINGER_MS]: the paced produce, its row.
paced() {
	local row=$1 topic=$2 linger=${3:-} summary pace_kept extra=() hist0
	hist0=$(append_histogram)
	summary=$(produce "$topic" --records $((rate * paced_seconds)) --rate "$rate")
	# The run's seconds include the last acknowledgement (up to a linger
	# and a PUT), so a client that kept its pace is a second late at most.
	pace_kept=$(calc %.3f "$(field "$summary" records_per_sec) / $rate")
	awk -v k="$pace_kept" -v s="$paced_seconds" 'BEGIN { exit !(k < s / (s + 1)) }' &&
		note "WARNING: the paced producer kept only $pace_kept of its pace: $row measures a backlog"
	if [[ -n $linger ]]; then
		extra=("linger_ms=$linger" "p99_over_linger=$(calc %.3f "$(field "$summary" p99_ms) / $linger")"
			"$(append_latency "$hist0" "$(append_histogram)")")
	fi
	note "$row: $summary"
	result "$row" "$(produce_fields "$summary")" "pace_kept=$pace_kept" "${extra[@]}"
}

# warm_up TOPIC: a short flat-out produce after a restart (connections to
# MinIO and etcd, the clients' metadata), not measured.
warm_up() { produce "$1" --records 2000 >/dev/null; }

# counters TOPIC: the brokers' counters that flat_out compares, summed,
# one "key value" line each: puts, objects, object_bytes, commit_s and
# commits (diskless, every topic), repl and in (TOPIC's replication bytes
# out and bytes in).
counters() {
	local http
	for http in "${https[@]}"; do curl -fsS "http://$http/metrics"; done | awk -v t="topic=\"$1\"" '
		index($1, "strata_diskless_puts_total{") == 1 { c["puts"] += $2 }
		$1 == "strata_diskless_objects_total" { c["objects"] += $2 }
		$1 == "strata_diskless_object_bytes_total" { c["object_bytes"] += $2 }
		$1 == "strata_diskless_commit_latency_seconds_sum" { c["commit_s"] += $2 }
		$1 == "strata_diskless_commit_latency_seconds_count" { c["commits"] += $2 }
		index($1, "strata_topic_replication_bytes_out_total{") == 1 && index($1, t) { c["repl"] += $2 }
		index($1, "strata_topic_bytes_in_total{") == 1 && index($1, t) { c["in"] += $2 }
		END { split("puts objects object_bytes commit_s commits repl in", k, " ")
			for (i = 1; i in k; i++) printf "%s %.6f\n", k[i], c[k[i]] }'
}

declare -A out # flat-out run name -> its result keys
# flat_out NAME TOPIC diskless|classic: one flat-out run of
# BENCH_DISKLESS_MIB MiB, its measurements in out[NAME].
flat_out() {
	local name=$1 topic=$2 kind=$3 before cpu0 minio0 summary
	before=$(counters "$topic")
	socket_watch_start "$dir/sockets-$name"
	cpu0=$(brokers_cpu) minio0=$(proc_cpu_s "$minio_pid")
	summary=$(produce "$topic" --records $((mib * 1024)))
	# Followers may still be fetching the last batches: their bytes belong
	# to this run.
	sleep 1
	local -A d=()
	local k v
	while read -r k v; do d[$k]=$v; done < <(awk 'NR == FNR { b[$1] = $2; next } { printf "%s %.6f\n", $1, $2 - b[$1] }' \
		<(printf '%s\n' "$before") <(counters "$topic"))
	socket_watch_stop "$dir/sockets-$name"
	local bytes keys
	bytes=$(field "$summary" bytes)
	keys="$(produce_fields "$summary") seconds=$(field "$summary" seconds)"
	if [[ $kind == diskless ]]; then
		keys+=" puts=$(calc %.0f "${d[puts]}") puts_per_gib=$(calc %.1f "${d[puts]} * 1073741824 / $bytes")"
		keys+=" object_mib=$(calc %.2f "${d[object_bytes]} / (${d[objects]} > 0 ? ${d[objects]} : 1) / 1048576")"
		keys+=" commit_mean_ms=$(calc %.1f "1000 * ${d[commit_s]} / (${d[commits]} > 0 ? ${d[commits]} : 1)")"
	fi
	keys+=" interbroker_bytes_per_byte=$(calc %.4g "${d[repl]} / (${d[in]} > 0 ? ${d[in]} : 1)")"
	keys+=" socket_bytes_per_byte=$(calc %.4g "$(socket_bytes "$dir/sockets-$name") / $bytes")"
	keys+=" broker_cpu_s=$(calc %.2f "$(brokers_cpu) - $cpu0") minio_cpu_s=$(calc %.2f "$(proc_cpu_s "$minio_pid") - $minio0")"
	out[$name]=$keys
	note "$name: $keys"
}

# best PREFIX: the run PREFIX1..PREFIX$reps with the highest MB/s.
best() {
	local r won="" wonv=-1 v
	for ((r = 1; r <= reps; r++)); do
		v=$(field "${out[$1$r]}" mb_per_sec)
		if awk -v a="$v" -v b="$wonv" 'BEGIN { exit !(a > b) }'; then won=$1$r wonv=$v; fi
	done
	printf '%s' "$won"
}

main() {
	ensure_strata
	dir=$BENCH_WORK/diskless
	mkdir -p "$dir"
	start_minio
	start_etcd "$dir" || fail "etcd did not start"
	local linger last=""
	for linger in $lingers; do
		[[ -z $last ]] || stop_brokers
		start_brokers "$linger"
		diskless_topic "warm-$linger"
		warm_up "warm-$linger"
		diskless_topic "paced-$linger"
		paced "diskless-linger-$linger" "paced-$linger" "$linger"
		last=$linger
	done
	classic_topic classic-paced
	warm_up classic-paced
	paced classic-rf3-paced classic-paced
	local r
	for ((r = 1; r <= reps; r++)); do
		diskless_topic "flat-diskless-$r"
		flat_out "diskless$r" "flat-diskless-$r" diskless
		classic_topic "flat-classic-$r"
		flat_out "classic$r" "flat-classic-$r" classic
	done
	local d c
	d=$(best diskless) c=$(best classic)
	note "runs: diskless MB/s $(for ((r = 1; r <= reps; r++)); do printf '%s ' "$(field "${out[diskless$r]}" mb_per_sec)"; done)" \
		"classic MB/s $(for ((r = 1; r <= reps; r++)); do printf '%s ' "$(field "${out[classic$r]}" mb_per_sec)"; done)"
	result diskless-flat-out "${out[$d]}" "linger_ms=$last" base=classic-rf3-flat-out target=ge:0.5
	result classic-rf3-flat-out "${out[$c]}"
}

main "$@"
