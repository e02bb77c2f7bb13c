# Shared by scripts/fleet, scripts/fleet-rotate, scripts/bench-fleet and
# tests/fleet.sh: a simulated fleet's directory, HAProxy's runtime API and
# polling with a deadline. Sourced, not run.
# shellcheck shell=bash

# shellcheck disable=SC2034 # these are read by the scripts that source this file
# The binaries: $FABRICD_BIN_DIR (the tests pass cargo's), or the release
# build of this checkout.
fleet_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fleet_bin=${FABRICD_BIN_DIR:-${CARGO_TARGET_DIR:-$fleet_repo/target}/release}
fleet_default_dir=${TMPDIR:-/tmp}/fabricd-fleet

# The backend whose servers carry the checks and the agent; the by_session
# backend's servers track its (fleet/haproxy.cfg), so a state set here
# reaches both.
fleet_checked=least_busy

# until_deadline SECONDS CMD...: polls CMD every 100 ms until it succeeds;
# returns 1 once SECONDS have passed without success.
until_deadline() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.1
    done
}

# hap SOCKET COMMAND: one runtime-API command; its answer on stdout. An
# answer the API gives for a refused command fails.
hap() {
    local out
    out=$(printf '%s\n' "$2" | socat -t 5 - "UNIX-CONNECT:$1" 2>&1) || {
        echo "HAProxy's runtime API at $1 does not answer ($out)" >&2
        return 1
    }
    case "$out" in
        *"No such"*|*"Unknown command"*|*"Require "*|*"Permission denied"*|*"can't"*|*"cannot"*)
            echo "HAProxy refused \"$2\": $out" >&2; return 1 ;;
    esac
    printf '%s\n' "$out"
}

# hap_field SOCKET BACKEND SERVER FIELD: one field of `show stat` (by its
# name in the CSV header: scur, status, weight, check_status, agent_status...).
hap_field() {
    hap "$1" "show stat" | awk -F, -v b="$2" -v s="$3" -v f="$4" '
        NR == 1 { sub(/^# /, ""); for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == b && $2 == s { print $col[f]; found = 1 }
        END { exit !found }'
}

# fleet_boards DIR: the fleet's boards, one a line: NAME HTTP AGENT SOCKET PIDFILE.
fleet_boards() {
    [ -r "$1/boards" ] || { echo "no fleet in $1 (no $1/boards: start one with scripts/fleet up)" >&2; return 1; }
    cat "$1/boards"
}

# alive PIDFILE: the process it names runs.
alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# http_code URL: the status of a GET (000 when nothing answered).
http_code() {
    curl -s -o /dev/null -m 5 -w '%{http_code}' "$1" 2>/dev/null || true
}
