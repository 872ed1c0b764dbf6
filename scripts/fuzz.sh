#!/usr/bin/env bash
# Runs every Go fuzz target of the repository for a bounded time each and
# fails if any finds a crash (a fuzz target for every decoder of
# outside bytes, each run for a bounded time in CI).
#
# Targets are discovered, not listed: every package with a `func Fuzz...` in
# a _test.go file is asked for its targets with `go test -list '^Fuzz'`.
# Each target starts from its committed corpus (testdata/fuzz/<Name>/) and
# its f.Add seeds. A crash makes `go test -fuzz` write the failing input to
# that directory, where it stays as a regression seed once committed.
#
# Environment:
#   FUZZTIME   fuzzing time per target (go's -fuzztime; default 5s)
#   FUZZ_JOBS  targets fuzzed at once, one worker each (default 2)
#   FUZZ_MATCH only targets whose "package/Name" matches this regexp
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

fuzztime=${FUZZTIME:-5s}
jobs=${FUZZ_JOBS:-2}
match=${FUZZ_MATCH:-.}
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# discover prints "dir name" per fuzz target: one `go test -list` over all
# packages that declare one (built in parallel; the unit tests reuse the
# compiled packages). Its output is each package's names, then "ok <pkg>".
discover() {
	local dirs=() line names=() pkg name
	mapfile -t dirs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
	((${#dirs[@]} > 0)) || return 0
	if ! go test -list '^Fuzz' "${dirs[@]}" >"$logdir/list" 2>&1; then
		cat "$logdir/list" >&2
		echo "fuzz.sh: listing the fuzz targets failed" >&2
		return 1
	fi
	local module
	module=$(go list -m)
	while read -r line; do
		case "$line" in
		Fuzz*) names+=("$line") ;;
		ok*)
			pkg=$(awk '{print $2}' <<<"$line")
			for name in "${names[@]}"; do
				local dir=".${pkg#"$module"}"
				if [[ "${dir#./}/$name" =~ $match ]]; then
					echo "$dir $name"
				fi
			done
			names=()
			;;
		esac
	done <"$logdir/list"
}

# fuzz_one DIR NAME LOG: one target, one worker, bounded time.
fuzz_one() {
	go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" -parallel 1 -timeout 10m "$1" >"$3" 2>&1
}

# deadline_only: the run failed only with "context deadline exceeded" —
# Go's coordinator reports that when -fuzztime ends while a worker is still
# running an input (seen under load) — and found no failing input, which go
# test announces as "Failing input written to ..." (a hang is reported as
# "fuzzing process hung", with its input, too).
deadline_only() {
	grep -q 'context deadline exceeded' "$1" && ! grep -q 'Failing input written\|fuzzing process hung\|panic:' "$1"
}

main() {
	local targets=() failed=() pids=() names=() logs=()
	discover >"$logdir/targets" || return 1
	mapfile -t targets <"$logdir/targets"
	if ((${#targets[@]} == 0)); then
		echo "fuzz.sh: no fuzz targets found" >&2
		return 1
	fi
	echo "fuzz.sh: ${#targets[@]} targets, ${fuzztime} each, ${jobs} at a time"
	local i=0 t dir name log
	for t in "${targets[@]}"; do
		read -r dir name <<<"$t"
		log="$logdir/$i.log"
		fuzz_one "$dir" "$name" "$log" &
		pids+=($!) names+=("${dir#./}/$name") logs+=("$log")
		i=$((i + 1))
		while (($(jobs -rp | wc -l) >= jobs)); do
			wait -n || true
		done
	done
	for i in "${!pids[@]}"; do
		if wait "${pids[$i]}"; then
			echo "ok   ${names[$i]}"
		elif deadline_only "${logs[$i]}"; then
			echo "ok   ${names[$i]} (go's fuzzer reported only \"context deadline exceeded\" at the end of -fuzztime: no crash)"
		else
			echo "FAIL ${names[$i]}"
			cat "${logs[$i]}"
			failed+=("${names[$i]}")
		fi
	done
	if ((${#failed[@]} > 0)); then
		echo "fuzz.sh: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}"
		return 1
	fi
	echo "fuzz.sh: ${#targets[@]} passed, 0 failed"
}

main "$@"
