# The simulated fabric's time, as the benchmarks and the soak take it
# (--fabric-time), and the DMA buffer the benchmarks give the daemon
# (--dma): sets sim_args (the simulator's arguments, a TOML array), timing
# and buffer (the words a report prints). Sourced, not run.
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
# shellcheck disable=SC2034 # sim_args, timing and buffer: read by the scripts that source this file
set_fabric_time() {
    case "$1" in
        engine) sim_args='["--poll-us", "10"]'; timing="each engine's cycles at the K26's 200 MHz, doorbells looked at every 10 µs" ;;
        fixed) sim_args='["--prefill-us", "50", "--decode-us", "1900"]'; timing="prefill 50 µs, decode 1.9 ms a token" ;;
        *) return 1 ;;
    esac
}

# set_dma B: after set_fabric_time; synced, uncached or coherent; false for
# anything else.
#   synced    a cached u-dma-buf mapping, cleaned and invalidated through its
#             sync attributes: both boards' overlays today. On a kernel a
#             sync is one write(); on the simulated board it is a handshake
#             with the simulator's watch thread (an inotify wake-up, two
#             reads of the attribute, the answer written back) that the
#             daemon's one worker waits for, up to four a request. With the
#             engines' times that handshake, not the daemon nor the fabric,
#             was the simulated board's limit (results/engine-time-dma-2026-12-07.md).
#   uncached  the shell's UIO map of a carve-out, mapped uncached, no syncs
#             (a mainline kernel's way; the real-kernel rig's).
#   coherent  a u-dma-buf the device tree marks dma-coherent (a K26's HPC
#             port through the CCI), no syncs.
set_dma() {
    local flag
    case "$1" in
        synced) buffer="a cached u-dma-buf, synced"; return 0 ;;
        uncached) flag="--uio-buffer"; buffer="the shell's UIO map, uncached (no syncs)" ;;
        coherent) flag="--dma-coherent"; buffer="a coherent u-dma-buf (no syncs)" ;;
        *) return 1 ;;
    esac
    # set_fabric_time's arrays are never empty.
    sim_args="${sim_args%]}, \"$flag\"]"
}
