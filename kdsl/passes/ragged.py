"""Reductions whose bounds depend on other axes (``kd.reduce_axis((0, i + 1))``).

A triangular or banded reduction has a reduce axis whose ``dom.min``/``dom.extent``
mention the stage's spatial axes (or an earlier reduce axis of the same stage).  In a
loop nest such a reduction loop simply runs over the range those bounds give at the
current values of the enclosing loops; bound inference calls
``ragged_reduce_ranges`` so that every bound is written over the nest's leaf loop
variables (the spatial axes may have been split, fused or bound to threads).

Legality: the reduction loop must run inside the loops of every axis its bounds use;
a schedule that reorders it outside them is refused (``ScheduleError``).
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir import make as mk
from ..ir.visitor import free_vars, substitute
from ..schedule.schedule import leaf_values


def depends(iv, axes) -> bool:
    """``iv``'s range uses one of ``axes`` (IterVars)."""
    used = free_vars(iv.dom.min) | free_vars(iv.dom.extent)
    return any(a.var in used for a in axes)


def ragged_reduce_ranges(h, mins: dict, root_ext: dict) -> dict:
    """Rewrite the bounds of ``h``'s ragged reduce axes over its leaf loop variables.

    ``mins``/``root_ext``: the spatial region bound inference chose (root IterVar ->
    Expr); ``root_ext`` gets each ragged reduce axis's extent, the returned dict maps
    it to its minimum.  Axes with constant or shape-only bounds are left alone.
    """
    st = h.stage
    everything = list(st.axes) + list(st.reduce_axes)
    ragged = [r for r in st.reduce_axes if depends(r, everything)]
    if not ragged:
        return {}
    value, _, _ = leaf_values(h, root_ext)
    env = {a.var: mk.add(mins[a], value[a]) for a in st.axes}
    out = {}
    for r in st.reduce_axes:         # in order: a later axis may use an earlier one
        if r in ragged:
            out[r] = substitute(r.dom.min, env)
            root_ext[r] = substitute(r.dom.extent, env)
            _check_nesting(h, r, free_vars(out[r]) | free_vars(root_ext[r]), value[r])
        env[r.var] = mk.add(out.get(r, r.dom.min), value[r])
    return out


def _check_nesting(h, r, used, r_value) -> None:
    """The loops of ``r`` must sit inside those of the axes its bounds use."""
    pos = {iv.var: k for k, iv in enumerate(h.leaf)}
    own = [pos[v] for v in free_vars(r_value) if v in pos]
    outer = [(pos[v], v) for v in used if v in pos]
    if own and outer and max(outer)[0] >= min(own):
        v = max(outer)[1]
        raise ScheduleError(
            f"stage {h.name}: the reduction axis {r.name!r} has bounds that use {v.name!r}, "
            f"so its loop must run inside the loop of {v.name!r}",
            hint=f"keep {r.name!r} after {v.name!r} in reorder(...)")
