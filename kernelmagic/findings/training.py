"""Training-mode layers in a run with no backward pass: dropout (or CUDA batch norm) in
training mode where the profile holds no backward ops, i.e. inference with the model still
in training mode. ``dominant_op`` does not point at the ops this rule explains.
"""

from __future__ import annotations

from kernelmagic.core.op_names import BATCH_NORM_TRAINING, DROPOUT_OPS, DROPOUT_TRAINING
from kernelmagic.core.units import format_us, percent
from kernelmagic.findings.base import Finding, of_wall, wall_us
from kernelmagic.results.result import ProfileResult

TRAIN_MODE_SHARE = 0.1        # training-mode dropout/batch norm above this fraction


def _has_backward(result: ProfileResult) -> bool:
    return (any("backward" in r.key.lower() for r in result.op_totals if r.count)
            or any("backward" in g.key.lower() for g in result.ranges))


def train_mode_under_no_grad(result: ProfileResult) -> Finding | None:
    """Dropout (or CUDA batch norm) in training mode, in a profile with no backward pass."""
    rows = {r.key: r for r in result.op_totals if r.count}
    if _has_backward(result) or wall_us(result) <= 0:
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
