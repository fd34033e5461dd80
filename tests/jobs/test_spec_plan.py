"""The release spec (TOML, pydantic) and the plan (nothing spent, nothing drawn)."""

from __future__ import annotations

import pytest

from dpframe.jobs import load_spec, parse_spec, plan
from dpframe.jobs.spec import SpecError

from .conftest import EPSILON_TOTAL, write_spec


def test_spec_loads_and_resolves_paths(spec_path):
    spec = load_spec(spec_path)
    assert spec.version == 1 and len(spec.release) == 4
    assert spec.epsilon_total == pytest.approx(EPSILON_TOTAL)
    assert spec.resolve(spec.privacy.ledger) == spec_path.parent / "ledger.db"
    assert spec.margins_frame("region_age").height == 18
    assert spec.to_dict()["release"][0]["kind"] == "grouped"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, "version"),
        ({"privacy": {"budget": {"epsilon": -1}, "ledger": "l.db"}}, "budget.epsilon"),
        (
            {"privacy": {"budget": {"epsilon": 1}, "ledger": "l.db", "neighbours": "x"}},
            "neighbours",
        ),
        ({"release": []}, "release"),
        ({"surprise": 1}, "surprise"),
        # old: a seed the Python API refuses was accepted (and published with)
        ({"privacy": {"budget": {"epsilon": 1}, "ledger": "l.db", "seed": -1}}, "seed"),
        ({"privacy": {"budget": {"epsilon": 1}, "ledger": "l.db", "seed": "1"}}, "seed"),
        ({"privacy": {"budget": {"epsilon": 1}, "ledger": "l.db", "seed": True}}, "seed"),
        (  # old: "100" silently became 100
            {
                "release": [
                    {"name": "p", "kind": "proportions", "column": "c", "epsilon": 0.1, "n": "100"}
                ]
            },
            "n must be an integer",
        ),
    ],
)
def test_bad_specs_name_the_field(change, message):
    base = {
        "version": 1,
        "input": {"path": "x.parquet"},
        "privacy": {"budget": {"epsilon": 1}, "ledger": "l.db"},
        "release": [{"name": "p", "kind": "proportions", "column": "c", "epsilon": 0.1}],
    }
    with pytest.raises(SpecError, match=message):
        parse_spec({**base, **change})


@pytest.mark.parametrize(
    ("release", "message"),
    [
        (
            {
                "name": "g",
                "kind": "grouped",
                "by": ["r"],
                "margins": "nope",
                "statistics": [{"stat": "count", "epsilon": 0.1}],
            },
            "not defined",
        ),
        (
            {
                "name": "g",
                "kind": "grouped",
                "by": ["r"],
                "margins": "m",
                "statistics": [{"stat": "mean", "column": "x", "epsilon": 0.1}],
            },
            "lower, upper",
        ),
        (
            {
                "name": "g",
                "kind": "grouped",
                "by": ["r"],
                "margins": "m",
                "statistics": [
                    {"stat": "mean", "column": "x", "lower": 5, "upper": 1, "epsilon": 0.1}
                ],
            },
            "must be <",
        ),
        (
            {
                "name": "c",
                "kind": "covariance",
                "columns": ["a", "b"],
                "bounds": [[0, 1]],
                "epsilon": 0.1,
            },
            "bounds must give one \\(lower, upper\\) pair per column: 2 columns, 1 pairs",
        ),
        (
            {
                "name": "p",
                "kind": "pram",
                "columns": [{"column": "a", "epsilon": 0.1}, {"column": "a", "epsilon": 0.1}],
            },
            "columns must name each column once, got \\['a', 'a'\\]",
        ),
        ({"name": "bad name!", "kind": "proportions", "column": "c", "epsilon": 0.1}, "name"),
        (
            {
                "name": "g",
                "kind": "grouped",
                "by": ["r"],
                "margins": "m",
                "nonnegative": "yes",  # pydantic alone would take it as True
                "statistics": [{"stat": "count", "epsilon": 0.1}],
            },
            "nonnegative must be True or False",
        ),
    ],
)
def test_bad_releases_name_the_field(release, message):
    spec = {
        "version": 1,
        "input": {"path": "x.parquet"},
        "privacy": {"budget": {"epsilon": 1}, "ledger": "l.db"},
        "margins": {"m": {"values": {"r": ["a", "b"]}}},
        "release": [release],
    }
    with pytest.raises(SpecError, match=message):
        parse_spec(spec)


def test_add_remove_refuses_releases_that_need_a_public_size():
    spec = {
        "version": 1,
        "input": {"path": "x.parquet"},
        "privacy": {"budget": {"epsilon": 1}, "ledger": "l.db", "neighbours": "add_remove"},
        "release": [{"name": "p", "kind": "pram", "columns": [{"column": "a", "epsilon": 0.1}]}],
    }
    with pytest.raises(SpecError, match="substitute"):
        parse_spec(spec)


def test_plan_spends_nothing_and_lists_every_statistic(spec_path):
    spec = load_spec(spec_path)
    p = plan(spec)
    assert not (spec_path.parent / "ledger.db").exists()  # the plan wrote nothing
    assert p.fits and p.spent_before == 0
    assert p.epsilon == pytest.approx(EPSILON_TOTAL)
    rows = p.rows
    assert set(rows["release"]) == {"by_region", "microdata", "age_shares", "scores_cov"}
    assert rows.filter(rows["statistic"] == "count")["error95"].item() > 0
    assert rows["epsilon"].sum() == pytest.approx(EPSILON_TOTAL)


def test_plan_reports_an_overspend(tmp_path):
    spec = load_spec(write_spec(tmp_path, rows=1000, budget=1.0))
    p = plan(spec)
    assert not p.fits
    assert "OVERSPENDS" in p.summary()


def _spec_text(tmp_path, **changes):
    """The test spec with some TOML lines replaced."""
    from .conftest import write_spec

    path = write_spec(tmp_path, rows=500)
    text = path.read_text()
    for old, new in changes.items():
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "changes, message",
    [
        (  # old: replaced the confidential input file
            {'folder = "released"': 'folder = "."', 'name = "by_region"': 'name = "survey"'},
            "which is the input",
        ),
        (  # old: the ledger was overwritten by a published file
            {'ledger = "ledger.db"': 'ledger = "released/by_region.parquet"'},
            "which is the ledger",
        ),
        ({'ledger = "ledger.db"': 'ledger = "released/ledger.db"'}, "inside output.folder"),
        (  # old: passed the spec, charged 0.8, then failed on the file name
            {'name = "by_region"': f'name = "{"r" * 300}"'},
            "128",
        ),
    ],
    ids=["output-replaces-input", "output-replaces-ledger", "ledger-in-output", "long-name"],
)
def test_outputs_that_would_destroy_inputs_are_refused_before_anything(tmp_path, changes, message):
    from dpframe.jobs import SpecError, load_spec

    path = _spec_text(tmp_path, **changes)
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    with pytest.raises(SpecError, match=message):
        load_spec(path)
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before


def test_a_ledger_urls_password_never_reaches_the_plan(tmp_path, postgres_url):
    """Found in review: the plan's summary (printed by `dpframe plan` and `release`, and
    in an overspend error) showed the spec's ledger URL as written, password included."""
    url = postgres_url.replace("://postgres@", "://postgres:s3cret-pw@")
    the_plan = plan(load_spec(write_spec(tmp_path, rows=500, ledger=url)))
    assert "s3cret-pw" not in the_plan.summary() and "***" in the_plan.summary()


def _spec_with(tmp_path, *, input_path="in.parquet", stat=None):
    import polars as pl

    pl.DataFrame({"r": ["a", "b"], "x": [1.0, 2.0], "s": ["u", "v"]}).write_parquet(
        tmp_path / "in.parquet"
    )
    stat = stat or {"stat": "count", "epsilon": 0.1}
    spec = {
        "version": 1,
        "input": {"path": str(input_path)},
        "privacy": {"budget": {"epsilon": 1}, "ledger": "l.db"},
        "margins": {"m": {"values": {"r": ["a", "b"]}}},
        "release": [
            {"name": "g", "kind": "grouped", "by": ["r"], "margins": "m", "statistics": [stat]}
        ],
    }
    return parse_spec(spec, base=tmp_path)


@pytest.mark.parametrize(
    ("input_path", "stat", "match"),
    [
        # old: plan said "fits" for a column the input does not have (the schema is public)
        (
            "in.parquet",
            {"stat": "mean", "column": "nope", "lower": 0, "upper": 1, "epsilon": 0.1},
            "nope",
        ),
        (
            "in.parquet",
            {"stat": "sum", "column": "s", "lower": 0, "upper": 1, "epsilon": 0.1},
            "numeric",
        ),
        # old: polars' ComputeError / InvalidOperationError tracebacks
        ("in.csv", None, "not a Parquet file"),
        ("bad.parquet", None, "cannot be read as Parquet"),
        ("none/*.parquet", None, "cannot be read as Parquet"),
    ],
)
def test_plan_reads_the_public_schema_and_names_a_bad_input(tmp_path, input_path, stat, match):
    (tmp_path / "in.csv").write_text("r,x\na,1\n")
    (tmp_path / "bad.parquet").write_text("not parquet")
    spec = _spec_with(tmp_path, input_path=input_path, stat=stat)
    with pytest.raises(SpecError, match=match):
        plan(spec)
    assert not (tmp_path / "l.db").exists()


@pytest.mark.parametrize(
    ("content", "match"),
    [(None, "is a folder"), (b"\xb5\x00\xff", "cannot be read as TOML")],
)
def test_a_spec_that_is_not_toml_text_is_named(tmp_path, content, match):
    p = tmp_path / "spec.toml"
    p.mkdir() if content is None else p.write_bytes(content)
    with pytest.raises(SpecError, match=match):
        load_spec(p)


def test_spec_errors_point_at_names_not_list_indices():
    """``release.0.grouped.statistics.1.lower`` is how pydantic says it; a user wrote a
    release called "g" whose second statistic is a mean of income."""
    spec = {
        "version": 1,
        "input": {"path": "x.parquet"},
        "privacy": {"budget": {"epsilon": 1}, "ledger": "l.db"},
        "margins": {"m": {"values": {"r": ["a", "b"]}}},
        "release": [
            {
                "name": "g",
                "kind": "grouped",
                "by": ["r"],
                "margins": "m",
                "statistics": [
                    {"stat": "count", "epsilon": 0.1},
                    {"stat": "mean", "column": "income", "lower": "a", "upper": 1, "epsilon": 1},
                ],
            },
            {"name": "p", "kind": "pram", "columns": [{"column": "a"}]},
            {"name": "q", "column": "c", "epsilon": 0.1},
        ],
    }
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    text = str(err.value)
    assert "release 'g' > statistic 2 (mean of income) > lower: lower must be a real" in text
    assert "release 'p' > column 'a' > epsilon: Field required" in text
    assert "release 'q': kind is missing" in text
    assert "release.0" not in text and "grouped.statistics" not in text


# -- margins that do not fit the key's dtype (issue 31) ------------------------------------

FRACTIONAL = [1.5, 2.9, 300.7]


def _int16_spec(tmp_path, values):
    import polars as pl

    pl.DataFrame({"g": pl.Series([1, 2, 300] * 4, dtype=pl.Int16)}).write_parquet(
        tmp_path / "in.parquet"
    )
    data = {
        "version": 1,
        "input": {"path": "in.parquet"},
        "privacy": {"budget": {"epsilon": 1}, "ledger": "ledger.db"},
        "margins": {"m": {"values": {"g": values}}},
        "release": [
            {
                "name": "by_g",
                "kind": "grouped",
                "by": ["g"],
                "margins": "m",
                "statistics": [{"stat": "count", "epsilon": 0.5}],
            }
        ],
    }
    return parse_spec(data, base=tmp_path)


@pytest.mark.parametrize(
    ("values", "bad"), [(FRACTIONAL, "1.5"), ([1, 2, 70_000], "70000")], ids=["fraction", "wide"]
)
def test_spec_margins_that_do_not_fit_the_key_dtype_are_refused(tmp_path, values, bad):
    """Issue 31: values = { g = [1.5, 2.9, 300.7] } on an Int16 key published groups 1, 2,
    300 (cast(strict=False)); the Python API refused them. One rule now: refused before
    anything is spent, naming the margins and the value."""
    from dpframe.jobs import run

    spec = _int16_spec(tmp_path, values)
    with pytest.raises(SpecError, match=rf"margins 'm': key 'g' has value\(s\) \[{bad}"):
        plan(spec)
    with pytest.raises(SpecError, match="do not fit the data's dtype Int16 exactly"):
        run(spec, progress=False)
    assert not (tmp_path / "released").exists() and not (tmp_path / "ledger.db").exists()


def test_the_python_api_refuses_the_same_margins_by_the_same_rule():
    import polars as pl

    import dpframe
    from dpframe.errors import InvalidParameterError

    frame = pl.DataFrame({"g": pl.Series([1, 2, 300] * 4, dtype=pl.Int16)})
    acct = dpframe.Accountant(epsilon=1.0)
    release = dpframe.group_by(
        frame, "g", margins=pl.DataFrame({"g": FRACTIONAL}), accountant=acct
    ).agg(dpframe.agg.count(epsilon=0.5))
    with pytest.raises(InvalidParameterError, match=r"key 'g' has value\(s\) \[1.5, 2.9, 300.7\]"):
        release.collect()
    assert acct.ledger == ()
    exact = pl.DataFrame({"g": [1.0, 2.0, 300.0]})  # the same values, exact: accepted
    with dpframe.Accountant(epsilon=1.0):
        out = dpframe.group_by(frame, "g", margins=exact).agg(dpframe.agg.count(epsilon=0.5))
        assert out.collect()["g"].to_list() == [1.0, 2.0, 300.0]


def test_plan_rows_carry_the_unit_the_relation_and_the_other_relations_error(spec_path):
    p = plan(load_spec(spec_path))
    rows = p.rows
    assert set(rows["neighbours"]) == {"substitute"} and p.neighbours == "substitute"
    assert set(rows["unit"]) == {"record (one row is one person)"}
    count = rows.filter(rows["statistic"] == "count").row(0, named=True)
    assert count["error95_other"] is not None and count["error95_other"] < count["error95"]
    pram = rows.filter(rows["release"] == "microdata")
    assert set(pram["other"]) == {"add_remove: n/a (PRAM protects values, not presence)"}
    assert pram["error95_other"].null_count() == pram.height
    assert p.assumptions()[0].startswith("neighbours: substitute (")


def test_a_zcdp_plan_against_its_existing_ledger_prices_what_it_spent(tmp_path):
    # old: the plan of a zCDP spec whose ledger exists counted (rho, a function) as rho
    # spent and failed (TypeError) -- so every run after the first one failed too
    import dpframe

    path = write_spec(tmp_path, rows=3_000)
    text = path.read_text().replace(
        "budget = { epsilon = 3.0 }", "budget = { rho = 5.0, delta = 1e-6 }"
    )
    path.write_text(text)
    spec = load_spec(path)
    first = plan(spec)
    acct = dpframe.Accountant.open(tmp_path / "ledger.db", rho=5.0, delta=1e-6)
    acct.spend(0.5, mechanism="laplace")  # rho 0.125
    again = plan(spec)
    assert again.spent_before == pytest.approx(0.125)
    assert again.spent_after == pytest.approx(0.125 + first.spent_after)
    assert again.fits == first.fits
