"""The backend contract as data: ``BackendSpec``, the fast-launch capability, the checks.

A backend is an object with a ``spec`` (a ``BackendSpec``: what the core needs to know about
it, as typed data) and six methods (``schedule``, ``lower``, ``compile``, ``source``,
``accepts``, ``empty``: kdsl/backends/protocol.py).  ``compile`` returns a compiled object:
a callable ``(inputs, outputs, scalars, stream=None)`` with a ``fast`` member, a
``FastLaunch`` or None (no fast launcher).  Nothing else is looked up on a backend or on
what it returns: every optional capability is a typed field that is None when absent.

``check_backend`` and ``check_compiled`` are where the contract is enforced (the registry
calls the first when it loads a backend, the kernel the second after each compile); a
backend that breaks it raises ``BackendUnavailable`` naming what is missing.
``kdsl.backends.base.BackendBase`` gives the usual defaults (host arrays, generic hints, the
core pass table of the target).  docs/backends.md is the guide for writing one.  (This module
imports nothing of the passes or the GPU layer: sequential backends import it.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple

from ..errors import BackendUnavailable

#: the version of this contract; a spec states the one it was written for (``BackendSpec.contract``)
CONTRACT = 1
#: the contract versions this kdsl runs
SUPPORTED_CONTRACTS = frozenset({1})
#: the device kinds a backend may run on: host memory (numpy arrays) or CUDA device memory
DEVICES = frozenset({"host", "cuda"})
#: the methods every backend has (protocol.Backend)
METHODS = ("schedule", "lower", "compile", "source", "accepts", "empty")

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_MISSING = object()


@dataclass(frozen=True, eq=False)     # compared and hashed by identity (options is a mapping)
class BackendSpec:
    """What the core knows about a backend, as data (``backend.spec``; read-only).

    - ``name``: the backend's own name (compile logs, dumps, the pass table of ``lower``);
      the registry name a user calls it by may differ (``register_backend("cpu1", ...)``).
    - ``device``: "host" (numpy arrays; torch/JAX host arrays are read as numpy for it) or
      "cuda" (device arrays, passed as they are).
    - ``target``: the target whose schedules (``@kernel.schedule(target)``) apply, when it
      runs another target's schedules (``interp-cuda``: "cuda"); None: ``name``.
    - ``size_classes``: default schedules choose by problem size, so a call's size class
      (``kdsl.runtime.signature.size_classes``) is part of its specialisation key.
    - ``pipeline``: a zero-argument function returning the pass table ``lower`` runs
      (a ``kdsl.passes.pipeline.Pipeline``); None: the core table of the target
      (``kdsl.gpu.pipeline.for_target``).  Used by ``kdsl.backends.base.BackendBase.lower``.
    - ``fori_loops``: ``kd.fori_loop`` runs inside one kernel of the backend (its ``lower``
      applies kdsl.passes.fori_loop: cpu, interp); False: a host loop of launches.
    - ``options``: passed to ``compile`` in every ``CompileRequest.options`` (read-only).
    - ``result_wrapper``: ``f(type of the first array argument)`` -> a function applied to
      each allocated result, or None (the cuda backend: JAX arrays); None: results as allocated.
    - ``version``: the backend's version; put it into any disk-cache key the backend makes
      (``kdsl.runtime.fingerprint.request_key(request, spec.name, spec.version, ...)``).
    - ``contract``: the version of this contract it was written for (``CONTRACT``).
    - ``tuning_space``: ``f(sched, hints)`` -> a list of candidates for ``kernel.tune``, each
      a list of declarative hint dicts (``{"stage": .., "tile": .., ..}``, as ``kd.schedule``
      takes them), for the finished-tracing Schedule ``sched`` and the user's own declarative
      Hints; None: kdsl.tune's default space of the target (cpu, cuda, or generic hints).
    - ``device_model``: ``f()`` -> a string naming the device the backend runs on (tuned
      winners are keyed by it); None: the host CPU's model (device "host") or the first
      CUDA device's name (device "cuda").
    """

    name: str
    device: str = "host"
    target: str | None = None
    size_classes: bool = False
    pipeline: Callable[[], Any] | None = None
    fori_loops: bool = False
    options: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    result_wrapper: Callable[[type], Callable | None] | None = None
    version: str = "0"
    contract: int = CONTRACT
    tuning_space: Callable[[Any, Any], Any] | None = None
    device_model: Callable[[], str] | None = None

    def __post_init__(self):
        # a spec is checked when made: a mistake shows at the backend's definition
        problems = spec_problems(self)
        if problems:
            raise BackendUnavailable(f"invalid BackendSpec: {'; '.join(problems)}")
        if not isinstance(self.options, MappingProxyType):
            object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    @property
    def schedule_target(self) -> str:
        """The target whose schedules apply on this backend (``target``, else ``name``)."""
        return self.target or self.name


def spec_problems(spec) -> list:
    """What is wrong with a BackendSpec's fields (empty: nothing)."""
    out = []
    if not isinstance(spec.name, str) or not spec.name:
        out.append(f"name must be a non-empty string, got {spec.name!r}")
    if spec.device not in DEVICES:
        out.append(f"device must be one of {', '.join(sorted(DEVICES))}, got {spec.device!r}")
    if spec.target is not None and (not isinstance(spec.target, str) or not spec.target):
        out.append(f"target must be None or a non-empty string, got {spec.target!r}")
    for f in ("size_classes", "fori_loops"):
        if type(getattr(spec, f)) is not bool:
            out.append(f"{f} must be a bool, got {getattr(spec, f)!r}")
    for f in ("pipeline", "result_wrapper", "tuning_space", "device_model"):
        v = getattr(spec, f)
        if v is not None and not callable(v):
            out.append(f"{f} must be None or callable, got {type(v).__name__}")
    if not isinstance(spec.options, Mapping):
        out.append(f"options must be a mapping, got {type(spec.options).__name__}")
    if not isinstance(spec.version, str):
        out.append(f"version must be a string, got {spec.version!r}")
    if spec.contract not in SUPPORTED_CONTRACTS:
        out.append(f"it was written for backend contract {spec.contract!r}, and this kdsl runs "
                   f"contract {', '.join(map(str, sorted(SUPPORTED_CONTRACTS)))}")
    return out


# ----------------------------------------------------------------- fast launch
# typed named tuples, not dataclasses: a class costs ~0.1 ms to define instead of ~0.5
class FastLauncher(NamedTuple):
    """A launcher one specialisation's fast path calls instead of the generated Python one.

    ``call(*args)`` (``call(*args, out)`` when the plan's ``out_mode`` is set) returns the
    result, or ``NotImplemented`` for anything that does not match the plan exactly or would
    raise (the kernel then takes its normal path, which keeps every error message); it never
    raises.  ``device_arrays``: it takes device arrays (and checks that ``out=`` does not
    overlap its inputs itself; it is also tried when the device rule picks the backend).
    ``packed``: the same launcher taking ``(args, out)`` -- the argument tuple as the kernel
    received it, whatever its length -- which also declines an ``out=`` that shares memory
    with an argument or another output; given, it is called instead of ``call`` (which may
    be None).  ``entry``: ``entry(kernel)`` may give a native call entry doing the kernel's
    fast-launcher step in C (the cuda backend's helper), or None."""

    call: Callable[..., Any] | None
    device_arrays: bool = False
    packed: Callable[[tuple, Any], Any] | None = None
    entry: Callable[[Any], Any] | None = None


class FastLaunch(NamedTuple):
    """A compiled kernel's fast-launch capability (``compiled.fast``; None: it has none).

    ``build(plan)`` -> a ``FastLauncher`` or None, where ``plan`` is a
    ``kdsl.runtime.callplan.CallPlan`` (the argument checks, shape bindings, constraints and
    outputs of one specialisation, as data).  It is called once, after the specialisation
    ran ``kdsl.runtime.fastpath.PROMOTE_AFTER`` times; an exception keeps the normal path.
    ``device_arrays``: plans are made for device arrays (their array kinds are recorded).
    ``func``: the function the launchers fill the scalar slots of (a LoweredFunc or a
    ``kdsl.runtime.slots.LaunchInfo``; plans carry its ``Slot``s), or None (plans get none)."""

    build: Callable[[Any], FastLauncher | None]
    device_arrays: bool = False
    func: Any = None


# ----------------------------------------------------------------- checks
def backend_problems(obj) -> list:
    """What keeps ``obj`` from being a backend (empty: it keeps the contract)."""
    spec = getattr(obj, "spec", None)
    out = []
    if not isinstance(spec, BackendSpec):
        out.append("no `spec` (a kdsl.backends.spec.BackendSpec)" if spec is None else
                   f"`spec` is a {type(spec).__name__}, not a kdsl.backends.spec.BackendSpec")
    missing = [m for m in METHODS if not callable(getattr(obj, m, None))]
    if missing:
        out.append(f"missing method{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    if isinstance(spec, BackendSpec):
        # members of the old implicit contract, never read now: one that disagrees with the
        # spec means the backend (or its subclass) still says it the old way
        for member in _LEGACY:
            got = getattr(obj, member, _MISSING)
            if got is not _MISSING and got != getattr(spec, member):
                out.append(f"its `{member}` ({got!r}) is not its spec's ({getattr(spec, member)!r}); "
                           f"kdsl reads only `spec`: set spec = BackendSpec({member}=...)")
    return out


#: attributes the contract read before BackendSpec (kdsl <= 0.1), checked against the spec
_LEGACY = ("name", "device", "target", "size_classes", "fori_loops")


def check_backend(name: str, obj, origin: str):
    """``obj`` if it keeps the backend contract, else BackendUnavailable saying what is missing."""
    problems = backend_problems(obj)
    if problems:
        raise BackendUnavailable(
            f"backend {name!r} ({origin}) does not keep the backend contract: "
            f"{'; '.join(problems)} (see docs/backends.md, 'Writing a backend')")
    return obj


def check_compiled(backend, obj):
    """``obj`` (what ``backend.compile`` returned) if it is a compiled object: callable, with
    ``fast`` None or a FastLaunch; else BackendUnavailable naming the backend."""
    fast = getattr(obj, "fast", _MISSING)
    if callable(obj) and (fast is None or isinstance(fast, FastLaunch)):
        return obj
    what = ("not callable" if not callable(obj) else
            "it has no `fast` member (None, or a kdsl.backends.spec.FastLaunch)" if fast is _MISSING
            else f"its `fast` is a {type(fast).__name__}, not None or a FastLaunch")
    raise BackendUnavailable(
        f"backend {backend.spec.name!r}: compile() returned a {type(obj).__name__}, which is "
        f"not a compiled kernel: {what} (see docs/backends.md, 'The compiled object')")


__all__ = ["CONTRACT", "SUPPORTED_CONTRACTS", "DEVICES", "METHODS", "BackendSpec", "FastLaunch",
           "FastLauncher", "check_backend", "check_compiled", "backend_problems", "spec_problems"]
