#!/usr/bin/env python3
"""The daemon's perf samples by part of the request path.

Usage: perf-parts.py PERF-SCRIPT-OUTPUT US-PER-REQUEST

Reads `perf script` output (call graphs), puts each sample in the first
part below that any frame of its stack belongs to, and prints a Markdown
table: each part's share of the samples and, from the CPU a request
measured beside the profile, its microseconds a request.
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
    ("read_head", "read_head: the head, before hyper"),
    ("conn::park", "park: an idle connection's wait"),
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


def main():
    path, us = sys.argv[1], float(sys.argv[2])
    counts = collections.Counter()
    n = 0
    for stack in samples(path):
        n += 1
        part = next((p for key, p in PARTS if any(key in frame for frame in stack)), "other")
        counts[part] += 1
    if n == 0:
        print("No samples.")
        return
    print("| part | share of samples | µs a request |")
    print("|---|---:|---:|")
    for part, c in counts.most_common():
        print(f"| {part} | {100 * c / n:.1f}% | {us * c / n:.2f} |")
    print(f"| all ({n} samples) | 100% | {us:.1f} |")


if __name__ == "__main__":
    main()
