"""The golden printouts of tests/passes/test_pipeline.py for its padded-tile matmul case
(``padded_matmul_graph`` with ``mm_padded_tiles``: a register-tiled GEMM fed by padded,
double-buffered shared tiles): the state after ``padded_compute`` (edge guards of the register
tile dropped) and after ``coalesced_fallbacks`` (each copy's element-by-element alternative).
``pipeline_goldens.GOLDEN`` includes them."""
# flake8: noqa: E501  (printed IR lines are as long as they print)

PADDED_GOLDEN = {}
PADDED_GOLDEN["padded_compute"] = """\
# lowering mm
placement: A.shared (at C.local.r.outer, producer), B.shared (at C.local.r.outer, producer), A.shared.local (at C.local.r.inner, producer), B.shared.local (at C.local.r.inner, producer), C.local (at C.j.inner.outer, producer), C (root)
stages: A.shared, B.shared, A.shared.local, B.shared.local, C.local, C
domains:
  A.shared: region {ax0: [i.outer*8, +8), ax1: [r.outer*8, +8)} loops [ax0.ax1.outer.fused.outer < 4, ax0.ax1.outer.fused.inner < 4, ax1.inner < 4] guards [ax0.ax1.outer.fused.outer*4 + ax0.ax1.outer.fused.inner < 16; ((ax0.ax1.outer.fused.outer*4 + ax0.ax1.outer.fused.inner) % 2)*4 + ax1.inner < 8]
  B.shared: region {ax0: [r.outer*8, +8), ax1: [j.outer*8, +8)} loops [ax0.ax1.outer.fused.outer < 4, ax0.ax1.outer.fused.inner < 4, ax1.inner < 4] guards [ax0.ax1.outer.fused.outer_1*4 + ax0.ax1.outer.fused.inner_1 < 16; ((ax0.ax1.outer.fused.outer_1*4 + ax0.ax1.outer.fused.inner_1) % 2)*4 + ax1.inner_1 < 8]
  A.shared.local: region {ax0: [i.outer*8 + i.inner.outer*2, +2), ax1: [r.outer*8 + r.inner, +1)} loops [ax0 < 2, ax1 < 1]
  B.shared.local: region {ax0: [r.outer*8 + r.inner, +1), ax1: [j.outer*8 + j.inner.outer*2, +2)} loops [ax0 < 1, ax1 < 2]
  C.local: region {i: [i.outer*8 + i.inner.outer*2, +2), j: [j.outer*8 + j.inner.outer*2, +2)} loops [r.outer < ceildiv(k, 8), r.inner < 8, i < 2, j < 2]
  C: region {i: [0, +n), j: [0, +m)} loops [i.outer < ceildiv(n, 8), j.outer < ceildiv(m, 8), i.inner.outer < 4, j.inner.outer < 4, i.inner.inner < 2, j.inner.inner < 2] guards [j.inner.outer*2 + j.inner.inner < 8; i.inner.outer*2 + i.inner.inner < 8; j.outer*8 + (j.inner.outer*2 + j.inner.inner) < m; i.outer*8 + (i.inner.outer*2 + i.inner.inner) < n]"""

PADDED_GOLDEN["coalesced_fallbacks"] = """\
def mm(A: float32[n, k], B: float32[k, m], C: float32[n, m]):
  for i.outer in range(ceildiv(n, 8)):  # bound blockIdx.y
    for j.outer in range(ceildiv(m, 8)):  # bound blockIdx.x
      allocate A.shared: float32[2, 8, 8] shared, stages=2
      allocate B.shared: float32[2, 8, 8] shared, stages=2
        if i.outer*8 - n + 7 < 0 and 7 - k < 0 and j.outer*8 - m + 7 < 0 and ceildiv(k, 8)*8 - k - 1 < 0:  # alternatives: else is right everywhere
          for i.inner.outer in range(4):  # bound threadIdx.y
            for j.inner.outer in range(4):  # bound threadIdx.x
              allocate C.local: float32[2, 2] local
                for i in range(2):
                  for j in range(2):
                    C.local[i, j] = 0.0f
                if True:  # alternatives: else is right everywhere
                  for ax0.ax1.outer.fused.outer in range(4):  # bound threadIdx.y
                    for ax0.ax1.outer.fused.inner in range(4):  # bound threadIdx.x
                      for ax1.inner in range(4):  # vectorized
                        async_copy(A.shared[0, ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], A[i.outer*8 + ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], when=0 < ceildiv(k, 8))
                else:
                  for ax0.ax1.outer.fused.outer_c in range(4):  # bound threadIdx.y
                    for ax0.ax1.outer.fused.inner_c in range(4):  # bound threadIdx.x
                      for ax1.inner_j in range(4):  # unrolled
                        async_copy(A.shared[0, ax1.inner_j*2 + ax0.ax1.outer.fused.outer_c // 2, (ax0.ax1.outer.fused.outer_c % 2)*4 + ax0.ax1.outer.fused.inner_c], A[i.outer*8 + ax1.inner_j*2 + ax0.ax1.outer.fused.outer_c // 2, (ax0.ax1.outer.fused.outer_c % 2)*4 + ax0.ax1.outer.fused.inner_c], when=0 < ceildiv(k, 8))
                if True:  # alternatives: else is right everywhere
                  for ax0.ax1.outer.fused.outer_1 in range(4):  # bound threadIdx.y
                    for ax0.ax1.outer.fused.inner_1 in range(4):  # bound threadIdx.x
                      for ax1.inner_1 in range(4):  # vectorized
                        async_copy(B.shared[0, ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], B[ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, j.outer*8 + (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], when=0 < ceildiv(k, 8))
                else:
                  for ax0.ax1.outer.fused.outer_c_1 in range(4):  # bound threadIdx.y
                    for ax0.ax1.outer.fused.inner_c_1 in range(4):  # bound threadIdx.x
                      for ax1.inner_j_1 in range(4):  # unrolled
                        async_copy(B.shared[0, ax1.inner_j_1*2 + ax0.ax1.outer.fused.outer_c_1 // 2, (ax0.ax1.outer.fused.outer_c_1 % 2)*4 + ax0.ax1.outer.fused.inner_c_1], B[ax1.inner_j_1*2 + ax0.ax1.outer.fused.outer_c_1 // 2, j.outer*8 + (ax0.ax1.outer.fused.outer_c_1 % 2)*4 + ax0.ax1.outer.fused.inner_c_1], when=0 < ceildiv(k, 8))
                commit_group()
                for r.outer in range(ceildiv(k, 8)):
                  if True:  # alternatives: else is right everywhere
                    for ax0.ax1.outer.fused.outer in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner in range(4):  # bound threadIdx.x
                        for ax1.inner in range(4):  # vectorized
                          async_copy(A.shared[(r.outer + 1) % 2, ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], A[i.outer*8 + ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, r.outer*8 + (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner + 8], when=r.outer + 1 < ceildiv(k, 8))
                  else:
                    for ax0.ax1.outer.fused.outer_c_2 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_c_2 in range(4):  # bound threadIdx.x
                        for ax1.inner_j_2 in range(4):  # unrolled
                          async_copy(A.shared[(r.outer + 1) % 2, ax1.inner_j_2*2 + ax0.ax1.outer.fused.outer_c_2 // 2, (ax0.ax1.outer.fused.outer_c_2 % 2)*4 + ax0.ax1.outer.fused.inner_c_2], A[i.outer*8 + ax1.inner_j_2*2 + ax0.ax1.outer.fused.outer_c_2 // 2, r.outer*8 + (ax0.ax1.outer.fused.outer_c_2 % 2)*4 + ax0.ax1.outer.fused.inner_c_2 + 8], when=r.outer + 1 < ceildiv(k, 8))
                  if True:  # alternatives: else is right everywhere
                    for ax0.ax1.outer.fused.outer_1 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_1 in range(4):  # bound threadIdx.x
                        for ax1.inner_1 in range(4):  # vectorized
                          async_copy(B.shared[(r.outer + 1) % 2, ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], B[r.outer*8 + ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2 + 8, j.outer*8 + (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], when=r.outer + 1 < ceildiv(k, 8))
                  else:
                    for ax0.ax1.outer.fused.outer_c_3 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_c_3 in range(4):  # bound threadIdx.x
                        for ax1.inner_j_3 in range(4):  # unrolled
                          async_copy(B.shared[(r.outer + 1) % 2, ax1.inner_j_3*2 + ax0.ax1.outer.fused.outer_c_3 // 2, (ax0.ax1.outer.fused.outer_c_3 % 2)*4 + ax0.ax1.outer.fused.inner_c_3], B[r.outer*8 + ax1.inner_j_3*2 + ax0.ax1.outer.fused.outer_c_3 // 2 + 8, j.outer*8 + (ax0.ax1.outer.fused.outer_c_3 % 2)*4 + ax0.ax1.outer.fused.inner_c_3], when=r.outer + 1 < ceildiv(k, 8))
                  commit_group()
                  wait_group(1)
                  barrier(shared)
                  for r.inner in range(8):
                    allocate A.shared.local: float32[2, 1] local
                    allocate B.shared.local: float32[1, 2] local
                      for ax0 in range(2):
                        A.shared.local[ax0, 0] = A.shared[r.outer % 2, i.inner.outer*2 + ax0, r.inner]
                      for ax1 in range(2):
                        B.shared.local[0, ax1] = B.shared[r.outer % 2, r.inner, j.inner.outer*2 + ax1]
                      for i in range(2):
                        for j in range(2):
                          C.local[i, j] = C.local[i, j] + A.shared.local[i, 0]*B.shared.local[0, j]
                  barrier(shared)
                wait_group(0)
                for i.inner.inner in range(2):
                  for j.inner.inner in range(2):
                    C[i.outer*8 + i.inner.outer*2 + i.inner.inner, j.outer*8 + j.inner.outer*2 + j.inner.inner] = C.local[i.inner.inner, j.inner.inner]
        else:
          if i.outer*8 - n + 7 < 0 and j.outer*8 - m + 7 < 0:  # alternatives: else is right everywhere
            for i.inner.outer in range(4):  # bound threadIdx.y
              for j.inner.outer in range(4):  # bound threadIdx.x
                allocate C.local: float32[2, 2] local
                  for i in range(2):
                    for j in range(2):
                      C.local[i, j] = 0.0f
                  if True:  # alternatives: else is right everywhere
                    for ax0.ax1.outer.fused.outer in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner in range(4):  # bound threadIdx.x
                        for ax1.inner in range(4):  # vectorized
                          async_copy(A.shared[0, ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], A[i.outer*8 + ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], when=(ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner < k and 0 < ceildiv(k, 8))
                  else:
                    for ax0.ax1.outer.fused.outer_c_4 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_c_4 in range(4):  # bound threadIdx.x
                        for ax1.inner_j_4 in range(4):  # unrolled
                          async_copy(A.shared[0, ax1.inner_j_4*2 + ax0.ax1.outer.fused.outer_c_4 // 2, (ax0.ax1.outer.fused.outer_c_4 % 2)*4 + ax0.ax1.outer.fused.inner_c_4], A[i.outer*8 + ax1.inner_j_4*2 + ax0.ax1.outer.fused.outer_c_4 // 2, (ax0.ax1.outer.fused.outer_c_4 % 2)*4 + ax0.ax1.outer.fused.inner_c_4], when=(ax0.ax1.outer.fused.outer_c_4 % 2)*4 + ax0.ax1.outer.fused.inner_c_4 < k and 0 < ceildiv(k, 8))
                  if True:  # alternatives: else is right everywhere
                    for ax0.ax1.outer.fused.outer_1 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_1 in range(4):  # bound threadIdx.x
                        for ax1.inner_1 in range(4):  # vectorized
                          async_copy(B.shared[0, ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], B[ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, j.outer*8 + (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], when=ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2 < k and 0 < ceildiv(k, 8))
                  else:
                    for ax0.ax1.outer.fused.outer_c_5 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_c_5 in range(4):  # bound threadIdx.x
                        for ax1.inner_j_5 in range(4):  # unrolled
                          async_copy(B.shared[0, ax1.inner_j_5*2 + ax0.ax1.outer.fused.outer_c_5 // 2, (ax0.ax1.outer.fused.outer_c_5 % 2)*4 + ax0.ax1.outer.fused.inner_c_5], B[ax1.inner_j_5*2 + ax0.ax1.outer.fused.outer_c_5 // 2, j.outer*8 + (ax0.ax1.outer.fused.outer_c_5 % 2)*4 + ax0.ax1.outer.fused.inner_c_5], when=ax1.inner_j_5*2 + ax0.ax1.outer.fused.outer_c_5 // 2 < k and 0 < ceildiv(k, 8))
                  commit_group()
                  for r.outer in range(ceildiv(k, 8)):
                    if True:  # alternatives: else is right everywhere
                      for ax0.ax1.outer.fused.outer in range(4):  # bound threadIdx.y
                        for ax0.ax1.outer.fused.inner in range(4):  # bound threadIdx.x
                          for ax1.inner in range(4):  # vectorized
                            async_copy(A.shared[(r.outer + 1) % 2, ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], A[i.outer*8 + ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, r.outer*8 + (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner + 8], when=r.outer*8 + (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner + 8 < k and r.outer + 1 < ceildiv(k, 8))
                    else:
                      for ax0.ax1.outer.fused.outer_c_6 in range(4):  # bound threadIdx.y
                        for ax0.ax1.outer.fused.inner_c_6 in range(4):  # bound threadIdx.x
                          for ax1.inner_j_6 in range(4):  # unrolled
                            async_copy(A.shared[(r.outer + 1) % 2, ax1.inner_j_6*2 + ax0.ax1.outer.fused.outer_c_6 // 2, (ax0.ax1.outer.fused.outer_c_6 % 2)*4 + ax0.ax1.outer.fused.inner_c_6], A[i.outer*8 + ax1.inner_j_6*2 + ax0.ax1.outer.fused.outer_c_6 // 2, r.outer*8 + (ax0.ax1.outer.fused.outer_c_6 % 2)*4 + ax0.ax1.outer.fused.inner_c_6 + 8], when=r.outer*8 + (ax0.ax1.outer.fused.outer_c_6 % 2)*4 + ax0.ax1.outer.fused.inner_c_6 + 8 < k and r.outer + 1 < ceildiv(k, 8))
                    if True:  # alternatives: else is right everywhere
                      for ax0.ax1.outer.fused.outer_1 in range(4):  # bound threadIdx.y
                        for ax0.ax1.outer.fused.inner_1 in range(4):  # bound threadIdx.x
                          for ax1.inner_1 in range(4):  # vectorized
                            async_copy(B.shared[(r.outer + 1) % 2, ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], B[r.outer*8 + ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2 + 8, j.outer*8 + (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], when=r.outer*8 + ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2 + 8 < k and r.outer + 1 < ceildiv(k, 8))
                    else:
                      for ax0.ax1.outer.fused.outer_c_7 in range(4):  # bound threadIdx.y
                        for ax0.ax1.outer.fused.inner_c_7 in range(4):  # bound threadIdx.x
                          for ax1.inner_j_7 in range(4):  # unrolled
                            async_copy(B.shared[(r.outer + 1) % 2, ax1.inner_j_7*2 + ax0.ax1.outer.fused.outer_c_7 // 2, (ax0.ax1.outer.fused.outer_c_7 % 2)*4 + ax0.ax1.outer.fused.inner_c_7], B[r.outer*8 + ax1.inner_j_7*2 + ax0.ax1.outer.fused.outer_c_7 // 2 + 8, j.outer*8 + (ax0.ax1.outer.fused.outer_c_7 % 2)*4 + ax0.ax1.outer.fused.inner_c_7], when=r.outer*8 + ax1.inner_j_7*2 + ax0.ax1.outer.fused.outer_c_7 // 2 + 8 < k and r.outer + 1 < ceildiv(k, 8))
                    commit_group()
                    wait_group(1)
                    barrier(shared)
                    for r.inner in range(8):
                      allocate A.shared.local: float32[2, 1] local
                      allocate B.shared.local: float32[1, 2] local
                        for ax0 in range(2):
                          A.shared.local[ax0, 0] = A.shared[r.outer % 2, i.inner.outer*2 + ax0, r.inner]
                        for ax1 in range(2):
                          B.shared.local[0, ax1] = B.shared[r.outer % 2, r.inner, j.inner.outer*2 + ax1]
                        for i in range(2):
                          for j in range(2):
                            C.local[i, j] = C.local[i, j] + A.shared.local[i, 0]*B.shared.local[0, j]
                    barrier(shared)
                  wait_group(0)
                  for i.inner.inner in range(2):
                    for j.inner.inner in range(2):
                      C[i.outer*8 + i.inner.outer*2 + i.inner.inner, j.outer*8 + j.inner.outer*2 + j.inner.inner] = C.local[i.inner.inner, j.inner.inner]
          else:
            for i.inner.outer in range(4):  # bound threadIdx.y
              for j.inner.outer in range(4):  # bound threadIdx.x
                allocate C.local: float32[2, 2] local
                  for i in range(2):
                    for j in range(2):
                      C.local[i, j] = 0.0f
                  if True:  # alternatives: else is right everywhere
                    for ax0.ax1.outer.fused.outer in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner in range(4):  # bound threadIdx.x
                        for ax1.inner in range(4):  # vectorized
                          async_copy(A.shared[0, ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], A[i.outer*8 + ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], when=i.outer*8 + ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2 < n and (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner < k and 0 < ceildiv(k, 8))
                  else:
                    for ax0.ax1.outer.fused.outer_c_8 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_c_8 in range(4):  # bound threadIdx.x
                        for ax1.inner_j_8 in range(4):  # unrolled
                          async_copy(A.shared[0, ax1.inner_j_8*2 + ax0.ax1.outer.fused.outer_c_8 // 2, (ax0.ax1.outer.fused.outer_c_8 % 2)*4 + ax0.ax1.outer.fused.inner_c_8], A[i.outer*8 + ax1.inner_j_8*2 + ax0.ax1.outer.fused.outer_c_8 // 2, (ax0.ax1.outer.fused.outer_c_8 % 2)*4 + ax0.ax1.outer.fused.inner_c_8], when=i.outer*8 + ax1.inner_j_8*2 + ax0.ax1.outer.fused.outer_c_8 // 2 < n and (ax0.ax1.outer.fused.outer_c_8 % 2)*4 + ax0.ax1.outer.fused.inner_c_8 < k and 0 < ceildiv(k, 8))
                  if True:  # alternatives: else is right everywhere
                    for ax0.ax1.outer.fused.outer_1 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_1 in range(4):  # bound threadIdx.x
                        for ax1.inner_1 in range(4):  # vectorized
                          async_copy(B.shared[0, ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], B[ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, j.outer*8 + (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], when=ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2 < k and j.outer*8 + (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1 < m and 0 < ceildiv(k, 8))
                  else:
                    for ax0.ax1.outer.fused.outer_c_9 in range(4):  # bound threadIdx.y
                      for ax0.ax1.outer.fused.inner_c_9 in range(4):  # bound threadIdx.x
                        for ax1.inner_j_9 in range(4):  # unrolled
                          async_copy(B.shared[0, ax1.inner_j_9*2 + ax0.ax1.outer.fused.outer_c_9 // 2, (ax0.ax1.outer.fused.outer_c_9 % 2)*4 + ax0.ax1.outer.fused.inner_c_9], B[ax1.inner_j_9*2 + ax0.ax1.outer.fused.outer_c_9 // 2, j.outer*8 + (ax0.ax1.outer.fused.outer_c_9 % 2)*4 + ax0.ax1.outer.fused.inner_c_9], when=ax1.inner_j_9*2 + ax0.ax1.outer.fused.outer_c_9 // 2 < k and j.outer*8 + (ax0.ax1.outer.fused.outer_c_9 % 2)*4 + ax0.ax1.outer.fused.inner_c_9 < m and 0 < ceildiv(k, 8))
                  commit_group()
                  for r.outer in range(ceildiv(k, 8)):
                    if True:  # alternatives: else is right everywhere
                      for ax0.ax1.outer.fused.outer in range(4):  # bound threadIdx.y
                        for ax0.ax1.outer.fused.inner in range(4):  # bound threadIdx.x
                          for ax1.inner in range(4):  # vectorized
                            async_copy(A.shared[(r.outer + 1) % 2, ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner], A[i.outer*8 + ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2, r.outer*8 + (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner + 8], when=i.outer*8 + ax0.ax1.outer.fused.outer*2 + ax0.ax1.outer.fused.inner // 2 < n and r.outer*8 + (ax0.ax1.outer.fused.inner % 2)*4 + ax1.inner + 8 < k and r.outer + 1 < ceildiv(k, 8))
                    else:
                      for ax0.ax1.outer.fused.outer_c_10 in range(4):  # bound threadIdx.y
                        for ax0.ax1.outer.fused.inner_c_10 in range(4):  # bound threadIdx.x
                          for ax1.inner_j_10 in range(4):  # unrolled
                            async_copy(A.shared[(r.outer + 1) % 2, ax1.inner_j_10*2 + ax0.ax1.outer.fused.outer_c_10 // 2, (ax0.ax1.outer.fused.outer_c_10 % 2)*4 + ax0.ax1.outer.fused.inner_c_10], A[i.outer*8 + ax1.inner_j_10*2 + ax0.ax1.outer.fused.outer_c_10 // 2, r.outer*8 + (ax0.ax1.outer.fused.outer_c_10 % 2)*4 + ax0.ax1.outer.fused.inner_c_10 + 8], when=i.outer*8 + ax1.inner_j_10*2 + ax0.ax1.outer.fused.outer_c_10 // 2 < n and r.outer*8 + (ax0.ax1.outer.fused.outer_c_10 % 2)*4 + ax0.ax1.outer.fused.inner_c_10 + 8 < k and r.outer + 1 < ceildiv(k, 8))
                    if True:  # alternatives: else is right everywhere
                      for ax0.ax1.outer.fused.outer_1 in range(4):  # bound threadIdx.y
                        for ax0.ax1.outer.fused.inner_1 in range(4):  # bound threadIdx.x
                          for ax1.inner_1 in range(4):  # vectorized
                            async_copy(B.shared[(r.outer + 1) % 2, ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2, (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], B[r.outer*8 + ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2 + 8, j.outer*8 + (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1], when=r.outer*8 + ax0.ax1.outer.fused.outer_1*2 + ax0.ax1.outer.fused.inner_1 // 2 + 8 < k and j.outer*8 + (ax0.ax1.outer.fused.inner_1 % 2)*4 + ax1.inner_1 < m and r.outer + 1 < ceildiv(k, 8))
                    else:
                      for ax0.ax1.outer.fused.outer_c_11 in range(4):  # bound threadIdx.y
                        for ax0.ax1.outer.fused.inner_c_11 in range(4):  # bound threadIdx.x
                          for ax1.inner_j_11 in range(4):  # unrolled
                            async_copy(B.shared[(r.outer + 1) % 2, ax1.inner_j_11*2 + ax0.ax1.outer.fused.outer_c_11 // 2, (ax0.ax1.outer.fused.outer_c_11 % 2)*4 + ax0.ax1.outer.fused.inner_c_11], B[r.outer*8 + ax1.inner_j_11*2 + ax0.ax1.outer.fused.outer_c_11 // 2 + 8, j.outer*8 + (ax0.ax1.outer.fused.outer_c_11 % 2)*4 + ax0.ax1.outer.fused.inner_c_11], when=r.outer*8 + ax1.inner_j_11*2 + ax0.ax1.outer.fused.outer_c_11 // 2 + 8 < k and j.outer*8 + (ax0.ax1.outer.fused.outer_c_11 % 2)*4 + ax0.ax1.outer.fused.inner_c_11 < m and r.outer + 1 < ceildiv(k, 8))
                    commit_group()
                    wait_group(1)
                    barrier(shared)
                    for r.inner in range(8):
                      allocate A.shared.local: float32[2, 1] local
                      allocate B.shared.local: float32[1, 2] local
                        for ax0 in range(2):
                          A.shared.local[ax0, 0] = A.shared[r.outer % 2, i.inner.outer*2 + ax0, r.inner]
                        for ax1 in range(2):
                          B.shared.local[0, ax1] = B.shared[r.outer % 2, r.inner, j.inner.outer*2 + ax1]
                        for i in range(2):
                          for j in range(2):
                            C.local[i, j] = C.local[i, j] + A.shared.local[i, 0]*B.shared.local[0, j]
                    barrier(shared)
                  wait_group(0)
                  for i.inner.inner in range(2):
                    if i.outer*8 + i.inner.outer*2 + i.inner.inner < n:
                      for j.inner.inner in range(2):
                        if j.outer*8 + j.inner.outer*2 + j.inner.inner < m:
                          C[i.outer*8 + i.inner.outer*2 + i.inner.inner, j.outer*8 + j.inner.outer*2 + j.inner.inner] = C.local[i.inner.inner, j.inner.inner]"""
