"""The golden printout of the GPU tile scan after its pass (tests/passes/test_pipeline.py)."""
# flake8: noqa: E501  (printed IR lines are as long as they print)

SCAN_GOLDEN = {
    "scan_tiles": """\
def <lambda>(x: float32[n], cumsum: float32[n]):
  allocate cumsum.part: float32[ceildiv(n, 64)] global
  allocate cumsum.carry: float32[ceildiv(n, 64)] global
    for i0.block in range(ceildiv(n, 64)):  # bound blockIdx.x
      for i0.elem.inner in range(32):  # bound threadIdx.x
        allocate cumsum.part.acc: float32[1] local
        allocate cumsum.part.v: float32[1] local
          cumsum.part.acc[0] = 0.0f
          for i0.elem.outer in range(2):  # unrolled
            if i0.elem.outer*32 + i0.elem.inner < 64 and i0.block*64 + (i0.elem.outer*32 + i0.elem.inner) < n:
              cumsum.part.acc[0] = cumsum.part.acc[0] + x[i0.block*64 + (i0.elem.outer*32 + i0.elem.inner)]
          cumsum.part.v[0] = cross_thread_scan_sum(cumsum.part.acc[0]; over threadIdx.x)
          if i0.elem.inner == 0:
            cumsum.part[i0.block] = cumsum.part.v[0]
    for i0.block.outer in range(1):  # bound blockIdx.x
      allocate cumsum.carry.tile: float32[32] shared
      allocate cumsum.carry.totals: float32[32] shared
        for i0.block.lane in range(32):  # bound threadIdx.x
          for i0.block.row in range(1):  # unrolled
            if i0.block.row*32 + i0.block.lane < min(ceildiv(n, 64), ceildiv(n, 64) - (i0.block.outer*ceildiv(n, 64) + 0)):
              cumsum.carry.tile[i0.block.row*32 + i0.block.lane] = cumsum.part[i0.block.outer*ceildiv(n, 64) + (i0.block.row*32 + i0.block.lane)]
        for i0.block.lane in range(32):  # bound threadIdx.x
          allocate cumsum.carry.run: float32[1] local
            cumsum.carry.run[0] = cumsum.carry.tile[min(i0.block.lane, min(ceildiv(n, 64), ceildiv(n, 64) - (i0.block.outer*ceildiv(n, 64) + 0)) - 1)]
            for i0.block.elem in range(1, 1):  # unrolled
              if i0.block.lane + i0.block.elem < min(ceildiv(n, 64), ceildiv(n, 64) - (i0.block.outer*ceildiv(n, 64) + 0)):
                cumsum.carry.run[0] = cumsum.carry.run[0] + cumsum.carry.tile[i0.block.lane + i0.block.elem]
            allocate cumsum.carry.scan: float32[1] local
              cumsum.carry.scan[0] = cross_thread_scan_scan_sum(cumsum.carry.run[0]; over threadIdx.x)
              cumsum.carry.totals[i0.block.lane] = cumsum.carry.scan[0]
        for i0.block.lane in range(32):  # bound threadIdx.x
          if i0.block.lane < min(ceildiv(n, 64), ceildiv(n, 64) - (i0.block.outer*ceildiv(n, 64) + 0)):
            allocate cumsum.carry.carry: float32[1] local
              if i0.block.lane == 0:
                cumsum.carry.carry[0] = cumsum.carry.tile[i0.block.lane]
              else:
                cumsum.carry.carry[0] = cumsum.carry.totals[max(i0.block.lane - 1, 0)] + cumsum.carry.tile[i0.block.lane]
              cumsum.carry.tile[i0.block.lane] = cumsum.carry.carry[0]
              for i0.block.elem in range(1, 1):  # unrolled
                if i0.block.lane + i0.block.elem < min(ceildiv(n, 64), ceildiv(n, 64) - (i0.block.outer*ceildiv(n, 64) + 0)):
                  cumsum.carry.carry[0] = cumsum.carry.carry[0] + cumsum.carry.tile[i0.block.lane + i0.block.elem]
                  cumsum.carry.tile[i0.block.lane + i0.block.elem] = cumsum.carry.carry[0]
        for i0.block.lane in range(32):  # bound threadIdx.x
          for i0.block.row in range(1):  # unrolled
            if i0.block.row*32 + i0.block.lane < min(ceildiv(n, 64), ceildiv(n, 64) - (i0.block.outer*ceildiv(n, 64) + 0)):
              cumsum.carry[i0.block.outer*ceildiv(n, 64) + (i0.block.row*32 + i0.block.lane)] = cumsum.carry.tile[i0.block.row*32 + i0.block.lane]
    for i0.outer in range(ceildiv(n, 64)):  # bound blockIdx.x
      allocate cumsum.tile: float32[96] shared
      allocate cumsum.totals: float32[32] shared
        for i0.lane in range(32):  # bound threadIdx.x
          for i0.row in range(3):  # unrolled
            if i0.row*32 + i0.lane < min(64, n - (i0.outer*64 + 0)):
              cumsum.tile[i0.row*32 + i0.lane] = x[i0.outer*64 + (i0.row*32 + i0.lane)]
        for i0.lane in range(32):  # bound threadIdx.x
          allocate cumsum.run: float32[1] local
            cumsum.run[0] = cumsum.tile[min(i0.lane*3, min(64, n - (i0.outer*64 + 0)) - 1)]
            for i0.elem in range(1, 3):  # unrolled
              if i0.lane*3 + i0.elem < min(64, n - (i0.outer*64 + 0)):
                cumsum.run[0] = cumsum.run[0] + cumsum.tile[i0.lane*3 + i0.elem]
            allocate cumsum.scan: float32[1] local
              cumsum.scan[0] = cross_thread_scan_scan_sum(cumsum.run[0]; over threadIdx.x)
              cumsum.totals[i0.lane] = cumsum.scan[0]
        for i0.lane in range(32):  # bound threadIdx.x
          if i0.lane*3 < min(64, n - (i0.outer*64 + 0)):
            allocate cumsum.carry_1: float32[1] local
              if i0.lane == 0:
                cumsum.carry_1[0] = select((i0.outer*64 + 0) // 64 < 1, cumsum.tile[i0.lane*3], cumsum.carry[max((i0.outer*64 + 0) // 64 - 1, 0)] + cumsum.tile[i0.lane*3])
              else:
                cumsum.carry_1[0] = select((i0.outer*64 + 0) // 64 < 1, cumsum.totals[max(i0.lane - 1, 0)], cumsum.carry[max((i0.outer*64 + 0) // 64 - 1, 0)] + cumsum.totals[max(i0.lane - 1, 0)]) + cumsum.tile[i0.lane*3]
              cumsum.tile[i0.lane*3] = cumsum.carry_1[0]
              for i0.elem in range(1, 3):  # unrolled
                if i0.lane*3 + i0.elem < min(64, n - (i0.outer*64 + 0)):
                  cumsum.carry_1[0] = cumsum.carry_1[0] + cumsum.tile[i0.lane*3 + i0.elem]
                  cumsum.tile[i0.lane*3 + i0.elem] = cumsum.carry_1[0]
        for i0.lane in range(32):  # bound threadIdx.x
          for i0.row in range(3):  # unrolled
            if i0.row*32 + i0.lane < min(64, n - (i0.outer*64 + 0)):
              cumsum[i0.outer*64 + (i0.row*32 + i0.lane)] = cumsum.tile[i0.row*32 + i0.lane]""",
}
