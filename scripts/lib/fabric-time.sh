# The simulated fabric's time, as the benchmarks and the soak take it
# (--fabric-time): sets sim_args (the simulator's arguments, a TOML array)
# and timing (the words a report prints). Sourced, not run.
# shellcheck shell=bash

# set_fabric_time T: fixed or engine; false for anything else.
#   fixed   50 µs a prompt token and 1.9 ms an output token for every engine:
#           the bands of the runs of record were written for it.
#   engine  each engine's cycles at the K26's 200 MHz, and the simulator
#           looking at the doorbells every 10 µs rather than 50. On silicon
#           a doorbell is an AXI write the shell sees at once; the 50 µs the
#           simulator waits by default is its own, and with the engines'
#           times it was the simulated board's limit: 1,400 typists with the
#           features off broke at 50 µs and held at 10, side by side
#           (results/typists-engine-2026-12-07.md).
# shellcheck disable=SC2034 # sim_args and timing: read by the scripts that source this file
set_fabric_time() {
    case "$1" in
        engine) sim_args='["--poll-us", "10"]'; timing="each engine's cycles at the K26's 200 MHz, doorbells looked at every 10 µs" ;;
        fixed) sim_args='["--prefill-us", "50", "--decode-us", "1900"]'; timing="prefill 50 µs, decode 1.9 ms a token" ;;
        *) return 1 ;;
    esac
}
