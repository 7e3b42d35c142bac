"""The LLVM IR of a native fast launcher (kdsl_cpu.fastcall): built only where its object code
is not in the disk cache yet (kdsl_cpu.fastcall_store), so llvmlite is imported only then."""
from __future__ import annotations

from llvmlite import ir

from kdsl import dtypes as dt
from kdsl.ir import nodes as n
from kdsl.runtime.callplan import SCALAR, SHAPE, ArrayArg, ScalarArg

from . import fastcall_store
from .fastcall_abi import (_INT64_MIN, NPY_C_CONTIGUOUS, NPY_WRITEABLE, OFF_BYTES_DATA,
                           OFF_DATA, OFF_DESCR, OFF_DIMS, OFF_FLAGS, OFF_ND, OFF_STRIDES,
                           OFF_TUPLE_ITEMS, OFF_TUPLE_SIZE, OFF_TYPE, Unsupported)

I8, I32, I64, PTR, F64 = ir.IntType(8), ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.DoubleType()
I1 = ir.IntType(1)


# ----------------------------------------------------------------- code generation
class _Callee:
    """A C function whose address the launcher loads from its table, callable through
    IRBuilder.call."""

    def __init__(self, ptr, ret, args):
        self.function_type = ir.FunctionType(ret, args)
        self._ptr = ptr

    def __getattr__(self, name):
        return getattr(self._ptr, name)


def _c64(v) -> ir.Constant:
    return ir.Constant(I64, int(v))


class _Gen:
    """Builds the launcher function of one plan (see the module docstring)."""

    def __init__(self, plan, compiled):
        self.plan, self.compiled = plan, compiled
        self.module = ir.Module(name="kdsl_fast")
        self.fn = ir.Function(self.module, ir.FunctionType(PTR, [PTR, PTR, I64]), "kdsl_fast")
        # every address (functions, type and dtype objects, the kernel, its runtime table) is
        # read from a table, never written into the code: the object code is the same in every
        # process and is kept in the disk cache.  The table is the bytes object the builtin's
        # self (a tuple) holds first; the loads sit in the entry block, which dominates all.
        # ``table``: what each entry holds, as a symbol (``_address``)
        self.table, self._loaded = [], {}
        self.pb = ir.IRBuilder(self.fn.append_basic_block("entry"))
        table = self.pb.load(self.pb.gep(self.fn.args[0], [_c64(OFF_TUPLE_ITEMS)],
                                         source_etype=I8), typ=PTR)
        self.tbase = self.pb.gep(table, [_c64(OFF_BYTES_DATA)], source_etype=I8)
        self.body = self.fn.append_basic_block("body")
        self.b = ir.IRBuilder(self.body)
        self.c = {
            "save": _Callee(self.ptr(("fn", "PyEval_SaveThread")), PTR, []),
            "restore": _Callee(self.ptr(("fn", "PyEval_RestoreThread")), ir.VoidType(), [PTR]),
            "incref": _Callee(self.ptr(("fn", "Py_IncRef")), ir.VoidType(), [PTR]),
            "decref": _Callee(self.ptr(("fn", "Py_DecRef")), ir.VoidType(), [PTR]),
            "clear": _Callee(self.ptr(("fn", "PyErr_Clear")), ir.VoidType(), []),
            "as_int": _Callee(self.ptr(("fn", "PyLong_AsLongLongAndOverflow")), I64, [PTR, PTR]),
            "as_float": _Callee(self.ptr(("fn", "PyFloat_AsDouble")), F64, [PTR]),
            "tuple_new": _Callee(self.ptr(("fn", "PyTuple_New")), PTR, [I64]),
            "tuple_set": _Callee(self.ptr(("fn", "PyTuple_SetItem")), I32, [PTR, I64, PTR]),
            "new_array": _Callee(self.ptr(("fn", "PyArray_NewFromDescr")), PTR,
                                 [PTR, PTR, I32, PTR, PTR, PTR, I32, PTR]),
            "kernel": _Callee(self.ptr(("kernel",)), I32, [PTR, PTR, PTR]),
        }
        self.decline_bb = self.fn.append_basic_block("decline")
        self.values = {}     # shape Var -> i64 value (None: a float scalar, unusable in shapes)

    # ------------------------------------------------------------- helpers
    def ptr(self, sym: tuple):
        """The address ``sym`` names (``_address``) as a value of the code: its table entry."""
        v = self._loaded.get(sym)
        if v is None:
            self.table.append(sym)
            v = self._loaded[sym] = self.pb.load(
                self.pb.gep(self.tbase, [_c64(len(self.table) - 1)], source_etype=PTR), typ=PTR)
        return v

    def field(self, obj, offset: int, ty):
        return self.b.load(self.b.gep(obj, [_c64(offset)], source_etype=I8), typ=ty)

    def item(self, base, index: int, ty):
        return self.b.load(self.b.gep(base, [_c64(index)], source_etype=ty), typ=ty)

    def guard(self, ok) -> None:
        """Continue where ``ok`` (i1) holds; decline otherwise."""
        nxt = self.fn.append_basic_block()
        self.b.cbranch(ok, nxt, self.decline_bb)
        self.b.position_at_end(nxt)

    def checked(self, op, a, b):
        r = getattr(self.b, f"{op}_with_overflow")(a, b)
        self.guard(self.b.not_(self.b.extract_value(r, 1)))
        return self.b.extract_value(r, 0)

    # ------------------------------------------------------------- shape expressions
    def expr(self, e):
        """An i64 value of a shape expression, with Python's semantics (bools are 0/1)."""
        b, t = self.b, type(e)
        if t is n.Var:
            v = self.values.get(e)
            if v is None:
                raise Unsupported(f"shape variable {e.name} is not an integer here")
            return v
        if t is n.Const:
            if type(e.value) not in (int, bool):
                raise Unsupported(f"constant {e.value!r} in a shape")
            if not _INT64_MIN <= int(e.value) < (1 << 63):
                raise Unsupported("constant out of the int64 range")
            return _c64(e.value)
        if t is n.Binary:
            x, y, op = self.expr(e.a), self.expr(e.b), e.op
            if op is n.BinOp.ADD:
                return self.checked("sadd", x, y)
            if op is n.BinOp.SUB:
                return self.checked("ssub", x, y)
            if op is n.BinOp.MUL:
                return self.checked("smul", x, y)
            if op in (n.BinOp.MIN, n.BinOp.MAX):
                return b.select(b.icmp_signed("<" if op is n.BinOp.MIN else ">", x, y), x, y)
            if op in (n.BinOp.AND, n.BinOp.OR, n.BinOp.XOR):
                return {n.BinOp.AND: b.and_, n.BinOp.OR: b.or_, n.BinOp.XOR: b.xor}[op](x, y)
            if op in (n.BinOp.FLOORDIV, n.BinOp.MOD):
                return self.floor_div_mod(x, y, op is n.BinOp.MOD)
            raise Unsupported(f"operator {op.value} in a shape")
        if t is n.Compare:
            return b.zext(b.icmp_signed(e.op.value, self.expr(e.a), self.expr(e.b)), I64)
        if t is n.Select:
            c = b.icmp_signed("!=", self.expr(e.cond), _c64(0))
            return b.select(c, self.expr(e.t), self.expr(e.f))
        if t is n.Cast and (e.dtype.is_int or e.dtype.is_bool):
            x = self.expr(e.a)
            return b.zext(b.icmp_signed("!=", x, _c64(0)), I64) if e.dtype.is_bool else x
        if t is n.Unary and e.op in (n.UnOp.NEG, n.UnOp.ABS):
            x = self.expr(e.a)
            neg = self.checked("ssub", _c64(0), x)
            return neg if e.op is n.UnOp.NEG else b.select(b.icmp_signed("<", x, _c64(0)), neg, x)
        if t is n.Unary and e.op is n.UnOp.NOT:   # bools are 0/1: logical not; ints: bitwise
            return b.xor(self.expr(e.a), _c64(1 if e.dtype.is_bool else -1))
        raise Unsupported(f"{t.__name__} in a shape")

    def floor_div_mod(self, x, y, mod: bool):
        """Python's ``x // y`` / ``x % y``, 0 for y == 0 (dispatch's _fdiv/_fmod)."""
        b = self.b
        self.guard(b.not_(b.and_(b.icmp_signed("==", x, _c64(_INT64_MIN)),
                                 b.icmp_signed("==", y, _c64(-1)))))
        zero = b.icmp_signed("==", y, _c64(0))
        d = b.select(zero, _c64(1), y)          # never divide by zero, even speculatively
        q, r = b.sdiv(x, d), b.srem(x, d)
        # C truncates; Python floors: adjust when the remainder's sign differs from y's
        fix = b.and_(b.icmp_signed("!=", r, _c64(0)), b.icmp_signed("<", b.xor(r, d), _c64(0)))
        res = b.select(fix, b.add(r, d), r) if mod else b.select(fix, b.sub(q, _c64(1)), q)
        return b.select(zero, _c64(0), res)

    # ------------------------------------------------------------- arguments
    def check_array(self, o, spec, writeable=False):
        """Guard that ``o`` is exactly an ndarray of ``spec``; returns its dims pointer."""
        b = self.b
        self.guard(b.icmp_unsigned("==", self.field(o, OFF_TYPE, PTR),
                                   self.ptr(("obj", "ndarray"))))
        self.guard(b.icmp_unsigned("==", self.field(o, OFF_DESCR, PTR), self.ptr(("dtype", fastcall_store.dtype_index(self.plan, spec.dtype)))))
        self.guard(b.icmp_signed("==", self.field(o, OFF_ND, I32), ir.Constant(I32, len(spec.dims))))
        flags = self.field(o, OFF_FLAGS, I32)
        c = b.icmp_signed("!=", b.and_(flags, ir.Constant(I32, NPY_C_CONTIGUOUS)), ir.Constant(I32, 0))
        self.guard(c if spec.contiguous else b.not_(c))
        if writeable:
            self.guard(b.icmp_signed("!=", b.and_(flags, ir.Constant(I32, NPY_WRITEABLE)),
                                     ir.Constant(I32, 0)))
        dims = self.field(o, OFF_DIMS, PTR)
        for d, want in enumerate(spec.dims):
            size = self.item(dims, d, I64)
            self.guard(b.icmp_signed("!=", size, _c64(1)) if want is None
                       else b.icmp_signed("==", size, _c64(want)))
        return dims

    def scalar(self, o, spec):
        """Guard the scalar's exact type; returns its value (i64, or double for floats)."""
        b = self.b
        self.guard(b.icmp_unsigned("==", self.field(o, OFF_TYPE, PTR),
                                   self.ptr(("obj", spec.pytype.__name__))))
        if spec.pytype is bool:
            return b.zext(b.icmp_unsigned("==", o, self.ptr(("obj", "True"))), I64)
        if spec.pytype is float:
            return b.call(self.c["as_float"], [o])
        overflow = b.alloca(I32)
        b.store(ir.Constant(I32, 0), overflow)
        v = b.call(self.c["as_int"], [o, overflow])
        self.guard(b.icmp_signed("==", b.load(overflow, typ=I32), ir.Constant(I32, 0)))
        return v

    # ------------------------------------------------------------- the function
    def build(self) -> ir.Module:
        plan, b, c = self.plan, self.b, self.c
        args = self.fn.args[1]
        nout = len(plan.outputs)
        outs = b.alloca(PTR, size=_c64(nout))   # allocated outputs: released on decline
        for j in range(nout):
            b.store(ir.Constant(PTR, None), b.gep(outs, [_c64(j)], source_etype=PTR))
        # f(args, out): the kernel's argument tuple as it came (of any length) and out=
        self.guard(b.icmp_signed("==", self.fn.args[2], _c64(2)))
        tup = self.item(args, 0, PTR)
        self.guard(b.icmp_unsigned("==", self.field(tup, OFF_TYPE, PTR), self.ptr(("obj", "tuple"))))
        self.guard(b.icmp_signed("==", self.field(tup, OFF_TUPLE_SIZE, I64), _c64(plan.nargs)))
        objs = [self.field(tup, OFF_TUPLE_ITEMS + 8 * i, PTR) for i in range(plan.nargs)]
        if plan.out_mode:
            objs.append(self.item(args, 1, PTR))
        dims, scalars = {}, {}
        for spec in plan.args:
            if hasattr(spec, "pytype"):
                scalars[spec.pos] = self.scalar(objs[spec.pos], spec)
            else:
                dims[spec.pos] = self.check_array(objs[spec.pos], spec)
        for var, src in plan.sources:
            if src[0] == "scalar":
                v = scalars[src[1]]
                self.values[var] = v if v.type == I64 else None
            else:
                self.values[var] = self.item(dims[src[1]], src[2], I64)
        for pos, d, e in plan.checks:
            self.guard(b.icmp_signed("==", self.item(dims[pos], d, I64), self.expr(e)))
        for con in plan.constraints:
            self.guard(b.icmp_signed("==", self.expr(con.lhs), self.expr(con.rhs)))
        shapes = [[self.expr(e) for e in o.shape] for o in plan.outputs]
        out_objs = self.outputs(objs, outs, shapes)
        if plan.out_mode is not None:
            self.disjoint([objs[p] for p in plan.inputs], out_objs)
        bufs = [objs[p] for p in plan.inputs] + out_objs
        slots = self.slots(bufs, scalars)
        data = b.alloca(PTR, size=_c64(max(1, len(bufs))))
        for k, o in enumerate(bufs):
            b.store(self.field(o, OFF_DATA, PTR), b.gep(data, [_c64(k)], source_etype=PTR))
        rt = self.ptr(("runtime",))
        ts = b.call(c["save"], [])
        status = b.call(c["kernel"], [data, slots, rt])
        b.call(c["restore"], [ts])
        self.guard(b.icmp_signed("==", status, ir.Constant(I32, 0)))  # errors: the normal path
        self.ret(objs, out_objs)
        self.decline(outs, nout)
        self.pb.branch(self.body)
        return self.module

    def outputs(self, objs, outs, shapes):
        """The output arrays: the out= ones (checked) or new ones (recorded in ``outs``)."""
        plan, b = self.plan, self.b
        if plan.out_mode is not None:
            given = objs[plan.nargs]
            if plan.out_mode == "tuple":
                tup = given
                self.guard(b.icmp_unsigned("==", self.field(tup, OFF_TYPE, PTR),
                                           self.ptr(("obj", "tuple"))))
                self.guard(b.icmp_signed("==", self.field(tup, OFF_TUPLE_SIZE, I64),
                                         _c64(len(shapes))))
                given = [self.field(tup, OFF_TUPLE_ITEMS + 8 * j, PTR) for j in range(len(shapes))]
            else:
                given = [given]
            for o, spec, shape in zip(given, plan.out_args, shapes):
                dims = self.check_array(o, spec, writeable=True)
                for d, v in enumerate(shape):
                    self.guard(b.icmp_signed("==", self.item(dims, d, I64), v))
            return given
        for shape in shapes:
            for v in shape:
                self.guard(b.icmp_signed(">=", v, _c64(0)))
        ndmax = max([len(s) for s in shapes] + [1])
        sizes = b.alloca(I64, size=_c64(ndmax))
        made = []
        for j, (res, shape) in enumerate(zip(plan.outputs, shapes)):
            for d, v in enumerate(shape):
                b.store(v, b.gep(sizes, [_c64(d)], source_etype=I64))
            descr = self.ptr(("dtype", fastcall_store.dtype_index(self.plan, res.np)))
            b.call(self.c["incref"], [descr])          # PyArray_NewFromDescr steals it
            null = ir.Constant(PTR, None)
            o = b.call(self.c["new_array"], [self.ptr(("obj", "ndarray")), descr,
                                             ir.Constant(I32, len(shape)), sizes, null, null,
                                             ir.Constant(I32, 0), null])
            self.guard(b.icmp_unsigned("!=", o, null))   # (np.empty in the normal path says why)
            b.store(o, b.gep(outs, [_c64(j)], source_etype=PTR))
            made.append(o)
        return made

    def extent(self, o, spec):
        """(lo, hi, empty): the bytes array ``o`` spans, as ``numpy.may_share_memory`` bounds
        them (strides of either sign; contiguous: its size times its item size)."""
        b = self.b
        lo = b.ptrtoint(self.field(o, OFF_DATA, PTR), I64)
        dims, isz = self.field(o, OFF_DIMS, PTR), spec.dtype.itemsize
        strides = None if spec.contiguous else self.field(o, OFF_STRIDES, PTR)
        hi, count, empty = b.add(lo, _c64(isz)), _c64(isz), ir.Constant(I1, 0)
        for d in range(len(spec.dims)):
            size = self.item(dims, d, I64)
            empty = b.or_(empty, b.icmp_signed("==", size, _c64(0)))
            if strides is None:
                count = b.mul(count, size)
                continue
            step = b.mul(b.sub(size, _c64(1)), self.item(strides, d, I64))
            neg = b.icmp_signed("<", step, _c64(0))
            lo = b.add(lo, b.select(neg, step, _c64(0)))
            hi = b.add(hi, b.select(neg, _c64(0), step))
        return lo, (b.add(lo, count) if strides is None else hi), empty

    def disjoint(self, ins, outs) -> None:
        """Decline where an out= array's bytes meet an input's or another out= array's (numpy's
        rule then computes into fresh arrays and copies: the normal path)."""
        b, plan = self.b, self.plan
        specs = {a.pos: a for a in plan.args if type(a) is ArrayArg}
        spans = [self.extent(o, specs[p]) for o, p in zip(ins, plan.inputs)]
        mine = [self.extent(o, spec) for o, spec in zip(outs, plan.out_args)]
        for k, (lo, hi, empty) in enumerate(mine):
            for lo2, hi2, empty2 in spans + mine[k + 1:]:
                meet = b.and_(b.icmp_unsigned("<", lo2, hi), b.icmp_unsigned("<", lo, hi2))
                self.guard(b.not_(b.and_(meet, b.not_(b.or_(empty, empty2)))))

    def slots(self, bufs, scalars):
        """The kernel's 8-byte scalar slots (the plan's ``slots``)."""
        b, func, plan = self.b, self.compiled.func, self.plan
        if plan.slots is None or len(func.buffers) != len(bufs) \
                or len(func.inputs) != len(plan.inputs):
            raise Unsupported("the kernel's buffers or scalars do not match the plan")
        pytypes = {a.pos: a.pytype for a in plan.args if type(a) is ScalarArg}
        slots = b.alloca(I64, size=_c64(max(1, len(plan.slots))))
        for j, sl in enumerate(plan.slots):
            at = b.gep(slots, [_c64(j)], source_etype=I64)
            if sl.kind == SCALAR:
                pos = plan.scalars[sl.index]
                val = scalars[pos]
                if sl.dtype is not {int: dt.int64, float: dt.float64, bool: dt.bool_}[pytypes[pos]]:
                    raise Unsupported(f"scalar slot of dtype {sl.dtype}")
                # the bytes struct.pack("<q" / "<d" / "<?7x") gives (little-endian hosts only,
                # like the Python launcher's formats): bools are 0/1 in the low byte
                b.store(b.bitcast(val, I64) if val.type == F64 else val, at)
                continue
            if sl.dtype is not dt.int64:
                raise Unsupported(f"{sl.kind} slot of dtype {sl.dtype}")
            if sl.kind == SHAPE:
                b.store(self.item(self.field(bufs[sl.index], OFF_DIMS, PTR), sl.dim, I64), at)
                continue
            isz = _c64(sl.itemsize)
            s = self.item(self.field(bufs[sl.index], OFF_STRIDES, PTR), sl.dim, I64)
            self.guard(b.icmp_signed("==", b.srem(s, isz), _c64(0)))  # else: the error path
            b.store(b.sdiv(s, isz), at)
        return slots

    def ret(self, objs, out_objs):
        b, plan = self.b, self.plan
        if plan.out_mode is not None:
            res = objs[plan.nargs]
            b.call(self.c["incref"], [res])
            b.ret(res)
            return
        if len(out_objs) == 1:
            b.ret(out_objs[0])      # the new reference passes to the caller
            return
        tup = b.call(self.c["tuple_new"], [_c64(len(out_objs))])
        self.guard(b.icmp_unsigned("!=", tup, ir.Constant(PTR, None)))  # (no error kept: see decline)
        for j, o in enumerate(out_objs):
            b.call(self.c["tuple_set"], [tup, _c64(j), o])    # steals o
        b.ret(tup)

    def decline(self, outs, nout):
        b = self.b
        b.position_at_end(self.decline_bb)
        for j in range(nout):   # Py_DecRef(NULL) is a no-op
            b.call(self.c["decref"], [b.load(b.gep(outs, [_c64(j)], source_etype=PTR), typ=PTR)])
        b.call(self.c["clear"], [])
        ni = self.ptr(("obj", "NotImplemented"))
        b.call(self.c["incref"], [ni])
        b.ret(ni)
