"""The GPU layer: what only targets that bind threads to a GPU's blocks and threads use.

Its passes turn core loop IR into GPU form (``pipeline.PIPELINE``: tensor-core statements,
rings of asynchronous copies, virtual threads unrolled, barriers, versioned interior tiles,
device kernels with their launches), ``verify`` holds the verifier's GPU rules, ``simt`` the
SIMT executor (every block's threads together: races, divergent barriers) and ``wmma_defs``
the definitions of the warp-level matrix statements.  ``cuda``, ``interp-cuda`` and the
executors of GPU-form IR import it; the core (``kdsl.passes``) and the sequential targets
(``interp``, ``cpu``, ``numpy``) never do (docs/design.md, "Layers").
"""
