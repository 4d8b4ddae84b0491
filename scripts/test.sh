#!/usr/bin/env bash
# The whole chunkfs test suite: installs the system packages the tests need
# (as root, on Debian), vets, runs every Go test under the race detector,
# then an end-to-end run of real processes. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v fio >/dev/null 2>&1 || need+=(fio)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "== installing ${need[*]}"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	else
		echo "== missing ${need[*]} (not root: tests that need them will be skipped)"
	fi
fi

echo "== go vet"
go vet ./...
echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change: $bad"; exit 1; fi
echo "== go test -race"
go test -race -timeout 30m ./...
echo "== end to end"
bash scripts/e2e.sh
