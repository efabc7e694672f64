"""Where the op time goes: one op dominating (``dominant_op``), many small elementwise ops
(``fusable_elementwise``), training-mode layers in a run with no backward pass
(``train_mode_under_no_grad``). A compiled graph is never "one op": when one dominates,
``dominant_graph`` names its heaviest fused kernels, or how to see them."""

from __future__ import annotations

from kernelmagic.core.compiled_rows import UNTIMED_HOW, CompiledRegionRow
from kernelmagic.core.op_names import (
    BATCH_NORM_TRAINING,
    DROPOUT_OPS,
    DROPOUT_TRAINING,
    ELEMENTWISE_OPS,
    MATMUL_OPS,
)
from kernelmagic.core.rows import OpRow
from kernelmagic.core.sorting import self_time
from kernelmagic.core.units import counted, format_us, percent
from kernelmagic.findings.base import (
    NAMED,
    Finding,
    of_wall,
    per_iter_self,
    wall_us,
)
from kernelmagic.findings.device import cheaper_matmuls, precision
from kernelmagic.findings.gpu import GPU_IDLE_SHARE
from kernelmagic.findings.startup import setup, startup_in_window, unexplained_idle
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.breakdown import is_comm_op
from kernelmagic.views.compiled import BACKWARD, GRAPH_CALL, REGION
from kernelmagic.views.ops import NO_OP, OP, RANGE

#: What a row's count counts: calls of CPU work (an op, runtime call or range), else pieces
#: of GPU work alone (``[no launch]``, ``[no op]``: ``views/ops.py``).
_CALLED, _RAN = ("call", "calls"), ("piece of GPU work", "pieces of GPU work")
DOMINANT_SHARE = 0.5          # one op's share of self time
ELEMENTWISE_CALLS = 30        # elementwise calls per iteration
ELEMENTWISE_SHARE = 0.25      # their share of self time
ELEMENTWISE_AVG_US = 50.0     # mean self time per call below this is "small"
TRAIN_MODE_SHARE = 0.1        # training-mode dropout/batch norm above this fraction


def dominant_op(result: ProfileResult) -> Finding | None:
    """One row with ``DOMINANT_SHARE`` of self time. Silent on a collective (that is
    ``communication_bound``), on a window that is mostly set-up (``startup_in_window``)
    and on dropout that ``train_mode_under_no_grad`` explains; when the GPU idles most of
    the iteration, the suggestion says that comes first."""
    if not result.rows or result.self_time_total <= 0:
        return None
    top = max(result.op_totals, key=lambda r: self_time(r, result.profiles_device))
    share = result.share(top)
    if share < DOMINANT_SHARE or is_comm_op(top.key):  # communication: its own rule
        return None
    if startup_in_window(result) is not None or any(top is r for r in setup(result).calls):
        return None
    if top.key in (*DROPOUT_OPS, *DROPOUT_TRAINING) and train_mode_under_no_grad(result):
        return None
    # a compiled graph's run or region: its kernels are the subject
    if GRAPH_CALL.match(top.key) or REGION.match(top.key):
        return dominant_graph(result, top, share)
    tries: tuple[str, ...] = ()
    against: tuple[str, ...] = ()
    subject = top.label
    # Priced on the side the share is of: on a device run, its kernels made faster (lower
    # precision, a better kernel), not its CPU time too; copies are removed, both sides.
    side = "device" if result.profiles_device else "cpu"
    if top.kind == NO_OP:  # GPU work launched right in the step: its kernels are the subject
        kernels = [k.key for k in result.kernels if k.launched_by == subject][:NAMED]
        subject += f" (launched with no op around: {', '.join(kernels)})" if kernels else ""
        hint = ("work on these kernels, which the step launches itself (a Triton kernel or "
                "an extension called from Python)")
    elif top.key in MATMUL_OPS:
        hint = cheaper_matmuls(result)
        p = precision(result)
        tries, against = p.variants, p.against
    elif top.key in ("aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous"):
        hint = "find and remove the copies: .contiguous(), .to(), dtype or device changes"
        side = "both"
    else:
        hint = f"optimise {subject} first; the rest together is {percent(1 - share)}"
    idle = unexplained_idle(result)
    if result.profiles_device and idle > GPU_IDLE_SHARE * wall_us(result):
        idles = percent(result.breakdown.share("idle"))
        hint = f"first keep the GPU busy (it idles {idles} of the iteration); then {hint}"
    per_iter = per_iter_self(result, top)
    return Finding(
        "dominant_op", "One op dominates",
        f"{subject} takes {percent(share)} of self time "
        f"({format_us(per_iter)} per iteration, "
        f"{counted(top.count / result.iters, *_CALLED if top.kind in (OP, RANGE) else _RAN)} per "
        "iteration)", hint,
        of_wall(result, per_iter), rows=(top.key,),
        change="making these kernels faster" if top.kind == NO_OP else f"making {subject} faster",
        variants=tries, against=against, side=side)


def _region_of(result: ProfileResult, row: OpRow) -> CompiledRegionRow | None:
    """The compiled region ``row`` ran in: by compile id for a region's row; for a graph's,
    the region whose graphs' time is nearest the row's."""
    regions = [r for r in result.compiled_regions if r.compile_id != BACKWARD]
    named = REGION.match(row.key)
    if named:
        return next((r for r in regions if r.compile_id == named[1]), None)
    return min(regions, key=lambda r: abs(r.graph_time_total - row.cpu_time_total),
               default=None)


def dominant_graph(result: ProfileResult, row: OpRow, share: float) -> Finding:
    """A compiled graph holding ``DOMINANT_SHARE`` of self time: its heaviest fused
    kernels and the aten ops they fuse, or how to see them."""
    per_iter = per_iter_self(result, row)
    region = _region_of(result, row)
    frame = (f" ({region.function}, {region.file.rsplit('/', 1)[-1]}:{region.line})"
             if region is not None and region.function and region.line else "")
    label = f"region {region.compile_id}{frame}" if region is not None else row.key
    kernels = [k for k in result.fused_kernels
               if region is None or not k.compile_id or k.compile_id == region.compile_id]
    timed = sorted((k for k in kernels if k.timed and k.time_total > 0),
                   key=lambda k: -k.time_total)
    untimed = [k for k in kernels if not k.timed]
    evidence = (f"the compiled graph of {label} takes {percent(share)} of self time "
                f"({format_us(per_iter)} per iteration)")
    if timed:
        evidence += "; its heaviest fused kernels: " + "; ".join(
            f"{k.key} {format_us(k.time_total / result.iters)} per iteration"
            + (f" ({k.aten_ops})" if k.aten_ops else "") for k in timed[:NAMED])
        top = timed[0]
        hint = (f"work on what its heaviest kernel, {top.key}, computes"
                + (f" ({top.aten_ops})" if top.aten_ops else "")
                + ": the inductor kernels table lists each kernel with its aten ops "
                  "and your lines")
    elif untimed:
        evidence += ("; its fused kernels (no times recorded): "
                     + "; ".join(f"{k.key} ({k.aten_ops})" if k.aten_ops else k.key
                                 for k in untimed[:NAMED]))
        hint = f"to see which kernel takes the time, {UNTIMED_HOW}"
    else:
        hint = ("see its fused kernels: on a GPU each is a kernel of its own (triton_*); on a "
                f"CPU, {UNTIMED_HOW}")
    return Finding("dominant_graph", "One compiled graph dominates", evidence, hint,
                   of_wall(result, per_iter))


def fusable_elementwise(result: ProfileResult) -> Finding | None:
    ops = [r for r in result.op_totals if r.key in ELEMENTWISE_OPS]
    calls = sum(r.count for r in ops) / result.iters
    if not ops or calls < ELEMENTWISE_CALLS or result.self_time_total <= 0:
        return None
    per_iter = sum(per_iter_self(result, r) for r in ops)
    share = result.share_of(ops, among=result.op_totals)
    avg = per_iter / calls
    if share < ELEMENTWISE_SHARE or avg >= ELEMENTWISE_AVG_US:
        return None
    return Finding(
        "fusable_elementwise", "Many small elementwise ops",
        f"{calls:g} elementwise calls per iteration averaging {format_us(avg)} take "
        f"{percent(share)} of self time",
        "fuse them with torch.compile (one kernel instead of many)", of_wall(result, per_iter),
        rows=tuple(r.key for r in ops), change="fusing them", variants=("compile",))


# --- training-mode layers with no backward pass: dropout (or CUDA batch norm) in training
# mode where the profile holds no backward ops, i.e. inference with the model still in
# training mode. ``dominant_op`` does not point at the ops this rule explains.


def train_mode_under_no_grad(result: ProfileResult) -> Finding | None:
    """Dropout (or CUDA batch norm) in training mode, in a profile with no backward pass."""
    rows = {r.key: r for r in result.op_totals if r.count}
    backward = (any("backward" in key.lower() for key in rows)
                or any("backward" in g.key.lower() for g in result.ranges))
    if backward or wall_us(result) <= 0:
        return None
    n = result.iters
    dropout = 0.0
    if any(k in rows for k in DROPOUT_TRAINING):
        outer = [rows[k] for k in DROPOUT_OPS if k in rows] or \
            [rows[k] for k in DROPOUT_TRAINING if k in rows]
        # Inclusive time; on a GPU the larger of its kernels' and its CPU's (launches).
        dropout = max(sum(r.cpu_time_total for r in outer),
                      sum(r.device_time_total for r in outer)) / n
    norms = [k for k in result.kernels if BATCH_NORM_TRAINING.search(k.key)]
    norm = sum(k.device_time_total for k in norms) / n
    share = of_wall(result, dropout + norm)
    if share < TRAIN_MODE_SHARE:
        return None
    said = []
    if dropout:
        mask = [f"{rows[k].key} ×{rows[k].count / n:g}" for k in DROPOUT_TRAINING if k in rows]
        said.append(f"dropout takes {format_us(dropout)} per iteration "
                    f"({percent(of_wall(result, dropout))} of the iteration; random masks: "
                    f"{', '.join(mask)})")
        bn = rows.get("aten::native_batch_norm") or rows.get("aten::cudnn_batch_norm")
        if bn is not None and not norms:
            said.append(f"batch norm ({bn.key}, {format_us(bn.cpu_time_total / n)}) "
                        "computes batch statistics in training mode too")
    if norms:
        said.append(f"batch norm computes batch statistics ({norms[0].key[:60]}): "
                    f"{format_us(norm)} per iteration")
    return Finding(
        "train_mode_under_no_grad", "Training-mode layers in a run with no backward pass",
        "; ".join(said) + "; the profile has no backward ops, so this looks like inference "
        "with the model in training mode",
        "call model.eval() for inference (dropout becomes the identity, batch norm uses its "
        "running statistics), with torch.no_grad() or torch.inference_mode()", share,
        rows=tuple(k for k in (*DROPOUT_OPS, *DROPOUT_TRAINING) if k in rows),
        change="eval mode")
