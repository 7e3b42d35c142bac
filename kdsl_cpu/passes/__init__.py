"""The cpu backend's own IR passes, run after the core's sequential table
(``kdsl_cpu.backend.PIPELINE`` inserts them after ``blocked_sums``): ``fuse_loops``,
``full_tiles``, ``tighten_loops``, ``unclamp``, ``hoist_allocations``."""
