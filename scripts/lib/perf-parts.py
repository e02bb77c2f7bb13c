#!/usr/bin/env python3
"""The daemon's perf samples by part of the request path.

Usage: perf-parts.py PERF-SCRIPT-OUTPUT US-PER-REQUEST [BARE-OUTPUT BARE-US]

Reads `perf script` output (call graphs), puts each sample in the first
part below that any frame of its stack belongs to, and prints a Markdown
table: each part's share of the samples and, from the CPU a request
measured beside the profile, its microseconds a request; with a second
profile (the bare server's), its microseconds a request beside.
"""
import collections
import sys

# (a substring of a frame's symbol, the part): the first that matches any
# frame of a sample's stack takes the sample. System calls first, so the
# kernel's side of a call counts with it; then the daemon's own stages;
# then what is left of hyper, tokio and the allocator.
PARTS = [
    ("__GI___writev", "writev: the response out (loopback TCP, and waking the client)"),
    ("recv", "recv: reading requests"),
    ("epoll_wait", "epoll_wait: the runtime waiting for work"),
    ("Driver::service", "the fabric driver: interrupt, completions off the rings"),
    ("sched::task::run", "the scheduler task: admission, dispatch, descriptors"),
    ("whole_response", "the answer: tokens to text and JSON"),
    ("answer::", "the answer: tokens to text and JSON"),
    ("validate::validate", "validate: JSON body to a request (tokenizing)"),
    ("start_completion", "start_completion: admission and the wait"),
    ("http::head::read_head", "read_head: the head, before hyper"),
    ("http::conn::park", "park: an idle connection's wait"),
    ("role::Server", "hyper: parsing and encoding"),
    ("serve_connection", "hyper: a connection made for the request"),
    ("routes::route", "routing"),
    ("malloc", "the allocator"),
    ("_int_free", "the allocator"),
    ("cfree", "the allocator"),
    ("memmove", "memcpy and memmove"),
    ("memcpy", "memcpy and memmove"),
    ("hyper", "hyper: the rest"),
    ("tokio", "tokio: the rest"),
]


def samples(path):
    stack = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("\t"):
                fields = line.strip().split(" ", 1)
                stack.append(fields[1] if len(fields) > 1 else fields[0])
            else:
                if stack:
                    yield stack
                stack = []
    if stack:
        yield stack


def parts(path):
    counts = collections.Counter()
    n = 0
    for stack in samples(path):
        n += 1
        part = next((p for key, p in PARTS if any(key in frame for frame in stack)), "other")
        counts[part] += 1
    return counts, n


def main():
    path, us = sys.argv[1], float(sys.argv[2])
    counts, n = parts(path)
    if n == 0:
        print("No samples.")
        return
    bare = None
    if len(sys.argv) > 4:
        bare = parts(sys.argv[3]) + (float(sys.argv[4]),)
    if bare and bare[1]:
        print("| part | share of samples | µs a request | bare hyper, µs a request |")
        print("|---|---:|---:|---:|")
        b_counts, b_n, b_us = bare
        order = [p for p, _ in counts.most_common()] + [p for p in b_counts if p not in counts]
        for part in order:
            c = counts.get(part, 0)
            print(f"| {part} | {100 * c / n:.1f}% | {us * c / n:.2f} | {b_us * b_counts.get(part, 0) / b_n:.2f} |")
        print(f"| all ({n} and {b_n} samples) | 100% | {us:.1f} | {b_us:.1f} |")
        return
    print("| part | share of samples | µs a request |")
    print("|---|---:|---:|")
    for part, c in counts.most_common():
        print(f"| {part} | {100 * c / n:.1f}% | {us * c / n:.2f} |")
    print(f"| all ({n} samples) | 100% | {us:.1f} |")


if __name__ == "__main__":
    main()
