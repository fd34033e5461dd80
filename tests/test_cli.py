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
    for name in ("by_region", "households", "microdata", "age_shares", "scores_cov"):
        assert (released / f"{name}.parquet").exists()
        assert (released / f"{name}.suite.json").exists()
        assert (released / f"{name}.validation.json").exists()
    assert not list(released.glob(".staging-*")) and not list(released.glob(".failed-*"))
    ledger = dpframe.Accountant.open(out / "ledger.db")
    assert ledger.spent.epsilon == pytest.approx(2.0) and len(ledger.ledger) == 11
    households = pl.read_parquet(released / "households.parquet")  # protects households
    assert households.columns == ["region", "respondents", "income_total"]
    assert households.height == 6 and "household" not in households.columns
    prov = dpframe.read_provenance(released / "households.parquet")
    assert {(e.details["unit"], e.details["max_rows"]) for e in prov.entries} == {("household", 3)}
    sens = {e.details["statistic"]: e.details["sensitivity"] for e in prov.entries}
    assert sens == {"count": 6.0, "sum": 900_000.0}  # 2 G R and 2 G R M, substitute
    grouped = pl.read_parquet(released / "by_region.parquet")
    assert grouped.height == 18  # 6 regions x 3 age bands, the empty "Islands" included
    assert grouped["income_mean"].is_between(0, 200_000).all()
    assert (grouped["count"] >= 0).all()
    prov = dpframe.read_provenance(released / "by_region.parquet")
    assert prov.epsilon == pytest.approx(0.8) and prov.spec["version"] == 1
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


def test_ledger_show(tmp_path):
    out = tmp_path / "demo"
    runner.invoke(app, ["demo", "--out", str(out), "--rows", "2000"])
    res = runner.invoke(app, ["ledger", "show", str(out / "ledger.db")])
    assert res.exit_code == 0 and "spent epsilon=2" in res.output
    res = runner.invoke(app, ["ledger", "show", str(out / "released" / "by_region.parquet")])
    assert res.exit_code == 0 and "Provenance" in res.output
    res = runner.invoke(app, ["ledger", "show", str(out / "missing.json")])
    assert res.exit_code == 2


def test_ledger_verify_against_an_output_folder_reads_its_current_run(tmp_path):
    """The previous run kept beside the current one is not counted twice."""
    from tests.jobs.conftest import write_spec

    spec_path = write_spec(tmp_path, rows=1000, budget=10.0)
    for _ in range(2):
        res = runner.invoke(app, ["release", str(spec_path), "--no-progress"])
        assert res.exit_code == 0, res.output
    ledger, released = tmp_path / "ledger.db", tmp_path / "released"
    res = runner.invoke(app, ["ledger", "verify", str(ledger), "--against", str(released)])
    assert res.exit_code == 0, res.output
    assert "4 released file(s) agree" in res.output


@pytest.mark.parametrize(
    ("name", "make", "say"),
    [
        ("plain.parquet", lambda p: pl.DataFrame({"a": [1]}).write_parquet(p), "no dpframe"),
        ("fake.parquet", lambda p: p.write_text("x"), "cannot be read"),
        ("garbage.db", lambda p: p.write_bytes(b"garbage" * 10), "not valid JSON"),
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
