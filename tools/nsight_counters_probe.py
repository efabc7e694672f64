"""The GPU check of ``--nsight`` and ``--counters`` (run by tools/gpu-checks/nsight_counters.sh).

    python tools/nsight_counters_probe.py count     # the cell under torch's profiler: prints
                                                    # KERNELS=<kernels in the profiled iterations>
    ncu --profile-from-start off --csv --metrics gpu__time_duration.sum \\
        python tools/nsight_counters_probe.py nsight  # the same cell with %%profile --nsight
    python tools/nsight_counters_probe.py counters  # %%profile --counters on the Block

The cell is the seed notebook's Block on the GPU, run as a ``%%profile`` cell through
IPython when it is installed (else through ``kernelmagic.profile``, the same runner).
"""

from __future__ import annotations

import sys

import torch

import kernelmagic

sys.path.insert(0, "tests")
from workloads import block_and_input

ITERS, WARMUP = 3, 2


def run_cell(flags: str) -> object:
    block, x = block_and_input()
    env = {"block": block.cuda(), "x": x.cuda(), "torch": torch}
    try:
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:
        print("(no IPython: kernelmagic.profile runs the same cell)")
        options = {f.lstrip("-"): True for f in flags.split()}
        with torch.inference_mode():
            return kernelmagic.profile(lambda: env["block"](env["x"]), iters=ITERS,
                                       warmup=WARMUP, name="cell", **options)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kernelmagic")
    shell.user_ns.update(env)
    shell.run_cell(f"%%profile {flags} -n {ITERS} -w {WARMUP} --name cell -q -o r\n"
                   "with torch.inference_mode():\n    y = block(x)")
    return shell.user_ns["r"]


def main(mode: str) -> None:
    if not torch.cuda.is_available():
        print("no CUDA device")
        return
    if mode == "count":
        result = run_cell("")
        kernels = sum(k.count for k in result.kernels
                      if not k.key.startswith(("Memcpy", "Memset")))
        print(f"KERNELS={kernels}")
    elif mode == "nsight":
        result = run_cell("--nsight")
        print(result.summary())
        print(f"CAPTURE={result.capture} ITERS={len(result.timings)}")
    elif mode == "counters":
        result = run_cell("--counters")
        print(result.counters_note)
        from kernelmagic.render.text import text_report

        print(text_report(result)[-6000:])
        print(f"COUNTER_ROWS={len(result.counters)}")
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "count")
