"""The runner against the attacks of issue 13: each must be refused with nothing charged,
or charged its true cost exactly once.

Each test is an attack an adversarial user tried on the old code; the comment above it
says what it did then.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.errors import InvalidDataError, InvalidParameterError, ReleaseNotArmedError
from dpframe.mechanisms.pram.plan import design_record

CATS = ["en", "fr", "de"]


@pytest.fixture
def people() -> pl.LazyFrame:
    return pl.LazyFrame({"language": CATS * 100, "wages": np.arange(300.0)})


def _pram(acct, **kw):
    return pl.col("language").dp.pram(0.5, categories=CATS, accountant=acct, **kw)


# -- the same release evaluated more than once under one charge -----------------------


def _twice_in_map_batches(lf, e):
    # old: randomized every record twice, charged (and recorded) once
    return lf.map_batches(
        lambda df: pl.concat([df.lazy().select(e).collect(), df.lazy().select(e).collect()])
    )


def _plain_concat_with_map_batches(lf, e):
    # old: the map_batches half was invisible to the plan walk
    return pl.concat([lf.select(e), lf.map_batches(lambda df: df.select(e))])


@pytest.mark.parametrize(
    "query",
    [
        _twice_in_map_batches,
        _plain_concat_with_map_batches,
        lambda lf, e: lf.select(e.alias("a"), e.alias("b")),
        lambda lf, e: pl.concat([lf.select(e), lf.select(e)]),
        lambda lf, e: (lambda q: q.join(q, on="i"))(
            lf.select(e, pl.int_range(pl.len()).alias("i"))
        ),
    ],
    ids=["map_batches-twice", "concat-map_batches", "two-aliases", "concat", "self-join"],
)
def test_a_release_seen_more_than_once_is_refused_before_any_charge(people, query):
    acct = dpframe.Accountant(epsilon=10)
    q = query(people, _pram(acct))
    with pytest.raises(InvalidParameterError, match=r"Python step|more than one place"):
        dpframe.collect(q, public=["i"])
    assert acct.ledger == ()


def test_an_opaque_python_step_is_refused_even_without_a_release_inside(people):
    """The runner cannot see into a Python function, so it refuses any it did not build."""
    acct = dpframe.Accountant(epsilon=10)
    q = people.select(_pram(acct)).map_batches(lambda df: df)
    with pytest.raises(InvalidParameterError, match="Python step"):
        dpframe.collect(q)
    assert acct.ledger == ()


# -- a design charged the epsilon it claims ----------------------------------------------


def test_a_design_is_charged_the_epsilon_of_its_matrix_not_its_label(people):
    # old: dataclasses.replace(design, epsilon=0.05) was charged 0.05 for a true eps of 5
    true = dpframe.pram.design(np.array([0.5, 0.3, 0.2]), 5.0)
    relabelled = dataclasses.replace(true, epsilon=0.05)
    rec = design_record(true, tuple(CATS), "given")
    rec.update(epsilon=0.05, epsilon_actual=0.05)
    from_record = dpframe.pram.design_from_dict(rec)
    worst = float(np.log((true.matrix[:, None, :] / true.matrix[None, :, :]).max()))
    for d in (relabelled, from_record):
        assert d.epsilon_actual == pytest.approx(worst, rel=1e-12)
        acct = dpframe.Accountant(epsilon=10)
        q = people.select(pl.col("language").dp.pram(matrix=d, categories=CATS, accountant=acct))
        dpframe.collect(q)
        assert len(acct.ledger) == 1
        assert acct.spent.epsilon >= worst  # rounded up, never down


def test_a_design_whose_epsilon_exceeds_the_budget_is_refused(people):
    d = dataclasses.replace(dpframe.pram.design(np.array([0.5, 0.3, 0.2]), 5.0), epsilon=0.05)
    acct = dpframe.Accountant(epsilon=1.0)
    q = people.select(pl.col("language").dp.pram(matrix=d, categories=CATS, accountant=acct))
    with pytest.raises(dpframe.BudgetExceededError):
        dpframe.collect(q)
    assert acct.ledger == ()


# -- raw columns next to released ones ------------------------------------------------------


def test_a_raw_column_beside_a_released_one_is_refused(people, tmp_path):
    # old: select(pram(language), "wages") published the raw wages with provenance eps 0.5
    acct = dpframe.Accountant(epsilon=10)
    q = people.select(_pram(acct), "wages")
    with pytest.raises(InvalidParameterError, match="'wages'"):
        dpframe.collect(q)
    with pytest.raises(InvalidParameterError, match="'wages'"):
        dpframe.sink_parquet(q, tmp_path / "out.parquet")
    derived = people.select(_pram(acct), (pl.col("wages") * 2).alias("w2"))
    with pytest.raises(InvalidParameterError, match="'w2'"):
        dpframe.collect(derived)
    assert acct.ledger == () and not (tmp_path / "out.parquet").exists()
    out = dpframe.collect(q, public=["wages"])  # declared public: published as it is
    assert out.columns == ["language", "wages"] and len(acct.ledger) == 1


def test_a_raw_column_beside_a_column_release_is_refused(people):
    acct = dpframe.Accountant(epsilon=10)
    counts = people.group_by("language").agg(pl.len().cast(pl.Float64).alias("n"))
    noisy = pl.col("n").dp.laplace(
        epsilon=0.5, sensitivity=1, composition="parallel", accountant=acct
    )
    with pytest.raises(InvalidParameterError, match="'language'"):
        dpframe.collect(counts.select(noisy, "language"))
    assert acct.ledger == ()


# -- the dry pass charges nothing --------------------------------------------------------


def test_a_column_release_in_a_runner_query_is_charged_once_after_the_dry_pass(people):
    # old: the dry pass evaluated (and charged) the .dp.laplace column, then refused
    acct = dpframe.Accountant(epsilon=10)
    noisy = pl.col("wages").dp.laplace(
        epsilon=0.5, sensitivity=1, composition="parallel", accountant=acct
    )
    out = dpframe.collect(people.select(noisy, _pram(acct).alias("x")))
    assert out.height == people.collect().height
    assert sorted(e.mechanism for e in acct.ledger) == ["laplace", "pram"]
    assert acct.spent.epsilon == pytest.approx(1.0)


def test_a_refused_query_leaves_no_pending_charge(people):
    acct = dpframe.Accountant(epsilon=10)
    q = people.select(_pram(acct), "wages")
    for _ in range(3):
        with pytest.raises(InvalidParameterError):
            dpframe.collect(q)
    assert acct.ledger == ()
    assert list(dpframe.pending_releases(acct)) == []


# -- data that cannot be released is found before the charge ----------------------------


def test_a_category_the_dtype_cannot_hold_is_refused_before_the_charge():
    # old: PRAM on an Int8 column with a category 200 charged 0.5, then failed in polars
    acct = dpframe.Accountant(epsilon=10)
    lf = pl.LazyFrame({"c": pl.Series([1, 2, 3], dtype=pl.Int8)})
    q = lf.select(pl.col("c").dp.pram(0.5, categories=[1, 2, 200], accountant=acct))
    with pytest.raises(InvalidDataError, match="do not fit its dtype Int8"):
        dpframe.collect(q)
    assert acct.ledger == ()


@pytest.mark.parametrize("bad", [None, "xx"])
def test_a_value_outside_the_categories_is_refused_before_the_charge(people, bad):
    acct = dpframe.Accountant(epsilon=10)
    # one in-memory frame (a lazy concat of two frames could read a record twice: refused)
    raw = people.select("language").collect()
    lf = pl.concat([raw, pl.DataFrame({"language": [bad]}, schema=raw.schema)]).lazy()
    with pytest.raises(InvalidDataError):
        dpframe.collect(lf.select(_pram(acct)))
    assert acct.ledger == ()


def test_a_plain_collect_runs_nothing(people):
    acct = dpframe.Accountant(epsilon=10)
    with pytest.raises(ReleaseNotArmedError, match="Nothing was charged"):
        people.select(_pram(acct)).collect()
    assert acct.ledger == ()


# -- each run is its own release ---------------------------------------------------------


def test_each_run_of_a_query_is_charged_and_drawn_afresh(people):
    acct = dpframe.Accountant(epsilon=10)
    q = people.select(_pram(acct))
    a, b = dpframe.collect(q), dpframe.collect(q)
    assert len(acct.ledger) == 2 and acct.spent.epsilon == pytest.approx(1.0)
    assert not a.equals(b)  # 300 records: equal by chance with probability < 1e-40


# -- arguments that only failed after the charge (found by the bad-input table) -------


@pytest.mark.parametrize(
    ("run", "match"),
    [
        (lambda q, p: dpframe.collect(q, bogus=1), "unknown argument"),
        (lambda q, p: dpframe.collect(q, engine="fast"), "engine must be"),
        (lambda q, p: dpframe.collect(q, background=True), "background=True is refused"),
        (lambda q, p: dpframe.collect(q, engine=123), "engine must be"),
        (lambda q, p: dpframe.collect(q, optimizations=42), "optimizations must be"),
        pytest.param(
            lambda q, p: dpframe.collect(q, engine="gpu"),
            "needs the package cudf_polars",
            marks=pytest.mark.skipif(
                __import__("importlib.util").util.find_spec("cudf_polars") is not None,
                reason="cudf_polars is installed",
            ),
        ),
        (lambda q, p: dpframe.sink_parquet(q, p, compression="zip"), "compression must be"),
    ],
    ids=[
        "collect-unknown-kwarg",
        "collect-bad-engine",
        "collect-background",
        "collect-engine-not-a-name",
        "collect-bad-optimizations",
        "collect-gpu-unavailable",
        "sink-bad-compression",
    ],
)
def test_runner_arguments_are_checked_before_the_charge(people, tmp_path, run, match):
    # old: charged the run's epsilon, then polars raised TypeError / ValueError
    acct = dpframe.Accountant(epsilon=1.0)
    q = people.select(_pram(acct))
    with pytest.raises(InvalidParameterError, match=match):
        run(q, tmp_path / "out.parquet")
    assert acct.spent.epsilon == 0 and not list(tmp_path.iterdir())


# -- what runs is the plan that was checked, bound to its run ----------------------------


def _evaluate_beside_the_run(monkeypatch, hook: str, query_of, side):
    """Run ``dpframe.collect`` and, the first time the run calls ``Run.<hook>`` (the dry
    pass's registration or the real pass's draw), call ``side()`` in another thread
    while the run waits. Returns what ``side`` returned or raised, and the output."""
    import threading

    from dpframe.polars.runner import Run

    real = getattr(Run, hook)
    seen: list[object] = []
    done = threading.Event()
    first = threading.Lock()

    def other() -> None:
        try:
            seen.append(side())
        except Exception as exc:
            seen.append(exc)
        finally:
            done.set()

    def hooked(self, *args, **kwargs):
        if first.acquire(blocking=False):  # the first call only, whatever thread makes it
            threading.Thread(target=other, daemon=True).start()
        assert done.wait(60), "the other thread did not finish"
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Run, hook, hooked)
    out = dpframe.collect(query_of())
    return seen, out


@pytest.mark.parametrize("hook", ["register", "armed_output"])
def test_another_thread_evaluating_the_expression_during_a_run_draws_nothing(
    monkeypatch, people, hook
):
    # old: the run was process-wide; another thread's frame.select(expr) during the dry
    # pass was registered in it and, during the real pass, randomized its own copy of
    # the records under the run's one charge
    acct = dpframe.Accountant(epsilon=5)
    expr = _pram(acct)
    frame = people.collect()
    seen, out = _evaluate_beside_the_run(
        monkeypatch, hook, lambda: people.select(expr), lambda: frame.select(expr)
    )
    assert len(seen) == 1 and isinstance(seen[0], ReleaseNotArmedError)
    assert out.height == 300 and acct.spent.epsilon == pytest.approx(0.5)
    assert len(acct.ledger) == 1


def test_a_column_release_made_by_another_thread_during_a_run_refuses_the_run_uncharged(
    monkeypatch,
):
    # old: the other thread's eager evaluation met the run's dry pass: it was registered
    # there and got zeros, not released values; and a release made between the dry pass
    # and the charge was charged again by the run, which then refused to use it
    from dpframe.errors import ReleaseReuseError

    acct = dpframe.Accountant(epsilon=5)
    stats = pl.DataFrame({"m": [1.0, 2.0, 3.0]})
    expr = pl.col("m").dp.laplace(
        epsilon=0.5, sensitivity=1.0, composition="parallel", accountant=acct, seed=3
    )
    other = pl.DataFrame({"m": [7.0, 8.0, 9.0]})
    with pytest.raises(ReleaseReuseError, match="nothing was charged for the run"):
        _evaluate_beside_the_run(
            monkeypatch, "register", lambda: stats.lazy().select(expr), lambda: other.select(expr)
        )
    assert len(acct.ledger) == 1 and acct.spent.epsilon == pytest.approx(0.5)
    again = other.select(expr)["m"].to_list()  # the other thread's release, released
    assert again != [0.0, 0.0, 0.0] and again == other.select(expr)["m"].to_list()


def test_a_python_object_wrapping_a_release_never_runs_in_the_run(people):
    # old: an object of the caller's class holding the release in `.function` was taken
    # for dpframe's wrapper and called by polars in the run: it randomized every record
    # twice under one charge and kept the second draw
    from polars._plr import map_expr
    from polars._utils.wrap import wrap_expr

    from dpframe.polars.pram import PramExpression

    acct = dpframe.Accountant(epsilon=5)
    expr = _pram(acct)
    release = next(o for o in _python_objects(people.select(expr)) if isinstance(o, PramExpression))
    calls: list[int] = []

    class Wrapper:
        def __init__(self, function):
            self.function = function

        def __call__(self, series, *args, **kwargs):
            s = pl.Series._from_pyseries(series[0])
            calls.append(s.len())
            kept = self.function(s)
            calls.append(self.function(s).len())  # a second draw of the same records
            return kept._s

    dtype = pl.String.to_dtype_expr()._pydatatype_expr
    inputs = [pl.col("language")._pyexpr]
    node = map_expr(inputs, Wrapper(release), dtype, is_elementwise=True, returns_scalar=False)
    wrapped = wrap_expr(node)
    out = dpframe.collect(people.select(wrapped.alias("language")))
    assert calls == [] and out.height == 300
    assert acct.spent.epsilon == pytest.approx(0.5)


def _python_objects(lf: pl.LazyFrame) -> list[object]:
    """The Python objects polars serializes in ``lf``'s plan (what an attacker can reach)."""
    import cloudpickle

    found: list[object] = []
    real = cloudpickle.dumps

    def spy(obj, *args, **kwargs):
        found.append(obj)
        inner = getattr(obj, "function", None)
        closure = getattr(inner, "__closure__", None) or ()
        found.extend(c.cell_contents for c in closure)
        return b"-"  # nothing is pickled

    cloudpickle.dumps = spy
    try:
        lf.serialize()
    finally:
        cloudpickle.dumps = real
    return found


def test_a_prepared_plan_runs_only_in_its_thread_and_only_until_closed(people):
    import threading

    from dpframe.polars.runner import prepare

    acct = dpframe.Accountant(epsilon=5)
    prepared = prepare(people.select(_pram(acct)))
    errors: list[Exception] = []

    def other() -> None:
        try:
            prepared.plan.collect()
        except Exception as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and "outside its run" in str(errors[0])
    prepared.close()
    with pytest.raises(Exception, match="outside its run"):
        prepared.plan.collect()
    assert acct.ledger == ()


# -- every Python object of the plan is seen: polars pickles some without cloudpickle ----


class _SwapAfterTheCharge:
    """A plainly picklable callable (module level): polars pickles it with ``pickle``, not
    ``cloudpickle``, and calls it when it converts the plan, at each collect."""

    acct: dpframe.Accountant  # a class attribute: not pickled with the object

    def __call__(self, lf_and_schema):
        lf = pl.LazyFrame._from_pyldf(lf_and_schema[0][0])
        if self.acct.spent.epsilon == 0:  # the check and the dry pass: the query as checked
            return lf.select("language")._ldf
        return lf.select("language", pl.col("wages").alias("raw"))._ldf  # the real pass


class _RunsInTheRun:
    """A scan's credential provider that pickles plainly; unpickling it calls ``ran``."""

    def __reduce__(self):
        return (_ran, ())


_CALLS: list[str] = []


def _ran():
    _CALLS.append("ran")


def test_a_plainly_pickled_python_step_is_refused_before_any_charge(people):
    # old: the inspection stood in for cloudpickle only; polars pickles a plainly
    # picklable object with pickle, so the spy never saw it, and a pipe_with_schema
    # callable (called by polars at each collect) published a raw column in the real pass
    acct = _SwapAfterTheCharge.acct = dpframe.Accountant(epsilon=5)
    base = people.with_columns(_pram(acct))
    q = pl.LazyFrame._from_pyldf(base._ldf.pipe_with_schema(_SwapAfterTheCharge()))
    with pytest.raises(InvalidParameterError, match="not a dpframe release"):
        dpframe.collect(q)
    assert acct.ledger == ()


def test_a_plainly_pickled_scan_option_is_refused_and_never_runs(people, tmp_path):
    # old: a scan's credential_provider pickled plainly, unseen: its code ran at the
    # inspection and, with the run open, when the checked plan was rebuilt
    path = tmp_path / "people.parquet"
    people.collect().write_parquet(path)
    acct = dpframe.Accountant(epsilon=5)
    q = pl.scan_parquet(path, credential_provider=_RunsInTheRun()).select(_pram(acct))
    _CALLS.clear()
    with pytest.raises(InvalidParameterError, match="credential_provider=None"):
        dpframe.collect(q)
    assert _CALLS == [] and acct.ledger == ()


@pytest.mark.parametrize("sink", [False, True], ids=["collect", "sink_parquet"])
def test_a_column_release_the_dry_pass_did_not_meet_draws_nothing_in_the_run(tmp_path, sink):
    # old: a release whose output was declared public was not probed by the dry pass,
    # so the run charged nothing for it; in the real pass it charged and drew by itself,
    # outside the run: the Parquet file's provenance said epsilon 0 over Laplace noise
    acct = dpframe.Accountant(epsilon=5)
    stats = pl.LazyFrame({"m": [10.0, 20.0, 30.0], "p": [1, 2, 3]})
    expr = pl.col("m").dp.laplace(
        epsilon=0.5, sensitivity=1.0, composition="parallel", accountant=acct
    )
    q = stats.select(expr, "p")
    out = tmp_path / "out.parquet"
    with pytest.raises(ReleaseNotArmedError, match="dry pass"):
        if sink:
            dpframe.sink_parquet(q, out, public=["m", "p"])
        else:
            dpframe.collect(q, public=["m", "p"])
    assert acct.ledger == () and not out.exists()


def test_a_release_resolved_in_its_run_draws_nothing_once_the_run_is_closed(people):
    # old: a handle resolved in the run's thread gave a wrapper that checked nothing when
    # called: kept past the run, it drew again under the run's charge (a query's own code
    # could resolve one while the plan was rebuilt)
    from dpframe.polars.lineage import marker
    from dpframe.polars.runner import _resolve, prepare

    acct = dpframe.Accountant(epsilon=5)
    prepared = prepare(people.select(_pram(acct)))
    kept = _resolve(prepared.nonce, marker(0).decode())
    rows = prepared.run.rows.copy()
    prepared.close()
    language = people.collect()["language"]
    with pytest.raises(ReleaseNotArmedError, match="outside its run"):
        kept([language._s], return_dtype=pl.String)
    assert prepared.run.rows == rows and acct.ledger == ()


# -- the files a run reads have the schemas its check saw ---------------------------------


def test_a_file_replaced_after_the_check_cannot_change_what_a_selector_names(monkeypatch, tmp_path):
    # old: polars resolved the file's schema again in the dry and the real pass; a file
    # replaced after the check (one more column) made pl.nth(1) name a raw column, which
    # left under the checked public name
    import os

    import dpframe.polars.runner as runner

    path = tmp_path / "people.parquet"
    old = pl.DataFrame({"language": CATS * 100, "wages": np.arange(300.0)})
    old.write_parquet(path)
    new = old.insert_column(1, pl.Series("ssn", np.arange(1e6, 1e6 + 300)))
    new.write_parquet(tmp_path / "new.parquet")
    real = runner._check_budget_first

    def replaced(found):  # after the check, before the dry pass
        os.replace(tmp_path / "new.parquet", path)
        return real(found)

    monkeypatch.setattr(runner, "_check_budget_first", replaced)
    acct = dpframe.Accountant(epsilon=5)
    q = pl.scan_parquet(path).select(_pram(acct), pl.nth(1).alias("wages"))
    with pytest.raises(pl.exceptions.SchemaError, match="ssn"):
        dpframe.collect(q, public=["wages"])
    assert acct.ledger == ()


def test_a_hive_partitioned_scan_runs_with_its_partitions_pinned(tmp_path):
    for k in (1, 2):
        (tmp_path / f"k={k}").mkdir()
        pl.DataFrame({"language": CATS * 10}).write_parquet(tmp_path / f"k={k}" / "p.parquet")
    acct = dpframe.Accountant(epsilon=5)
    q = pl.scan_parquet(tmp_path).select(_pram(acct), "k")
    out = dpframe.collect(q, public=["k"])
    assert out.height == 60 and sorted(set(out["k"])) == [1, 2]


def test_a_csv_scan_is_refused_before_anything_is_read(tmp_path):
    from dpframe.errors import LineageError

    path = tmp_path / "people.csv"
    pl.DataFrame({"language": CATS}).write_csv(path)
    acct = dpframe.Accountant(epsilon=5)
    with pytest.raises(LineageError, match="sink_parquet"):
        dpframe.collect(pl.scan_csv(path).select(_pram(acct)))
    assert acct.ledger == ()
