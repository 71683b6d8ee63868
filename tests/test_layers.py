"""leapgen's imports point down the layer order, and no two files import each other.

The import graph is read from the source with :mod:`ast` (nothing is imported):
every ``import`` / ``from ... import`` anywhere in a file of ``leapgen/``, inside
functions too, relative imports resolved; in a file that calls
``importlib.import_module``, its string constants naming a leapgen module count
as imports (the lazy export and adapter tables). An edge goes to the module
named: ``from leapgen.grammar import ir`` imports ``leapgen.grammar.ir``,
``from leapgen.compiler import GrammarCompiler`` imports the package
``leapgen.compiler`` (its ``__init__``); parent packages run by Python on the
way are not edges.

Rules:

* a file's layer is the first name under ``leapgen`` (``leapgen/compiler/...``
  is ``compiler``, ``leapgen/cli.py`` is ``cli``); every layer is in
  :data:`LAYERS`, the one place the order lives (``docs/ARCHITECTURE.md``
  shows it and is checked against it);
* a file imports its own layer or a lower level; never a higher level, nor
  another layer of its own level;
* nothing imports the package root ``leapgen`` (the public facade): inside
  leapgen, import the module that defines a name;
* no strongly connected component of the file graph holds more than one file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "leapgen"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("server", "integrations", "frontend"),
    ("xgrammar",),
    ("engine",),
    ("backends",),
    ("matcher",),
    ("compiler",),
    ("automata",),
    ("grammar",),
    ("vocab", "bitmask"),
    ("errors", "version"),
)
"""The layer order, top (level 1) to bottom. The package root ``leapgen`` is the
facade above level 1: it may import any layer and no layer may import it."""

FACADE = "(facade)"


def level_of(layer: str) -> int | None:
    """The level (1 = top) of a layer name, 0 for the facade, None when unlisted."""
    if layer == FACADE:
        return 0
    for i, names in enumerate(LAYERS, 1):
        if layer in names:
            return i
    return None


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``leapgen/``."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def layer_of(module: str) -> str:
    parts = module.split(".")
    return FACADE if len(parts) == 1 else parts[1]


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The leapgen module an imported dotted name refers to (its longest known prefix), or None."""
    if name.split(".")[0] != PACKAGE:
        return None
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in modules else None


def imports_of(module: str, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """``(line, imported leapgen module)`` for every import in ``module``'s file."""
    path = modules[module]
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, t) for a in node.names if (t := _target(a.name, modules))]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # ``from . import x`` is the file's package, each further dot one package up
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:  # a submodule by name, else a name defined in the module ``base``
                t = f"{base}.{a.name}" if f"{base}.{a.name}" in modules else _target(base, modules)
                if t:
                    out.append((node.lineno, t))
        elif isinstance(node, (ast.Attribute, ast.Name)) and "import_module" in (
                getattr(node, "attr", None), getattr(node, "id", None)):
            dynamic = True
    if dynamic:
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        out += [(n.lineno, n.value) for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
                and "." in n.value and n.value in modules]
    return [(line, t) for line, t in out if t != module]


def import_graph(root: Path = ROOT) -> tuple[dict[str, Path], dict[str, list[tuple[int, str]]]]:
    modules = module_files(root)
    return modules, {m: imports_of(m, modules) for m in modules}


def layer_violations(root: Path, modules: dict[str, Path], graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    """One message per import that breaks the layer order."""
    out = []
    for module, edges in sorted(graph.items()):
        src = layer_of(module)
        where = modules[module].relative_to(root)
        if level_of(src) is None:
            out.append(f"{where}: layer {src!r} is not in LAYERS (tests/test_layers.py); add it at its level")
            continue
        for line, target in sorted(set(edges)):
            dst = layer_of(target)
            if dst == src:
                continue
            a, b = level_of(src), level_of(dst)
            if dst == FACADE:
                why = (f"imports the package root {PACKAGE!r} (the public facade); import the module that "
                       "defines the name instead")
            elif b is None:
                why = f"imports layer {dst!r}, which is not in LAYERS"
            elif b < a:
                why = f"layer {src!r} (level {a}) imports layer {dst!r} (level {b}), which is above it"
            elif b == a:
                why = f"layer {src!r} imports {dst!r}, another layer of its own level {a}"
            else:
                continue
            out.append(f"{where}:{line}: imports {target}: {why}")
    return out


def strongly_connected(graph: dict[str, list[tuple[int, str]]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted({t for _, t in graph[start]})))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted({t for _, t in graph.get(w, [])}))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def describe_cycle(root: Path, component: list[str], modules: dict[str, Path],
                   graph: dict[str, list[tuple[int, str]]]) -> str:
    """One cycle through the component's first module, as ``file:line -> module`` steps."""
    members = set(component)
    start = component[0]
    parent: dict[str, tuple[str, int]] = {}
    frontier = [start]
    found = None
    while frontier and found is None:
        nxt = []
        for v in frontier:
            for line, w in sorted(graph[v]):
                if w == start:
                    found = (v, line)
                    break
                if w in members and w not in parent:
                    parent[w] = (v, line)
                    nxt.append(w)
            if found:
                break
        frontier = nxt
    steps = []
    v, line = found
    steps.append(f"{modules[v].relative_to(root)}:{line} imports {start}")
    while v != start:
        u, line = parent[v]
        steps.append(f"{modules[u].relative_to(root)}:{line} imports {v}")
        v = u
    return "; ".join(reversed(steps))


def cycle_violations(root: Path, modules: dict[str, Path], graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    """One message per strongly connected component of more than one file."""
    return [f"import cycle between {len(c)} files ({', '.join(c)}): {describe_cycle(root, c, modules, graph)}"
            for c in strongly_connected(graph)]


def test_imports_point_down_the_layer_order():
    modules, graph = import_graph()
    problems = layer_violations(ROOT, modules, graph)
    assert not problems, "imports against the layer order:\n" + "\n".join(problems)


def test_no_import_cycles_between_files():
    modules, graph = import_graph()
    problems = cycle_violations(ROOT, modules, graph)
    assert not problems, "\n".join(problems)


def test_architecture_doc_shows_the_layer_order():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    section = re.search(r"^## Layers\n(.*?)^## ", text, re.M | re.S)
    assert section, "docs/ARCHITECTURE.md has no '## Layers' section"
    rows = re.findall(r"^\|\s*(\d+)\s*\|([^|]*)\|", section.group(1), re.M)
    documented = tuple(tuple(re.findall(r"`([a-z_]+)`", names)) for _, names in rows)
    assert [int(n) for n, _ in rows] == list(range(1, len(LAYERS) + 1)) and documented == LAYERS, (
        "the layer table at the top of docs/ARCHITECTURE.md differs from LAYERS in tests/test_layers.py:\n"
        f"doc:    {documented}\nLAYERS: {LAYERS}")


def test_the_graph_reader_sees_what_it_must(tmp_path):
    """The checks catch an upward import inside a function, a relative import
    and a root import, and a cycle of three files (a tree written here)."""
    pkg = tmp_path / PACKAGE
    files = {
        "__init__.py": "from leapgen.compiler import thing\n",
        "errors.py": "",
        "automata/__init__.py": "",
        "automata/a.py": "def f():\n    from leapgen.compiler import c\n",
        "automata/b.py": "from . import c\n",
        "automata/c.py": "from .d import x\n",
        "automata/d.py": "import leapgen.automata.b\n",
        "compiler/__init__.py": "thing = 1\n",
        "compiler/c.py": "from leapgen import thing\nfrom .. import errors\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    modules, graph = import_graph(tmp_path)
    layers = layer_violations(tmp_path, modules, graph)
    cycles = cycle_violations(tmp_path, modules, graph)
    assert layers == [
        "leapgen/automata/a.py:2: imports leapgen.compiler.c: layer 'automata' (level 8) imports layer 'compiler' "
        "(level 7), which is above it",
        "leapgen/compiler/c.py:1: imports leapgen: imports the package root 'leapgen' (the public facade); import "
        "the module that defines the name instead",
    ], layers
    assert len(cycles) == 1 and "leapgen.automata.b, leapgen.automata.c, leapgen.automata.d" in cycles[0], cycles
    assert "leapgen/automata/d.py:1 imports leapgen.automata.b" in cycles[0], cycles
