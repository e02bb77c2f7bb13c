# Shared by the benchmark scripts: build, start and stop a daemon on the
# simulated fabric, and describe the machine. Sourced, not run.
# shellcheck shell=bash

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin="$repo/target/release"
work=$(mktemp -d)
pids=()

cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

build() {
    cargo build --release --quiet --manifest-path "$repo/Cargo.toml" -p fabricd -p ladder
}

machine() {
    echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem:/ {print $2}') GiB, Linux $(uname -r)"
}

# shellcheck source=scripts/lib/result-name.sh
source "$(dirname "${BASH_SOURCE[0]}")/result-name.sh"

commit() {
    # Earlier results being replaced do not count as changes.
    echo "$(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet -- . ':!results' || echo ' (with uncommitted changes)')"
}

# start_daemon NAME PORT TOML-BODY: fabricd serve --sim with that config;
# sets $daemon_pid and $daemon_root (the simulated board's root). The
# binary is $FABRICD if set (scripts/bench-ab runs an older build), else
# this tree's release build.
start_daemon() {
    local name=$1 port=$2 body=$3
    printf 'listen = "127.0.0.1:%s"\n%s\n' "$port" "$body" > "$work/$name.toml"
    RUST_LOG=info "${FABRICD:-$bin/fabricd}" serve --sim --config "$work/$name.toml" --catalog "$repo/bitstreams" \
        2> "$work/$name.log" &
    daemon_pid=$!
    pids+=("$daemon_pid")
    for _ in $(seq 1 300); do
        if curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
            # shellcheck disable=SC2034 # read by the scripts that source this file
            daemon_root=$(sed -n 's/.*simulated fabric at \([^ ]*\) with.*/\1/p' "$work/$name.log" | head -1)
            return 0
        fi
        sleep 0.1
    done
    echo "bench: fabricd ($name) did not become ready:" >&2
    cat "$work/$name.log" >&2
    exit 1
}

stop_daemon() {
    kill "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
}
