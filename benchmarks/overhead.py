"""Python overhead of a cached kernel call (SPEC §3: a few microseconds).

    python benchmarks/overhead.py [backend ...]

Times ``add(a, b)`` on 8 float32 elements: the median over many batches of
calls, per backend (``numpy`` always, ``cpu`` when installed, plus any named
on the command line; with ``cpu`` the calls run through its native fast
launcher, kdsl.runtime.fastpath),
next to a ``null`` backend whose compiled kernel does nothing (pure dispatch
cost) and numpy's own ``a + b`` as the peer.  Prints a table and writes JSON
under benchmarks/results/.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_ROOT, os.path.join(_ROOT, "kdsl_cpu")]   # this checkout, not installed copies

import kdsl as kd  # noqa: E402
from kdsl.backends.numpy_backend import NumpyBackend  # noqa: E402
from kdsl.backends.spec import BackendSpec  # noqa: E402

N_ELEMS, BATCH, BATCHES = 8, 200, 60


class NullBackend(NumpyBackend):
    """Compiles to a no-op, so a call measures only kdsl's dispatch path."""

    spec = BackendSpec(name="null")

    def compile(self, request):
        def run(inputs, outputs, scalars, stream=None):
            pass
        run.fast = None        # a compiled object: callable, no fast launcher
        return run


def _hand_graph(specs):
    """add's stage graph built by hand, for when the frontend cannot trace yet."""
    from kdsl.graph import Graph, Input, Stage, Tensor
    from kdsl.ir import nodes as n
    nv = n.var("n")
    a_s, b_s = specs
    A = Tensor("A", (nv,), a_s.dtype, Input(0))
    B = Tensor("B", (nv,), b_s.dtype, Input(1))
    i = n.IterVar(n.var("i"), n.Range(n.const(0), nv))
    body = n.Binary(A.dtype, n.BinOp.ADD, n.TensorRead(A.dtype, A, (i.var,)),
                    n.TensorRead(B.dtype, B, (i.var,)))
    st = Stage("C", (i,), (), body, A.dtype)
    return Graph("add", (A, B), [st], (st.output,))


@kd.kernel
def add(A, B):
    return A + B


def _ensure_traceable() -> str:
    """Use the real frontend when it can trace ``add``; otherwise the hand-built graph."""
    from kdsl.runtime import dispatch
    try:
        add.lower(kd.TensorSpec((None,), kd.float32), kd.TensorSpec((None,), kd.float32),
                  backend="numpy")
        return "traced"
    except Exception:
        real = dispatch.trace_graph
        dispatch.trace_graph = lambda fn, specs, **kw: (_hand_graph(specs) if fn is add.fn
                                                        else real(fn, specs, **kw))
        return "hand-built graph (frontend not available)"


def median_call_us(fn) -> float:
    """Median over batches of the mean time of one call, in microseconds."""
    for _ in range(BATCH):
        fn()
    per = []
    for _ in range(BATCHES):
        t = time.perf_counter()
        for _ in range(BATCH):
            fn()
        per.append((time.perf_counter() - t) / BATCH)
    return statistics.median(per) * 1e6


def main(argv) -> dict:
    kd.register_backend("null", NullBackend())
    how = _ensure_traceable()
    a = np.arange(N_ELEMS, dtype=np.float32)
    b = np.ones(N_ELEMS, np.float32)
    out = np.empty_like(a)
    rows = [("numpy a + b (peer)", median_call_us(lambda: np.add(a, b)))]
    names = ["null", "numpy"] + (["cpu"] if "cpu" in kd.backends() else [])
    for name in names + [b for b in argv if b not in names]:
        try:
            add(a, b, backend=name)
        except Exception as e:  # a backend not installed here: say so, keep going
            print(f"skipping {name}: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        rows.append((f"kdsl {name}", median_call_us(lambda: add(a, b, backend=name))))
        rows.append((f"kdsl {name} out=", median_call_us(lambda: add(a, b, out=out, backend=name))))
    print(f"cached call on {N_ELEMS} float32 elements ({how}); median of {BATCHES}x{BATCH} calls")
    print(f"{'case':<28}{'us/call':>10}")
    for case, us in rows:
        print(f"{case:<28}{us:>10.2f}")
    result = {"benchmark": "overhead", "elements": N_ELEMS, "graph": how,
              "python": platform.python_version(), "numpy": np.__version__,
              "machine": platform.machine(), "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "us_per_call": dict(rows)}
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"overhead-{time.strftime('%Y%m%d-%H%M%S')}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
