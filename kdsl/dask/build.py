"""Dask arrays from a ``kdsl.dask.mapping.Plan``: blockwise, stencils with halos, tree
reductions and contractions whose steps are kdsl kernels.

The tasks are small picklable objects holding the user's kernel (pickled by reference, or
by value for a kernel defined in a function) and plain data; each process derives and
compiles the step kernels once (``_derived``), through the disk cache.  Graph names are
``<kernel>-<step>-<hash>``: a hash of the kernel's stage graph, the input arrays' names and
the plan, never Dask's tokenizer run on the kernel.
"""
from __future__ import annotations

import hashlib
import sys
import threading

import numpy as np

from ..errors import warn_user
from ..ir import nodes as n
from . import derive, tokens
from .mapping import is_dask


class DaskWarning(UserWarning):
    """A kernel on dask arrays needed a rechunk (an axis made one chunk)."""


# ----------------------------------------------------------------- names
def graph_hash(graph) -> str:
    """A hash of a stage graph: its inputs, stages (axes, bodies) and outputs, by name."""
    h = hashlib.sha1()
    for t in graph.inputs:
        h.update(f"in {t.name} {t.dtype.name} {t.ndim};".encode())
    for s in graph.stages:
        h.update(f"{s.name} {[a.dom for a in s.all_axes]!r} {s.body!r};".encode())
    for t in graph.outputs:
        h.update(f"out {t.name};".encode())
    return h.hexdigest()[:16]


def _name(plan, step, extra="") -> str:
    parts = [graph_hash(plan.graph), plan.kind, step, extra, plan.out_index,
             repr(plan.index), repr(sorted(plan.halo.items()))]
    for a in plan.args:
        parts.append(a.name if is_dask(a) else repr((type(a).__name__, getattr(a, "shape", a))))
    digest = hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]
    return f"{plan.kernel.__name__}-{step}-{digest}"


# ----------------------------------------------------------------- tasks
_lock = threading.Lock()
_made: dict = {}


def _token(k):
    """The kernel's token for this version of its schedules (cached on the kernel)."""
    staged = getattr(k, "staged_key", None)
    if staged is not None:
        return staged()
    got = k.__dict__.get("_dask_token")
    if got is None or got[0] != k._version:
        got = k.__dict__["_dask_token"] = (k._version, tokens.kernel_token(k))
    return got[1], got[0]


def _derived(key, make):
    """The step kernel of ``key`` in this process (made once)."""
    k = _made.get(key)
    if k is None:
        with _lock:
            k = _made.get(key)
            if k is None:
                k = _made[key] = make()
    return k


class BlockTask:
    """``kernel(*blocks)``: blockwise and stencil blocks (``select``: which output of a
    kernel returning several; ``trims``: per same-shaped stencil axis ``(output axis,
    blocks, before, after)``, the block's number coming as one more argument each: the
    halo computed around the block is cut off its result)."""

    def __init__(self, kernel, backend, select=None, trims=()):
        self.kernel, self.backend, self.select, self.trims = kernel, backend, select, trims

    def __call__(self, *blocks):
        if self.trims:
            marks = blocks[len(blocks) - len(self.trims):]
            blocks = blocks[:len(blocks) - len(self.trims)]
        r = self.kernel(*blocks, backend=self.backend)
        if self.select is not None:
            r = r[self.select]
        for (ax, nb, dl, dr), m in zip(self.trims, marks if self.trims else ()):
            k = int(m[0])
            lo = dl if k > 0 else 0
            hi = r.shape[ax] - (dr if k < nb - 1 else 0)
            r = r[(slice(None),) * ax + (slice(lo, hi),)]
        return r


class Records:
    """The partials of a reduction of several values (argmax's value and index, a tuple
    reducer's fields) as bytes, for any chunk type (CuPy has no structured dtypes): each
    partial is one record of ``nbytes``, its values' bytes side by side, along the last
    reduced axis (which is ``nbytes`` long per partial, not 1); Dask concatenates the records
    of a combine step along that axis."""

    def __init__(self, dtypes):
        self.dtypes = tuple(np.dtype(d) for d in dtypes)
        self.nbytes = sum(d.itemsize for d in self.dtypes)

    def __len__(self):
        return len(self.dtypes)

    def pack(self, vals):
        """Values of shape ``(..., 1)`` -> records ``(..., nbytes)``, uint8."""
        xp = _xp(vals[0])
        return xp.concatenate([xp.ascontiguousarray(v).view(np.uint8) for v in vals], axis=-1)

    def unpack(self, x):
        """Records ``(..., k * nbytes)`` -> each value ``(..., k)`` (numpy or CuPy)."""
        xp = _xp(x)
        x = xp.ascontiguousarray(x)
        x = x.reshape(x.shape[:-1] + (x.shape[-1] // self.nbytes, self.nbytes))
        out, off = [], 0
        for d in self.dtypes:
            v = xp.ascontiguousarray(x[..., off:off + d.itemsize]).view(d)
            out.append(v.reshape(v.shape[:-1]))
            off += d.itemsize
        return out


def _xp(x):
    """The array module of chunk ``x``: CuPy for CuPy chunks (numpy's creation functions
    refuse them: no implicit device-to-host copy), else numpy."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(x, cupy.ndarray):
        return cupy
    return np


def _fields(x, packed):
    return packed.unpack(x) if isinstance(packed, Records) else [x]


def _pack(vals, packed):
    return packed.pack(vals) if isinstance(packed, Records) else vals[0]


class ChunkTask:
    """The kernel cut at the reduce stage on one block of each input; the partial keeps a
    size-1 dim per reduced axis; argmax/argmin indices are shifted by the block's start."""

    def __init__(self, kernel, backend, rname, nred, packed, index_value, identity):
        self.kernel, self.backend, self.rname = kernel, backend, rname
        self.nred, self.packed, self.index_value = nred, packed, index_value
        self.identity = identity

    def step(self):
        k = self.kernel
        return _derived((_token(k), "chunk", self.rname),
                        lambda: derive.make(f"{k.__name__}_chunk", k.arg_names,
                                            derive.chunk_graph(k, self.rname),
                                            k.specialize, k.constants))

    def __call__(self, *blocks):
        if self.index_value is not None:
            blocks, start = blocks[:-1], blocks[-1]
        r = self.step()(*blocks, backend=self.backend)
        vals = list(r) if isinstance(r, tuple) else [r]
        vals = [v.reshape(v.shape + (1,) * self.nred) for v in vals]   # numpy or CuPy
        if self.index_value is not None:
            v = vals[self.index_value]
            off = int(start.reshape(-1)[0])
            vals[self.index_value] = _xp(v).where(v == self.identity, v, v + off)
        return _pack(vals, self.packed)


class TreeTask:
    """``combine`` (partials -> partials) or ``aggregate`` (partials -> output) of a tree
    reduction: the kernel's combiner (then its epilogue) as derived kdsl kernels."""

    def __init__(self, kernel, backend, rname, full_args, nred, packed, final, dtype):
        self.kernel, self.backend, self.rname, self.dtype = kernel, backend, rname, dtype
        self.full_args, self.nred, self.packed, self.final = full_args, nred, packed, final

    def step(self):
        k, final = self.kernel, self.final

        def make():
            g, fakes = derive.parent_graph(k, self.full_args)
            arrays = [f for f in fakes if isinstance(f, np.ndarray)]
            env = g.bind(arrays, [a for a, f in zip(self.full_args, fakes)
                                  if not isinstance(f, np.ndarray) and a is not None])
            names = [f"p{j}" for j in range(len(self.packed)
                                             if isinstance(self.packed, Records) else 1)]
            return derive.make(f"{k.__name__}_{'aggregate' if final else 'combine'}", names,
                               derive.aggregate_graph(g, self.rname, env, final))
        key = (_token(k), "aggregate" if final else "combine", self.rname, repr(self.full_args))
        return _derived(key, make)

    def __call__(self, x, axis=None, keepdims=False, computing_meta=False):
        if computing_meta:      # Dask asks for the meta: the result's type, no data
            return np.empty_like(x, shape=(0,) * (x.ndim if keepdims else x.ndim - self.nred),
                                 dtype=self.dtype)
        r = self.step()(*_fields(x, self.packed), backend=self.backend)
        if self.final:
            return r
        vals = list(r) if isinstance(r, tuple) else [r]
        vals = [v.reshape(v.shape + (1,) * self.nred) for v in vals]   # numpy or CuPy
        return _pack(vals, self.packed)


class _Keep:
    """The chunk step of ``dask.array.reduction`` on partials already made: themselves
    (Dask's meta probe gets the final dtype: the partials' packed type is internal)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, x, axis=None, keepdims=True, computing_meta=False):
        if computing_meta:
            return np.empty_like(x, shape=(0,) * x.ndim, dtype=self.dtype)
        return x


# ----------------------------------------------------------------- building
def _shapes(args):
    return tuple((tuple(int(s) for s in a.shape), np.dtype(a.dtype)) if is_dask(a) else a
                 for a in args)


def _prepare(plan):
    """The arguments with the dims the plan makes one chunk rechunked (warning once)."""
    import dask.array as da
    args = list(plan.args)
    for (j, d), why in plan.whole.items():
        args[j] = args[j].rechunk({d: -1})
    if plan.whole:
        what = "; ".join(f"{plan.kernel.arg_names[j]!r} axis {d}: {why}"
                         for (j, d), why in plan.whole.items())
        warn_user(f"kernel {plan.kernel.__name__} on dask arrays: rechunked to one chunk "
                  f"along {what}. Chunk the array so that axis is whole to avoid the "
                  "copy (see kd.dask.plan)", DaskWarning)
    return [da.asarray(a) if isinstance(a, np.ndarray) else a for a in args]


def _meta(args, ndim, dtype):
    """An empty array of the chunks' type (numpy, CuPy: the first dask argument's meta)."""
    for a in args:
        m = getattr(a, "_meta", None)
        if m is not None:
            return np.empty_like(m, shape=(0,) * ndim, dtype=dtype)
    return np.empty((0,) * ndim, dtype)


def build(plan, backend):
    """The dask array of ``plan``'s kernel call (lazy); a tuple for several outputs."""
    args = _prepare(plan)
    outs = plan.graph.outputs
    if plan.tree is not None:
        out = outs[0]
        return _tree(plan, args, backend, out.dtype.np, _meta(args, out.ndim, out.dtype.np))
    if len(outs) == 1:
        return _blocks(plan, args, backend, None)
    return tuple(_blocks(plan, args, backend, k) for k in range(len(outs)))


def _blocks(plan, args, backend, select):
    import dask.array as da
    out = plan.graph.outputs[select or 0]
    dtype = out.dtype.np
    meta = _meta(args, out.ndim, dtype)
    pairs = []
    for a, ix in zip(args, plan.index):
        pairs += [a, None if ix is None else "".join(ix)]
    adjust = {}
    trims = []
    if plan.halo:
        pairs, adjust, trims = _halos(plan, pairs)
    step = "blocks" if select is None else f"out{select}"
    task = BlockTask(plan.kernel, backend, select, tuple(trims))
    return da.blockwise(task, plan.out_index, *pairs,
                        dtype=dtype, meta=meta, concatenate=True, adjust_chunks=adjust or None,
                        new_axes=plan.new_axes or None, align_arrays=True,
                        name=_name(plan, step))


def _halos(plan, pairs):
    """Stencil inputs extended by their halos (``dask.array.overlap``, no padding at the
    array's edges), chunks first made common and at least as long as the halo; the output
    chunks; the trims of same-shaped stencils and their block-number arrays."""
    import dask.array as da
    from dask.array.core import unify_chunks
    from dask.array.overlap import ensure_minimum_chunksize, overlap
    chunkss, arrays = unify_chunks(*pairs)
    base = {}
    for c, (mode, dl, dr) in plan.halo.items():
        base[c] = ensure_minimum_chunksize(max(dl, dr, 1), chunkss[c])
    pairs = list(pairs)
    for j, ix in enumerate(plan.index):
        a = arrays[j]
        if ix is None or not hasattr(a, "chunks"):
            continue
        depth = {d: plan.halo[c][1:] for d, c in enumerate(ix) if c in plan.halo}
        if depth:
            a = a.rechunk(tuple(base[c] if c in base else a.chunks[d]
                                for d, c in enumerate(ix)))
            a = overlap(a, depth=depth, boundary="none", allow_rechunk=False)
        pairs[2 * j] = a
    adjust, trims = {}, []
    for c, (mode, dl, dr) in plan.halo.items():
        cs = list(base[c])
        if mode == "valid":
            cs[-1] -= dr
            adjust[c] = tuple(cs)
            continue
        adjust[c] = tuple(cs)
        nb = len(cs)
        ext = tuple(x + (dl if k > 0 else 0) + (dr if k < nb - 1 else 0)
                    for k, x in enumerate(cs))
        marks = np.repeat(np.arange(nb, dtype=np.int32), ext)
        pairs += [da.from_array(marks, chunks=(ext,)), c]
        trims.append((plan.out_index.index(c), nb, dl, dr))
    return pairs, adjust, trims


def _tree(plan, args, backend, dtype, meta):
    import dask.array as da
    r = plan.tree
    red = plan.tree_letters
    body = r.body
    vals = r.values
    packed = Records([t.dtype.np for t in vals]) if len(vals) > 1 else vals[0].dtype.np
    pdtype = np.uint8 if isinstance(packed, Records) else packed
    index_value = None
    identity = None
    kind = body.combiner.kind
    if kind in (n.CombinerKind.ARGMAX, n.CombinerKind.ARGMIN):
        index_value = next(j for j, s in enumerate(body.sources) if type(s) is n.Var)
        identity = body.combiner.identity[index_value].value
    # empty chunks along the reduced axes are dropped (max/argmax have no identity to give)
    args = list(args)
    chunks_of = {}
    for j, (a, ix) in enumerate(zip(args, plan.index)):
        if ix is None:
            continue
        new = list(a.chunks)
        for d, c in enumerate(ix):
            if c in red:
                nz = tuple(x for x in a.chunks[d] if x > 0)
                new[d] = nz if nz else a.chunks[d]
                chunks_of[c] = new[d]
        if tuple(new) != a.chunks:
            args[j] = a.rechunk(tuple(new))
    r_index = plan.out_index
    pairs = []
    for a, ix in zip(args, plan.index):
        pairs += [a, None if ix is None else "".join(ix)]
    if index_value is not None:
        c = red[0]
        # each block's global positions along the reduced axis (its first is the offset)
        pairs += [da.arange(sum(chunks_of[c]), chunks=(chunks_of[c],), dtype=np.int64), c]
    nred = len(red)
    task = ChunkTask(plan.kernel, backend, r.name, nred, packed, index_value, identity)
    pmeta = _meta(args, len(r_index) + nred, pdtype)
    # one partial per block along each reduced axis (one record of several values along the
    # last: Records)
    width = packed.nbytes if isinstance(packed, Records) else 1
    adjust = {c: (lambda n: 1) for c in red}
    adjust[red[-1]] = lambda n: width
    partials = da.blockwise(task, r_index + red, *pairs, dtype=pdtype, meta=pmeta,
                            concatenate=True, align_arrays=True,
                            adjust_chunks=adjust,
                            new_axes=plan.new_axes or None, name=_name(plan, "chunk"))
    full = _shapes(plan.args)
    comb = TreeTask(plan.kernel, backend, r.name, full, nred, packed, False, dtype)
    agg = TreeTask(plan.kernel, backend, r.name, full, nred, packed, True, dtype)
    axes = tuple(range(len(r_index), len(r_index) + nred))
    return da.reduction(partials, _Keep(dtype), agg, combine=comb, axis=axes, keepdims=False,
                        dtype=dtype, meta=meta, concatenate=True,
                        name=_name(plan, "tree"))
