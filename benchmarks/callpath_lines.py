"""Lines of the call path per file: total, code, comment/docstring, blank.

Usage: python3 benchmarks/callpath_lines.py REF FILES...  (REF a git revision, or WT: the work tree)
"""
import io, subprocess, sys, tokenize, ast
FILES = sys.argv[2:]
ref = sys.argv[1]
def src(f):
    if ref == "WT":
        return open(f).read()
    return subprocess.run(["git", "show", f"{ref}:{f}"], capture_output=True, text=True).stdout
def counts(text):
    lines = text.splitlines()
    doc = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            doc.update(range(node.lineno, node.end_lineno + 1))
    com = set()
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        if t.type == tokenize.COMMENT and lines[t.start[0]-1].strip().startswith("#"):
            com.add(t.start[0])
    blank = {i+1 for i, l in enumerate(lines) if not l.strip()}
    return len(lines), len(lines) - len(doc | com | blank), len(doc | com), len(blank)
tot = [0]*4
for f in FILES:
    c = counts(src(f)); tot = [a+b for a, b in zip(tot, c)]
    print(f"{f:40s} {c[0]:5d} code {c[1]:5d} doc/comment {c[2]:4d} blank {c[3]:4d}")
print(f"{'total':40s} {tot[0]:5d} code {tot[1]:5d} doc/comment {tot[2]:4d} blank {tot[3]:4d}")
