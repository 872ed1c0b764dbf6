#!/usr/bin/env bash
# install-seaweedfs.sh builds a pinned SeaweedFS (`weed`) into ./.tools/bin/weed
# (git-ignored): the second real S3 server of the object-store contract tests
# and of one tiering e2e test (tier/tiertest starts it on loopback ports).
#
# SeaweedFS publishes no Go module tags, so the pin is a pseudo-version of
# github.com/seaweedfs/seaweedfs from the Go module proxy. Its go.mod has
# replace directives, which `go install pkg@version` refuses, so the module is
# downloaded, copied out of the read-only module cache and built in place with
# the local Go toolchain. The build takes several minutes on a small machine
# the first time (the Go build cache makes later ones fast). The script is
# idempotent: .tools/bin/weed.version records the pin of the binary there.
#
# Usage: scripts/install-seaweedfs.sh        (from anywhere inside the repo)
#        WEED_VERSION=v0.0.0-... scripts/install-seaweedfs.sh   (override the pin)
set -euo pipefail

WEED_VERSION="${WEED_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
module=github.com/seaweedfs/seaweedfs

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools_bin="${repo_root}/.tools/bin"
binary="${tools_bin}/weed"
stamp="${binary}.version"

if [[ -x "$binary" && -f "$stamp" && "$(<"$stamp")" == "$WEED_VERSION" ]]; then
	echo "install-seaweedfs: $binary is already at $WEED_VERSION"
	exit 0
fi

mkdir -p "$tools_bin"
echo "install-seaweedfs: building ${module}@${WEED_VERSION} into $tools_bin (takes a few minutes)"
src_dir=$(cd "$repo_root" && go mod download -json "${module}@${WEED_VERSION}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d "$src_dir" ]] || { echo "install-seaweedfs: module source not found" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src_dir" "$work/src"
chmod -R u+w "$work/src"
# GOTOOLCHAIN=local: build with the installed Go. CGO is off so the binary
# needs nothing from the host. GOFLAGS is cleared so a caller's -mod setting
# does not reach SeaweedFS's own module.
(
	cd "$work/src"
	GOFLAGS= GOTOOLCHAIN=local CGO_ENABLED=0 nice -n 10 go build -trimpath -o "$binary.tmp" ./weed
)
mv "$binary.tmp" "$binary"
echo "$WEED_VERSION" >"$stamp"
"$binary" version
echo "install-seaweedfs: installed $binary ($WEED_VERSION)"
