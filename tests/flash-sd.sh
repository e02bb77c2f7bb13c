#!/usr/bin/env bash
# Tests scripts/flash-sd's refusals and its writes, on loop devices.
#
# Unprivileged: a missing image, an empty image, a device node that is not
# there or not a block device, the host's root disk. As root with loop
# devices (CI): a partition instead of the disk, a mounted file system, a
# disk that is not removable, then a real write with verification, and an
# update that keeps the data partition. Every refusal must leave the
# target untouched.
set -euo pipefail

for tool in sfdisk findmnt lsblk; do
    command -v "$tool" >/dev/null || {
        echo "tests/flash-sd.sh needs $tool (Debian: apt-get install fdisk util-linux)" >&2; exit 1; }
done
repo=$(cd "$(dirname "$0")/.." && pwd)
flash="$repo/scripts/flash-sd"
work=$(mktemp -d)
loops=()
mounted=""
cleanup() {
    [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
failures=0
passed=0

# rescan DISK: the kernel re-reads the partition table (partx adds what
# blockdev's re-read leaves out on loop devices).
rescan() {
    blockdev --rereadpt "$1" 2>/dev/null || true
    partx -u "$1" 2>/dev/null || true
    udevadm settle 2>/dev/null || true
}

# refuses WHAT EXPECTED-MESSAGE ARGS...: flash-sd must exit non-zero and say why.
refuses() {
    local what=$1 expect=$2
    shift 2
    local out status=0
    out=$("$flash" --yes "$@" 2>&1) || status=$?
    if [ "$status" -eq 0 ]; then
        echo "FAIL: $what: flash-sd accepted it"; failures=$((failures + 1))
    elif ! grep -q -- "$expect" <<< "$out"; then
        echo "FAIL: $what: the message does not say '$expect': $out"; failures=$((failures + 1))
    else
        echo "ok: $what: $(tail -1 <<< "$out")"; passed=$((passed + 1))
    fi
}

check() { # WHAT CONDITION...
    local what=$1
    shift
    if "$@"; then
        echo "ok: $what"; passed=$((passed + 1))
    else
        echo "FAIL: $what"; failures=$((failures + 1))
    fi
}

# An image with the card's layout: boot, root, data.
image="$work/sdcard.img"
truncate -s 24M "$image"
printf 'label: dos\n1M,6M,c,*\n7M,8M,83\n15M,8M,83\n' | sfdisk -q "$image"
# Recognisable contents for each partition.
for n in 1 2 3; do
    start=$(( (n == 1 ? 1 : (n == 2 ? 7 : 15)) * 2048 ))
    head -c 1M /dev/urandom | dd of="$image" bs=512 seek="$start" conv=notrunc status=none
done
empty="$work/empty.img"
: > "$empty"

refuses "a missing image" "no image at" "$work/nothing.img" /dev/null
refuses "an empty image" "is empty" "$empty" /dev/null
refuses "a device node that is not there" "not a block device" "$image" /dev/fabricd-test-no-such-disk
check "... and no file was created in its place" test ! -e /dev/fabricd-test-no-such-disk
refuses "a regular file as the device" "not a block device" "$image" "$work/sdcard.img"
root_src=$(findmnt -n -o SOURCE / || true)
if [ -b "$root_src" ]; then
    root_disk=/dev/$(lsblk -no PKNAME "$root_src" 2>/dev/null | head -1)
    [ "$root_disk" = /dev/ ] && root_disk=$root_src
    refuses "the host's root disk ($root_disk)" "holds the host's root file system" "$image" "$root_disk"
else
    echo "note: / is not on a block device here ($root_src); the root-disk refusal is not exercised"
fi

if [ "$(id -u)" -ne 0 ] || ! losetup -f >/dev/null 2>&1; then
    echo "note: not root or no loop devices: the partition, mounted, removable and write cases were not run"
else
    card="$work/card.img"
    truncate -s 32M "$card"
    loop=$(losetup -f --show -P "$card")
    loops+=("$loop")
    dd if="$image" of="$loop" bs=1M conv=fsync status=none
    rescan "$loop"
    before=$(sha256sum < "$card")

    refuses "a partition instead of the disk" "is a partition" "$image" "${loop}p1"
    check "... and no file was created for a missing partition node" test ! -f "${loop}p9"
    refuses "a loop disk, which is not removable" "does not report itself removable" "$image" "$loop"
    check "those refusals wrote nothing" test "$(sha256sum < "$card")" = "$before"

    mkfs.ext4 -q -F "${loop}p3"
    mkdir -p "$work/mnt"
    mount "${loop}p3" "$work/mnt"
    mounted="$work/mnt"
    # Mounting writes to partition 3 itself; the boot and root partitions
    # (the first 15 MiB) are what a write would have changed.
    head_before=$(head -c 15M "$card" | sha256sum)
    refuses "a disk with a mounted file system" "has a mounted file system" --non-removable "$image" "$loop"
    check "that refusal wrote nothing" test "$(head -c 15M "$card" | sha256sum)" = "$head_before"
    umount "$work/mnt"
    mounted=""

    # A full write, verified by flash-sd and here.
    out=$("$flash" --yes --non-removable "$image" "$loop" 2>&1)
    check "a full write reports verification" grep -q "written and verified" <<< "$out"
    check "the card starts with the image" cmp -n "$(stat -c %s "$image")" "$image" "$card"

    # Data written on the board survives an update.
    rescan "$loop"
    head -c 1M /dev/urandom > "$work/data.bin"
    dd if="$work/data.bin" of="${loop}p3" conv=fsync status=none
    head -c 1M /dev/urandom | dd of="$image" bs=512 seek=$((7 * 2048)) conv=notrunc status=none
    out=$("$flash" --yes --non-removable --update "$image" "$loop" 2>&1)
    check "an update reports verification" grep -q "written and verified" <<< "$out"
    check "the update wrote the new root partition" \
        cmp -n $((8 * 1024 * 1024)) <(dd if="$image" bs=1M skip=7 count=8 status=none) "${loop}p2"
    check "the update kept the data partition" \
        cmp -n $((1024 * 1024)) "$work/data.bin" "${loop}p3"

    # An update onto a card of another layout is refused.
    printf 'label: dos\n1M,4M,c,*\n5M,8M,83\n13M,8M,83\n' | sfdisk -q "$loop"
    rescan "$loop"
    refuses "an update onto another layout" "differs from the image" --non-removable --update "$image" "$loop"
fi

echo "flash-sd tests: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
