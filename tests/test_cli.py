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
    assert "Plan" in res.output and "Ledger" in res.output
    for name in ("survey", "grouped", "means", "shares", "microdata"):
        assert (out / f"{name}.parquet").exists()
    ledger = dpframe.Accountant.open(out / "ledger.json")
    assert ledger.spent.epsilon == 1.9 and len(ledger.ledger) == 6
    grouped = pl.read_parquet(out / "grouped.parquet")
    assert grouped.height == 18  # 6 regions x 3 age bands, the empty "Islands" included
    assert grouped["income_mean"].is_between(0, 200_000).all()
    prov = dpframe.read_provenance(out / "grouped.parquet")
    assert prov.epsilon == 0.6  # count 0.3 + mean income 0.3
    means = dpframe.read_provenance(out / "means.parquet")
    assert [e.mechanism for e in means.entries] == ["truncated_laplace"]
    assert pl.read_parquet(out / "means.parquet")["mean"].is_between(0, 10).all()
    shares = pl.read_parquet(out / "shares.parquet")["proportion"]
    assert shares.sum() == pytest.approx(1.0) and shares.is_between(0, 1).all()
    micro = pl.read_parquet(out / "microdata.parquet")
    assert micro.columns == ["region", "age_band"] and micro.height == 20000
    prov = dpframe.read_provenance(out / "microdata.parquet")
    assert [e.mechanism for e in prov.entries] == ["pram", "pram"] and prov.epsilon == 1.0
    assert set(prov.pram_designs) == {"region", "age_band"}
    assert "Estimated from the PRAM'd microdata" in res.output


def test_demo_replaces_previous_output(tmp_path):
    out = tmp_path / "demo"
    for _ in range(2):  # a fresh ledger each run: the second run is not over budget
        res = runner.invoke(app, ["demo", "--out", str(out), "--rows", "2000"])
        assert res.exit_code == 0, res.output


def test_ledger_show(tmp_path):
    out = tmp_path / "demo"
    runner.invoke(app, ["demo", "--out", str(out), "--rows", "2000"])
    res = runner.invoke(app, ["ledger", "show", str(out / "ledger.json")])
    assert res.exit_code == 0 and "spent epsilon=1.9" in res.output
    res = runner.invoke(app, ["ledger", "show", str(out / "grouped.parquet")])
    assert res.exit_code == 0 and "Provenance" in res.output
    res = runner.invoke(app, ["ledger", "show", str(out / "missing.json")])
    assert res.exit_code == 2
