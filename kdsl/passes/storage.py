"""storage: buffers, their scopes and where each is allocated (a schedule-level pass).

Assumes: ``state.placement``, ``state.handles`` and ``state.domains``.
Guarantees: ``state.storage`` (a ``Storage``):
- parameter buffers for the graph's inputs and outputs (an output is written
  through strides unless ``out_contiguous`` says it is compact), and the
  scalars a call supplies with one ``Binding`` each: the shape variables
  (from the first input that has each), the strides of non-contiguous buffers,
  then the graph's scalar arguments;
- one buffer per value of every lowered stage that is not a kernel output,
  shaped by its region (``Domain.extents``, indexed relative to the region's
  min) or by its whole domain where an attached consumer is also read outside
  its loop; its scope is the one the schedule set, else GLOBAL at the root,
  LOCAL inside a thread-bound loop, SHARED inside only block-bound loops,
  LOCAL inside plain loops;
- allocation sites: root stages and whole-buffer stages at the function root,
  in stage order; every other attached stage in the body of its attach loop
  (with its ``double_buffer`` stages count), except shared buffers attached
  inside thread loops: at block level, in the body of the loop right outside
  the kernel's outermost threadIdx/vthread loop (the root when there is none).
  Their extents do not depend on enclosing loops (bound inference), their
  offsets (region mins, e.g. over a serial K loop) are computed where used.
"""
from __future__ import annotations

import dataclasses

from ..ir import make as mk
from ..ir import nodes as n
from ..schedule.records import AttachKind
from .scopes import attr_table, first_thread_loop, stage_scope
from .state import LowerState, Storage


def _param_buffers(graph, out_contiguous, buffers):
    inputs, outputs, strides, bindings = [], [], [], []
    for t in graph.inputs:
        st = None
        if not t.op.contiguous:
            st = tuple(n.var(f"{t.name}_s{d}") for d in range(t.ndim))
        b = n.Buffer(t.name, t.dtype, tuple(t.shape), st, n.Scope.GLOBAL, param=True,
                     empty_reads=t.empty_reads)
        buffers[t] = (b, (mk.as_expr(0),) * t.ndim)
        inputs.append(b)
    for k, t in enumerate(graph.outputs):
        contiguous = out_contiguous[k] if k < len(out_contiguous) else True
        st = None if contiguous else tuple(n.var(f"{t.name}_s{d}") for d in range(t.ndim))
        b = n.Buffer(t.name, t.dtype, tuple(t.shape), st, n.Scope.GLOBAL, param=True)
        buffers[t] = (b, (mk.as_expr(0),) * t.ndim)
        outputs.append(b)
    shape_vars = []
    for v in graph.shape_vars():
        for bi, b in enumerate(inputs):
            dims = [d for d, e in enumerate(b.shape) if e is v]
            if dims:
                shape_vars.append(v)
                bindings.append(n.Binding(n.BindingKind.SHAPE, bi, dims[0]))
                break
    for bi, b in enumerate(inputs + outputs):
        if b.strides is not None:
            for d, s in enumerate(b.strides):
                strides.append(s)
                bindings.append(n.Binding(n.BindingKind.STRIDE, bi, d))
    for i, _ in enumerate(graph.scalars):
        bindings.append(n.Binding(n.BindingKind.SCALAR, i))
    scalars = tuple(shape_vars) + tuple(strides) + tuple(graph.scalars)
    return tuple(inputs), tuple(outputs), scalars, tuple(bindings)


def _temp_buffers(h, dom, scope, whole, buffers):
    """The buffers of ``h``'s values: its region, or (``whole``) its whole domain."""
    bufs = []
    if whole:
        shape = tuple(a.dom.extent for a in h.stage.axes)
        offs = tuple(a.dom.min for a in h.stage.axes)
    else:
        shape = tuple(dom.extents[a] for a in h.stage.axes)
        offs = tuple(dom.mins[a] for a in h.stage.axes) if dom.restricted else (mk.as_expr(0),) * len(shape)
    for t in h.stage.values:
        if t in buffers:       # an output value: a param buffer
            continue
        b = n.Buffer(t.name, t.dtype, shape, None, scope, empty_reads=t.empty_reads)
        buffers[t] = (b, offs)
        bufs.append(b)
    return bufs


def _site(h, scope, enclosing, table, owner):
    """Where ``h``'s buffers are allocated: the body of its attach loop, except a shared buffer
    attached inside thread (or vthread) loops, which is allocated at block level (in the loop
    right outside the kernel's outermost thread loop; at the root for a kernel of one block)."""
    k = first_thread_loop(table, enclosing) if scope is n.Scope.SHARED else None
    if k is None:
        return (h.attach_stage, h.attach_axis)
    if k == 0:
        return None
    iv = enclosing[k - 1][0]
    return (owner[iv], iv)


def plan_storage(state: LowerState) -> LowerState:
    """The ``storage`` pass: ``state.storage`` (see the module docstring)."""
    placement, handles, domains = state.need("placement", "handles", "domains", by="storage")
    graph = state.sched.graph
    buffers: dict = {}
    inputs, outputs, scalars, bindings = _param_buffers(graph, tuple(state.out_contiguous), buffers)
    whole = placement.full_buffer      # attached consumers also read outside their loop
    temps, scopes = {}, {}
    table = attr_table(handles)
    owner = {iv: h for h in handles for iv in h.leaf}
    for h in handles:
        dom = domains[h]
        scope = stage_scope(h, table, dom.enclosing, h in whole)
        scopes[h] = scope
        temps[h] = _temp_buffers(h, dom, scope, h in whole, buffers)
    allocs: dict = {None: []}
    for h in handles:
        if h.attach is AttachKind.ROOT or h in whole:
            allocs[None] += [(b, 1) for b in temps[h]]
    for h in handles:                  # attach loops, in the order nest construction meets them
        if h.attach is AttachKind.AT and h not in whole:
            site = _site(h, scopes[h], domains[h].enclosing, table, owner)
            allocs.setdefault(site, []).extend((b, h.buffer_stages) for b in temps[h])
    allocs = {k: tuple(v) for k, v in allocs.items()}
    storage = Storage(inputs, outputs, scalars, bindings, buffers, allocs)
    return dataclasses.replace(state, storage=storage)
