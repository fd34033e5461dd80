import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app

runner = CliRunner()


def test_demo_end_to_end(tmp_path):
    out = tmp_path / "demo"
    res = runner.invoke(app, ["demo", "--out", str(out), "--rows", "20000"])
    assert res.exit_code == 0, res.output
    assert "Plan" in res.output and "Ledger" in res.output and "DR-HA" in res.output
    assert "(6 of 18 rows shown; all 18 in" in res.output  # not a silent head()
    released = out / "released"
    for name in ("by_region", "by_age", "households", "microdata", "age_shares", "scores_cov"):
        assert (released / f"{name}.parquet").exists()
        assert (released / f"{name}.suite.json").exists()
        assert (released / f"{name}.validation.json").exists()
    assert not list(released.glob(".staging-*")) and not list(released.glob(".failed-*"))
    ledger = dpframe.Accountant.open(out / "ledger.db")
    assert ledger.spent.epsilon == pytest.approx(2.7) and len(ledger.ledger) == 15
    assert ledger.spent.delta == pytest.approx(1e-6)  # the private selection of ages
    households = pl.read_parquet(released / "households.parquet")  # protects households
    assert households.columns == ["region", "respondents", "income_total", "households"]
    assert households.height == 6 and "household" not in households.columns
    prov = dpframe.read_provenance(released / "households.parquet")
    assert {(e.details["unit"], e.details["max_rows"]) for e in prov.entries} == {("household", 3)}
    sens = {e.details["statistic"]: e.details["sensitivity"] for e in prov.entries}
    assert sens == {"count": 6.0, "sum": 900_000.0, "count_distinct": 2.0}  # 2GR, 2GRM, 2G
    grouped = pl.read_parquet(released / "by_region.parquet")
    assert grouped.height == 18  # 6 regions x 3 age bands, the empty "Islands" included
    assert grouped["income_mean"].is_between(0, 200_000).all()
    assert (grouped["count"] >= 0).all()
    prov = dpframe.read_provenance(released / "by_region.parquet")
    assert prov.epsilon == pytest.approx(1.0) and prov.spec["version"] == 1
    assert prov.neighbours == "substitute"
    shares = pl.read_parquet(released / "age_shares.parquet")["proportion"]
    assert shares.sum() == pytest.approx(1.0) and shares.is_between(0, 1).all()
    micro = pl.read_parquet(released / "microdata.parquet")
    assert micro.columns == ["region", "age_band"] and micro.height == 20000
    prov = dpframe.read_provenance(released / "microdata.parquet")
    assert [e.mechanism for e in prov.entries] == ["pram", "pram"]
    assert prov.epsilon == pytest.approx(0.7)
    assert set(prov.pram_designs) == {"region", "age_band"}
    assert (out / "risk.png").exists()
    page = (released / "report.html").read_text()  # the offline report, with the DR-HA curves
    assert "released/report.html" in res.output
    assert page.count("<polyline") == 8 and "spends no budget" in page
    assert "http://" not in page and "https://" not in page


def test_demo_replaces_previous_output(tmp_path):
    out = tmp_path / "demo"
    for _ in range(2):  # a fresh ledger each run: the second run is not over budget
        res = runner.invoke(app, ["demo", "--out", str(out), "--rows", "2000"])
        assert res.exit_code == 0, res.output
    mine = tmp_path / "mine"  # a folder the demo did not make is never deleted
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    res = runner.invoke(app, ["demo", "--out", str(mine), "--rows", "2000"])
    assert res.exit_code == 2 and "not a previous demo's folder" in res.output
    assert (mine / "thesis.tex").exists()


def _rows_of(output: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.split("│")[1:-1]] for line in output.splitlines() if "│" in line
    ]


def test_ledger_show(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    out = tmp_path / "demo"
    runner.invoke(app, ["demo", "--out", str(out), "--rows", "2000"])
    res = runner.invoke(app, ["ledger", "show", str(out / "ledger.db")])
    assert res.exit_code == 0 and "spent epsilon=2" in res.output
    # each entry's release name and privacy unit (issue 32)
    named = {(r[1], r[2]) for r in _rows_of(res.output)}
    assert named == {
        ("by_region", "record"),
        ("by_age", "record"),
        ("households", 'person "household" (max_rows=3, max_groups=1)'),
        ("microdata", "record"),
        ("age_shares", "record"),
        ("scores_cov", "record"),
    }
    res = runner.invoke(app, ["ledger", "show", str(out / "released" / "households.parquet")])
    assert res.exit_code == 0 and "Provenance" in res.output
    assert {(r[1], r[2]) for r in _rows_of(res.output)} == {
        ("households", 'person "household" (max_rows=3, max_groups=1)')
    }
    res = runner.invoke(app, ["ledger", "show", str(out / "missing.json")])
    assert res.exit_code == 2


def test_ledger_verify_against_an_output_folder_reads_every_run(tmp_path):
    """Issue 31: ``--against`` read the current run only, so a ledger that lost the
    previous run's entries agreed. Now it reads every run kept (current and previous)."""
    from tests.jobs.conftest import write_spec

    spec_path = write_spec(tmp_path, rows=1000, budget=10.0)
    for _ in range(2):
        res = runner.invoke(app, ["release", str(spec_path), "--no-progress"])
        assert res.exit_code == 0, res.output
    ledger, released = tmp_path / "ledger.db", tmp_path / "released"
    res = runner.invoke(app, ["ledger", "verify", str(ledger), "--against", str(released)])
    assert res.exit_code == 0, res.output
    assert "8 released file(s) of 2 run(s) agree" in res.output


@pytest.mark.parametrize(
    ("name", "make", "say"),
    [
        ("plain.parquet", lambda p: pl.DataFrame({"a": [1]}).write_parquet(p), "no dpframe"),
        ("fake.parquet", lambda p: p.write_text("x"), "cannot be read"),
        ("garbage.db", lambda p: p.write_bytes(b"garbage" * 10), "or is corrupt"),
        ("list.json", lambda p: p.write_text("[1]"), "not a dpframe ledger"),
        ("adir", lambda p: p.mkdir(), "is a folder"),
        ("missing.db", lambda p: None, "does not exist"),
    ],
)
def test_ledger_show_on_what_it_cannot_read_says_so_without_a_traceback(
    tmp_path, monkeypatch, name, make, say
):
    # old: a traceback (InvalidParameterError, LedgerMismatchError, ComputeError) exit 1
    monkeypatch.chdir(tmp_path)
    make(tmp_path / name)
    res = runner.invoke(app, ["ledger", "show", name])
    assert res.exit_code == 2 and say in res.output, res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    ("args", "say"),
    [(["--rows", "0"], "--rows must be >= 100"), (["--out", "notes.txt"], "is a file")],
)
def test_demo_refuses_bad_options_and_writes_nothing(tmp_path, monkeypatch, args, say):
    # old: a ValueError traceback after writing out/demo/.dpframe-demo
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    res = runner.invoke(app, ["demo", *args])
    assert res.exit_code == 2 and say in res.output, res.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["notes.txt"]


@pytest.mark.parametrize(
    ("args", "say"),
    [
        (["--points", "-5"], "--points must be >= 2"),  # old: numpy ValueError traceback
        (["--eps-min", "0"], "--eps-min must be > 0"),  # old: "epsilon ... array([nan ...])"
        (["--eps-min", "10", "--eps-max", "1"], "must be < --eps-max"),
        (["--plot", "nodir/r.png"], "--plot: folder nodir does not exist"),  # old: after the work
        (["--csv", "nodir/r.csv"], "--csv: folder nodir does not exist"),
    ],
)
def test_risk_checks_its_options_before_computing(tmp_path, monkeypatch, args, say):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("q,y\na,x\nb,y\n")
    res = runner.invoke(
        app, ["risk", "t.csv", "--qids", "q", "--sensitive", "y", "--levels", "x,y", *args]
    )
    assert res.exit_code == 2 and say in res.output, res.output


def test_version_and_flags_without_placeholders():
    from dpframe.version import __version__

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"dpframe {__version__}"
    res = runner.invoke(app, ["release", "--help"], terminal_width=100)
    line = next(t for t in res.output.splitlines() if "--no-progress" in t)
    assert "<bool>" not in line  # a flag takes no value


def _release_and_copy(tmp_path):
    """A released file and a copy another tool (polars) wrote, without the provenance."""
    acct = dpframe.Accountant(epsilon=1.0)
    acct.spend(0.5, mechanism="laplace", columns=["x"])
    frame = pl.DataFrame({"x": [1.5, 2.5, 4.0]})
    src = dpframe.write_parquet(frame, tmp_path / "release.parquet", ledger=acct)
    dst = tmp_path / "copy.parquet"
    pl.read_parquet(src).write_parquet(dst)
    return src, dst


def test_provenance_copy_and_show(tmp_path):
    src, dst = _release_and_copy(tmp_path)
    res = runner.invoke(app, ["provenance", "show", str(dst)])
    assert res.exit_code == 2 and "no dpframe provenance" in res.output, res.output
    res = runner.invoke(app, ["provenance", "copy", str(src), str(dst)])
    assert res.exit_code == 0, res.output
    assert "copied the provenance" in res.output and "epsilon 0.5" in res.output
    assert dpframe.read_provenance(dst) == dpframe.read_provenance(src)
    res = runner.invoke(app, ["provenance", "copy", str(src), str(dst)])
    assert res.exit_code == 0 and "already carries" in res.output, res.output
    res = runner.invoke(app, ["provenance", "show", str(dst)])
    assert res.exit_code == 0 and "Provenance of" in res.output and "laplace" in res.output


def _raw_column(src, dst):
    pl.read_parquet(src).with_columns(income=pl.lit(52_000)).write_parquet(dst)


def _other_release(src, dst):
    acct = dpframe.Accountant(epsilon=1.0)
    acct.spend(0.25, mechanism="laplace", columns=["x"])
    dst.unlink()  # dpframe replaces only files it wrote: the copy another tool wrote goes first
    dpframe.write_parquet(pl.read_parquet(src), dst, ledger=acct)


def _tampered(src, dst):
    import json

    doc = json.loads(pl.read_parquet_metadata(src)["dpframe"])
    doc["entries"][0]["epsilon"] = 0.01
    pl.read_parquet(src).write_parquet(src, metadata={"dpframe": json.dumps(doc)})


@pytest.mark.parametrize(
    ("make", "args", "code", "say"),
    [
        (_raw_column, [], 2, "['income'] that source"),
        (_other_release, [], 2, "--overwrite"),
        (_tampered, [], 1, "source: "),
        (None, ["release.parquet", "release.parquet"], 2, "same file"),
        (None, ["missing.parquet", "copy.parquet"], 2, "source: missing.parquet does not exist"),
        (None, ["release.parquet", "adir"], 2, "destination: adir is a folder"),
    ],
)
def test_provenance_copy_refuses_without_a_traceback_and_writes_nothing(
    tmp_path, monkeypatch, make, args, code, say
):
    monkeypatch.chdir(tmp_path)
    src, dst = _release_and_copy(tmp_path)
    (tmp_path / "adir").mkdir()
    if make is not None:
        make(src, dst)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    res = runner.invoke(app, ["provenance", "copy", *(args or [src.name, dst.name])])
    assert res.exit_code == code and say in res.output, res.output
    assert "Traceback" not in res.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_provenance_copy_overwrite(tmp_path):
    src, dst = _release_and_copy(tmp_path)
    _other_release(src, dst)
    res = runner.invoke(app, ["provenance", "copy", str(src), str(dst), "--overwrite"])
    assert res.exit_code == 0, res.output
    assert dpframe.read_provenance(dst) == dpframe.read_provenance(src)


@pytest.mark.parametrize("width", [60, 100])
def test_tables_fit_the_terminal_and_say_what_they_leave_out(width, monkeypatch, capsys):
    """A 120-column table on an 80-column terminal: no line wider than the terminal, no
    header cut to an ellipsis, and a line naming the columns left out and the file."""
    import polars as pl

    from dpframe.cli import _print_frame

    monkeypatch.setenv("COLUMNS", str(width))
    names = [f"satisfaction_trust_{i}" for i in range(120)]
    frame = pl.DataFrame({n: [1.25, -3.5] for n in names})
    _print_frame("wide", frame, full="released/wide.parquet")
    out = capsys.readouterr().out
    table, note = out.rstrip("\n").rsplit("\n", 1)
    assert max(len(line) for line in table.splitlines()) <= width
    assert "…" not in table
    shown = table.count("1.25")
    assert 1 <= shown < 120
    assert note.startswith(f"({shown} of 120 columns shown, not shown: {names[shown]}")
    assert "released/wide.parquet" in note


def test_plan_shows_the_relation_the_units_and_the_error_under_the_other_relation(
    tmp_path, monkeypatch
):
    from importlib.resources import files

    from dpframe.datasets import synthetic_survey

    synthetic_survey(2000).write_parquet(tmp_path / "survey.parquet")
    spec = tmp_path / "release.toml"
    spec.write_text(files("dpframe").joinpath("data/demo_release.toml").read_text())
    monkeypatch.setenv("COLUMNS", "220")
    res = runner.invoke(app, ["plan", str(spec)])
    assert res.exit_code == 0, res.output
    assert "error95_other" in res.output and "sensitivity" in res.output
    lines = res.output.splitlines()
    assert (
        "neighbours: substitute (one person's values changed; the number of people is public)"
        in lines
    )
    assert any(
        line.startswith("error95_other: each statistic's 95% error under add_remove")
        for line in lines
    )
    assert (
        "release 'households': unit person \"household\" (at most 3 rows in each of at most "
        "1 groups)" in lines
    )
    assert "release 'by_region': unit record (one row is one person)" in lines
    assert (
        "release 'microdata': unit record (one row is one person); under add_remove: n/a "
        "(PRAM protects values, not presence)"
    ) in lines
    assert not (tmp_path / "ledger.db").exists()


def test_ledger_show_names_what_older_entries_did_not_record(tmp_path, monkeypatch):
    """An entry written before release names were recorded (or by an unnamed Python
    release) shows "unknown"; one without a person column protects a record. The new
    detail leaves the hash chain whole."""
    monkeypatch.setenv("COLUMNS", "250")
    ledger = tmp_path / "ledger.db"
    acct = dpframe.Accountant.open(ledger, epsilon=1.0, unit="pid")
    from dpframe.core.records import Charge

    acct.spend_all([Charge(0.1, mechanism="laplace", unit="pid", details={"max_rows": 2})])
    acct.spend_all([Charge(0.2, mechanism="laplace", unit="pid", name="visits")])
    res = runner.invoke(app, ["ledger", "show", str(ledger)])
    assert res.exit_code == 0, res.output
    assert [r[1:3] for r in _rows_of(res.output)] == [
        ["unknown", 'person "pid" (max_rows=2)'],
        ["visits", 'person "pid"'],
    ]
    assert runner.invoke(app, ["ledger", "verify", str(ledger)]).exit_code == 0
    plain = tmp_path / "plain.db"
    dpframe.Accountant.open(plain, epsilon=1.0).spend(0.1, mechanism="laplace")
    res = runner.invoke(app, ["ledger", "show", str(plain)])
    assert [r[1:3] for r in _rows_of(res.output)] == [["unknown", "record"]]


def test_plan_refuses_a_person_unit_without_bounds(tmp_path):
    from importlib.resources import files

    text = files("dpframe").joinpath("data/demo_release.toml").read_text()
    assert "max_rows = 3\nmax_groups = 1\n" in text
    spec = tmp_path / "release.toml"
    spec.write_text(text.replace("max_rows = 3\nmax_groups = 1\n", ""))
    res = runner.invoke(app, ["plan", str(spec)])
    assert res.exit_code == 2, res.output
    assert "release 'households': max_rows/max_groups: a release under the person unit" in (
        res.output
    )
    assert "in the release or in [privacy]" in res.output and "Traceback" not in res.output


def test_ledger_show_of_a_tight_ledger_says_what_it_composes_to(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    path = tmp_path / "tight.db"
    acct = dpframe.Accountant.open(path, epsilon=5.0, delta=1e-6, accounting="pld")
    for _ in range(20):
        acct.spend(0.2, mechanism="laplace")
    acct.spend_all([dpframe.Charge(epsilon=0.0, rho=0.01, mechanism="gaussian")])
    res = runner.invoke(app, ["ledger", "show", str(path)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert f"compose to epsilon={acct.spent.epsilon:.4g} at delta=1e-06" in text
    assert "epsilons sum to 4" in text and "rho 0.01 of 1 zCDP release(s)" in text
