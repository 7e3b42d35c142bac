"""The numpy semantics of the loop IR's operations, shared by every executor and evaluator.

``numpy_eval`` evaluates IR expressions on numpy arrays (the numpy backend, reducers traced by
the frontend, the SIMT executor), ``numpy_chunks`` walks arrays in bounded blocks,
``pyexec_rt`` holds the scalar helpers that generated Python calls (casts, rounding, integer
division, bounds checks), ``call_check`` the argument check of IR executors.  This layer sits
just above ``kdsl.ir`` (docs/design.md, "Layers")."""
