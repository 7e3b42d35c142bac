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
from ..graph import live_stages
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
    #: an input dim is reduced by several stages (or reduced and kept)
    mixed: bool = False
    #: ``((input, dim, full size), ...)`` of the sizes the kernel uses as values: the tasks
    #: run a kernel with them fixed (``kdsl.dask.staged``), blocks being smaller
    sizes: tuple = ()
    #: the reduce stage computed first, on its own, when reductions cross chunks in
    #: sequence (``kdsl.dask.staged``): the rest then reads its result as an input
    stage: object = None

    @property
    def kind(self) -> str:
        if self.stage is not None:
            return "staged"
        if self.tree is not None:
            return "contraction" if self.contraction else "reduction"
        return "stencil" if self.halo else "blockwise"

    def text(self) -> str:
        what = self.kernel.__name__
        if getattr(self.kernel, "output", None):
            what += f" up to stage {self.kernel.output!r}"
        if getattr(self.kernel, "cuts", ()):
            what += f" reading {', '.join(repr(c) for c in self.kernel.cuts)} as inputs"
        head = f"kd.dask.plan({what}): {self.kind}"
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
    import math
    for a, name in zip(args, kernel.arg_names):
        if is_dask(a) and any(isinstance(s, float) and math.isnan(s) for s in a.shape):
            raise ArgumentError(
                f"{kernel.__name__}: dask array {name!r} has unknown chunk sizes {a.shape}",
                hint=f"call {name}.compute_chunk_sizes() first (kdsl plans from the sizes)")
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

    _check_constraints(kernel, graph, env)
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
            if len(labs) > 1:   # reduced by several stages (and maybe kept): staged
                idx.append(letter(outs[0]) if outs else next(letters))
                if chunked[d]:
                    for lab in labs:
                        if lab[0] == "red":
                            tree_cands.setdefault(lab, []).append((j, d))
                    plan.mixed = True
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
    if an.sizes:
        where = {}
        for j, t in enumerate(graph.inputs):
            a = args[arrays[j]]
            for d, e in enumerate(t.shape):
                if type(e) is n.Var and e in an.sizes and e not in where and is_dask(a) \
                        and len(a.chunks[d]) > 1:      # split: a block would see its size
                    where[e] = (j, d, int(env[e]))
        plan.sizes = tuple(sorted(where.values()))
    _check_halos(plan, tin)
    _check_tree(plan, tree_cands, lab_letter)
    for k in range(out.ndim):
        c = plan.out_index[k]
        if not any(ix is not None and c in ix for ix in plan.index):
            plan.new_axes[c] = int(eval_expr(out.shape[k], env))
    for (j, d), why in plan.whole.items():
        plan.lines.append(f"argument {kernel.arg_names[j]!r} axis {d}: one chunk ({why})")
    return plan


def _check_constraints(kernel, graph, env):
    """The kernel's shape checks on the full arrays (blocks and derived kernels see parts)."""
    from ..errors import ShapeError
    for c in graph.constraints:
        try:
            lhs, rhs = eval_expr(c.lhs, env), eval_expr(c.rhs, env)
        except Exception:       # noqa: BLE001 -- reads data (index checks): left to blocks
            continue
        if lhs != rhs:
            if c.detail:
                vals = {}
                for name, e in c.detail:
                    try:
                        vals[name] = eval_expr(e, env)
                    except Exception:   # noqa: BLE001
                        vals[name] = "?"
                msg = c.message.format(**vals)
            else:
                msg = c.message + ("" if isinstance(c.rhs, n.Const) and c.rhs.dtype.is_bool
                                   else f": {lhs} != {rhs}")
            raise (c.error or ShapeError)(f"{kernel.__name__}: {msg} (dask arrays)",
                                          loc=c.loc, hint=c.hint)


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
    g = plan.graph
    names = {lab[1] for lab in cands}
    why = None
    r = g.stage(next(iter(names))) if len(names) == 1 else None
    first = next(s for s in g.stages if s.name in names)
    if r is None or plan.mixed:
        why = "several reductions cross chunks" if r is None else \
            "the reduced axis is also an output axis"
        if first.scan is None and len(first.values) == 1 and not plan.halo:
            plan.stage = first
            plan.lines.append(f"stage {first.name!r}: computed first as its own Dask array "
                              f"({why}); the stages after it read it as an input")
            return
    elif r.scan is not None:
        why = "it is scanned"
    else:
        live = live_stages(g.stages, g.outputs)
        before = live_stages(g.stages, r.values)
        after = [s for s in live if s not in before]
        ok_reads = {id(t) for t in r.values} | {id(t) for s in after for t in s.values}
        out = g.outputs[0]
        if any(s.is_reduction for s in after):
            why = "a reduction follows it"
            if len(r.values) == 1:
                plan.stage = r
                plan.lines.append(f"stage {r.name!r}: computed first as its own Dask array "
                                  f"({why}); the stages after it read it as an input")
                return
        elif any(id(t) not in ok_reads for s in after for t in s.reads()):
            why = "stages after it read the inputs again (a two-pass computation)"
            if len(r.values) == 1:
                plan.stage = r
                plan.lines.append(f"stage {r.name!r}: computed first as its own Dask array "
                                  f"({why}); the stages after it read it as an input")
                return
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
                         live_stages(g.stages, g.outputs)[-1] is not r else ")"))
