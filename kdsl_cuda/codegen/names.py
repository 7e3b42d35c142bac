"""Unique C identifiers for Vars and Buffers (compared by identity; names are only hints)."""
from __future__ import annotations

import re

_RESERVED = frozenset("""auto bool break case char const continue default do double else enum extern
float for goto if int long register return short signed sizeof static struct switch typedef union
unsigned void volatile while class new delete template this true false inline namespace operator
private public protected virtual friend typename using min max dim3 threadIdx blockIdx blockDim
gridDim warpSize""".split()) | frozenset(
    # the math functions the generated code calls (a stage is named after its op: "exp")
    f + suffix for f in """exp log sqrt sin cos tanh erf floor ceil fabs pow fmod copysign
    rsqrt exp2 log2 log10 abs tan sinh cosh asin acos atan asinh acosh atanh log1p expm1 cbrt
    rint trunc atan2 hypot""".split() for suffix in ("", "f"))


class Namer:
    """Hands out C identifiers: the hint sanitised, suffixed on collision, stable per object."""

    def __init__(self, taken=()):
        self._names: dict[int, str] = {}
        self._keep: list = []           # keeps named objects alive (ids stay unique)
        self._used = set(taken)

    def __call__(self, obj, hint: str, internal: bool = False) -> str:
        key = id(obj)
        got = self._names.get(key)
        if got is not None:
            return got
        base = re.sub(r"[^0-9A-Za-z_]", "_", hint) or "v"
        if base[0].isdigit() or base in _RESERVED or base.startswith("__") or (
                base.startswith("kd_") and not internal):
            base = "v_" + base
        name, k = base, 1
        while name in self._used:
            name, k = f"{base}_{k}", k + 1
        self._used.add(name)
        self._names[key] = name
        self._keep.append(obj)
        return name

    def alias(self, obj, name: str):
        """Print ``obj`` as ``name`` (an identifier already handed out) until ``restore(obj,
        <what this returned>)``."""
        old = self._names.get(id(obj))
        self._names[id(obj)] = name
        self._keep.append(obj)
        return old

    def restore(self, obj, old) -> None:
        """Undo ``alias``: ``obj`` gets its own name (``old``) back, or none yet."""
        if old is None:
            del self._names[id(obj)]
        else:
            self._names[id(obj)] = old

    def fresh(self, hint: str) -> str:
        """A new identifier not tied to any object."""
        return self(object(), hint, internal=True)
