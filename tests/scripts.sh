#!/usr/bin/env bash
# The board scripts explain themselves and refuse bad input with a reason:
# every script's --help; unknown options; deploy, rotate and logs against a
# board that is not there (nothing half-installed, a clear message);
# build-image without a Buildroot tree; cross-test with a target that is
# not a board's.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1
failures=0
passed=0

# expect STATUS MESSAGE CMD...: CMD exits with STATUS (or any non-zero for
# "fail") and its output contains MESSAGE.
expect() {
    local want=$1 message=$2 out status
    shift 2
    out=$("$@" 2>&1 < /dev/null)
    status=$?
    if { [ "$want" = fail ] && [ "$status" -eq 0 ]; } || { [ "$want" != fail ] && [ "$status" -ne "$want" ]; }; then
        echo "FAIL: $*: exit $status, expected $want: $out"; failures=$((failures + 1))
    elif ! grep -q -- "$message" <<< "$out"; then
        echo "FAIL: $*: output lacks '$message': $out"; failures=$((failures + 1))
    else
        echo "ok: $* -> $status, $(grep -m1 -- "$message" <<< "$out")"; passed=$((passed + 1))
    fi
}

for s in scripts/build-image scripts/flash-sd scripts/deploy scripts/rotate scripts/logs \
         scripts/vendor-crates scripts/cross-test scripts/bench-ladder scripts/bench-serve \
         scripts/bench-rotation scripts/bench-abuse scripts/bench-typists scripts/profile-serve \
         scripts/build-models scripts/fuzz scripts/train-lm scripts/arm-cost; do
    expect 0 "Usage" "$s" --help
done
for s in scripts/build-image scripts/flash-sd scripts/deploy scripts/rotate scripts/logs scripts/cross-test; do
    expect 2 "" "$s" --no-such-option
done
# The fabric's time is one of two, named (scripts/lib/fabric-time.sh), before
# anything is built or started.
for s in scripts/bench-ladder scripts/bench-typists scripts/soak; do
    expect 2 "engine or fixed, not bogus" "$s" --fabric-time bogus
done
for s in scripts/bench-ladder scripts/bench-typists; do
    expect 2 "synced, uncached or coherent, not bogus" "$s" --dma bogus
done

# Port 1 on loopback: nothing listens, the connection is refused at once.
unreachable=(--ssh-opts "-o Port=1" 127.0.0.1)
expect 1 "cannot reach root@127.0.0.1 over SSH" scripts/deploy --no-build "${unreachable[@]}"
expect 255 "cannot reach root@127.0.0.1 over SSH" scripts/rotate "${unreachable[@]}" kjv
expect 255 "cannot reach root@127.0.0.1 over SSH" scripts/logs "${unreachable[@]}"
expect 2 "takes a positive whole number" scripts/train-lm --steps 0
expect 2 "--kernel counts armv7 keystrokes" scripts/arm-cost --kernel --targets aarch64
expect 2 "--kernel counts armv7 keystrokes" scripts/arm-cost --kernel --keystrokes 0
expect 2 "is not a whole number" scripts/arm-cost --connections many
expect 2 "is not a model name" scripts/rotate 127.0.0.1 '../../etc/passwd'
expect 2 "takes a slot number" scripts/rotate 127.0.0.1 kjv --slot one
expect 2 "--target must be" scripts/deploy --target x86_64-unknown-linux-gnu 127.0.0.1

expect 2 "is not a Buildroot tree" scripts/build-image --buildroot /nonexistent --board kv260
fake_br=$(mktemp -d)
trap 'rm -rf "$fake_br"' EXIT
mkdir -p "$fake_br/package" && touch "$fake_br/Makefile"
expect 2 "--board must be kv260 or zed" scripts/build-image --buildroot "$fake_br" --board zcu102
expect 2 "is not a board target" scripts/cross-test x86_64-unknown-linux-gnu
expect 2 "no target 'nope'" scripts/fuzz nope
expect 2 "whole number of seconds" scripts/fuzz --seconds soon

# post-build.sh twice on one target directory, as Buildroot runs it on a
# rebuild: keys given the first time, none the second. The second image
# must not keep the first one's keys.
post_build() {
    local out status
    out=$(TARGET_DIR="$pb/target" BINARIES_DIR="$pb/images" BASE_DIR="$pb" \
        sh buildroot/board/common/post-build.sh "$pb/target" ttyPS0 mmcblk1p2 mmcblk1p3 kv260 2>&1)
    status=$?
    [ "$status" -eq 0 ] || { echo "FAIL: post-build.sh: exit $status: $out"; failures=$((failures + 1)); return 1; }
}
pb=$(mktemp -d)
trap 'rm -rf "$fake_br" "$pb"' EXIT
mkdir -p "$pb/target/etc" "$pb/images" && touch "$pb/target/etc/fstab"
echo "ssh-ed25519 AAAA-earlier-build" > "$pb/authorized_keys"
if post_build; then
    if [ -f "$pb/target/etc/fabricd/authorized_keys" ]; then
        echo "ok: post-build.sh installs the keys it is given"; passed=$((passed + 1))
    else
        echo "FAIL: post-build.sh did not install $pb/authorized_keys"; failures=$((failures + 1))
    fi
fi
rm "$pb/authorized_keys"
if post_build; then
    if [ -e "$pb/target/etc/fabricd/authorized_keys" ]; then
        echo "FAIL: post-build.sh without keys kept an earlier build's: $(cat "$pb/target/etc/fabricd/authorized_keys")"
        failures=$((failures + 1))
    else
        echo "ok: post-build.sh without keys leaves none from an earlier build"; passed=$((passed + 1))
    fi
fi

echo "script tests: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
