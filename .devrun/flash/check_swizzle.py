"""Python model of flash.py's precomputed ldmatrix addresses (kd_fl_swz_lane / kd_fl_swz_at)
against the plain swizzle kd_fl_swz, for every lane, tile and head dim (no GPU)."""


def swz(CH, r, c):
    m = min(CH, 8) - 1
    return r * CH * 8 + ((c ^ (r & m)) << 3)       # elements


def lane_offsets(CH, base, y):
    m = min(CH, 8) - 1
    return [base + ((((2 * k) & m) ^ y) << 4) for k in range(4)]     # bytes


def at(CH, o, r, c):
    m = min(CH, 8) - 1
    return o[((c & m) >> 1) & 3] + r * CH * 16 + ((c & ~m) << 4)


def main():
    bad = 0
    for D in (16, 32, 64, 128, 256):
        CH = D // 8
        m = min(CH, 8) - 1
        for bm, nw in ((64, 2), (64, 4), (128, 4), (128, 8), (256, 8)):
            mt_n = bm // (16 * nw)
            for bn in (16, 32, 48, 64, 96, 128):
                NT, DT = bn // 8, D // 8
                for warp in range(nw):
                    wrow = warp * mt_n * 16
                    for lane in range(32):
                        oq = lane_offsets(CH, (wrow + (lane & 15)) * CH * 16, (lane >> 4) ^ (lane & m))
                        ok = lane_offsets(CH, ((lane >> 4) * 8 + (lane & 7)) * CH * 16,
                                          ((lane >> 3) & 1) ^ (lane & m))
                        ov = lane_offsets(CH, (((lane >> 3) & 1) * 8 + (lane & 7)) * CH * 16,
                                          (lane >> 4) ^ (lane & m))
                        for kk in range(D // 16):
                            for mt in range(mt_n):
                                r, c = wrow + mt * 16 + (lane & 15), kk * 2 + (lane >> 4)
                                bad += at(CH, oq, mt * 16, kk * 2) != 2 * swz(CH, r, c)
                            for t in range(0, NT, 2):
                                mat = lane >> 3
                                r, c = t * 8 + (mat >> 1) * 8 + (lane & 7), kk * 2 + (mat & 1)
                                bad += at(CH, ok, t * 8, kk * 2) != 2 * swz(CH, r, c)
                        for kk in range(NT // 2):
                            for t in range(0, DT, 2):
                                mat = lane >> 3
                                r, c = kk * 16 + (mat & 1) * 8 + (lane & 7), t + (mat >> 1)
                                bad += at(CH, ov, kk * 16, t) != 2 * swz(CH, r, c)
    print("mismatches:", bad)
    assert bad == 0


if __name__ == "__main__":
    main()


def copy_cover():
    """kd_fl_copy: every (row, chunk) of a tile written exactly once, at the swizzled place."""
    bad = 0
    for D in (16, 32, 64, 128, 256):
        CH = D // 8
        m = min(CH, 8) - 1
        for NTH in (64, 128, 256):
            for ROWS in (16, 32, 48, 64, 96, 128, 256):
                RSTEP, PASSES = NTH // CH, (ROWS * CH + NTH - 1) // NTH
                same = RSTEP % (min(CH, 8)) == 0
                seen = {}
                for tid in range(NTH):
                    rr, c = tid // CH, tid % CH
                    d0 = swz(CH, rr, c)
                    for x in range(PASSES):
                        r = rr + x * RSTEP
                        if (ROWS * CH) % NTH == 0 or r < ROWS:
                            dst = d0 + x * RSTEP * CH * 8 if same else swz(CH, r, c)
                            bad += dst != swz(CH, r, c)
                            seen[(r, c)] = seen.get((r, c), 0) + 1
                bad += sorted(seen) != [(r, c) for r in range(ROWS) for c in range(CH)]
                bad += any(v != 1 for v in seen.values())
    print("copy mismatches:", bad)
    assert bad == 0


copy_cover()
