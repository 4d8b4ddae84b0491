#!/usr/bin/env bash
# End-to-end: a master and three chunkservers as separate OS processes on
# loopback, with mutual TLS from certificates made by `chunkfs cert`, driven
# through the CLI: put a 100 MB file, get it back and compare
# checksums, append records and read them back, kill one chunkserver with
# SIGKILL and read again. Everything it starts it stops.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d /tmp/chunkfs-e2e.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/chunkfs" ./cmd/chunkfs
bin="$work/chunkfs"

# A port base unlikely to collide; each process gets base+i. Below the
# kernel's ephemeral range (32768 up), where an outgoing connection's port
# made the master's listen fail ("address already in use"), and below the
# Go tests' loopback ports (20000-31999).
base=$((12000 + RANDOM % 7990))
master="127.0.0.1:$base"
export CHUNKFS_MASTER="$master"

# A cluster CA, a certificate for each process, one for the client commands.
ca="$work/ca"
"$bin" cert init --dir "$ca" >/dev/null
"$bin" cert issue --dir "$ca" --role master --name master --host 127.0.0.1 >/dev/null
for i in 1 2 3; do
	"$bin" cert issue --dir "$ca" --role chunkserver --name "cs$i" --host 127.0.0.1 >/dev/null
done
"$bin" cert issue --dir "$ca" --role client --name root --uid 0 >/dev/null
export CHUNKFS_TLS_DIR="$ca/root"

"$bin" master --dir "$work/master" --listen "$master" --tls-dir "$ca/master" >"$work/master.log" 2>&1 &
pids+=($!)
for i in 1 2 3; do
	"$bin" chunkserver --dir "$work/cs$i" --listen "127.0.0.1:$((base + i))" --master "$master" --rack "rack$i" \
		--tls-dir "$ca/cs$i" >"$work/cs$i.log" 2>&1 &
	pids+=($!)
done
cs3=${pids[3]}

fail() {
	echo "e2e: $*" >&2
	for f in "$work"/*.log; do echo "--- $f"; tail -n 20 "$f"; done >&2
	exit 1
}

# Wait until the master reports three live chunkservers.
for _ in $(seq 1 100); do
	live=$("$bin" admin report --json 2>/dev/null | grep -o '"alive": *true' | wc -l || true)
	[ "$live" -ge 3 ] && break
	sleep 0.2
done
[ "$live" -ge 3 ] || fail "cluster did not come up (live chunkservers: $live)"

head -c 100000000 /dev/urandom >"$work/big"
want=$(sha256sum <"$work/big" | cut -d' ' -f1)

"$bin" mkdir -p /e2e/data || fail "mkdir"
"$bin" put "$work/big" /e2e/data/big || fail "put"
"$bin" get /e2e/data/big "$work/big.out" || fail "get"
got=$(sha256sum <"$work/big.out" | cut -d' ' -f1)
[ "$got" = "$want" ] || fail "checksum after get: $got != $want"
"$bin" ls -l /e2e/data | grep -q big || fail "ls -l does not show the file"
if out=$("$bin" ls --insecure /e2e/data 2>&1); then fail "a plain-TCP client was served: $out"; fi
echo "$out" | grep -q "server requires TLS" || fail "a plain-TCP client was refused without saying why: $out"

seq 1 1000 | sed 's/^/record-/' | "$bin" append /e2e/log || fail "append"
n=$("$bin" records /e2e/log | sort -u | wc -l)
[ "$n" = 1000 ] || fail "records: $n distinct, want 1000"

kill -9 "$cs3"
wait "$cs3" 2>/dev/null || true
rm -f "$work/big.out"
"$bin" get /e2e/data/big "$work/big.out" || fail "get after killing a chunkserver"
got=$(sha256sum <"$work/big.out" | cut -d' ' -f1)
[ "$got" = "$want" ] || fail "checksum after killing a chunkserver: $got != $want"
n=$("$bin" records /e2e/log | sort -u | wc -l)
[ "$n" = 1000 ] || fail "records after killing a chunkserver: $n distinct"

echo "e2e: 1 passed, 0 failed"
