"""``python -m kernelmagic``: saved profiles and torch trace files, outside notebooks.

    python -m kernelmagic show FILE       the text report
    python -m kernelmagic show FOLDER --rank N   rank N's full report
    python -m kernelmagic compare A B     B against A (A is "before")

FILE is a profile written by ``result.save(path)`` or a Kineto / Chrome trace
(``.json``, ``.json.gz``, ``.pt.trace.json[.gz]``); a folder of traces (one per rank) or
a saved many-ranks result prints the many-ranks report, or with ``--rank N`` that rank's
full report (``result.ranks[N]``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import warnings

from kernelmagic.core.sorting import SORT_KEYS, sort_key


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise SystemExit(_fail(message))


def _fail(message: str) -> int:
    print(f"kernelmagic: error: {message}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m kernelmagic", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    show = sub.add_parser("show", help="print the text report of a saved profile or a trace")
    show.add_argument("file")
    show.add_argument("--limit", type=int, default=25, help="rows to print (default 25)")
    show.add_argument("--sort", choices=sorted(SORT_KEYS), default=None,
                      help="sort key (default: the one the profile was taken with)")
    show.add_argument("--no-findings", action="store_true", help="omit the findings")
    show.add_argument("--rank", type=int, default=None, metavar="N",
                      help="of a folder of traces or a saved many-ranks result: rank N's "
                           "full report")
    cmp = sub.add_parser("compare", help="print B against A (saved profiles or traces)")
    cmp.add_argument("before")
    cmp.add_argument("after")
    cmp.add_argument("--limit", type=int, default=25, help="rows to print (default 25)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from kernelmagic.api import load
    from kernelmagic.core.records import ProfileFileError
    from kernelmagic.results.result import ProfileResult

    if getattr(args, "limit", 1) < 1:
        return _fail("--limit must be at least 1")
    try:
        if args.command == "show":
            from kernelmagic.render.text import text_report

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = load(args.file)
            for warning in caught:  # e.g. a rank's file that could not be read
                print(f"kernelmagic: warning: {warning.message}", file=sys.stderr)
            if not isinstance(result, ProfileResult):  # a folder or saved run of many ranks
                if args.rank is None:
                    from kernelmagic.render.ranks import text_report as ranks_report

                    print(ranks_report(result, findings=not args.no_findings))
                    return 0
                if args.rank not in result.ranks:
                    known = ", ".join(str(r) for r in result.ranks)
                    return _fail(f"--rank {args.rank}: {args.file} has no rank {args.rank} "
                                 f"(its ranks: {known})")
                result = result.ranks[args.rank]
            elif args.rank is not None:
                return _fail(f"--rank {args.rank}: {args.file} is one profile, not a run of "
                             "many ranks (a folder of traces or a saved many-ranks result)")
            if args.sort is not None:
                if sort_key(args.sort).device and not result.profiles_device:
                    return _fail(f"--sort {args.sort}: {args.file} has no device times")
                result = dataclasses.replace(result, sort=args.sort)
            print(text_report(result, limit=args.limit, findings=not args.no_findings))
        else:
            before, after = load(args.before), load(args.after)
            for name, item in ((args.before, before), (args.after, after)):
                if not isinstance(item, ProfileResult):
                    return _fail(f"{name}: many ranks; compare takes single profiles or "
                                 "traces (a rank's file)")
            print(after.compare(before).table(limit=args.limit))
    except (ProfileFileError, ValueError) as exc:
        return _fail(str(exc))
    except BrokenPipeError:  # the reader stopped early (``| head``): end quietly, as cat does
        _quiet_stdout()
        return 1
    return 0


def _quiet_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's flush at exit does not
    raise on the closed pipe again (the ``signal`` documentation's recipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
