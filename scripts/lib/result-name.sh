# Shared by the benchmark scripts (scripts/lib/common.sh and bench-ladder,
# which keeps its own daemon and work directory). Sourced, not run.
# shellcheck shell=bash

# result_name DIR BASE: BASE, or BASE-run2, -run3, ... if a result by that
# name is in DIR already: a result is kept as measured, never written over.
result_name() {
    local dir=$1 base=$2 name=$2 n=1
    while compgen -G "$dir/$name.*" > /dev/null || compgen -G "$dir/$name-*.json" > /dev/null; do
        n=$((n + 1))
        name="$base-run$n"
    done
    echo "$name"
}
