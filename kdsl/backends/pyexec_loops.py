"""``CarryLoop`` (a ``kd.fori_loop`` inside one kernel) for the loop-IR interpreter (pyexec).

The generated Python runs the steps in order; the carries ping-pong between the result
array and one temporary per carry exactly as the cpu code does
(kdsl_cpu/codegen/carry_loop.py): step ``s`` of ``E`` writes the result when ``E - 1 - s``
is even, else the temporary, and reads what the step before wrote (the initial carry
first).  Zero or negative counts copy the initial carries into the results.  A carry
updated in place (``nxt is cur``) lives in its result, a copy of its init.
"""
from __future__ import annotations

from ..ir import nodes as n


def carry_loop_handler(c) -> dict:
    """The statement handler of ``CarryLoop`` for pyexec's generator ``c``."""

    def emit(s: n.CarryLoop):
        lo, ext = c.tmp("lo"), c.tmp("ext")
        c.pre.append(f"{lo} = {c.expr(s.min)}")
        c.pre.append(f"{ext} = {c.expr(s.extent)}")
        c.flush()
        inits = [c.bufs[b][0] for b in s.inits]
        results = [c.bufs[b][0] for b in s.results]
        temps = []
        for b, x, res, init in zip(s.cur, s.nxt, results, inits):
            if b is x:        # updated in place: the result, from a copy of the init
                temps.append(None)
                c.out.line(f"{res}[...] = {init}  # {b.name}: updated in place")
                continue
            t = c.tmp("carry")
            temps.append(t)
            c.out.line(f"{t} = _alloc({res}.shape, {res}.dtype, {b.name!r}) if {ext} > 1 "
                       f"else None")
        step = c.tmp("step")
        c.out.line(f"for {step} in range({ext}):  # kd.fori_loop's steps, in order")
        c.out.indent += 1
        c.out.loops += 1
        v = c.bind(s.var)
        c.out.line(f"{v} = np.int64({lo} + {step})")
        for cur, nxt, init, res, t in zip(s.cur, s.nxt, inits, results, temps):
            if t is None:
                cn = c.name(cur, cur.name)
                c.out.line(f"{cn} = {res}")
                c.bufs[cur] = (cn, c._shape_names(cn, len(cur.shape)))
                continue
            cn, xn = c.name(cur, cur.name), c.name(nxt, nxt.name)
            c.out.line(f"{xn} = {res} if ({ext} - 1 - {step}) % 2 == 0 else {t}")
            c.out.line(f"{cn} = {init} if {step} == 0 else ({res} if ({ext} - {step}) % 2 == 0 "
                       f"else {t})")
            c.bufs[cur] = (cn, c._shape_names(cn, len(cur.shape)))
            c.bufs[nxt] = (xn, c._shape_names(xn, len(nxt.shape)))
        c.out.indent -= 1
        c.block(s.body)
        c.out.loops -= 1
        del c.scope[s.var]
        for b in set(s.cur + s.nxt):
            del c.bufs[b]
        c.out.line(f"if {ext} <= 0:")
        for init, res, t in zip(inits, results, temps):
            if t is not None:
                c.out.line(f"    {res}[...] = {init}")
        c.out.line("    pass")

    return {n.CarryLoop: emit}
