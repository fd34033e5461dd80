"""The Great Expectations adapter: a release's suite validated, its failures worded, saved.

Every release kind declares its own suite as plain data (:mod:`dpframe.polars.expectations`;
each kind's ``suite`` next to its release object: ``grouped_suite`` in
:mod:`dpframe.polars.grouped`, ``pram_suite`` in :mod:`dpframe.polars.pram`,
``proportions_suite`` and ``covariance_suite`` in :mod:`dpframe.polars.frame`), from its
declared arguments (its spec entry) and the public facts its file records -- not from the
input. This module turns such a suite into Great Expectations suites, one per table (the
released one, ``"main"``, and the small ones derived from it in polars: ``"keys"``,
``"pairs"``, ``"values.<column>"``, ...), validates each table as its own batch, words
each failure in one readable line, and saves the suites, the results and the tables
(:func:`save_check`), or reloads a suite checking that nothing was lost
(:func:`load_suite`). :func:`check` and :func:`expectations` do the same for a release
object of the Python API (``dpframe.check``, ``dpframe.expectations``).

Great Expectations has no polars data source: each (small) table is converted with
``to_pandas()`` at the boundary. Great Expectations itself (about 3 s and 240 MB to import)
is imported only when a check runs; :func:`expectations_for` needs none of it.

Examples
--------
>>> import polars as pl
>>> from dpframe.jobs.spec import ProportionsSpec
>>> spec = ProportionsSpec(name="shares", kind="proportions", column="vote",
...                        categories=["a", "b"], epsilon=1.0)
>>> table = pl.DataFrame({"vote": ["a", "b"], "proportion": [0.25, 0.75]})
>>> exps = expectations_for(spec, table)
>>> [(e["type"], e["kwargs"]) for e in exps if e["kwargs"].get("column") == "proportion"][1]
('expect_column_values_to_be_between', {'column': 'proportion', 'min_value': 0.0, 'max_value': 1.0})
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.files import atomic_write_text
from dpframe.errors import ChecksUnavailableError, InvalidDataError, InvalidParameterError
from dpframe.jobs.kinds import KINDS
from dpframe.polars.expectations import FINITE, RTOL, Suite, bounds_rule
from dpframe.polars.io import read_provenance
from dpframe.polars.release import Release

__all__ = [
    "FINITE",
    "RTOL",
    "CheckResult",
    "check",
    "check_release",
    "ensure_checks_available",
    "expectations",
    "expectations_for",
    "load_suite",
    "save_check",
    "suite_for",
]

SUITE_FORMAT = "dpframe.check/1"
_MAX_EXAMPLES = 3


# -- the result ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    """The outcome of :func:`check_release`.

    ``failures`` holds one readable line per failed expectation (it names the column and
    shows offending values); ``suite`` and ``result`` are the Great Expectations suites and
    validation results as JSON-ready dicts (one per validated table, under ``"suites"`` /
    ``"results"``), as :func:`save_check` writes them.
    """

    release: str
    success: bool
    failures: list[str]
    suite: dict = field(repr=False)
    result: dict = field(repr=False)
    n_expectations: int
    #: every table validated, as Great Expectations saw it: the released one (``"main"``)
    #: and those derived from it (see :func:`save_check`)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    def report(self) -> str:
        """A multi-line human-readable summary."""
        kind = self.suite.get("kind", "?")
        if self.success:
            return (
                f"check of release {self.release!r} ({kind}): passed, "
                f"{self.n_expectations} expectations met"
            )
        stats = self.result.get("statistics", {})
        failed = stats.get("unsuccessful_expectations", len(self.failures))
        lines = [
            f"check of release {self.release!r} ({kind}): FAILED, {failed} of "
            f"{self.n_expectations} expectations not met:"
        ]
        lines += [f"  - {f}" for f in self.failures]
        return "\n".join(lines)


# -- the suite of a spec entry, or of a release object ---------------------------------------


def suite_for(
    entry: Any,
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    margins: pl.DataFrame | None = None,
    input_rows: int | None = None,
    sizes: str | None = None,
    value_counts: Mapping[str, pl.DataFrame] | None = None,
    keep: Sequence[str] = (),
) -> Suite:
    """The suite of a release spec's entry (``GroupedSpec``, ``PramSpec``, ...) for its
    released ``frame``, with the public facts given: its kind's own ``suite``.

    ``margins`` (the public key frame) is required for a grouped release; ``input_rows``
    (the input's row count) adds the row-count check of a PRAM release and, for a
    covariance release without ``n``, the variances' upper bound; ``sizes`` names a column
    of ``margins`` with public group sizes (a statistic of a group too small to have one is
    then allowed to be null). ``value_counts`` gives, for a PRAM release, each column's
    values (``value``) and their records (``rows``) counted by the engine, so the
    microdata itself is not read on the driver; ``frame`` then gives only the dtypes
    (the same tables for any column name, ``rows`` or ``value`` included). ``keep`` names the
    columns a PRAM release was told to carry through unchanged (``keep=``): the only
    columns allowed beside the randomized ones.
    """
    kind = KINDS.get(getattr(entry, "kind", None)) if hasattr(entry, "model_dump") else None
    if kind is None:
        raise InvalidParameterError(
            "release must be a release spec (GroupedSpec, PramSpec, ProportionsSpec or "
            f"CovarianceSpec from dpframe.jobs.spec), got {type(entry).__name__}"
        )
    given = {"margins": margins, "input_rows": input_rows, "sizes": sizes}
    given |= {"value_counts": value_counts, "keep": list(keep)}
    facts = {k: v for k, v in given.items() if v is not None}
    return kind.suite(entry.model_dump(), facts, frame)


def expectations_for(
    entry: Any,
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    margins: pl.DataFrame | None = None,
    input_rows: int | None = None,
    sizes: str | None = None,
    value_counts: Mapping[str, pl.DataFrame] | None = None,
    keep: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The expectations a release's table must meet, without Great Expectations.

    Each is ``{"type": "expect_...", "kwargs": {...}, "table": name, "meta": {...}}``: the
    expectation type and arguments as Great Expectations names them, the table it applies
    to (``"main"``, the released table, or one derived from it: ``"keys"``, ``"pairs"``,
    ``"nulls"``, ``"diagonal"``, ``"values.<column>"``), and what :func:`check_release`
    needs to word a failure. The suite depends on the spec and the public facts only;
    ``frame`` gives the dtypes the declared values are cast to. Arguments as in
    :func:`suite_for`.
    """
    suite = suite_for(
        entry,
        frame,
        margins=margins,
        input_rows=input_rows,
        sizes=sizes,
        value_counts=value_counts,
        keep=keep,
    )
    return [dict(e) for e in suite.expectations]


def _released(release: Release[Any], table: Any) -> Any:
    """The table to check: given (a frame, or a path read lazily), else the release's own."""
    if table is not None:
        if isinstance(table, str | Path):
            p = Path(table)
            return pl.scan_parquet(p / "*.parquet" if p.is_dir() else p)
        return table
    if release.rowwise:
        raise InvalidParameterError(
            "table: a PRAM release's records are not kept; pass the file it wrote "
            "(check(release, table='microdata.parquet'))"
        )
    if not release.materialised:
        raise InvalidParameterError(
            "release: collect it first (checking never charges or draws: an uncollected "
            "release has no table to check)"
        )
    return release.collect()  # the same table again: a release materialises once


def _release_suite(release: Any, table: Any, name: str | None) -> Suite:
    """The suite of a Python-API release object's table (its own declaration)."""
    if not isinstance(release, Release):
        raise InvalidParameterError(
            "release must be a release object of the Python API (dpframe.group_by(...)"
            ".agg(...), dpframe.covariance_matrix, dpframe.proportions, dpframe.pram.release), "
            f"got {type(release).__name__}"
        )
    arguments = release.to_spec(name=name)
    frame = _released(release, table)
    facts = release.facts()
    missing = [f for f in release.required_facts if facts.get(f) is None]
    if missing and isinstance(table, str | Path):  # as the file it wrote records them
        recorded = read_provenance(table).facts
        facts |= {f: recorded.get(f) for f in missing}
    return type(release).suite(arguments, facts, frame)


def expectations(release: Any, table: Any = None, *, name: str | None = None) -> list[dict]:
    """The expectations ``release``'s table must meet (plain data, no Great Expectations).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> votes = pl.DataFrame({"vote": ["a", "b", "a"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     shares = dpframe.proportions(votes, "vote", categories=["a", "b"], epsilon=0.5, n=3)
    ...     _ = shares.collect()
    >>> dpframe.expectations(shares)[0]["kwargs"]["column_set"]
    ['vote', 'proportion']
    """
    return [dict(e) for e in _release_suite(release, table, name).expectations]


def check(release: Any, table: Any = None, *, name: str | None = None) -> CheckResult:
    """Validate a collected release's table (or a PRAM release's written file) against the
    suite of its own declaration (:meth:`~dpframe.Release.to_spec` and
    :meth:`~dpframe.Release.facts`); see :func:`check_release`.

    Parameters
    ----------
    release
        A collected release object of the Python API.
    table : polars frame or path, optional
        The released table; default the release's own output. A PRAM release needs the
        path it wrote (its file, or a Spark folder).
    name : str, optional
        The name the suite and its messages use (default: the release's kind and id).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
    >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = people.dp.group_by("region", margins=regions).agg(
    ...         dpframe.agg.count(epsilon=0.5)
    ...     )
    ...     _ = release.collect()
    >>> dpframe.check(release).success
    True
    """
    return check_release(_release_suite(release, table, name))


def _fmt(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return format(v, ".10g")
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return {"NaN": "NaN", "Infinity": "inf", "-Infinity": "-inf"}[v]
    return repr(v)


# -- Great Expectations (imported here only) ---------------------------------------------


def _gx():
    """Import Great Expectations, turning an exit during its import into an error.

    Great Expectations imports ``pyspark.sql.connect`` when pyspark is installed, and
    pyspark 4 then calls ``sys.exit(0)`` if the Spark Connect dependencies (grpcio, ...)
    are missing and the main module has no file (``python -c``, a script on stdin): it
    takes that for a doctest run. Silently exiting with status 0 in the middle of a
    release would be a disaster; ``dpframe[spark]`` installs ``pyspark[connect]`` so it
    does not happen, and this turns it into a clear error if it still does.
    """
    try:
        import great_expectations as gx
    except SystemExit as exc:
        raise ChecksUnavailableError(
            "importing great_expectations exited the interpreter (pyspark without its Spark "
            "Connect dependencies, in a program with no file of its own such as python -c): "
            "pip install 'pyspark[connect]' (or 'dpframe[spark]'), or run from a file"
        ) from exc
    return gx


def _import_would_exit() -> bool:
    """Whether ``import great_expectations`` would hit pyspark's ``sys.exit(0)`` (see _gx).

    pyspark exits when the main module has no spec and no file, the interpreter is not
    interactive, and its Spark Connect dependencies are missing; this asks pyspark itself
    about the last (without importing Great Expectations, which costs 240 MB).
    """
    import importlib.util
    import sys

    if "great_expectations" in sys.modules or importlib.util.find_spec("pyspark") is None:
        return False
    main = sys.modules.get("__main__")
    if main is None or main.__spec__ is not None or hasattr(main, "__file__"):
        return False
    if hasattr(sys, "ps1"):
        return False
    try:
        from pyspark.testing.utils import should_test_connect
    except Exception:  # another pyspark layout: the import-time guard in _gx still holds
        return False
    return not should_test_connect


def ensure_checks_available() -> None:
    """Raise :class:`ChecksUnavailableError` if the checks could not run (cheap: imports nothing
    heavy). A release job calls it before it charges anything."""
    import importlib.util

    if importlib.util.find_spec("great_expectations") is None:
        raise ChecksUnavailableError(
            "great_expectations is not installed; it checks every release before it is "
            "published: pip install great-expectations (a dependency of dpframe)"
        )
    if _import_would_exit():
        raise ChecksUnavailableError(
            "importing great_expectations would exit the interpreter: pyspark is installed "
            "without its Spark Connect dependencies and this program has no file of its own "
            "(python -c): pip install 'pyspark[connect]' (or 'dpframe[spark]'), or run "
            "from a file"
        )


def _context():
    gx = _gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


def _expectation(e: dict):
    """A built-in Great Expectations expectation (never a dict, which could be dropped)."""
    import great_expectations.expectations as gxe

    cls_name = "".join(part.capitalize() for part in e["type"].split("_"))
    cls = getattr(gxe, cls_name, None)
    if cls is None:
        raise InvalidParameterError(f"unknown expectation type {e['type']!r}")
    kwargs = {k: v for k, v in e["kwargs"].items() if v is not None}
    return cls(**kwargs, meta={"dpframe": {**e["meta"], "table": e["table"]}})


def _jsonable(obj: Any) -> Any:
    """Strict JSON: non-finite floats as strings, tuples as lists, numpy scalars unwrapped."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    if hasattr(obj, "item"):  # numpy scalar
        return _jsonable(obj.item())
    return str(obj)


def _exception_message(info: Any) -> str | None:
    if isinstance(info, dict):
        if info.get("raised_exception") and info.get("exception_message"):
            return str(info["exception_message"]).strip().splitlines()[-1]
        for v in info.values():
            msg = _exception_message(v)
            if msg:
                return msg
    return None


def _row_desc(row: dict, meta: dict, column: str | None = None) -> str:
    where = [c for c in meta.get("where", []) if c in row and c != column]
    if not where:
        return ""
    label = meta.get("where_label")
    if label and len(where) == 1:
        return f"{label} {_fmt(row[where[0]])}"
    return ", ".join(f"{c}={_fmt(row[c])}" for c in where)


def _example(row: dict, column: str, meta: dict) -> str:
    template = meta.get("example")
    if template:
        # strings as they are (names, formulas), numbers formatted; {value} quoted
        fields = {k: v if isinstance(v, str) else _fmt(v) for k, v in row.items()}
        fields["value"] = _fmt(row.get(column))
        try:
            text = template.format(**fields)
        except (KeyError, IndexError):
            text = _fmt(row.get(column))
    elif meta.get("_type") == "expect_column_values_to_not_be_null":
        text = ""
    else:
        text = _fmt(row.get(column))
    desc = _row_desc(row, meta, column)
    if text and desc:
        return f"{text} ({desc})"
    return text or (f"at {desc}" if desc else "")


def _failure(cfg: dict, res: dict, exc: str | None) -> str:
    """One readable line for a failed expectation."""
    type_ = cfg["type"]
    kw = cfg.get("kwargs", {})
    meta = dict((cfg.get("meta") or {}).get("dpframe", {}))
    meta["_type"] = type_
    column = kw.get("column")
    subject = meta.get("subject") or column or "table"
    if exc:
        return f"{subject}: could not be checked: {exc}"
    index_rows = res.get("partial_unexpected_index_list") or []
    if meta.get("subject_from") and index_rows:
        names = sorted({str(r.get(meta["subject_from"])) for r in index_rows})
        subject = ", ".join(names)
    if type_ == "expect_table_columns_to_match_set":
        mism = (res.get("details") or {}).get("mismatched") or {}
        parts = []
        if mism.get("missing"):
            parts.append(f"missing {sorted(mism['missing'])}")
        if mism.get("unexpected"):
            parts.append(f"unexpected {sorted(mism['unexpected'])}")
        return f"columns: {'; '.join(parts) or 'differ'} (expected {sorted(kw['column_set'])})"
    if type_ == "expect_column_to_exist":
        return f"{subject}: column is missing from the released table"
    if type_ == "expect_table_row_count_to_equal":
        why = meta.get("expected")
        return f"row count is {res.get('observed_value')}, expected {kw['value']}" + (
            f" ({why})" if why else ""
        )
    if type_ == "expect_column_sum_to_be_between":
        what = meta.get("what", "sum")
        expected = meta.get("expected") or f"in [{kw.get('min_value')}, {kw.get('max_value')}]"
        return f"{subject}: {what} is {_fmt(res.get('observed_value'))}, expected {expected}"
    if type_ in (
        "expect_column_distinct_values_to_equal_set",
        "expect_column_distinct_values_to_contain_set",
    ):
        parts = []
        if res.get("partial_missing_list"):
            parts.append(f"missing {[v for v in res['partial_missing_list']]}")
        if res.get("partial_unexpected_list"):
            parts.append(f"unexpected {[v for v in res['partial_unexpected_list']]}")
        expected = meta.get("expected") or f"{kw.get('value_set')}"
        return f"{subject}: values differ from {expected}: {'; '.join(parts) or 'see result'}"
    # column map expectations: between, in_set, not_null, unique
    bad = res.get("unexpected_count")
    total = res.get("element_count")
    noun = meta.get("noun", "values")
    if type_ == "expect_column_values_to_not_be_null":
        rule = "are null or NaN"
    elif type_ == "expect_column_values_to_be_unique":
        rule = "repeated"
    elif type_ == "expect_column_values_to_be_in_set":
        rule = meta.get("rule") or f"outside {kw.get('value_set')}"
    else:
        rule = meta.get("rule") or bounds_rule(kw.get("min_value"), kw.get("max_value"))
    head = f"{subject}: {bad} of {total} {noun} {rule}"
    if index_rows:
        examples = [_example(r, column, meta) for r in index_rows[:_MAX_EXAMPLES]]
    else:
        examples = [_fmt(v) for v in (res.get("partial_unexpected_list") or [])[:_MAX_EXAMPLES]]
    examples = [x for x in examples if x]
    more = "" if (bad or 0) <= len(examples) else ", ..."
    return head + (f", e.g. {'; '.join(examples)}{more}" if examples else "")


def _failures(results: dict[str, dict]) -> list[str]:
    out: list[str] = []
    for _table, vr in results.items():
        entries = vr.get("results", [])
        # a missing column is reported once, by the column-set / column-exists check
        missing: set[str] = set()
        absent_tables = False
        for r in entries:
            cfg = r["expectation_config"]
            if r["success"]:
                continue
            if cfg["type"] == "expect_table_columns_to_match_set":
                mism = (r.get("result", {}).get("details") or {}).get("mismatched") or {}
                missing.update(mism.get("missing") or [])
            if cfg["type"] == "expect_column_to_exist":
                absent_tables = True
        order = sorted(
            entries,
            key=lambda r: ((r["expectation_config"].get("meta") or {}).get("dpframe", {})).get(
                "id", 0
            ),
        )
        for r in order:
            if r["success"]:
                continue
            cfg = r["expectation_config"]
            exc = _exception_message(r.get("exception_info"))
            if absent_tables and cfg["type"] != "expect_column_to_exist":
                continue
            if exc and cfg.get("kwargs", {}).get("column") in missing:
                continue
            out.append(_failure(cfg, r.get("result") or {}, exc))
    return out


def _result_format(index: list[str]) -> dict:
    rf: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": 20}
    if index:
        rf["unexpected_index_column_names"] = index
    return rf


def check_release(
    release: Suite | Any,
    frame: pl.DataFrame | pl.LazyFrame | None = None,
    *,
    margins: pl.DataFrame | None = None,
    input_rows: int | None = None,
    sizes: str | None = None,
    value_counts: Mapping[str, pl.DataFrame] | None = None,
    keep: Sequence[str] = (),
) -> CheckResult:
    """Validate a release's suite: a :class:`~dpframe.polars.expectations.Suite` (a release
    kind's ``suite``, or :meth:`Release.expectations`), or the suite of a release spec's
    entry for its released ``frame`` (:func:`suite_for`, with the public facts given).

    Imports Great Expectations (once per process: about 3 s). Each table -- the released
    one and the small ones derived from it -- is converted to pandas and validated as its
    own batch of an ephemeral context. Returns a :class:`CheckResult`; it does not raise
    when an expectation fails (``success`` is False and ``failures`` says why).
    """
    if isinstance(release, Suite):
        plan = release
    else:
        plan = suite_for(
            release,
            frame,  # type: ignore[arg-type]  # checked by the kind's suite
            margins=margins,
            input_rows=input_rows,
            sizes=sizes,
            value_counts=value_counts,
            keep=keep,
        )
    gx = _gx()
    context = _context()
    source = context.data_sources.add_pandas(name="dpframe")
    suites: dict[str, dict] = {}
    results: dict[str, dict] = {}
    for table, data in plan.tables.items():
        planned = [e for e in plan.expectations if e["table"] == table]
        if not planned:
            continue
        suite = gx.ExpectationSuite(
            name=f"{plan.release}.{table}",
            expectations=[_expectation(e) for e in planned],
            meta={"dpframe": {"release": plan.release, "kind": plan.kind, "table": table}},
        )
        if len(suite.expectations) != len(planned):
            raise InvalidDataError(
                f"Great Expectations kept {len(suite.expectations)} of {len(planned)} "
                f"expectations of table {table!r}"
            )
        asset = source.add_dataframe_asset(name=table)
        batch_definition = asset.add_batch_definition_whole_dataframe(name="whole")
        batch = batch_definition.get_batch(batch_parameters={"dataframe": data.to_pandas()})
        validation = batch.validate(suite, result_format=_result_format(plan.index[table]))
        suites[table] = _jsonable(suite.to_json_dict())
        results[table] = _jsonable(validation.to_json_dict())
    n = len(plan.expectations)
    failed = sum(r["statistics"]["unsuccessful_expectations"] for r in results.values())
    success = all(r["success"] for r in results.values())
    failures = [] if success else _failures(results)
    suite_doc = {
        "format": SUITE_FORMAT,
        "release": plan.release,
        "kind": plan.kind,
        "n_expectations": n,
        "great_expectations_version": gx.__version__,
        "suites": suites,
    }
    result_doc = {
        "format": SUITE_FORMAT,
        "release": plan.release,
        "kind": plan.kind,
        "success": success,
        "statistics": {
            "evaluated_expectations": n,
            "successful_expectations": n - failed,
            "unsuccessful_expectations": failed,
        },
        "failures": failures,
        "results": results,
    }
    return CheckResult(
        release=plan.release,
        success=success,
        failures=failures,
        suite=suite_doc,
        result=result_doc,
        n_expectations=n,
        tables={t: plan.tables[t] for t in suites},
    )


# -- saving and reloading -----------------------------------------------------------------


def _dump(doc: dict) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def save_check(result: CheckResult, folder: str | Path, *, data_docs: bool = False) -> list[Path]:
    """Write ``{release}.suite.json`` and ``{release}.validation.json`` into ``folder``, and
    the folder ``{release}.checks/``: for every table validated, ``<table>.parquet`` (the
    released table as checked, ``main``, and each table derived from it: ``keys``,
    ``pairs``, ``types``, ``values.<column>``, ...) beside ``<table>.suite.json``, a plain
    Great Expectations suite -- so a Great Expectations user can run every suite in their
    own Data Context (docs/release-cli.md shows how).

    Each file is written to a temporary file and renamed into place, so a reader never
    sees half a file. With ``data_docs=True`` also builds Great Expectations Data Docs
    (static HTML: the suites and their validation results) under
    ``folder/"data_docs"/release/`` (its ``index.html`` is returned last); the pages load
    their styles and scripts from public CDNs. Returns the paths written.
    """
    if not isinstance(result, CheckResult):
        raise InvalidParameterError(f"result must be a CheckResult, got {type(result).__name__}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    texts = {
        folder / f"{result.release}.suite.json": _dump(result.suite),
        folder / f"{result.release}.validation.json": _dump(result.result),
    }
    index = _build_data_docs(result, folder / "data_docs" / result.release) if data_docs else None
    checks = _save_tables(result, folder / f"{result.release}.checks") if result.tables else []
    for path, text in texts.items():
        atomic_write_text(path, text)
    return [*texts, *checks, *([index] if index is not None else [])]


def _save_tables(result: CheckResult, target: Path) -> list[Path]:
    """``target/<table>.parquet`` and ``<table>.suite.json`` for every table, swapped in whole."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    written = []
    try:
        for table, frame in result.tables.items():
            frame.write_parquet(tmp / f"{table}.parquet")
            suite = result.suite["suites"][table]
            plain = {k: suite[k] for k in ("name", "expectations", "meta") if k in suite}
            (tmp / f"{table}.suite.json").write_text(_dump(plain))
            written += [target / f"{table}.parquet", target / f"{table}.suite.json"]
        os.chmod(tmp, 0o755)
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written


def _build_data_docs(result: CheckResult, target: Path) -> Path:
    """Render the suites and results with the Data Docs site builder, then move into place."""
    gx = _gx()
    from great_expectations.core.expectation_validation_result import (
        expectationSuiteValidationResultSchema,
    )
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        context = _context()
        context.add_data_docs_site(
            site_name="dpframe",
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(tmp),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        run_id = RunIdentifier(run_name=f"dpframe-check-{result.release}")
        for table, suite_json in result.suite["suites"].items():
            suite = context.suites.add(_suite_from_json(gx, suite_json))
            validation = expectationSuiteValidationResultSchema.load(
                result.result["results"][table]
            )
            key = ValidationResultIdentifier(
                expectation_suite_identifier=ExpectationSuiteIdentifier(name=suite.name),
                run_id=run_id,
                batch_identifier=table,
            )
            context.validation_results_store.set(key, validation)
        context.build_data_docs(site_names=["dpframe"])
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the site is published
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old / target.name)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target / "index.html"


def _suite_from_json(gx: Any, suite_json: dict):
    """Rebuild a GE suite; GE logs (and skips) an expectation it cannot build -- quieten it."""
    log = logging.getLogger("great_expectations.core.expectation_suite")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        return gx.ExpectationSuite(**suite_json)
    finally:
        log.setLevel(level)


def load_suite(path: str | Path) -> dict:
    """Re-read a suite saved by :func:`save_check`, checking that nothing was lost.

    Great Expectations silently drops, on loading, an expectation whose class is not
    registered (a custom expectation whose module was not imported). Each saved suite is
    rebuilt with Great Expectations and its expectation count compared with the count
    written at save time; a mismatch raises :class:`~dpframe.errors.InvalidDataError`
    naming the expectation types that were lost. Returns the saved document.
    """
    path = Path(path)
    if not path.exists():
        raise InvalidParameterError(f"suite file {path} does not exist")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidDataError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != SUITE_FORMAT:
        raise InvalidDataError(
            f"{path} is not a dpframe suite file (expected format {SUITE_FORMAT!r})"
        )
    saved = doc.get("n_expectations")
    suites = doc.get("suites") or {}
    in_file = sum(len(s.get("expectations", [])) for s in suites.values())
    if in_file != saved:
        raise InvalidDataError(
            f"{path}: the file lists {in_file} expectations but {saved} were saved; "
            "it was edited or truncated"
        )
    gx = _gx()
    kept = 0
    lost: Counter[str] = Counter()
    for suite_json in suites.values():
        suite = _suite_from_json(gx, suite_json)
        kept += len(suite.expectations)
        lost += Counter(e["type"] for e in suite_json["expectations"]) - Counter(
            e.expectation_type for e in suite.expectations
        )
    if kept != saved:
        raise InvalidDataError(
            f"{path}: Great Expectations loaded {kept} of the {saved} saved expectations; "
            f"it dropped {dict(lost)} (their classes are not registered: import the module "
            "defining them, or rebuild the suite with built-in expectations)"
        )
    return doc
