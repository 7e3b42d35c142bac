"""Regenerates the wgmma wrapper block (between '// BEGIN GENERATED wgmma' and
'// END GENERATED wgmma') in the wg*.cu files: one inline-PTX wrapper per N used.
usage: python3 gen.py wg0.cu wg1.cu ..."""
import re, sys

def wgmma_fn(n: int) -> str:
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    outs = ",\n      ".join(", ".join(f'"+f"(d[{i+j}])' for j in range(8)) for i in range(0, nreg, 8))
    return f'''// D(64x{n}, f32 regs) += A(64x16, smem desc) * B(16x{n}, smem desc); f16 inputs.
// TRANS_B = 0: B K-major; 1: B N-major (PTX ISA 9.7.15.5.1.2, imm-trans-b).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n{n}k16(float (&d)[{nreg}], uint64_t da, uint64_t db) {{
  asm volatile(
    "{{\\n"
    "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 "
    "{{{regs}}}, "
    "%{nreg}, %{nreg+1}, 1, 1, 1, 0, %{nreg+2};\\n"
    "}}\\n"
    : {outs}
    : "l"(da), "l"(db), "n"(TRANS_B));
}}
'''

def block(ns):
    return "// BEGIN GENERATED wgmma (gen.py)\n" + "\n".join(wgmma_fn(n) for n in ns) + "// END GENERATED wgmma\n"

for path in sys.argv[1:]:
    src = open(path).read()
    m = re.search(r"// WGMMA_N = ([0-9, ]+)", src)
    ns = [int(x) for x in m.group(1).split(",")]
    new = re.sub(r"// BEGIN GENERATED wgmma.*?// END GENERATED wgmma\n", lambda _: block(ns), src, flags=re.S)
    open(path, "w").write(new)
    print(path, "wgmma N =", ns)
