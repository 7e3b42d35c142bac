"""The lowering pipeline: one golden printout per pass, the table-editing API, KDSL_DUMP=passes."""
import dataclasses

import numpy as np
import pytest

import kdsl as kd
from handgraph import Builder, matmul_graph, read, sum_
from seed_schedules import bind_rows, cross_thread
from wmma_schedules import mm16_graph, wmma_one_warp
from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.errors import InternalCompilerError
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.passes import pipeline as P
from kdsl.passes.state import LowerState
from kdsl.schedule import Schedule


def chain_graph():
    """U = A * 2 (inlined), T = U + 1 (attached at O's outer loop), O[j] = T[j] * 3."""
    b = Builder("chain")
    A = b.input("A", ("n",), dt.float64)
    i = b.axis("i", b.dim("n"))
    U = b.compute("U", [i], n.Binary(dt.float64, n.BinOp.MUL, read(A, i), n.const(2.0, dt.float64)))
    k = b.axis("k", b.dim("n"))
    T = b.compute("T", [k], n.Binary(dt.float64, n.BinOp.ADD, read(U, k), n.const(1.0, dt.float64)))
    j = b.axis("j", b.dim("n"))
    O = b.compute("O", [j], n.Binary(dt.float64, n.BinOp.MUL, read(T, j), n.const(3.0, dt.float64)))
    return b.graph(O)


def chain_schedule(s):
    s["U"].compute_inline()
    O = s["O"]
    jo, _ = O.split(O.axes[0], factor=4)
    s["T"].compute_at(O, jo)


def rowsum_graph():
    b = Builder("rowsum")
    A = b.input("A", ("n", "m"), dt.float32)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    return b.graph(b.compute("B", [i], sum_(read(A, i, k), [k]), [k]))


def rowsum_split(s):
    B = s["B"]
    B.split(B.reduce_axes[0], factor=8)


def chain_vthread(s):
    """O's tile of 8 per block split over vthread.x (2) and threadIdx.x (4)."""
    s["U"].compute_inline()
    s["T"].compute_inline()
    O = s["O"]
    bo, ji = O.split(O.axes[0], factor=8)
    vo, ti = O.split(ji, nparts=2)
    O.bind(bo, "blockIdx.x")
    O.bind(vo, "vthread.x")
    O.bind(ti, "threadIdx.x")


def mm_pipelined(s):
    """A 4x4 tile of C per block; A's 4x4 shared tile double-buffered over the K-tile loop."""
    C = s["C"]
    AA = s.cache_read("A", "shared", [C])
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 4, 4)
    ko, ki = C.split(C.reduce_axes[0], factor=4)
    C.reorder(io, jo, ko, ii, ji, ki)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        C.bind(ax, tag)
    AA.compute_at(C, ko)
    AA.bind(AA.axes[0], "threadIdx.y")
    AA.bind(AA.axes[1], "threadIdx.x")
    AA.double_buffer()
def gpu_matmul_graph():
    from handgraph import matmul_graph
    return matmul_graph()


def mm_shared_tiles(s):
    """8x8 threads per block, one C element each; A and B tiles per K step of 8 copied to
    shared memory by the block's threads (the sync pass's barriers)."""
    C = s["C"]
    AA, BB = s.cache_read("A", "shared", [C]), s.cache_read("B", "shared", [C])
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 8, 8)
    ko, ki = C.split(C.reduce_axes[0], factor=8)
    C.reorder(io, jo, ko, ii, ji, ki)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        C.bind(ax, tag)
    for X in (AA, BB):
        X.compute_at(C, ko)
        X.bind(X.axes[0], "threadIdx.y")
        X.bind(X.axes[1], "threadIdx.x")


def mm_thread_tiles(s):
    """The seed-002 thread-tiling step scaled down: 32x32 block tiles, 8x8 threads of 4x4,
    BK 8; shared tiles relaxed over the threads and allocated at block level."""
    C = s["C"]
    CL = s.cache_write(C, "local")
    AA, BB = s.cache_read("A", "shared", [CL]), s.cache_read("B", "shared", [CL])
    AL, BL = s.cache_read(AA, "local", [CL]), s.cache_read(BB, "local", [CL])
    by, bx, yi, xi = C.tile(C.axes[0], C.axes[1], 32, 32)
    ty, yi = C.split(yi, factor=4)
    tx, xi = C.split(xi, factor=4)
    C.reorder(by, bx, ty, tx, yi, xi)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        C.bind(ax, tag)
    CL.compute_at(C, tx)
    ko, ki = CL.split(CL.reduce_axes[0], factor=8)
    CL.reorder(ko, ki, *CL.axes)
    AL.compute_at(CL, ki)
    BL.compute_at(CL, ki)
    for X in (AA, BB):
        X.compute_at(CL, ko)
        o, t = X.split(X.fuse(*X.axes), factor=64)
        y, x = X.split(t, factor=8)
        X.bind(y, "threadIdx.y")
        X.bind(x, "threadIdx.x")


def _chain():
    s = Schedule(chain_graph())
    chain_schedule(s)
    return s


def state_after(graph_fn, sched_fn, stop, pipeline=P.SEQUENTIAL):
    s = Schedule(graph_fn())
    sched_fn(s)
    return P.run_pipeline(LowerState(s), pipeline, stop_after=stop)


GOLDEN_CASES = {
    "placement": (chain_graph, chain_schedule, "placement"),
    "inline": (chain_graph, chain_schedule, "inline"),
    "bound_inference": (chain_graph, chain_schedule, "bound_inference"),
    "storage": (chain_graph, chain_schedule, "storage"),
    "loop_nests": (chain_graph, chain_schedule, "loop_nests"),
    "loop_nests_reduction": (rowsum_graph, rowsum_split, "loop_nests"),
    "loop_nests_cross_thread": (rowsum_graph, cross_thread, "loop_nests"),
    "tensorize": (mm16_graph, wmma_one_warp, "tensorize"),
    "simplify": (chain_graph, chain_schedule, "simplify"),
    "lower_cross_thread": (rowsum_graph, cross_thread, "lower_cross_thread"),
    "storage_gpu": (gpu_matmul_graph, mm_thread_tiles, "storage"),
    "sync": (gpu_matmul_graph, mm_shared_tiles, "sync"),
    "interior_blocks": (gpu_matmul_graph, mm_shared_tiles, "interior_blocks"),
    "full_thread_tiles": (gpu_matmul_graph, mm_shared_tiles, "full_thread_tiles"),
    "blocked_sums": (rowsum_graph, rowsum_split, "blocked_sums"),
    "device_kernels": (rowsum_graph, bind_rows, "device_kernels"),
    "shared_layout": (gpu_matmul_graph, mm_shared_tiles, "shared_layout"),
    "sequential_kernels": (rowsum_graph, bind_rows, "sequential_kernels"),
    "lower_async_copies": (chain_graph, chain_schedule, "lower_async_copies"),
    "pipeline_legality": (chain_graph, chain_schedule, "pipeline_legality"),
    "software_pipeline": (matmul_graph, mm_pipelined, "software_pipeline"),
    "vthread": (chain_graph, chain_vthread, "vthread"),
}
#: the table each golden case runs: GPU form, the GPU table plus the sequential tail, else SEQUENTIAL
GOLDEN_TABLE = {"device_kernels": P.PIPELINE, "shared_layout": P.PIPELINE,
                "sequential_kernels": P.PIPELINE.append(*P.SEQUENTIAL_TAIL)}

GOLDEN = {
    "placement": """\
# lowering chain
placement: U (inline), T (at O.j.outer, producer), O (root)""",
    "inline": """\
# lowering chain
placement: U (inline), T (at O.j.outer, producer), O (root)
stages: T, O""",
    "bound_inference": """\
# lowering chain
placement: U (inline), T (at O.j.outer, producer), O (root)
stages: T, O
domains:
  T: region {k: [j.outer*4, +4)} loops [k < 4] guards [j.outer*4 + k < n]
  O: region {j: [0, +n)} loops [j.outer < ceildiv(n, 4), j.inner < 4] guards [j.outer*4 + j.inner < n]""",
    "storage": """\
# lowering chain
placement: U (inline), T (at O.j.outer, producer), O (root)
stages: T, O
domains:
  T: region {k: [j.outer*4, +4)} loops [k < 4] guards [j.outer*4 + k < n]
  O: region {j: [0, +n)} loops [j.outer < ceildiv(n, 4), j.inner < 4] guards [j.outer*4 + j.inner < n]
bindings: n=shape(0, 0)
allocations:
  O.j.outer: T float64[4] local""",
    "loop_nests": """\
def chain(A: float64[n], O: float64[n]):
  for j.outer in range(ceildiv(n, 4)):
    allocate T: float64[4] local
      for k in range(4):
        if j.outer*4 + k < n:
          T[j.outer*4 + k - j.outer*4] = A[j.outer*4 + k]*2.0 + 1.0
      for j.inner in range(4):
        if j.outer*4 + j.inner < n:
          O[j.outer*4 + j.inner] = T[j.outer*4 + j.inner - j.outer*4]*3.0""",
    "loop_nests_reduction": """\
def rowsum(A: float32[n, m], B: float32[n]):
  for i in range(n):
    B[i] = 0.0f
    for k.outer in range(ceildiv(m, 8)):
      for k.inner in range(8):
        if k.outer*8 + k.inner < m:
          B[i] = B[i] + A[i, k.outer*8 + k.inner]""",
    "loop_nests_cross_thread": """\
def rowsum(A: float32[n, m], B: float32[n]):
  for i.outer in range(ceildiv(n, 32)):  # bound blockIdx.x
    for i.inner in range(32):  # bound threadIdx.y
      for k.inner.v in range(16):  # bound threadIdx.x
        allocate B.rf: float32[1, 1] local
          for k.inner in range(1):
            for i in range(1):
              if k.inner.v + k.inner < 16 and i.outer*32 + i.inner + i < n:
                B.rf[k.inner.v + k.inner - k.inner.v, i.outer*32 + i.inner + i - (i.outer*32 + i.inner)] = 0.0f
              if k.inner.v + k.inner < 16 and i.outer*32 + i.inner + i < n:
                for k.outer in range(ceildiv(m, 16)):
                  if k.outer*16 + (k.inner.v + k.inner) < m:
                    B.rf[k.inner.v + k.inner - k.inner.v, i.outer*32 + i.inner + i - (i.outer*32 + i.inner)] = B.rf[k.inner.v + k.inner - k.inner.v, i.outer*32 + i.inner + i - (i.outer*32 + i.inner)] + A[i.outer*32 + i.inner + i, k.outer*16 + (k.inner.v + k.inner)]
          allocate B.acc: float32[1] local
          allocate B.v: float32[1] local
            B.acc[0] = 0.0f
            if i.outer*32 + i.inner < n:
              B.acc[0] = B.acc[0] + B.rf[k.inner.v - k.inner.v, i.outer*32 + i.inner - (i.outer*32 + i.inner)]
            B.v[0] = cross_thread_sum(B.acc[0]; over threadIdx.x)
            if k.inner.v == 0 and i.outer*32 + i.inner < n:
              B[i.outer*32 + i.inner] = B.v[0]""",
    "simplify": """\
def chain(A: float64[n], O: float64[n]):
  for j.outer in range(ceildiv(n, 4)):
    allocate T: float64[4] local
      for k in range(4):
        if j.outer*4 + k < n:
          T[k] = A[j.outer*4 + k]*2.0 + 1.0
      for j.inner in range(4):
        if j.outer*4 + j.inner < n:
          O[j.outer*4 + j.inner] = T[j.inner]*3.0""",
    "lower_cross_thread": """\
def rowsum(A: float32[n, m], B: float32[n]):
  for i.outer in range(ceildiv(n, 32)):  # bound blockIdx.x
    allocate B.red: float32[32, 16] shared
      for i.inner in range(32):  # bound threadIdx.y
        for k.inner.v in range(16):  # bound threadIdx.x
          allocate B.rf: float32[1, 1] local
            if i.outer*32 + i.inner < n:
              B.rf[0, 0] = 0.0f
            if i.outer*32 + i.inner < n:
              for k.outer in range(ceildiv(m, 16)):
                if k.outer*16 + k.inner.v < m:
                  B.rf[0, 0] = B.rf[0, 0] + A[i.outer*32 + i.inner, k.outer*16 + k.inner.v]
            allocate B.acc: float32[1] local
              B.acc[0] = 0.0f
              if i.outer*32 + i.inner < n:
                B.acc[0] = B.acc[0] + B.rf[0, 0]
              B.red[i.inner, k.inner.v] = B.acc[0]
      barrier(shared)
      for i.inner in range(32):  # bound threadIdx.y
        for k.inner.v in range(16):  # bound threadIdx.x
          allocate B.v: float32[1] local
            B.v[0] = 0.0f
            for k.inner.v.t in range(16):
              B.v[0] = B.v[0] + B.red[i.inner, k.inner.v.t]
            if k.inner.v == 0 and i.outer*32 + i.inner < n:
              B[i.outer*32 + i.inner] = B.v[0]""",
    "storage_gpu": """\
# lowering mm
placement: A.shared (at C.local.r.outer, producer), B.shared (at C.local.r.outer, producer), A.shared.local (at C.local.r.inner, producer), B.shared.local (at C.local.r.inner, producer), C.local (at C.j.inner.outer, producer), C (root)
stages: A.shared, B.shared, A.shared.local, B.shared.local, C.local, C
domains:
  A.shared: region {ax0: [i.outer*32, +32), ax1: [r.outer*8, +8)} loops [ax0.ax1.fused.outer < 4, ax0.ax1.fused.inner.outer < 8, ax0.ax1.fused.inner.inner < 8] guards [ax0.ax1.fused.inner.outer*8 + ax0.ax1.fused.inner.inner < 64; ax0.ax1.fused.outer*64 + (ax0.ax1.fused.inner.outer*8 + ax0.ax1.fused.inner.inner) < 256; i.outer*32 + (ax0.ax1.fused.outer*64 + (ax0.ax1.fused.inner.outer*8 + ax0.ax1.fused.inner.inner)) // 8 < n; r.outer*8 + (ax0.ax1.fused.outer*64 + (ax0.ax1.fused.inner.outer*8 + ax0.ax1.fused.inner.inner)) % 8 < k]
  B.shared: region {ax0: [r.outer*8, +8), ax1: [j.outer*32, +32)} loops [ax0.ax1.fused.outer < 4, ax0.ax1.fused.inner.outer < 8, ax0.ax1.fused.inner.inner < 8] guards [ax0.ax1.fused.inner.outer_1*8 + ax0.ax1.fused.inner.inner_1 < 64; ax0.ax1.fused.outer_1*64 + (ax0.ax1.fused.inner.outer_1*8 + ax0.ax1.fused.inner.inner_1) < 256; r.outer*8 + (ax0.ax1.fused.outer_1*64 + (ax0.ax1.fused.inner.outer_1*8 + ax0.ax1.fused.inner.inner_1)) // 32 < k; j.outer*32 + (ax0.ax1.fused.outer_1*64 + (ax0.ax1.fused.inner.outer_1*8 + ax0.ax1.fused.inner.inner_1)) % 32 < m]
  A.shared.local: region {ax0: [i.outer*32 + i.inner.outer*4, +4), ax1: [r.outer*8 + r.inner, +1)} loops [ax0 < 4, ax1 < 1] guards [i.outer*32 + i.inner.outer*4 + ax0 < n; r.outer*8 + r.inner + ax1 < k]
  B.shared.local: region {ax0: [r.outer*8 + r.inner, +1), ax1: [j.outer*32 + j.inner.outer*4, +4)} loops [ax0 < 1, ax1 < 4] guards [r.outer*8 + r.inner + ax0_1 < k; j.outer*32 + j.inner.outer*4 + ax1_1 < m]
  C.local: region {i: [i.outer*32 + i.inner.outer*4, +4), j: [j.outer*32 + j.inner.outer*4, +4)} loops [r.outer < ceildiv(k, 8), r.inner < 8, i < 4, j < 4] guards [r.outer*8 + r.inner < k; i.outer*32 + i.inner.outer*4 + i < n; j.outer*32 + j.inner.outer*4 + j < m]
  C: region {i: [0, +n), j: [0, +m)} loops [i.outer < ceildiv(n, 32), j.outer < ceildiv(m, 32), i.inner.outer < 8, j.inner.outer < 8, i.inner.inner < 4, j.inner.inner < 4] guards [j.inner.outer*4 + j.inner.inner < 32; i.inner.outer*4 + i.inner.inner < 32; j.outer*32 + (j.inner.outer*4 + j.inner.inner) < m; i.outer*32 + (i.inner.outer*4 + i.inner.inner) < n]
bindings: n=shape(0, 0), k=shape(0, 1), m=shape(1, 1)
allocations:
  C.j.outer: A.shared float32[32, 8] shared
  C.j.outer: B.shared float32[8, 32] shared
  C.local.r.inner: A.shared.local float32[4, 1] local
  C.local.r.inner: B.shared.local float32[1, 4] local
  C.j.inner.outer: C.local float32[4, 4] local""",
    "sync": """\
def mm(A: float32[n, k], B: float32[k, m], C: float32[n, m]):
  for i.outer in range(ceildiv(n, 8)):  # bound blockIdx.y
    for j.outer in range(ceildiv(m, 8)):  # bound blockIdx.x
      for i.inner in range(8):  # bound threadIdx.y
        if i.outer*8 + i.inner < n:
          for j.inner in range(8):  # bound threadIdx.x
            if j.outer*8 + j.inner < m:
              C[i.outer*8 + i.inner, j.outer*8 + j.inner] = 0.0f
      for r.outer in range(ceildiv(k, 8)):
        barrier(shared)
        allocate A.shared: float32[8, 8] shared
        allocate B.shared: float32[8, 8] shared
          for ax0 in range(8):  # bound threadIdx.y
            if i.outer*8 + ax0 < n:
              for ax1 in range(8):  # bound threadIdx.x
                if r.outer*8 + ax1 < k:
                  A.shared[ax0, ax1] = A[i.outer*8 + ax0, r.outer*8 + ax1]
          for ax0_1 in range(8):  # bound threadIdx.y
            if r.outer*8 + ax0_1 < k:
              for ax1_1 in range(8):  # bound threadIdx.x
                if j.outer*8 + ax1_1 < m:
                  B.shared[ax0_1, ax1_1] = B[r.outer*8 + ax0_1, j.outer*8 + ax1_1]
          barrier(shared)
          for i.inner in range(8):  # bound threadIdx.y
            if i.outer*8 + i.inner < n:
              for j.inner in range(8):  # bound threadIdx.x
                if j.outer*8 + j.inner < m:
                  for r.inner in range(8):
                    if r.outer*8 + r.inner < k:
                      C[i.outer*8 + i.inner, j.outer*8 + j.inner] = C[i.outer*8 + i.inner, j.outer*8 + j.inner] + A.shared[i.inner, r.inner]*B.shared[r.inner, j.inner]""",
    "blocked_sums": """\
def rowsum(A: float32[n, m], B: float32[n]):
  for i in range(n):
    B[i] = 0.0f
    if ceildiv(m, 8) <= 128:
      for k.outer in range(ceildiv(m, 8)):
        for k.inner in range(8):
          if k.outer*8 + k.inner < m:
            B[i] = B[i] + A[i, k.outer*8 + k.inner]
    else:
      allocate B.comp: float32[] local
      allocate B.acc: float32[] local
        B.comp[()] = 0.0f
        for k.outer.blk in range(ceildiv(ceildiv(m, 8), 128)):
          B.acc[()] = 0.0f
          for k.outer in range(k.outer.blk*128, k.outer.blk*128 + min(128, ceildiv(m, 8) - k.outer.blk*128)):
            for k.inner in range(8):
              if k.outer*8 + k.inner < m:
                B.acc[()] = B.acc[()] + A[i, k.outer*8 + k.inner]
          let B.t = B[i] + B.acc[()]
          let B.e = select(abs(B[i]) >= abs(B.acc[()]), B[i] - B.t + B.acc[()], B.acc[()] - B.t + B[i])
          B.comp[()] = select(abs(B.e) < float32(inf), B.comp[()] + B.e, B.comp[()])
          B[i] = B.t
        B[i] = B[i] + B.comp[()]""",
    "device_kernels": """\
def rowsum(A: float32[n, m], B: float32[n]):
  kernel rowsum_kernel0<<<grid=(ceildiv(n, 32), 1, 1), block=(32, 1, 1)>>>:
    for i.outer in range(ceildiv(n, 32)):  # bound blockIdx.x
      for i.inner in range(32):  # bound threadIdx.x
        if i.outer*32 + i.inner < n:
          B[i.outer*32 + i.inner] = 0.0f
        if i.outer*32 + i.inner < n:
          for k in range(m):
            B[i.outer*32 + i.inner] = B[i.outer*32 + i.inner] + A[i.outer*32 + i.inner, k]""",
    "shared_layout": """\
def mm(A: float32[n, k], B: float32[k, m], C: float32[n, m]):
  for i.outer in range(ceildiv(n, 8)):  # bound blockIdx.y
    for j.outer in range(ceildiv(m, 8)):  # bound blockIdx.x
      if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0 and ceildiv(k, 8)*8 - k - 1 < 0:  # alternatives: else is the general copy
        for i.inner in range(8):  # bound threadIdx.y
          for j.inner in range(8):  # bound threadIdx.x
            C[i.outer*8 + i.inner, j.outer*8 + j.inner] = 0.0f
        for r.outer in range(ceildiv(k, 8)):
          barrier(shared)
          allocate A.shared: float32[8, 8] strides (12, 1) shared
          allocate B.shared: float32[8, 8] strides (12, 1) shared
            for ax0 in range(8):  # bound threadIdx.y
              for ax1 in range(8):  # bound threadIdx.x
                A.shared[ax0, ax1] = A[i.outer*8 + ax0, r.outer*8 + ax1]
            for ax0_1 in range(8):  # bound threadIdx.y
              for ax1_1 in range(8):  # bound threadIdx.x
                B.shared[ax0_1, ax1_1] = B[r.outer*8 + ax0_1, j.outer*8 + ax1_1]
            barrier(shared)
            for i.inner in range(8):  # bound threadIdx.y
              for j.inner in range(8):  # bound threadIdx.x
                for r.inner in range(8):
                  C[i.outer*8 + i.inner, j.outer*8 + j.inner] = C[i.outer*8 + i.inner, j.outer*8 + j.inner] + A.shared[i.inner, r.inner]*B.shared[r.inner, j.inner]
      else:
        if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0:  # alternatives: else is the general copy
          for i.inner in range(8):  # bound threadIdx.y
            for j.inner in range(8):  # bound threadIdx.x
              C[i.outer*8 + i.inner, j.outer*8 + j.inner] = 0.0f
          for r.outer in range(ceildiv(k, 8)):
            barrier(shared)
            allocate A.shared: float32[8, 8] strides (12, 1) shared
            allocate B.shared: float32[8, 8] strides (12, 1) shared
              for ax0 in range(8):  # bound threadIdx.y
                for ax1 in range(8):  # bound threadIdx.x
                  if r.outer*8 + ax1 < k:
                    A.shared[ax0, ax1] = A[i.outer*8 + ax0, r.outer*8 + ax1]
              for ax0_1 in range(8):  # bound threadIdx.y
                if r.outer*8 + ax0_1 < k:
                  for ax1_1 in range(8):  # bound threadIdx.x
                    B.shared[ax0_1, ax1_1] = B[r.outer*8 + ax0_1, j.outer*8 + ax1_1]
              barrier(shared)
              for i.inner in range(8):  # bound threadIdx.y
                for j.inner in range(8):  # bound threadIdx.x
                  for r.inner in range(8):
                    if r.outer*8 + r.inner < k:
                      C[i.outer*8 + i.inner, j.outer*8 + j.inner] = C[i.outer*8 + i.inner, j.outer*8 + j.inner] + A.shared[i.inner, r.inner]*B.shared[r.inner, j.inner]
        else:
          for i.inner in range(8):  # bound threadIdx.y
            if i.outer*8 + i.inner < n:
              for j.inner in range(8):  # bound threadIdx.x
                if j.outer*8 + j.inner < m:
                  C[i.outer*8 + i.inner, j.outer*8 + j.inner] = 0.0f
          for r.outer in range(ceildiv(k, 8)):
            barrier(shared)
            allocate A.shared: float32[8, 8] strides (12, 1) shared
            allocate B.shared: float32[8, 8] strides (12, 1) shared
              for ax0 in range(8):  # bound threadIdx.y
                if i.outer*8 + ax0 < n:
                  for ax1 in range(8):  # bound threadIdx.x
                    if r.outer*8 + ax1 < k:
                      A.shared[ax0, ax1] = A[i.outer*8 + ax0, r.outer*8 + ax1]
              for ax0_1 in range(8):  # bound threadIdx.y
                if r.outer*8 + ax0_1 < k:
                  for ax1_1 in range(8):  # bound threadIdx.x
                    if j.outer*8 + ax1_1 < m:
                      B.shared[ax0_1, ax1_1] = B[r.outer*8 + ax0_1, j.outer*8 + ax1_1]
              barrier(shared)
              for i.inner in range(8):  # bound threadIdx.y
                if i.outer*8 + i.inner < n:
                  for j.inner in range(8):  # bound threadIdx.x
                    if j.outer*8 + j.inner < m:
                      for r.inner in range(8):
                        if r.outer*8 + r.inner < k:
                          C[i.outer*8 + i.inner, j.outer*8 + j.inner] = C[i.outer*8 + i.inner, j.outer*8 + j.inner] + A.shared[i.inner, r.inner]*B.shared[r.inner, j.inner]""",
    "sequential_kernels": """\
def rowsum(A: float32[n, m], B: float32[n]):
  for i.outer in range(ceildiv(n, 32)):  # bound blockIdx.x
    for i.inner in range(32):  # bound threadIdx.x
      if i.outer*32 + i.inner < n:
        B[i.outer*32 + i.inner] = 0.0f
      if i.outer*32 + i.inner < n:
        for k in range(m):
          B[i.outer*32 + i.inner] = B[i.outer*32 + i.inner] + A[i.outer*32 + i.inner, k]""",
    "software_pipeline": """\
def mm(A: float32[n, k], B: float32[k, m], C: float32[n, m]):
  for i.outer in range(ceildiv(n, 4)):  # bound blockIdx.y
    for j.outer in range(ceildiv(m, 4)):  # bound blockIdx.x
      for i.inner in range(4):  # bound threadIdx.y
        if i.outer*4 + i.inner < n:
          for j.inner in range(4):  # bound threadIdx.x
            if j.outer*4 + j.inner < m:
              C[i.outer*4 + i.inner, j.outer*4 + j.inner] = 0.0f
      allocate A.shared: float32[2, 4, 4] shared, stages=2
        for ax0 in range(4):  # bound threadIdx.y
          if i.outer*4 + ax0 < n:
            for ax1 in range(4):  # bound threadIdx.x
              if ax1 < k:
                async_copy(A.shared[0, ax0, ax1], A[i.outer*4 + ax0, ax1], when=0 < ceildiv(k, 4))
        commit_group()
        for r.outer in range(ceildiv(k, 4)):
          for ax0 in range(4):  # bound threadIdx.y
            if i.outer*4 + ax0 < n:
              for ax1 in range(4):  # bound threadIdx.x
                if r.outer*4 + ax1 + 4 < k:
                  async_copy(A.shared[(r.outer + 1) % 2, ax0, ax1], A[i.outer*4 + ax0, r.outer*4 + ax1 + 4], when=r.outer + 1 < ceildiv(k, 4))
          commit_group()
          wait_group(1)
          barrier(shared)
          for i.inner in range(4):  # bound threadIdx.y
            if i.outer*4 + i.inner < n:
              for j.inner in range(4):  # bound threadIdx.x
                if j.outer*4 + j.inner < m:
                  for r.inner in range(4):
                    if r.outer*4 + r.inner < k:
                      C[i.outer*4 + i.inner, j.outer*4 + j.inner] = C[i.outer*4 + i.inner, j.outer*4 + j.inner] + A.shared[r.outer % 2, i.inner, r.inner]*B[r.outer*4 + r.inner, j.outer*4 + j.inner]
          barrier(shared)
        wait_group(0)""",
    "vthread": """\
def chain(A: float64[n], O: float64[n]):
  for j.outer in range(ceildiv(n, 8)):  # bound blockIdx.x
    for j.inner.inner in range(4):  # bound threadIdx.x
      if j.outer*8 + j.inner.inner < n:
        O[j.outer*8 + j.inner.inner] = (A[j.outer*8 + j.inner.inner]*2.0 + 1.0)*3.0
      if j.outer*8 + j.inner.inner + 4 < n:
        O[j.outer*8 + j.inner.inner + 4] = (A[j.outer*8 + j.inner.inner + 4]*2.0 + 1.0)*3.0""",
    "tensorize": """\
def mm16(A: float16[n, k], B: float16[k, m], C: float32[n, m]):
  for i.outer in range(ceildiv(n, 16)):  # bound blockIdx.y
    for j.outer in range(ceildiv(m, 16)):  # bound blockIdx.x
      for i.inner.outer in range(1):  # bound threadIdx.z
        for j.inner.outer in range(1):  # bound threadIdx.y
          allocate C.wmma.accumulator: float32[16, 16] wmma.accumulator
            for i.outer_1 in range(1):
              for j.outer_1 in range(1):
                wmma.fill(C.wmma.accumulator[i.outer_1*16:i.outer_1*16 + 16, j.outer_1*16:j.outer_1*16 + 16], 0.0f)
            for r.outer in range(ceildiv(k, 16)):
              allocate A.wmma.matrix_a: float16[16, 16] wmma.matrix_a
              allocate B.wmma.matrix_b: float16[16, 16] wmma.matrix_b
                for ax0.outer in range(1):
                  wmma.load_a(A.wmma.matrix_a[ax0.outer*16:ax0.outer*16 + 16, 0:16], A[i.outer*16 + i.inner.outer*16 + ax0.outer*16, r.outer*16], row_major, valid=(min(16 - ax0.outer*16, n - i.outer*16 - i.inner.outer*16 - ax0.outer*16), k - r.outer*16))
                for ax1.outer in range(1):
                  wmma.load_b(B.wmma.matrix_b[0:16, ax1.outer*16:ax1.outer*16 + 16], B[r.outer*16, j.outer*16 + j.inner.outer*16 + ax1.outer*16], row_major, valid=(k - r.outer*16, min(16 - ax1.outer*16, m - j.outer*16 - j.inner.outer*16 - ax1.outer*16)))
                for i.outer_1 in range(1):
                  for j.outer_1 in range(1):
                    wmma.mma(C.wmma.accumulator[i.outer_1*16:i.outer_1*16 + 16, j.outer_1*16:j.outer_1*16 + 16] = A.wmma.matrix_a[i.outer_1*16:i.outer_1*16 + 16, 0:16] @ B.wmma.matrix_b[0:16, j.outer_1*16:j.outer_1*16 + 16] + C.wmma.accumulator[i.outer_1*16:i.outer_1*16 + 16, j.outer_1*16:j.outer_1*16 + 16])  # 16x16x16
            for i.inner.inner.outer in range(1):
              for j.inner.inner.outer in range(1):
                wmma.store(C[i.outer*16 + i.inner.outer*16 + i.inner.inner.outer*16, j.outer*16 + j.inner.outer*16 + j.inner.inner.outer*16], C.wmma.accumulator[i.inner.inner.outer*16:i.inner.inner.outer*16 + 16, j.inner.inner.outer*16:j.inner.inner.outer*16 + 16], row_major, valid=(min(min(16 - i.inner.inner.outer*16, 16 - i.inner.outer*16 - i.inner.inner.outer*16), n - i.outer*16 - i.inner.outer*16 - i.inner.inner.outer*16), min(min(16 - j.inner.inner.outer*16, 16 - j.inner.outer*16 - j.inner.inner.outer*16), m - j.outer*16 - j.inner.outer*16 - j.inner.inner.outer*16)))""",
}
GOLDEN["pipeline_legality"] = GOLDEN["placement"]     # a check: the state passes unchanged
GOLDEN["lower_async_copies"] = GOLDEN["simplify"]      # nothing asynchronous in the chain
GOLDEN["interior_blocks"] = """\
def mm(A: float32[n, k], B: float32[k, m], C: float32[n, m]):
  for i.outer in range(ceildiv(n, 8)):  # bound blockIdx.y
    for j.outer in range(ceildiv(m, 8)):  # bound blockIdx.x
      if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0 and ceildiv(k, 8)*8 - k - 1 < 0:  # alternatives: else is the general copy
        for i.inner in range(8):  # bound threadIdx.y
          for j.inner in range(8):  # bound threadIdx.x
            C[i.outer*8 + i.inner, j.outer*8 + j.inner] = 0.0f
        for r.outer in range(ceildiv(k, 8)):
          barrier(shared)
          allocate A.shared: float32[8, 8] shared
          allocate B.shared: float32[8, 8] shared
            for ax0 in range(8):  # bound threadIdx.y
              for ax1 in range(8):  # bound threadIdx.x
                A.shared[ax0, ax1] = A[i.outer*8 + ax0, r.outer*8 + ax1]
            for ax0_1 in range(8):  # bound threadIdx.y
              for ax1_1 in range(8):  # bound threadIdx.x
                B.shared[ax0_1, ax1_1] = B[r.outer*8 + ax0_1, j.outer*8 + ax1_1]
            barrier(shared)
            for i.inner in range(8):  # bound threadIdx.y
              for j.inner in range(8):  # bound threadIdx.x
                for r.inner in range(8):
                  C[i.outer*8 + i.inner, j.outer*8 + j.inner] = C[i.outer*8 + i.inner, j.outer*8 + j.inner] + A.shared[i.inner, r.inner]*B.shared[r.inner, j.inner]
      else:
        if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0:  # alternatives: else is the general copy
          for i.inner in range(8):  # bound threadIdx.y
            for j.inner in range(8):  # bound threadIdx.x
              C[i.outer*8 + i.inner, j.outer*8 + j.inner] = 0.0f
          for r.outer in range(ceildiv(k, 8)):
            barrier(shared)
            allocate A.shared: float32[8, 8] shared
            allocate B.shared: float32[8, 8] shared
              for ax0 in range(8):  # bound threadIdx.y
                for ax1 in range(8):  # bound threadIdx.x
                  if r.outer*8 + ax1 < k:
                    A.shared[ax0, ax1] = A[i.outer*8 + ax0, r.outer*8 + ax1]
              for ax0_1 in range(8):  # bound threadIdx.y
                if r.outer*8 + ax0_1 < k:
                  for ax1_1 in range(8):  # bound threadIdx.x
                    B.shared[ax0_1, ax1_1] = B[r.outer*8 + ax0_1, j.outer*8 + ax1_1]
              barrier(shared)
              for i.inner in range(8):  # bound threadIdx.y
                for j.inner in range(8):  # bound threadIdx.x
                  for r.inner in range(8):
                    if r.outer*8 + r.inner < k:
                      C[i.outer*8 + i.inner, j.outer*8 + j.inner] = C[i.outer*8 + i.inner, j.outer*8 + j.inner] + A.shared[i.inner, r.inner]*B.shared[r.inner, j.inner]
        else:
          for i.inner in range(8):  # bound threadIdx.y
            if i.outer*8 + i.inner < n:
              for j.inner in range(8):  # bound threadIdx.x
                if j.outer*8 + j.inner < m:
                  C[i.outer*8 + i.inner, j.outer*8 + j.inner] = 0.0f
          for r.outer in range(ceildiv(k, 8)):
            barrier(shared)
            allocate A.shared: float32[8, 8] shared
            allocate B.shared: float32[8, 8] shared
              for ax0 in range(8):  # bound threadIdx.y
                if i.outer*8 + ax0 < n:
                  for ax1 in range(8):  # bound threadIdx.x
                    if r.outer*8 + ax1 < k:
                      A.shared[ax0, ax1] = A[i.outer*8 + ax0, r.outer*8 + ax1]
              for ax0_1 in range(8):  # bound threadIdx.y
                if r.outer*8 + ax0_1 < k:
                  for ax1_1 in range(8):  # bound threadIdx.x
                    if j.outer*8 + ax1_1 < m:
                      B.shared[ax0_1, ax1_1] = B[r.outer*8 + ax0_1, j.outer*8 + ax1_1]
              barrier(shared)
              for i.inner in range(8):  # bound threadIdx.y
                if i.outer*8 + i.inner < n:
                  for j.inner in range(8):  # bound threadIdx.x
                    if j.outer*8 + j.inner < m:
                      for r.inner in range(8):
                        if r.outer*8 + r.inner < k:
                          C[i.outer*8 + i.inner, j.outer*8 + j.inner] = C[i.outer*8 + i.inner, j.outer*8 + j.inner] + A.shared[i.inner, r.inner]*B.shared[r.inner, j.inner]"""
GOLDEN["full_thread_tiles"] = GOLDEN["interior_blocks"]   # thread bodies with barriers are not versioned


def test_the_table_lists_every_pass_in_order():
    core = ("placement", "pipeline_legality", "inline", "bound_inference", "storage", "loop_nests",
            "tensorize", "simplify", "software_pipeline", "vthread", "sync", "interior_blocks",
            "full_thread_tiles")
    assert P.PIPELINE.names() == core + ("shared_layout", "device_kernels")
    assert P.SEQUENTIAL.names() == core + ("sequential_kernels", "lower_cross_thread", "lower_async_copies",
                                          "blocked_sums")
    assert P.for_target("cuda") is P.PIPELINE
    assert P.for_target("cpu") is P.for_target("interp") is P.for_target(None) is P.SEQUENTIAL
    for p in P.PIPELINE.passes + P.SEQUENTIAL.passes:
        doc = __import__(p.fn.__module__, fromlist=["_"]).__doc__
        assert "Assumes" in doc and "Guarantees" in doc, p.name


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden_after_each_pass(case):
    graph_fn, sched_fn, stop = GOLDEN_CASES[case]
    table = GOLDEN_TABLE.get(case, P.SEQUENTIAL)
    assert str(state_after(graph_fn, sched_fn, stop, table)) == GOLDEN[case]


def test_every_pass_has_a_golden():
    assert {stop for _, _, stop in GOLDEN_CASES.values()} == set(P.PIPELINE.names()) | set(P.SEQUENTIAL.names())


@pytest.mark.parametrize("size", [0, 1, 7, 8, 13])
def test_chain_runs(size):
    a = np.random.default_rng().random(size)
    s = Schedule(chain_graph())
    chain_schedule(s)
    out = np.zeros(size)
    run_lowered(P.lower(s), [a], [out], [])
    np.testing.assert_allclose(out, (a * 2 + 1) * 3)


def test_lowered_func_has_typed_bindings_and_tensorize_requests():
    s = Schedule(rowsum_graph())
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    mma = kd.intrin.wmma(16, 16, 16)
    B.tensorize(ki, mma)
    # the request as loop_nests records it (the tensorize pass itself would refuse a row sum)
    f = P.lower(s, pipeline=P.SEQUENTIAL.replace("tensorize", P.Pass("tensorize", lambda f: f)))
    assert f.bindings == (n.Binding(n.BindingKind.SHAPE, 0, 0), n.Binding(n.BindingKind.SHAPE, 0, 1))
    (req,) = f.tensorize
    assert req.stage is B.stage and req.axis is ki and req.intrin is mma
    assert f.kernels == () and f.workspaces == () and set(f.attrs) == {"pass_times"}
    assert set(f.attrs["pass_times"]) == set(P.SEQUENTIAL.names())
    with pytest.raises(InternalCompilerError, match="typed fields"):
        n.LoweredFunc("f", (), (), (), f.body, {"bindings": ()})


RAN = []


def _mark(tag):
    def fn(func):
        RAN.append(tag)
        return func
    return fn


def test_insert_replace_append_by_name():
    base = P.SEQUENTIAL
    pipe = (base.insert_before("simplify", ("m1", _mark(1)))
                .insert_after("blocked_sums", P.Pass("m2", _mark(2)))
                .append(P.Pass("m3", _mark(3))))
    assert pipe.names()[5:] == ("loop_nests", "tensorize", "m1", "simplify", "software_pipeline", "vthread",
                                "sync", "interior_blocks", "full_thread_tiles", "sequential_kernels",
                                "lower_cross_thread",
                                "lower_async_copies", "blocked_sums", "m2", "m3")
    assert base.names() == P.SEQUENTIAL.names()            # edits never change the original
    assert base.remove("blocked_sums").names() == base.names()[:-1]
    RAN.clear()
    f = state_after(chain_graph, chain_schedule, None, pipe).func
    assert RAN == [1, 2, 3] and str(f) == str(P.lower(_chain()))
    # replacing a schedule-level pass: later passes see its result
    seen = []

    def my_storage(state):
        seen.append(state.domains is not None)
        return P.plan_storage(state)
    pipe = base.replace("storage", P.Pass("storage", my_storage, P.Level.SCHEDULE))
    assert str(state_after(chain_graph, chain_schedule, "loop_nests", pipe)) == GOLDEN["loop_nests"]
    assert seen == [True]
    # the IR passes of the replaced pipeline (here: simplify replaced by nothing useful)
    pipe = base.replace("simplify", P.Pass("simplify", lambda f: f))
    assert str(state_after(chain_graph, chain_schedule, "simplify", pipe)) == GOLDEN["loop_nests"]


def test_pipeline_errors_are_clear():
    with pytest.raises(P.PipelineError, match=r"no lowering pass named 'simplfy'; the pipeline has: placement"):
        P.PIPELINE.insert_after("simplfy", ("x", _mark(0)))
    with pytest.raises(P.PipelineError, match="no lowering pass named 'nope'"):
        P.PIPELINE.replace("nope", ("x", _mark(0)))
    with pytest.raises(P.PipelineError, match="two passes are named 'simplify'"):
        P.PIPELINE.append(("simplify", _mark(0)))
    with pytest.raises(P.PipelineError, match="schedule-level pass 'late' comes after IR pass 'tensorize'"):
        P.PIPELINE.append(P.Pass("late", lambda s: s, P.Level.SCHEDULE))
    with pytest.raises(P.PipelineError, match="schedule-level pass 'loop_nests' comes after IR pass 'early'"):
        P.PIPELINE.insert_before("loop_nests", ("early", _mark(0)))
    no_ir = P.PIPELINE.replace("loop_nests", P.Pass("loop_nests", lambda s: s, P.Level.SCHEDULE))
    with pytest.raises(P.PipelineError, match="IR pass 'tensorize' runs before any pass made the loop IR"):
        state_after(chain_graph, chain_schedule, None, no_ir)
    pipe = P.PIPELINE.replace("bound_inference", P.Pass("bound_inference", lambda s: s, P.Level.SCHEDULE))
    with pytest.raises(InternalCompilerError, match="'storage' needs the state's 'domains'"):
        state_after(chain_graph, chain_schedule, None, pipe)


def test_dump_passes_lists_every_pass(monkeypatch, capsys):
    monkeypatch.setenv("KDSL_DUMP", "passes")
    pipe = P.SEQUENTIAL.append(("extra", _mark(5)))
    state_after(chain_graph, chain_schedule, None, pipe)
    err = capsys.readouterr().err
    heads = [line[len("# ---- after "):] for line in err.splitlines() if line.startswith("# ---- after ")]
    assert heads == list(pipe.names())
    assert GOLDEN["bound_inference"] in err and GOLDEN["simplify"] in err


def test_config_reads_verify_and_dump(monkeypatch):
    from kdsl import config
    monkeypatch.delenv("KDSL_VERIFY", raising=False)
    assert config.verify()                      # under pytest
    monkeypatch.setenv("KDSL_VERIFY", "0")
    assert not config.verify()
    monkeypatch.setenv("KDSL_DUMP", "passes")
    assert config.dump_passes() and config.dump()
    monkeypatch.setenv("KDSL_DUMP", "1")
    assert not config.dump_passes() and config.dump()


def test_verify_runs_after_every_ir_pass(monkeypatch):
    monkeypatch.setenv("KDSL_VERIFY", "1")
    # a store to a buffer that is neither a parameter nor allocated
    bad = n.Store(n.Buffer("nowhere", dt.float64, (mk.as_expr(1),)), (mk.as_expr(0),), n.const(1.0, dt.float64))

    def breaks(func):
        return dataclasses.replace(func, body=n.Seq((bad, func.body)))
    with pytest.raises(InternalCompilerError):
        state_after(chain_graph, chain_schedule, None, P.SEQUENTIAL.append(("breaks", breaks)))
    monkeypatch.setenv("KDSL_VERIFY", "0")
    state_after(chain_graph, chain_schedule, None, P.SEQUENTIAL.append(("breaks", breaks)))
