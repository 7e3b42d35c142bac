"""Summaries of fuzz results: counts per backend and outcome, bugs grouped by signature."""
from __future__ import annotations

import re
from collections import Counter, defaultdict

from .known import match_known


def signature(res: dict) -> str:
    """A bug's shape without its particulars (numbers, names, values)."""
    d = res.get("detail") or ""
    d = d.split("[", 1)[0] if res.get("kind") != "unfair_error" else d
    d = re.sub(r"np\.\w+\(([^)]*)\)", "V", d)
    d = re.sub(r"'[^']*'|\"[^\"]*\"", "'X'", d)
    d = re.sub(r"\b[\w.]+\.(inner|outer|fused|v|rf)\b", "AX", d)
    d = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", d)
    d = re.sub(r"stage \w+", "stage S", d)
    d = re.sub(r"axis \w+", "axis A", d)
    d = re.sub(r"at \(.*", "", d)
    return f"{res.get('kind')}: {d[:160]}"


def summarize(results: list, seconds: dict | None = None) -> str:
    by_be = defaultdict(Counter)
    for r in results:
        key = r["outcome"] if r["outcome"] != "bug" else f"bug:{r.get('kind')}"
        by_be[r["backend"]][key] += 1
    lines = []
    for be, c in sorted(by_be.items()):
        tot = sum(c.values())
        t = f" in {seconds[be]:.0f} s" if seconds and be in seconds else ""
        parts = ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"{be}: {tot} tasks{t}: {parts}")
    groups = defaultdict(list)
    for r in results:
        if r["outcome"] in ("bug", "fuzzer_error"):
            known = match_known(r)
            groups[(known or "NEW", signature(r) if not known else known)].append(r)
    if groups:
        lines.append("")
        lines.append("bugs by finding (NEW = not in tests/fuzz/known.py):")
        for (known, sig), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] != "NEW", -len(kv[1]))):
            bes = ",".join(sorted({r["backend"] for r in rs}))
            ex = ", ".join(f"{r['seed']}:{r['index']}" for r in rs[:4])
            label = sig if known == "NEW" else known
            lines.append(f"  [{len(rs):4d}] {label}  ({bes}; e.g. {ex})")
            if known == "NEW":
                lines.append(f"         {(rs[0].get('detail') or '')[:200]}")
    return "\n".join(lines)
