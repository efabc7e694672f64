"""What this machine charges for memory a process touches for the first time.

On this project's machines writing to newly allocated memory can cost milliseconds per
megabyte, where reused memory costs a fraction of one. A phase of a benchmark that allocates
more then pays for it in time: read its figures beside this. The cause found: numpy asks
for transparent huge pages for arrays of 4 MB and more (``madvise(MADV_HUGEPAGE)``), and
where the kernel's THP ``defrag`` setting is ``madvise`` (printed) and memory is
fragmented, each such fault waits for the kernel to compact memory into a huge page.
Run it again with ``NUMPY_MADVISE_HUGEPAGE=0`` (numpy's switch, read at its import) to
see the cost of plain pages (benchmarks/README.md: "Fresh memory costs time here").

Allocates ``--mb`` megabytes in arrays of 30 MB, keeping them (each one fresh), then frees
them and allocates again (reused), and prints the cost of each, per megabyte.

    python tools/fresh_pages.py [--mb 600]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

CHUNK_MB = 30


def _touch(n: int, keep: bool) -> list[float]:
    """ms per MB of each of ``n`` arrays of ``CHUNK_MB`` filled as they are made."""
    held, costs = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        a = np.empty(CHUNK_MB * 2**20 // 8)
        a.fill(1.0)
        costs.append((time.perf_counter() - t0) * 1e3 / CHUNK_MB)
        if keep:
            held.append(a)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=600)
    n = max(1, parser.parse_args().mb // CHUNK_MB)
    thp = Path("/sys/kernel/mm/transparent_hugepage")
    for name in ("enabled", "defrag"):
        where = thp / name
        print(f"THP {name}: {where.read_text().strip() if where.exists() else 'n/a'}")
    print(f"NUMPY_MADVISE_HUGEPAGE: {os.environ.get('NUMPY_MADVISE_HUGEPAGE', 'unset')}")
    fresh = _touch(n, keep=True)
    reused = _touch(n, keep=False)
    for label, costs in (("fresh", fresh), ("reused", reused)):
        print(f"{label:>6}: {np.median(costs):6.2f} ms/MB median, {max(costs):6.2f} worst "
              f"({n} arrays of {CHUNK_MB} MB)")


if __name__ == "__main__":
    main()
