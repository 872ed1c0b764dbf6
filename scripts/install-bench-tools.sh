#!/usr/bin/env bash
# install-bench-tools.sh installs the peers and probes the benchmark suite
# (test/bench/baselines.sh) compares Strata with:
#
#   iperf3       Debian package (apt-get; needs root). The package asks through
#                debconf whether to start an iperf3 daemon: the answer is
#                preseeded to false, so it never prompts and no daemon runs.
#   nats-server  github.com/nats-io/nats-server/v2 at a pinned version, built
#                into ./.tools/bin (git-ignored). Debian's nats-server (2.9)
#                lacks the JetStream option `sync_interval: always`, which the
#                fsync-per-write comparison needs.
#   nats         natscli (github.com/nats-io/natscli/nats) at a pinned version,
#                built into ./.tools/bin: its `nats bench` drives JetStream.
#
# Idempotent: each tool is skipped when present at the pinned version (checked
# with `nats-server --version` / `nats --version`). Progress goes to stderr;
# exits non-zero when anything fails. The go builds take a few minutes on a
# small machine.
#
# Usage: scripts/install-bench-tools.sh   (from anywhere inside the repo)
#        NATS_SERVER_VERSION=v2.x.y NATSCLI_VERSION=v0.x.y ...   (override the pins)
set -euo pipefail

NATS_SERVER_VERSION="${NATS_SERVER_VERSION:-v2.15.2}"
NATSCLI_VERSION="${NATSCLI_VERSION:-v0.5.0}"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools_bin="${repo_root}/.tools/bin"

say() { printf 'install-bench-tools: %s\n' "$*" >&2; }

install_iperf3() {
	if command -v iperf3 >/dev/null 2>&1; then
		say "iperf3 is already installed ($(command -v iperf3))"
		return 0
	fi
	if [[ $(id -u) != 0 ]]; then
		say "iperf3 is missing and installing it needs root (apt-get install iperf3)"
		return 1
	fi
	say "installing iperf3 with apt-get"
	echo 'iperf3 iperf3/start_daemon boolean false' | debconf-set-selections
	export DEBIAN_FRONTEND=noninteractive
	# A stale package index makes install fail with 404s: update once and retry.
	if ! apt-get install -y -q --no-install-recommends iperf3 >&2; then
		apt-get update -q >&2
		apt-get install -y -q --no-install-recommends iperf3 >&2
	fi
	command -v iperf3 >/dev/null 2>&1 || { say "iperf3 still missing after apt-get"; return 1; }
	say "installed iperf3 ($(iperf3 --version 2>&1 | head -n 1))"
}

# tool_version BINARY: the version the binary reports, with a leading "v"
# ("nats-server: v2.15.2" and "0.5.0"/"v0.5.0" both normalised), or nothing.
tool_version() {
	local out
	out=$("$1" --version 2>&1) || return 0
	out=$(grep -oE 'v?[0-9]+\.[0-9]+\.[0-9]+[^ ]*' <<<"$out" | head -n 1)
	[[ -n "$out" ]] && printf 'v%s\n' "${out#v}"
}

# go_install NAME PACKAGE VERSION: builds PACKAGE@VERSION into .tools/bin/NAME
# unless that binary already reports VERSION.
go_install() {
	local name=$1 pkg=$2 version=$3
	local binary="$tools_bin/$name" got
	if [[ -x "$binary" && "$(tool_version "$binary")" == "$version" ]]; then
		say "$binary is already at $version"
		return 0
	fi
	mkdir -p "$tools_bin"
	say "building $pkg@$version into $tools_bin (takes a few minutes)"
	# `go install pkg@version` ignores the repo's go.mod. GOTOOLCHAIN=local:
	# build with the installed Go; CGO off: the binary needs nothing from the host.
	(cd "$repo_root" && GOBIN="$tools_bin" GOTOOLCHAIN=local CGO_ENABLED=0 \
		nice -n 10 go install -trimpath "$pkg@$version") >&2
	got=$(tool_version "$binary")
	if [[ "$got" != "$version" ]]; then
		say "built $binary reports version '$got', want $version"
		return 1
	fi
	say "installed $binary ($version)"
}

install_iperf3
go_install nats-server github.com/nats-io/nats-server/v2 "$NATS_SERVER_VERSION"
go_install nats github.com/nats-io/natscli/nats "$NATSCLI_VERSION"
