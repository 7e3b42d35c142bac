"""Judging and printing for ``benchmarks/cuda.py``: ratios, targets met, the table, the
summary of missed targets.  Pure Python; rows are the dicts the JSON holds.
"""
from __future__ import annotations

def judge(row) -> dict:
    """Ratios (peer / kdsl) and whether each target is met (None: cannot be judged)."""
    k = row["kdsl_s"]
    checks = []
    for p in row["peers"].values():
        if k and p["s"]:
            p["ratio"] = p["s"] / k
        if p["target"] is not None:
            p["met"] = False if k is None else (None if p["s"] is None
                                                else p["ratio"] >= p["target"])
            checks.append(p["met"])
    if row.get("bw_target") is not None:
        row["bw_met"] = row["pct_copy"] is not None and row["pct_copy"] >= row["bw_target"]
        checks.append(row["bw_met"])
    if "limit_s" in row:
        row["limit_met"] = k is not None and k <= row["limit_s"]
        if row["limit_label"] != "stretch":
            checks.append(row["limit_met"])
    row["met"] = (False if False in checks else None if None in checks else True) \
        if checks else None
    return row


def fmt_s(t) -> str:
    """Seconds in the unit that suits them (us, ms, s); ``-`` for None."""
    if t is None:
        return "-"
    if t >= 1.0:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.{3 if t < 1e-2 else 1}f} ms"
    return f"{t * 1e6:.{2 if t < 1e-5 else 1}f} us"


def _met(m) -> str:
    return {True: "yes", False: "NO", None: "n/a"}[m]


HEADER = (f"{'workload':<46} {'kdsl':>10}  {'peer':<21} {'peer':>10} {'ratio':>7} {'%copy':>6}"
          f"  {'target':<11} met?")


def format_row(row) -> list:
    """The table lines of one row: one per peer and target, then errors and notes."""
    cells = []
    for name, p in row["peers"].items():
        pt = "FAIL" if p["error"] and p["s"] is None else fmt_s(p["s"])
        ratio = f"{p['ratio']:.2f}x" if p.get("ratio") else "-"
        tgt = f">={p['target']:.2f}x" if p["target"] is not None else ""
        cells.append((name + (f" [{p['variant']}]" if p.get("variant") else ""), pt, ratio, tgt,
                      _met(p["met"]) if p["target"] is not None else ""))
    if row.get("bw_target") is not None:
        cells.append(("copy bandwidth", "", "", f">={row['bw_target']:.0%} copy",
                      _met(row["bw_met"])))
    if "limit_s" in row:
        cells.append((row["limit_label"], "", "", f"<={fmt_s(row['limit_s'])}",
                      _met(row["limit_met"])))
    kt = "FAIL" if row["kdsl_error"] else fmt_s(row["kdsl_s"])
    pct = f"{row['pct_copy']:.1%}" if row.get("pct_copy") is not None else ""
    lines = []
    for i, (name, pt, ratio, tgt, met) in enumerate(cells or [("", "", "", "", "")]):
        head = (row["workload"][:46], kt, pct) if i == 0 else ("", "", "")
        lines.append(f"{head[0]:<46} {head[1]:>10}  {name[:21]:<21} {pt:>10} {ratio:>7} "
                     f"{head[2]:>6}  {tgt:<11} {met}".rstrip())
    if row["kdsl_error"]:
        lines.append(f"    ! kdsl: {row['kdsl_error']}")
    for name, p in row["peers"].items():
        if p["error"]:
            lines.append(f"    ! {name}: {p['error']}")
    for note in row.get("notes", ()):
        lines.append(f"    . {note}")
    return lines


def print_row(row):
    """Print ``format_row`` at once (rows stream as they finish)."""
    print("\n".join(format_row(row)), flush=True)


def summary(results) -> list:
    """Lines counting targets met, missed and not judged, naming the last two."""
    missed, unjudged, met = [], [], 0
    for row in results:
        for name, p in row["peers"].items():
            if p["target"] is not None:
                if p["met"]:
                    met += 1
                else:
                    which = missed if p["met"] is False else unjudged
                    which.append(f"{row['workload']} vs {name}")
        for flag, label in (("bw_met", "copy bandwidth"), ("limit_met", "limit")):
            if flag in row and not (flag == "limit_met" and row["limit_label"] == "stretch"):
                if row[flag]:
                    met += 1
                else:
                    missed.append(f"{row['workload']}: {label}")
    out = [f"# targets: {met} met, {len(missed)} missed, {len(unjudged)} not judged"]
    out += [f"#   missed: {m}" for m in missed] + [f"#   not judged: {u}" for u in unjudged]
    return out
