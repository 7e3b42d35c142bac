"""How far an ``unroll``ed loop is unrolled, and which vectorized loops LLVM is asked to vectorize.

The cpu backend unrolls in its own code generation (stmt.py copies the body
once per iteration) instead of asking LLVM with ``llvm.loop.unroll``
metadata, which LLVM may refuse (it then prints "loop not unrolled" on the
user's stderr) and which, on a loop around loop nests, made LLVM optimise
every copy of the nest: compile time grew super-linearly with the extent.

What ``unroll`` means here: the body is copied once per iteration when the
extent is a constant and the copies stay within ``UNROLL_BUDGET`` code units
(a statement is one unit; a loop that stays a loop costs ``LOOP_UNITS``, since
LLVM vectorises and checks each copy on its own).  Otherwise the loop is
unrolled by the largest factor that fits (``UNROLL_FACTOR`` at most when the
extent is not a constant), with a remainder loop, and a constant-extent loop
that is unrolled less than asked gets a ``ScheduleWarning`` saying so.

A vectorized loop that vector.py does not emit as vector code is left to
LLVM's loop vectorizer when it is innermost once unrolling is done; one that
still holds loops cannot become a SIMD loop, and kdsl warns.
"""
from __future__ import annotations

from kdsl.ir import nodes as n

#: code units the copies of one unrolled loop may add up to
UNROLL_BUDGET = 1024
#: code units of a loop that stays a loop (LLVM optimises each copy of a nest separately)
LOOP_UNITS = 128
#: unroll factor of a loop whose extent is not a constant
UNROLL_FACTOR = 4
#: a vectorized loop of constant extent up to this is straight-line vector code (vector.py)
_VECTOR_CODE = 64


def const_extent(s: n.For) -> int | None:
    return int(s.extent.value) if isinstance(s.extent, n.Const) else None


class UnrollPlanner:
    """Decisions for the loops of one kernel (memoised per statement node)."""

    def __init__(self):
        self._units: dict = {}

    def factor(self, s: n.For) -> tuple[int, bool]:
        """(copies of the body per iteration of the emitted loop, whether that is all of them)."""
        body = self.units(s.body)
        ext = const_extent(s)
        if ext is not None:
            if ext <= 0 or ext * body <= UNROLL_BUDGET:
                return max(ext, 0), True
            return max(1, min(ext, UNROLL_BUDGET // body)), False
        return max(1, min(UNROLL_FACTOR, UNROLL_BUDGET // body)), False

    def units(self, s: n.Stmt) -> int:
        """Code units ``s`` becomes (see the module docstring)."""
        got = self._units.get(id(s))
        if got is None:
            got = self._units[id(s)] = self._count(s)
        return got

    def _count(self, s) -> int:
        t = type(s)
        if t is n.For:
            body = self.units(s.body)
            ext = const_extent(s)
            if s.kind is n.ForKind.UNROLLED:
                f, full = self.factor(s)
                return max(1, f * body) if full else f * body + body + 2 * LOOP_UNITS
            if s.kind is n.ForKind.VECTORIZED and ext is not None and ext <= _VECTOR_CODE:
                return body + 1
            return body + LOOP_UNITS
        if t is n.Seq:
            return sum(self.units(x) for x in s.stmts)
        if t is n.IfThenElse:
            return 1 + self.units(s.then) + (self.units(s.otherwise) if s.otherwise is not None else 0)
        if t in (n.Allocate, n.LetStmt):
            return 1 + self.units(s.body)
        return 1

    def stays_loop(self, s: n.Stmt) -> bool:
        """Does ``s`` contain a loop that is still a loop after unrolling?"""
        t = type(s)
        if t is n.For:
            if s.kind is n.ForKind.UNROLLED and self.factor(s)[1]:
                return self.stays_loop(s.body)
            return True
        if t is n.Seq:
            return any(self.stays_loop(x) for x in s.stmts)
        if t is n.IfThenElse:
            return self.stays_loop(s.then) or (s.otherwise is not None and self.stays_loop(s.otherwise))
        if t in (n.Allocate, n.LetStmt):
            return self.stays_loop(s.body)
        return False


def capped_message(kernel: str, s: n.For, factor: int) -> str:
    """The warning for a constant-extent loop unrolled ``factor`` times instead of fully."""
    what = "holds loops" if UnrollPlanner().stays_loop(s.body) else "is large"
    done = "not unrolled" if factor <= 1 else f"unrolled {factor} times per iteration"
    return (f"kdsl: kernel {kernel!r}: the loop over {s.var.name} (extent {const_extent(s)}) is "
            f"{done} instead of fully: its body {what}, and copying it {const_extent(s)} times "
            f"would exceed kdsl's code-size cap for unrolling ({UNROLL_BUDGET} statements, a "
            f"loop counting {LOOP_UNITS}); unroll an inner loop or tile the axis to unroll less")


def not_innermost_message(kernel: str, s: n.For) -> str:
    return (f"kdsl: kernel {kernel!r}: the vectorized loop over {s.var.name} contains other loops, "
            "so it runs as a plain loop (only innermost loops become SIMD loops); reorder it "
            "innermost or vectorize an inner axis")
