"""The architecture, checked from the modules' own import statements.

Layers (each may import only the layers listed for it):

    base         _errors, _types, _files, _public, _secrets -> base
    _providers   model facts, no numba        -> base, _providers
    _render      the renderer (numba)         -> base, _providers, _render
    _history     transcripts, tree, stores    -> base, _providers, _history
    _wire        provider wire formats        -> base, _providers, _history, _wire
    _importers   harness session files        -> base, _providers, _history, _wire, _importers
    _compaction  the ladder                   -> base, _providers, _history, _wire, _render, _compaction
    _session     a harness's session          -> base, _providers, _history, _wire, _compaction, _session
    _eval        the reading probe            -> base, _providers, _render, _history, _wire, _session, _eval
    _proxy       the HTTP proxy               -> base, _providers, _history, _wire, _compaction, _session, _proxy
    testing      the generator, the fakes     -> base, _history, _wire
    adapters     framework adapters           -> base, _providers, _history, _wire, _compaction, _session, adapters
    _cli         the command line             -> anything; nothing imports it but __main__

numba is imported by ``_render.kernels`` alone. Every import counts, those inside
functions and ``TYPE_CHECKING`` blocks included, so a lazy import cannot hide a
violation; the module graph has no cycle.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "glyphpack"

ALLOWED = {
    "base": {"base"},
    "_providers": {"base", "_providers"},
    "_render": {"base", "_providers", "_render"},
    "_history": {"base", "_providers", "_history"},
    "_wire": {"base", "_providers", "_history", "_wire"},
    "_importers": {"base", "_providers", "_history", "_wire", "_importers"},
    "_compaction": {"base", "_providers", "_history", "_wire", "_render", "_compaction"},
    "_session": {"base", "_providers", "_history", "_wire", "_compaction", "_session"},
    "_eval": {"base", "_providers", "_render", "_history", "_wire", "_session", "_eval"},
    "_proxy": {"base", "_providers", "_history", "_wire", "_compaction", "_session", "_proxy"},
    "testing": {"base", "_history", "_wire"},
    "adapters": {"base", "_providers", "_history", "_wire", "_compaction", "_session", "adapters"},
    "_cli": {"base", "_providers", "_render", "_history", "_wire", "_importers", "_compaction", "_session", "_eval", "_proxy", "testing", "package"},
    "__main__": {"_cli"},
    "package": {"base"},
}
NUMBA_ALLOWED = {"glyphpack._render.kernels"}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module == "glyphpack":
        return "package"
    if parts[1] in ("_errors", "_types", "_files", "_public", "_secrets"):
        return "base"
    return parts[1]


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Absolute names of every module ``source`` imports (relative imports resolved)."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # "from . import x" and "from .pkg import mod" may name submodules.
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                if (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(".py").exists() or (
                    PACKAGE.parent / Path(*candidate.split(".")) / "__init__.py"
                ).exists():
                    found.add(candidate)
    return found


@functools.cache  # read once for the three checks (each test copies what it changes)
def package_graph() -> dict[str, set[str]]:
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        graph[module] = imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
    return graph


def violations(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            if target.split(".")[0] == "numba" and module not in NUMBA_ALLOWED:
                problems.append(f"{module} imports numba (only {', '.join(NUMBA_ALLOWED)} may)")
            if not target.startswith("glyphpack") or target == module:
                continue
            if target.startswith("glyphpack._cli") and module != "glyphpack.__main__" and not module.startswith("glyphpack._cli"):
                problems.append(f"{module} imports the CLI")
                continue
            source_layer, target_layer = layer_of(module), layer_of(target)
            if target_layer not in ALLOWED[source_layer] and target_layer != source_layer:
                problems.append(f"{module} ({source_layer}) imports {target} ({target_layer})")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search over the package's own modules."""
    found, state = [], {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = "active"
        for target in sorted(graph.get(module, ())):
            if target not in graph or target == module:
                continue
            if state.get(target) == "active":
                found.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_layers_import_one_way():
    assert violations(package_graph()) == []


def test_no_import_cycles():
    assert cycles(package_graph()) == []


def test_the_checks_catch_violations():
    """The checker itself: a history module importing the renderer, a render module
    importing history, numba outside the kernels, a cycle, and a CLI import are found."""
    graph = package_graph()
    bad = {k: set(v) for k, v in graph.items()}
    bad["glyphpack._history.tree"].add("glyphpack._render.render")
    bad["glyphpack._render.text"].add("glyphpack._history.messages")
    bad["glyphpack._history.store"].add("numba")
    bad["glyphpack._compaction.cost"].add("glyphpack._cli")
    found = violations(bad)
    assert any("_history.tree (_history) imports glyphpack._render.render" in p for p in found)
    assert any("_render.text (_render) imports glyphpack._history.messages" in p for p in found)
    assert any("_history.store imports numba" in p for p in found)
    assert any("_compaction.cost imports the CLI" in p for p in found)
    bad["glyphpack._history.messages"].add("glyphpack._history.store")
    assert cycles(bad)
    lazy = "def f():\n    from .._render.render import render\n"
    assert "glyphpack._render.render" in imports_of(lazy, "glyphpack._compaction.snapshot", False)


@pytest.mark.parametrize(
    "probe",
    [
        "import glyphpack; glyphpack.Workspace; glyphpack.Message; glyphpack.SessionTree; glyphpack.to_anthropic",
        "import glyphpack; glyphpack.compact; glyphpack.recover; glyphpack.CompactionPolicy",
        "from glyphpack._cli import main; main(['tree', sys.argv[1]])",
        "from glyphpack._cli import main; main(['context', sys.argv[2], '--model', 'claude-sonnet-4-5'])",
    ],
)
def test_history_and_its_commands_run_without_numba(probe, tmp_path):
    """Loads what the probe uses in a fresh interpreter and checks numba stayed out."""
    import glyphpack

    with glyphpack.Workspace(tmp_path / "ws") as ws:
        c = ws.tree.create("c")
        ws.tree.append(c, glyphpack.Message("user", "hello"))
    transcript = tmp_path / "t.json"
    transcript.write_text('[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]')
    code = f"import sys\n{probe}\nprint('numba' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ws"), str(transcript)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "False"
