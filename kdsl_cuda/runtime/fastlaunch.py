"""The cuda backend's fast launcher: one generated Python function per specialisation.

``build(compiled, plan)`` turns a ``kdsl.runtime.fastpath.FastPlan`` (the argument checks of one
specialisation, as data) into ``fast(*args[, out])``: it reads each device array through its
library's cheapest attributes (torch: ``data_ptr()``, ``shape``, ``stride()``; CuPy:
``data.ptr``; ``DeviceArray``: fields), checks exactly what the plan says (type, dtype object,
rank, sizes, size classes, contiguity, device), computes the kernels' scalar parameters, grids,
workspace sizes and dynamic shared memory inline, allocates results with the input's library
and launches each kernel: through the compiled helper (``native.py``: one C call) where this
machine could build it, else through ctypes, ``cuLaunchKernelEx`` with the grid, block and
stream packed beside the parameters in the kernel's prebuilt buffer (``launch.CONFIG``; 4
ctypes arguments), else ``cuLaunchKernel``.  Anything else -- another array type, a tensor on
the CPU, a wrong number of arguments, a failed check, a value no slot holds, a launch error --
answers ``NotImplemented``, and the call takes the normal path, which keeps every error
message.  Plans with numpy arrays or other libraries' arrays get no fast launcher (None).

Each launcher is generated twice over one body: ``fast(a0, .., [out])`` (the protocol's) and
``packed(args, out)`` (``fast.__kdsl_packed__``), which ``Kernel.__call__`` calls with its
argument tuple as it is.  The benchmark of this path without a GPU: benchmarks/launch_host.py.
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys
import types

from kdsl import dtypes as dt
from kdsl.ir import nodes as n
from kdsl.runtime.dispatch import py_expr
from kdsl.runtime.signature import size_range
from kdsl.runtime.slots import bf16_bits

from . import driver, interop, native
from .launch import _MAX_GRID, CONFIG
from .memory import Allocation, DeviceArray

_HERE = os.path.dirname(os.path.abspath(__file__))


class Unsupported(Exception):
    """This plan gets no fast launcher."""


def _kind_of(kind) -> str:
    if kind is DeviceArray:
        return "kdsl"
    torch = sys.modules.get("torch")
    if torch is not None and kind is torch.Tensor:
        return "torch"
    cupy = sys.modules.get("cupy")
    if cupy is not None and kind is cupy.ndarray:
        return "cupy"
    raise Unsupported(f"no fast reader for {kind.__name__}")


class _Gen:
    def __init__(self, compiled, plan, ordinal):
        self.c, self.plan, self.ordinal = compiled, plan, ordinal
        self.lines, self.ns, self.k = [], {"NotImplemented": NotImplemented}, 0
        self.stride_src: dict = {}       # "st<tag>" -> the expression reading those strides
        self.several = driver.device_count() > 1

    def strides(self, name: str) -> str:
        """``name`` (``st<tag>``), read now if it was not read yet."""
        src = self.stride_src.pop(name, None)
        if src is not None:
            self.emit(f"{name} = {src}")
        return name

    def const(self, value, stem="_c") -> str:
        name = f"{stem}{self.k}"
        self.k += 1
        self.ns[name] = value
        return name

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def read_array(self, var: str, spec, tag: str, more=None):
        """Checks and reads of array ``var``: its pointer ``p{tag}``, its sizes bound once to
        ``d{tag}_{dim}`` and its strides ``st{tag}`` (read where used).  ``more(size names)``:
        further conditions that decline the call, checked with the sizes.  Returns (the library
        kind, the size names)."""
        kind = _kind_of(spec.kind)
        e = self.emit
        # few bytecodes per check: one `if` per group of conditions.  dtypes by identity (the
        # plan's contract, as numpy's fast launchers): torch's are singletons, CuPy's are
        # numpy's builtin ones; an equal dtype object that is not the same one is declined
        same = "!=" if kind == "kdsl" else "is not"
        cond = [f"type({var}) is not {self.const(spec.kind, '_K')}",
                f"{var}.dtype {same} {self.const(spec.dtype, '_D')}"]
        # the device: a torch tensor on the CPU has the type of a CUDA one (get_device() -1),
        # so torch's is checked with one device too; CuPy and kdsl arrays are always on a GPU
        # (CuPy's memory pointer, read once: `m<tag>`, holds the device and the address)
        mem = f"{var}.data"
        if kind == "torch":
            cond.append(f"{var}.get_device() != {self.ordinal}")
        elif self.several:
            if kind == "cupy":
                mem = f"m{tag}"
                cond.append(f"(m{tag} := {var}.data).device_id != {self.ordinal}")
            else:
                cond.append(f"{var}.device != {self.ordinal}")
        if spec.contiguous:
            cond.append({"torch": f"not {var}.is_contiguous()",
                         "cupy": f"not {var}.{_cupy_contiguity(spec.kind)}",
                         "kdsl": f"not {var}.is_c_contiguous"}[kind])
        e(f"if {' or '.join(cond)}: return NotImplemented")
        e(f"sh{tag} = {var}.shape")
        e(f"if len(sh{tag}) != {len(spec.dims)}: return NotImplemented")
        dims = [f"d{tag}_{d}" for d in range(len(spec.dims))]
        if dims:
            e(f"{', '.join(dims)} = {', '.join(f'sh{tag}[{d}]' for d in range(len(dims)))}")
        cond = []
        for d, (want, dn) in enumerate(zip(spec.dims, dims)):
            cls = spec.classes[d] if spec.classes else None
            if want is not None:
                cond.append(f"{dn} != {int(want)}")
            elif cls is None:
                cond.append(f"{dn} == 1")
            else:     # the size class: its bit length, as a range (no call); never 1 from 2 on
                lo, hi = size_range(cls)
                cond.append(f"not {lo} <= {dn} <= {hi}" if lo > 1 else
                            f"{dn} == 1 or {dn} != {lo}")
        if more is not None:
            cond += more(dims)
        if cond:
            e(f"if {' or '.join(cond)}: return NotImplemented")
        # strides are read where they are used (a stride parameter, a strided overlap check)
        if kind == "torch":
            self.stride_src[f"st{tag}"] = f"{var}.stride()"      # elements
            e(f"p{tag} = {var}.data_ptr()")
        elif kind == "cupy":
            self.stride_src[f"st{tag}"] = f"{var}.strides"       # bytes
            e(f"p{tag} = {mem}.ptr")
        else:
            self.stride_src[f"st{tag}"] = f"{var}.strides"
            e(f"p{tag} = {var}.ptr")
        return kind, dims

    def source(self) -> str:
        c, plan, e = self.c, self.plan, self.emit
        func = c.func
        if len(func.inputs) != len(plan.inputs) or len(func.outputs) != len(plan.outputs):
            raise Unsupported("the kernel's buffers do not match the plan")
        kinds, dims, first = {}, {}, None
        for spec in plan.args:
            if hasattr(spec, "pytype"):
                e(f"if type(a{spec.pos}) is not {spec.pytype.__name__}: return NotImplemented")
            else:
                kinds[spec.pos], dims[spec.pos] = self.read_array(f"a{spec.pos}", spec,
                                                                  str(spec.pos))
                first = spec.pos if first is None else first
        if first is None:
            raise Unsupported("no device array")
        lib = kinds[first]
        names = {}      # shape variable -> the local (a size or a scalar argument) it is
        for var, src in plan.sources:
            names[var] = f"a{src[1]}" if src[0] == "scalar" else dims[src[1]][src[2]]
        cond = [f"{dims[pos][d]} != {py_expr(ex, names)}" for pos, d, ex in plan.checks]
        cond += [f"{py_expr(lhs, names)} != {py_expr(rhs, names)}" for lhs, rhs in plan.constraints]
        if cond:
            e(f"if {' or '.join(cond)}: return NotImplemented")
        # the stream: the library's current one (kdsl's arrays: the first one's)
        stream_line = {"torch": f"stream = _raw_stream({self.ordinal})",
                       "cupy": "stream = _cupy_stream().ptr",
                       "kdsl": f"stream = a{first}.stream"}[lib]
        if lib == "torch":
            import torch
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            self.ns["_raw_stream"] = raw or (lambda d: torch.cuda.current_stream(d).cuda_stream)
        elif lib == "cupy":
            self.ns["_cupy_stream"] = sys.modules["cupy"].cuda.get_current_stream
        e(stream_line)
        # outputs
        bufs = [(f"p{p}", dims[p], f"st{p}", kinds[p]) for p in plan.inputs]
        if plan.out_mode is not None:
            outs = ["out"] if plan.out_mode == "one" else [f"out[{j}]" for j in range(len(plan.outputs))]
            if plan.out_mode == "tuple":
                e(f"if type(out) is not tuple or len(out) != {len(outs)}: return NotImplemented")
            for j, (src, spec, (_, shape)) in enumerate(zip(outs, plan.out_args, plan.outputs)):
                e(f"o{j} = {src}")

                def sizes(od, shape=shape):      # each size the result's
                    return [f"{dn} != {py_expr(ex, names)}" for dn, ex in zip(od, shape)]
                kinds[f"o{j}"], od = self.read_array(f"o{j}", spec, f"o{j}", sizes)
                bufs.append((f"po{j}", od, f"sto{j}", kinds[f"o{j}"]))
            self.overlap_checks(plan, kinds, bufs)
        else:
            like = f"a{first}"
            for j, (npdt, shape) in enumerate(plan.outputs):
                od = []
                for d, ex in enumerate(shape):
                    x = py_expr(ex, names)
                    if not (x.isidentifier() or x.isdigit()):
                        e(f"do{j}_{d} = {x}")
                        x = f"do{j}_{d}"
                    od.append(x)
                shp = "(" + "".join(x + ", " for x in od) + ")"
                kd = dt.as_dtype(func.outputs[j].dtype)
                if lib == "torch":
                    tdt = self.const(interop._torch_dtypes()[kd], "_TD")
                    e(f"o{j} = _torch_empty({shp}, dtype={tdt}, device={self.ordinal})")
                    self.ns["_torch_empty"] = sys.modules["torch"].empty
                    e(f"po{j} = o{j}.data_ptr()")
                    self.stride_src[f"sto{j}"] = f"o{j}.stride()"
                elif lib == "cupy" and not self.several:
                    # CuPy's documented constructor (cupy.empty calls it): C order, on the
                    # current device, which is the only one
                    e(f"o{j} = _cupy_nd({shp}, {self.const(kd.np, '_ND')})")
                    self.ns["_cupy_nd"] = sys.modules["cupy"].ndarray
                    e(f"po{j} = o{j}.data.ptr")
                    self.stride_src[f"sto{j}"] = f"o{j}.strides"
                elif lib == "cupy":      # on the input's device (the library's `with device`)
                    e(f"o{j} = _empty_like({shp}, {self.const(kd)}, {like})")
                    self.ns["_empty_like"] = interop._LIBS["cupy"].empty
                    e(f"po{j} = o{j}.data.ptr")
                    self.stride_src[f"sto{j}"] = f"o{j}.strides"
                else:
                    e(f"o{j} = _DA({shp}, {self.const(kd)}, device={self.ordinal}, stream=stream)")
                    self.ns["_DA"] = DeviceArray
                    e(f"po{j} = o{j}.ptr")
                    self.stride_src[f"sto{j}"] = f"o{j}.strides"
                bufs.append((f"po{j}", od, f"sto{j}", lib))
        self.scalars_and_launch(bufs)
        if plan.out_mode is not None:
            e("return out")
        else:
            outs = [f"o{j}" for j in range(len(plan.outputs))]
            e(f"return {outs[0]}" if len(outs) == 1 else f"return ({', '.join(outs)},)")
        # two entries to one body: fast(a0, ..., [out]) (the protocol of kdsl.runtime.fastpath)
        # and packed(args, out), which Kernel.__call__ calls without unpacking its tuple
        params = [f"a{i}" for i in range(plan.nargs)] + (["out"] if plan.out_mode else [])
        body = "\n".join(self.lines) + "\n"
        unpack = ", ".join(f"a{i}" for i in range(plan.nargs)) + ("," if plan.nargs == 1 else "")
        return (f"def fast({', '.join(params)}):\n" + body +
                f"\n\ndef packed(args, out=None):\n    try:\n        {unpack} = args\n"
                "    except (TypeError, ValueError):\n        return NotImplemented\n" + body)

    def overlap_checks(self, plan, kinds, bufs) -> None:
        """out= arrays must not share memory with inputs (the kernels assume so): decline
        (the normal path handles it) when their byte ranges meet."""
        e = self.emit
        specs = {a.pos: a for a in plan.args if not hasattr(a, "pytype")}

        def span(p, dims, st, isz, spec, kind):
            """(start, end) expressions of the byte range [start, end)."""
            if spec.contiguous:    # [p, p + size * itemsize)
                return p, f"{p} + {' * '.join(dims + [str(isz)])}"
            self.ns["_span"] = _span
            nm = f"sp{self.k}"
            self.k += 1
            e(f"{nm}, {nm}e = _span({p}, ({''.join(x + ', ' for x in dims)}), "
              f"{self.strides(st)}, {isz}, {kind == 'torch'})")
            return nm, f"{nm}e"
        nin = len(plan.inputs)
        ins = [span(f"p{p}", bufs[k][1], f"st{p}", self.c.func.buffers[k].dtype.itemsize, specs[p],
                    kinds[p]) for k, p in enumerate(plan.inputs)]
        cond = []
        for j, ospec in enumerate(plan.out_args):
            isz = self.c.func.outputs[j].dtype.itemsize
            lo, hi = span(f"po{j}", bufs[nin + j][1], f"sto{j}", isz, ospec, kinds[f"o{j}"])
            if not ospec.contiguous or len(ins) > 1:
                e(f"eo{j} = {hi}")
                hi = f"eo{j}"
            for li, hi_ in ins:
                cond.append(f"{li} < {hi} and {lo} < {hi_}")
        if cond:
            e(f"if {' or '.join(f'({x})' for x in cond)}: return NotImplemented")

    def scalars_and_launch(self, bufs) -> None:
        c, e, func = self.c, self.emit, self.c.func
        snames = {}
        for j, (v, b) in enumerate(zip(func.scalars, func.bindings)):
            if b.kind is n.BindingKind.SHAPE:
                snames[v] = bufs[b.index][1][b.dim]
            elif b.kind is n.BindingKind.STRIDE:
                p, _dims, st, kind = bufs[b.index]
                st = self.strides(st)
                snames[v] = nm = f"s{j}"
                if kind == "torch":
                    e(f"{nm} = {st}[{b.dim}]")
                else:
                    isz = func.buffers[b.index].dtype.itemsize
                    e(f"{nm}, r_ = divmod({st}[{b.dim}], {isz})")
                    e("if r_: return NotImplemented")
            elif b.kind is n.BindingKind.SCALAR:
                src = f"a{self.plan.scalars[b.index]}"
                if v.dtype is dt.bfloat16:       # its 16 bits (launch._scalar)
                    snames[v] = f"s{j}"
                    e(f"s{j} = _bf16({src})")
                    self.ns["_bf16"] = bf16_bits
                else:
                    snames[v] = src
            else:
                raise Unsupported(f"binding {b.kind}")
        ptrs = [b[0] for b in bufs]
        for w, wbuf in enumerate(func.workspaces):
            count = " * ".join(f"max(int({py_expr(x, snames)}), 0)" for x in wbuf.shape) or "1"
            e(f"w{w} = _Alloc(({count}) * {wbuf.dtype.itemsize}, {self.ordinal}, stream)")
            ptrs.append(f"w{w}.ptr")
        L = driver.lib()
        # 1. the compiled helper (native.py): one C call packs the slots and launches;
        # 2. cuLaunchKernelEx: 4 arguments, prebuilt c_void_p objects (launch.CONFIG holds the
        # grid, block, shared bytes and stream, packed with the parameters); 3. cuLaunchKernel
        # without ctypes argument conversion: handles as prebuilt c_void_p objects, ints as C
        # ints (grids are checked < 2**31 below).  2 and 3 share buffers: under the lock
        nat = _native_launch(L)
        ex = None if nat else getattr(L, "raw_launch_ex", None)
        acq, rel = c._lock.acquire, c._lock.release
        self.ns.update(_Alloc=Allocation, _acq=acq, _rel=rel, _PackError=(struct.error,
                                                                            OverflowError))
        if nat:
            self.ns["_nl"], self.ns["_cu"] = nat
        elif ex is not None:
            self.ns["_lx"] = ex
        else:
            raw = getattr(L, "raw_launch", None)
            self.ns.update(_launch=raw or L.cuLaunchKernel, _cstream=_stream_objects(),
                           _c_void_p=ctypes.c_void_p)
            e("cs = _cstream.get(stream)")
            e("if cs is None: cs = _cstream.setdefault(stream, _c_void_p(stream))")
        fns = c.functions(self.ordinal)
        launches = []
        for k, (plan, fn) in enumerate(zip(c.plans, fns)):
            g = [py_expr(x, snames) for x in plan.grid] + ["1"] * (3 - len(plan.grid))
            for ax, (gx, lim) in enumerate(zip(g, _MAX_GRID)):
                if gx.isdigit():
                    if not 0 < int(gx) <= lim:
                        raise Unsupported(f"constant grid {gx}")
                    continue
                e(f"g{k}{ax} = {gx}")
                e(f"if g{k}{ax} > {lim}: return NotImplemented")
            g = [gx if gx.isdigit() else f"g{k}{ax}" for ax, gx in enumerate(g)]
            shm = "0"
            if plan.smem is not None:       # dynamic shared memory: within what the function
                shm = f"m{k}"               # allows already, else the normal path (allow_shared)
                self.ns[f"_smok{k}"] = plan.smem_ok.setdefault(self.ordinal, [0])
                e(f"m{k} = int({py_expr(plan.smem, snames)})")
                e(f"if m{k} > _smok{k}[0]: return NotImplemented")
            positive = " and ".join(f"{x} > 0" for x in g if not x.isdigit()) or "True"
            args = "".join(", " + (ptrs[i] if kind == "buf" else snames[func.scalars[i]])
                           for kind, i in plan.slots)
            self.ns[f"_buf{k}"] = plan.buffer
            self.ns[f"_par{k}"] = plan.params
            self.ns[f"_fn{k}"] = ctypes.c_void_p(fn)
            bx, by, bz = plan.block
            if nat:
                self.ns[f"_codes{k}"] = native.codes(plan.format)
                self.ns[f"_fnp{k}"] = fn
                pack = None
                launch = (f"if _nl(_cu, _codes{k}, _fnp{k}, {g[0]}, {g[1]}, {g[2]}, {bx}, {by}, "
                          f"{bz}, {shm}, stream{args}): return NotImplemented")
            elif ex is not None:
                self.ns[f"_pk{k}"] = plan.pack_config
                self.ns[f"_cfg{k}"] = plan.config
                pack = (f"_pk{k}(_buf{k}, 0, {g[0]}, {g[1]}, {g[2]}, {bx}, {by}, {bz}, {shm}, "
                        f"stream{args})")
                launch = f"if _lx(_cfg{k}, _fn{k}, _par{k}, None): return NotImplemented"
            else:
                self.ns[f"_pack{k}"] = plan.pack_into
                pack = f"_pack{k}(_buf{k}, {CONFIG.size}{args})"
                launch = (f"if _launch(_fn{k}, {g[0]}, {g[1]}, {g[2]}, {bx}, {by}, {bz}, {shm}, "
                          f"cs, _par{k}, None): return NotImplemented")
            launches.append((positive, pack, launch))
        # the lock: the buffers are shared by the threads calling this specialisation (acquire
        # and release: half the cost of a `with` block; the helper packs on its C stack).  A
        # value the slots cannot hold (an int scalar beyond 64 bits): declined, the normal
        # path reports it
        if not nat:
            e("_acq()")
        e("try:")
        for positive, pack, launch in launches:
            ind = "    "
            if positive != "True":
                e(f"    if {positive}:")
                ind = "        "
            if pack is not None:
                e(ind + pack)
            e(ind + launch)
        e("except _PackError:")
        e("    return NotImplemented")
        if not nat:
            e("finally:")
            e("    _rel()")


def _cupy_contiguity(kind) -> str:
    """The cheapest C-contiguity test of CuPy arrays of class ``kind``: the Cython array's
    ``_c_contiguous`` field (``flags.c_contiguous`` reads it too, after building a Flags object
    per read) where the class has it as a data descriptor, else the public ``flags``."""
    if isinstance(getattr(kind, "_c_contiguous", None), (types.GetSetDescriptorType,
                                                         types.MemberDescriptorType)):
        return "_c_contiguous"
    return "flags.c_contiguous"


def _native_launch(L):
    """(the compiled helper's launch, the address of the driver's cuLaunchKernel), or None
    (no helper here, or a driver whose launch is not a C function: a test's fake)."""
    raw = getattr(L, "raw_launch", None)
    if not isinstance(raw, ctypes._CFuncPtr):
        return None
    mod = native.module()
    if mod is None:
        return None
    return mod.launch, ctypes.cast(raw, ctypes.c_void_p).value


def _stream_objects() -> dict:
    """Stream handle -> its c_void_p (made once per stream, shared by the fast launchers)."""
    return _STREAMS


_STREAMS: dict = {}


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


def build(compiled, plan):
    """The fast launcher of ``plan`` for ``compiled`` (a CudaCompiled), or None."""
    first = next((a for a in plan.args if not hasattr(a, "pytype")), None)
    if first is None or compiled._last_device is None:
        return None
    try:
        g = _Gen(compiled, plan, compiled._last_device)
        src = g.source()
    except Unsupported:
        return None
    code = compile(src, os.path.join(_HERE, f"<cuda fast launcher {compiled.func.name}>"), "exec")
    exec(code, g.ns)
    fn = g.ns["fast"]
    fn.__kdsl_source__ = src
    fn.__kdsl_device__ = True
    fn.__kdsl_packed__ = g.ns["packed"]    # the same launcher taking (args, out): Kernel.__call__
    return fn

