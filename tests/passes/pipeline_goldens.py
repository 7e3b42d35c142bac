"""The golden printouts of tests/passes/test_pipeline.py: the state after each pass of its
case (``GOLDEN_CASES`` there), as ``str(state)`` prints it."""
# flake8: noqa: E501  (printed IR lines are as long as they print)

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
      if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0 and ceildiv(k, 8)*8 - k - 1 < 0:  # alternatives: else is right everywhere
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
        if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0:  # alternatives: else is right everywhere
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
    "async_copies": """\
def rowsum(A: float32[n, m], B: float32[n]):
  for i in range(n):  # bound blockIdx.x
    allocate A.shared: float32[1, ceildiv(m, 32)*32] shared
      for ax1.inner in range(32):  # bound threadIdx.x
        for ax1.outer in range(ceildiv(m, 32)):
          if ax1.outer*32 + ax1.inner < m:
            async_copy(A.shared[0, ax1.outer*32 + ax1.inner], A[i, ax1.outer*32 + ax1.inner])
      commit_group()
      wait_group(0)
      for k.inner in range(32):  # bound threadIdx.x
        allocate B.acc: float32[1] local
        allocate B.v: float32[1] local
          B.acc[0] = 0.0f
          for k.outer in range(ceildiv(m, 32)):
            if k.outer*32 + k.inner < m:
              B.acc[0] = B.acc[0] + A.shared[0, k.outer*32 + k.inner]
          B.v[0] = cross_thread_sum(B.acc[0]; over threadIdx.x)
          if k.inner == 0:
            B[i] = B.v[0]""",
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
GOLDEN["scan_legality"] = "# lowering chain"           # first: no scan in the chain, nothing placed yet
GOLDEN["lower_async_copies"] = GOLDEN["simplify"]      # nothing asynchronous in the chain
GOLDEN["interior_blocks"] = """\
def mm(A: float32[n, k], B: float32[k, m], C: float32[n, m]):
  for i.outer in range(ceildiv(n, 8)):  # bound blockIdx.y
    for j.outer in range(ceildiv(m, 8)):  # bound blockIdx.x
      if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0 and ceildiv(k, 8)*8 - k - 1 < 0:  # alternatives: else is right everywhere
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
        if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0:  # alternatives: else is right everywhere
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
""" + "\n".join(
    "    " + line for line in GOLDEN["sync"].splitlines()[3:])   # the general copy: as after sync
GOLDEN["full_thread_tiles"] = GOLDEN["interior_blocks"]   # thread bodies with barriers are not versioned

from pipeline_goldens_padded import PADDED_GOLDEN  # noqa: E402  (the padded-tile matmul case)

GOLDEN.update(PADDED_GOLDEN)

from pipeline_goldens_scan import SCAN_GOLDEN  # noqa: E402  (the GPU tile scan)

GOLDEN.update(SCAN_GOLDEN)
