"""Faster ``__init__``, ``__eq__`` and ``__hash__`` for the expression nodes built most often.

Lowering builds and compares index expressions by the hundred thousand (the simplifier and the
interval analysis rebuild their answers node by node).  The methods ``@dataclass`` writes for a
frozen class set each field through ``object.__setattr__`` and compare and hash tuples whose
items are ``DType``s and enum members with Python-level ``__eq__``/``__hash__``; the ones here
write the instance dict directly and compare those items by identity (both are singletons:
``DType``s are interned and compare to each other by identity, enum members are unique), with
the same meaning: the same fields and defaults (checked against the dataclass's fields when
installed), the same ``__post_init__`` checks, equality field by field (an item identical or
equal, as tuple comparison does) and a hash consistent with it.  Hash values differ from the
generated ones (they hash ``id``s of the singletons); like any hash of a node they are valid in
one process only.

``install`` is called once by ``kdsl.ir.nodes`` with its classes (this module imports none).
"""
from __future__ import annotations

import dataclasses

_MISSING = dataclasses.MISSING


def _binary(cls, hash_attr, default_op):
    def __init__(self, dtype, op=default_op, a=None, b=None):
        d = self.__dict__
        d["dtype"] = dtype
        d["op"] = op
        d["a"] = a
        d["b"] = b

    def __eq__(self, other):
        if self is other:
            return True
        if other.__class__ is not cls:
            return NotImplemented
        s, o = self.__dict__, other.__dict__
        x, y = s["dtype"], o["dtype"]
        if x is not y and not x == y:
            return False
        if s["op"] is not o["op"]:
            return False
        x, y = s["a"], o["a"]
        if x is not y and not x == y:
            return False
        x, y = s["b"], o["b"]
        return x is y or x == y

    def __hash__(self):
        d = self.__dict__
        h = d.get(hash_attr)
        if h is None:
            h = d[hash_attr] = hash((id(d["dtype"]), id(d["op"]), d["a"], d["b"]))
        return h
    return ("dtype", "op", "a", "b"), __init__, __eq__, __hash__


def _unary(cls, hash_attr, default_op):
    def __init__(self, dtype, op=default_op, a=None):
        d = self.__dict__
        d["dtype"] = dtype
        d["op"] = op
        d["a"] = a

    def __eq__(self, other):
        if self is other:
            return True
        if other.__class__ is not cls:
            return NotImplemented
        s, o = self.__dict__, other.__dict__
        x, y = s["dtype"], o["dtype"]
        if x is not y and not x == y:
            return False
        if s["op"] is not o["op"]:
            return False
        x, y = s["a"], o["a"]
        return x is y or x == y

    def __hash__(self):
        d = self.__dict__
        h = d.get(hash_attr)
        if h is None:
            h = d[hash_attr] = hash((id(d["dtype"]), id(d["op"]), d["a"]))
        return h
    return ("dtype", "op", "a"), __init__, __eq__, __hash__


def _cast(cls, hash_attr):
    def __init__(self, dtype, a=None):
        d = self.__dict__
        d["dtype"] = dtype
        d["a"] = a

    def __eq__(self, other):
        if self is other:
            return True
        if other.__class__ is not cls:
            return NotImplemented
        s, o = self.__dict__, other.__dict__
        x, y = s["dtype"], o["dtype"]
        if x is not y and not x == y:
            return False
        x, y = s["a"], o["a"]
        return x is y or x == y

    def __hash__(self):
        d = self.__dict__
        h = d.get(hash_attr)
        if h is None:
            h = d[hash_attr] = hash((id(d["dtype"]), d["a"]))
        return h
    return ("dtype", "a"), __init__, __eq__, __hash__


def _const(cls, hash_attr):
    check = cls.__post_init__

    def __init__(self, dtype, value=0):
        d = self.__dict__
        d["dtype"] = dtype
        d["value"] = value
        if not (value.__class__ is int or value.__class__ is float or value.__class__ is bool):
            check(self)         # (subclasses of int/float pass it too; anything else raises)

    def __eq__(self, other):
        if self is other:
            return True
        if other.__class__ is not cls:
            return NotImplemented
        s, o = self.__dict__, other.__dict__
        x, y = s["dtype"], o["dtype"]
        if x is not y and not x == y:
            return False
        x, y = s["value"], o["value"]
        return x is y or x == y

    def __hash__(self):
        d = self.__dict__
        h = d.get(hash_attr)
        if h is None:
            h = d[hash_attr] = hash((id(d["dtype"]), d["value"]))
        return h
    return ("dtype", "value"), __init__, __eq__, __hash__


def _select(cls, hash_attr):
    def __init__(self, dtype, cond=None, t=None, f=None):
        d = self.__dict__
        d["dtype"] = dtype
        d["cond"] = cond
        d["t"] = t
        d["f"] = f

    def __eq__(self, other):
        if self is other:
            return True
        if other.__class__ is not cls:
            return NotImplemented
        s, o = self.__dict__, other.__dict__
        for k in ("dtype", "cond", "t", "f"):
            x, y = s[k], o[k]
            if x is not y and not x == y:
                return False
        return True

    def __hash__(self):
        d = self.__dict__
        h = d.get(hash_attr)
        if h is None:
            h = d[hash_attr] = hash((id(d["dtype"]), d["cond"], d["t"], d["f"]))
        return h
    return ("dtype", "cond", "t", "f"), __init__, __eq__, __hash__


def _check(cls, names, init):
    """The hand-written methods assume these fields, in this order, with these defaults."""
    fields = dataclasses.fields(cls)
    if tuple(f.name for f in fields) != names:
        raise TypeError(f"kdsl.ir.fast_nodes: {cls.__name__} has fields "
                        f"{[f.name for f in fields]}, not {list(names)}")
    defaults = init.__defaults__ or ()
    want = tuple(f.default for f in fields[len(fields) - len(defaults):])
    if any(f.default_factory is not _MISSING or not f.compare or f.hash not in (None, True)
           for f in fields) or len(defaults) != sum(f.default is not _MISSING for f in fields) \
            or any(a is not b for a, b in zip(defaults, want)):
        raise TypeError(f"kdsl.ir.fast_nodes: {cls.__name__}'s fields changed")


def install(hash_attr, binary, compare, unary, cast, const, select) -> None:
    """Give these node classes the methods above (after ``@dataclass`` made them)."""
    for cls, made in ((binary, _binary(binary, hash_attr, binary.op)),
                      (compare, _binary(compare, hash_attr, compare.op)),
                      (unary, _unary(unary, hash_attr, unary.op)),
                      (cast, _cast(cast, hash_attr)),
                      (const, _const(const, hash_attr)),
                      (select, _select(select, hash_attr))):
        names, init, eq, hsh = made
        _check(cls, names, init)
        for name, fn in (("__init__", init), ("__eq__", eq), ("__hash__", hsh)):
            fn.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, fn)


__all__ = ["install"]
