"""The layering of docs/architecture.md, checked on the source (no import is run).

Each folder of ``dpframe`` is one layer and imports only from the layers below it; no
module reaches into another layer's private names; and only the executor charges an
accountant.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "dpframe"

#: each layer may import the layers of a lower rank (and its own)
RANK = {
    "errors": 0,
    "version": 0,
    "core": 1,
    "mechanisms": 2,
    "risk": 3,  # the noise laws of mechanisms
    "datasets": 2,
    "engines": 3,
    "polars": 4,
    "jobs": 5,
    "dpframe": 6,  # the package's __init__: the public names
    "demo": 7,
    "cli": 8,
    "mypy_plugin": 1,  # imported by mypy only: the version
    "agg": 6,  # dpframe.agg, .pram, .sensitivity: a public module by its public name
    "pram": 6,
    "sensitivity": 6,
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "dpframe"


def _imports() -> dict[str, list[tuple[str, tuple[str, ...], bool]]]:
    """module -> [(imported module, names, at module level)] for every dpframe import."""
    out: dict[str, list[tuple[str, tuple[str, ...], bool]]] = defaultdict(list)
    for path in ROOT.rglob("*.py"):
        mod = _module(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        top = {id(n) for n in tree.body}
        top |= {id(n) for s in tree.body if isinstance(s, ast.If) for n in ast.walk(s)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] == "dpframe":
                    names = tuple(a.name for a in node.names)
                    out[mod].append((node.module, names, id(node) in top))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "dpframe":
                        out[mod].append((a.name, (), id(node) in top))
    return out


IMPORTS = _imports()


def test_every_folder_of_the_package_has_a_layer():
    layers = {_layer(m) for m in IMPORTS} | {_layer(_module(p)) for p in ROOT.rglob("*.py")}
    assert layers <= set(RANK), f"add {sorted(layers - set(RANK))} to RANK (and the docs)"


def test_each_layer_imports_only_the_layers_below_it():
    wrong = [
        f"{mod} imports {target}"
        for mod, imports in IMPORTS.items()
        for target, _, _ in imports
        if RANK[_layer(target)] > RANK[_layer(mod)]
    ]
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_another_layers_private_names():
    wrong = [
        f"{mod} imports {name} from {target}"
        for mod, imports in IMPORTS.items()
        for target, names, _ in imports
        for name in names
        if name.startswith("_") and not name.startswith("__") and _layer(target) != _layer(mod)
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_not_even_through_a_function_level_import():
    """A function-level import is only for load time (pyspark, pyarrow, scipy, Great
    Expectations), never to dodge a cycle: the graph of *all* imports is acyclic."""
    graph = {mod: {t for t, _, _ in imports if t != mod} for mod, imports in IMPORTS.items()}
    # a package's __init__ importing its own submodules is not a cycle back into it
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in graph.get(m, ()):
            if m.startswith(t + "."):  # a submodule importing its package's __init__
                continue
            if state.get(t) == 1:
                cycle = [*stack[stack.index(t) :], t]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_only_the_executor_charges_an_accountant():
    """One charge point: no other module of the package calls spend / spend_all (the
    accountant's own ``spend`` is ``spend_all`` of one charge)."""
    callers = []
    for path in ROOT.rglob("*.py"):
        mod = _module(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"spend", "spend_all"}
            ):
                callers.append(mod)
    assert sorted(set(callers) - {"dpframe.core.accountant"}) == ["dpframe.core.executor"]


#: the names a user may give an engine by (``--engine``); mapped to engines in one place,
#: ``dpframe.engines.input_engine``
ENGINE_NAMES = {"polars", "spark"}
#: what tells one engine from another by its type
ENGINE_TYPES = {"PolarsEngine", "SparkEngine", "is_spark_frame"}


def _names_an_engine(node: ast.AST) -> bool:
    """``engine``, ``eng``, ``self.engine``, ``x.engine_...``: an expression that is an engine."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name == "eng" or name.startswith("engine")


def _engine_tests(tree: ast.AST) -> list[tuple[int, str]]:
    """Where ``tree`` tells engines apart: a comparison with an engine's name (``==``,
    ``!=``, ``in`` against "polars" or "spark"), ``is_spark_frame`` or an engine class
    used to test a value (``isinstance``, a call), ``hasattr``/``getattr`` on an engine."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            consts = [c for s in sides for c in ast.walk(s) if isinstance(c, ast.Constant)]
            if any(c.value in ENGINE_NAMES for c in consts):
                found.append((node.lineno, "compares with an engine's name"))
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in ENGINE_TYPES - {"PolarsEngine", "SparkEngine"}:
                found.append((node.lineno, name))
        elif isinstance(node, ast.ImportFrom):
            hit = {a.name for a in node.names} & {"is_spark_frame"}
            if hit:
                found.append((node.lineno, f"imports {sorted(hit)}"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "isinstance" and len(node.args) == 2:
                types = {getattr(t, "id", getattr(t, "attr", "")) for t in ast.walk(node.args[1])}
                if types & ENGINE_TYPES:
                    found.append((node.lineno, "isinstance on an engine class"))
            if (
                node.func.id in {"hasattr", "getattr"}
                and node.args
                and _names_an_engine(node.args[0])
            ):
                found.append((node.lineno, f"{node.func.id} on an engine"))
    return found


def test_no_engine_is_told_apart_by_its_name_above_engines():
    """Above ``engines/`` (the polars layer, the jobs, the package, the demo and the
    command) an engine is asked what it does (``output_target``, ``streams_rows``,
    ``offers_dp_prior``), never which it is: no comparison with "polars" or "spark", no
    ``is_spark_frame``, no ``isinstance`` on an engine class, no ``hasattr`` / ``getattr``
    on an engine. A user's ``--engine`` becomes an engine in ``engines/`` alone
    (``input_engine``)."""
    above = {layer for layer, rank in RANK.items() if rank > RANK["engines"]} - {"mypy_plugin"}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if _layer(_module(path)) not in above:
            continue
        for line, what in _engine_tests(ast.parse(path.read_text())):
            found.append(f"{path.relative_to(ROOT.parent)}:{line}: {what}")
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        'target = path.as_uri() if eng.name == "spark" else path',
        'rows = n if eng.name == "polars" else None',
        'if engine not in ("polars", "spark"): pass',
        "from dpframe.engines.protocol import is_spark_frame",
        "x = is_spark_frame(frame)",
        "ok = isinstance(self.engine, SparkEngine)",
        'if hasattr(engine, "frame"): pass',
        'frame = getattr(self.engine, "frame", None)',
    ],
)
def test_the_engine_name_scan_finds_each_way_of_telling_engines_apart(source):
    assert _engine_tests(ast.parse(source))


# -- each option set declared once ------------------------------------------------------

CONSTRAINTS = ROOT / "core" / "constraints.py"


def _strings(node: ast.AST) -> list[str] | None:
    """The strings of a tuple/list/set literal whose items are all constants (``None``
    allowed), else ``None``."""
    if not isinstance(node, ast.Tuple | ast.List | ast.Set):
        return None
    if not all(isinstance(e, ast.Constant) for e in node.elts):
        return None
    return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _declared(root: Path = ROOT) -> tuple[dict[frozenset[str], str], set[str]]:
    """core/constraints' option sets (module-level tuples of 2+ strings, by their strings)
    and the parameter names of its ``PARAMETERS`` table."""
    tree = ast.parse((root / "core" / "constraints.py").read_text())
    sets: dict[frozenset[str], str] = {}
    params: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            name = target.id if isinstance(target, ast.Name) else ""
            strings = _strings(node.value) if node.value is not None else None
            if strings is not None and len(set(strings)) >= 2:
                sets.setdefault(frozenset(strings), name)
            if name == "PARAMETERS":
                table = next(n for n in ast.walk(node.value) if isinstance(n, ast.Dict))
                params = {k.value for k in table.keys if isinstance(k, ast.Constant)}
    return sets, params


def _option_set_problems(root: Path = ROOT) -> list[str]:
    """Option sets declared outside core/constraints, found on the source:

    * a call of ``check_choice`` (its option set named at the call site) outside
      core/constraints: a parameter is checked with ``check("<parameter>", value)``,
      whose option set is declared once in ``PARAMETERS``;
    * ``check("<parameter>", ...)`` (imported from core/constraints) naming no
      parameter of ``PARAMETERS``;
    * a tuple, list or set literal of strings (alone, inside ``Literal[...]`` or
      ``frozenset(...)``) whose strings are those of an option set core/constraints
      declares (2+ strings): the set declared again (column names and other tuples of
      strings that are no declared set are not matched);
    * in jobs/spec.py, a ``Literal[...]`` of 2+ strings: the spec's option fields are
      checked by the parameter's constraint (``spec_field``), not by a second list.
    """
    sets, params = _declared(root)
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "core/constraints.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        checks = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module == "dpframe.core.constraints"
            for a in n.names
            if a.name == "check"
        }
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id == "check_choice":
                    problems.append(f"{where}: check_choice names its option set at the call")
                first = node.args[0] if node.args else None
                if (
                    node.func.id in checks
                    and isinstance(first, ast.Constant)
                    and first.value not in params
                ):
                    problems.append(f"{where}: check({first.value!r}) is no parameter")
            if (
                isinstance(node, ast.Subscript)
                and rel == "jobs/spec.py"
                and isinstance(node.value, ast.Name)
                and node.value.id == "Literal"
            ):
                items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                strs = [e for e in items if isinstance(e, ast.Constant)]
                if sum(isinstance(e.value, str) for e in strs) >= 2:
                    problems.append(f"{where}: Literal[...] of options in the spec")
            strings = _strings(node)
            if strings and frozenset(strings) in sets and len(set(strings)) >= 2:
                declared = sets[frozenset(strings)]
                problems.append(
                    f"{where}: {tuple(strings)} declared again (constraints.{declared})"
                )
    return problems


def test_option_sets_are_declared_once_in_core_constraints():
    """Every option set lives in core/constraints (``PARAMETERS``); what this matches is
    in :func:`_option_set_problems`'s docstring."""
    assert _option_set_problems() == []


def test_the_option_set_scan_finds_option_sets_declared_again(tmp_path):
    """The scan is not vacuous: each form it refuses, planted in a copy of two modules."""
    (tmp_path / "core").mkdir()
    (tmp_path / "jobs").mkdir()
    (tmp_path / "core" / "constraints.py").write_text(CONSTRAINTS.read_text())
    (tmp_path / "core" / "units.py").write_text(
        "from dpframe.core.constraints import check, check_choice\n"
        "_N = ('add_remove', 'substitute')\n"
        "def f(neighbours, norm):\n"
        "    check_choice('norm', norm, NORMS)\n"
        "    check('nrom', norm)\n"
        "    return neighbours in ('substitute', 'add_remove')\n"
        "COLUMNS = ('region', 'age_band')  # not an option set: not matched\n"
    )
    (tmp_path / "jobs" / "spec.py").write_text(
        "from typing import Literal\n"
        "kind: Literal['grouped']  # one string: a tag, not matched\n"
        "stat: Literal['count', 'median']\n"
    )
    found = _option_set_problems(tmp_path)
    assert [p.split(":")[:2] for p in found] == [
        ["core/units.py", "2"],
        ["core/units.py", "4"],
        ["core/units.py", "5"],
        ["core/units.py", "6"],
        ["jobs/spec.py", "3"],
    ], found


def _kind_classes() -> set[str]:
    """The release kinds' classes: every subclass of ``Release`` in ``polars/`` (not the
    base itself) and every release entry of a spec (a subclass of ``SpecEntry``, declared
    beside its release in ``polars/``, or a model of ``jobs/spec.py`` with a ``kind``
    field)."""
    bases: dict[str, set[str]] = {}
    for path in (ROOT / "polars").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = {ast.unparse(b).split("[")[0].split(".")[-1] for b in node.bases}
                bases[node.name] = names

    def subclasses(base: str) -> set[str]:
        found = {base}
        while True:
            more = {c for c, b in bases.items() if b & found} - found
            if not more:
                return found - {base}
            found |= more

    releases = subclasses("Release")
    entries = subclasses("SpecEntry") | {
        node.name
        for node in ast.walk(ast.parse((ROOT / "jobs" / "spec.py").read_text()))
        if isinstance(node, ast.ClassDef)
        and any(isinstance(s, ast.AnnAssign) and ast.unparse(s.target) == "kind" for s in node.body)
    }
    return releases | entries


#: where a branch on a release's kind may stand in jobs/: the registry of kinds (the spec's
#: rules within the whole spec are each entry's own ``check_in``)
KIND_BRANCHES_ALLOWED = {"dpframe.jobs.kinds"}


def test_the_jobs_never_branch_on_a_release_kind():
    """The release object is the declaration: jobs/ asks it (``facts``, ``suite``, ...)
    through the registry of kinds instead of testing which kind it is -- no
    ``isinstance`` (or ``case``) on a release or spec entry class, no comparison of a
    ``kind`` with a kind's name (``r.kind == "pram"``, ``kind in ("grouped", ...)``)."""
    classes = _kind_classes()
    assert {"GroupedRelease", "MicrodataRelease", "GroupedSpec", "PramSpec"} <= classes
    found = []
    for path in (ROOT / "jobs").rglob("*.py"):
        mod = _module(path)
        if mod in KIND_BRANCHES_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"isinstance", "issubclass"}
                and len(node.args) == 2
            ):
                named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                named |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                if named & classes:
                    found.append(f"{mod}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.MatchClass) and ast.unparse(node.cls).split(".")[-1] in classes:
                found.append(f"{mod}:{node.lineno}: case {ast.unparse(node)}")
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                kinds = [
                    s
                    for s in sides
                    if (isinstance(s, ast.Name) and s.id == "kind")
                    or (isinstance(s, ast.Attribute) and s.attr == "kind")
                ]
                words = [
                    s
                    for s in sides
                    if any(
                        isinstance(c, ast.Constant) and isinstance(c.value, str)
                        for c in ast.walk(s)
                    )
                ]
                if kinds and words:
                    found.append(f"{mod}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "branches on a release kind outside jobs/kinds.py:\n" + "\n".join(found)
