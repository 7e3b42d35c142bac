"""How far an ``unroll``ed loop is unrolled, and by whom.

LLVM's ``llvm.loop.unroll`` metadata is a request LLVM may refuse (it then
prints "loop not unrolled" on the user's stderr), and on a loop around loop
nests it made LLVM optimise every copy of the nest: compile time grew
super-linearly with the extent.  So the cpu backend decides itself:

* a constant-extent loop whose copies stay within the code-size cap below and
  within ``LLVM_FULL_NODES`` IR nodes (far below LLVM's pragma threshold of
  16384 instructions) is fully unrolled by LLVM (``llvm.loop.unroll.full``,
  which does not fail there); its unroller runs after the CFG cleanups, which
  keeps GVN from turning the copies' loads into loop-carried vector shuffles
  (a stencil's window ran 1.6x slower when kdsl copied it);
* any other loop is unrolled by stmt.py itself, by copying the body: once per
  iteration when the extent is a constant and the copies stay within
  ``UNROLL_BUDGET`` code units (a statement is one unit; a loop that stays a
  loop costs ``LOOP_UNITS``, since LLVM vectorises and checks each copy on its
  own), else by the largest factor that fits (``UNROLL_FACTOR`` at most when
  the extent is not a constant) with a remainder loop.  A constant-extent loop
  unrolled less than asked gets a ``ScheduleWarning`` saying so.

A vectorized loop that vector.py does not emit as vector code is left to
LLVM's loop vectorizer when it is innermost once unrolling is done; one that
still holds loops cannot become a SIMD loop, and kdsl warns.

A serial innermost loop that reads or writes memory at a stride known only at
run time (``A[k, j]`` over ``k`` of a symbolic-shape ``A``: an rfactor's final
reduction over its partials) or at no stride (a fused axis: ``A[f // m, f % m]``) is kept from LLVM's loop vectorizer
(``strided_at_run_time``): x86 has no gather for 8- and 16-bit elements, so
LLVM emulates one with a scalar load and an insert per lane, VF x interleave
(128 for uint8) per access and per copy of the loop; unrolled around such a
loop, that made LLVM's code generation take minutes (fuzz finding F13), for
loops that hardly run faster vectorized.
"""
from __future__ import annotations

from dataclasses import dataclass

from kdsl.ir import nodes as n
from kdsl.ir.simplify import linear
from kdsl.ir.visitor import collect, free_vars

from .vector import VectorEmitter

#: code units the copies of one unrolled loop may add up to
UNROLL_BUDGET = 1024
#: code units of a loop that stays a loop (LLVM optimises each copy of a nest separately)
LOOP_UNITS = 128
#: unroll factor of a loop whose extent is not a constant
UNROLL_FACTOR = 4
#: IR nodes of all copies of a loop-free body that LLVM's full unroller may be given
LLVM_FULL_NODES = 2048


def const_extent(s: n.For) -> int | None:
    return int(s.extent.value) if isinstance(s.extent, n.Const) else None


@dataclass(frozen=True)
class Unroll:
    """How an UNROLLED loop is emitted: ``how`` is "llvm" (a loop with unroll.full metadata),
    "copies" (``factor`` copies of the body, no loop) or "partial" (a loop over groups of
    ``factor`` copies, then a remainder loop; factor 1: a plain loop)."""

    how: str
    factor: int


class UnrollPlanner:
    """Decisions for the loops of one kernel (memoised per statement node)."""

    def __init__(self):
        self._units: dict = {}
        self._nodes: dict = {}
        self._decided: dict = {}
        self._vector: dict = {}

    def decide(self, s: n.For) -> Unroll:
        got = self._decided.get(id(s))
        if got is None:
            got = self._decided[id(s)] = self._decide(s)
        return got

    def _decide(self, s: n.For) -> Unroll:
        body = self.units(s.body)
        ext = const_extent(s)
        if ext is None:
            return Unroll("partial", max(1, min(UNROLL_FACTOR, UNROLL_BUDGET // body)))
        if ext <= 0:
            return Unroll("copies", 0)
        if ext * body <= UNROLL_BUDGET:
            if ext * self.nodes(s.body) <= LLVM_FULL_NODES:
                return Unroll("llvm", ext)
            return Unroll("copies", ext)
        return Unroll("partial", max(1, min(ext, UNROLL_BUDGET // body)))

    def vector_code(self, s: n.For) -> bool:
        """Is the vectorized loop ``s`` emitted as straight-line vector code (vector.py)?"""
        got = self._vector.get(id(s))
        if got is None:
            got = self._vector[id(s)] = VectorEmitter(None, s).qualifies()
        return got

    def nodes(self, s) -> int:
        got = self._nodes.get(id(s))
        if got is None:
            got = self._nodes[id(s)] = len(collect(s, lambda x: True))
        return got

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
            if s.kind is n.ForKind.UNROLLED:
                d = self.decide(s)
                if d.how == "partial":
                    return d.factor * body + body + 2 * LOOP_UNITS
                return max(1, d.factor * body)
            if s.kind is n.ForKind.VECTORIZED and self.vector_code(s):
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
        """Does ``s`` contain a loop that is still a loop after unrolling (or vector code)?"""
        t = type(s)
        if t is n.For:
            if s.kind is n.ForKind.UNROLLED and self.decide(s).how in ("llvm", "copies"):
                return self.stays_loop(s.body)
            if s.kind is n.ForKind.VECTORIZED and self.vector_code(s):
                return False
            return True
        if t is n.Seq:
            return any(self.stays_loop(x) for x in s.stmts)
        if t is n.IfThenElse:
            return self.stays_loop(s.then) or (s.otherwise is not None and self.stays_loop(s.otherwise))
        if t in (n.Allocate, n.LetStmt):
            return self.stays_loop(s.body)
        return False


def strided_at_run_time(s: n.For) -> bool:
    """Does loop ``s`` access some buffer at a stride in ``s.var`` that is not a constant?

    That is: ``s.var`` appears with a nonzero coefficient in an index dimension
    that has a dimension of symbolic extent after it (compact row-major buffers),
    or non-linearly (``f // m``, ``f % m`` of a fused axis: no stride at all).
    """
    v = s.var
    for node in collect(s.body, lambda x: type(x) in (n.Load, n.Store)):
        shape = node.buffer.shape
        for d, idx in enumerate(node.indices):
            if v not in free_vars(idx):
                continue
            lin = linear(idx)
            if any(t is not v and v in free_vars(t) for t in lin.terms):
                return True
            if lin.terms.get(v, 0) and not all(isinstance(e, n.Const) for e in shape[d + 1:]):
                return True
    return False


def capped_message(kernel: str, s: n.For, factor: int) -> str:
    """The warning for a constant-extent loop unrolled ``factor`` times instead of fully."""
    what = "holds loops" if UnrollPlanner().stays_loop(s.body) else "is large"
    factor = max(factor, 1)
    done = "not unrolled" if factor <= 1 else f"unrolled {factor} times per iteration"
    return (f"kdsl: kernel {kernel!r}: the loop over {s.var.name} (extent {const_extent(s)}) is "
            f"{done} instead of fully: its body {what}, and copying it {const_extent(s)} times "
            f"would exceed kdsl's code-size cap for unrolling ({UNROLL_BUDGET} statements, a "
            f"loop counting {LOOP_UNITS}); unroll an inner loop or tile the axis to unroll less")


def not_innermost_message(kernel: str, s: n.For) -> str:
    return (f"kdsl: kernel {kernel!r}: the vectorized loop over {s.var.name} contains other loops, "
            "so it runs as a plain loop (only innermost loops become SIMD loops); reorder it "
            "innermost or vectorize an inner axis")
