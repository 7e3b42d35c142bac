"""The import graph of kdsl, kdsl_cpu and kdsl_cuda against the layers of docs/design.md.

Every import counts, function-level ones included (ast, no import is executed).  A *unit* is
a folder of a package (``kdsl.passes``) or a top-level module (``kdsl.config``, ``kdsl_cpu.jit``);
docs/design.md's ``layers`` block gives each unit of kdsl a layer (``kdsl_cpu.*``: every unit
of that package).  Checked: no edge to a higher layer, no cycle between units, no edge between
the backend packages, and no cycle of modules inside one unit beyond the ones listed below.
"""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("kdsl", "kdsl_cpu", "kdsl_cuda")

#: cycles of modules inside one folder still allowed (sorted module lists); may only shrink
ALLOWED_CYCLES = {
    # the closed node set: nodes re-exports warp_nodes; make/printer/simplify/visitor/bounds
    # call each other through function-level imports
    ("kdsl.ir.axis_expr", "kdsl.ir.bounds", "kdsl.ir.make", "kdsl.ir.nodes", "kdsl.ir.printer",
     "kdsl.ir.simplify", "kdsl.ir.visitor", "kdsl.ir.warp_nodes"),
    # the traced-array API: every op module builds arrays and arrays offer every op
    ("kdsl.frontend.api", "kdsl.frontend.array", "kdsl.frontend.array_create", "kdsl.frontend.array_funcs",
     "kdsl.frontend.array_gather", "kdsl.frontend.array_math", "kdsl.frontend.array_shape",
     "kdsl.frontend.by_value", "kdsl.frontend.compute", "kdsl.frontend.einsum", "kdsl.frontend.indexing",
     "kdsl.frontend.linalg", "kdsl.frontend.numpy_api", "kdsl.frontend.ops", "kdsl.frontend.reduce",
     "kdsl.frontend.reducer", "kdsl.frontend.scan", "kdsl.frontend.sorting", "kdsl.frontend.tuple_reduce",
     "kdsl.frontend.ufunc_gcd", "kdsl.frontend.ufunc_keywords", "kdsl.frontend.ufuncs"),
    # a stage's primitives check limits and legality, which read the schedule back
    ("kdsl.schedule.checking", "kdsl.schedule.limits", "kdsl.schedule.schedule", "kdsl.schedule.stage"),
    # a kernel with kd.fori_loop: dispatch hands it to the loop program, which compiles its
    # parts and loop bodies through dispatch again
    ("kdsl.runtime.dispatch", "kdsl.runtime.fori_program"),
    # the generated cuda launcher and the launch it falls back to (the call-plan rework owns them)
    ("kdsl_cuda.runtime.fastlaunch", "kdsl_cuda.runtime.launch"),
}

#: edges against the layers still allowed, (from module, to module): reasons; may only shrink
ALLOWED_EDGES = {
}


def _modules() -> dict:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if any(not (d / "__init__.py").exists() for d in path.parents
                   if d != ROOT and ROOT in d.parents):
                continue        # not a module of the package (build/ of a pip install, ...)
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(mod: str, path: pathlib.Path, mods: dict) -> set:
    """The modules of ``mods`` that ``mod`` imports anywhere in its file; ``__version__``
    read from a package is not counted (docs/design.md)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names if a.name != "__version__"]
            if not names:
                continue
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                pkg = ".".join(base + ([node.module] if node.module else []))
            else:
                pkg = node.module
            targets = [f"{pkg}.{x}" if f"{pkg}.{x}" in mods else pkg for x in names]
        else:
            continue
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != mod:
                out.add(t)
    return out


def _unit(mod: str) -> str:
    return ".".join(mod.split(".")[:2])


def _layers() -> dict:
    text = (ROOT / "docs" / "design.md").read_text()
    block = re.search(r"```layers\n(.*?)```", text, re.S).group(1)
    layers = {}
    for line in block.strip().splitlines():
        level, *units = line.split()
        for u in units:
            layers[u] = int(level)
    return layers


def _layer(unit: str, layers: dict) -> int:
    if unit in layers:
        return layers[unit]
    star = unit.split(".")[0] + ".*"
    if star in layers:
        return layers[star]
    raise AssertionError(f"{unit} has no layer in docs/design.md (add it to the layers block)")


def _sccs(nodes, edges) -> list:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(tuple(sorted(comp)))
    return out


@pytest.fixture(scope="module")
def graph():
    mods = _modules()
    return {m: _imports(m, p, mods) for m, p in mods.items()}


def test_no_edge_goes_up_a_layer(graph):
    layers = _layers()
    bad = []
    for a, targets in graph.items():
        for b in targets:
            ua, ub = _unit(a), _unit(b)
            if ua != ub and _layer(ub, layers) > _layer(ua, layers) and (a, b) not in ALLOWED_EDGES:
                bad.append(f"{a} (layer {_layer(ua, layers)}) imports {b} (layer {_layer(ub, layers)})")
    assert not bad, "imports against docs/design.md's layers:\n" + "\n".join(sorted(bad))


def test_passes_never_import_the_frontend(graph):
    assert not [(a, b) for a, ts in graph.items() for b in ts
                if a.startswith(("kdsl.passes", "kdsl.gpu")) and b.startswith("kdsl.frontend")]


def test_backend_packages_never_import_each_other(graph):
    bad = [(a, b) for a, ts in graph.items() for b in ts
           if a.split(".")[0] != b.split(".")[0] and {a.split(".")[0], b.split(".")[0]} == {"kdsl_cpu", "kdsl_cuda"}]
    assert not bad


def test_no_cycle_across_folders(graph):
    units = {}
    for a, ts in graph.items():
        for b in ts:
            if _unit(a) != _unit(b) and (a, b) not in ALLOWED_EDGES:
                units.setdefault(_unit(a), set()).add(_unit(b))
    assert _sccs(sorted(units), units) == []


def test_cycles_inside_a_folder_are_the_listed_ones(graph):
    kept = {a: {b for b in ts if (a, b) not in ALLOWED_EDGES} for a, ts in graph.items()}
    found = set(_sccs(sorted(kept), kept))
    assert found <= ALLOWED_CYCLES, f"new import cycles: {sorted(found - ALLOWED_CYCLES)}"
    assert found == ALLOWED_CYCLES, f"cycles gone (drop them from ALLOWED_CYCLES): {sorted(ALLOWED_CYCLES - found)}"
    assert all(len({_unit(m) for m in c}) == 1 for c in found)


def test_sequential_targets_never_reach_the_gpu_layer(graph):
    """The core table and the cpu backend's modules import nothing of kdsl.gpu, directly or not."""
    seen, todo = set(), ["kdsl.passes.pipeline", "kdsl_cpu.backend"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    assert not [m for m in seen if m.startswith("kdsl.gpu")]


def test_the_checker_sees_function_level_imports_and_cycles(tmp_path):
    mods = {"p": None, "p.a": None, "p.b": None}
    path = tmp_path / "a.py"
    path.write_text("def f():\n    from . import b\n")
    assert _imports("p.a", path, mods) == {"p.b"}
    path.write_text("from . import __version__\n")
    assert _imports("p.a", path, mods) == set()
    assert _sccs(["x", "y", "z"], {"x": {"y"}, "y": {"x"}, "z": {"x"}}) == [("x", "y")]
