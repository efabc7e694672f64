"""The ``%%profile`` / ``%profile`` magic: a thin adapter over the front door
(``kernelmagic/api.py: run``), which runs the plan once or with ``--try``'s variants.

It parses the line, validates options (bad ones become a one-line ``UsageError``),
compiles the cell once so tracebacks show its lines, runs it in the user namespace,
and displays the result.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import shlex
import threading
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from kernelmagic.core.options import (
    OPTIONS,
    Option,
    ProfileOptions,
    StepTarget,
    check_variable_name,
)

#: The magic's own options: what to do with the result (bind, keep, compare, show).
DISPLAY_OPTIONS: tuple[Option, ...] = (
    Option(("-o", "--out"), "bind the result object to VAR in the user namespace",
           metavar="VAR", name="out", value_type=str),
    Option(("-q", "--quiet"), "show nothing (use with -o)", name="quiet"),
    Option(("--save",), "keep the result under NAME for the life of the kernel (for "
           "--compare)", metavar="NAME", name="save", value_type=str),
    Option(("--compare",), "show this run against a result kept with --save NAME, or a "
           "file written by result.save(path)", metavar="NAME_OR_PATH", name="compare",
           value_type=str),
    Option(("--no-findings",), "hide the plain-language findings below the table",
           name="no_findings"),
)



def run_options() -> tuple[Option, ...]:
    """The options of a run: ``ProfileOptions``' fields, then those the registered views
    declare themselves (``views/registry.py: view_options``)."""
    from kernelmagic.views.registry import view_options

    return OPTIONS + view_options()


#: Every option string of the magic, and whether it takes a value (``split_line`` reads it).
TAKES_VALUE: dict[str, bool] = {
    flag: o.value_type is not None for o in run_options() + DISPLAY_OPTIONS for flag in o.flags}


def _argument(o: Option) -> argument:
    """The ``magic_arguments`` decorator of one option. Values default to None, so that
    ``ProfileOptions`` gets only what the line gave and keeps its own defaults."""
    if o.value_type is None:
        return argument(*o.flags, action="store_true", dest=o.name, help=o.help)
    return argument(*o.flags, type=o.value_type, default=None, dest=o.name,
                    metavar=o.metavar, help=o.help)


def with_options(magic: Any) -> Any:
    """Decorate ``magic`` with every option, in ``run_options`` order, then the display
    options and the line magic's statement (decorators apply bottom-up: the last is added
    first). The parser and the ``%%profile?`` help both come from these decorators."""
    magic = argument("statement", nargs="*",
                     help="line magic only: the statement to profile (%%%%profile uses the "
                          "cell)")(magic)
    for o in reversed(run_options() + DISPLAY_OPTIONS):
        magic = _argument(o)(magic)
    return magic_arguments()(magic)


def options_from(args: Any, name: str) -> ProfileOptions:
    """The run's options from the parsed line: what it gave, defaults for the rest."""
    given = {o.name: v for o in OPTIONS
             if (v := getattr(args, o.name)) is not None and v is not False}
    more = tuple(o.name for o in run_options()[len(OPTIONS):] if getattr(args, o.name, False))
    return ProfileOptions(**{**given, "name": name}, more_views=more)


@magics_class
class ProfileMagics(Magics):
    """Holds the ``profile`` magic and the results kept with ``--save``."""

    def __init__(self, shell: Any = None) -> None:
        super().__init__(shell)
        self.saved: dict[str, Any] = {}

    @with_options
    @line_cell_magic
    def profile(self, line: str, cell: str | None = None) -> None:
        """Profile a cell (``%%profile``) or one statement (``%profile``) with torch.profiler.

        The code runs ``--warmup`` times unprofiled, then ``--iters`` times under the
        profiler, in the user namespace (assignments persist; the code runs
        warmup + iters times in all). The report shows where the time went, by self
        time per operator.
        """
        __tracebackhide__ = True
        options_text, source = split_line(line) if cell is None else (line, cell)
        args = parse_options(self.profile, options_text)
        if args.statement:
            raise UsageError(f"unexpected arguments: {' '.join(args.statement)}")
        if not source.strip():
            raise UsageError("nothing to profile: the cell is empty" if cell is not None
                             else "nothing to profile: usage is %profile [options] statement")
        label = f"cell[{cell_number(self.shell)}]"  # how the Python rows name its lines
        name = args.name if args.name is not None else label
        try:
            if args.steps is not None:  # --steps NAME: the object it names, checked
                args.steps = StepTarget.named(args.steps, self.shell.user_ns)
            options = options_from(args, name)
            if args.gather and args.compare is not None:
                raise ValueError("--gather cannot be combined with --compare")
            if args.out is not None:
                check_variable_name("-o/--out", args.out)
            if args.save is not None and not args.save.strip():
                raise ValueError("--save needs a non-empty NAME")
            if options.variants is not None:  # (live/variants.py imports no torch)
                from kernelmagic.live.variants import parse

                parse(options.variants)  # ValueError naming the valid ones, before any run
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        baseline = self._baseline(args.compare) if args.compare is not None else None

        from kernelmagic.live import runner  # imports torch on first use

        try:
            plan = runner.plan(options)
        except (ValueError, runner.ProfilerBusyError) as exc:
            raise UsageError(str(exc)) from None
        code = self._compile(source)
        fn = runner.as_callable(code, self.shell.user_global_ns, self.shell.user_ns,
                                loop_runner=getattr(self.shell, "loop_runner", None))
        from kernelmagic.live.progress import Progress, WidgetSink, sink_for_shell

        sink = sink_for_shell(self.shell)
        progress = Progress(sink) if sink is not None else None
        ran = False  # the profiler session ended and was released
        from kernelmagic.api import run

        try:
            try:
                # The freed heap goes back to the OS after the report is shown, not before.
                result = run(fn, plan, cell=lambda: self._cell(source, code, fn),
                             source_file=code.co_filename, progress=progress,
                             free_memory=False, cell_label=label)
            except runner.ProfilerBusyError as exc:  # (the cell ran a profiler, or us)
                raise UsageError(str(exc)) from None
            except BaseException as exc:
                partial = getattr(exc, "result", None)
                if not (isinstance(exc, KeyboardInterrupt)
                        or getattr(exc, "kernelmagic_partial", False)):
                    partial = None  # only Ctrl-C and --memory's out-of-memory carry one
                if partial is not None:  # Ctrl-C after >= 1 iteration, or out of memory
                    # under --memory: show the report so far, re-raise
                    ran = True
                    self._report(partial, args, sink, baseline)
                raise
            ran = True
            from kernelmagic.results.cell_names import name_cells

            self._report(name_cells(result, self._cell_files()), args, sink, baseline)
        finally:
            if progress is not None:
                progress.close()
            if isinstance(sink, WidgetSink):
                sink.replace(None)  # a bar the report did not replace leaves nothing behind
            if ran:
                _trim_heap_in_background()

    def _cell(self, source: str, code: Any, fn: Any) -> Any:
        """The cell as ``--try``'s experiments run it (``live/experiments.py``): so that its
        last expression's value is kept, as ``Out[n]`` would be, and as one function for
        ``torch.compile``."""
        from kernelmagic.live import experiments

        if code.co_flags & inspect.CO_COROUTINE:  # top-level await: run as it is
            return experiments.cell_of_callable(fn, "the cell uses await")
        return experiments.cell_of_source(
            self.shell.transform_cell(source), code.co_filename, self.shell.compile.flags,
            self.shell.user_global_ns, self.shell.user_ns)

    def _cell_files(self) -> dict[str, str]:
        """Each earlier cell's file, as IPython compiled it, to ``cell[n]`` (IPython 8 and
        later keep the map; ``results/cell_names.py`` reads IPython 7's names)."""
        numbers = getattr(self.shell.compile, "_filename_map", None)
        if not isinstance(numbers, dict):
            return {}
        return {file: f"cell[{n}]" for file, n in numbers.items()}

    def _report(self, result: Any, args: Any, sink: Any, baseline: Any) -> None:
        """Bind/keep the result as asked and display it (in the progress bar's place)."""
        if args.out is not None:
            self.shell.user_ns[args.out] = result
        if args.save is not None:
            self.saved[args.save] = result
        if args.quiet:
            return
        from IPython.display import display

        from kernelmagic.live.progress import WidgetSink
        from kernelmagic.render.bundle import display_outputs, mime_bundle, show

        if args.gather:  # rank 0: all ranks; the other ranks: their one-line summary
            from kernelmagic.results.ranks import ManyRanksResult

            if isinstance(result, ManyRanksResult):
                from kernelmagic.render.ranks import mime_bundle as ranks_bundle

                show(ranks_bundle(result, findings=not args.no_findings))
            else:
                print(result.summary())
            return
        # The first output in the progress bar's place, the widget's after it.
        first, *rest = display_outputs(mime_bundle(result, findings=not args.no_findings))
        if not (isinstance(sink, WidgetSink) and sink.replace(first)):
            display(first, raw=True)
        for output in rest:
            display(output, raw=True)
        if baseline is not None:
            from kernelmagic.results.compare import compare

            before, label = baseline
            after_label = args.save if args.save is not None and args.name is None else ""
            display(compare(before, result, before_label=label, after_label=after_label))

    def _baseline(self, target: str) -> tuple[Any, str]:
        """The result that ``--compare`` names, and the label that heads the comparison:
        a result saved under that name (labelled with it) first, else a file path."""
        if target in self.saved:
            return self.saved[target], target
        from kernelmagic.api import load
        from kernelmagic.results.result import ProfileResult

        if not os.path.exists(target):
            known = ", ".join(sorted(self.saved)) or "none yet"
            raise UsageError(f"--compare {target}: no result saved under that name "
                             f"(saved: {known}) and no such file")
        try:
            found = load(target)
        except ValueError as exc:  # ProfileFileError, or a folder of ranks that is not a run
            raise UsageError(f"--compare: {exc}") from None
        if not isinstance(found, ProfileResult):  # a folder or saved run of many ranks
            raise UsageError(f"--compare {target}: many ranks; compare with one rank's "
                             "profile or trace")
        return found, ""

    def _compile(self, source: str) -> Any:
        """Compile once, registered with IPython's cache so tracebacks show the lines."""
        shell = self.shell
        transformed = shell.transform_cell(source)
        try:
            filename = shell.compile.cache(transformed, cell_number(shell), raw_code=source)
        except TypeError:  # IPython < 8 has no raw_code
            filename = shell.compile.cache(transformed, cell_number(shell))
        try:
            return shell.compile(transformed, filename, "exec")
        except SyntaxError:
            code = _compile_awaiting(shell, transformed, filename)
            if code is not None:
                return code
            shell.showsyntaxerror(filename)
            raise UsageError("the cell has a syntax error (shown above)") from None


def _compile_awaiting(shell: Any, source: str, filename: str) -> Any:
    """The cell compiled with top-level ``await`` (as IPython compiles such a cell), when
    that is what made it invalid; None when it has another syntax error. A one-line
    ``UsageError`` when ``%autoawait`` is off (IPython would not run it either)."""
    flag = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
    try:
        code = compile(source, filename, "exec", shell.compile.flags | flag, True)
    except SyntaxError:
        return None
    if not code.co_flags & inspect.CO_COROUTINE:
        return None
    if not getattr(shell, "autoawait", True):
        raise UsageError("the cell uses top-level await and %autoawait is off: turn it on "
                         "(%autoawait asyncio), or wrap the code in a function and run it "
                         "with asyncio.run(main())")
    return code


def cell_number(shell: Any) -> int:
    """The number the front end shows beside the running cell (``In [n]``).

    ``shell.execution_count`` cannot tell: IPython 9.18 raises it before the cell runs,
    older releases after. The ``ExecutionResult`` of the running cell, which the
    display hook holds while the cell executes, carries the cell's own number on every
    release from 7.34 on (older ones fill it only when the cell is stored in history).
    """
    running = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    count = getattr(running, "execution_count", None)
    if isinstance(count, int):
        return count
    return int(shell.execution_count)  # not inside run_cell, or not stored in history


_TOKEN = re.compile(r"""(?:[^\s'"]+|'[^']*'|"[^"]*")+""")  # a word, quoted parts whole


def parse_options(magic: Any, text: str) -> Any:
    """The options in ``text`` split as a shell splits words, quotes grouping them and
    going (``--name 'my run'``, ``--trace "/tmp/a b.json"``: IPython's own
    ``parse_argstring`` keeps the quotes in the value), but a backslash kept as it is
    (``--trace C:\\runs\\a.json``). UsageError for a quote left open."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split, lexer.escape, lexer.commenters = True, "", ""
    try:
        argv = list(lexer)
    except ValueError as exc:  # ("No closing quotation")
        raise UsageError(f"cannot read the options: {exc}") from None
    return magic.parser.parse_args(argv)


def split_line(line: str) -> tuple[str, str]:
    """Split ``%profile`` arguments into (options, statement), keeping the statement verbatim.

    Options come first; the statement starts at the first token that is not an option
    or an option's value (``--`` ends the options explicitly).
    """
    expect_value = False
    for match in _TOKEN.finditer(line):
        token = match.group()
        if expect_value:
            expect_value = False
            continue
        if token == "--":
            return line[: match.start()], line[match.end():].strip()
        if not token.startswith("-") or token == "-":
            return line[: match.start()], line[match.start():].strip()
        option = token.split("=", 1)[0]
        if option in TAKES_VALUE:
            expect_value = TAKES_VALUE[option] and "=" not in token
        elif not option.startswith("--") and option[:2] in TAKES_VALUE:
            expect_value = False  # a short option with its value attached, e.g. -n5
        else:
            return line[: match.start()], line[match.start():].strip()
    return line, ""


def _trim_heap_in_background() -> None:
    """Hand the freed heap back to the OS on a daemon thread, off the cell's time.

    ``malloc_trim`` costs 2-4 ms even on small profiles; called through ctypes it runs
    without the GIL, so the cell ends at once while the trim finishes beside it.
    """
    from kernelmagic.live import torch_compat

    threading.Thread(target=torch_compat.return_freed_memory, name="kernelmagic-trim",
                     daemon=True).start()

