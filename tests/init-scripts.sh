#!/usr/bin/env bash
# S60fabricd against a fake fabricd in a temporary directory, under BusyBox
# sh (the board's shell) and the host's sh: stop waits for a draining
# daemon and says so when it outlasts the bound; restart never runs a
# second daemon beside the first; another process named fabricd (a user's
# `fabricd inspect`) is left alone; a daemon that dies is restarted.
#
# The fake takes the "port" (a directory it creates) while it serves and
# records a second daemon that finds it taken. On SIGTERM it drains for
# the seconds in $FAKE_DIR/drain, as fabricd finishes its requests, then
# exits 0.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
script="$repo/buildroot/package/fabricd/S60fabricd"
failures=0
passed=0
work=$(mktemp -d)
other=""
trap 'cleanup' EXIT

ok() { echo "ok: $shell_name: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $shell_name: $*"; failures=$((failures + 1)); }

# wait_for SECONDS CMD...: polls CMD until it succeeds; fails after SECONDS.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.1
    done
}

lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
daemon_pid() { cat "$dir/run/fabricd.pid" 2>/dev/null; }
daemon_up() { alive "$(daemon_pid)" && [ -d "$dir/port" ]; }
supervisor_gone() { ! alive "$(cat "$dir/run/fabricd-supervisor.pid" 2>/dev/null)"; }
# Every fake serving daemon has exited (and no supervisor restarts one).
all_gone() { [ "$(lines "$dir/started")" -eq "$(lines "$dir/exited")" ] && supervisor_gone; }

cleanup() {
    # Only what this test started: the supervisors and fakes by their pids.
    local pid
    cat "$work"/*/run/*.pid "$work"/*/started 2>/dev/null | while read -r pid; do
        kill -KILL "$pid" 2>/dev/null
    done
    [ -n "$other" ] && kill -KILL "$other" 2>/dev/null
    rm -rf "$work"
}

# init ARGS: runs S60fabricd; its output in $out. Through a file, not $(...):
# a supervisor that kept the output open would hang a command substitution
# (as it would hang ssh), and that is checked for instead.
init() {
    local status
    "${shell_cmd[@]}" "$dir/S60fabricd" "$@" > "$dir/out" 2>&1
    status=$?
    out=$(cat "$dir/out")
    return "$status"
}

run_suite() {
    dir="$work/$shell_name"
    mkdir -p "$dir/bin" "$dir/other"
    # The script's own name: it knows its supervisor by it.
    cp "$script" "$dir/S60fabricd"
    cat > "$dir/bin/fabricd" <<'EOF'
#!/bin/sh
if [ "$1" != serve ]; then
    # fabricd inspect and the like: runs until killed.
    while :; do sleep 1; done
fi
if ! mkdir "$FAKE_DIR/port" 2>/dev/null; then
    echo "$$ found the port taken" >> "$FAKE_DIR/clash"
    exit 1
fi
echo "$$" >> "$FAKE_DIR/started"
echo "fake fabricd $$ serving"
trap 'echo "fake fabricd $$ draining"; sleep "$(cat "$FAKE_DIR/drain")"; rmdir "$FAKE_DIR/port"; echo "$$" >> "$FAKE_DIR/exited"; exit 0' TERM
while :; do sleep 1 & wait $!; done
EOF
    chmod +x "$dir/bin/fabricd"
    cp "$dir/bin/fabricd" "$dir/other/fabricd"
    export FABRICD_BIN="$dir/bin/fabricd" FABRICD_CONFIG="$dir/fabricd.toml" \
        FABRICD_RUN_DIR="$dir/run" FABRICD_DATA_DIR="$dir/data" FABRICD_LOG="$dir/log" \
        FABRICD_STOP_TIMEOUT=20 FAKE_DIR="$dir"
    echo 2 > "$dir/drain"

    # A user's fabricd, not the daemon: stop and restart must leave it be.
    "$dir/other/fabricd" inspect x.bit &
    other=$!

    local out first second status
    init start
    if [[ $out == *OK* ]] && wait_for 10 daemon_up; then
        ok "start runs fabricd ($out)"
    else
        fail "start: $out; log: $(cat "$dir/log" 2>/dev/null)"; return
    fi
    local fd held=""
    for fd in /proc/"$(cat "$dir/run/fabricd-supervisor.pid")"/fd/*; do
        [ "$(readlink "$fd")" = "$dir/out" ] && held=$fd
    done
    if [ -n "$held" ]; then
        fail "the supervisor holds start's output open ($held; ssh board S60fabricd start would not return)"
    else
        ok "the supervisor lets go of start's output"
    fi
    first=$(daemon_pid)

    init stop
    if alive "$first"; then
        fail "stop returned while fabricd $first was still draining: $out"
    elif [ "$(lines "$dir/exited")" -ne 1 ] || [[ $out != *OK* ]]; then
        fail "stop: $out; exited: $(lines "$dir/exited")"
    else
        ok "stop waits for the drain ($out)"
    fi
    if wait_for 5 supervisor_gone && [ ! -e "$dir/run/fabricd.pid" ] \
        && [ "$(lines "$dir/started")" -eq 1 ]; then
        ok "after stop nothing runs and nothing restarts"
    else
        fail "after stop: started $(lines "$dir/started"), pid file $(daemon_pid)"
    fi

    init start
    wait_for 10 daemon_up || { fail "second start: $(cat "$dir/log")"; return; }
    first=$(daemon_pid)
    init restart
    if wait_for 10 daemon_up && [ "$(daemon_pid)" != "$first" ] && ! alive "$first" \
        && [ ! -e "$dir/clash" ] && [ "$(lines "$dir/started")" -eq 3 ]; then
        ok "restart starts one fabricd after the old one drained ($(echo "$out" | tr '\n' ' '))"
    else
        fail "restart: $out; clash: $(cat "$dir/clash" 2>/dev/null); started $(lines "$dir/started")"
    fi

    # fabricd dies: the supervisor starts another.
    second=$(daemon_pid)
    kill -KILL "$second"
    rmdir "$dir/port"
    echo "$second" >> "$dir/exited"
    if wait_for 10 daemon_up && [ "$(daemon_pid)" != "$second" ]; then
        ok "a fabricd that dies is restarted"
    else
        fail "no restart after kill -9: $(cat "$dir/log")"
    fi

    # A drain longer than the bound: stop says so, nothing restarts, and
    # start refuses until it is over.
    echo 4 > "$dir/drain"
    second=$(daemon_pid)
    FABRICD_STOP_TIMEOUT=1 init stop
    status=$?
    if [ "$status" -ne 0 ] && [[ $out == *"still draining"* ]] && alive "$second"; then
        ok "stop past its bound says so ($out)"
    else
        fail "stop past its bound: exit $status: $out"
    fi
    if ! init start && [[ $out == *"still stopping"* ]]; then
        ok "start refuses while the old fabricd drains ($out)"
    else
        fail "start while draining: $out"
    fi
    if wait_for 10 all_gone && [ ! -e "$dir/clash" ]; then
        ok "the draining fabricd exits and nothing restarts it"
    else
        fail "after the drain: started $(lines "$dir/started"), exited $(lines "$dir/exited")"
    fi

    if alive "$other"; then
        ok "the user's fabricd inspect is still running"
    else
        fail "the user's fabricd inspect was killed"
    fi
    kill -KILL "$other" 2>/dev/null
    wait "$other" 2>/dev/null
    other=""
}

shells=()
command -v busybox >/dev/null && shells+=("busybox sh")
shells+=("sh")
for shell_name in "${shells[@]}"; do
    read -ra shell_cmd <<< "$shell_name"
    shell_name=${shell_name// /-}
    run_suite
done
[ "${shells[0]}" = sh ] && echo "note: no busybox here; S60fabricd ran under sh only"

echo "init script tests: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
