"""kdsl's differential fuzzer.

``python -m tests.fuzz --cases N --seed S [--backend numpy,interp,cpu]`` generates N
random kernels (with inputs and schedules), runs each on every backend and compares
with numpy in float64; ``--show I`` prints one case.  CI runs a fixed-seed slice
(``test_fuzz_slice.py``); findings are in ``FINDINGS.md`` with regression tests in
``test_findings*.py`` and matchers in ``known.py``.

How it fits together (one module each, data flows top to bottom):

- ``families`` / ``gen_kernel``: a random kernel, built as a tree of ``model.Node``
  (what it computes) and rendered as kdsl source at the same time.  Families:
  elementwise trees over every dtype (bfloat16 as an internal type) with numpy
  promotion and Python scalars; numpy-style reductions (axis sets, keepdims, dtype=,
  argmax/argmin, any/all, mean, custom reducers); index-style computes (maps,
  reversals, strided gathers, shifted stencils, reductions with ``where=``, 0-d
  results); 2-D stencils; matmul 1-D/2-D/batched; mixed pipelines; and numpy's
  surface (issue 25): ``gen_surface`` puts the new ufuncs, shifts, gcd/lcm and
  ``.view`` bitcasts into every expression, ``families_surface`` draws array
  functions (shape functions, scans, einsum & co, var/std, sort/argsort, a
  tuple-reducer argmax, kd.random); their oracles are ``oracle_ufunc`` and
  ``oracle_surface``.
- ``gen_input``: sizes (0 and 1 included), values (small ints, the whole range,
  dyadic floats that make ties exact, NaN/inf), layouts (C, F, strided with
  garbage in the gaps, negative strides, unaligned, stride-0 broadcast).
- ``gen_schedule``: hint sets, or primitive sequences generated against a live
  ``Schedule`` so each step is legal by construction (``PRIMITIVES``: a name, a
  weight, the profiles it belongs to, a generator), plus deliberately illegal ones.
- ``oracle`` / ``oracle_red`` / ``evaluate``: numpy's dtype rules, float64 values
  with a rigorous per-element error bound, and a mask of results the dtype's
  arithmetic leaves undetermined (ties at comparisons, floor, casts, argmax; possible
  overflow).  ``direct`` checks the oracle against numpy running the kernel itself.
- ``check``: compare results; judge errors (fair: a kdsl user error, located in
  the user's code, with a hint, no raw IR or internal names); classify outcomes.
- ``runner`` (one case on one backend, in process), ``worker`` + ``supervise``
  (worker processes, a time limit per case, crashes and hangs reported and
  bisected), ``report`` (counts, bugs grouped by finding).

Explicit GPU schedules (issue 24): ``python -m tests.fuzz --gpu-schedules --cases N --seed S``
(``gpu_cli``) runs TVM-style GPU schedules (``gen_gpu_schedule`` + ``gpu_families``: tiling bound
to blockIdx/threadIdx, vthread, shared/local caches with cooperative fetch, double buffering,
rfactor + cross-thread reductions, wmma/wgmma; random legal orders from ``gpu_plan``) on
``interp-cuda`` + NVRTC, judged by ``gpu_runner``; ``python -m tests.fuzz.gpu_minimize S I``
shrinks a case.  ``--backend interp-cuda-tvm`` gives every ``gen_kernel`` family a simpler
TVM-style explicit GPU schedule (``gen_schedule.gpu_tvm``).

Extending it:

- a backend: one ``FuzzBackend`` entry in ``backends.py`` (target name, schedule
  profile, largest case, a setup function).  A CUDA backend is
  ``FuzzBackend("cuda", "cuda", "gpu", ..., _setup_cuda)``; ``interp-gpu`` already
  runs GPU-profile schedules (``bind``, cross-thread reductions, shared caches) on
  the loop-IR interpreter; ``interp-cuda`` runs kdsl_cuda's default schedules through
  the GPU lowering on the SIMT interpreter and NVRTC-compiles the CUDA they print
  (``test_fuzz_slice_interp_cuda.py``; no GPU needed).
- a schedule primitive (``cache_read`` into shared + ``compute_at``, ``double_buffer``,
  ``tensorize``...): a generator function and a ``Prim`` entry naming its profiles;
  illegal variants go in ``ILLEGAL``.
- a kernel family or op: a ``fam_*`` function in ``families.py`` (registered in
  ``FAMILIES``) and, for a new op, its rule in the oracle.
"""
