"""Doctored releases: every promise of a published table is a check (issue 15).

A reviewer doctors each published table of the demo (and of the test spec, which adds a
variance): each doctoring must fail the suite its file's provenance declares (the spec
entry and the facts it records, as ``dpframe check`` reads them) with a message naming the
table, the column and the rule, and the untouched run must pass. A few doctored files,
their metadata kept as an attacker would, go through ``dpframe check`` end to end.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from dpframe.cli import app
from dpframe.jobs import load_spec, run
from dpframe.jobs.checks import CheckResult, check_release
from dpframe.jobs.kinds import release_class
from dpframe.jobs.spec import parse_spec
from dpframe.polars.io import read_provenance
from tests.jobs.conftest import write_spec

#: the test spec's grouped release, with a variance too (bounds [0, 10]: at most 50)
EXTRA_STATISTIC = """
[[release.statistics]]
stat = "var"
column = "satisfaction"
lower = 0
upper = 10
epsilon = 0.2
"""


@pytest.fixture(scope="module", params=["demo", "spec"])
def published(request, tmp_path_factory):
    """One run of the demo (``make demo``'s job, 200,000 rows), or of the test spec with a
    variance added; yields (folder, spec path)."""
    folder = tmp_path_factory.mktemp("doctored")
    if request.param == "demo":
        from dpframe.demo import run_demo

        result = run_demo(folder / "demo")
        return result.folder, result.spec
    spec_path = write_spec(folder, rows=20_000, budget=20.0)
    # a covariance with enough budget that its variances are (almost surely) above 0, so
    # its correlations are defined: at epsilon 0.2 every group's could be clipped to 0
    text = spec_path.read_text().replace(
        "upper_y = 10\nepsilon = 0.2", "upper_y = 10\nepsilon = 3.0"
    )
    assert "epsilon = 3.0" in text
    anchor = '[[release]]\nname = "microdata"'
    spec_path.write_text(text.replace(anchor, EXTRA_STATISTIC.lstrip() + "\n" + anchor))
    run(load_spec(spec_path), progress=False)
    return folder, spec_path


def _rewrite(path: Path, change) -> None:
    """Rewrite a released Parquet file with ``change(frame)``, keeping its metadata."""
    meta = pl.read_parquet_metadata(path)
    frame = change(pl.read_parquet(path))
    frame.write_parquet(path, metadata={k: v for k, v in meta.items() if k != "ARROW:schema"})


def _set(column: str, value, row: int = 0):
    def change(df: pl.DataFrame) -> pl.DataFrame:
        values = df[column].to_list()
        values[row] = value
        dtype = df.schema[column] if value is None or not isinstance(value, float) else pl.Float64
        return df.with_columns(pl.Series(column, values, dtype=dtype, strict=False))

    return change


def _defined(df: pl.DataFrame) -> int:
    """A row whose correlation is defined (both released variances above 0)."""
    defined = df["satisfaction_trust_corr"].is_not_null().arg_true()
    assert len(defined), "no group has a defined correlation: the test needs one"
    return defined[0]


def _var_column(df: pl.DataFrame) -> str:
    """A released variance of satisfaction (bounds [0, 10]: at most 50)."""
    if "satisfaction_var" in df.columns:
        return "satisfaction_var"
    return "satisfaction_trust_var_satisfaction"  # the demo's, from its covariance


GROUPED = "by_region"
COV = "scores_cov"
SHARES = "age_shares"
PRAM = "microdata"
CORR = "satisfaction_trust_corr"
COVC = "satisfaction_trust_cov"

#: (release, what, change, words the failure must contain)
CASES = [
    (GROUPED, "count +inf", _set("count", math.inf), ["count", "finite"]),
    (GROUPED, "count 0.5", _set("count", 0.5), ["count", "integer"]),
    (GROUPED, "count null", _set("count", None), ["count", "null"]),
    (GROUPED, "mean NaN", _set("income_mean", math.nan), ["income_mean", "NaN"]),
    (GROUPED, "mean above its bound", _set("income_mean", 1e9), ["income_mean", "200000"]),
    (GROUPED, "variance 1e12", _set("satisfaction_var", 1e12), ["satisfaction_var", "[0, 50]"]),
    (GROUPED, "variance +inf", _set("satisfaction_var", math.inf), ["satisfaction_var"]),
    (GROUPED, "correlation NaN", lambda df: _set(CORR, math.nan, _defined(df))(df), [CORR, "NaN"]),
    (
        GROUPED,
        "correlation 1 beside covariance 0",
        lambda df: _set(COVC, 0.0, _defined(df))(_set(CORR, 1.0, _defined(df))(df)),
        [CORR, "cov"],
    ),
    (GROUPED, "covariance +inf", _set(COVC, math.inf), [COVC]),
    (
        GROUPED,
        "an extra column",
        lambda df: df.with_columns(pl.lit(1.0).alias("income_raw")),
        ["income_raw", "column"],
    ),
    (GROUPED, "a dropped row", lambda df: df.slice(1), ["row"]),
    (GROUPED, "a duplicated key", lambda df: pl.concat([df, df.head(1)]), ["once"]),
    (
        GROUPED,
        "count as text",
        lambda df: df.with_columns(pl.col("count").cast(pl.String)),
        ["count", "type"],
    ),
    (COV, "a variance of 1e9", lambda df: _cell(df, 0, 0, 1e9), ["satisfaction", "above"]),
    (COV, "a variance of +inf", lambda df: _cell(df, 0, 0, math.inf), ["satisfaction"]),
    (COV, "asymmetric", lambda df: _cell(df, 0, 1, 3.0), ["symmetric"]),
    (COV, "a NaN cell", lambda df: _cell(df, 1, 0, math.nan), ["trust"]),
    (COV, "a dropped row", lambda df: df.slice(1), ["row"]),
    (
        COV,
        "an extra column",
        lambda df: df.with_columns(pl.lit(0.0).alias("income")),
        ["income", "column"],
    ),
    (SHARES, "a negative share", _set("proportion", -0.1), ["proportion", "outside [0, 1]"]),
    (SHARES, "shares not summing to 1", _set("proportion", 0.9), ["proportion", "sum"]),
    (SHARES, "a NaN share", _set("proportion", math.nan), ["proportion", "NaN"]),
    (SHARES, "a duplicated category", lambda df: pl.concat([df, df.head(1)]), ["age_band"]),
    (
        PRAM,
        "an extra, never-randomized column",
        lambda df: df.with_columns(pl.lit(123.0).alias("income")),
        ["income", "column"],
    ),
    (
        PRAM,
        "a value outside the categories",
        lambda df: _set("region", "Atlantis")(df.with_columns(pl.col("region").cast(pl.String))),
        ["region", "Atlantis"],
    ),
    (PRAM, "a null", _set("region", None), ["region", "null"]),
    (PRAM, "dropped rows", lambda df: df.slice(10), ["row"]),
]


def _cell(df: pl.DataFrame, i: int, j: int, value: float) -> pl.DataFrame:
    col = df.columns[1 + j]
    values = df[col].to_list()
    values[i] = value
    return df.with_columns(pl.Series(col, values, dtype=pl.Float64))


def _check(spec_path: Path) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["check", str(spec_path)])
    return res.exit_code, res.output


def _suite_check(path: Path, release: str, change) -> CheckResult:
    """The published file of ``release`` doctored in memory, validated against the suite
    of the spec entry and facts its own provenance records (as ``dpframe check`` does)."""
    prov = read_provenance(path)
    spec = parse_spec(prov.spec, source=str(path))
    entry = next(r for r in spec.release if r.name == release)
    kind = release_class(entry)
    facts = kind.read_facts(prov.facts, prov.entries)
    return check_release(kind.suite(entry.model_dump(), facts, change(pl.read_parquet(path))))


def test_the_untouched_run_passes(published):
    _, spec_path = published
    code, output = _check(spec_path)
    assert code == 0, output


@pytest.mark.parametrize(("release", "what", "change", "words"), CASES, ids=[c[1] for c in CASES])
def test_a_doctored_table_fails_its_suite(published, release, what, change, words):
    """Each doctoring fails the release's suite, built from what its file records (one
    ``dpframe check`` of a doctored folder is in the folder tests below)."""
    folder, _ = published
    path = (folder / "released" / "current" / f"{release}.parquet").resolve()
    if release == "by_region" and "satisfaction_var" in json.dumps(words):
        col = _var_column(pl.read_parquet(path))
        words = [col if w == "satisfaction_var" else w for w in words]
        change = {
            "variance 1e12": _set(col, 1e12),
            "variance +inf": _set(col, math.inf),
        }[what]
    result = _suite_check(path, release, change)
    output = result.report()
    assert not result.success, f"{what}: passed\n{output}"
    assert release in output, output
    for w in words:
        assert w in output, f"{what}: {w!r} not in\n{output}"


def test_a_doctored_file_fails_dpframe_check(published):
    """End to end: a doctored published file makes ``dpframe check`` fail, naming it."""
    folder, spec_path = published
    path = (folder / "released" / "current" / f"{GROUPED}.parquet").resolve()
    kept = path.with_suffix(".kept")
    shutil.copyfile(path, kept)
    try:
        _rewrite(path, _set("count", math.inf))
        code, output = _check(spec_path)
    finally:
        shutil.move(kept, path)
    assert code != 0, output
    for w in (GROUPED, "count", "finite"):
        assert w in output, output


FOLDER_CASES = [
    c
    for c in CASES
    if c[1]
    in (
        "count +inf",
        "a duplicated key",
        "a variance of 1e9",
        "shares not summing to 1",
        "an extra, never-randomized column",
        "dropped rows",
    )
]


def test_a_published_folder_is_checked_on_its_own(published, tmp_path):
    """`dpframe check released/` needs no spec file and no input: each file's provenance
    records its spec and the public facts its checks need (margins, the input's rows,
    categories). The folder is copied away from both; the untouched copy passes, and each
    doctored table fails."""
    folder, _ = published
    copy = tmp_path / "copy"
    shutil.copytree(folder / "released", copy, symlinks=True)
    res = CliRunner().invoke(app, ["check", str(copy)])
    assert res.exit_code == 0, res.output
    for release, what, change, words in FOLDER_CASES:
        path = (copy / "current" / f"{release}.parquet").resolve()
        kept = path.with_suffix(".kept")
        shutil.copyfile(path, kept)
        try:
            _rewrite(path, change)
            res = CliRunner().invoke(app, ["check", str(copy)])
        finally:
            shutil.move(kept, path)
        assert res.exit_code == 3, f"{what}: {res.output}"
        assert release in res.output and all(w in res.output for w in words), res.output


def test_a_dereferenced_copy_is_checked_on_its_own(published, tmp_path):
    """`cp -rL released/ copy` (rsync without -l, an object store) turns `current` into a
    folder and every top-level link into a file: the copy is checked as the original is
    (old: "current is not dpframe's link"), a doctored table in it still fails, and the
    results the check writes read the same at both names of the copy."""
    folder, _ = published
    copy = tmp_path / "copy"
    shutil.copytree(folder / "released", copy, symlinks=False)
    assert not (copy / "current").is_symlink() and (copy / "current").is_dir()
    res = CliRunner().invoke(app, ["check", str(copy)])
    assert res.exit_code == 0, res.output
    release, what, change, _ = FOLDER_CASES[0]
    top = copy / f"{release}.validation.json"
    inner = copy / "current" / f"{release}.validation.json"
    assert not top.is_symlink() and top.read_bytes() == inner.read_bytes()
    _rewrite(copy / "current" / f"{release}.parquet", change)
    res = CliRunner().invoke(app, ["check", str(copy)])
    assert res.exit_code == 3, f"{what}: {res.output}"
    assert top.read_bytes() == inner.read_bytes() and b'"success": false' in top.read_bytes()


def test_a_crafted_copy_is_never_written_outside(published, tmp_path):
    """A copy's manifest naming entries out of the run ("../victim", or a name under a
    link the copy holds) is refused (old: `dpframe check` replaced the victims beside the
    copy with the copy's own files, deleting a victim folder): nothing outside is touched."""
    folder, _ = published
    copy = tmp_path / "copy"
    shutil.copytree(folder / "released", copy, symlinks=False)
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "precious.txt").write_text("precious\n")
    (tmp_path / "victim.txt").write_text("precious\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "config").write_text("precious\n")
    (copy / "victim").mkdir()
    (copy / "victim" / "planted.txt").write_text("attacker\n")
    (copy / "victim.txt").write_text("attacker\n")
    (copy / "sub").symlink_to(tmp_path / "elsewhere")
    (copy / "current" / "sub").mkdir()
    (copy / "current" / "sub" / "config").write_text("attacker\n")
    manifest = copy / "current" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["files"] += ["../victim", "../victim.txt", "sub/config"]
    manifest.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["check", str(copy)])
    assert res.exit_code == 2 and "not a dpframe run manifest" in res.output, res.output
    assert "../victim" in res.output
    assert sorted(p.name for p in (tmp_path / "victim").iterdir()) == ["precious.txt"]
    assert (tmp_path / "victim.txt").read_text() == "precious\n"
    assert (tmp_path / "elsewhere" / "config").read_text() == "precious\n"


def test_a_copy_holds_no_table_the_check_does_not_read(published, tmp_path):
    """In a dereferenced copy, a top-level table left out of the manifest's "files" is
    replaced by the run's table the check read (old: the check passed, the top-level
    table -- here the raw input -- stayed); a table no release names is refused (old: the
    check passed without reading it)."""
    folder, spec = published
    raw = pl.read_parquet(next(spec.parent.glob("*.parquet")))
    for drop_release in (False, True):
        copy = tmp_path / f"copy{int(drop_release)}"
        shutil.copytree(folder / "released", copy, symlinks=False)
        manifest = copy / "current" / "manifest.json"
        doc = json.loads(manifest.read_text())
        name = doc["releases"][sorted(doc["releases"])[0]]
        raw.write_parquet(copy / name)
        doc["files"].remove(name)
        if drop_release:
            raw.write_parquet(copy / "current" / name)
            doc["releases"] = {k: v for k, v in doc["releases"].items() if v != name}
        manifest.write_text(json.dumps(doc))
        res = CliRunner().invoke(app, ["check", str(copy)])
        if drop_release:
            assert res.exit_code == 2 and "no release of the run's manifest names" in res.output
            assert str(copy / "current" / name) in res.output and str(copy / name) in res.output
        else:
            assert res.exit_code == 0, res.output
            top, inner = copy / name, copy / "current" / name
            assert top.read_bytes() == inner.read_bytes()


def test_a_check_of_a_copy_never_reads_through_a_link_in_it(published, tmp_path):
    """A copy's table folder (a Spark table) holding a link to a file elsewhere: the
    check refreshes the copy's top-level table with the link, not the file's content.
    Old: copytree followed the link and copied the file (a secret readable by whoever
    runs the check) into the copy."""
    folder, _ = published
    copy = tmp_path / "copy"
    shutil.copytree(folder / "released", copy, symlinks=False)
    if not (copy / "current" / "microdata.parquet").is_file():
        pytest.skip("this run has no microdata table")
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    meta = pl.read_parquet_metadata(copy / "current" / "microdata.parquet")["dpframe"]
    for table in (copy / "current" / "microdata.parquet", copy / "microdata.parquet"):
        data = table.read_bytes()
        table.unlink()
        table.mkdir()
        (table / "part-0.parquet").write_bytes(data)
        (table / "_dpframe.json").write_text(json.dumps({"dpframe": json.loads(meta)}))
    (copy / "current" / "microdata.parquet" / "leak").symlink_to(secret)
    res = CliRunner().invoke(app, ["check", str(copy)])
    assert res.exit_code == 0, res.output
    assert (copy / "microdata.parquet" / "leak").is_symlink()


def _record_fact(path: Path, name: str, value) -> None:
    """Rewrite a published file's provenance with one more fact, as an attacker would."""
    meta = pl.read_parquet_metadata(path)
    doc = json.loads(meta["dpframe"])
    doc.setdefault("facts", {})[name] = value
    meta["dpframe"] = json.dumps(doc)
    frame = pl.read_parquet(path)
    frame.write_parquet(path, metadata={k: v for k, v in meta.items() if k != "ARROW:schema"})


@pytest.mark.parametrize("fact", ["keep", "value_counts"])
def test_a_fact_no_writer_records_is_not_read_from_a_file(published, fact):
    """A file's provenance records only the facts its kind's ``facts()`` gives: ``keep``
    (columns carried through unrandomized) and ``value_counts`` are the caller's and the
    engine's, never a file's. A doctored PRAM file with a raw column beside the
    randomized ones, recording it as kept, still fails ``dpframe check``."""
    folder, spec_path = published
    path = (folder / "released" / "current" / f"{PRAM}.parquet").resolve()
    kept = path.with_suffix(".kept")
    shutil.copyfile(path, kept)
    try:
        frame = pl.read_parquet(path).with_columns(pl.lit(123.0).alias("income"))
        meta = pl.read_parquet_metadata(path)
        frame.write_parquet(path, metadata={k: v for k, v in meta.items() if k != "ARROW:schema"})
        value = ["income"] if fact == "keep" else {"income": {"income": [123.0], "rows": [1]}}
        _record_fact(path, fact, value)
        code, output = _check(spec_path)
    finally:
        shutil.move(kept, path)
    assert code != 0, output
    assert "income" in output, output


def test_a_file_whose_ledger_entries_were_forged_fails_dpframe_check(published):
    """``dpframe check release.toml`` reads a PRAM column's categories (the spec declaring
    none) from the file's ledger entries: entries edited to hold a category the release
    never had -- their hash dropped, as an entry of an older dpframe has none -- must not
    make a value outside the categories pass."""
    folder, spec_path = published
    path = (folder / "released" / "current" / f"{PRAM}.parquet").resolve()
    kept = path.with_suffix(".kept")
    shutil.copyfile(path, kept)
    try:
        meta = pl.read_parquet_metadata(path)
        doc = json.loads(meta["dpframe"])
        for e in doc["entries"]:
            design = (e.get("details") or {}).get("design")
            if isinstance(design, dict) and e.get("columns") == ["region"]:
                design["categories"] = [*design["categories"], "Atlantis"]
                e["hash"] = ""
        meta["dpframe"] = json.dumps(doc)
        frame = _set("region", "Atlantis")(
            pl.read_parquet(path).with_columns(pl.col("region").cast(pl.String))
        )
        frame.write_parquet(path, metadata={k: v for k, v in meta.items() if k != "ARROW:schema"})
        code, output = _check(spec_path)
    finally:
        shutil.move(kept, path)
    assert code != 0, output
