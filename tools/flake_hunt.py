"""Flake hunt: run the test suite many times, the last runs on a loaded machine, and list
every test that failed even once.

    python tools/flake_hunt.py                     # the whole suite, 10 runs, last 5 loaded
    python tools/flake_hunt.py --runs 4 --loaded 2 -- tests/test_magic.py -k compare

Each run is ``python -m pytest -q -p no:cacheprovider --junitxml=... [pytest args]`` from the
repository root. During a loaded run one busy-looping process per core (``os.cpu_count()``)
competes with the tests; each stops by itself after ``--hog-seconds`` (or when this script
dies) and all are killed as the run ends, so nothing outlives the script. At the end: the
runs, the loaded runs, the total failures, and each test that failed with how often and the
first line of its message. Exit status 1 if any test failed, or a run did not pass without
one (a collection error, a crash).

It takes ``--runs`` times the suite's time, loaded runs longer: on this project's 2-core
machine one run of the whole suite (638 tests, the browser and notebook tests included)
took 107 s unloaded and 157 s loaded, so the default hunt takes about 25 minutes. Not part
of CI (``.ci/run``). Each run's JUnit XML and pytest output are kept in the folder printed
at the start and at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: One busy loop that ends by itself: after its time limit, or once its parent is gone.
HOG = """\
import os, sys, time
end, parent = time.monotonic() + float(sys.argv[1]), os.getppid()
while time.monotonic() < end and os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


def start_hogs(seconds: float) -> list[subprocess.Popen]:
    """One busy-looping process per core, each stopping by itself after ``seconds``."""
    return [subprocess.Popen([sys.executable, "-c", HOG, str(seconds)])
            for _ in range(os.cpu_count() or 1)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.kill()
    for hog in hogs:
        hog.wait()


def node_id(case: ET.Element) -> str:
    """The pytest node id of a JUnit ``testcase`` (xunit1 records its file)."""
    classname, name, path = case.get("classname", ""), case.get("name", ""), case.get("file")
    if not path:
        return f"{classname}::{name}" if classname else name
    module = path.removesuffix(".py").replace("/", ".")
    cls = classname[len(module) + 1:] if classname.startswith(module + ".") else ""
    return "::".join(part for part in (path, cls, name) if part)


def first_line(problem: ET.Element) -> str:
    text = problem.get("message") or problem.text or ""
    return next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")


def read_report(path: Path) -> tuple[Counter[str], list[tuple[str, str]]]:
    """The run's counts (tests, failures, errors, skipped) and its (test, message) failures."""
    root = ET.parse(path).getroot()
    counts: Counter[str] = Counter()
    for suite in root.iter("testsuite"):
        for key in ("tests", "failures", "errors", "skipped"):
            counts[key] += int(suite.get(key, 0))
    failed = [(node_id(case), first_line(problem))
              for case in root.iter("testcase")
              for problem in case if problem.tag in ("failure", "error")]
    return counts, failed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) \
        if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     usage="%(prog)s [--runs N] [--loaded M] [-- pytest args]")
    parser.add_argument("--runs", type=int, default=10, help="runs in all (default 10)")
    parser.add_argument("--loaded", type=int, default=None,
                        help="how many of the last runs have a CPU hog (default runs // 2)")
    parser.add_argument("--hog-seconds", type=float, default=1800.0,
                        help="each hog process stops by itself after this long (default 1800)")
    args = parser.parse_args(ours)
    loaded = args.runs // 2 if args.loaded is None else args.loaded
    if args.runs < 1 or not 0 <= loaded <= args.runs:
        parser.error("need --runs >= 1 and 0 <= --loaded <= --runs")

    out = Path(tempfile.mkdtemp(prefix="flake_hunt-"))
    print(f"{args.runs} runs of python -m pytest {' '.join(pytest_args) or '(whole suite)'}, "
          f"the last {loaded} with {os.cpu_count()} CPU hogs; reports in {out}", flush=True)
    failures: dict[str, list[str]] = {}  # test -> the first line of each failure
    hunt_start = time.monotonic()
    for run in range(1, args.runs + 1):
        is_loaded = run > args.runs - loaded
        report, log = out / f"run{run:02d}.xml", out / f"run{run:02d}.log"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--junitxml={report}", "-o", "junit_family=xunit1", *pytest_args]
        hogs = start_hogs(args.hog_seconds) if is_loaded else []
        began = time.monotonic()
        try:
            with log.open("w") as sink:
                rc = subprocess.run(cmd, cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT,
                                    check=False).returncode
        finally:
            stop_hogs(hogs)
        took = time.monotonic() - began
        counts, failed = read_report(report) if report.exists() else (Counter(), [])
        if rc != 0 and not failed:  # no test failed, yet pytest did not pass: say why
            said = [line for line in log.read_text().splitlines() if line.strip()]
            failed = [(f"run {run}", f"pytest exited {rc}: {said[-1] if said else ''}")]
        for test, message in failed:
            failures.setdefault(test, []).append(message)
        label = f"loaded, {len(hogs)} hogs" if is_loaded else "unloaded"
        print(f"run {run}/{args.runs} ({label}): {counts['tests']} tests, {len(failed)} failed, "
              f"{counts['skipped']} skipped, pytest exit {rc}, {took:.0f} s", flush=True)

    total = sum(len(messages) for messages in failures.values())
    print(f"\n{args.runs} runs ({loaded} loaded) in {time.monotonic() - hunt_start:.0f} s: "
          f"{total} failures; {len(failures)} tests failed at least once")
    for test, messages in sorted(failures.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(messages)}x {test}\n      {messages[0]}")
    print(f"reports and pytest output: {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the hogs are gone already (stop_hogs in a finally)
        sys.exit(130)
