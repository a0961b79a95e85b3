#!/usr/bin/env python3
"""Tail latency of small fdatasync'd appends while other files are created and deleted.

    python3 benches/disk/sync_under_deletes.py [seconds per run, default 20] [pairs, default 2]

Mimics the collector's write-ahead log (2.3 KB records, each followed by fdatasync) next to its
segment churn (8 MiB files written, synced and then deleted about three times a second, as
consumed segments are after each flush), in a temporary folder beside this script's working
directory. Each pair of runs compares deleting the churned files ("delete") with renaming them
aside ("keep", as recycling segments would): on a file system mounted with online `discard`,
freeing blocks issues discards that can delay the log's syncs. Prints the sync latency
percentiles of each run. Only the standard library is used.
"""

import os
import sys
import tempfile
import threading
import time

RECORD = b"x" * 2300
CHURN_FILE_MIB = 8
CHURN_PAUSE_S = 0.3


def churn(folder, mode, stop):
    block = os.urandom(1 << 20)
    index = 0
    while not stop.is_set():
        path = os.path.join(folder, f"segment{index}")
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            for _ in range(CHURN_FILE_MIB):
                os.write(fd, block)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        if mode == "delete":
            os.unlink(path)
        else:
            os.rename(path, os.path.join(folder, f"kept{index}"))
        index += 1
        stop.wait(CHURN_PAUSE_S)


def run(mode, seconds):
    with tempfile.TemporaryDirectory(dir=".") as folder:
        stop = threading.Event()
        worker = threading.Thread(target=churn, args=(folder, mode, stop))
        worker.start()
        fd = os.open(os.path.join(folder, "log"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
        latencies = []
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                start = time.perf_counter()
                os.write(fd, RECORD)
                os.fdatasync(fd)
                latencies.append((time.perf_counter() - start) * 1000)
        finally:
            os.close(fd)
            stop.set()
            worker.join()
    latencies.sort()
    count = len(latencies)
    slow = sum(1 for latency in latencies if latency >= 50)
    print(
        f"{mode:<6} {count:>7} syncs  p50 {latencies[count // 2]:.2f}  "
        f"p99 {latencies[int(count * 0.99)]:.2f}  p99.9 {latencies[int(count * 0.999)]:.2f}  "
        f"max {latencies[-1]:.1f} ms  syncs >= 50 ms: {slow}",
        flush=True,
    )


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    for _ in range(pairs):
        for mode in ("delete", "keep"):
            run(mode, seconds)


if __name__ == "__main__":
    main()
