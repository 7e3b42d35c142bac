#!/usr/bin/env python3
"""CPU model (numpy) of what wgmma reads from shared memory, used to cross-check the copy
mappings of wg0/wg1/wg2 against the PTX ISA canonical layouts (9.7.15.5.1.2.1.3) + descriptor
fields + 128B swizzle (Swizzle<3,4,3> on absolute byte addresses: bits[4:6] ^= bits[7:9]).
It checks one block tile, one K step (4 x k16), both warpgroups.  No GPU needed:  python3 sim.py
What it cannot check: the hardware itself, the accumulator fragment layout, the pipeline."""
import numpy as np

SMEM = 1 << 18
SWZ = {0: None, 1: 128}


def sw128(addr):
    return addr ^ (((addr >> 7) & 7) << 4)


def decode(desc):
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    base_off = (desc >> 49) & 7
    swz = (desc >> 62) & 3
    assert base_off == 0
    return start, lbo, sbo, swz


def make_desc(saddr, lbo, sbo, swz):
    return ((saddr & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16) | (((sbo & 0x3FFFF) >> 4) << 32) | (swz << 62)


def read_k_major(smem, desc, rows):
    """rows x 16 operand, K-major (A, or B with imm-trans-b = 0)."""
    start, lbo, sbo, swz = decode(desc)
    out = np.zeros((rows, 16), np.float32)
    for r in range(rows):
        r0, r1 = r % 8, r // 8
        for k in range(16):
            c0, c1 = k % 8, k // 8
            if swz == 0:   # ((8,m),(T,2k)):((1T,SBO),(1,LBO))
                off = r0 * 16 + r1 * sbo + c0 * 2 + c1 * lbo
                addr = start + off
            elif swz == 1:  # ((8,m),(T,2k)):((8T,SBO),(1,T)), then Swizzle<3,4,3>
                off = r0 * 128 + r1 * sbo + c0 * 2 + c1 * 16
                addr = sw128(start + off)
            else:
                raise NotImplementedError
            out[r, k] = smem[addr // 2]
    return out


def read_mn_major(smem, desc, cols):
    """16 x cols operand (B with imm-trans-b = 1), N-major."""
    start, lbo, sbo, swz = decode(desc)
    out = np.zeros((16, cols), np.float32)
    for k in range(16):
        k0, k1 = k % 8, k // 8
        for n in range(cols):
            if swz == 0:   # ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
                n0, n2 = n % 8, n // 8
                off = n0 * 2 + n2 * sbo + k0 * 16 + k1 * lbo
                addr = start + off
            elif swz == 1:  # ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)), then Swizzle<3,4,3>
                n0, n1, n2 = n % 8, (n // 8) % 8, n // 64
                off = n0 * 2 + n1 * 16 + n2 * lbo + k0 * 128 + k1 * sbo
                addr = sw128(start + off)
            else:
                raise NotImplementedError
            out[k, n] = smem[addr // 2]
    return out


def sim_wg0(rng):
    BM, BN, BK = 64, 128, 64
    A = rng.standard_normal((BM, BK)).astype(np.float32)
    B = rng.standard_normal((BK, BN)).astype(np.float32)
    smem = np.full(SMEM // 2, np.nan, np.float32)
    sA, sB = 1024 + 128 * 3, 1024 + 128 * 3 + 8192     # any 128-aligned base
    for tid in range(128):                              # copies exactly as in wg0.cu
        for i in range(4):
            g = tid + 128 * i; row = g >> 3; c = g & 7
            off = (row >> 3) * 1024 + c * 128 + (row & 7) * 16
            smem[(sA + off) // 2:(sA + off) // 2 + 8] = A[row, c * 8:c * 8 + 8]
        for i in range(8):
            g = tid + 128 * i; krow = g >> 4; cn = g & 15
            off = cn * 1024 + (krow >> 3) * 128 + (krow & 7) * 16
            smem[(sB + off) // 2:(sB + off) // 2 + 8] = B[krow, cn * 8:cn * 8 + 8]
    acc = np.zeros((BM, BN), np.float32)
    for kk in range(4):
        a = read_k_major(smem, make_desc(sA + kk * 256, 128, 1024, 0), 64)
        b = read_mn_major(smem, make_desc(sB + kk * 256, 128, 1024, 0), 128)
        acc += a @ b
    return np.abs(acc - A @ B).max()


def sim_wg1(rng, tma=False):
    BM, BN, BK = 128, 256, 64
    A = rng.standard_normal((BM, BK)).astype(np.float32)
    B = rng.standard_normal((BK, BN)).astype(np.float32)
    smem = np.full(SMEM // 2, np.nan, np.float32)
    stage = 1   # stage 1 of 4, base 1024-aligned
    sbase = 3 * 1024
    sa0 = sbase + stage * 49152
    sb0 = sa0 + 16384
    if not tma:   # copies exactly as in wg1.cu
        for tid in range(256):
            ar, ac = tid >> 3, tid & 7
            sA_off = ar * 128 + ((ac ^ (ar & 7)) << 4)
            for i in range(4):
                o = sa0 + sA_off + i * 4096
                smem[o // 2:o // 2 + 8] = A[ar + 32 * i, ac * 8:ac * 8 + 8]
            br, bc = tid >> 5, tid & 31
            sB_off = (bc >> 3) * 8192 + br * 128 + (((bc & 7) ^ (br & 7)) << 4)
            for i in range(8):
                o = sb0 + sB_off + i * 1024
                smem[o // 2:o // 2 + 8] = B[br + 8 * i, bc * 8:bc * 8 + 8]
    else:         # TMA SWIZZLE_128B box writes (wg2.cu): box row r at r*128, 16-B chunk c at c ^ (r%8)
        def tma_box(dst, tile):   # tile: rows x 64 halves
            for r in range(tile.shape[0]):
                for c in range(8):
                    o = sw128(dst + r * 128 + c * 16)
                    smem[o // 2:o // 2 + 8] = tile[r, c * 8:c * 8 + 8]
        tma_box(sa0, A)
        for c in range(4):
            tma_box(sb0 + c * 8192, B[:, 64 * c:64 * c + 64])
    err = 0.0
    for wg in range(2):
        acc = np.zeros((64, BN), np.float32)
        for kk in range(4):
            a = read_k_major(smem, make_desc(sa0 + wg * 8192 + kk * 32, 16, 1024, 1), 64)
            b = read_mn_major(smem, make_desc(sb0 + kk * 2048, 8192, 1024, 1), 256)
            acc += a @ b
        err = max(err, np.abs(acc - A[64 * wg:64 * wg + 64] @ B).max())
    return err


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    print("wg0 (no swizzle) tile max err:", sim_wg0(rng))
    print("wg1 (SW128, cp.async mapping) tile max err:", sim_wg1(rng))
    print("wg2 (SW128, TMA box writes) tile max err:", sim_wg1(rng, tma=True))
