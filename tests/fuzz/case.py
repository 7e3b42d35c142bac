"""A fuzz case: a generated kernel, its calls (inputs), and how to render it for a backend.

``generate(seed, index)`` is deterministic (its random streams are seeded by
``(seed, index, stream)``), so a case is named by its seed and index alone and
any process can rebuild it.  ``render(case, schedule, target)`` is the whole
reproducer module; ``expected(case, call)`` the oracle's answer.
"""
from __future__ import annotations

import linecache
import zlib
from dataclasses import dataclass, field

import numpy as np

from . import families, gen_input
from .evaluate import Evaluator
from .gen_kernel import Builder
from .oracle import OracleRaise


@dataclass
class Config:
    """Generation knobs (the defaults keep the interpreter's cases small)."""

    max_elems: int = 400
    p_schedule: float = 0.6          # a schedule at all (hints or explicit)
    p_explicit: float = 0.55         # of those: explicit primitives rather than hints
    families: dict = field(default_factory=lambda: {k: w for k, (_, w) in families.FAMILIES.items()})
    skip_families: tuple = ()        # generated as usual, then skipped (a slice's time budget)


@dataclass
class Call:
    args: list
    binding: dict
    layouts: list


@dataclass
class Case:
    seed: int
    index: int
    family: str
    builder: Builder
    outputs: list
    decorator: str
    sched_kind: str
    calls: list
    features: set

    @property
    def name(self) -> str:
        return f"{self.seed}:{self.index}"

    @property
    def expect_error(self) -> bool:
        return self.builder.expect_error


def rng_for(seed: int, index: int, stream: int, extra: str = "") -> np.random.Generator:
    return np.random.default_rng([seed, index, stream, zlib.crc32(extra.encode())])


def generate(seed: int, index: int, cfg: Config | None = None) -> Case:
    cfg = cfg or Config()
    rng = rng_for(seed, index, 0)
    names = list(cfg.families)
    w = np.asarray([cfg.families[k] for k in names], np.float64)
    family = names[int(rng.choice(len(names), p=w / w.sum()))]
    b = Builder(rng)
    outs = families.FAMILIES[family][0](b)
    consts = [p.name for p in b.params if p.kind == "scalar" and p.const]
    if consts:
        deco = f"@kd.kernel(constants={tuple(consts)!r}" + (", specialize=True)" if b.specialize else ")")
    elif b.specialize or rng.random() < 0.08:
        deco = "@kd.kernel(specialize=True)"
        b.features.add("specialize")
    else:
        deco = "@kd.kernel"
    r = rng.random()
    sched_kind = "none" if r >= cfg.p_schedule else (
        "explicit" if rng.random() < cfg.p_explicit else "hints")
    calls = _calls(b, rng_for(seed, index, 1), cfg, 1 + int(rng.choice(3, p=[0.5, 0.35, 0.15])))
    return Case(seed, index, family, b, outs, deco, sched_kind, calls, set(b.features))


def _calls(b: Builder, rng, cfg: Config, ncalls: int) -> list:
    arrays = [p for p in b.params if p.kind == "array"]

    def shapes_of(binding):
        return [tuple(d.eval(binding) for d in p.dims) for p in arrays]

    calls, const_vals = [], {}
    for c in range(ncalls):
        binding = gen_input.bind_sizes(rng, b.sym_min, shapes_of, cfg.max_elems,
                                       big=cfg.max_elems > 4096)
        args, layouts = [], []
        for p in b.params:
            if p.kind == "scalar":
                if p.const and p.name in const_vals and rng.random() < 0.7:
                    args.append(const_vals[p.name])
                    continue
                v = _scalar(rng, p.scalar_kind)
                const_vals.setdefault(p.name, v)
                args.append(v)
                continue
            shape = tuple(d.eval(binding) for d in p.dims)
            vals = gen_input.values(rng, shape, p.dtype)
            arr, lay = gen_input.layout(rng, vals)
            args.append(arr)
            layouts.append(lay)
        calls.append(Call(args, binding, layouts))
    return calls


def _scalar(rng, kind):
    if kind == "int":
        return int(rng.integers(0, 10)) if rng.random() < 0.9 else int(rng.integers(-5, 0))
    if kind == "float":
        return float(rng.integers(-32, 33) / 8.0) if rng.random() < 0.7 else float(rng.uniform(-4, 4))
    return bool(rng.random() < 0.5)


def max_elems(case: Case) -> int:
    m = 0
    for call in case.calls:
        for a in call.args:
            if isinstance(a, np.ndarray):
                m = max(m, a.size)
    return m


# ------------------------------------------------------------------ rendering
def render(case: Case, sched=None, target: str = "numpy") -> str:
    """The reproducer module for ``target``: kernel, decorators, schedule function."""
    hint_deco, sched_fn = ("", "") if sched is None else sched.render(target)
    src = case.builder.source(case.outputs, decorators=[case.decorator, hint_deco])
    if sched_fn:
        src += "\n\n" + sched_fn + f"\n\nkern.schedule({target!r})(schedule)\n"
    return src


def load(src: str, filename: str) -> dict:
    """Execute a rendered module (its lines are registered so errors can quote them)."""
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"__name__": "fuzzcase"}
    exec(compile(src, filename, "exec"), ns)
    return ns


def expected(case: Case, call: Call):
    """The oracle's outputs for ``call`` (a list of OVal) or the OracleRaise numpy would give."""
    inputs, sargs = {}, {}
    for k, (p, a) in enumerate(zip(case.builder.params, call.args)):
        if p.kind == "array":
            inputs[k] = np.array(a)
        else:
            sargs[k] = a
    ev = Evaluator(inputs, sargs, call.binding, case.builder.reducers)
    try:
        return [ev.value(o.node) for o in case.outputs]
    except OracleRaise as e:
        return e
