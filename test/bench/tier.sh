#!/usr/bin/env bash
# The tiered-storage benchmark, a thin wrapper: the
# measurements live in test/bench/cold.sh (the performance suite's case for
# (d) cold catch-up and (e) hot tail with a cold backfill; see its
# header for what one run does and its BENCH_COLD_* knobs). This runs it
# alone and prints its result rows as a table with the ratios to their base
# rows. It asserts nothing: a benchmark prints numbers.
#
# The knobs of the old script map onto cold.sh's: BENCH_MIB, BENCH_PARTITIONS,
# BENCH_SEGMENT_BYTES, BENCH_LOCAL_RETENTION_MS, BENCH_RATE,
# BENCH_HOT_SECONDS, BENCH_DURABILITY, BENCH_FETCH_PARTITION_BYTES,
# BENCH_BACKFILL_CLIENT (raw or kgo) and BENCH_SERVE_FLAGS set the
# BENCH_COLD_ variable of the same name when that one is unset.
# BENCH_KEEP=1 keeps the work directory (logs, data, profiles).
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for knob in MIB PARTITIONS SEGMENT_BYTES LOCAL_RETENTION_MS RATE HOT_SECONDS DURABILITY \
	FETCH_PARTITION_BYTES BACKFILL_CLIENT SERVE_FLAGS; do
	old=BENCH_$knob new=BENCH_COLD_$knob
	if [[ -n "${!old:-}" && -z "${!new:-}" ]]; then export "$new=${!old}"; fi
done

rows=$(bash "$here/cold.sh")

# The table: each row's numbers, and for rows with a base the ratio of the
# compared metric (mb_per_sec unless metric= says) and whether the target holds.
awk '
function kv(line, key,   f, i, nf) {
	nf = split(line, f, " ")
	for (i = 1; i <= nf; i++) if (index(f[i], key "=") == 1) return substr(f[i], length(key) + 2)
	return ""
}
/^result / {
	row = kv($0, "row"); n[++rows] = row; line[row] = $0
}
END {
	printf "%-24s %10s %8s %8s %8s  %s\n", "row", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "vs base"
	for (i = 1; i <= rows; i++) {
		r = n[i]; l = line[r]; cmp = ""
		base = kv(l, "base")
		if (base != "") {
			metric = kv(l, "metric"); if (metric == "") metric = "mb_per_sec"
			b = kv(line[base], metric); v = kv(l, metric)
			if (b + 0 > 0) cmp = sprintf("%s %s/%s = %.2f", metric, r, base, v / b)
			t = kv(l, "target")
			if (t != "" && b + 0 > 0) {
				split(t, tt, ":"); ok = (tt[1] == "ge") ? (v / b >= tt[2]) : (v / b <= tt[2])
				cmp = cmp sprintf(" (target %s %s: %s)", tt[1] == "ge" ? ">=" : "<=", tt[2], ok ? "holds" : "MISSED")
			}
		}
		printf "%-24s %10s %8s %8s %8s  %s\n", r, kv(l, "mb_per_sec"), kv(l, "p50_ms"), kv(l, "p99_ms"), kv(l, "p999_ms"), cmp
	}
	print "\nMB/s = 10^6 B/s of segment-object bytes (cold rows and the raw GET count the same objects)."
}' <<<"$rows"
