"""A compiled cuda specialisation: cubins loaded per device, and the call that launches them.

``CudaCompiled`` is the protocol's ``Compiled``: ``(inputs, outputs, scalars, stream=None)``
runs the host program of ``func`` (its workspaces and device kernels, in order, on one
stream).  The scalar parameters, grids, workspace sizes and dynamic shared bytes are one
generated function (``geometry``, from the IR's expressions); each kernel's slots are packed
into a prebuilt ctypes buffer whose slot addresses are ``cuLaunchKernel``'s ``kernelParams``.
Above 48 KB of shared memory per block the function's attribute is raised first
(``allow_shared``).  Device arrays of any library are read in place (``interop.view``); numpy
arrays are copied in, numpy outputs back (then the stream is synchronised).
"""
from __future__ import annotations

import ctypes
import os
import struct
import threading

import numpy as np

from kdsl import dtypes as dt
from kdsl.backends.spec import FastLaunch
from kdsl.errors import ArgumentError, InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir.bindings import scalar_slots
from kdsl.runtime.dispatch import _fdiv, _fmod, py_expr
from kdsl.runtime.slots import SLOT, bf16_bits, element_stride, slot_sources

from . import driver, interop
from .memory import Allocation, DeviceArray, sync_stream, to_device

_HERE = os.path.dirname(os.path.abspath(__file__))

_MAX_GRID = (2 ** 31 - 1, 65535, 65535)
#: shared memory per block (static + dynamic) a launch gets without the opt-in attribute
DEFAULT_SHARED = 48 * 1024


class KernelPlan:
    """One device kernel of a call: its name, block, and parameter slots (a buffer: its index in
    ``func.buffers + func.workspaces``; a scalar: its index in ``func.scalars``)."""

    def __init__(self, ks, func):
        self.name = ks.name
        self.block = tuple(int(b) for b in ks.launch.block) + (1,) * (3 - len(ks.launch.block))
        bufs = {id(b): k for k, b in enumerate(list(func.buffers) + list(func.workspaces))}
        scalars = {id(v): j for j, v in enumerate(func.scalars)}
        self.slots, fmt = [], "<"        # ("buf", k) | ("scalar", j); their struct format
        for p in ks.params:
            if p.buffer is not None and id(p.buffer) in bufs:
                self.slots.append(("buf", bufs[id(p.buffer)]))
                fmt += "Q"
            elif p.var is not None and id(p.var) in scalars and p.var.dtype in SLOT:
                self.slots.append(("scalar", scalars[id(p.var)]))
                fmt += SLOT[p.var.dtype]
            else:
                raise InternalCompilerError(f"cuda launch: parameter {p.name} of {ks.name} is "
                                            "no buffer or scalar of the function")
        self.format = fmt
        #: the parameter slots, packed into ``buffer`` (its slot addresses: ``params``)
        self.pack_into = struct.Struct(fmt).pack_into
        nslots = max(len(self.slots), 1)
        self.buffer = ctypes.create_string_buffer(8 * nslots)
        base = ctypes.addressof(self.buffer)
        self.params = (ctypes.c_void_p * nslots)(*[base + 8 * i for i in range(nslots)])
        self.grid = ks.launch.grid
        #: dynamic shared memory (bytes) as an Expr of the scalars, or None
        self.smem = ks.launch.dynamic_shared
        #: device ordinal -> the dynamic bytes a launch may ask for without setting the
        #: function's attribute (a list: the fast launchers read the same cell)
        self.smem_ok: dict = {}


def launch_exprs(func, plans, names) -> tuple:
    """Python expressions over ``names`` (Var -> the expression of its value): each kernel's
    grid (3, padded with "1"), its dynamic shared bytes (None: none), each workspace's byte
    size -- the one generator of the slow path (``geometry``) and the fast launchers."""
    grids = [[py_expr(e, names) for e in p.grid] + ["1"] * (3 - len(p.grid)) for p in plans]
    smem = [None if p.smem is None else f"int({py_expr(p.smem, names)})" for p in plans]
    sizes = [f"({' * '.join(f'max(int({py_expr(e, names)}), 0)' for e in w.shape) or '1'}) "
             f"* {w.dtype.itemsize}" for w in func.workspaces]
    return grids, smem, sizes


def geometry_function(func, plans):
    """``geometry(shapes, strides, scalars) -> (scalar values, grids, workspace byte sizes,
    dynamic shared bytes per kernel)``, generated from the IR."""
    names = {v: f"s{j}" for j, v in enumerate(func.scalars)}
    lines = [f"s{j} = {x}" for j, x in
             enumerate(slot_sources(scalar_slots(func), "shapes[{k}]", "strides[{k}]"))]
    g3, smem, sizes = launch_exprs(func, plans, names)
    grids = ["(" + ", ".join(f"int({x})" for x in g) + ")" for g in g3]
    smem = ["0" if m is None else m for m in smem]
    vals = "[" + ", ".join(f"s{j}" for j in range(len(func.scalars))) + "]"
    lines.append(f"return {vals}, [{', '.join(grids)}], [{', '.join(sizes)}], [{', '.join(smem)}]")
    src = "def geometry(shapes, strides, scalars):\n" + "".join(f"    {x}\n" for x in lines)
    ns = {"_stride": element_stride, "_fdiv": _fdiv, "_fmod": _fmod}
    exec(compile(src, os.path.join(_HERE, f"<cuda geometry {func.name}>"), "exec"), ns)
    fn = ns["geometry"]
    fn.__kdsl_source__ = src
    return fn


class CudaCompiled:
    """A loaded specialisation (see the module docstring).  ``cubin_for(arch, fresh=False)``
    gives the cubin of a device's architecture (compiled on demand for another device)."""

    def __init__(self, func: n.LoweredFunc, module, cubin_for, source: str):
        self.func = func
        self.module = module
        self.source = source
        self._cubin_for = cubin_for
        self.plans = [KernelPlan(ks, func) for ks in module.kernels]
        self.geometry = geometry_function(func, self.plans)
        self._functions: dict = {}       # device ordinal -> [CUfunction]
        self._lock = threading.Lock()
        self._nin = len(func.inputs)
        self._last_device = None         # the device of the last call (fast launchers serve it)
        #: fast launchers, generated for a plan's device arrays (kdsl.runtime.fastpath)
        self.fast = FastLaunch(self.fast_launcher, device_arrays=True, func=func)

    def fast_launcher(self, plan):
        """A generated launcher for ``plan`` (``fastlaunch``; a FastLauncher), or None (numpy
        arrays, other libraries' arrays)."""
        from . import fastlaunch
        return fastlaunch.build(self, plan)

    # ----------------------------------------------------------------- loading
    def functions(self, ordinal: int) -> list:
        """The kernels' CUfunctions on GPU ``ordinal`` (its module loaded on first use)."""
        with self._lock:
            fns = self._functions.get(ordinal)
            if fns is None:
                arch, L, mod = driver.device(ordinal).arch, driver.lib(), ctypes.c_void_p()
                code = L.cuModuleLoadData(ctypes.byref(mod), self._cubin_for(arch))
                if code:    # a cached cubin the driver refuses: discarded, rebuilt once
                    code = L.cuModuleLoadData(ctypes.byref(mod), self._cubin_for(arch, fresh=True))
                L.check(code, "cuModuleLoadData")
                fns = []
                for p in self.plans:
                    f = ctypes.c_void_p()
                    L.check(L.cuModuleGetFunction(ctypes.byref(f), mod, p.name.encode()),
                            f"cuModuleGetFunction({p.name})")
                    fns.append(f.value)
                self._functions[ordinal] = fns      # (complete: a failed lookup keeps none)
        return fns

    def allow_shared(self, plan, fn, nbytes: int, ordinal: int) -> None:
        """Let ``fn`` launch with ``nbytes`` of dynamic shared memory: beyond 48 KB per block
        (static included) the function's MAX_DYNAMIC_SHARED_SIZE_BYTES attribute is raised,
        once per size it grows to; beyond the device's opt-in limit, an ArgumentError."""
        ok = plan.smem_ok.get(ordinal)
        if ok is not None and nbytes <= ok[0]:
            return
        with self._lock:
            L = driver.lib()
            static = ctypes.c_int()
            L.check(L.cuFuncGetAttribute(ctypes.byref(static), driver.FUNC_ATTR_SHARED_SIZE_BYTES,
                                         ctypes.c_void_p(fn)), f"cuFuncGetAttribute({plan.name})")
            limit = driver.device(ordinal).max_shared
            if static.value + nbytes > limit:
                from kdsl.ir.shared_memory import too_much_shared
                raise too_much_shared(plan.name, static.value + nbytes, limit)
            if ok is None:
                ok = plan.smem_ok.setdefault(ordinal, [max(0, DEFAULT_SHARED - static.value)])
            if nbytes > ok[0]:
                L.check(L.cuFuncSetAttribute(ctypes.c_void_p(fn), driver.FUNC_ATTR_MAX_DYNAMIC_SHARED,
                                             nbytes), f"cuFuncSetAttribute({plan.name}, "
                        f"MAX_DYNAMIC_SHARED_SIZE_BYTES, {nbytes})")
                ok[0] = nbytes

    # ----------------------------------------------------------------- the call
    def __call__(self, inputs, outputs, scalars, stream=None) -> None:
        arrays = list(inputs) + list(outputs)
        views = [None if type(a) is np.ndarray else interop.view(a) for a in arrays]
        host = [k for k, v in enumerate(views) if v is None]
        first = next(((k, v) for k, v in enumerate(views) if v is not None), None)
        ordinal = first[1].device if first else 0
        for v in views:
            if v is not None and v.device != ordinal:
                raise ArgumentError(f"{self.func.name}: the arrays are on different CUDA devices "
                                    f"({ordinal} and {v.device})",
                                    hint="move them to one device first")
        if stream is not None:
            handle = interop.stream_handle(stream)
        elif first is not None:
            handle = interop.library(arrays[first[0]]).current_stream(arrays[first[0]])
        else:
            handle = 0
        driver.device(ordinal)
        self._last_device = ordinal
        if outputs and first is not None:
            _check_disjoint(self.func, views, self._nin)
        staged = {}
        for k in host:   # numpy arrays: inputs copied in, outputs made on the device
            a = arrays[k]
            staged[k] = (to_device(a, ordinal, handle, wait=False) if k < self._nin else
                         DeviceArray(a.shape, self.func.buffers[k].dtype, device=ordinal,
                                     stream=handle))
            views[k] = interop.view(staged[k])
        self._launch(views, scalars, ordinal, handle)
        if host:
            for k in (k for k in host if k >= self._nin):
                _stage_out(staged[k], arrays[k], handle)
            sync_stream(handle)

    def _launch(self, views, scalars, ordinal, stream) -> None:
        shapes = [v.shape for v in views]
        strides = [v.strides for v in views]
        values, grids, sizes, smem = self.geometry(shapes, strides, scalars)
        ptrs = [v.ptr for v in views]
        keep = [Allocation(sz, ordinal, stream) for sz in sizes]
        ptrs += [w.ptr for w in keep]
        fns = self.functions(ordinal)
        L = driver.lib()
        sv = ctypes.c_void_p(stream)
        for plan, fn, grid, shm in zip(self.plans, fns, grids, smem):
            if 0 in grid:
                continue
            if shm:
                self.allow_shared(plan, fn, shm, ordinal)
            for g, lim, ax in zip(grid, _MAX_GRID, "xyz"):
                if g > lim:
                    raise ArgumentError(f"{self.func.name}: kernel {plan.name} needs {g} blocks "
                                        f"along {ax}, more than CUDA allows ({lim})",
                                        hint="bind a larger extent to blockIdx.x, or split the "
                                             "axis over blockIdx.y")
            args = [ptrs[i] if kind == "buf" else bf16_bits(values[i])
                    if self.func.scalars[i].dtype is dt.bfloat16 else values[i]
                    for kind, i in plan.slots]
            with self._lock:
                plan.pack_into(plan.buffer, 0, *args)
                code = L.cuLaunchKernel(fn, grid[0], grid[1], grid[2], plan.block[0],
                                        plan.block[1], plan.block[2], shm, sv, plan.params, None)
            if code:
                L.check(code, f"cuLaunchKernel({plan.name}, grid={grid}, block={plan.block})")
        del keep      # freed on the stream, after the launches that use them


def _stage_out(d: DeviceArray, out: np.ndarray, stream: int) -> None:
    if not out.size:
        return
    direct = out.flags.c_contiguous and out.flags.writeable
    host = out if direct else np.empty(out.shape, out.dtype)
    driver.lib().check(driver.lib().cuMemcpyDtoHAsync_v2(
        ctypes.c_void_p(host.ctypes.data), ctypes.c_void_p(d.ptr), host.nbytes,
        ctypes.c_void_p(stream)), "cuMemcpyDtoH")
    if not direct:
        sync_stream(stream)
        np.copyto(out, host)


def _span(p: int, shape, strides, itemsize: int, elements: bool) -> tuple:
    """The byte range [lo, hi) an array's elements occupy (strides in elements or bytes)."""
    lo = hi = p
    for s, st in zip(shape, strides):
        if s == 0:
            return p, p
        step = st * itemsize if elements else st
        if step < 0:
            lo += (s - 1) * step
        else:
            hi += (s - 1) * step
    return lo, hi + itemsize


def _check_disjoint(func, views, nin) -> None:
    """out= device arrays must not share memory with the inputs (the kernels read inputs while
    writing outputs, and the CUDA code promises ``__restrict__``)."""
    spans = [None if v is None else _span(v.ptr, v.shape, v.strides, v.dtype.itemsize, False)
             for v in views]
    for j in range(nin, len(views)):
        if spans[j] is None:
            continue
        for i in range(len(views)):
            if i == j or spans[i] is None:
                continue
            if spans[i][0] < spans[j][1] and spans[j][0] < spans[i][1] and spans[j][0] < spans[j][1]:
                what = "an input" if i < nin else "another output"
                raise ArgumentError(f"{func.name}: out= array {func.buffers[j].name!r} shares device "
                                    f"memory with {what} ({func.buffers[i].name!r})",
                                    hint="pass an out= array that does not overlap the inputs "
                                         "(the cuda backend writes results while reading inputs)")
