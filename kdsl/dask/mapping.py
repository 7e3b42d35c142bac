"""The Dask mapping of one kernel call on dask arrays, decided from ``kdsl.dask.analysis``.

``decide(kernel, args)`` returns a ``Plan``: per input dim its letter in Dask's blockwise
index notation (one letter per label; broadcast and single-chunk dims get letters of their
own), the dims that must be one chunk (and why), the stencil halos, and the tree reduction
(stage R, its reduced letters) when a reduction crosses chunks.  ``Plan.text()`` is what
``kd.dask.plan`` prints.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field

from ..errors import ArgumentError
from ..ir import nodes as n
from ..ir.evaluate import eval_expr
from . import derive
from .analysis import analyse, describe_label


def is_dask(a) -> bool:
    """Is ``a`` a dask array (or another dask collection with chunks)?"""
    return hasattr(type(a), "__dask_graph__") and hasattr(a, "chunks")


@dataclass
class Plan:
    """How a kernel call maps onto Dask (see the module docstring)."""

    kernel: object
    graph: object
    analysis: object
    args: tuple
    #: per argument: tuple of letters (None for scalars)
    index: list
    out_index: str
    #: (arg position, dim) -> reason it is made one chunk
    whole: dict = field(default_factory=dict)
    #: letter -> halo cells after each block (valid stencils read ``A[i .. i + hi]``)
    halo: dict = field(default_factory=dict)
    #: the reduce stage crossing chunks, its reduced letters, and whether it is a contraction
    tree: object = None
    tree_letters: str = ""
    contraction: bool = False
    #: letters of output axes no input carries -> extent
    new_axes: dict = field(default_factory=dict)
    lines: list = field(default_factory=list)
    #: the full sizes of the graph's shape Vars
    env: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        if self.tree is not None:
            return "contraction" if self.contraction else "reduction"
        return "stencil" if self.halo else "blockwise"

    def text(self) -> str:
        head = f"kd.dask.plan({self.kernel.__name__}): {self.kind}"
        return "\n".join([head] + ["  " + ln for ln in self.lines])


def _stage_line(st, an) -> str:
    if st.scan is not None:
        what = "scan"
    elif st.is_reduction:
        kind = st.body.combiner.kind
        what = f"reduction ({kind.value if kind is not None else 'custom reducer'})"
    else:
        what = "elementwise"
    return f"stage {st.name!r}: {what}"


def decide(kernel, args) -> Plan:
    """The mapping of ``kernel(*args)`` (some args dask arrays) onto Dask."""
    graph, fakes = derive.parent_graph(kernel, args)
    an = analyse(graph)
    import numpy as np
    arrays = [j for j, f in enumerate(fakes) if isinstance(f, np.ndarray)]
    scalars = [a for j, a in enumerate(args) if j not in arrays and not kernel._const[j]
               and a is not None]
    env = graph.bind([fakes[j] for j in arrays], scalars)
    letters = iter(string.ascii_letters)
    lab_letter = {}

    def letter(lab):
        if lab not in lab_letter:
            lab_letter[lab] = next(letters)
        return lab_letter[lab]

    plan = Plan(kernel, graph, an, tuple(args), [], "", env=env)
    for st in graph.stages:
        plan.lines.append(_stage_line(st, an))
    out = graph.outputs[0]
    shapes = {tuple(int(eval_expr(e, env)) for e in t.shape) for t in graph.outputs}
    if len(shapes) > 1:
        raise ArgumentError(
            f"{kernel.__name__}: on dask arrays, the outputs of a kernel must have one shape "
            f"(these have {', '.join(map(str, sorted(shapes)))})",
            hint="split it into kernels of one output each, or call it on numpy arrays")
    plan.out_index = "".join(letter(("out", k)) for k in range(out.ndim))
    tin = {j: t for j, t in zip(arrays, graph.inputs)}
    # which dims of which inputs carry which labels
    tree_cands = {}
    for j in arrays:
        a = args[j]
        pos = arrays.index(j)
        chunked = [is_dask(a) and len(a.chunks[d]) > 1 for d in range(a.ndim)]
        idx = []
        for d in range(a.ndim):
            labs = {k: v for k, v in an.dims[pos][d].items() if k != "bcast"}
            why = list(an.whole[pos][d])
            outs = [k for k in labs if k[0] == "out"]
            if why:
                idx.append(letter(outs[0]) if len(outs) == 1 else next(letters))
                if chunked[d]:
                    plan.whole[(j, d)] = why[0]
                continue
            if not labs:        # broadcast (size 1) or unread
                idx.append(next(letters))
                if chunked[d]:
                    plan.whole[(j, d)] = "it is broadcast"
                continue
            (lab, (lo, hi)), = labs.items()
            idx.append(letter(lab))
            if lab[0] == "red" and chunked[d]:
                tree_cands.setdefault(lab, []).append((j, d))
            if lab[0] == "out" and ((lo, hi) != (0, 0) or lab in an.guards):
                plan.halo.setdefault(letter(lab), []).append((j, d, lo, hi))
        plan.index.append(tuple(idx))
    for j in range(len(args)):
        if j not in arrays:
            plan.index.insert(j, None)
    _check_halos(plan, tin)
    _check_tree(plan, tree_cands, lab_letter)
    for k in range(out.ndim):
        c = plan.out_index[k]
        if not any(ix is not None and c in ix for ix in plan.index):
            plan.new_axes[c] = int(eval_expr(out.shape[k], env))
    for (j, d), why in plan.whole.items():
        plan.lines.append(f"argument {kernel.arg_names[j]!r} axis {d}: one chunk ({why})")
    return plan


def _check_halos(plan, tin):
    """Stencils along output axes.  *valid*: ``out[i]`` reads ``A[i + lo .. i + hi]``,
    0 <= lo, the output ``hi`` shorter: blocks extended by ``hi`` cells after them.  *same*:
    the output as long as the input, reads at offsets ``lo..hi`` and edge guards
    (``kd.where(i > 0, A[i - 1], 0)``): blocks extended on both sides by what the offsets
    and guards need, the results trimmed back.  Other cases make their dims one chunk."""
    g, env = plan.graph, plan.env
    out = g.outputs[0]
    keep = {}
    for c, uses in plan.halo.items():
        k = plan.out_index.index(c)
        lab = ("out", k)
        los, his = {u[2] for u in uses}, {u[3] for u in uses}
        j, d = uses[0][:2]
        ext_in = int(eval_expr(tin[j].shape[d], env))
        ext_out = int(eval_expr(out.shape[k], env))
        gl, gr = plan.analysis.guards.get(lab, (0, 0))
        if len(his) == 1 and min(los) >= 0 and lab not in plan.analysis.guards \
                and ext_out == ext_in - max(his):
            hi = max(his)
            keep[c] = ("valid", 0, hi)
            plan.lines.append(f"output axis {k}: stencil, halo of {hi} after each block "
                              f"(reads at offsets {min(los)}..{hi}, output {hi} shorter: valid)")
        elif ext_out == ext_in and all(tin[u[0]].shape[u[1]] is tin[j].shape[d] or
                                       int(eval_expr(tin[u[0]].shape[u[1]], env)) == ext_in
                                       for u in uses):
            dl, dr = max(0, -min(los), gl), max(0, max(his), gr)
            keep[c] = ("same", dl, dr)
            why = f"reads at offsets {min(los)}..{max(his)}" + (
                f", edge guards need {gl} before / {gr} after" if lab in plan.analysis.guards
                else "")
            plan.lines.append(f"output axis {k}: stencil, halo of {dl} before and {dr} after "
                              f"each block, trimmed after ({why}; output as long: same)")
        else:
            for j, d, _, _ in uses:
                if len(plan.args[j].chunks[d]) > 1:
                    plan.whole[(j, d)] = (f"its stencil along output axis {k} is neither valid "
                                          "(out[i] reads A[i..i+h], h shorter) nor same-shaped")
    plan.halo = keep


def _check_tree(plan, cands, lab_letter):
    """A reduction across chunks: one reduce stage R, pointwise before it, an epilogue of
    elementwise stages on R's values only, the output along R's axes."""
    if not cands:
        return
    g, an = plan.graph, plan.analysis
    names = {lab[1] for lab in cands}
    why = None
    r = g.stage(next(iter(names))) if len(names) == 1 else None
    if r is None:
        why = "several reductions cross chunks"
    elif r.scan is not None:
        why = "it is scanned"
    else:
        live = derive._live(g.stages, g.outputs)
        before = derive._live(g.stages, r.values)
        after = [s for s in live if s not in before]
        ok_reads = {id(t) for t in r.values} | {id(t) for s in after for t in s.values}
        out = g.outputs[0]
        if any(s.is_reduction for s in after):
            why = "a reduction follows it"
        elif any(id(t) not in ok_reads for s in after for t in s.reads()):
            why = "stages after it read the inputs again (a two-pass computation)"
        elif len(r.axes) != out.ndim:
            why = "its result is reshaped"
        elif len(r.values) > 1 and sum(1 for s in r.body.sources if type(s) is n.Var) and \
                len([lab for lab in cands]) > 1:
            why = "an argmax/argmin over several axes"
        elif plan.halo:
            why = "a stencil is split too"
        elif len(g.outputs) > 1:
            why = "the kernel has several outputs"
    if why is not None:
        for lab, uses in cands.items():
            for j, d in uses:
                plan.whole[(j, d)] = f"{describe_label(g, lab)} crosses chunks but {why}"
        return
    plan.tree = r
    plan.tree_letters = "".join(lab_letter[("red", r.name, k)] for k in range(len(r.reduce_axes)))
    plan.contraction = len({j for uses in cands.values() for j, _ in uses}) > 1
    kind = r.body.combiner.kind
    comb = kind.value if kind is not None else "the kernel's own reducer"
    plan.lines.append(f"stage {r.name!r}: tree reduction over chunks (chunk: the kernel cut at "
                      f"{r.name!r}; combine and aggregate: {comb} as kdsl kernels"
                      + ("; the stages after it run in the aggregate step)" if
                         derive._live(g.stages, g.outputs)[-1] is not r else ")"))
