"""The cuda backend's fast launcher: one generated Python function per specialisation.

``build(compiled, plan)`` turns a ``kdsl.runtime.callplan.CallPlan`` into ``packed(args, out)``
(``FastLauncher.packed``: Kernel._call's argument tuple as it is).  It reads each device array
through its library's cheapest attributes (torch: one C call through DLPack's exchange API
where the compiled helper can, else ``data_ptr()``, ``shape``, ``stride()``; CuPy: the Cython
fields; ``DeviceArray``: fields), checks exactly what the plan says (type, dtype object, rank,
sizes, size classes, contiguity, device, out= overlaps) in few bytecodes (the reads in one
``try``, all sizes in one ``if``, a size class as one shift), computes the scalar parameters,
grids (constants where the size classes fix them), workspaces and dynamic shared memory,
allocates results with the input's library and launches each kernel through the compiled
helper's ``Launcher`` (native.py), else ``cuLaunchKernel`` through ctypes.  Anything else
answers ``NotImplemented``: the normal path keeps every error message.  Plans with numpy or
other libraries' arrays get none.  Measured without a GPU by benchmarks/launch_host.py.
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys
import types

from kdsl import dtypes as dt
from kdsl.backends.spec import FastLauncher
from kdsl.ir import nodes as n
from kdsl.runtime.callplan import SHAPE, STRIDE
from kdsl.runtime.dispatch import py_expr
from kdsl.runtime.signature import size_range
from kdsl.runtime.slots import bf16_bits

from . import driver, interop, native
from .launch import _MAX_GRID, _span, launch_exprs
from .memory import Allocation, DeviceArray

_HERE = os.path.dirname(os.path.abspath(__file__))


class Unsupported(Exception):
    """This plan gets no fast launcher."""


#: per library: the expressions of an array's device address, its strides (torch's: in
#: elements) and its C-contiguity (CuPy's: ``_cupy_contiguity``)
_LIB = {"torch": ("{v}.data_ptr()", "{v}.stride()", "{v}.is_contiguous()"),
        "cupy": ("{v}.data.ptr", "{v}.strides", None),
        "kdsl": ("{v}.ptr", "{v}.strides", "{v}.is_c_contiguous")}


def _kind_of(kind) -> str:
    for lib, cls in (("kdsl", DeviceArray), ("torch", getattr(sys.modules.get("torch"), "Tensor",
                                                              None)),
                     ("cupy", getattr(sys.modules.get("cupy"), "ndarray", None))):
        if kind is cls:
            return lib
    raise Unsupported(f"no fast reader for {kind.__name__}")


class _Gen:
    def __init__(self, compiled, plan, ordinal):
        self.c, self.plan, self.ordinal = compiled, plan, ordinal
        self.lines, self.ns, self.k = [], {"NotImplemented": NotImplemented}, 0
        self.stride_src: dict = {}       # "st<tag>" -> the expression reading those strides
        self.mem: dict = {}              # tag -> the local holding a CuPy array's memory pointer
        self.ranges: dict = {}           # size name -> (lo, hi) it has once its checks passed
        self.alias: dict = {}            # size name -> the first size name it is checked equal to
        self.several = driver.device_count() > 1
        self.reader = None               # [(var, spec, tag, dims)] read in one C call

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

    def read_array(self, var: str, spec, tag: str):
        """The checks of array ``var`` (type, dtype, device, contiguity; its sizes bound to
        ``d{tag}_{dim}`` by unpacking its shape, so another rank raises ValueError in the
        ``try``), or its place in the C reader's call.  Returns (the library, the size names,
        per size its (fixed size, size class))."""
        kind = _kind_of(spec.kind)
        dims = [f"d{tag}_{d}" for d in range(len(spec.dims))]
        info = [(want, spec.classes[d] if spec.classes else None)
                for d, want in enumerate(spec.dims)]
        self.stride_src[f"st{tag}"] = _LIB[kind][1].format(v=var)   # read where used
        if self.reader is not None:      # type, device, dtype, rank, contiguity: checked in C
            self.reader.append((var, spec, tag, dims))
            return kind, dims, info
        # dtypes by identity (the plan's contract): torch's are singletons, CuPy's numpy's
        # builtin ones; an equal dtype object that is not the same one is declined
        cond = [f"type({var}) is not {self.const(spec.kind, '_K')}",
                f"{var}.dtype {'!=' if kind == 'kdsl' else 'is not'} {self.const(spec.dtype, '_D')}"]
        # the device: a torch tensor on the CPU has the type of a CUDA one (is_cuda: that GPU;
        # get_device() where there are several); CuPy's memory pointer, read once (`m<tag>`),
        # holds the device and the address
        if kind == "torch":
            cond.append(f"{var}.get_device() != {self.ordinal}" if self.several else
                        f"not {var}.is_cuda")
        elif self.several and kind == "cupy":
            self.mem[tag] = f"m{tag}"
            cond.append(f"(m{tag} := {var}.data).device_id != {self.ordinal}")
        elif self.several:
            cond.append(f"{var}.device != {self.ordinal}")
        if spec.contiguous:
            cond.append("not " + (_LIB[kind][2] or "{v}." + _cupy_contiguity(spec.kind)).format(v=var))
        self.emit(f"if {' or '.join(cond)}: return NotImplemented")
        self.emit(f"{', '.join(dims)}, = {var}.shape" if dims else
                  f"if len({var}.shape): return NotImplemented")
        return kind, dims, info

    def size_check(self, dn: str, want, cls, same=None) -> str | None:
        """The condition declining size ``dn`` (fixed ``want``, or of size class ``cls``),
        and its range for later folds (``self.ranges``).  ``same``: a size name ``dn`` is
        checked equal to, in the same ``if``, whose range makes this check redundant."""
        if want is not None:
            self.ranges[dn] = (int(want), int(want))
            return f"{dn} != {int(want)}"
        if cls is None:
            return f"{dn} == 1"
        lo, hi = size_range(cls)
        if same is not None and self.ranges.get(same) == (lo, hi):
            self.ranges[dn] = (lo, hi)
            return None
        if lo <= 1:
            return f"{dn} == 1 or {dn} != {lo}"
        self.ranges[dn] = (lo, hi)
        return f"{dn} >> {cls - 1} != 1"     # lo <= dn <= hi as one shift: no call, no chain

    def source(self) -> str:
        c, plan, e, func = self.c, self.plan, self.emit, self.c.func
        if len(func.inputs) != len(plan.inputs) or len(func.outputs) != len(plan.outputs):
            raise Unsupported("the kernel's buffers do not match the plan")
        # 1. the try section: every argument's type, dtype, device, contiguity, rank and sizes
        # (a wrong rank, an argument count or out tuple of another length: ValueError)
        kinds, dims, infos = {}, {}, {}     # per tag (an input's position, "o<j>")
        arrays = [a for a in plan.args if not hasattr(a, "pytype")]
        if not arrays:
            raise Unsupported("no device array")
        if all(_kind_of(a.kind) == "torch" for a in arrays + list(plan.out_args)) \
                and native.reads_torch():
            self.reader = []
        for spec in plan.args:
            if hasattr(spec, "pytype"):
                e(f"if type(a{spec.pos}) is not {spec.pytype.__name__}: return NotImplemented")
            else:
                t = str(spec.pos)
                kinds[t], dims[t], infos[t] = self.read_array(f"a{t}", spec, t)
        first = arrays[0].pos
        lib = kinds[str(first)]
        names = {var: f"a{src[1]}" if src[0] == "scalar" else dims[str(src[1])][src[2]]
                 for var, src in plan.sources}    # shape variable -> its local
        ovars = ["out"] if plan.out_mode == "one" else []
        if plan.out_mode == "tuple":
            ovars = [f"o{j}" for j in range(len(plan.outputs))]
            e("if type(out) is not tuple: return NotImplemented")
            e(f"{', '.join(ovars)}, = out")
        for j, (var, spec) in enumerate(zip(ovars, plan.out_args)):
            kinds[f"o{j}"], dims[f"o{j}"], infos[f"o{j}"] = self.read_array(var, spec, f"o{j}")
        tags = [str(p) for p in plan.inputs] + [f"o{j}" for j in range(len(ovars))]
        if self.reader is not None:     # one call: the stream, each array's pointer and sizes
            self.ns["_rd"] = native.reader([spec for _, spec, _, _ in self.reader], self.ordinal)
            e(f"r_ = _rd({', '.join(v for v, _, _, _ in self.reader)})")
            e("if r_ is None: return NotImplemented")
            e(f"stream, {''.join(f'p{t}, ' + ''.join(x + ', ' for x in d) for _, _, t, d in self.reader)}= r_")
        try_lines, self.lines = self.lines, []
        # 2. the sizes, in one `if`: size classes, the kernel's shape checks and constraints,
        # out='s sizes.  A size checked equal to a size of the same class needs no class check
        same = {}       # size name -> the size names it is checked equal to
        pairs = [(dims[str(pos)][d], ex) for pos, d, ex in plan.checks]
        pairs += [(names.get(c.lhs), c.rhs) for c in plan.constraints if type(c.lhs) is n.Var]
        for x, ex in pairs:
            y = names.get(ex) if type(ex) is n.Var else None
            if x is not None and y is not None:
                same.setdefault(x, []).append(y)
                same.setdefault(y, []).append(x)
        cond = []
        for t in tags[:len(plan.inputs)]:
            for dn, (want, cls) in zip(dims[t], infos[t]):
                known = [y for y in same.get(dn, ()) if y in self.ranges]
                cond.append(self.size_check(dn, want, cls, known[0] if known else None))
        cond += [f"{dims[str(pos)][d]} != {py_expr(ex, names)}" for pos, d, ex in plan.checks]
        cond += [f"{py_expr(c.lhs, names)} != {py_expr(c.rhs, names)}" for c in plan.constraints]
        for j, (_, _, shape) in enumerate(plan.outputs[:len(ovars)]):
            for dn, (want, cls), ex in zip(dims[f"o{j}"], infos[f"o{j}"], shape):
                x = py_expr(ex, names)   # its size: the result's; never 1 when that one is not
                if not (want is None and cls is None and self.ranges.get(x, (0,))[0] > 1):
                    cond.append(self.size_check(dn, want, cls))
                cond.append(f"{dn} != {x}")
                if x.isidentifier():
                    same.setdefault(dn, []).append(x)
        # sizes checked equal (all of them, in this one `if`): one name for each group, so
        # that the overlap checks see equal byte lengths
        for dn in (dn for t in tags for dn in dims[t]):
            group = [y for y in same.get(dn, ()) if y in self.alias]
            self.alias[dn] = self.alias[group[0]] if group else dn
        cond = [x for x in cond if x is not None]
        if cond:
            e(f"if {' or '.join(cond)}: return NotImplemented")
        # 3. the pointers, the stream: the library's current one (kdsl's arrays: the first one's)
        for t in tags if self.reader is None else ():
            ptr = _LIB[kinds[t]][0].format(v=f"a{t}" if t[0] != "o" else ovars[int(t[1:])])
            e(f"p{t} = {self.mem[t]}.ptr" if t in self.mem else f"p{t} = {ptr}")
        if self.reader is None and lib == "torch":
            import torch
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            self.ns["_raw_stream"] = raw or (lambda d: torch.cuda.current_stream(d).cuda_stream)
            e(f"stream = _raw_stream({self.ordinal})")
        elif lib == "cupy":
            get = self.ns["_cupy_stream"] = sys.modules["cupy"].cuda.get_current_stream
            # one GPU: the current device is this one, and naming it spares CuPy's
            # cudaGetDevice (a CuPy whose get_current_stream takes no device: not named)
            named = not self.several and _takes_device(get, self.ordinal)
            e(f"stream = _cupy_stream({self.ordinal if named else ''}).ptr")
        elif lib == "kdsl":
            e(f"stream = a{first}.stream")
        # 4. the outputs: out= checked for overlaps, else allocated like the first input
        bufs = [(f"p{t}", dims[t], f"st{t}", kinds[t]) for t in tags]
        if plan.out_mode is not None:
            self.overlap_checks(plan, bufs)
        for j, (_, _, shape) in enumerate(plan.outputs if plan.out_mode is None else ()):
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
                self.ns["_torch_empty"] = sys.modules["torch"].empty
                tdt = self.const(interop._torch_dtypes()[kd], "_TD")
                e(f"o{j} = _torch_empty({shp}, dtype={tdt}, device={self.ordinal})")
            elif lib == "cupy" and not self.several:
                # CuPy's documented constructor (cupy.empty calls it): C order, on the
                # current device, which is the only one
                self.ns["_cupy_nd"] = sys.modules["cupy"].ndarray
                e(f"o{j} = _cupy_nd({shp}, {self.const(kd.np, '_ND')})")
            elif lib == "cupy":      # on the input's device (the library's `with device`)
                self.ns["_empty_like"] = interop._LIBS["cupy"].empty
                e(f"o{j} = _empty_like({shp}, {self.const(kd)}, a{first})")
            else:
                self.ns["_DA"] = DeviceArray
                e(f"o{j} = _DA({shp}, {self.const(kd)}, device={self.ordinal}, stream=stream)")
            e(f"po{j} = " + _LIB[lib][0].format(v=f"o{j}"))
            self.stride_src[f"sto{j}"] = _LIB[lib][1].format(v=f"o{j}")
            bufs.append((f"po{j}", od, f"sto{j}", lib))
        self.scalars_and_launch(bufs)
        outs = [f"o{j}" for j in range(len(plan.outputs))]
        e("return out" if plan.out_mode is not None else f"return {outs[0]}" if len(outs) == 1
          else f"return ({', '.join(outs)},)")
        unpack = "".join(f"a{i}, " for i in range(plan.nargs))
        return (f"def packed(args, out=None):\n    try:\n        {unpack}= args\n"
                + "".join("    " + ln + "\n" for ln in try_lines)
                + "    except (TypeError, ValueError):\n        return NotImplemented\n"
                + "\n".join(self.lines) + "\n")

    def grid_range(self, ex, snames) -> tuple:
        """(lo, hi) of grid expression ``ex`` once the sizes' checks passed (``self.ranges``;
        interval analysis, kdsl.ir.bounds), a side None where it is not a constant."""
        from kdsl.ir.bounds import bound
        try:
            r = bound(ex, {v: self.ranges[nm] for v, nm in snames.items() if nm in self.ranges})
        except Exception:       # noqa: BLE001  (unbounded, or beyond the analysis: per call)
            return None, None
        return tuple(int(x.value) if type(x) is n.Const else None for x in r)

    def overlap_checks(self, plan, bufs) -> None:
        """out= arrays must not share memory with inputs (the kernels assume so): decline
        (the normal path handles it) when their byte ranges meet.  Contiguous ranges of one
        byte length ``nb`` (sizes checked equal) meet when their starts are less than ``nb``
        apart: one subtraction of pointers, no range ends."""
        e, nin, lengths = self.emit, len(plan.inputs), {}     # byte length -> its local
        specs = [a for a in plan.args if not hasattr(a, "pytype")] + list(plan.out_args)
        isz = [b.dtype.itemsize for b in self.c.func.buffers]

        def span(k):
            """(start, end, byte length or None) expressions of buffer ``k``'s [start, end)."""
            p, dims, st, kind = bufs[k]
            if specs[k].contiguous:    # [p, p + size * itemsize)
                nb = " * ".join([self.alias.get(x, x) for x in dims] + [str(isz[k])])
                return p, f"{p} + {nb}", nb
            self.ns["_span"] = _span
            e(f"sp{k}, sp{k}e = _span({p}, ({''.join(x + ', ' for x in dims)}), "
              f"{self.strides(st)}, {isz[k]}, {kind == 'torch'})")
            return f"sp{k}", f"sp{k}e", None
        ins, cond = [span(k) for k in range(nin)], []
        for j in range(len(plan.out_args)):
            lo, hi, onb = span(nin + j)
            if sum(nb is None or nb != onb for _, _, nb in ins) > 1:
                e(f"eo{j} = {hi}")
                hi = f"eo{j}"
            for li, hi_, nb in ins:
                if nb is not None and nb == onb:
                    if nb not in lengths:
                        lengths[nb] = f"nb{len(lengths)}"
                        e(f"{lengths[nb]} = {nb}")
                    cond.append(f"-{lengths[nb]} < {li} - {lo} < {lengths[nb]}")
                else:
                    cond.append(f"{li} < {hi} and {lo} < {hi_}")
        if cond:
            e(f"if {' or '.join(f'({x})' for x in cond)}: return NotImplemented")

    def scalars_and_launch(self, bufs) -> None:
        c, e, func = self.c, self.emit, self.c.func
        snames = {}
        if self.plan.slots is None:
            raise Unsupported("no scalar slots")
        for j, (v, sl) in enumerate(zip(func.scalars, self.plan.slots)):
            if sl.kind == SHAPE:
                snames[v] = bufs[sl.index][1][sl.dim]
            elif sl.kind == STRIDE:
                _p, _dims, st, kind = bufs[sl.index]
                snames[v] = f"s{j}"
                if kind == "torch":
                    e(f"s{j} = {self.strides(st)}[{sl.dim}]")
                else:
                    e(f"s{j}, r_ = divmod({self.strides(st)}[{sl.dim}], {sl.itemsize})")
                    e("if r_: return NotImplemented")
            elif sl.dtype is dt.bfloat16:       # its 16 bits (launch._scalar)
                snames[v] = f"s{j}"
                e(f"s{j} = _bf16(a{self.plan.scalars[sl.index]})")
                self.ns["_bf16"] = bf16_bits
            else:
                snames[v] = f"a{self.plan.scalars[sl.index]}"
        ptrs = [b[0] for b in bufs]
        grids, smems, sizes = launch_exprs(func, c.plans, snames)
        for w, nbytes in enumerate(sizes):
            e(f"w{w} = _Alloc({nbytes}, {self.ordinal}, stream)")
            ptrs.append(f"w{w}.ptr")
        # the compiled helper (native.py): one C call packs the slots and launches; else
        # cuLaunchKernel through ctypes without argument conversion (handles as prebuilt
        # c_void_p objects, ints as C ints: grids are checked < 2**31 below), the slots packed
        # into the kernel's shared buffer under its lock
        L = driver.lib()
        nat = native.cu_launch(getattr(L, "raw_launch", None))
        self.ns.update(_Alloc=Allocation, _PackError=(struct.error, OverflowError))
        self.native = bool(nat)
        if not nat:
            self.ns.update(_launch=getattr(L, "raw_launch", None) or L.cuLaunchKernel,
                           _cstream=_STREAMS, _c_void_p=ctypes.c_void_p,
                           _acq=c._lock.acquire, _rel=c._lock.release)
            e("cs = _cstream.get(stream)")
            e("if cs is None: cs = _cstream.setdefault(stream, _c_void_p(stream))")
        launches = []
        for k, (plan, fn) in enumerate(zip(c.plans, c.functions(self.ordinal))):
            g, positive = grids[k], []
            for ax, (gx, lim) in enumerate(zip(g, _MAX_GRID)):
                # the grid over the sizes' checked ranges: a constant (tiny arrays: one size
                # class, one grid), or no limit and no zero test where the range excludes them
                lo, hi = self.grid_range(plan.grid[ax], snames) if ax < len(plan.grid) else (1, 1)
                if lo is not None and lo == hi and 0 < lo <= lim:
                    g[ax] = str(lo)
                if g[ax].isdigit():
                    if not 0 < int(g[ax]) <= lim:
                        raise Unsupported(f"constant grid {g[ax]}")
                    continue
                e(f"g{k}{ax} = {gx}")
                g[ax] = f"g{k}{ax}"
                if hi is None or hi > lim:
                    e(f"if g{k}{ax} > {lim}: return NotImplemented")
                if lo is None or lo <= 0:
                    positive.append(f"g{k}{ax} > 0")
            shm = "0"
            if plan.smem is not None:       # dynamic shared memory: within what the function
                shm = f"m{k}"               # allows already, else the normal path (allow_shared)
                self.ns[f"_smok{k}"] = plan.smem_ok.setdefault(self.ordinal, [0])
                e(f"m{k} = {smems[k]}")
                e(f"if m{k} > _smok{k}[0]: return NotImplemented")
            args = "".join(", " + (ptrs[i] if kind == "buf" else snames[func.scalars[i]])
                           for kind, i in plan.slots)
            if nat:     # the helper's Launcher: grid and shared bytes bound when constant
                fixed = all(x.isdigit() for x in g) and shm.isdigit()
                self.ns[f"_L{k}"] = nat[0].Launcher(
                    nat[1], native.codes(plan.format), fn, *plan.block,
                    (int(g[0]), int(g[1]), int(g[2]), int(shm)) if fixed else None)
                head = "" if fixed else f", {g[0]}, {g[1]}, {g[2]}, {shm}"
                run = [f"if _L{k}(stream{head}{args}): return NotImplemented"]
            else:
                self.ns.update({f"_pack{k}": plan.pack_into, f"_buf{k}": plan.buffer,
                                f"_par{k}": plan.params, f"_fn{k}": ctypes.c_void_p(fn)})
                bx, by, bz = plan.block
                run = [f"_pack{k}(_buf{k}, 0{args})",
                       f"if _launch(_fn{k}, {g[0]}, {g[1]}, {g[2]}, {bx}, {by}, {bz}, {shm}, "
                       f"cs, _par{k}, None): return NotImplemented"]
            if positive:
                run = [f"if {' and '.join(positive)}:"] + ["    " + x for x in run]
            launches += run
        # ctypes: the buffers are shared by the threads calling this specialisation (acquire
        # and release: half the cost of a `with`).  A value the slots cannot hold: declined
        if not nat:
            e("_acq()")
        e("try:")
        for x in launches:
            e("    " + x)
        e("except _PackError:")
        e("    return NotImplemented")
        if not nat:
            e("finally:")
            e("    _rel()")


def _takes_device(get_current_stream, ordinal) -> bool:
    """Does CuPy's ``get_current_stream`` take a device id (CuPy >= 10), answering the same
    stream for ``ordinal`` as without one?"""
    try:
        return get_current_stream(ordinal).ptr == get_current_stream().ptr
    except Exception:       # noqa: BLE001  (an older CuPy: TypeError)
        return False


def _cupy_contiguity(kind) -> str:
    """The cheapest C-contiguity test of CuPy arrays of class ``kind``: the Cython array's
    ``_c_contiguous`` field (``flags.c_contiguous`` builds a Flags object per read) where the
    class has it as a data descriptor, else the public ``flags``."""
    if isinstance(getattr(kind, "_c_contiguous", None), (types.GetSetDescriptorType,
                                                         types.MemberDescriptorType)):
        return "_c_contiguous"
    return "flags.c_contiguous"


#: stream handle -> its c_void_p (made once per stream, shared by the ctypes launches)
_STREAMS: dict = {}


def build(compiled, plan):
    """The fast launcher (a FastLauncher) of ``plan`` for ``compiled`` (a CudaCompiled), or None."""
    if compiled._last_device is None:
        return None
    try:
        g = _Gen(compiled, plan, compiled._last_device)
        src = g.source()
    except Unsupported:
        return None
    exec(compile(src, os.path.join(_HERE, f"<cuda fast launcher {compiled.func.name}>"), "exec"),
         g.ns)
    fn = g.ns["packed"]
    fn.__kdsl_source__ = src       # for tests and benchmarks/launch_host.py
    # where the compiled helper is there, its C entry serves the kernel's calls
    return FastLauncher(None, device_arrays=True, packed=fn,
                        entry=native.entry if g.native else None)
