"""``kernel.tune``: try candidate schedules on the device, keep the fastest correct one.

For the specialisation the example arguments select (backend, signature, size class), the
search

1. computes the reference result with the numpy backend (``reference``), once;
2. walks the space (kdsl/tune/space.py; the default schedule first) until ``budget_s``
   seconds or ``trials`` candidates are spent: each candidate is a copy of the kernel with
   the candidate's hints added, compiled for the backend and run once on the arguments;
   a candidate that fails to compile or run, or whose results disagree with the reference
   (``agree``: a tolerance by dtype), is logged (``logging.getLogger("kdsl")``) and skipped;
3. times the others: after the checked run, ``repeat`` samples of ``number`` calls each
   (``number`` sized so a sample takes ~``SAMPLE_S``), the median sample per call; device
   backends synchronise the device around each sample (torch, CuPy, else the driver);
4. times the fastest again against the default, alternately (``_confirm``: other processes'
   load must not crown a candidate), persists it (kdsl/tune/store.py) if it still beats the
   default by ``MARGIN``, else the default and drops the kernel's compiled
   specialisations, so its next call compiles with the winner's hints.

The default schedule takes part like any candidate: a space that holds nothing faster
leaves the default as the winner (recorded too, so it is not searched again).
"""
from __future__ import annotations

import logging
import statistics
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError, BackendCompileError, ScheduleError
from . import progress as _progress
from . import space as _space
from . import store

#: seconds one timing sample aims at (many calls of a fast kernel, one of a slow one)
SAMPLE_S = 0.01
#: most calls in one sample
MAX_NUMBER = 1000
#: a candidate replaces the default schedule only when faster by more than this fraction
#: (timing noise must not make a winner of an equal schedule)
MARGIN = 0.03
#: the confirmation of the winner against the default may take this share of the budget more
CONFIRM = 0.1
#: rounds of that confirmation (default, winner, default, winner, ...)
ROUNDS = 3

_log = logging.getLogger("kdsl")


@dataclass
class Trial:
    """One candidate: its hint dicts (``[]``: the default schedule), its time per call in
    seconds (None when it failed or was skipped) and what happened: ``ok``, ``compile error``,
    ``run error``, ``wrong result``, ``duplicate`` (its hints scheduled the kernel exactly as an
    earlier candidate's: not compiled again)."""

    hints: list
    time_s: float | None
    status: str
    detail: str = ""
    call: object = field(default=None, repr=False, compare=False)   # ok: runs it once


@dataclass
class TuneResult:
    """What ``kernel.tune`` found.  ``best``: the winner's hint dicts (``[]``: the default);
    ``best_s`` / ``default_s``: seconds per call of the winner and of the default schedule
    (None when the default failed); ``key``: the winner's key (None: not persisted)."""

    kernel: str
    backend: str
    device: str
    key: str | None
    best: list
    best_s: float
    default_s: float | None
    trials: list = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def speedup(self) -> float | None:
        """Default time over the winner's (>= 1)."""
        return None if self.default_s is None else self.default_s / self.best_s

    def __repr__(self) -> str:
        ok = sum(t.status == "ok" for t in self.trials)
        sp = "" if self.speedup is None else f", {self.speedup:.2f}x the default"
        return (f"<TuneResult {self.kernel} on {self.backend} ({self.device}): best {self.best!r} "
                f"{_fmt(self.best_s)}{sp}; {ok}/{len(self.trials)} candidates correct>")


def _fmt(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


# ----------------------------------------------------------------- arrays and devices
def to_host(x):
    """``x`` as a numpy array (torch and CuPy device arrays copied to the host)."""
    if isinstance(x, np.ndarray):
        return x
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    if mod == "cupy":
        return x.get()
    return np.asarray(x)


def _sync_for(args, backend):
    """A function waiting for the device (nothing for host backends)."""
    if backend.spec.device != "cuda":
        return lambda: None
    mods = {type(a).__module__.split(".")[0] for a in args}
    if "torch" in mods:
        import torch
        return torch.cuda.synchronize
    if "cupy" in mods:
        import cupy
        return lambda: cupy.cuda.get_current_stream().synchronize()
    from cuda.bindings import driver

    def sync():
        driver.cuCtxSynchronize()
    return sync


def _tolerance(dtype: np.dtype) -> float | None:
    """Relative tolerance of a float dtype (by size), None for exact types."""
    if dtype.kind not in "fc":
        return None
    return {2: 2e-2, 4: 1e-3, 8: 1e-9}.get(dtype.itemsize // (2 if dtype.kind == "c" else 1), 1e-3)


def agree(got, ref) -> str:
    """'' when ``got`` matches the reference ``ref`` (tuples compared member by member), else
    what differs.  Floats: ``|got - ref| <= tol * (|ref| + max|ref|)`` elementwise (a
    tolerance by dtype: summation orders differ between schedules), NaNs where the reference
    has them; everything else exactly."""
    gs = got if isinstance(got, tuple) else (got,)
    rs = ref if isinstance(ref, tuple) else (ref,)
    if len(gs) != len(rs):
        return f"{len(gs)} results, the reference has {len(rs)}"
    for j, (g, r) in enumerate(zip(gs, rs)):
        g, r = np.asarray(to_host(g)), np.asarray(to_host(r))
        if g.shape != r.shape:
            return f"result {j}: shape {g.shape}, the reference's is {r.shape}"
        tol = _tolerance(r.dtype if r.dtype.kind in "fc" else g.dtype)
        if tol is None:
            if not np.array_equal(g, r):
                return f"result {j}: {int(np.sum(g != r))} of {r.size} elements differ"
            continue
        g64, r64 = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64), \
            r.astype(np.complex128 if r.dtype.kind == "c" else np.float64)
        fin = np.isfinite(r64)
        scale = float(np.max(np.abs(r64[fin]))) if fin.any() else 0.0
        bad = ~np.isclose(g64, r64, rtol=tol, atol=tol * max(scale, 1e-30), equal_nan=True)
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
            return (f"result {j}: {int(bad.sum())} of {r.size} elements differ "
                    f"(at {tuple(int(x) for x in i)}: {g64[i]!r} vs {r64[i]!r})")
    return ""


def measure(call, sync, repeat: int, deadline: float) -> float:
    """Seconds per call: the median of ``repeat`` samples (fewer past ``deadline``)."""
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, min(MAX_NUMBER, int(SAMPLE_S / one)))
    samples = []
    for _ in range(max(1, repeat)):
        sync()
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        sync()
        samples.append((time.perf_counter() - t0) / number)
        if time.perf_counter() > deadline:
            break
    return statistics.median(samples)


# ----------------------------------------------------------------- the search
def _check_limits(budget_s, trials, repeat):
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not budget_s > 0:
        raise ArgumentError(f"kernel.tune: budget_s must be a positive number of seconds, got "
                            f"{budget_s!r}", hint="e.g. budget_s=30")
    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int)
                               or trials < 1):
        raise ArgumentError(f"kernel.tune: trials must be None or a positive int, got {trials!r}",
                            hint="e.g. trials=20 (None: as many as the budget allows)")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ArgumentError(f"kernel.tune: repeat must be a positive int, got {repeat!r}",
                            hint="e.g. repeat=5")


def tune(kernel, *args, backend=None, budget_s=10.0, trials=None, space=None, persist=True,
         progress=True, repeat=5, reference="numpy", _reset=True) -> TuneResult:
    """Search ``kernel``'s schedule space for the specialisation ``args`` select on
    ``backend`` (None: the one a call would use); see the module docstring.

    ``space``: candidates to try instead of the backend's (a list of hint dicts or of lists
    of them, or ``f(sched)`` returning one); ``persist``: write the winner into the disk cache
    (False: this process only); ``progress``: show a progress bar (tqdm, rich, else a line
    on stderr); ``repeat``: timing samples per candidate; ``reference``: the backend the
    results are checked against."""
    from ..backends import registry as reg
    from ..errors import user_location
    from ..frontend.fori import has_loops
    from ..runtime import dispatch, foreign
    from ..runtime.signature import signature_from_args
    from ..schedule.hints import Hint, _copy_kernel

    _check_limits(budget_s, trials, repeat)
    start = time.perf_counter()
    deadline = start + float(budget_s)
    if backend is None:
        backend = reg.default_backend_name(list(args))
    be = reg.get_backend(backend)
    bname = backend if isinstance(backend, str) else be.spec.name
    if len(args) != kernel._nargs:
        kernel._key(args, backend, None)      # raises the argument-count error
    if be.spec.device == "host":            # torch/JAX host arrays: read as numpy
        args = tuple(foreign.host_arrays(kernel, args, array_likes=False)[0])
    sig = signature_from_args(args, kernel.arg_names, kernel.constants, kernel.specialize, None,
                              user_location(), be.spec.size_classes)
    graph = kernel._graph(sig)
    if has_loops(graph):
        raise ScheduleError(f"kernel.tune: {kernel.__name__} uses kd.fori_loop, whose parts "
                            "are not tuned yet", hint="tune the loop body as a kernel of its own")
    user = [h for h in kernel._hints if dispatch._targets(h.target, be)]
    if any(h.fn is not None for h in user):
        raise ScheduleError(f"kernel.tune: {kernel.__name__} has an explicit schedule function "
                            f"for {be.spec.schedule_target}, which tuning cannot vary",
                            hint="tune a kernel with declarative hints (or none): "
                                 "@kd.schedule(target, tile=..., ...) or no schedule")
    key = store.winner_key(be, sig, graph, user)
    device = store.device_model(be)
    target = be.spec.schedule_target
    sched = dispatch.make_schedule(graph)
    sched.size_hints = dispatch.size_hints(graph, sig)
    cands = _space.candidates(be, sched, user, space)
    if trials is not None:
        cands = cands[:trials]
    sync = _sync_for(args, be)
    results, best, seen = [], None, {}
    bar = _progress.make(len(cands), f"kdsl tune {kernel.__name__} [{bname}]", progress)
    try:
        with store.searching():
            host = tuple(a if isinstance(a, (np.ndarray, np.generic)) or not hasattr(a, "shape")
                         else to_host(a) for a in args)      # device arrays: on the host
            ref = kernel(*host, backend=reference)
            for i, cand in enumerate(cands):
                if i and time.perf_counter() > deadline:
                    break
                trial = _try(kernel, cand, args, backend, target, ref, sync, repeat, deadline,
                             Hint, _copy_kernel, (be, sig, graph, seen))
                results.append(trial)
                if trial.status == "ok" and (best is None or trial.time_s < best.time_s):
                    best = trial
                bar.update(f"best {_fmt(best.time_s) if best else '-'}")
    finally:
        bar.close()
    default = results[0] if results else None
    if best is not None and default.status == "ok" and best is not default:
        with store.searching():
            best = _confirm(best, default, sync, repeat, max(budget_s * CONFIRM, 0.05))
    for t in results:
        t.call = None       # the candidates' compiled kernels and the arguments go
    if best is None:
        raise BackendCompileError(
            f"kernel.tune: no candidate of {kernel.__name__} ran correctly on {bname} "
            f"(the default schedule: {default.status if default else 'not tried'}"
            f"{': ' + default.detail if default and default.detail else ''})")
    res = TuneResult(kernel.__name__, bname, device, key,
                     best.hints, best.time_s, default.time_s if default.status == "ok" else None,
                     results, time.perf_counter() - start)
    if key is None:
        _log.warning("kernel.tune: %s's graph cannot be keyed; its winner is not kept",
                     kernel.__name__)
    else:
        store.save({"key": key, "kernel": kernel.__name__, "backend": bname, "device": device,
                    "signature": sig.describe(), "hints": best.hints, "time_s": best.time_s,
                    "default_s": res.default_s, "trials": len(results)}, persist)
        if _reset:
            kernel._forget_compiled()      # the next call compiles with the winner
    _log.info("kernel.tune: %r", res)
    return res


def _confirm(best, default, sync, repeat, seconds):
    """``best`` if it stays faster than ``default`` by ``MARGIN`` when the two are timed again,
    alternately (``ROUNDS`` each, within ``seconds``: load from other processes hits both),
    else ``default``.  Their times become the medians of all their measurements."""
    deadline = time.perf_counter() + seconds
    tb, td = [best.time_s], [default.time_s]
    for _ in range(ROUNDS):
        if time.perf_counter() > deadline:
            break
        td.append(measure(default.call, sync, repeat, deadline))
        tb.append(measure(best.call, sync, repeat, deadline))
    best.time_s, default.time_s = statistics.median(tb), statistics.median(td)
    return best if best.time_s < default.time_s * (1 - MARGIN) else default


def _same_as(k, cand, spec):
    """The earlier candidate whose finished schedule is this one's (the hints changed nothing
    the default had not chosen), or None; records this one's.  Scheduling costs milliseconds,
    a compile far more."""
    from ..runtime import dispatch
    from ..runtime.fingerprint import Unkeyable, fingerprint
    be, sig, graph, seen = spec
    req = dispatch.prepare(k, be, sig, graph)
    try:
        fp = fingerprint(req.schedule)
    except Unkeyable:
        return None
    if fp in seen:
        return seen[fp]
    seen[fp] = cand
    return None


def _try(kernel, cand, args, bcall, target, ref, sync, repeat, deadline, Hint, copy,
         spec) -> Trial:
    """Schedule, compile, check and time one candidate (``spec``: backend, signature, graph
    and the schedules met so far)."""
    k = copy(kernel)
    # a candidate's warnings (an unroll capped, ...) are about schedules the user never wrote:
    # logged, not shown; and anything it raises only disqualifies it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for d in cand:
                k._add_schedule(Hint(target, dict(d)))
            same = _same_as(k, cand, spec)
            if same is not None:
                _log.info("kernel.tune: %s candidate %r schedules like %r; skipped",
                          kernel.__name__, cand, same)
                return Trial(cand, None, "duplicate", f"the schedule of {same!r}")
            out = k(*args, backend=bcall)
            sync()
        except Exception as err:
            msg = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            _log.info("kernel.tune: %s candidate %r failed to compile or run (%s); skipped",
                      kernel.__name__, cand, msg)
            return Trial(cand, None, "compile error", msg)
    for w in caught:
        _log.info("kernel.tune: %s candidate %r: %s: %s", kernel.__name__, cand,
                  w.category.__name__, w.message)
    why = agree(out, ref)
    if why:
        _log.warning("kernel.tune: %s candidate %r disagrees with the reference (%s); skipped",
                     kernel.__name__, cand, why)
        return Trial(cand, None, "wrong result", why)
    try:
        t = measure(lambda: k(*args, backend=bcall), sync, repeat, deadline)
    except Exception as err:
        _log.info("kernel.tune: %s candidate %r failed while timed (%s); skipped",
                  kernel.__name__, cand, err)
        return Trial(cand, None, "run error", str(err))
    return Trial(cand, t, "ok", call=lambda: k(*args, backend=bcall))


def autotune(kernel, args, backend_name, backend, sig, graph) -> None:
    """KDSL_AUTOTUNE=1: tune ``kernel`` for these arguments (``AUTOTUNE_BUDGET_S``) unless its
    key has a winner; kernels with explicit schedule functions are not tuned.  A search that
    fails is logged and the call goes on with the default schedule."""
    from ..runtime import dispatch
    hints = [h for h in kernel._hints if dispatch._targets(h.target, backend)]
    if any(h.fn is not None for h in hints):
        return
    key = store.winner_key(backend, sig, graph, hints)
    if key is None or store.lookup(key, kernel.__name__) is not None:
        return
    try:
        tune(kernel, *args, backend=backend_name, budget_s=store.AUTOTUNE_BUDGET_S,
             trials=store.AUTOTUNE_TRIALS, progress=True, _reset=False)
    except Exception as err:     # tuning must never break the call it runs for
        _log.warning("KDSL_AUTOTUNE: tuning %s failed (%s: %s); the default schedule is used",
                     getattr(kernel, "__name__", "?"), type(err).__name__, err)
