#!/usr/bin/env bash
# install-minio.sh builds a pinned MinIO server into ./.tools/bin/minio (git-ignored)
# for the tier package's tests (tier/tiertest starts it on a loopback port).
#
# MinIO publishes no semver tags, so the pin is a Go pseudo-version of
# github.com/minio/minio fetched through the Go module proxy and compiled with
# the local Go toolchain. The build takes several minutes on a small machine;
# the script is idempotent and skips the build when the binary already
# reports the pinned module version (checked with `go version -m`).
#
# Usage: scripts/install-minio.sh        (from anywhere inside the repo)
#        MINIO_VERSION=v0.0.0-... scripts/install-minio.sh   (override the pin)
set -euo pipefail

MINIO_VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools_bin="${repo_root}/.tools/bin"
binary="${tools_bin}/minio"

installed_version() {
	# Prints the module version embedded in the binary, or nothing.
	go version -m "$binary" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/minio/minio" { print $3 }'
}

if [[ -x "$binary" && "$(installed_version)" == "$MINIO_VERSION" ]]; then
	echo "install-minio: $binary is already at $MINIO_VERSION"
	exit 0
fi

mkdir -p "$tools_bin"
echo "install-minio: building github.com/minio/minio@$MINIO_VERSION into $tools_bin (takes a few minutes)"
# `go install pkg@version` ignores the surrounding module, so the repo's go.mod
# is neither read nor modified. GOTOOLCHAIN=local: build with the installed Go
# (1.26) even though MinIO's go.mod names an older toolchain. CGO is off so the
# binary needs nothing from the host.
(
	cd "$repo_root"
	GOBIN="$tools_bin" GOTOOLCHAIN=local CGO_ENABLED=0 \
		nice -n 10 go install -trimpath "github.com/minio/minio@${MINIO_VERSION}"
)

got="$(installed_version)"
if [[ "$got" != "$MINIO_VERSION" ]]; then
	echo "install-minio: built binary reports version '$got', want $MINIO_VERSION" >&2
	exit 1
fi
echo "install-minio: installed $binary ($MINIO_VERSION)"
