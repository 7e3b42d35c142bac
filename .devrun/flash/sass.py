"""Static look at the flash kernel (no GPU): registers/spills (cuobjdump resource usage of the
NVRTC cubin) and the SASS of the key loop, counted by opcode per score.

    python3 .devrun/flash/sass.py [d bm bn nw [causal]] [--dump FILE]
"""
from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from kdsl_cuda import build  # noqa: E402
from kdsl_cuda.codegen import flash  # noqa: E402

TOOLS = [os.path.dirname(p) for p in (
    "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/triton/backends/nvidia/bin/x",)]


def tool(name):
    for d in TOOLS + os.environ.get("PATH", "").split(":"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


def cubin_of(cfg, arch="sm_90"):
    return build.compile_cubin(flash.source(cfg), arch=arch)


def resources(cub):
    """(registers, spill store bytes, spill load bytes, stack) from cuobjdump."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cub)
    out = subprocess.run([tool("cuobjdump"), "--dump-resource-usage", f.name],
                         capture_output=True, text=True).stdout
    regs = int(re.search(r"REG:(\d+)", out).group(1))
    stack = int(re.search(r"STACK:(\d+)", out).group(1))
    local = int(re.search(r"LOCAL:(\d+)", out).group(1))
    return dict(regs=regs, stack=stack, local=local)


def sass(cub):
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cub)
    return subprocess.run([tool("nvdisasm"), "-c", "-novliw", f.name], capture_output=True,
                          text=True).stdout


def loop_ops(text):
    """Opcode counts of the longest backward-branch loop body of the SASS."""
    lines = [ln for ln in text.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", ln)]
    addr = lambda ln: int(re.match(r"\s+/\*([0-9a-f]+)\*/", ln).group(1), 16)   # noqa: E731
    best = None
    for ln in lines:
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", ln)
        tgt = re.search(r"`\(\.(L_x_\d+)\)", ln)
        if not tgt:
            continue
        lab = tgt.group(1)
        # the label's address
        li = text.find(f".{lab}:")
        if li < 0:
            continue
        after = text[li:].splitlines()[1:]
        la = next((addr(x) for x in after if re.match(r"\s+/\*[0-9a-f]{4,}\*/", x)), None)
        if la is None or la >= addr(ln):
            continue
        span = addr(ln) - la
        if best is None or span > best[0]:
            best = (span, la, addr(ln))
    if best is None:
        return collections.Counter(), 0
    _, a, b = best
    ops = collections.Counter()
    for ln in lines:
        if a <= addr(ln) <= b:
            m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?", ln)
            if m:
                ops[m.group(1)] += 1
    return ops, sum(ops.values())


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    d, bm, bn, nw = (int(x) for x in (args[:4] or (64, 128, 64, 4)))
    causal = len(args) > 4 and args[4] not in ("0", "False")
    if "--dump" in sys.argv:
        args = [a for a in args if a != sys.argv[sys.argv.index("--dump") + 1]]
        causal = len(args) > 4 and args[4] not in ("0", "False")
    cfg = flash.FlashConfig(d, d, bm=bm, bn=bn, nw=nw, causal=causal)
    cub = cubin_of(cfg)
    r = resources(cub)
    text = sass(cub)
    if "--dump" in sys.argv:
        open(sys.argv[sys.argv.index("--dump") + 1], "w").write(text)
    ops, total = loop_ops(text)
    scores = bm * bn / (32 * nw)      # scores per thread per key tile
    print(f"d={d} bm={bm} bn={bn} nw={nw} causal={causal}: {r}; key loop {total} SASS "
          f"instructions, {total / scores:.2f} per score ({scores:.0f} scores/thread/tile)")
    for op, c in ops.most_common(25):
        print(f"  {op:10s} {c:5d}  {c / scores:6.2f}/score")


if __name__ == "__main__":
    main()


def compute_section(text):
    """Opcode counts between the key loop's two barriers (the products and the softmax of a
    tile), without the blocks of the rarely taken branches (negative factor: FADD -x, -RZ;
    masks: FSEL .. -INF) -- the instructions a thread runs per interior key tile."""
    lines = text.splitlines()
    bars = [i for i, ln in enumerate(lines) if "BAR.SYNC" in ln]
    if len(bars) < 2:
        return collections.Counter()
    ops = collections.Counter()
    for ln in lines[bars[-2]:bars[-1] + 1]:
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?\s*(.*)", ln)
        if not m:
            continue
        if m.group(1) == "FADD" and "-RZ" in m.group(3) and m.group(3).count("-") >= 2:
            continue
        if m.group(1) == "FSEL" and "-INF" in m.group(3):
            continue
        ops[m.group(1)] += 1
    return ops
