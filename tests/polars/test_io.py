import os

import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidParameterError


def released(acct):
    df = pl.DataFrame({"g": [0, 1], "x": [1.0, 2.0]})
    rel = df.dp.group_by("g", margins=pl.DataFrame({"g": [0, 1]}), accountant=acct).agg(
        dpframe.agg.count(epsilon=0.5)
    )
    return rel, rel.collect()


def test_roundtrip_with_ledger_and_spec(tmp_path):
    acct = Accountant(epsilon=1.0)
    rel, out = released(acct)
    path = dpframe.write_parquet(out, tmp_path / "out.parquet", ledger=rel, spec={"v": 1})
    frame, prov = dpframe.read_parquet(path)
    assert frame.equals(out)
    assert prov.entries == rel.ledger
    assert prov.spec == {"v": 1} and prov.epsilon == 0.5
    assert prov.ledger_frame().height == 1
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_accountant_ledger_and_neighbours(tmp_path):
    acct = Accountant(epsilon=1.0, neighbours="add_remove")
    _, out = released(acct)
    path = out.dp.write_parquet(tmp_path / "a.parquet", ledger=acct)
    prov = dpframe.read_provenance(path)
    assert prov.neighbours == "add_remove" and len(prov.entries) == 1


def test_lazy_sink_reattaches_metadata(tmp_path):
    acct = Accountant(epsilon=1.0)
    rel, out = released(acct)
    src = tmp_path / "plain.parquet"
    out.write_parquet(src)
    # a scan -> sink round trip would drop metadata: the dpframe writer attaches it
    path = dpframe.write_parquet(pl.scan_parquet(src), tmp_path / "sunk.parquet", ledger=rel)
    assert dpframe.read_provenance(path).entries == rel.ledger
    with pytest.raises(InvalidParameterError, match="no dpframe provenance"):
        dpframe.read_provenance(src)


def test_failed_write_leaves_no_file(tmp_path):
    acct = Accountant(epsilon=1.0)
    rel, _ = released(acct)
    bad = pl.LazyFrame({"x": [1, 2]}).select(pl.col("x").map_batches(_boom, return_dtype=pl.Int64))
    with pytest.raises(RuntimeError, match="boom"):
        dpframe.write_parquet(bad, tmp_path / "out.parquet", ledger=rel)
    assert os.listdir(tmp_path) == []


def _boom(s):
    raise RuntimeError("boom")


def test_existing_file_survives_a_failed_overwrite(tmp_path):
    acct = Accountant(epsilon=1.0)
    rel, out = released(acct)
    path = dpframe.write_parquet(out, tmp_path / "out.parquet", ledger=rel)
    bad = pl.LazyFrame({"x": [1]}).select(pl.col("x").map_batches(_boom, return_dtype=pl.Int64))
    with pytest.raises(RuntimeError):
        dpframe.write_parquet(bad, path, ledger=rel)
    assert pl.read_parquet(path).equals(out)


@pytest.mark.parametrize("ledger", [None, [], "abc", Accountant(epsilon=1.0)])
def test_ledger_required(tmp_path, ledger):
    with pytest.raises(InvalidParameterError, match="ledger"):
        dpframe.write_parquet(pl.DataFrame({"x": [1]}), tmp_path / "o.parquet", ledger=ledger)


def test_uncollected_release_is_not_a_ledger(tmp_path):
    acct = Accountant(epsilon=1.0)
    df = pl.DataFrame({"g": [0], "x": [1.0]})
    rel = df.dp.group_by("g", margins=pl.DataFrame({"g": [0]}), accountant=acct).agg(
        dpframe.agg.count(epsilon=0.5)
    )
    with pytest.raises(InvalidParameterError, match="collected"):
        dpframe.write_parquet(df, tmp_path / "o.parquet", ledger=rel)


def test_missing_folder(tmp_path):
    acct = Accountant(epsilon=1.0)
    rel, out = released(acct)
    with pytest.raises(InvalidParameterError, match="folder"):
        dpframe.write_parquet(out, tmp_path / "nope" / "o.parquet", ledger=rel)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda d: d / "missing.parquet", "does not exist"),
        (
            lambda d: (d / "t.parquet").write_text("not parquet") and d / "t.parquet",
            "cannot be read",
        ),
        (lambda d: None, "path must be"),
        (lambda d: 123, "path must be"),
        (lambda d: "", "path must be"),
        (
            lambda d: (
                pl.DataFrame({"a": [1]}).write_parquet(
                    d / "j.parquet", metadata={"dpframe": "[1, 2]"}
                )
                or d / "j.parquet"
            ),
            "is not dpframe's",
        ),
        (
            lambda d: (
                pl.DataFrame({"a": [1]}).write_parquet(d / "b.parquet", metadata={"dpframe": "{"})
                or d / "b.parquet"
            ),
            "is not dpframe's",
        ),
    ],
)
def test_read_provenance_names_what_it_cannot_read(tmp_path, make, match):
    # old: FileNotFoundError, ComputeError, JSONDecodeError, AttributeError, TypeError
    with pytest.raises(InvalidParameterError, match=match):
        dpframe.read_provenance(make(tmp_path))


def test_provenance_repr_is_short_and_a_notebook_sees_its_ledger(tmp_path):
    # old: the repr dumped every entry (about 4 KB for a small release)
    acct = Accountant(epsilon=2.0)
    for _ in range(6):
        acct.spend(0.25, mechanism="laplace", columns=["x"], details={"k": "v" * 100})
    path = dpframe.write_parquet(pl.DataFrame({"x": [1.0]}), tmp_path / "o.parquet", ledger=acct)
    prov = dpframe.read_provenance(path)
    assert len(repr(prov)) < 200 and "epsilon=1.5" in repr(prov) and "entries=6" in repr(prov)
    assert "<table" in prov._repr_html_()
    # the ledger's frame: what a reader looks for first, identifiers last
    assert prov.ledger_frame().columns[:3] == ["mechanism", "columns", "epsilon"]


# -- the output guard (issue 31, C): never the ledger, the input, or a file not dpframe's ---


def _ledger_with_a_charge(folder):
    acct = Accountant.open(folder / "ledger.db", epsilon=1.0)
    acct.spend(0.25, mechanism="laplace", columns=["x"])
    return acct


def _refused(call, *, match="Nothing was written or charged"):
    with pytest.raises(InvalidParameterError, match=match):
        call()


def test_write_parquet_never_replaces_the_ledger_through_a_link_or_its_wal(tmp_path):
    """Old: the ledger became a Parquet file, its charges gone (deleting it then gave a
    fresh budget)."""
    acct = _ledger_with_a_charge(tmp_path)
    table = pl.DataFrame({"x": [1.0]})
    (tmp_path / "link.parquet").symlink_to(tmp_path / "ledger.db")
    (tmp_path / "folder").symlink_to(tmp_path)
    (tmp_path / "uri:").mkdir()  # a local folder, not a URI scheme
    targets = ["ledger.db", "link.parquet", "folder/ledger.db", "ledger.db-wal", "ledger.db-shm"]
    targets.append("uri://../ledger.db")
    for name in targets:
        _refused(lambda name=name: dpframe.write_parquet(table, tmp_path / name, ledger=acct))
        entries = list(acct.ledger)
        _refused(
            lambda name=name, entries=entries: dpframe.write_parquet(
                table, tmp_path / name, ledger=entries
            )
        )
    reopened = Accountant.open(tmp_path / "ledger.db")
    assert reopened.spent.epsilon == 0.25 and len(reopened.ledger) == 1


def test_sink_parquet_never_replaces_the_ledger_or_the_query_input(tmp_path):
    """Old: ``sink_parquet(q, "ledger.db")`` wrote over the ledger, and
    ``sink_parquet(scan(p).select(pram), p)`` replaced the confidential input with the
    released column; now both are refused before the charge."""
    acct = _ledger_with_a_charge(tmp_path)
    raw = tmp_path / "survey.parquet"
    pl.DataFrame({"c": ["a", "b"] * 250, "income": range(500)}).write_parquet(raw)
    before = raw.read_bytes()
    with acct:
        for target in (tmp_path / "ledger.db", raw):
            q = pl.scan_parquet(raw).select(pl.col("c").dp.pram(0.1, categories=["a", "b"]))
            _refused(lambda q=q, target=target: dpframe.sink_parquet(q, target))
        # the input through a link, a glob scan and a folder scan are the input too
        (tmp_path / "alias.parquet").symlink_to(raw)
        for scan in (pl.scan_parquet(tmp_path / "*.parquet"), pl.scan_parquet(raw)):
            q = scan.select(pl.col("c").dp.pram(0.1, categories=["a", "b"]))
            _refused(lambda q=q: dpframe.sink_parquet(q, tmp_path / "alias.parquet"))
    assert raw.read_bytes() == before
    assert acct.spent.epsilon == 0.25  # nothing charged by a refused write


def test_pram_write_never_replaces_the_ledger_or_its_input(tmp_path):
    """Old: ``pram.release(scan(p), ...).write(p)`` replaced the input with the released
    column, and ``.write("ledger.db")`` the ledger."""
    acct = _ledger_with_a_charge(tmp_path)
    raw = tmp_path / "survey.parquet"
    pl.DataFrame({"c": ["a", "b"] * 250}).write_parquet(raw)
    before = raw.read_bytes()
    columns = [{"column": "c", "epsilon": 0.1, "categories": ["a", "b"]}]
    for target in (tmp_path / "ledger.db", raw, tmp_path / "ledger.db-wal"):
        rel = dpframe.pram.release(pl.scan_parquet(raw), columns, accountant=acct)
        _refused(lambda rel=rel, target=target: rel.write(target))
    assert raw.read_bytes() == before
    assert acct.spent.epsilon == 0.25 and Accountant.open(tmp_path / "ledger.db").spent.epsilon
    rel = dpframe.pram.release(pl.scan_parquet(raw), columns, accountant=acct)
    out = rel.write(tmp_path / "released.parquet")  # elsewhere: written and charged
    assert pl.read_parquet(out).height == 500 and acct.spent.epsilon == pytest.approx(0.35)


def test_an_existing_file_is_replaced_only_if_dpframe_wrote_it(tmp_path):
    acct = Accountant(epsilon=1.0)
    rel, out = released(acct)
    notes = tmp_path / "notes.parquet"
    pl.DataFrame({"mine": [1]}).write_parquet(notes)  # a Parquet file dpframe did not write
    _refused(lambda: dpframe.write_parquet(out, notes, ledger=rel), match="not written by dpframe")
    assert pl.read_parquet(notes).columns == ["mine"]
    path = dpframe.write_parquet(out, tmp_path / "out.parquet", ledger=rel)
    assert dpframe.write_parquet(out.head(1), path, ledger=rel) == path  # dpframe's: replaced
    assert pl.read_parquet(path).height == 1


def test_a_lazy_frame_whose_inputs_cannot_be_listed_is_refused(tmp_path):
    """Fail closed: a Python scan could read anything (the ledger included)."""
    pytest.importorskip("pyarrow")
    import pyarrow.dataset as ds

    raw = tmp_path / "survey.parquet"
    pl.DataFrame({"c": ["a", "b"] * 5}).write_parquet(raw)
    rel, _ = released(Accountant(epsilon=1.0))
    lazy = pl.scan_pyarrow_dataset(ds.dataset(raw))
    target = tmp_path / "out.parquet"
    _refused(lambda: dpframe.write_parquet(lazy, target, ledger=rel), match="cannot be listed")
    assert sorted(os.listdir(tmp_path)) == ["survey.parquet"]
    assert dpframe.write_parquet(lazy.collect(), target, ledger=rel) == target  # collected


def test_a_deleted_ledger_s_path_is_still_the_ledger(tmp_path):
    """The ledger of the release given (or of the ``with`` block) is refused by its path,
    even once its file is gone: a table written there would stand in for it."""
    acct = Accountant.open(tmp_path / "ledger.db", epsilon=1.0)
    rel, out = released(acct)
    for name in os.listdir(tmp_path):
        os.remove(tmp_path / name)
    for target in ("ledger.db", "ledger.db-wal"):
        _refused(lambda t=target: dpframe.write_parquet(out, tmp_path / t, ledger=rel))
        with acct:
            entries = list(rel.ledger)
            _refused(lambda t=target, e=entries: dpframe.write_parquet(out, tmp_path / t, ledger=e))
    assert os.listdir(tmp_path) == []
