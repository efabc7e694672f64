"""The critical path of an iteration, and what making a row faster would buy.

``views/dependencies.py`` builds the iteration's dependency model; here it is replayed. A
replay is max-plus arithmetic over the model's arrays: each thread is one chain
(``t[p] = max(t[p-1] + d[p], c[p])``, a cumulative sum and a running maximum), each stream
one chain (``end[i] = max(end[i-1] + gap[i], ready[i]) + dur[i]``), and the blocking calls
tie the two; one sweep computes every node once, in an order planned once per model
(``_Sweep``, ``_runs``). Many scenarios replay at once, one per matrix column:
``max_gains`` removes each op-table row in turn with one batched replay.

The predicted iteration is the longer of (a) the iteration's own thread, from the window's
start to its end, and (b) the measured window shortened by what the whole schedule (every
thread, and GPU work that runs on past the window) gained. Unchanged, both give the
measured window, so ``what_if({})`` reproduces it; speed-ups never lengthen it.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kernelmagic.core.arrays import concat_ranges, stable_order
from kernelmagic.core.events import EventTable, Window
from kernelmagic.core.rows import KIND_MARKS, CriticalPathRow, Span
from kernelmagic.core.units import format_us, percent
from kernelmagic.views.dependencies import (
    CATEGORY_NAMES,
    GPU_WORK,
    IDLE,
    LAUNCH,
    NONE,
    Model,
    build_model,
)
from kernelmagic.views.tree import Figures

__all__ = ["SIDES", "IterationView", "WhatIf", "critical_path", "iteration_view", "max_gains",
           "path_summary", "predict", "saved_each", "what_if"]

SIDES = ("both", "cpu", "device")
PATH_LANE = "critical path"  # the timeline lane the path is drawn on
SPAN_RESOLUTION = 4000  # the lane keeps pieces longer than the iteration / this (a pixel)
#: Scenario x node cells replayed at once: about 160 MB at the peak where half the nodes
#: are GPU items (the chains' running sums and the items' launch asks, ``_launch_asks``).
_MAX_CELLS = 8_000_000
#: What a replay's fixed cost is worth in node x scenario cells (``_worth_pruning``): a
#: segment of the sweep costs about as much as 1,500 cells (about 10 µs against 7-15 ns
#: a cell here), a replay about as much as 15,000 besides.
_SEGMENT_CELLS = 1_500
_REPLAY_CELLS = 15_000


@dataclass(frozen=True)
class WhatIf:
    """A ``what_if`` answer: the predicted median iteration and its critical path (µs)."""

    iteration_us: float
    measured_us: float
    saved_us: float
    saved_share: float
    critical_path: list[CriticalPathRow] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """The new critical path in one line (``path_summary``)."""
        return path_summary(self.critical_path)

    def __str__(self) -> str:
        return (f"predicted iteration {format_us(self.iteration_us)} of "
                f"{format_us(self.measured_us)} measured: saves {format_us(self.saved_us)} "
                f"({percent(self.saved_share)}); {self.summary}")


def _f(a: np.ndarray) -> np.ndarray:
    out = a.astype(np.float64)
    out[a == NONE] = -np.inf
    return out


@dataclass(frozen=True)
class _Schedule:
    """Every scenario's schedule, node-major: row ``n`` of each array is node ``n``'s value
    in every scenario (a column per scenario), so that a chain's running sums and maxima
    run down contiguous rows."""

    t: np.ndarray  # (P, S) CPU positions' times
    end: np.ndarray  # (W, S) GPU items' ends
    d: np.ndarray  # (P, 1) stretches into positions, scaled (scenario 0: for the walk)
    dur: np.ndarray  # (W, 1) GPU items' durations, scaled (scenario 0)
    sync_c: np.ndarray  # (Q, S) what each blocking call's end waits for (-inf: nothing)
    cpu_f: np.ndarray  # (S, R+1) the CPU multipliers replayed
    cross_c: np.ndarray  # (X, S) what each edge between threads asks of its target
    backlog: np.ndarray  # (W, 1) the carried-in backlog each item waits behind (scenario 0)


@dataclass(frozen=True)
class _Graph:
    """The model as one graph for the sweep, built once per model: CPU positions are nodes
    ``0..P-1``, GPU items ``P..P+W-1``; each thread and each stream is a *domain*, a run
    of consecutive nodes. ``need_node[k]`` must be computed before ``need_of[k]`` (edges
    between domains: launches, syncs, waits between streams, edges between threads)."""

    dom_off: np.ndarray  # node range of each domain: threads first, then streams
    dom_of: np.ndarray  # each node's domain
    need_of: np.ndarray  # sorted: the node that needs
    need_node: np.ndarray  # the node it needs
    sync_order: np.ndarray  # the syncs by their position
    sync_at: np.ndarray  # their positions, sorted
    sync_shared: bool  # two syncs at one position (a blocking call whose launch waited too)
    cross_order: np.ndarray
    cross_at: np.ndarray
    item_stream: np.ndarray  # each item's stream
    # the syncs' groups in ``sync_order``: the non-empty ones (positions in that order),
    # their items concatenated, and where each starts there
    sync_full: np.ndarray
    sync_gather: np.ndarray
    sync_firsts: np.ndarray
    launch: np.ndarray  # each item's launch position (P: none, the sweep's row of -inf)
    by_launch: np.ndarray  # the items in the order of their launch positions
    waiting: np.ndarray  # the items that wait on other streams, in order
    wait_single: bool  # each of them waits for one item
    anchored: np.ndarray  # (W+1,) how many items before each have an anchor (running count)


def _graph(m: Model) -> _Graph:
    cached = m.__dict__.get("_graph")
    if cached is not None:
        return cached
    p, w = m.pos_anchor.size, m.item_dur.size
    dom_off = np.concatenate((m.chain_off[:-1], p + m.stream_off)).astype(np.int64)
    dom_of = np.repeat(np.arange(dom_off.size - 1), np.diff(dom_off))
    nodes, needs = [], []
    launched = np.flatnonzero(m.item_launch >= 0)
    nodes.append(p + launched)
    needs.append(m.item_launch[launched])
    wait_of = np.repeat(np.arange(w), np.diff(m.wait_off))
    nodes.append(p + wait_of)
    needs.append(p + m.wait_dep)
    sync_of = np.repeat(np.arange(m.sync_pos.size), np.diff(m.sync_off))
    nodes.append(m.sync_pos[sync_of])
    needs.append(p + m.sync_dep)
    nodes.append(m.cross_target)
    needs.append(m.cross_source)
    need_of = np.concatenate(nodes).astype(np.int64)
    need_node = np.concatenate(needs).astype(np.int64)
    order = np.argsort(need_of, kind="stable")
    sync_order = np.argsort(m.sync_pos, kind="stable")
    cross_order = np.argsort(m.cross_target, kind="stable")
    item_stream = np.repeat(np.arange(m.stream_off.size - 1), np.diff(m.stream_off))
    full, gather, firsts = _groups(m.sync_off, m.sync_dep, sync_order)
    waiting = np.flatnonzero(np.diff(m.wait_off) > 0)
    launch = np.where(m.item_launch >= 0, m.item_launch, p)
    sync_at = m.sync_pos[sync_order]
    graph = _Graph(dom_off, dom_of, need_of[order], need_node[order], sync_order,
                   sync_at, bool((sync_at[1:] == sync_at[:-1]).any()),
                   cross_order, m.cross_target[cross_order],
                   item_stream, full, gather, firsts,
                   launch, np.argsort(launch, kind="stable"), waiting,
                   bool(m.wait_dep.size == waiting.size),
                   np.concatenate(([0], np.cumsum(m.item_anchor != NONE))))
    m.__dict__["_graph"] = graph
    return graph


def _stream_ratios(m: Model, dur: np.ndarray) -> np.ndarray:
    """(streams, S): each stream's work in the window, scaled, over its measured length:
    how much faster the work carried in from earlier iterations runs in the steady state
    (1 where a stream has no work)."""
    k = m.stream_off.size - 1
    if k <= 0 or not dur.shape[0]:
        return np.ones((max(k, 0), dur.shape[1]))
    first = m.stream_off[:-1]
    measured = np.add.reduceat(m.item_dur.astype(np.float64), first)[:, None]
    scaled = np.add.reduceat(dur, first, axis=0)
    return np.where(measured > 0, scaled / np.where(measured > 0, measured, 1.0), 1.0)


def _replay(m: Model, cpu_f: np.ndarray, gpu_f: np.ndarray) -> _Schedule:
    """Every scenario's schedule; ``cpu_f``/``gpu_f``: (S, R+1) multipliers per row (the
    last column, 1, is for time that belongs to no row). One sweep through the graph in
    an order that respects every edge (``_Sweep``): time linear in the model's size.
    Three arrays of node x scenario hold it all (their memory is most of the replay's
    cost): each chain's running sums, which become its times in place, and each GPU
    item's launch ask (``_launch_asks``)."""
    r = len(m.row_key)
    g = _graph(m)
    d = _stretches(m, cpu_f)
    dur = gpu_f.T[np.where(m.item_row >= 0, m.item_row, r)]
    dur *= m.item_dur[:, None]
    ratio = _stream_ratios(m, dur)
    sync_scale = cpu_f.T[np.where(m.sync_row >= 0, m.sync_row, r)]
    fixed = np.repeat(_f(m.sync_fixed)[:, None], cpu_f.shape[0], axis=1)
    scaled = np.flatnonzero((m.sync_stream >= 0) & (m.sync_fixed != NONE))
    if scaled.size:
        fixed[scaled] = m.sync_fixed[scaled, None] * ratio[m.sync_stream[scaled]]
    walked = (d[:-1, :1].copy(), dur[:, :1].copy(),  # (the walk reads scenario 0 only)
              (m.item_backlog * ratio[g.item_stream, 0])[:, None])
    anchors, wait_dur = _anchors(m, g, dur, ratio), dur[g.waiting]
    dur += m.item_gap[:, None]
    sweep = _Sweep(m, g, _running(d, m.chain_off), _running(dur, m.stream_off), anchors,
                   wait_dur, fixed, m.sync_post[:, None] * sync_scale,
                   sync_scale == 0)  # a blocking call removed altogether no longer waits
    del d, dur
    sweep.run()
    return _Schedule(sweep.t, sweep.end, walked[0], walked[1], sweep.sync_c, cpu_f,
                     sweep.cross_c, walked[2])


def _anchors(m: Model, g: _Graph, dur: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """(A, S): what the start of each item with an anchor asks, plus its duration (items in
    order; ``_Graph.anchored`` counts them): its measured start, the carried-in backlog it
    waits behind scaled as its stream's work is."""
    at = np.flatnonzero(m.item_anchor != NONE)
    backlog = m.item_backlog[at]
    out = ratio[g.item_stream[at]] * backlog[:, None]
    out += (m.item_anchor[at] - backlog).astype(np.float64)[:, None]
    out += dur[at]
    return out


class _Segment(NamedTuple):
    """Nodes ``lo:hi`` of one domain (local indices: positions, or items), computed in one
    go; ``a:b`` and ``c:e`` index what ends in it in ``_Graph``'s sorted arrays."""

    cpu: bool
    k: int  # its domain: a thread's chain, or a stream
    lo: int
    hi: int
    carry: bool  # continues from the node before it on its thread or stream
    a: int  # CPU: its syncs, sync_order[a:b]; GPU: its waiting items, waiting[a:b]
    b: int
    c: int  # CPU: their non-empty groups, sync_full[c:e]; GPU: 1 if an item has an anchor
    e: int
    x: int  # CPU: its edges from other threads, cross_order[x:y]
    y: int
    l_lo: int  # CPU: the items it launches, by_launch[l_lo:l_hi] (none where the plan
    l_hi: int  # has no order: there each stream segment reads its launches' times)


def _groups(off: np.ndarray, dep: np.ndarray,
            which: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the groups ``which`` of ``dep`` (group j: ``dep[off[j]:off[j+1]]``), the
    non-empty ones, their members concatenated and where each starts."""
    counts = off[which + 1] - off[which]
    full = np.flatnonzero(counts > 0)
    n = counts[full]
    return full, dep[concat_ranges(off[which[full]], n)], np.cumsum(n) - n


class _Needs(NamedTuple):
    """What one domain's nodes need of another domain ``dom``: its nodes that need some
    (``nodes``, in order) and, down them, the latest node needed so far (``latest``), kept
    only where that grows (``_reachable`` searches it); ``all_nodes``, ``all_needs``: every
    need, for ``_forget_before``."""

    dom: int
    nodes: list[int]
    latest: list[int]
    all_nodes: np.ndarray
    all_needs: np.ndarray


def _needs_by_domain(g: _Graph) -> list[list[_Needs]]:
    """Per domain, what its nodes need of each other domain (``_Needs``)."""
    n_dom = g.dom_off.size - 1
    of, need = g.dom_of[g.need_of], g.dom_of[g.need_node]
    pair = of * n_dom + need
    order = stable_order(pair)  # (each node's needs stay in order)
    pair = pair[order]
    cuts = np.flatnonzero(np.diff(pair)) + 1
    out: list[list[_Needs]] = [[] for _ in range(n_dom)]
    if not pair.size:
        return out
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), pair.size], strict=True):
        at = order[lo:hi]
        out[int(of[at[0]])].append(_latest_needs(int(need[at[0]]), g.need_of[at],
                                                 g.need_node[at]))
    return out


def _latest_needs(dom: int, nodes: np.ndarray, needs: np.ndarray) -> _Needs:
    latest = np.maximum.accumulate(needs)
    grows = np.ones(latest.size, bool)
    grows[1:] = latest[1:] > latest[:-1]
    return _Needs(dom, nodes[grows].tolist(), latest[grows].tolist(), nodes, needs)


def _plan(m: Model, g: _Graph) -> tuple[list[_Segment], int]:
    """The order the sweep computes the model in (``_runs``) as segments, and how many
    nodes it forced on; once per model (it does not depend on the durations)."""
    cached = m.__dict__.get("_plan")
    if cached is None:
        runs, forced = _runs(g)
        cached = m.__dict__["_plan"] = (_segments(m, g, runs, forced > 0), forced)
    return cached


def _runs(g: _Graph) -> tuple[np.ndarray, int]:
    """(domain, lo, hi) in the order computed: each domain advanced in turn as far as the
    nodes whose needs from other domains are computed (``_reachable``); a domain waits,
    untried, until the node that stopped it is computed. Where no such order exists (a
    cycle of needs: waits recorded out of order), one node is forced on, before a need;
    how many were is the second value (then the sweep relaxes after: ``_Sweep.relax``)."""
    needs = _needs_by_domain(g)
    progress = g.dom_off[:-1].tolist()
    stop = g.dom_off[1:].tolist()
    blocker: list[tuple[int, int] | None] = [None] * len(stop)  # (domain, node) waited for
    runs: list[tuple[int, int, int]] = []
    forced = 0
    open_ = [k for k in range(len(stop)) if progress[k] < stop[k]]
    while open_:
        moved = done = False
        for k in open_:
            wait = blocker[k]
            if wait is not None and progress[wait[0]] <= wait[1]:
                continue  # (still not computed)
            lo = progress[k]
            hi, blocker[k] = _reachable(needs[k], progress, stop[k])
            if hi > lo:
                runs.append((k, lo, hi))
                progress[k] = hi
                moved = True
                done = done or hi == stop[k]
        if done:
            open_ = [k for k in open_ if progress[k] < stop[k]]
        if not moved and open_:  # (no order: one node forced on)
            k = open_[0]
            runs.append((k, progress[k], progress[k] + 1))
            progress[k] += 1
            blocker[k] = None
            needs[k] = [_forget_before(x, progress[k]) for x in needs[k]]
            open_ = [k for k in open_ if progress[k] < stop[k]]
            forced += 1
    return np.asarray(runs, np.int64).reshape(-1, 3), forced


def _reachable(needs: list[_Needs], progress: list[int],
               hi: int) -> tuple[int, tuple[int, int] | None]:
    """The end (``hi`` at most) of the run of a domain's nodes from its progress on whose
    needs are all computed (node n of a domain is computed when n < its progress), and
    the (domain, node) of the first need not computed yet (None: none). The first node
    whose latest need so far is not computed is the first whose own need is not: a
    binary search per domain needed."""
    block = None
    for dom, nodes, latest, _, _ in needs:
        i = bisect_left(latest, progress[dom])
        if i < len(nodes) and nodes[i] < hi:
            hi, block = nodes[i], (dom, latest[i])
    return hi, block


def _forget_before(x: _Needs, lo: int) -> _Needs:
    """``x`` without the needs of nodes before ``lo`` (the plan moved past a node whose need
    was not computed: ``_plan`` where no order exists)."""
    keep = x.all_nodes >= lo
    return _latest_needs(x.dom, x.all_nodes[keep], x.all_needs[keep])


def _segments(m: Model, g: _Graph, runs: np.ndarray, cyclic: bool) -> list[_Segment]:
    """The plan's runs ``(domain, lo, hi)`` as segments, every lookup done at once."""
    k, lo, hi = runs.T.copy()  # (``runs`` stays as given)
    n_chains, p = m.chain_off.size - 1, m.pos_anchor.size
    cpu = k < n_chains
    first = np.where(cpu, m.chain_off[np.minimum(k, n_chains)],
                     p + m.stream_off[np.maximum(k - n_chains, 0)])
    carry = lo > first
    a, b, c, e, x, y, l_lo, l_hi = (np.zeros(k.size, np.int64) for _ in range(8))
    on = np.flatnonzero(cpu)
    a[on], b[on] = g.sync_at.searchsorted(lo[on]), g.sync_at.searchsorted(hi[on])
    c[on], e[on] = g.sync_full.searchsorted(a[on]), g.sync_full.searchsorted(b[on])
    x[on], y[on] = g.cross_at.searchsorted(lo[on]), g.cross_at.searchsorted(hi[on])
    if not cyclic:
        launch_order = g.launch[g.by_launch]
        l_lo[on], l_hi[on] = launch_order.searchsorted(lo[on]), launch_order.searchsorted(hi[on])
    on = np.flatnonzero(~cpu)
    lo[on] -= p
    hi[on] -= p
    a[on], b[on] = g.waiting.searchsorted(lo[on]), g.waiting.searchsorted(hi[on])
    c[on] = g.anchored[hi[on]] > g.anchored[lo[on]]
    k = np.where(cpu, k, k - n_chains)
    columns = (cpu, k, lo, hi, carry, a, b, c, e, x, y, l_lo, l_hi)
    # (tuple.__new__ makes each without a call in Python: 21,700 segments at 1M events)
    return list(map(tuple.__new__, itertools.repeat(_Segment),
                    zip(*(col.tolist() for col in columns), strict=True)))


class _Sweep:
    """The max-plus schedule of every scenario at once, segment by segment in the order
    of ``_plan``: each thread is a chain (``t[p] = max(t[p-1] + d[p], c[p])``: a running
    sum and a running maximum), each stream one too (``end[i] = max(end[i-1] + gap[i],
    ready[i]) + dur[i]``). Each node is computed once: time linear in the model.

    The chains' running sums (``cpu_run``: of the stretches; ``gpu_run``: of each item's
    gap and duration) become the times (``t``, ``end``) in place, segment by segment: a
    node's running sum is read only while its own segment is computed, and each chain
    carries what its next segment needs (``_Carried``); each GPU item's launch ask takes
    its launch's time as soon as that is computed (``_cpu``). Where ``_plan`` found
    no order, the relaxation's passes need the sums and the asks again: there the times
    get arrays of their own and each segment reads its launches' times itself."""

    def __init__(self, m: Model, g: _Graph, cpu_run: np.ndarray, gpu_run: np.ndarray,
                 anchors: np.ndarray, wait_dur: np.ndarray, fixed: np.ndarray,
                 post: np.ndarray, dropped: np.ndarray) -> None:
        """``cpu_run`` (P+1, S; the last row is for work with no launch) and ``gpu_run``
        (W, S) are used up unless the plan has no order."""
        self.m, self.g = m, g
        s = cpu_run.shape[1]
        self.plan, self.forced = _plan(m, g)
        self.cyclic = self.forced > 0
        self.cpu_run, self.gpu_run = cpu_run, gpu_run
        if self.cyclic:  # -inf: what is not computed yet
            self.t, self.end = np.full(cpu_run.shape, -np.inf), np.full(gpu_run.shape, -np.inf)
        else:
            self.t, self.end = cpu_run, gpu_run
        self.t[-1] = -np.inf  # (the launch position of work with no launch)
        self.cpu_in = _Carried(m.chain_off, s)
        # (a stream's segment carries in from its asks' row before it, where the plan has an
        # order: ``_gpu``; only the relaxation's passes keep the streams' maxima too)
        self.gpu_in = _Carried(m.stream_off, s) if self.cyclic else None
        self.sync_c = np.full((m.sync_pos.size, s), -np.inf)  # (in ``sync_order`` until run)
        self.cross_c = np.full((m.cross_target.size, s), -np.inf)
        self.anchor = _f(m.pos_anchor)
        # What the anchors and the stream waits ask of an item's end, beyond its running
        # sum: anchors (A, S) and the waiting items' durations (in ``waiting``'s order),
        # less the items' running sums, before the sweep makes those end times.
        self.anchored_at = np.flatnonzero(m.item_anchor != NONE)
        anchors -= gpu_run[self.anchored_at]
        wait_dur -= gpu_run[g.waiting]
        self.anchors, self.wait_ask = anchors, wait_dur
        # a stream wait of one item on one item, the common case, read by plain indexing
        self.wait_item = g.waiting.tolist()
        self.wait_dep = m.wait_dep[m.wait_off[g.waiting]].tolist() if g.wait_single else []
        self.ask = _launch_asks(m, gpu_run)
        if not self.cyclic:
            # Each item's ask takes its launch's time when the sweep computes the launch
            # (``_cpu``), one gather per CPU segment, not per stream segment.
            self.ask[g.launch == m.pos_anchor.size] = -np.inf  # (work with no launch)
        # The syncs in ``sync_order`` (a CPU segment's are a slice): the end of the work
        # launched before the window each waits for, the call's own time after its work,
        # and whether the call is removed altogether (it no longer waits).
        self.sync_fixed, self.sync_post = fixed[g.sync_order], post[g.sync_order]
        self.sync_dropped = dropped[g.sync_order] if dropped.any() else None

    def run(self) -> None:
        for seg in self.plan:
            if seg.cpu:
                self._cpu(seg)
            else:
                self._gpu(seg)
        if self.cyclic:
            self.relax()
        self.t = self.t[:-1]
        self.sync_c[self.g.sync_order] = self.sync_c.copy()  # (back in the model's order)
        del self.anchors, self.wait_ask, self.cpu_run, self.gpu_run, self.ask

    def relax(self) -> None:
        """Whole passes over the plan until nothing moves (the least fixed point, from the
        sweep's lower bound): only where ``_plan`` found no order. Only the needs of the
        nodes it forced on point back in the plan, and a longest path enters each node
        once, so each pass settles one more of them: without a cycle that adds time
        that takes one pass per forced node and one more. A model that needs more (its
        waits form such a cycle: no schedule meets it) is an error, not a hang."""
        for _ in range(self.forced + 1):
            before = self.t.copy(), self.end.copy()
            for seg in self.plan:
                if seg.cpu:
                    self._cpu(seg)
                else:
                    self._gpu(seg)
            if np.array_equal(before[0], self.t) and np.array_equal(before[1], self.end):
                return
        raise ValueError("the dependency model has a cycle of waits that adds time: "
                         "no schedule meets it (a model that was not measured)")

    def _cpu(self, seg: _Segment) -> None:
        """A thread's positions ``lo:hi``, in ``_Carried``'s terms: what each asks beyond its
        running sum (``c``), the largest of its anchor's, its syncs' and its edges' from
        other threads (each a time, less the position's running sum)."""
        g, lo, hi = self.g, seg.lo, seg.hi
        run = self.cpu_run[lo:hi]
        c = self.anchor[lo:hi, None] - run
        a, b = seg.a, seg.b
        if b > a:
            got = self.sync_fixed[a:b].copy()
            if seg.e > seg.c:
                first = int(g.sync_firsts[seg.c])
                stop = (int(g.sync_firsts[seg.e]) if seg.e < g.sync_firsts.size
                        else g.sync_gather.size)
                waited = np.maximum.reduceat(self.end[g.sync_gather[first:stop]],
                                             g.sync_firsts[seg.c:seg.e] - first, axis=0)
                if seg.e - seg.c == b - a:  # (every sync here waits for work in the window)
                    np.maximum(got, waited, out=got)
                else:
                    has = g.sync_full[seg.c:seg.e] - a
                    got[has] = np.maximum(got[has], waited)
            got += self.sync_post[a:b]
            if self.sync_dropped is not None:
                got[self.sync_dropped[a:b]] = -np.inf
            self.sync_c[a:b] = got
            if b == a + 1:  # (one sync, the common case: plain rows)
                i = int(g.sync_at[a]) - lo
                row = c[i]
                np.maximum(row, np.subtract(got[0], run[i]), out=row)
            else:
                at = g.sync_at[a:b] - lo
                got -= run[at]
                if g.sync_shared:  # (each position's latest sync, not its last one)
                    np.maximum.at(c, at, got)
                else:
                    c[at] = np.maximum(c[at], got)
        if seg.y > seg.x:
            m = self.m
            xs = g.cross_order[seg.x:seg.y]
            got = self.t[m.cross_source[xs]] + m.cross_off[xs, None]
            self.cross_c[xs] = got
            at = m.cross_target[xs] - lo
            c[at] = np.maximum(c[at], got - run[at])
        self.cpu_in.advance(seg, c, run, self.t[lo:hi])
        if seg.l_hi > seg.l_lo:  # (the items launched here: each ask takes its launch time)
            items = g.by_launch[seg.l_lo:seg.l_hi]
            self.ask[items] += self.t[g.launch[items]]

    def _gpu(self, seg: _Segment) -> None:
        """A stream's items ``lo:hi``, in ``_Carried``'s terms: what each item's end asks
        beyond its running sum (``c``), the largest of its launch's (the launch's time, the
        latency, less the gap and the running sum before the item), its anchor's and its
        waits' (each an end time, less the item's running sum)."""
        m, g, lo, hi = self.m, self.g, seg.lo, seg.hi
        if self.cyclic:
            c = self.t[g.launch[lo:hi]]
            c += self.ask[lo:hi]
        else:  # (their launches' times are in: ``_cpu`` added them)
            c = self.ask[lo:hi]
        if seg.c:
            first, last = int(g.anchored[lo]), int(g.anchored[hi])
            on = self.anchored_at[first:last]
            at = on - lo
            c[at] = np.maximum(c[at], self.anchors[first:last])
        if seg.b == seg.a + 1 and self.wait_dep:
            row = c[self.wait_item[seg.a] - lo]
            np.maximum(row, self.end[self.wait_dep[seg.a]] + self.wait_ask[seg.a], out=row)
        elif seg.b > seg.a:
            items = g.waiting[seg.a:seg.b]
            deps = m.wait_dep[m.wait_off[items[0]]:m.wait_off[items[-1] + 1]]
            waited = self.end[deps]
            if not g.wait_single:
                waited = np.maximum.reduceat(waited, m.wait_off[items] - m.wait_off[items[0]],
                                             axis=0)
            waited += self.wait_ask[seg.a:seg.b]
            at = items - lo
            c[at] = np.maximum(c[at], waited)
        if self.gpu_in is not None:  # (the plan has no order)
            self.gpu_in.advance(seg, c, self.gpu_run[lo:hi], self.end[lo:hi])
            return
        # ``_Carried.advance`` in place: ``c`` is the asks' rows, so what the stream
        # carries in is the row before it, as the segment before left it.
        if seg.carry:
            head = c[0]
            np.maximum(head, self.ask[lo - 1], out=head)
        if hi > lo + 1:
            np.maximum.accumulate(c, axis=0, out=c)
        out = self.end[lo:hi]  # (the running sums, which become the ends)
        np.add(c, out, out=out)


def _launch_asks(m: Model, gpu_run: np.ndarray) -> np.ndarray:
    """(W, S): what each item's end asks of its launch's time beyond the item's own running
    sum (gap + duration, summed down its stream): the latency, less the gap, less the
    running sum before the item on its stream. Made once per replay, before the sweep
    turns the running sums into end times."""
    w = gpu_run.shape[0]
    lat_gap = (m.item_lat - m.item_gap).astype(np.float64)[:, None]
    ask = np.empty_like(gpu_run)
    np.subtract(lat_gap[1:], gpu_run[:-1], out=ask[1:])
    firsts = m.stream_off[:-1][m.stream_off[:-1] < w]  # (nothing before them)
    ask[firsts] = lat_gap[firsts]
    return ask


class _Carried:
    """What each chain's next segment takes from the one before (``out[p] = max(out[p-1] +
    step[p], c[p])`` continued): the running maximum so far of what a node asks beyond its
    running sum, per chain (S each)."""

    def __init__(self, off: np.ndarray, s: int) -> None:
        self.max = np.empty((max(off.size - 1, 0), s))

    def advance(self, seg: _Segment, c: np.ndarray, run: np.ndarray, out: np.ndarray) -> None:
        """The segment's times ``out`` from ``c`` (used up: what each node asks beyond its
        running sum) and its running sums ``run``, which may be ``out`` itself."""
        if seg.carry:
            head = c[0]
            np.maximum(head, self.max[seg.k], out=head)
        if c.shape[0] > 1:  # (a segment of one node, common on streams that wait on each other)
            np.maximum.accumulate(c, axis=0, out=c)
        self.max[seg.k] = c[-1]
        np.add(c, run, out=out)


def _latest(end: np.ndarray, dep: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(len(lo), S): per group ``dep[lo[j]:hi[j]]``, the latest ``end`` (-inf: empty)."""
    out = np.full((lo.size, end.shape[1]), -np.inf)
    counts = hi - lo
    full = np.flatnonzero(counts > 0)
    if not full.size:
        return out
    n = counts[full]
    out[full] = np.maximum.reduceat(end[dep[concat_ranges(lo[full], n)]], np.cumsum(n) - n,
                                    axis=0)
    return out


def _parts_by_row(m: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Each position's stretch unscaled, and the CPU parts grouped by row (the last group:
    no row): their positions, their durations, where each row's group starts, and whether
    no row has two parts at one position (in two categories). Sparse: a model of many
    rows and positions never holds a row x position matrix."""
    cached = m.__dict__.get("_parts_by_row")
    if cached is None:
        r = len(m.row_key)
        pos = np.repeat(np.arange(m.pos_anchor.size), np.diff(m.part_off))
        dur = m.part_dur.astype(np.float64)
        base = np.bincount(pos, weights=dur, minlength=m.pos_anchor.size)
        row = np.where(m.part_row >= 0, m.part_row, r)
        # (rows are few: a radix sort, linear; positions stay in order within each)
        order = stable_order(row)
        row, pos, dur = row[order], pos[order], dur[order]
        once = not ((row[1:] == row[:-1]) & (pos[1:] == pos[:-1])).any()
        cached = (base, pos, dur, np.searchsorted(row, np.arange(r + 2)), once)
        m.__dict__["_parts_by_row"] = cached
    return cached


def _stretches(m: Model, cpu_f: np.ndarray) -> np.ndarray:
    """(P+1, S): each position's stretch since the previous one, its parts scaled by row
    (the last row: room for ``_Sweep``'s row of work with no launch). Only the parts of
    the rows a scenario changes are touched."""
    base, pos, dur, off, once = _parts_by_row(m)
    d = np.empty((base.size + 1, cpu_f.shape[0]))
    d[:-1] = base[:, None]
    scenario, row = np.nonzero(cpu_f != 1.0)
    counts = off[row + 1] - off[row]
    if counts.sum():  # every changed row's parts at once: (position, scenario) += change
        parts = concat_ranges(off[row], counts)
        change = np.repeat(cpu_f[scenario, row] - 1.0, counts) * dur[parts]
        at = pos[parts] * d.shape[1]  # (flat indices into d)
        at += np.repeat(scenario, counts)
        if once and (scenario[1:] != scenario[:-1]).all():  # (no cell twice)
            d.reshape(-1)[at] += change
        else:
            np.add.at(d.reshape(-1), at, change)
    return d


def _running(d: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Running sums of ``d`` down each chain (rows ``off[k]:off[k+1]``), in place."""
    for lo, hi in zip(off[:-1].tolist(), off[1:].tolist(), strict=True):
        np.add.accumulate(d[lo:hi], axis=0, out=d[lo:hi])
    return d


def _span(m: Model, sched: _Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Per scenario: the iteration thread's length, and where it or its GPU work ends
    (other threads count only through their edges to it: a worker running past the
    window does not hold the iteration back)."""
    s = sched.cpu_f.shape[0]
    lasts = m.chain_off[1:] - 1
    own = sched.t[lasts[m.main_chain]].copy() if m.main_chain >= 0 else np.zeros(s)
    whole = own.copy()
    if sched.end.shape[0]:
        whole = np.maximum(whole, sched.end.max(axis=0))
    return own, whole


def _factors(m: Model, s: int) -> tuple[np.ndarray, np.ndarray]:
    ones = np.ones((s, len(m.row_key) + 1))
    return ones, ones.copy()


def _baseline(m: Model) -> tuple[float, _Schedule]:
    """The measured schedule (every factor 1) and where it ends; computed once per model."""
    cached = m.__dict__.get("_baseline")
    if cached is None:
        sched = _replay(m, *_factors(m, 1))
        cached = m.__dict__["_baseline"] = (float(_span(m, sched)[1][0]), sched)
    return cached


def predict(m: Model, cpu_f: np.ndarray, gpu_f: np.ndarray) -> tuple[np.ndarray, _Schedule]:
    """Predicted iteration (ns) per scenario (the module docstring's rule), and schedules."""
    base_whole, base = _baseline(m)
    changed = (cpu_f != 1).any() or (gpu_f != 1).any()
    sched = _replay(m, cpu_f, gpu_f) if changed or cpu_f.shape[0] != 1 else base
    own, whole = _span(m, sched)
    return np.maximum(own, m.window_ns - (base_whole - whole)), sched


def max_gains(m: Model) -> np.ndarray:
    """Per row of the model: ns the iteration would shrink if the row took no time.

    Only the rows that can change the end are replayed: removing a row's time shortens
    every path by that row's time on it, so the iteration can shrink by at most the row's
    time on the critical path, and a row with none there saves nothing. (Rows whose
    removal changes more than their own time are always replayed: a blocking call's,
    whose wait goes with it, and GPU work on a stream whose carried-in backlog scales
    with it.) Then one batched replay for the rest. Where every row fits in one replay
    and pruning is not worth its own replay of the measured schedule (``_worth_pruning``),
    one replay of every row and the measured schedule instead."""
    r = len(m.row_key)
    gains = np.zeros(r)
    if m.empty or not r:
        return gains
    per_chunk = _scenarios_per_replay(m)
    if r + 1 <= per_chunk and "_baseline" not in m.__dict__ and not _worth_pruning(m):
        return _gains_with_baseline(m)  # one replay of every row
    held = np.flatnonzero(_may_gain(m))
    for lo in range(0, held.size, per_chunk):
        rows = held[lo:lo + per_chunk]
        cpu_f, gpu_f = _factors(m, rows.size)
        cpu_f[np.arange(rows.size), rows] = 0.0
        gpu_f[np.arange(rows.size), rows] = 0.0
        predicted, _ = predict(m, cpu_f, gpu_f)
        gains[rows] = np.maximum(0.0, m.window_ns - predicted)
    return gains


def _worth_pruning(m: Model) -> bool:
    """Whether replaying the measured schedule first, then only the rows that can gain
    (``_may_gain``), is likely cheaper than one replay of every row with it: when the
    cells that half the rows would save outweigh a replay's fixed cost, which grows with
    the sweep's segments (``_SEGMENT_CELLS``, ``_REPLAY_CELLS``)."""
    nodes = m.pos_anchor.size + m.item_dur.size
    segments = len(_plan(m, _graph(m))[0])
    return nodes * len(m.row_key) / 2 > _SEGMENT_CELLS * segments + _REPLAY_CELLS


def _scenarios_per_replay(m: Model) -> int:
    """How many scenarios one replay takes (``_MAX_CELLS`` scenario x node cells)."""
    return max(1, _MAX_CELLS // max(1, m.pos_anchor.size + m.item_dur.size))


def _gains_with_baseline(m: Model) -> np.ndarray:
    """Every row's gain and the measured schedule (scenario 0, then kept as ``_baseline``)
    in one replay (``max_gains`` says when)."""
    r = len(m.row_key)
    cpu_f, gpu_f = _factors(m, r + 1)
    cpu_f[np.arange(1, r + 1), np.arange(r)] = 0.0
    gpu_f[np.arange(1, r + 1), np.arange(r)] = 0.0
    sched = _replay(m, cpu_f, gpu_f)
    own, whole = _span(m, sched)
    base = _Schedule(sched.t[:, :1].copy(), sched.end[:, :1].copy(), sched.d, sched.dur,
                     sched.sync_c[:, :1].copy(), cpu_f[:1], sched.cross_c[:, :1].copy(),
                     sched.backlog)
    m.__dict__["_baseline"] = (float(whole[0]), base)
    predicted = np.maximum(own[1:], m.window_ns - (whole[0] - whole[1:]))
    return np.maximum(0.0, m.window_ns - predicted)


def _may_gain(m: Model) -> np.ndarray:
    """(R,): the rows whose removal can shorten the iteration (``max_gains``)."""
    r = len(m.row_key)
    may = np.zeros(r + 1, bool)
    for (_, row), ns in _unclipped_path(m).items():
        if ns > 0:
            may[row] = True
    may[m.sync_row] = True
    g = _graph(m)
    scaling = np.zeros(m.stream_off.size, bool)
    scaling[g.item_stream[m.item_backlog > 0]] = True
    scaling[m.sync_stream[(m.sync_stream >= 0) & (m.sync_fixed != NONE)]] = True
    may[m.item_row[scaling[g.item_stream] & (m.item_dur > 0)]] = True
    may[-1] = False  # (time that belongs to no row)
    return may[:r]


def _unclipped_path(m: Model) -> dict[tuple[int, int], float]:
    """The measured critical path by (category, row), all of it back to where it starts
    (``_walk`` without cutting it to the iteration's length)."""
    _, sched = _baseline(m)
    node = _path_start(m, sched, float(predict(m, *_factors(m, 1))[0][0]))[0]
    acc: dict[tuple[int, int], float] = {}
    _follow(m, sched, node, acc, -np.inf, None)
    return acc


def priceable_rows(m: Model) -> np.ndarray:
    """(R,): the rows whose removal the model can see. Not a row whose time lies only on
    threads that launch no GPU work and from which no edge leads to the iteration's
    thread (or to such a thread), and which itself launches no GPU work and ends no sync
    (gloo's collectives on their own threads, where the iteration's thread records no
    wait on them: ``cpu_only``): the model would answer that removing it saves nothing,
    which is its blind spot, not a saving (``saves_at_most`` leaves such a row's finding
    unpriced; the tables show "—": ``ProfileResult.gain_shown``). A row that holds no
    time in the iteration (a runtime call of 0 µs) is seen: removing it saves nothing."""
    r = len(m.row_key)
    reached = np.zeros(max(m.chain_off.size - 1, 0), bool)
    if m.main_chain >= 0:
        reached[m.main_chain] = True
    # (each position's thread; not from ``_graph``: a result read back has none cached)
    chain_of = np.repeat(np.arange(m.chain_off.size - 1), np.diff(m.chain_off))
    # (a thread that launches GPU work reaches the iteration through it: its end, a sync)
    reached[chain_of[m.item_launch[m.item_launch >= 0]]] = True
    edges = set(zip(chain_of[m.cross_source].tolist(), chain_of[m.cross_target].tolist(),
                    strict=True))
    grew = True
    while grew:  # (few threads: each pass over the edges between them)
        grew = False
        for a, b in edges:
            if reached[b] and not reached[a]:
                reached[a] = grew = True
    pos = np.repeat(np.arange(m.pos_anchor.size), np.diff(m.part_off))
    part_rows = np.where(m.part_row >= 0, m.part_row, r)
    out = np.ones(r + 1, bool)  # (a row that holds no time: removing it saves nothing, seen)
    out[part_rows] = False
    out[part_rows[reached[chain_of[pos]]]] = True
    out[np.where(m.item_row >= 0, m.item_row, r)] = True
    out[np.where(m.sync_row >= 0, m.sync_row, r)] = True
    return out[:r]


def row_indices(m: Model, key: str) -> list[int]:
    """The model's rows a what-if key names: a row key, or the label the table shows
    (``[range] nccl:all_reduce``); ValueError with the nearest names when none."""
    for kind, mark in KIND_MARKS.items():
        if key.startswith(mark):
            return [i for i, (k, kd) in enumerate(zip(m.row_key, m.row_kind, strict=True))
                    if k == key[len(mark):] and kd == kind]
    found = [i for i, k in enumerate(m.row_key) if k == key]
    if not found:
        import difflib  # (only to name the nearest rows of a key not found)

        near = difflib.get_close_matches(key, sorted(set(m.row_key)), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise ValueError(f"no row {key!r} in the median iteration{hint}")
    return found


def _set_factors(m: Model, factors: Mapping[str, float], side: str, cpu_f: np.ndarray,
                 gpu_f: np.ndarray) -> None:
    """One scenario's multipliers (``cpu_f``/``gpu_f``: its row of each) for ``what_if``'s
    ``factors`` on ``side``; ValueError for a side, factor or key it does not know."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {', '.join(SIDES)}; got {side!r}")
    for key, k in factors.items():
        k = float(k)
        if not k > 0 or math.isnan(k):
            raise ValueError(f"the factor for {key!r} must be above 0 (inf removes it); got {k}")
        for i in row_indices(m, key):
            if side in ("both", "cpu"):
                cpu_f[i] = 1.0 / k
            if side in ("both", "device"):
                gpu_f[i] = 1.0 / k


def saved_each(m: Model, asks: Sequence[tuple[Mapping[str, float], str]]) -> np.ndarray:
    """ns the iteration would shrink for each ``(factors, side)`` of ``asks`` (``what_if``'s
    saving, without its path), all in one batched replay: a replay's cost is in its walk
    through the model, nearly the same for one scenario as for a few (the findings price
    their changes this way)."""
    out = np.zeros(len(asks))
    per_chunk = _scenarios_per_replay(m)
    for lo in range(0, len(asks), per_chunk):
        chunk = asks[lo:lo + per_chunk]
        cpu_f, gpu_f = _factors(m, len(chunk))
        for s, (factors, side) in enumerate(chunk):
            _set_factors(m, factors, side, cpu_f[s], gpu_f[s])
        out[lo:lo + len(chunk)] = m.window_ns - predict(m, cpu_f, gpu_f)[0]
    return out


def what_if(m: Model, factors: Mapping[str, float], side: str = "both") -> WhatIf:
    """The median iteration if each named row were ``k`` times faster (``inf``: gone),
    on ``side`` ("both": its own CPU time and the GPU work it launched; "cpu"; "device")."""
    cpu_f, gpu_f = _factors(m, 1)
    _set_factors(m, factors, side, cpu_f[0], gpu_f[0])
    predicted, sched = predict(m, cpu_f, gpu_f)
    new = float(predicted[0]) / 1000.0
    measured = m.window_ns / 1000.0
    saved = measured - new
    return WhatIf(new, measured, saved, saved / measured if measured > 0 else 0.0,
                  _walk(m, sched, float(predicted[0])))


def critical_path(m: Model, spans: bool = False,
                  scale: float = 1.0) -> tuple[list[CriticalPathRow], list[Span]]:
    """The measured iteration's critical path, by category and row (µs, largest first;
    each row's time times ``scale``), and with ``spans`` where it lies in time (``Span``:
    the category as ``key``, lane "critical path", µs from the iteration's start;
    neighbours of one category merged)."""
    if m.empty:
        return [], []
    predicted, sched = predict(m, *_factors(m, 1))
    pieces = _Pieces(m.window_ns / SPAN_RESOLUTION) if spans else None
    rows = _walk(m, sched, float(predicted[0]), pieces, scale)
    return rows, _merged(pieces) if pieces else []


class _Pieces:
    """The path's pieces in time (ns), kept as arrays (and the walk's single pieces as a
    list, made into arrays once); pieces shorter than ``finest`` ns (under a pixel of the
    picture) are left out as they come."""

    def __init__(self, finest: float) -> None:
        self.finest = max(finest, 1e-9)
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.single: list[tuple[float, float, int]] = []

    def append(self, piece: tuple[float, float, int]) -> None:
        if piece[1] - piece[0] >= self.finest:
            self.single.append(piece)

    def extend(self, start: np.ndarray, end: np.ndarray, cat: np.ndarray | int) -> None:
        keep = end - start >= self.finest
        cats = np.broadcast_to(np.asarray(cat), start.shape)
        if keep.any():
            self.parts.append((start[keep], end[keep], cats[keep]))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every piece's start, end and category."""
        parts = list(self.parts)
        if self.single:
            start, end, cat = zip(*self.single, strict=True)
            parts.append((np.asarray(start), np.asarray(end), np.asarray(cat)))
        start, end, cat = (np.concatenate(x) for x in zip(*parts, strict=True))
        return start, end, cat

    def __bool__(self) -> bool:
        return bool(self.parts or self.single)


def _merged(pieces: _Pieces) -> list[Span]:
    """The path's pieces (ns) as spans (µs), neighbours of one category joined."""
    finest = pieces.finest
    start, end, cat = pieces.arrays()
    order = np.lexsort((cat, end, start))  # (the category too: the same order however made)
    start, end, cat = start[order], end[order], cat[order]
    if not start.size:
        return []
    joined = np.zeros(start.size, bool)
    joined[1:] = (cat[1:] == cat[:-1]) & (start[1:] - end[:-1] < max(finest, 1.0))
    first = np.flatnonzero(~joined)
    stop = np.maximum.reduceat(end, first)
    names = np.asarray(CATEGORY_NAMES, dtype=object)[cat[first]].tolist()
    return list(map(Span, names, itertools.repeat(PATH_LANE),
                    (start[first] / 1000.0).tolist(), (stop / 1000.0).tolist()))


def path_summary(rows: list[CriticalPathRow]) -> str:
    """``critical path: CPU ops 71%, GPU work 22%, waiting on syncs 7%`` ("" when empty)."""
    total = sum(r.time for r in rows)
    if total <= 0:
        return ""
    by: dict[str, float] = {}
    for r in rows:
        by[r.category] = by.get(r.category, 0.0) + r.time
    parts = [f"{c} {percent(v / total)}" for c, v in
             sorted(by.items(), key=lambda x: -x[1]) if v / total >= 0.005]
    return "critical path: " + ", ".join(parts)


def _walk(m: Model, sched: _Schedule, length: float, spans: _Pieces | None = None,
          scale: float = 1.0) -> list[CriticalPathRow]:
    """The critical path of the predicted iteration of ``length`` ns: walk back from what
    ends it, adding up what lies on the way. It is exactly ``length`` long: the walk
    starts at the iteration's own thread's end, or, where the GPU's work bounds the
    iteration (it ends later), at the GPU's last work, and then leaves out the earliest
    part, which in the steady state belongs to the iteration before (``docs/what-if.md``);
    where nothing ends that late, the rest is idle. Rows' times in µs, times ``scale``."""
    node, finish = _path_start(m, sched, length)
    acc: dict[tuple[int, int], float] = {}
    if length > finish + 1e-6:  # nothing recorded ends the iteration: the rest is idle
        acc[(IDLE, -1)] = length - finish
        if spans is not None:
            spans.append((finish, length, IDLE))
    floor = max(0.0, finish - length)
    _follow(m, sched, node, acc, floor, spans)
    total = sum(acc.values())
    rows = [CriticalPathRow(CATEGORY_NAMES[cat],  # (category, key, kind, time, share)
                            m.row_key[row] if row >= 0 else "",
                            m.row_kind[row] if row >= 0 else "",
                            ns / 1000.0 * scale, ns / total if total > 0 else 0.0)
            for (cat, row), ns in acc.items() if ns > 0]
    return sorted(rows, key=lambda r: (-r.time, r.category, r.key))


def _path_start(m: Model, sched: _Schedule,
                length: float) -> tuple[tuple[str, int] | None, float]:
    """Where the walk back starts, and when that is: the iteration's own thread's end when
    it ends the iteration, else the GPU's last work."""
    t, end = sched.t[:, 0], sched.end[:, 0]
    lasts = m.chain_off[1:] - 1
    own = float(t[lasts[m.main_chain]]) if m.main_chain >= 0 else -np.inf
    gpu_end = float(end.max()) if end.size else -np.inf
    if (m.main_chain >= 0 and own >= length - 1e-6) or (gpu_end == -np.inf and own > -np.inf):
        return ("c", int(lasts[m.main_chain])), own
    if gpu_end > -np.inf:
        return ("g", int(np.argmax(end))), gpu_end
    return None, 0.0


def _follow(m: Model, sched: _Schedule, node: tuple[str, int] | None,
            acc: dict[tuple[int, int], float], floor: float,
            spans: _Pieces | None) -> None:
    """Walk back from ``node`` along the edges that held each piece back, down to the
    time ``floor`` (pieces that straddle it are cut there): the route is chosen first
    (``_route``), then what lies on it added up. Runs of positions held only by the one
    before them on their thread, and of GPU work held only by the work before it on its
    stream, are taken whole (``_Holds``): the route turns only where the path changes
    lanes."""
    h = _Holds(m, sched)
    t = h.t
    scale = sched.cpu_f[0]
    cpu_runs: list[tuple[int, int]] = []  # positions lo..hi whose stretches lie on the path
    gpu_runs: list[tuple[int, int]] = []  # items lo..hi whose work lies on the path

    def add(c: int, r: int, ns: float, until: float) -> None:
        ns = min(ns, until - floor)
        if ns <= 0:
            return
        acc[(c, r)] = acc.get((c, r), 0.0) + ns
        if spans is not None:
            spans.append((until - ns, until, c))

    for what, i, j, cause, arg in _route(m, h, node, floor):
        if what == "c":
            cpu_runs.append((j + 1, i))
            tj = float(t[j])
            if cause == _CROSS:
                add(IDLE, -1, float(m.cross_off[arg]), tj)
            elif cause == _START:
                add(IDLE, -1, max(0.0, tj), tj)
            elif cause == _SYNC or cause == _SYNC_BEFORE:
                waited = float(h.sync_waited[arg])
                add(int(m.sync_cat[arg]), int(m.sync_row[arg]), waited, tj)
                if cause == _SYNC_BEFORE:  # work launched before the window: the GPU was
                    add(GPU_WORK, -1, tj - waited, tj - waited)  # busy with it
            continue
        gpu_runs.append((j, i))
        start = float(h.start[j])
        if cause == _LAUNCH:
            add(LAUNCH, -1, float(m.item_lat[j]), start)
        elif cause == _PREV:
            add(IDLE, -1, float(m.item_gap[j]), start)
        elif cause == _BACKLOG:  # work carried in from before the window: GPU work of
            backlog = float(sched.backlog[j, 0])  # no row (the iteration before)
            add(IDLE, -1, max(0.0, start - backlog), start)
            add(GPU_WORK, -1, backlog, backlog)
    _add_stretches(m, _ranges(cpu_runs), scale, t, sched.d[:, 0], floor, acc, spans)
    _add_gpu_work(m, h, _ranges(gpu_runs), floor, acc, spans)


# What held a break back (``_route``'s causes): on a thread, an edge from another thread,
# the thread's start (or nothing recorded), a sync's wait for work in the window or
# for work launched before it, the floor of the walk; on a stream, the item's launch, a
# wait on another stream, the work before it, or nothing (work carried in, or none).
_CROSS, _START, _SYNC, _SYNC_BEFORE, _FLOOR, _LAUNCH, _WAIT, _PREV, _BACKLOG = range(9)
_Cause = tuple[int, int, "tuple[str, int] | None"]  # (cause, its index, the node it leads to)


def _route(m: Model, h: _Holds, node: tuple[str, int] | None,
           floor: float) -> list[tuple[str, int, int, int, int]]:
    """The walk's route back from ``node``: per node walked through, (its lane, itself,
    the break its run starts at, the cause taken there and that cause's index). A
    depth-first search over the causes that held each break back (``_causes``), each
    break entered once: where waits recorded out of order form a cycle that takes no
    time, the route backs up to the last choice it had and takes the next cause.
    Without such a cycle the first cause always leads on, so the route is the one a
    plain walk takes. Where no route leads down to the floor (none found on a model the
    replay made: each piece's time comes from one cause or another), the route is the
    first one tried, cut where it came back to a break it had passed; the path is then
    shorter than the iteration."""
    stack: list[list] = []  # [lane, node, break, its causes (an iterator), the one taken]
    seen: set[tuple[str, int]] = set()  # the breaks entered
    first: list[tuple[str, int, int, int, int]] | None = None

    def route() -> list[tuple[str, int, int, int, int]]:
        return [(w, i, j, c[0], c[1]) for w, i, j, _, c in stack]

    def enter(node: tuple[str, int] | None) -> bool:
        """Push ``node``'s frame; False where the route ends there (at or below the
        floor, or no node)."""
        if node is None:
            return False
        what, i = node
        if (h.t[i] if what == "c" else h.end[i]) <= floor + 1e-6:
            return False
        j = int(h.cpu_break_of[i] if what == "c" else h.gpu_break_of[i])
        if (what, j) in seen:
            return True  # (a break passed already: the frame below takes its next cause)
        seen.add((what, j))
        causes = _causes(m, h, j, floor) if what == "c" else _gpu_causes(m, h, j)
        stack.append([what, i, j, causes, next(causes)])
        return True

    if not enter(node):
        return []
    while stack:
        frame = stack[-1]
        depth = len(stack)
        if not enter(frame[4][2]):
            return route()  # reached the floor, the window's start or nothing
        if len(stack) > depth:
            continue
        if first is None:  # (came back to a break passed)
            first = route()
        while stack:  # the next cause, in the deepest frame that has one
            frame[4] = next(frame[3], None)
            if frame[4] is not None:
                break
            stack.pop()
            frame = stack[-1] if stack else frame
    return first or []


def _causes(m: Model, h: _Holds, j: int, floor: float) -> Iterator[_Cause]:
    """What held position ``j``, a break, back (``_route``), each with the node it leads
    to (None: the walk ends there): an edge from another thread or a sync, the later of
    the two (the edge on a tie), then the other where it is as late; at a thread's first
    position, an edge from the thread that started it, else its measured start (a sync
    there holds it back only where it is as late as the position: nothing comes before
    it to measure a sync's wait against); else the thread's start (or an anchor: only in
    models edited by hand)."""
    t = float(h.t[j])
    if t <= floor + 1e-6:
        yield (_FLOOR, -1, None)
        return
    x, q = h.cross_at.get(j), h.sync_at.get(j)
    edge: list[_Cause] = ([(_CROSS, x, ("c", int(m.cross_source[x])))]
                          if x is not None and h.cross_binds[x] else [])
    start: list[_Cause] = [(_START, -1, None)]
    if h.chain_start[j]:
        first = edge if edge and (q is None or h.cross_c[x] >= h.sync_c[q]) else start
        yield from first
        if first is start and edge and h.cross_c[x] >= t - 1e-6:
            yield from edge
        if q is not None and h.sync_c[q] >= t - 1e-6:
            yield from _sync_causes(m, h, q, t)
        if first is edge and h.cpu_anchor_binds[j]:
            yield from start
        return
    if not edge and q is None:
        yield from start
        return
    edge_first = bool(edge) and (q is None or h.cross_c[x] >= h.sync_c[q])
    if edge_first:
        yield from edge
    if q is not None and (not edge or h.sync_c[q] >= h.cross_c[x] - 1e-6):
        yield from _sync_causes(m, h, q, t)
    if edge and not edge_first and h.cross_c[x] >= h.sync_c[q] - 1e-6:
        yield from edge
    if q is not None:  # another sync at the position as late (two syncs end there)
        g = _graph(m)  # (the syncs at position j: a slice of those sorted by position)
        lo, hi = g.sync_at.searchsorted((j, j + 1)).tolist()
        for other in g.sync_order[lo:hi].tolist():
            if other != q and h.sync_c[other] >= t - 1e-6:
                yield from _sync_causes(m, h, other, t)
    if h.cpu_anchor_binds[j]:
        yield from start


def _sync_causes(m: Model, h: _Holds, q: int, t: float) -> Iterator[_Cause]:
    """Sync ``q``'s wait, which ends at ``t``: for each work it waited for that had
    ended by then, the latest first; or for work launched before the window."""
    ready = t - float(h.sync_waited[q])
    deps = m.sync_dep[m.sync_off[q]:m.sync_off[q + 1]]
    ends = h.end[deps]
    last = int(ends.argmax()) if deps.size else -1
    if last < 0 or ends[last] < ready - 1e-6:
        yield (_SYNC_BEFORE, q, None)  # the GPU was busy with that work
        return
    yield (_SYNC, q, ("g", int(deps[last])))
    held = np.flatnonzero(ends >= ready - 1e-6)
    for k in held[np.argsort(-ends[held], kind="stable")].tolist():
        if k != last:
            yield (_SYNC, q, ("g", int(deps[k])))


def _gpu_causes(m: Model, h: _Holds, i: int) -> Iterator[_Cause]:
    """What held GPU item ``i``, a break, back before it started (``_route``): its
    launch, its waits on other streams, the work before it on its stream (a break that
    work holds only in a cycle of waits that took no time: waits recorded out of order,
    ``_runs``), its measured start; or nothing recorded (work carried in from before the
    window, which is GPU work of no row)."""
    held = False
    if h.launch_binds[i]:
        held = True
        yield (_LAUNCH, -1, ("c", int(m.item_launch[i])))
    if h.wait_binds[i]:
        held = True
        deps = m.wait_dep[m.wait_off[i]:m.wait_off[i + 1]]
        for dep in deps[h.end[deps] >= h.start[i] - 1e-6].tolist():
            yield (_WAIT, dep, ("g", dep))
    if h.prev_binds[i]:
        held = True
        yield (_PREV, -1, ("g", i - 1))
    if h.anchor_binds[i] or not held:
        yield (_BACKLOG, -1, None)


def _ranges(runs: list[tuple[int, int]]) -> np.ndarray:
    """The indices ``lo..hi`` (both included) of each run, concatenated."""
    if not runs:
        return np.zeros(0, np.int64)
    lo, hi = np.asarray(runs, np.int64).T
    return concat_ranges(lo, np.maximum(hi - lo + 1, 0))


class _Holds:
    """What holds each node back in scenario 0 of a schedule: for a position, an edge from
    another thread, a sync's wait, or (not a break) the position before it; for GPU work,
    its launch, a wait on another stream, or (not a break) the work before it."""

    def __init__(self, m: Model, sched: _Schedule) -> None:
        self.t, self.end = sched.t[:, 0], sched.end[:, 0]
        t, end, d, dur = self.t, self.end, sched.d[:, 0], sched.dur[:, 0]
        p, w = t.size, end.size
        self.chain_start = np.zeros(p, bool)
        self.chain_start[m.chain_off[:-1][m.chain_off[:-1] < p]] = True
        before = np.full(p, -np.inf)
        before[1:] = t[:-1] + d[1:]
        before[self.chain_start] = -np.inf
        self.cross_c, self.sync_c = sched.cross_c[:, 0], sched.sync_c[:, 0]
        self.cross_binds = self.cross_c >= before[m.cross_target] + 1e-6
        self.cross_at = dict(zip(m.cross_target.tolist(), range(m.cross_target.size),
                                 strict=True))
        sync_c = self.sync_c
        binding = np.flatnonzero(sync_c > before[m.sync_pos] + 1e-6)
        binding = binding[np.argsort(sync_c[binding], kind="stable")]  # (the latest last:
        self.sync_at = dict(zip(m.sync_pos[binding].tolist(),  # a position's binding sync)
                                binding.tolist(), strict=True))
        breaks = self.chain_start.copy()
        breaks[m.cross_target[self.cross_binds]] = True
        breaks[m.sync_pos[binding]] = True
        self.cpu_break_of = _last_true(breaks)
        self.start = end - dur
        lp = m.item_launch
        self.launch_binds = (lp >= 0) & (t[np.maximum(lp, 0)] + m.item_lat
                                         >= self.start - 1e-6) if p else np.zeros(w, bool)
        waited = _latest(end[:, None], m.wait_dep, m.wait_off[:-1], m.wait_off[1:])[:, 0]
        self.wait_binds = waited >= self.start - 1e-6
        self.stream_first = np.zeros(w, bool)
        self.stream_first[m.stream_off[:-1][m.stream_off[:-1] < w]] = True
        prev = np.full(w, -np.inf)
        prev[1:] = end[:-1] + m.item_gap[1:]
        prev[self.stream_first] = -np.inf
        self.prev_binds = prev >= self.start - 1e-6
        self.gpu_break_of = _last_true(self.launch_binds | self.wait_binds | ~self.prev_binds)
        anchored = m.item_anchor != NONE  # (its measured start, after the backlog scaled)
        self.anchor_binds = anchored & (m.item_anchor - m.item_backlog + sched.backlog[:, 0]
                                        >= self.start - 1e-6)
        self.dur = dur
        scale = sched.cpu_f[0]  # each sync's own time after its work, scaled as its row
        self.sync_waited = m.sync_post * scale[np.where(m.sync_row >= 0, m.sync_row,
                                                        len(m.row_key))]
        self.cpu_anchor_binds = m.pos_anchor >= t - 1e-6  # (besides a thread's start: only
        # in models edited by hand)


def _last_true(flags: np.ndarray) -> np.ndarray:
    """Per index, the last index at or before it where ``flags`` is true (0 where none):
    the break that starts the run of nodes taken whole (``_Holds``)."""
    return np.maximum.accumulate(np.where(flags, np.arange(flags.size), 0))


def _add_gpu_work(m: Model, h: _Holds, items: np.ndarray, floor: float,
                  acc: dict[tuple[int, int], float],
                  spans: _Pieces | None) -> None:
    """Add GPU ``items`` (their work, cut at ``floor``) and, for those the work before
    them held back, the gap after it (idle) to ``acc`` (and ``spans``)."""
    if not items.size:
        return
    r = len(m.row_key)
    ns = np.clip(np.minimum(h.dur[items], h.end[items] - floor), 0.0, None)
    rows = np.where(m.item_row[items] >= 0, m.item_row[items], r)
    sums = np.bincount(rows, weights=ns, minlength=r + 1)
    held_rows = np.flatnonzero(sums > 0)
    for row, ns_row in zip(held_rows.tolist(), sums[held_rows].tolist(), strict=True):
        key = (GPU_WORK, row if row < r else -1)
        acc[key] = acc.get(key, 0.0) + ns_row
    held = items[h.prev_binds[items] & ~h.launch_binds[items] & ~h.wait_binds[items]]
    gap = np.clip(np.minimum(m.item_gap[held], h.start[held] - floor), 0.0, None)
    if gap.sum() > 0:
        acc[(IDLE, -1)] = acc.get((IDLE, -1), 0.0) + float(gap.sum())
    if spans is not None:
        spans.extend(h.end[items] - ns, h.end[items], GPU_WORK)
        spans.extend(h.start[held] - gap, h.start[held], IDLE)


def _add_stretches(m: Model, at: np.ndarray, scale: np.ndarray, t: np.ndarray,
                   d: np.ndarray, floor: float, acc: dict[tuple[int, int], float],
                   spans: _Pieces | None) -> None:
    """Add the parts of the stretches into positions ``at`` to ``acc`` (and ``spans``),
    the one that straddles ``floor`` cut there (its parts in proportion)."""
    if not at.size:
        return
    lo, hi = m.part_off[at], m.part_off[at + 1]
    counts = hi - lo
    parts = concat_ranges(lo, counts)
    rows = m.part_row[parts]
    ns = m.part_dur[parts].astype(np.float64)
    if (scale != 1.0).any():  # (the measured path's scale is 1 throughout)
        ns *= scale[np.where(rows >= 0, rows, len(m.row_key))]
    if floor > 0:
        whole = d[at]
        kept = np.clip(t[at] - floor, 0.0, whole) / np.where(whole > 0, whole, 1.0)
        ns = ns * np.repeat(np.where(whole > 0, kept, 0.0), counts)
    key = m.part_cat[parts] * (len(m.row_key) + 1) + rows + 1  # (categories x rows: few)
    sums = np.bincount(key, weights=ns)
    held = np.flatnonzero(sums > 0)
    cats, rows_1 = np.divmod(held, len(m.row_key) + 1)
    for cat_row, ns_held in zip(zip(cats.tolist(), (rows_1 - 1).tolist(), strict=True),
                                sums[held].tolist(), strict=True):
        acc[cat_row] = acc.get(cat_row, 0.0) + ns_held
    if spans is None or not counts.any():  # (positions that hold no part: nothing to lay)
        return
    # Merged parts are in no real order: laid back to back, ending at the position. Only
    # those of about a pixel or more are placed (``_Pieces`` keeps no shorter ones).
    drawn = np.flatnonzero(ns >= spans.finest * (1 - 1e-9) - 1e-3)  # (rounding's room)
    if not drawn.size:
        return
    total = np.cumsum(ns)
    stop = np.cumsum(counts)  # (one past each position's last part)
    of = np.searchsorted(stop, drawn, "right")  # (each drawn part's position, in ``at``)
    ends = t[at[of]] - (total[stop[of] - 1] - total[drawn])
    spans.extend(ends - ns[drawn], ends, m.part_cat[parts[drawn]])


@dataclass(frozen=True)
class IterationView:
    """What ``build_result`` keeps of one iteration's model: the model, its critical path
    and each row's ``max_gain_us`` keyed by (kind, key, input shapes)."""

    model: Model
    path: list[CriticalPathRow]
    spans: list[Span]
    gains_us: dict[tuple[str, str, str], float]


def iteration_view(table: EventTable, window: Window, name: str | None = None,
                   shapes: bool = False, spans: bool = False,
                   ranges: np.ndarray | None = None,
                   median_us: float | None = None,
                   figures: Figures | None = None) -> IterationView:
    """The dependency model of ``window`` (the median iteration), its path (in time too,
    with ``spans``: for the timeline) and each row's gain; ``ranges``, ``figures``: see
    ``build_model``.
    ``median_us``: the measured median iteration, which the path's and the gains' µs are
    given in (as ``what_if``'s answers are); default the window's own length."""
    m = build_model(table, window, name, shapes, ranges, figures)
    scale = (median_us * 1000.0 / m.window_ns if median_us and m.window_ns > 0 else 1.0)
    gains = max_gains(m) / 1000.0 * scale
    keyed = {(kind, key, shape): float(g) for kind, key, shape, g in
             zip(m.row_kind, m.row_key, m.row_shapes, gains.tolist(), strict=True)}
    path, in_time = critical_path(m, spans, scale)
    return IterationView(m, path, in_time, keyed)
