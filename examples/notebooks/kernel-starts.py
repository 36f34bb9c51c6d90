#!/usr/bin/env python3
"""Starts the Java kernel (rapaio-jupyter-kernel, as run-notebooks.sh configures it) N times in a row
and reports, for each start, the seconds until it answers kernel_info_request, or STALL when it does
not within the limit. Exit 1 on any stall.

usage: kernel-starts.py [N=10] [LIMIT_SECONDS=30]
"""
import sys
import time

import jupyter_client


def main(argv):
    n = int(argv[1]) if len(argv) > 1 else 10
    limit = float(argv[2]) if len(argv) > 2 else 30
    stalls = 0
    for i in range(1, n + 1):
        t0 = time.time()
        km = jupyter_client.KernelManager(kernel_name="rapaio-jupyter-kernel")
        with open("/dev/null", "w") as sink:
            km.start_kernel(stdout=sink, stderr=sink)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=limit)
            print("start %d: answered in %.1f s" % (i, time.time() - t0), flush=True)
        except RuntimeError:
            stalls += 1
            print("start %d: STALL (no kernel_info_reply in %.0f s)" % (i, limit), flush=True)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            del kc, km  # while logging still works (its destructor logs)
    print("%d starts, %d stalls" % (n, stalls))
    return 1 if stalls else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
