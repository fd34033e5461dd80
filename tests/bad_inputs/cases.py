"""The bad-input cases over dpframe's public surface (issue 17), run by
``tests/test_bad_inputs.py``.

Each case is a small callable taking a :class:`~tests.bad_inputs.harness.Ctx` (its own
``tmp_path`` as the current directory, a fresh accountant in ``ctx.acct``) plus a label and
the names (argument, column or spec field) its error message should mention. ``q=True``
marks an input the library may legitimately accept; ``xfail="..."`` one that does not pass
yet (what happens today).

Surfaces:
 1-api        top-level functions and the .dp / .dpf namespaces
 2-accountant Accountant / Accountant.open / spend / reserve
 3-pram       .dp.pram, dpframe.pram.*
 4-spec       release specs (dpframe.jobs in-process, and `dpframe plan/release` subprocesses)
 5-cli        the dpframe command (ledger show/verify/export/cancel/migrate, provenance
              show/copy, plan, risk, ...)
"""

# Dropped from the table: [questionable] cases that did not pass, inputs the library may
# legitimately accept (label: why it is dropped).
#   pram.release keep='region' (a string): one column name, as keys= takes it (by design
#       since issue 17: it was split into letters)
#   privacy.seed = 2**70: any int >= 0 is a seed, in Python and in the spec alike
#   input.path is a folder (plan, cli-plan): a folder is read as its Parquet parts (a Spark
#       output), by design
#   .dp.laplace public_groups=True with composition='sequential': a valid combination (one
#       sequential charge)
#   .dp.laplace public_groups=True under add_remove: a valid combination (charged under
#       add_remove)
#   dpframe.laplace on a column missing from the frame: polars' ColumnNotFoundError names
#       the column, before any charge
#   .dp.laplace on an empty frame (0 rows): no row, no noise drawn, nothing charged
#   .dp.truncated_laplace lower=None, upper=None (no bound at all): may mean "no
#       truncation" (plain Laplace)
#   .dp.truncated_laplace lower=-inf, upper=+inf: the same as no truncation
#   group_by value column named '__rows' (sum): exact aggregates found correct; the name
#       clashes with nothing
#   group_by statistic named 'count:n': exact aggregates found correct; only an output name
#   group_by on an empty frame (0 rows, same schema): public margins give the groups
#       (noisy zeros)
#   GroupedRelease.summarize() with a bad column: describes the plan only, reads no data,
#       charges nothing
#   covariance_matrix calibration='paper' truncated: a documented combination
#   dpframe.collect(engine='gpu'): a polars collect option (works where cudf_polars is
#       installed; refused before the charge where it is not: tests/polars/test_runner.py)
#   write_parquet spec='text' (not a dict): the spec is free-form JSON provenance; a string
#       is JSON
#   choose_epsilon rng='seed': the rng is unused without a table (ignored)
#   df.dpf.proportions bogus kwarg: Python's TypeError is the standard refusal of an
#       unknown keyword
#   Accountant(accounting='pure', rho=1): a rho budget implies zCDP accounting
#   Accountant(unit='__bad__pid'): a person unit only needs to be a column; the prefix is
#       reserved for keys
#   Charge(0.5, unit=''): '' may mean record-level
#   acct.spend(0.5) with a person-unit Charge on a record ledger: the charge's unit is
#       informative there
#   acct.reserve([]) (empty plan): reserving nothing is a no-op
#   .dp.pram epsilon=700: a huge epsilon is valid (a near-identity matrix) within a budget
#       of 1000
#   .dp.pram matrix=a zero column, rows all equal (epsilon 0): a valid stochastic matrix of
#       epsilon 0
#   .dp.pram prior_share with prior='uniform': an option that does not apply, ignored
#   .dp.pram on pl.lit('own') (no column): a literal holds no personal data
#   pram.release prior='dp': a documented option (a DP prior, charged)
#   pram.check_matrix identity (infinite epsilon): returns inf, the identity's epsilon
#   .dp.pram on a column missing from the frame: polars' ColumnNotFoundError names the
#       column, before any charge
#   [plan] privacy.budget.epsilon = 1e-300: a valid budget; the plan says it does not fit
#   [plan] pram prior = 'dp', proportions n = 1: the spec takes what dpframe.pram.release
#       and dpframe.proportions take (tests/jobs/test_spec_parity.py)
#   [plan] privacy.ledger in a missing folder: planning does not write the ledger (the
#       [run] case refuses)
#   [run] grouped on empty input (0 rows): public margins give the groups (noisy zeros)
#   [run] grouped on Int key vs String margins: the margins values are cast to the key's
#       dtype
#
# Trimmed to keep the file under 90 s (each subprocess costs 0.5-1.3 s); every argument
# and class of bad input stays covered:
#   `dpframe plan` copies of in-process [plan] cases already covered by another `dpframe
#       plan` case of the same class: privacy.budget.epsilon = NaN, privacy.seed = '1',
#       unknown release field 'epsilon', mean lower = '0', count epsilon = -0.5
#   dpframe ledger show notes.txt (a text file, as garbage.db), dpframe ledger export
#       --output nodir/out.parquet (a missing folder, as nodir/out.json), dpframe risk
#       --eps-min -1 and --points -5 (non-positive, as 0), dpframe demo --rows -5 (as 0)

from __future__ import annotations

import json
import os

import numpy as np
import polars as pl

import dpframe
from tests.bad_inputs.harness import (
    CASES,
    INF,
    NAN,
    PEOPLE,
    REGIONS,
    STATS,
    Ctx,
    add,
    as_nobody,
    cli,
    income_with,
    spec_setup,
    with_col,
)

A = "1-api"
ACC = "2-accountant"
P = "3-pram"
S = "4-spec"
C = "5-cli"

#: wrong values for a positive finite number (epsilon, sensitivity, rho, ...)
BAD_POSITIVE = [
    ("str '1'", "1"),
    ("bool True", True),
    ("list [1]", [1]),
    ("NaN", NAN),
    ("+inf", INF),
    ("-inf", -INF),
    ("0", 0),
    ("-1", -1),
    ("None", None),
    ("numpy array [0.5]", np.array([0.5])),
]
#: wrong values for a finite real (a bound)
#: the short palette, for arguments checked by the same shared code as a fully covered one
BAD_POS_SHORT = [("str '1'", "1"), ("bool True", True), ("NaN", NAN), ("0", 0), ("-1", -1)]
BAD_REAL = [
    ("str '0'", "0"),
    ("bool False", False),
    ("list [0]", [0]),
    ("NaN", NAN),
]
BAD_CHOICE = [("misspelt", "Parallel "), ("empty ''", ""), ("None", None), ("int 1", 1)]


# =======================================================================================
# 1. top-level functions and the .dp namespaces
# =======================================================================================


def column_release(ctx: Ctx, make, df: pl.DataFrame = STATS) -> pl.DataFrame:
    """Build the expression under ctx.acct, evaluate it on ``df`` (charged once)."""
    if ctx.acct is None:
        return df.with_columns(make())
    with ctx.acct:
        e = make()
    return df.with_columns(e)


def lap(**kw):
    args = {"epsilon": 0.5, "sensitivity": 0.1, "composition": "parallel", **kw}
    return lambda ctx: column_release(ctx, lambda: pl.col("m").dp.laplace(**args))


for what, v in BAD_POSITIVE:
    add(A, f".dp.laplace epsilon={what}", lap(epsilon=v), "epsilon")
for what, v in BAD_POS_SHORT:
    add(A, f".dp.laplace sensitivity={what}", lap(sensitivity=v), "sensitivity")
for what, v in BAD_CHOICE:
    add(A, f".dp.laplace composition={what}", lap(composition=v), "composition")
add(A, ".dp.laplace public_groups='no' (str for bool)", lap(public_groups="no"), "public_groups")
add(A, ".dp.laplace public_groups=[True]", lap(public_groups=[True]), "public_groups")
for what, v in [("0", 0), ("-1", -1), ("NaN", NAN), ("inf", INF), ("str '0.5'", "0.5")]:
    add(A, f".dp.laplace granularity={what}", lap(granularity=v), "granularity")
add(
    A,
    ".dp.laplace granularity=0.3 (not a power of two)",
    lap(granularity=0.3),
    "granularity",
    q=True,
)
add(
    A,
    ".dp.laplace granularity=1e6 (coarser than the statistics)",
    lap(granularity=1e6),
    "granularity",
    q=True,
)
for what, v in [("-1", -1), ("1.5", 1.5), ("str '7'", "7"), ("bool True", True)]:
    add(A, f".dp.laplace seed={what}", lap(seed=v), "seed")
add(A, ".dp.laplace accountant='acct' (a string)", lap(accountant="acct"), "accountant", acct=None)
add(A, ".dp.laplace accountant=10 (a number)", lap(accountant=10), "accountant", acct=None)
add(A, ".dp.laplace with no accountant at all", lap(), "accountant", acct=None)
add(A, ".dp.laplace epsilon=100 > budget 10", lap(epsilon=100), "epsilon")
add(
    A,
    "dpframe.laplace(expr=123)",
    lambda ctx: column_release(
        ctx, lambda: dpframe.laplace(123, epsilon=0.5, sensitivity=0.1, composition="parallel")
    ),
    "expr",
)
add(
    A,
    "dpframe.laplace(expr=None)",
    lambda ctx: column_release(
        ctx, lambda: dpframe.laplace(None, epsilon=0.5, sensitivity=0.1, composition="parallel")
    ),
    "expr",
)
add(
    A,
    "dpframe.laplace(expr=['m'])  (a list of names)",
    lambda ctx: column_release(
        ctx, lambda: dpframe.laplace(["m"], epsilon=0.5, sensitivity=0.1, composition="parallel")
    ),
    "expr",
)


def lap_on(df):
    return lambda ctx: column_release(
        ctx,
        lambda: pl.col("m").dp.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel"),
        df,
    )


add(A, ".dp.laplace on a column with a null", lap_on(pl.DataFrame({"m": [1.0, None]})), "m")
add(A, ".dp.laplace on a column with NaN", lap_on(pl.DataFrame({"m": [1.0, NAN]})), "m")
add(A, ".dp.laplace on a column with +inf", lap_on(pl.DataFrame({"m": [1.0, INF]})), "m")
add(A, ".dp.laplace on a String column", lap_on(pl.DataFrame({"m": ["1.0", "2"]})), "m")
add(A, ".dp.laplace on a Boolean column", lap_on(pl.DataFrame({"m": [True, False]})), "m", q=True)
add(A, ".dp.laplace on a List column", lap_on(pl.DataFrame({"m": [[1.0], [2.0]]})), "m")
add(
    A,
    ".dp.laplace on a Datetime column",
    lap_on(
        pl.DataFrame(
            {
                "m": pl.datetime_range(
                    pl.datetime(2020, 1, 1), pl.datetime(2020, 1, 2), "1d", eager=True
                )
            }
        )
    ),
    "m",
)
add(
    A,
    ".dp.laplace on 1e308 values (noise overflows?)",
    lap_on(pl.DataFrame({"m": [1e308, -1e308]})),
    "m",
    q=True,
)


def _per_group(ctx):
    with ctx.acct:
        e = pl.col("income").mean().dp.laplace(epsilon=0.5, sensitivity=1, composition="parallel")
    return PEOPLE.group_by("region").agg(e)


add(
    A,
    ".dp.laplace inside group_by().agg (per-group evaluation, documented to refuse)",
    _per_group,
    ("group", "agg", "reuse", "release"),
)


def _per_window(kind):
    def run(ctx):
        with ctx.acct:
            m = pl.col("income").mean() if kind == "over" else pl.col("income")
            e = m.dp.laplace(epsilon=0.5, sensitivity=1, composition="parallel")
        if kind == "over":
            return PEOPLE.with_columns(e.over("region"))
        if kind == "truncated":
            with ctx.acct:
                t = pl.col("income").dp.truncated_laplace(
                    0.5, 0.0, pl.col("income"), 1.0, composition="parallel"
                )
            return PEOPLE.group_by("region").agg(t)
        lists = PEOPLE.group_by("region").agg(pl.col("income"))
        with ctx.acct:
            el = (
                pl.element()
                .alias("income")
                .dp.laplace(epsilon=0.5, sensitivity=1, composition="parallel")
            )
        return lists.with_columns(pl.col("income").list.eval(el))

    return run


add(A, ".dp.laplace inside over() (per-group)", _per_window("over"), ("group", "over"))
add(
    A,
    ".dp.truncated_laplace with per-row bounds inside group_by().agg",
    _per_window("truncated"),
    ("group", "agg"),
)
add(A, ".dp.laplace inside list.eval (per list)", _per_window("list"), ("group", "list.eval"))


def _rolling(ctx):
    with ctx.acct:
        e = pl.col("m").dp.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel")
    return STATS.with_row_index("t").rolling("t", period="2i").agg(e)


add(
    A,
    ".dp.laplace inside rolling().agg (per window)",
    _rolling,
    ("window", "rolling", "group"),
    xfail="ReleaseReuseError, but only after charging epsilon 0.5: polars names each "
    "window's piece as it names the whole column, so the first window looks whole",
)
add(
    A,
    ".dp.laplace on pl.all() (several columns, one release)",
    lambda ctx: column_release(
        ctx, lambda: pl.all().dp.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel")
    ),
    ("expr", "several columns"),
)
add(
    A,
    ".dp.laplace on pl.element() (no column name)",
    lambda ctx: column_release(
        ctx, lambda: pl.element().dp.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel")
    ),
    ("expr", "alias"),
)


def gauss(**kw):
    args = {"sensitivity": 1.0, "composition": "parallel", "rho": 0.1, **kw}
    return lambda ctx: column_release(ctx, lambda: pl.col("m").dp.gaussian(**args))


for what, v in [*BAD_POS_SHORT, ("+inf", INF)]:
    add(A, f".dp.gaussian rho={what}", gauss(rho=v), "rho", acct="zcdp")
for what, v in [("0", 0), ("-1", -1), ("NaN", NAN), ("str '1'", "1")]:
    add(A, f".dp.gaussian sigma={what}", gauss(rho=None, sigma=v), "sigma", acct="zcdp")
add(A, ".dp.gaussian with both rho and sigma", gauss(sigma=2.0), ("rho", "sigma"), acct="zcdp")
add(A, ".dp.gaussian with neither rho nor sigma", gauss(rho=None), ("rho", "sigma"), acct="zcdp")
add(A, ".dp.gaussian on a pure-epsilon accountant", gauss(), ("rho", "zcdp", "accountant"))
for what, v in [("0", 0), ("str '1'", "1"), ("NaN", NAN)]:
    add(A, f".dp.gaussian sensitivity={what}", gauss(sensitivity=v), "sensitivity", acct="zcdp")
add(A, ".dp.gaussian composition='both'", gauss(composition="both"), "composition", acct="zcdp")
add(A, ".dp.gaussian rho=5 > budget rho 1", gauss(rho=5.0), "rho", acct="zcdp")


def trunc(*, epsilon=0.5, lower=0.0, upper=10.0, sensitivity=0.1, df=STATS, **kw):
    kw.setdefault("composition", "parallel")
    return lambda ctx: column_release(
        ctx,
        lambda: pl.col("m").dp.truncated_laplace(epsilon, lower, upper, sensitivity, **kw),
        df,
    )


for what, v in BAD_POS_SHORT:
    add(A, f".dp.truncated_laplace epsilon={what}", trunc(epsilon=v), "epsilon")
for what, v in BAD_REAL:
    add(A, f".dp.truncated_laplace lower={what}", trunc(lower=v), "lower")
    add(A, f".dp.truncated_laplace upper={what}", trunc(upper=v), "upper")
add(A, ".dp.truncated_laplace lower > upper", trunc(lower=10.0, upper=0.0), ("lower", "upper"))
add(A, ".dp.truncated_laplace lower == upper", trunc(lower=5.0, upper=5.0), ("lower", "upper"))
add(
    A,
    ".dp.truncated_laplace lower=+inf, upper=None (empty interval)",
    trunc(lower=INF, upper=None),
    ("lower", "upper"),
)
add(
    A,
    ".dp.truncated_laplace bounds -1e308..1e308 (width overflows)",
    trunc(lower=-1e308, upper=1e308),
    ("lower", "upper"),
)
for what, v in BAD_POS_SHORT:
    add(A, f".dp.truncated_laplace sensitivity={what}", trunc(sensitivity=v), "sensitivity")
add(A, ".dp.truncated_laplace method='clamp'", trunc(method="clamp"), "method")
add(A, ".dp.truncated_laplace method=None", trunc(method=None), "method")
add(A, ".dp.truncated_laplace calibration='approx'", trunc(calibration="approx"), "calibration")
add(A, ".dp.truncated_laplace composition=None", trunc(composition=None), "composition")
add(
    A,
    ".dp.truncated_laplace per-row lower column holding a null",
    trunc(lower=pl.col("lo"), df=pl.DataFrame({"m": [1.0, 2.0], "lo": [0.0, None]})),
    "lo",
)
add(
    A,
    ".dp.truncated_laplace per-row upper below per-row lower",
    trunc(
        lower=pl.col("lo"),
        upper=pl.col("hi"),
        df=pl.DataFrame({"m": [1.0, 2.0], "lo": [0.0, 5.0], "hi": [1.0, 1.0]}),
    ),
    ("lo", "hi", "lower", "upper"),
)
add(
    A,
    ".dp.truncated_laplace per-row sensitivity 0 in one row",
    trunc(sensitivity=pl.col("s"), df=pl.DataFrame({"m": [1.0, 2.0], "s": [0.1, 0.0]})),
    ("s", "sensitivity"),
)
add(
    A,
    ".dp.truncated_laplace per-row sensitivity negative",
    trunc(sensitivity=pl.col("s"), df=pl.DataFrame({"m": [1.0, 2.0], "s": [0.1, -1.0]})),
    ("s", "sensitivity"),
)
add(
    A,
    ".dp.truncated_laplace per-row sensitivity as a String column",
    trunc(sensitivity=pl.col("s"), df=pl.DataFrame({"m": [1.0, 2.0], "s": ["a", "b"]})),
    ("s", "sensitivity"),
)
add(
    A,
    ".dp.truncated_laplace per-row sensitivity +inf",
    trunc(sensitivity=pl.col("s"), df=pl.DataFrame({"m": [1.0, 2.0], "s": [0.1, INF]})),
    ("s", "sensitivity"),
)
add(
    A,
    ".dp.truncated_laplace on a column with NaN",
    trunc(df=pl.DataFrame({"m": [1.0, NAN]})),
    "m",
)


# -- grouped releases ---------------------------------------------------------------------


def grouped(*stats, frame=None, keys="region", margins=REGIONS, acct_kw=True, **kw):
    def fn(ctx: Ctx):
        f = PEOPLE if frame is None else frame
        s = [st() if callable(st) else st for st in stats] or [dpframe.agg.count(epsilon=0.5)]
        kwargs = dict(kw)
        if acct_kw:
            kwargs.setdefault("accountant", ctx.acct)
        return dpframe.group_by(f, keys, margins=margins, **kwargs).agg(*s).collect()

    return fn


def count(**kw):
    return lambda: dpframe.agg.count(**{"epsilon": 0.5, **kw})


def asum(col="income", **kw):
    return lambda: dpframe.agg.sum(col, **{"lower": 0, "upper": 100, "epsilon": 0.5, **kw})


def amean(col="income", **kw):
    return lambda: dpframe.agg.mean(col, **{"lower": 0, "upper": 100, "epsilon": 0.5, **kw})


def avar(col="income", **kw):
    return lambda: dpframe.agg.var(col, **{"lower": 0, "upper": 100, "epsilon": 0.5, **kw})


def aprop(col="ok", **kw):
    return lambda: dpframe.agg.proportion(col, **{"epsilon": 0.5, **kw})


def acov(x="income", y="score", **kw):
    args = {"lower_x": 0, "upper_x": 100, "lower_y": 0, "upper_y": 10, "epsilon": 0.5, **kw}
    return lambda: dpframe.agg.cov(x, y, **args)


for what, v in [*BAD_POS_SHORT, ("None", None), ("-inf", -INF)]:
    add(A, f"agg.count epsilon={what}", grouped(count(epsilon=v)), "epsilon")
add(A, "agg.count name=''", grouped(count(name="")), "name")
add(A, "agg.count name=1", grouped(count(name=1)), "name")
add(
    A,
    "agg.count mechanism='Gaussian' (capitalised)",
    grouped(count(mechanism="Gaussian")),
    "mechanism",
)
add(A, "agg.count mechanism=None", grouped(count(mechanism=None)), "mechanism")
add(
    A,
    "agg.count mechanism='gaussian' with epsilon=",
    grouped(count(mechanism="gaussian")),
    ("epsilon", "rho"),
    acct="zcdp",
)
add(
    A,
    "agg.count mechanism='gaussian' on a pure-epsilon accountant",
    grouped(count(mechanism="gaussian", epsilon=None, rho=0.1)),
    ("rho", "zcdp", "accountant"),
)
add(
    A,
    "agg.count rho=0.1 with mechanism='laplace'",
    grouped(count(rho=0.1)),
    ("rho", "mechanism"),
)
add(
    A,
    "agg.count gaussian sigma=-1",
    grouped(count(mechanism="gaussian", epsilon=None, sigma=-1)),
    "sigma",
    acct="zcdp",
)
add(A, "agg.sum column=1", grouped(asum(col=1)), "column")
add(A, "agg.sum column=''", grouped(asum(col="")), "column")
add(A, "agg.sum column=None", grouped(asum(col=None)), "column")
add(A, "agg.sum column=pl.col('income') (an Expr)", grouped(asum(col=pl.col("income"))), "column")
for what, v in [*BAD_REAL, ("+inf", INF), ("-inf", -INF), ("None", None)]:
    add(A, f"agg.sum lower={what}", grouped(asum(lower=v)), "lower")
for what, v in [("str '100'", "100"), ("bool True", True), ("NaN", NAN), ("+inf", INF)]:
    add(A, f"agg.sum upper={what}", grouped(asum(upper=v)), "upper")
add(A, "agg.sum lower > upper", grouped(asum(lower=100, upper=0)), ("lower", "upper"))
add(A, "agg.sum lower == upper", grouped(asum(lower=5, upper=5)), ("lower", "upper"))
add(
    A,
    "agg.sum bounds -1e308..1e308 (width overflows)",
    grouped(asum(lower=-1e308, upper=1e308)),
    ("lower", "upper"),
)
add(A, "agg.sum on a column missing from the data", grouped(asum(col="nope")), "nope")
add(
    A,
    "agg.sum on a String column",
    grouped(asum(col="region"), keys="band", margins=pl.DataFrame({"band": ["a", "b"]})),
    "region",
)
add(
    A,
    "agg.sum on an income column with a null",
    grouped(asum(), frame=income_with([None])),
    "income",
)
add(A, "agg.sum on an income column with NaN", grouped(asum(), frame=income_with([NAN])), "income")
add(A, "agg.sum on an income column with +inf", grouped(asum(), frame=income_with([INF])), "income")
add(
    A,
    "agg.mean on an income column with -inf",
    grouped(amean(), frame=income_with([-INF])),
    "income",
)
for what, v in BAD_POS_SHORT:
    add(A, f"agg.mean epsilon={what}", grouped(amean(epsilon=v)), "epsilon")
add(A, "agg.mean method='median'", grouped(amean(method="median")), "method")
add(A, "agg.mean calibration=None", grouped(amean(calibration=None)), "calibration")
add(A, "agg.mean lower='low'", grouped(amean(lower="low")), "lower")
add(
    A,
    "agg.mean name='region' (clashes with key)",
    grouped(amean(name="region")),
    ("region", "name"),
)
add(
    A,
    "agg.mean twice on the same column (output name repeats)",
    grouped(amean(), amean()),
    ("income_mean", "name"),
)
add(
    A,
    "agg.quantile twice on the same column (one name: their histograms would meet)",
    grouped(
        lambda: dpframe.agg.quantile("income", [0.25], lower=0, upper=100, epsilon=0.5),
        lambda: dpframe.agg.quantile("income", [0.75], lower=0, upper=50, epsilon=0.5),
    ),
    ("income_quantile", "name"),
)
add(
    A,
    "agg.mean and agg.cov of one name= (their accuracy columns would meet)",
    grouped(amean(name="s"), acov(name="s")),
    ("'s'", "name"),
)
add(
    A,
    "agg.count name='__bad__income' (dpframe's own prefix: a bad-value count)",
    grouped(count(name="__bad__income")),
    ("__bad__income", "name"),
)
add(A, "agg.var lower=NaN", grouped(avar(lower=NAN)), "lower")
add(A, "agg.var epsilon=-0.5", grouped(avar(epsilon=-0.5)), "epsilon")
add(
    A, "agg.var on a Boolean column (questionable: numeric?)", grouped(avar(col="ok")), "ok", q=True
)
add(A, "agg.proportion on a Float column", grouped(aprop(col="income")), "income")
add(A, "agg.proportion on a String column", grouped(aprop(col="tenure")), "tenure")
add(
    A,
    "agg.proportion on a Boolean column holding a null",
    grouped(aprop(), frame=with_col(PEOPLE, "ok", [None] + [True] * 99, pl.Boolean)),
    "ok",
)
add(A, "agg.proportion epsilon='0.5'", grouped(aprop(epsilon="0.5")), "epsilon")
add(
    A, "agg.proportion epsilon=0 (method='bit')", grouped(aprop(method="bit", epsilon=0)), "epsilon"
)
add(A, "agg.cov x == y", grouped(acov(y="income")), ("x", "y"))
add(A, "agg.cov lower_y > upper_y", grouped(acov(lower_y=10, upper_y=0)), ("lower_y", "upper_y"))
add(A, "agg.cov upper_x='100'", grouped(acov(upper_x="100")), "upper_x")
add(A, "agg.cov lower_y=NaN", grouped(acov(lower_y=NAN)), "lower_y")
add(
    A,
    "agg.cov calibration='paper' method='truncated'",
    grouped(acov(calibration="paper")),
    "calibration",
)
add(A, "agg.cov y column missing", grouped(acov(y="nope")), "nope")
add(A, "agg.cov y is a String column", grouped(acov(y="tenure")), "tenure")

# group_by's own arguments
add(A, "group_by keys=1", grouped(keys=1), "keys")
add(A, "group_by keys=[]", grouped(keys=[]), "keys")
add(A, "group_by keys=None", grouped(keys=None), "keys")
add(A, "group_by keys=['nope'] (in neither frame nor margins)", grouped(keys=["nope"]), "nope")
add(
    A,
    "group_by key in margins but not in the frame",
    grouped(keys="zone", margins=pl.DataFrame({"zone": ["a", "b"]})),
    "zone",
)
add(A, "group_by margins=None", grouped(margins=None), "margins")
add(
    A,
    "group_by margins={'region': [...]} (a dict)",
    grouped(margins={"region": ["N", "S"]}),
    "margins",
)
add(A, "group_by margins=['N','S'] (a list)", grouped(margins=["N", "S", "E"]), "margins")
add(
    A,
    "group_by margins with 0 rows",
    grouped(margins=pl.DataFrame({"region": pl.Series([], dtype=pl.String)})),
    "margins",
)
add(
    A,
    "group_by margins with duplicate keys",
    grouped(margins=pl.DataFrame({"region": ["N", "S", "E", "N"]})),
    "margins",
)
add(
    A,
    "group_by margins with a null key",
    grouped(margins=pl.DataFrame({"region": ["N", "S", "E", None]})),
    "margins",
)
add(
    A,
    "group_by margins lacking the key column",
    grouped(margins=pl.DataFrame({"area": ["N", "S", "E"]})),
    ("margins", "region"),
)
add(
    A,
    "group_by margins keys Int64 vs String keys in data",
    grouped(margins=pl.DataFrame({"region": [1, 2, 3]})),
    "region",
)
add(
    A,
    "group_by margins missing a key present in data (unknown keys)",
    grouped(margins=pl.DataFrame({"region": ["N", "S"]})),
    ("margins", "unknown_keys", "keys"),
)
add(A, "group_by unknown_keys='ignore'", grouped(unknown_keys="ignore"), "unknown_keys")
add(A, "group_by unknown_keys=None", grouped(unknown_keys=None), "unknown_keys")
add(
    A,
    "group_by data with a null key",
    grouped(frame=with_col(PEOPLE, "region", [None] + ["N"] * 99)),
    "region",
)
add(
    A,
    "group_by Float keys with NaN in data",
    grouped(
        keys="x",
        frame=with_col(PEOPLE, "x", [NAN] + [1.0] * 99),
        margins=pl.DataFrame({"x": [1.0, 2.0]}),
    ),
    "x",
)
add(
    A,
    "group_by Float margins holding NaN as a key",
    grouped(
        keys="x",
        frame=with_col(PEOPLE, "x", [1.0] * 100),
        margins=pl.DataFrame({"x": [1.0, NAN]}),
    ),
    ("x", "margins"),
)
add(
    A,
    "group_by data Float keys 1.5 vs Int margins",
    grouped(
        keys="x",
        frame=with_col(PEOPLE, "x", [1.5] * 100),
        margins=pl.DataFrame({"x": [1, 2]}),
    ),
    "x",
)
add(
    A,
    "group_by key column named '__bad__income'",
    grouped(
        amean(),
        keys="__bad__income",
        frame=PEOPLE.with_columns(pl.col("region").alias("__bad__income")),
        margins=pl.DataFrame({"__bad__income": ["N", "S", "E", "W"]}),
    ),
    "__bad__",
)
add(
    A,
    "group_by key column named '__rows'",
    grouped(
        keys="__rows",
        frame=PEOPLE.with_columns(pl.col("region").alias("__rows")),
        margins=pl.DataFrame({"__rows": ["N", "S", "E", "W"]}),
    ),
    "__rows",
)
add(
    A,
    "group_by key column named 'count:n' (the count's part name)",
    grouped(
        keys="count:n",
        frame=PEOPLE.with_columns(pl.col("region").alias("count:n")),
        margins=REGIONS.rename({"region": "count:n"}),
    ),
    "count:n",
)
add(A, "group_by sizes='nope' (not a margins column)", grouped(sizes="nope"), "sizes")
add(
    A,
    "group_by sizes column of Float",
    grouped(margins=REGIONS.with_columns(pl.Series("n", [1.0, 2.0, 3.0, 4.0])), sizes="n"),
    "n",
)
add(
    A,
    "group_by sizes column negative",
    grouped(margins=REGIONS.with_columns(pl.Series("n", [50, 25, -1, 0])), sizes="n"),
    "n",
)
add(
    A,
    "group_by sizes that disagree with the data",
    grouped(amean(), margins=REGIONS.with_columns(pl.Series("n", [1, 2, 3, 4])), sizes="n"),
    ("sizes", "size"),
)
add(
    A,
    "group_by sizes= under add_remove neighbours",
    grouped(amean(), margins=REGIONS.with_columns(pl.Series("n", [50, 25, 25, 0])), sizes="n"),
    ("sizes", "add_remove"),
    acct="add_remove",
)
add(
    A, "group_by sizes='region' (the key column)", grouped(margins=REGIONS, sizes="region"), "sizes"
)
add(
    A,
    "group_by accountant='x' (a string)",
    grouped(accountant="x", acct_kw=False),
    "accountant",
    acct=None,
)
add(A, "group_by without any accountant", grouped(acct_kw=False), "accountant", acct=None)
add(A, "group_by frame=dict", grouped(frame={"region": ["N"]}), "frame")
add(A, "group_by frame=pandas-like list of dicts", grouped(frame=[{"region": "N"}]), "frame")
add(A, "group_by seed=-3", grouped(seed=-3), "seed")
add(A, "group_by unit=key column", grouped(unit="region", max_rows=1, max_groups=1), "unit")
add(
    A, "group_by unit='nope' (not a column)", grouped(unit="nope", max_rows=1, max_groups=1), "nope"
)
add(A, "group_by unit='pid' max_rows=0", grouped(unit="pid", max_rows=0, max_groups=1), "max_rows")
add(
    A,
    "group_by unit='pid' max_rows='2'",
    grouped(unit="pid", max_rows="2", max_groups=1),
    "max_rows",
)
add(
    A,
    "group_by unit='pid' max_groups=-1",
    grouped(unit="pid", max_rows=1, max_groups=-1),
    "max_groups",
)
# issue 32: a person unit states its bounds, never a silent 1 and 1
add(A, "group_by unit='pid' without bounds", grouped(unit="pid"), ("max_rows", "max_groups"))
add(A, "group_by unit='pid' max_rows=2 only", grouped(unit="pid", max_rows=2), "max_groups")
add(A, "group_by max_rows=2 without unit", grouped(max_rows=2), ("max_rows", "unit"), q=True)
add(
    A,
    "group_by unit='pid' with null persons",
    grouped(
        unit="pid",
        max_rows=2,
        max_groups=1,
        frame=with_col(PEOPLE, "pid", [None, *list(range(99))]),
    ),
    "pid",
)
add(
    A,
    "group_by(...).agg() with no statistic",
    lambda ctx: (
        dpframe.group_by(PEOPLE, "region", margins=REGIONS, accountant=ctx.acct).agg().collect()
    ),
    "agg",
)
add(A, "group_by(...).agg('count') (a string)", grouped("count"), "agg")
for what, v in [("3", 3), ("''", ""), ("'a b'", "a b"), ("'_dp'", "_dp"), ("'str'", "str")]:
    add(A, f"register_namespace({what})", lambda ctx, v=v: dpframe.register_namespace(v), "name")
add(
    A,
    "register_namespace('dpf', force='yes')",
    lambda ctx: dpframe.register_namespace("dpf", force="yes"),
    "force",
)
add(A, "pending_releases(3)", lambda ctx: list(dpframe.pending_releases(3)), "accountant")
for what, v in [("'yes'", "yes"), ("0", 0), ("1.5", 1.5), ("NaN", NAN)]:
    add(
        A,
        f".dp.pram(estimable={what})",
        lambda ctx, v=v: pl.col("tenure").dp.pram(
            1.0, categories=["own", "rent", "other"], accountant=ctx.acct, estimable=v
        ),
        "estimable",
    )
for what, kwargs, name in [
    ("design='best'", {"design": "best"}, "design"),
    ("design=None", {"design": None}, "design"),
    (
        "design='global', matrix=...",
        {"design": "global", "matrix": [[0.75, 0.25], [0.25, 0.75]]},
        "matrix",
    ),
    (
        "design='global', diagonal='dominant'",
        {"design": "global", "diagonal": "dominant"},
        "diagonal",
    ),
    ("design='global', prior='dp'", {"design": "global", "prior": "dp"}, "estimable"),
    ("design='global' (not invertible)", {"design": "global"}, "estimable"),
    ("design='variance', prior='dp'", {"design": "variance", "prior": "dp"}, "dp_prior"),
]:
    add(
        A,
        f".dp.pram({what})",
        lambda ctx, kw=kwargs: pl.col("tenure").dp.pram(
            **({"epsilon": 0.1} if "matrix" not in kw else {}),
            categories=["own", "rent", "other", "free"] if "matrix" not in kw else ["own", "rent"],
            accountant=ctx.acct,
            **kw,
        ),
        name,
    )
add(A, "dpframe.check(3)", lambda ctx: dpframe.check(3), "release")


def _collected_mean(ctx):
    """Setup: a collected grouped release (its charge is the setup's, not the case's)."""
    with ctx.acct:
        release = dpframe.group_by(PEOPLE, "region", margins=REGIONS).agg(
            dpframe.agg.mean("income", lower=0, upper=50, epsilon=0.5)
        )
    release.collect()
    ctx.data["release"] = release


for what, v in [("0", 0), ("1", 1), ("1.5", 1.5), ("'0.95'", "0.95"), ("NaN", NAN), ("True", True)]:
    add(
        A,
        f"GroupedRelease.accuracy(level={what})",
        lambda ctx, v=v: ctx.data["release"].accuracy(v),
        "level",
        setup=_collected_mean,
    )
add(
    A,
    "GroupedRelease.accuracy() before collect()",
    lambda ctx: (
        dpframe.group_by(PEOPLE, "region", margins=REGIONS, accountant=ctx.acct)
        .agg(dpframe.agg.mean("income", lower=0, upper=50, epsilon=0.5))
        .accuracy()
    ),
    ("collect", "accuracy"),
)


_INCOME = dict(lower=0, upper=50, epsilon=0.5)
for what, v in [
    ("'ignore'", "ignore"),
    ("{} (empty)", {}),
    ("{'income': NaN}", {"income": NAN}),
    ("{'income': inf}", {"income": INF}),
    ("{'income': True}", {"income": True}),
    ("{'income': 'zero'}", {"income": "zero"}),
    ("{'region': 3} (a number for a text key)", {"region": 3}),
    ("{'score': 0} (a column the release does not read)", {"score": 0}),
    ("{1: 0} (not a name)", {1: 0}),
    ("['drop']", ["drop"]),
]:
    add(
        A,
        f"group_by(nulls={what})",
        grouped(lambda: dpframe.agg.sum("income", **_INCOME), nulls=v),
        ("nulls", "fill"),
    )
add(
    A,
    "group_by(nulls='drop', sizes=...) (sizes would be false)",
    grouped(
        lambda: dpframe.agg.mean("income", **_INCOME),
        margins=REGIONS.with_columns(pl.Series("n", [50, 25, 25, 0])),
        sizes="n",
        nulls="drop",
    ),
    ("nulls", "sizes"),
)
add(
    A,
    "group_by(nulls='drop') on +inf income (infinities are never missing)",
    grouped(
        lambda: dpframe.agg.sum("income", **_INCOME),
        frame=income_with([INF]),
        nulls="drop",
    ),
    "income",
)
add(A, "group_by(...).agg(pl.len()) (a polars Expr)", grouped(pl.len()), "agg")
add(
    A,
    "group_by(...).agg(count) under overspend (epsilon 11 > 10)",
    grouped(count(epsilon=11)),
    "epsilon",
)
add(
    A,
    "lf.dp.group_by(...) with the LazyFrame namespace and margins=LazyFrame of 0 rows",
    lambda ctx: (
        PEOPLE.lazy()
        .dp.group_by("region", margins=REGIONS.lazy().head(0), accountant=ctx.acct)
        .agg(dpframe.agg.count(epsilon=0.5))
        .collect()
    ),
    "margins",
)


# -- covariance matrix and proportions ---------------------------------------------------


def covm(columns=("income", "score"), bounds=((0, 100), (0, 10)), frame=None, **kw):
    kw = {"epsilon": 0.5, "n": 100, **kw}

    def fn(ctx):
        f = PEOPLE if frame is None else frame
        return dpframe.covariance_matrix(
            f,
            list(columns) if isinstance(columns, tuple) else columns,
            bounds,
            accountant=ctx.acct,
            **kw,
        ).collect()

    return fn


add(A, "covariance_matrix one column", covm(columns=("income",), bounds=((0, 100),)), "columns")
add(A, "covariance_matrix duplicate columns", covm(columns=("income", "income")), "columns")
add(A, "covariance_matrix columns=[1, 2]", covm(columns=(1, 2)), "columns")
add(
    A,
    "covariance_matrix columns='income' (a string)",
    covm(columns="income"),
    ("columns must", "got str", "a string"),
)
add(A, "covariance_matrix column missing", covm(columns=("income", "nope")), "nope")
add(
    A,
    "covariance_matrix of a column named 'column' (the matrix's row labels)",
    covm(columns=("column", "score"), frame=PEOPLE.rename({"income": "column"})),
    "column",
)
add(A, "covariance_matrix on a String column", covm(columns=("income", "tenure")), "tenure")
add(A, "covariance_matrix bounds count mismatch", covm(bounds=((0, 100),)), "bounds")
add(
    A,
    "covariance_matrix bounds reversed",
    covm(bounds=((100, 0), (0, 10))),
    ("bounds", "lower", "upper"),
)
add(
    A, "covariance_matrix bounds strings", covm(bounds=(("0", "100"), (0, 10))), ("bounds", "lower")
)
add(A, "covariance_matrix bounds NaN", covm(bounds=((NAN, 100), (0, 10))), ("bounds", "lower"))
add(A, "covariance_matrix bounds of 3 numbers", covm(bounds=((0, 50, 100), (0, 10))), "bounds")
add(
    A,
    "covariance_matrix bounds=None",
    covm(bounds=None),
    "bounds",
)
add(A, "covariance_matrix n=99 (not the row count)", covm(n=99), "n")
add(A, "covariance_matrix n=1", covm(n=1), "n")
add(A, "covariance_matrix n='100'", covm(n="100"), "n")
add(A, "covariance_matrix n=100.0 (float)", covm(n=100.0), "n", q=True)
add(A, "covariance_matrix n=True", covm(n=True), "n")
for what, v in BAD_POS_SHORT:
    add(A, f"covariance_matrix epsilon={what}", covm(epsilon=v), "epsilon")
add(A, "covariance_matrix repair='nearest'", covm(repair="nearest"), "repair")
add(A, "covariance_matrix method='bt'", covm(method="bt"), "method")
add(
    A,
    "covariance_matrix under add_remove",
    covm(),
    ("add_remove", "n", "neighbours"),
    acct="add_remove",
)
add(A, "covariance_matrix under a person unit", covm(), "unit", acct="person")
add(A, "covariance_matrix data with a null", covm(frame=income_with([None])), "income")
add(A, "covariance_matrix data with NaN", covm(frame=income_with([NAN])), "income")
add(A, "covariance_matrix on an empty frame (n=2)", covm(frame=PEOPLE.head(0), n=2), "n")


def props(column="band", frame=None, **kw):
    kw = {"epsilon": 0.5, "n": 100, **kw}

    def fn(ctx):
        f = PEOPLE if frame is None else frame
        return dpframe.proportions(f, column, accountant=ctx.acct, **kw).collect()

    return fn


add(A, "proportions column missing", props(column="nope"), "nope")
add(
    A,
    "proportions of a column named 'proportion' (the released values' column)",
    props(column="proportion", frame=PEOPLE.rename({"band": "proportion"})),
    "proportion",
)
add(A, "proportions column=1", props(column=1), "column")
add(A, "proportions String column without categories", props(column="tenure"), "categories")
add(
    A,
    "proportions categories='abc' (a string)",
    props(column="tenure", categories="abc"),
    "categories",
)
add(
    A,
    "proportions categories with duplicates",
    props(column="tenure", categories=["own", "own", "rent"]),
    "categories",
)
add(
    A,
    "proportions categories=['own'] (one)",
    props(column="tenure", categories=["own"]),
    "categories",
)
add(
    A,
    "proportions categories mixed ['own', 1]",
    props(column="tenure", categories=["own", 1]),
    "categories",
)
add(
    A,
    "proportions data value outside categories",
    props(column="tenure", categories=["own", "rent"]),
    "tenure",
)
add(
    A,
    "proportions int categories on a String column",
    props(column="tenure", categories=[1, 2, 3]),
    "tenure",
)
add(
    A,
    "proportions str categories on an Int column",
    props(column="code", categories=["0", "1", "2"]),
    "code",
)
add(A, "proportions Enum column, categories differing", props(categories=["a", "c"]), "categories")
add(
    A,
    "proportions column with nulls",
    props(
        column="tenure",
        categories=["own", "rent", "other"],
        frame=with_col(PEOPLE, "tenure", [None] + ["own"] * 99),
    ),
    "tenure",
)
add(
    A,
    "proportions on a Float column",
    props(column="income", categories=[10, 20, 30, 40]),
    "income",
)
add(A, "proportions n=99 (not the row count)", props(n=99), "n")
add(A, "proportions n=0", props(n=0), "n")
add(A, "proportions n='100'", props(n="100"), "n")
add(A, "proportions strategy='softmax'", props(strategy="softmax"), "strategy")
add(
    A,
    "proportions universal_histogram with K=3",
    props(column="tenure", categories=["own", "rent", "other"], strategy="universal_histogram"),
    ("strategy", "universal_histogram", "power"),
)
add(A, "proportions method=1", props(method=1), "method")
for what, v in BAD_POS_SHORT:
    add(A, f"proportions epsilon={what}", props(epsilon=v), "epsilon")
add(
    A, "proportions under add_remove", props(), ("add_remove", "n", "neighbours"), acct="add_remove"
)
add(
    A,
    "proportions on a Boolean column",
    props(column="ok", categories=["True", "False"]),
    "ok",
    q=True,
)


# -- runners, I/O and provenance ----------------------------------------------------------


def pram_query(lf=None):
    lf = PEOPLE.lazy() if lf is None else lf
    return lf.select(pl.col("tenure").dp.pram(0.5, categories=["own", "rent", "other"]))


def under(ctx, f):
    if ctx.acct is None:
        return f()
    with ctx.acct:
        return f()


add(A, "dpframe.collect(frame=dict)", lambda ctx: dpframe.collect({"a": [1]}), "frame")
add(
    A,
    "dpframe.collect(public='region') (a string)",
    lambda ctx: under(
        ctx,
        lambda: dpframe.collect(
            PEOPLE.lazy().select(
                "region", pl.col("tenure").dp.pram(0.5, categories=["own", "rent", "other"])
            ),
            public="region",
        ),
    ),
    "public",
)
add(
    A,
    "dpframe.collect(public=['nope'])",
    lambda ctx: under(ctx, lambda: dpframe.collect(pram_query(), public=["nope"])),
    "nope",
)
add(
    A,
    "dpframe.collect with a raw column not public",
    lambda ctx: under(
        ctx,
        lambda: dpframe.collect(
            PEOPLE.lazy().select(
                "region", pl.col("tenure").dp.pram(0.5, categories=["own", "rent", "other"])
            )
        ),
    ),
    "region",
)
add(
    A,
    "dpframe.collect of a query holding no release (raw data)",
    lambda ctx: under(ctx, lambda: dpframe.collect(PEOPLE.lazy().select("region"))),
    "region",
)
add(
    A,
    "dpframe.collect(public=[1, 2])",
    lambda ctx: under(ctx, lambda: dpframe.collect(pram_query(), public=[1, 2])),
    "public",
)
add(
    A,
    "dpframe.collect(bogus=1) (unknown collect kwarg)",
    lambda ctx: under(ctx, lambda: dpframe.collect(pram_query(), bogus=1)),
    "bogus",
)
add(
    A,
    "dpframe.sink_parquet into a missing folder",
    lambda ctx: under(ctx, lambda: dpframe.sink_parquet(pram_query(), "nodir/out.parquet")),
    ("path", "nodir"),
)
add(
    A,
    "dpframe.sink_parquet path is an existing folder",
    lambda ctx: (os.mkdir("d"), under(ctx, lambda: dpframe.sink_parquet(pram_query(), "d")))[1],
    "path",
)
add(
    A,
    "dpframe.sink_parquet path=''",
    lambda ctx: under(ctx, lambda: dpframe.sink_parquet(pram_query(), "")),
    "path",
)
add(
    A,
    "dpframe.sink_parquet path=None",
    lambda ctx: under(ctx, lambda: dpframe.sink_parquet(pram_query(), None)),
    "path",
)
add(
    A,
    "dpframe.sink_parquet compression='zip'",
    lambda ctx: under(
        ctx, lambda: dpframe.sink_parquet(pram_query(), "o.parquet", compression="zip")
    ),
    "compression",
)
add(
    A,
    "dpframe.sink_parquet compression='lzo' (a codec polars does not write)",
    lambda ctx: under(
        ctx, lambda: dpframe.sink_parquet(pram_query(), "o.parquet", compression="lzo")
    ),
    "compression",
)
add(
    A,
    "dpframe.sink_parquet spec={'x': {1, 2}} (not JSON)",
    lambda ctx: under(
        ctx, lambda: dpframe.sink_parquet(pram_query(), "o.parquet", spec={"x": {1, 2}})
    ),
    "spec",
)
add(
    A,
    "dpframe.sink_parquet with nulls in the PRAM column",
    lambda ctx: under(
        ctx,
        lambda: dpframe.sink_parquet(
            pram_query(with_col(PEOPLE, "tenure", [None] + ["own"] * 99).lazy()), "o.parquet"
        ),
    ),
    "tenure",
)
add(
    A,
    "lf.dpf.sink_parquet path in an unwritable folder (as nobody)",
    lambda ctx: as_nobody(
        ctx,
        """
with acct:
    q = pl.LazyFrame({"c": ["a", "b"] * 5}).select(pl.col("c").dp.pram(0.5, categories=["a", "b"]))
    q.dpf.sink_parquet("ro/out.parquet")
""",
        setup="""
import os, polars as pl, dpframe
os.mkdir("ro"); os.chmod("ro", 0o555)
acct = dpframe.Accountant(epsilon=1.0)
""",
    ),
    ("path", "ro", "permission"),
    kind="remote",
)


def released_table(ctx):
    rel = dpframe.group_by(PEOPLE, "region", margins=REGIONS, accountant=ctx.acct).agg(
        dpframe.agg.count(epsilon=0.5)
    )
    return rel.collect(), rel


def setup_release(ctx):
    # a charged release made before the snapshot: spending here is not the case's
    ctx.data["table"], ctx.data["release"] = released_table(ctx)


add(
    A,
    "write_parquet ledger=None",
    lambda ctx: dpframe.write_parquet(ctx.data["table"], "o.parquet", ledger=None),
    "ledger",
    setup=setup_release,
)
add(
    A,
    "write_parquet ledger='acct' (a string)",
    lambda ctx: dpframe.write_parquet(ctx.data["table"], "o.parquet", ledger="acct"),
    "ledger",
    setup=setup_release,
)
add(
    A,
    "write_parquet ledger=[] (no entries)",
    lambda ctx: dpframe.write_parquet(ctx.data["table"], "o.parquet", ledger=[]),
    "ledger",
    setup=setup_release,
)
add(
    A,
    "write_parquet ledger=fresh Accountant (nothing charged)",
    lambda ctx: dpframe.write_parquet(STATS, "o.parquet", ledger=dpframe.Accountant(epsilon=1)),
    "ledger",
)
add(
    A,
    "write_parquet ledger=uncollected release",
    lambda ctx: dpframe.write_parquet(
        STATS,
        "o.parquet",
        ledger=dpframe.group_by(PEOPLE, "region", margins=REGIONS, accountant=ctx.acct).agg(
            dpframe.agg.count(epsilon=0.5)
        ),
    ),
    "ledger",
)
add(
    A,
    "write_parquet frame=dict",
    lambda ctx: dpframe.write_parquet({"a": [1]}, "o.parquet", ledger=ctx.data["release"]),
    "frame",
    setup=setup_release,
)
add(
    A,
    "write_parquet into a missing folder",
    lambda ctx: dpframe.write_parquet(
        ctx.data["table"], "nodir/o.parquet", ledger=ctx.data["release"]
    ),
    ("path", "nodir"),
    setup=setup_release,
)
add(
    A,
    "write_parquet path is a folder",
    lambda ctx: (
        os.mkdir("d"),
        dpframe.write_parquet(ctx.data["table"], "d", ledger=ctx.data["release"]),
    )[1],
    "path",
    setup=setup_release,
)
add(
    A,
    "write_parquet path=123",
    lambda ctx: dpframe.write_parquet(ctx.data["table"], 123, ledger=ctx.data["release"]),
    "path",
    setup=setup_release,
)
add(
    A,
    "write_parquet spec=set (not JSON)",
    lambda ctx: dpframe.write_parquet(
        ctx.data["table"], "o.parquet", ledger=ctx.data["release"], spec={"a": {1}}
    ),
    "spec",
    setup=setup_release,
)
add(
    A,
    "write_parquet compression='zip'",
    lambda ctx: dpframe.write_parquet(
        ctx.data["table"], "o.parquet", ledger=ctx.data["release"], compression="zip"
    ),
    "compression",
    setup=setup_release,
)
add(
    A,
    "write_parquet neighbours='bounded'",
    lambda ctx: dpframe.write_parquet(
        ctx.data["table"],
        "o.parquet",
        ledger=list(ctx.data["release"].ledger),
        neighbours="bounded",
    ),
    "neighbours",
    setup=setup_release,
)
add(
    A,
    "write_parquet facts=set (not JSON)",
    lambda ctx: dpframe.write_parquet(
        ctx.data["table"], "o.parquet", ledger=ctx.data["release"], facts={"x": {1}}
    ),
    "facts",
    setup=setup_release,
)
add(
    A,
    "df.dp.write_parquet path in unwritable folder (as nobody)",
    lambda ctx: as_nobody(
        ctx,
        """
pl.DataFrame({"x": [1.0]}).dp.write_parquet("ro/o.parquet", ledger=acct)
""",
        setup="""
import os, polars as pl, dpframe
os.mkdir("ro"); os.chmod("ro", 0o555)
acct = dpframe.Accountant(epsilon=1.0)
acct.spend(0.5, mechanism="laplace")
""",
    ),
    ("path", "ro", "permission"),
    kind="remote",
)


def write_plain(ctx):
    pl.DataFrame({"a": [1]}).write_parquet(ctx.tmp / "plain.parquet")
    (ctx.tmp / "text.parquet").write_text("not parquet")
    (ctx.tmp / "empty.parquet").write_bytes(b"")
    pl.DataFrame({"a": [1]}).write_parquet(
        ctx.tmp / "notjson.parquet", metadata={"dpframe": "{not json"}
    )
    pl.DataFrame({"a": [1]}).write_parquet(
        ctx.tmp / "noentries.parquet",
        metadata={"dpframe": json.dumps({"format": "dpframe-provenance", "version": 1})},
    )
    pl.DataFrame({"a": [1]}).write_parquet(
        ctx.tmp / "badentries.parquet",
        metadata={
            "dpframe": json.dumps(
                {
                    "format": "dpframe-provenance",
                    "version": 1,
                    "entries": [{"id": 1}],
                    "written": "x",
                    "dpframe_version": "0",
                }
            )
        },
    )
    pl.DataFrame({"a": [1]}).write_parquet(
        ctx.tmp / "list.parquet", metadata={"dpframe": json.dumps([1, 2])}
    )
    os.mkdir(ctx.tmp / "folder")
    os.mkdir(ctx.tmp / "sparkdir")
    (ctx.tmp / "sparkdir" / "_dpframe.json").write_text("{broken")


for fname, label, names in [
    ("missing.parquet", "a missing file", ("missing.parquet",)),
    ("plain.parquet", "a Parquet file with no provenance", ("plain.parquet", "provenance")),
    ("text.parquet", "a text file named .parquet", ("text.parquet",)),
    ("empty.parquet", "an empty file", ("empty.parquet",)),
    ("notjson.parquet", "provenance metadata that is not JSON", ("notjson.parquet", "provenance")),
    ("noentries.parquet", "provenance with no 'entries'", ("noentries.parquet", "entries")),
    ("badentries.parquet", "provenance with malformed entries", ("badentries.parquet", "entries")),
    ("list.parquet", "provenance metadata that is a JSON list", ("list.parquet", "provenance")),
    ("folder", "a folder with no _dpframe.json", ("folder",)),
    ("sparkdir", "a folder with a broken _dpframe.json", ("sparkdir", "_dpframe.json")),
]:
    add(
        A,
        f"read_provenance on {label}",
        (lambda f: lambda ctx: dpframe.read_provenance(f))(fname),
        names,
        setup=write_plain,
        acct=None,
    )
add(
    A,
    "read_parquet on a Parquet file with no provenance",
    lambda ctx: dpframe.read_parquet("plain.parquet"),
    ("plain.parquet", "provenance"),
    setup=write_plain,
    acct=None,
)
add(A, "read_provenance(None)", lambda ctx: dpframe.read_provenance(None), "path", acct=None)
add(A, "read_provenance(123)", lambda ctx: dpframe.read_provenance(123), "path", acct=None)


def copy_setup(ctx):
    """A released file (its own accountant: nothing the case spends) and copies of it
    other tools might have written, good and bad, for dpframe.copy_provenance."""
    t = ctx.tmp
    acct = dpframe.Accountant(epsilon=2.0)
    acct.spend(0.5, mechanism="laplace", columns=["m"])
    dpframe.write_parquet(STATS, t / "release.parquet", ledger=acct)
    STATS.write_parquet(t / "copy.parquet")  # what another tool wrote: no provenance
    STATS.with_columns(income=pl.lit(52_000.0)).write_parquet(t / "raw.parquet")
    STATS.head(2).write_parquet(t / "filtered.parquet")
    STATS.with_columns(pl.col("m") + 1).write_parquet(t / "changed.parquet")
    other = dpframe.Accountant(epsilon=2.0)
    other.spend(0.25, mechanism="laplace", columns=["m"])
    dpframe.write_parquet(STATS, t / "other.parquet", ledger=other)
    (t / "text.parquet").write_text("not parquet at all, just text")
    os.mkdir(t / "adir")
    os.link(t / "release.parquet", t / "hard.parquet")
    os.symlink("release.parquet", t / "sym.parquet")


for label, src, dst, kw, names in [
    ("source=None", None, "copy.parquet", {}, ("source",)),
    ("destination=123", "release.parquet", 123, {}, ("destination",)),
    ("a missing source", "missing.parquet", "copy.parquet", {}, ("source", "missing.parquet")),
    ("a source with no provenance", "copy.parquet", "raw.parquet", {}, ("source",)),
    ("a source that is a text file", "text.parquet", "copy.parquet", {}, ("source",)),
    ("a source that is a folder", "adir", "copy.parquet", {}, ("source", "adir")),
    ("a missing destination", "release.parquet", "missing.parquet", {}, ("destination",)),
    ("a destination that is a text file", "release.parquet", "text.parquet", {}, ("destination",)),
    ("a destination that is a folder", "release.parquet", "adir", {}, ("destination", "adir")),
    ("destination = source", "release.parquet", "release.parquet", {}, ("destination",)),
    ("a destination linked to source", "release.parquet", "sym.parquet", {}, ("destination",)),
    (
        "a destination hard-linked to source",
        "release.parquet",
        "hard.parquet",
        {},
        ("destination",),
    ),
    ("a destination with a raw column", "release.parquet", "raw.parquet", {}, ("income",)),
    ("a filtered destination", "release.parquet", "filtered.parquet", {}, ("destination",)),
    ("a destination with other values", "release.parquet", "changed.parquet", {}, ("'m'",)),
    (
        "a destination with another release's provenance",
        "release.parquet",
        "other.parquet",
        {},
        ("overwrite",),
    ),
    ("overwrite='yes'", "release.parquet", "copy.parquet", {"overwrite": "yes"}, ("overwrite",)),
]:
    add(
        A,
        f"copy_provenance on {label}",
        (lambda s, d, k: lambda ctx: dpframe.copy_provenance(s, d, **k))(src, dst, kw),
        names,
        setup=copy_setup,
        acct=None,
    )
add(A, "ledger_frame(123)", lambda ctx: dpframe.ledger_frame(123), "ledger", acct=None)
add(
    A,
    "ledger_frame('ledger.db') (a path, not an accountant)",
    lambda ctx: dpframe.ledger_frame("ledger.db"),
    "ledger",
    acct=None,
)
add(
    A,
    "summarize(123)",
    lambda ctx: dpframe.summarize(123),
    ("release", "summarize"),
    acct=None,
    q=True,
)


# -- DR-HA, choose_epsilon, synthesis -------------------------------------------------------

DRHA_DF = pl.DataFrame(
    {
        "race": ["w"] * 4 + ["b"] * 4,
        "age": ["50+"] * 4 + ["<40"] * 4,
        "cond": ["d"] * 4 + ["h", "h", "c", "c"],
    }
)
LEVELS = ["d", "h", "c"]


def drha(**kw):
    args = {
        "qids": ["race", "age"],
        "sensitive": "cond",
        "epsilon": [0.5, 1.0],
        "levels": LEVELS,
        **kw,
    }
    return lambda ctx: DRHA_DF.dp.drha(**args)


add(A, "df.dp.drha qids=['nope']", drha(qids=["nope"]), "nope", acct=None)
add(A, "df.dp.drha sensitive='nope'", drha(sensitive="nope"), "nope", acct=None)
add(
    A,
    "df.dp.drha sensitive is a qid too",
    drha(sensitive="race", levels=["w", "b"]),
    ("race", "sensitive"),
    acct=None,
)
add(A, "df.dp.drha qids=[]", drha(qids=[]), "qids", acct=None)
for what, v in [("0", 0), ("-1", -1), ("NaN", NAN), ("[]", []), ("inf", INF)]:
    add(A, f"df.dp.drha epsilon={what}", drha(epsilon=v), "epsilon", acct=None)
add(
    A,
    "df.dp.drha epsilon=str '1'",
    drha(epsilon="1"),
    "epsilon",
    acct=None,
)
add(
    A,
    "df.dp.drha levels missing a value in data",
    drha(levels=["d", "h"]),
    ("levels", "cond"),
    acct=None,
)
add(A, "df.dp.drha levels=None on a String column", drha(levels=None), "levels", acct=None)
add(A, "df.dp.drha levels duplicates", drha(levels=["d", "d", "h", "c"]), "levels", acct=None)
add(A, "df.dp.drha mechanism='laplacian'", drha(mechanism="laplacian"), "mechanism", acct=None)
add(A, "df.dp.drha measure='global'", drha(measure="global"), "measure", acct=None)
add(
    A,
    "df.dp.drha gaussian with epsilon 2 (>= 1)",
    drha(mechanism="gaussian", epsilon=2.0, delta=1e-5),
    "epsilon",
    acct=None,
)
add(
    A,
    "df.dp.drha gaussian_pdp delta=2",
    drha(mechanism="gaussian_pdp", delta=2.0),
    "delta",
    acct=None,
)
add(
    A,
    "df.dp.drha gaussian_pdp delta=None",
    drha(mechanism="gaussian_pdp", delta=None),
    "delta",
    acct=None,
)
add(A, "df.dp.drha rho= with laplace", drha(rho=0.1, epsilon=None), "rho", acct=None)
add(
    A,
    "df.dp.drha discrete_gaussian rho=0",
    drha(mechanism="discrete_gaussian", rho=0, epsilon=None),
    "rho",
    acct=None,
)
add(
    A,
    "df.dp.drha count column with negative counts",
    lambda ctx: DRHA_DF.with_columns(pl.lit(-1).alias("n")).dp.drha(
        qids=["race", "age"], sensitive="cond", epsilon=1.0, levels=LEVELS, count="n"
    ),
    ("n", "count"),
    acct=None,
)
add(
    A,
    "df.dp.drha count column of floats 1.5",
    lambda ctx: DRHA_DF.with_columns(pl.lit(1.5).alias("n")).dp.drha(
        qids=["race", "age"], sensitive="cond", epsilon=1.0, levels=LEVELS, count="n"
    ),
    ("n", "count"),
    acct=None,
)
add(A, "df.dp.drha count='nope'", drha(count="nope"), "nope", acct=None)
add(A, "df.dp.drha sensitivity=0", drha(sensitivity=0), "sensitivity", acct=None)
add(A, "df.dp.drha neighbours='bounded'", drha(neighbours="bounded"), "neighbours", acct=None)
add(A, "df.dp.drha scenario8='liberal'", drha(scenario8="liberal"), "scenario8", acct=None)
add(A, "df.dp.drha method='approx'", drha(method="approx"), "method", acct=None)
add(
    A,
    "df.dp.drha sensitive column with nulls",
    lambda ctx: with_col(DRHA_DF, "cond", [None] + ["d"] * 7).dp.drha(
        qids=["race", "age"], sensitive="cond", epsilon=1.0, levels=LEVELS
    ),
    "cond",
    acct=None,
)
add(A, "df.dp.drha weighted='yes'", drha(weighted="yes"), "weighted", acct=None)
add(
    A,
    "pl.col().dp.drha epsilon=-1 in group_by",
    lambda ctx: DRHA_DF.group_by("race").agg(pl.col("cond").dp.drha(epsilon=-1.0, levels=LEVELS)),
    "epsilon",
    acct=None,
)
add(
    A,
    "pl.col().dp.drha levels=None on String",
    lambda ctx: DRHA_DF.group_by("race").agg(pl.col("cond").dp.drha(epsilon=1.0)),
    "levels",
    acct=None,
)
add(
    A,
    "pl.col().dp.drha measure='shrinkage' without alpha",
    lambda ctx: DRHA_DF.group_by("race").agg(
        pl.col("cond").dp.drha(epsilon=1.0, levels=LEVELS, measure="shrinkage")
    ),
    "alpha",
    acct=None,
)


_DEFAULT = object()


def choose(counts=_DEFAULT, target=0.4, **kw):
    def fn(ctx):
        from dpframe.risk import choose_epsilon

        c = np.array([[4, 0], [0, 2], [7, 0], [1, 0]]) if counts is _DEFAULT else counts
        return choose_epsilon(c, target, **kw)

    return fn


for what, v in [("-0.1", -0.1), ("1.5", 1.5), ("NaN", NAN), ("str '0.4'", "0.4"), ("None", None)]:
    add(
        A,
        f"choose_epsilon target_risk={what}",
        choose(target=v),
        ("target_risk", "target"),
        acct=None,
    )
add(
    A,
    "choose_epsilon target_risk=0 (unreachable)",
    choose(target=0.0),
    ("target", "risk"),
    acct=None,
)
add(
    A,
    "choose_epsilon counts negative",
    choose(counts=np.array([[4, -1], [0, 2]])),
    "counts",
    acct=None,
)
add(A, "choose_epsilon counts 1-D", choose(counts=np.array([4, 0, 2])), "counts", acct=None)
add(A, "choose_epsilon counts empty", choose(counts=np.zeros((0, 2))), "counts", acct=None)
add(
    A,
    "choose_epsilon counts with NaN",
    choose(counts=np.array([[4.0, NAN], [0, 2]])),
    "counts",
    acct=None,
)
add(
    A,
    "choose_epsilon counts non-integer 1.5",
    choose(counts=np.array([[1.5, 0], [0, 2]])),
    "counts",
    acct=None,
)
add(
    A,
    "choose_epsilon counts=None and no table",
    choose(counts=None),
    ("counts", "table"),
    acct=None,
    q=True,
)
add(A, "choose_epsilon counts=[[]]", choose(counts=[[]]), "counts", acct=None)
add(A, "choose_epsilon counts=strings", choose(counts=[["a", "b"]]), "counts", acct=None)
add(A, "choose_epsilon mechanism='lap'", choose(mechanism="lap"), "mechanism", acct=None)
add(A, "choose_epsilon measure='bogus'", choose(measure="bogus"), "measure", acct=None)
add(A, "choose_epsilon epsilons grid with 0", choose(epsilons=[0.0, 1.0]), "epsilons", acct=None)
add(A, "choose_epsilon epsilons grid with -1", choose(epsilons=[-1.0, 1.0]), "epsilons", acct=None)
add(A, "choose_epsilon epsilons=[] (empty grid)", choose(epsilons=[]), "epsilons", acct=None)
add(A, "choose_epsilon max_tvd without table", choose(max_tvd=0.2), ("table", "max_tvd"), acct=None)
add(
    A,
    "choose_epsilon tvd_reps=0 with a table",
    lambda ctx: __import__("dpframe.risk", fromlist=["x"]).choose_epsilon(
        None,
        0.4,
        table=pl.DataFrame({"q": ["a", "b"], "y": ["x", "y"], "count": [3, 4]}),
        levels=["x", "y"],
        max_tvd=0.2,
        tvd_reps=0,
    ),
    "tvd_reps",
    acct=None,
)
add(A, "choose_epsilon sensitivity=-1", choose(sensitivity=-1), "sensitivity", acct=None)
add(
    A,
    "choose_epsilon gaussian delta=None",
    choose(mechanism="gaussian", delta=None),
    "delta",
    acct=None,
)
add(
    A,
    "choose_rho target_risk=2",
    lambda ctx: dpframe.risk.choose_rho(np.array([[4, 0], [0, 2]]), 2.0),
    ("target_risk", "target"),
    acct=None,
)


def synth(m=3, epsilon=1.0, make=None, exact=(0.25, 0.25, 0.25, 0.25)):
    def fn(ctx):
        from dpframe.mechanisms.proportions import plan_proportions
        from dpframe.mechanisms.synthesis import multiple_synthesis

        mk = make or (lambda e: plan_proportions(4, 400, e, method="bit"))
        return multiple_synthesis(mk, list(exact), m=m, epsilon=epsilon)

    return fn


for what, v in [("0", 0), ("-2", -2), ("1.5", 1.5), ("str '5'", "5"), ("True", True)]:
    add(A, f"multiple_synthesis m={what}", synth(m=v), "m", acct=None)
for what, v in [("0", 0), ("NaN", NAN), ("str '1'", "1")]:
    add(A, f"multiple_synthesis epsilon={what}", synth(epsilon=v), "epsilon", acct=None)
add(
    A,
    "multiple_synthesis make_plan returning None",
    synth(make=lambda e: None),
    "make_plan",
    acct=None,
)
add(A, "multiple_synthesis make_plan=123", synth(make=123), "make_plan", acct=None)
add(A, "multiple_synthesis exact of wrong length", synth(exact=(0.5, 0.5)), "exact", acct=None)
add(A, "multiple_synthesis exact with NaN", synth(exact=(NAN, 0.5, 0.25, 0.25)), "exact", acct=None)


def combine(est, within=None, level=0.95):
    def fn(ctx):
        from dpframe.mechanisms.synthesis import combine_synthesis

        return combine_synthesis(est, within, level=level)

    return fn


GOOD_EST = np.array([[0.2, 0.8], [0.25, 0.75], [0.3, 0.7]])
add(
    A,
    "combine_synthesis one estimate (m=1)",
    combine(np.array([[0.2, 0.8]])),
    ("estimates", "m"),
    acct=None,
)
add(A, "combine_synthesis empty estimates", combine(np.zeros((0, 2))), "estimates", acct=None)
add(
    A,
    "combine_synthesis estimates with NaN",
    combine(np.array([[NAN, 0.8], [0.2, 0.8]])),
    "estimates",
    acct=None,
)
add(
    A,
    "combine_synthesis within_variances negative",
    combine(GOOD_EST, -np.ones((3, 2))),
    "within",
    acct=None,
)
add(
    A,
    "combine_synthesis within_variances wrong shape",
    combine(GOOD_EST, np.ones((2, 2))),
    "within",
    acct=None,
)
for what, v in [("0", 0.0), ("1", 1.0), ("1.5", 1.5), ("str '0.95'", "0.95")]:
    add(A, f"combine_synthesis level={what}", combine(GOOD_EST, level=v), "level", acct=None)
add(
    A,
    "combine_synthesis estimates='abc'",
    combine("abc"),
    "estimates",
    acct=None,
)

# .dpf alias: a couple of the same inputs through the unambiguous namespace
add(
    A,
    ".dpf.laplace epsilon=-1 (alias namespace)",
    lambda ctx: column_release(
        ctx, lambda: pl.col("m").dpf.laplace(epsilon=-1, sensitivity=0.1, composition="parallel")
    ),
    "epsilon",
)
add(
    A,
    "lf.dpf.group_by margins=None (alias namespace)",
    lambda ctx: (
        PEOPLE.lazy()
        .dpf.group_by("region", margins=None, accountant=ctx.acct)
        .agg(dpframe.agg.count(epsilon=0.5))
        .collect()
    ),
    "margins",
)
add(
    A,
    "df.dpf.proportions column='nope' (alias namespace)",
    lambda ctx: PEOPLE.dpf.proportions("nope", epsilon=0.5, n=100, accountant=ctx.acct).collect(),
    "nope",
)
add(
    A,
    "df.dpf.covariance_matrix bounds=[] (alias namespace)",
    lambda ctx: PEOPLE.dpf.covariance_matrix(
        ["income", "score"], [], epsilon=0.5, n=100, accountant=ctx.acct
    ).collect(),
    "bounds",
)

# =======================================================================================
# 2. Accountant / Accountant.open
# =======================================================================================


def acct_new(**kw):
    return lambda ctx: dpframe.Accountant(**kw)


for what, v in BAD_POSITIVE:
    add(ACC, f"Accountant(epsilon={what})", acct_new(epsilon=v), "epsilon", acct=None)
add(ACC, "Accountant() with no budget", acct_new(), ("epsilon", "budget"), acct=None)
add(
    ACC,
    "Accountant(epsilon=1e309 -> inf literal)",
    acct_new(epsilon=float("1e309")),
    "epsilon",
    acct=None,
)
for what, v in [
    ("-0.1", -0.1),
    ("1", 1.0),
    ("1.5", 1.5),
    ("NaN", NAN),
    ("str '0'", "0"),
    ("bool True", True),
    ("None", None),
]:
    add(
        ACC,
        f"Accountant(epsilon=1, delta={what})",
        acct_new(epsilon=1.0, delta=v),
        "delta",
        acct=None,
    )
for what, v in [
    ("'bounded'", "bounded"),
    ("None", None),
    ("'Substitute'", "Substitute"),
    ("1", 1),
    ("['substitute']", ["substitute"]),
]:
    add(
        ACC,
        f"Accountant(neighbours={what})",
        acct_new(epsilon=1.0, neighbours=v),
        "neighbours",
        acct=None,
    )
for what, v in [("0", 0), ("-1", -1), ("NaN", NAN), ("str '1'", "1"), ("inf", INF)]:
    add(ACC, f"Accountant(rho={what}, delta=1e-6)", acct_new(rho=v, delta=1e-6), "rho", acct=None)
add(ACC, "Accountant(rho=1) without delta", acct_new(rho=1.0), "delta", acct=None)
add(
    ACC,
    "Accountant(rho=1, epsilon=1, delta=1e-6) (two budgets)",
    acct_new(rho=1.0, epsilon=1.0, delta=1e-6),
    ("rho", "epsilon"),
    acct=None,
)
add(
    ACC,
    "Accountant(accounting='zCDP')",
    acct_new(epsilon=1.0, delta=1e-6, accounting="zCDP"),
    "accounting",
    acct=None,
)
add(
    ACC,
    "Accountant(accounting='renyi')",
    acct_new(epsilon=1.0, delta=1e-6, accounting="renyi"),
    "accounting",
    acct=None,
)
add(
    ACC,
    "Accountant(accounting='zcdp') without epsilon or rho",
    acct_new(delta=1e-6, accounting="zcdp"),
    "epsilon",
    acct=None,
)
add(ACC, "Accountant(unit='')", acct_new(epsilon=1.0, unit=""), "unit", acct=None)
add(ACC, "Accountant(unit=1)", acct_new(epsilon=1.0, unit=1), "unit", acct=None)
add(ACC, "Accountant(unit=['pid'])", acct_new(epsilon=1.0, unit=["pid"]), "unit", acct=None)
for what, v in [("0", 0), ("-1", -1), ("str '2'", "2"), ("1.5", 1.5), ("bool True", True)]:
    add(
        ACC,
        f"Accountant(unit='pid', max_rows={what})",
        acct_new(epsilon=1.0, unit="pid", max_rows=v),
        "max_rows",
        acct=None,
    )
add(
    ACC,
    "Accountant(unit='pid', max_groups=0)",
    acct_new(epsilon=1.0, unit="pid", max_groups=0),
    "max_groups",
    acct=None,
)
add(
    ACC,
    "Accountant(max_rows=3) without unit",
    acct_new(epsilon=1.0, max_rows=3),
    ("max_rows", "unit"),
    acct=None,
)
add(
    ACC,
    "Accountant(unit='record', max_rows=3)",
    acct_new(epsilon=1.0, unit="record", max_rows=3),
    ("max_rows", "unit"),
    acct=None,
)


def spend(*args, **kw):
    kw.setdefault("mechanism", "laplace")
    return lambda ctx: ctx.acct.spend(*args, **kw)


for what, v in [*BAD_POS_SHORT, ("+inf", INF)]:
    add(ACC, f"acct.spend(epsilon={what})", spend(v), "epsilon")
add(ACC, "acct.spend(0.5, delta=0.5) on a delta=0 budget", spend(0.5, 0.5), ("delta", "budget"))
add(ACC, "acct.spend(0.5, delta=1)", spend(0.5, 1.0), "delta")
add(ACC, "acct.spend(0.5, delta=-0.1)", spend(0.5, -0.1), "delta")
add(ACC, "acct.spend(11) over budget 10", spend(11.0), ("epsilon", "budget"))
add(ACC, "acct.spend(0.5, mechanism=None)", spend(0.5, mechanism=None), "mechanism", q=True)
add(ACC, "acct.spend(0.5, mechanism=3)", spend(0.5, mechanism=3), "mechanism", q=True)
add(ACC, "acct.spend(0.5, columns=5)", spend(0.5, columns=5), "columns")
add(ACC, "acct.spend(0.5, scale=-1)", spend(0.5, scale=-1.0), "scale")
add(ACC, "acct.spend(0.5, scale=NaN)", spend(0.5, scale=NAN), "scale")
add(ACC, "acct.spend(0.5, composition='both')", spend(0.5, composition="both"), "composition")
add(
    ACC, "acct.spend(0.5, details={'x': {1}}) (not JSON)", spend(0.5, details={"x": {1}}), "details"
)
add(
    ACC,
    "acct.spend(0.5, details={'reservation': 'fake'}) (accountant-only key)",
    spend(0.5, details={"reservation": "fake"}),
    ("details", "reservation"),
)
add(ACC, "acct.spend(0.5, note=None)", spend(0.5, note=None), "note", q=True)
add(
    ACC,
    "acct.spend(0.5) on a zCDP accountant with delta=0.1",
    spend(0.5, 0.1),
    "delta",
    acct="zcdp",
)
add(
    ACC,
    "acct.spend_all([0.5]) (numbers, not Charges)",
    lambda ctx: ctx.acct.spend_all([0.5]),
    ("charges", "charge"),
)
add(ACC, "acct.spend_all('x')", lambda ctx: ctx.acct.spend_all("x"), ("charges", "charge"))
add(
    ACC,
    "acct.spend_all([Charge(6), Charge(6)]) over budget",
    lambda ctx: ctx.acct.spend_all(
        [dpframe.Charge(6.0, mechanism="a"), dpframe.Charge(6.0, mechanism="b")]
    ),
    ("epsilon", "budget"),
)
add(ACC, "Charge(epsilon=-1)", lambda ctx: dpframe.Charge(-1.0), "epsilon", acct=None)
add(
    ACC,
    "Charge(epsilon=0.5, rho=0.1) (two costs)",
    lambda ctx: dpframe.Charge(0.5, rho=0.1),
    ("rho", "epsilon"),
    acct=None,
)
add(
    ACC,
    "acct.spend(0.5) on a person-unit accountant (record charge)",
    spend(0.5),
    "unit",
    acct="person",
)


def reserve(plan):
    def fn(ctx):
        with ctx.acct.reserve(plan):
            pass

    return fn


add(ACC, "acct.reserve('1') (a string)", reserve("1"), "plan")
add(ACC, "acct.reserve(-1)", reserve(-1), "plan")
add(ACC, "acct.reserve(0.5) (a bare number)", reserve(0.5), "plan", q=True)
add(ACC, "acct.reserve(None)", reserve(None), "plan")
add(
    ACC,
    "acct.reserve(Budget(11)) over budget",
    reserve(dpframe.Budget(11.0)),
    ("epsilon", "budget"),
)
add(ACC, "acct.reserve(Budget(NaN))", reserve(dpframe.Budget(NAN)), ("epsilon", "plan"))
add(ACC, "acct.reserve(Budget(-1))", reserve(dpframe.Budget(-1.0)), ("epsilon", "plan"))
add(ACC, "acct.reserve(Budget('1'))", reserve(dpframe.Budget("1")), ("epsilon", "plan"))


def nested(ctx):
    with ctx.acct.reserve(dpframe.Budget(1.0)), ctx.acct.reserve(dpframe.Budget(1.0)):
        pass


add(ACC, "acct.reserve nested twice", nested, "plan")


def overdraw(ctx):
    with ctx.acct.reserve(dpframe.Budget(1.0)):
        ctx.acct.spend(2.0, mechanism="laplace")


add(ACC, "spend 2 inside a reservation of 1", overdraw, ("reservation", "epsilon", "budget"))
add(ACC, "acct.cancel('nope')", lambda ctx: ctx.acct.cancel("nope"), ("reservation", "nope"))
add(ACC, "acct.cancel(None)", lambda ctx: ctx.acct.cancel(None), "reservation")


# -- Accountant.open on odd paths --------------------------------------------------------


def op(path, **kw):
    kw.setdefault("epsilon", 1.0)
    return lambda ctx: dpframe.Accountant.open(path, **kw)


def files_setup(ctx):
    t = ctx.tmp
    os.mkdir(t / "adir")
    (t / "garbage.db").write_text("this is not a ledger")
    (t / "empty.db").write_bytes(b"")
    (t / "old.json").write_text("{not json")
    (t / "list.json").write_text("[1, 2, 3]")
    (t / "entries.json").write_text(
        json.dumps(
            {"epsilon": 1.0, "delta": 0.0, "neighbours": "substitute", "entries": [{"epsilon": -1}]}
        )
    )
    pl.DataFrame({"a": [1]}).write_parquet(t / "table.parquet")
    import sqlite3

    con = sqlite3.connect(t / "other.sqlite")
    con.execute("CREATE TABLE foo (x INTEGER)")
    con.commit()
    con.close()
    good = t / "ledger.db"
    a = dpframe.Accountant.open(good, epsilon=2.0)
    a.spend(0.5, mechanism="laplace")
    ctx.ledgers.append(good)
    data = good.read_bytes()
    (t / "truncated.db").write_bytes(data[:200])
    os.symlink(t / "nowhere" / "x.db", t / "dangling.db")


add(
    ACC,
    "Accountant.open(a directory)",
    op("adir"),
    ("adir", "path", "folder"),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(path in a missing folder)",
    op("nodir/ledger.db"),
    ("nodir", "path", "folder"),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(a text file that is not a ledger)",
    op("garbage.db", epsilon=None),
    ("garbage.db",),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(an empty file)",
    op("empty.db", epsilon=None),
    ("empty.db",),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(an empty file, epsilon=1)",
    op("empty.db"),
    ("empty.db",),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(a .json file that is not JSON)",
    op("old.json", epsilon=None),
    ("old.json",),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(a .json file holding a list)",
    op("list.json", epsilon=None),
    ("list.json",),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(a JSON ledger with a negative entry)",
    op("entries.json", epsilon=None),
    ("entries.json", "epsilon"),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(a Parquet file)",
    op("table.parquet", epsilon=None),
    ("table.parquet",),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(a SQLite db of another app)",
    op("other.sqlite", epsilon=None),
    ("other.sqlite",),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(a truncated ledger)",
    op("truncated.db", epsilon=None),
    ("truncated.db",),
    setup=files_setup,
    acct=None,
)


def hardlink_setup(ctx):
    a = dpframe.Accountant.open(ctx.tmp / "ledger.db", epsilon=2.0)
    a.spend(0.5, mechanism="laplace")
    os.link(ctx.tmp / "ledger.db", ctx.tmp / "hardlink.db")


add(
    ACC,
    "Accountant.open(a hard-linked ledger)",
    op("hardlink.db", epsilon=None),
    ("hardlink.db", "link"),
    setup=hardlink_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(a dangling symlink)",
    op("dangling.db"),
    ("dangling.db", "nowhere", "path"),
    setup=files_setup,
    acct=None,
)
add(
    ACC, "Accountant.open(new ledger, no epsilon)", op("new.db", epsilon=None), "epsilon", acct=None
)
add(ACC, "Accountant.open(new ledger named .json)", op("new.json"), ("path", "json"), acct=None)
add(
    ACC, "Accountant.open(new ledger, epsilon=-1)", op("new.db", epsilon=-1.0), "epsilon", acct=None
)
add(
    ACC, "Accountant.open(new ledger, epsilon='1')", op("new.db", epsilon="1"), "epsilon", acct=None
)
add(
    ACC,
    "Accountant.open(new ledger, neighbours='bounded')",
    op("new.db", neighbours="bounded"),
    "neighbours",
    acct=None,
)
add(ACC, "Accountant.open(new ledger, delta=1)", op("new.db", delta=1.0), "delta", acct=None)
add(
    ACC,
    "Accountant.open(new ledger, unit='', max_rows=2)",
    op("new.db", unit="", max_rows=2),
    "unit",
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing, epsilon=3) (mismatch)",
    op("ledger.db", epsilon=3.0),
    "epsilon",
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing, epsilon='2') (str)",
    op("ledger.db", epsilon="2"),
    "epsilon",
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing, epsilon=NaN)",
    op("ledger.db", epsilon=NAN),
    "epsilon",
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing, neighbours='add_remove') (mismatch)",
    op("ledger.db", epsilon=None, neighbours="add_remove"),
    "neighbours",
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing, neighbours='bogus')",
    op("ledger.db", epsilon=None, neighbours="bogus"),
    "neighbours",
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing, delta=0.5) (mismatch)",
    op("ledger.db", epsilon=None, delta=0.5),
    "delta",
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing epsilon ledger, accounting='zcdp')",
    op("ledger.db", epsilon=None, accounting="zcdp"),
    ("accounting", "zcdp"),
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing, unit='pid') (mismatch)",
    op("ledger.db", epsilon=None, unit="pid"),
    "unit",
    setup=files_setup,
    acct=None,
)
add(
    ACC,
    "Accountant.open(existing, max_rows=0)",
    op("ledger.db", epsilon=None, max_rows=0),
    "max_rows",
    setup=files_setup,
    acct=None,
)
add(ACC, "Accountant.open(None)", op(None), "path", acct=None)
add(ACC, "Accountant.open(123)", op(123), "path", acct=None)
add(ACC, "Accountant.open('')", op(""), "path", acct=None)
add(ACC, "Accountant.open(path with a NUL byte)", op("a\x00b.db"), "path", acct=None)
add(ACC, "Accountant.open(b'ledger.db') (bytes)", op(b"ledger.db"), "path", acct=None, q=True)
add(
    ACC,
    "Accountant.open('postgresql://nobody@127.0.0.1:1/x') (unreachable)",
    op("postgresql://nobody@127.0.0.1:1/x"),
    ("postgres", "127.0.0.1", "ledger"),
    acct=None,
    timeout=60,
)
add(
    ACC,
    "Accountant.open(new ledger in unwritable folder, as nobody)",
    lambda ctx: as_nobody(
        ctx,
        """
dpframe.Accountant.open("ro/ledger.db", epsilon=1.0)
""",
        setup="""
import os, dpframe
os.mkdir("ro"); os.chmod("ro", 0o555)
""",
    ),
    ("ro", "path", "permission", "ledger"),
    kind="remote",
    acct=None,
)
add(
    ACC,
    "Accountant.open(read-only existing ledger, spend, as nobody)",
    lambda ctx: as_nobody(
        ctx,
        """
acct = dpframe.Accountant.open("l.db")
acct.spend(0.1, mechanism="laplace")
""",
        setup="""
import os, dpframe
acct = dpframe.Accountant.open("l.db", epsilon=1.0)
os.chmod("l.db", 0o444)
""",
    ),
    ("l.db", "read", "permission", "ledger"),
    kind="remote",
    acct=None,
)
add(
    ACC,
    "Accountant.open(ledger in a read-only folder, spend, as nobody)",
    lambda ctx: as_nobody(
        ctx,
        """
acct = dpframe.Accountant.open("d/l.db")
acct.spend(0.1, mechanism="laplace")
""",
        setup="""
import os, dpframe
os.mkdir("d")
acct = dpframe.Accountant.open("d/l.db", epsilon=1.0)
os.chmod("d", 0o555)
""",
    ),
    ("l.db", "read", "permission", "ledger", "d/"),
    kind="remote",
    acct=None,
    q=True,
)
add(
    ACC,
    "Accountant.open(ledger whose folder is unreadable, as nobody)",
    lambda ctx: as_nobody(
        ctx,
        """
dpframe.Accountant.open("d/l.db")
""",
        setup="""
import os, dpframe
os.mkdir("d")
dpframe.Accountant.open("d/l.db", epsilon=1.0)
os.chmod("d", 0o000)
""",
    ),
    ("l.db", "permission", "path", "ledger"),
    kind="remote",
    acct=None,
)


def _open_then(action):
    def setup(ctx):
        ctx.data["acct"] = dpframe.Accountant.open(ctx.tmp / "l.db", epsilon=1.0)
        action(ctx.tmp / "l.db")

    return setup


def _spend_on_opened(ctx):
    ctx.data["spent_before"] = 0.0
    return ctx.data["acct"].spend(0.1, mechanism="laplace")


add(
    ACC,
    "spend on an accountant whose ledger file was deleted",
    _spend_on_opened,
    ("l.db", "ledger", "deleted"),
    acct=None,
    setup=_open_then(os.remove),
)
add(
    ACC,
    "spend on an accountant whose ledger was replaced by garbage",
    _spend_on_opened,
    ("l.db", "ledger"),
    acct=None,
    setup=_open_then(lambda p: (os.remove(p), p.write_text("garbage"))),
)
add(
    ACC,
    "spend on an accountant whose ledger was replaced by a fresh ledger",
    _spend_on_opened,
    ("l.db", "ledger"),
    acct=None,
    setup=_open_then(lambda p: (os.remove(p), dpframe.Accountant.open(p, epsilon=1.0))),
)


# =======================================================================================
# 3. PRAM
# =======================================================================================

TENURE = ["own", "rent", "other"]


def pram(col="tenure", frame=None, runner="collect", public=None, **kw):
    """Build .dp.pram under ctx.acct, run it with a dpframe runner."""
    kw.setdefault("categories", TENURE)
    if "epsilon" not in kw and kw.get("matrix") is None:
        kw["epsilon"] = 0.5

    def fn(ctx):
        f = (PEOPLE if frame is None else frame).lazy()
        with ctx.acct if ctx.acct is not None else _Null():
            e = pl.col(col).dp.pram(**kw)
        q = f.select(e)
        if runner == "collect":
            with ctx.acct if ctx.acct is not None else _Null():
                return dpframe.collect(q, public=public)
        if runner == "plain":
            return q.collect()
        if runner == "sink":
            return dpframe.sink_parquet(q, "out.parquet", public=public)
        if runner == "eager":
            return (PEOPLE if frame is None else frame).dpf.select(e, public=public)
        raise AssertionError(runner)

    return fn


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


for what, v in [
    ("str 'abc'", "abc"),
    ("bytes b'ab'", b"ab"),
    ("['own'] (one)", ["own"]),
    ("duplicates", ["own", "own", "rent", "other"]),
    ("mixed ['own', 1]", ["own", 1]),
    ("floats", [1.5, 2.5]),
    ("[None, 'own']", [None, "own"]),
    ("[] (empty)", []),
    ("a set", {"own", "rent", "other"}),
    ("a dict", {"own": 1, "rent": 2}),
    ("bools [True, False]", [True, False]),
    ("int 3", 3),
]:
    add(P, f".dp.pram categories={what}", pram(categories=v), "categories")
add(P, ".dp.pram categories missing on a String column", pram(categories=None), "categories")
add(P, ".dp.pram data value outside the categories", pram(categories=["own", "rent"]), "tenure")
add(
    P,
    ".dp.pram nulls in the data",
    pram(frame=with_col(PEOPLE, "tenure", [None] + ["own"] * 99)),
    "tenure",
)
add(
    P,
    ".dp.pram empty-string value not in categories",
    pram(frame=with_col(PEOPLE, "tenure", [""] + ["own"] * 99)),
    "tenure",
)
add(P, ".dp.pram int categories on a String column", pram(categories=[0, 1, 2]), "tenure")
add(
    P,
    ".dp.pram str categories on an Int column",
    pram(col="code", categories=["0", "1", "2"]),
    "code",
)
add(
    P,
    ".dp.pram int category 300 on an Int8 column",
    pram(
        col="code",
        categories=[0, 1, 2, 300],
        frame=PEOPLE.with_columns(pl.col("code").cast(pl.Int8)),
    ),
    "code",
)
add(
    P,
    ".dp.pram Enum column with other categories",
    pram(col="band", categories=["a", "z"]),
    ("band", "categories"),
)
add(P, ".dp.pram on a Float column", pram(col="income", categories=[10, 20, 30, 40]), "income")
add(P, ".dp.pram on a Boolean column", pram(col="ok", categories=["True", "False"]), "ok")
for what, v in [
    ("0", 0),
    ("-1", -1),
    ("NaN", NAN),
    ("+inf", INF),
    ("str '1'", "1"),
    ("bool True", True),
    ("list [1]", [1]),
]:
    add(P, f".dp.pram epsilon={what}", pram(epsilon=v), "epsilon")
add(P, ".dp.pram epsilon=None and no matrix", pram(epsilon=None), "epsilon")
add(P, ".dp.pram epsilon=11 > budget 10", pram(epsilon=11.0), ("epsilon", "budget"))
add(P, ".dp.pram epsilon=1e-300 (tiny)", pram(epsilon=1e-300), "epsilon", q=True)

M3 = np.array([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.25, 0.25, 0.5]])
for what, m in [
    ("non-square 3x2", np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])),
    ("rows not summing to 1", np.array([[0.6, 0.2, 0.1], [0.2, 0.6, 0.2], [0.25, 0.25, 0.5]])),
    ("negative entry", np.array([[1.2, -0.1, -0.1], [0.2, 0.6, 0.2], [0.25, 0.25, 0.5]])),
    ("with NaN", np.array([[NAN, 0.2, 0.2], [0.2, 0.6, 0.2], [0.25, 0.25, 0.5]])),
    ("identity (infinite epsilon)", np.eye(3)),
    ("size 2 for 3 categories", np.array([[0.6, 0.4], [0.4, 0.6]])),
    ("1-D vector", np.array([0.3, 0.3, 0.4])),
    ("list of strings", [["0.6", "0.4"], ["0.4", "0.6"]]),
    ("a string", "identity"),
]:
    add(P, f".dp.pram matrix={what}", pram(matrix=m), "matrix")
add(
    P,
    ".dp.pram matrix whose epsilon exceeds epsilon=0.5",
    pram(matrix=M3, epsilon=0.5),
    ("matrix", "epsilon"),
)
add(P, ".dp.pram matrix with epsilon=-1", pram(matrix=M3, epsilon=-1), "epsilon")
add(
    P,
    ".dp.pram matrix under a person unit? (accountant person)",
    pram(matrix=M3),
    "unit",
    acct="person",
)
for what, v in [
    ("'dq' (unknown name)", "dq"),
    ("'Uniform' (capitalised)", "Uniform"),
    ("dict with unknown key", {"own": 0.5, "rent": 0.3, "flat": 0.2}),
    ("dict with negative weight", {"own": 0.5, "rent": 0.6, "other": -0.1}),
    ("dict all zero", {"own": 0.0, "rent": 0.0, "other": 0.0}),
    ("dict with NaN weight", {"own": NAN, "rent": 0.5, "other": 0.5}),
    ("dict with str weight", {"own": "0.5", "rent": 0.3, "other": 0.2}),
    ("array of wrong length", [0.5, 0.5]),
    ("array with NaN", [NAN, 0.5, 0.5]),
    ("array negative", [-0.5, 1.0, 0.5]),
    ("array with inf", [INF, 0.5, 0.5]),
    ("None", None),
    ("number 0.5", 0.5),
]:
    add(P, f".dp.pram prior={what}", pram(prior=v), "prior")
add(
    P,
    ".dp.pram prior dict keys differ from categories=",
    pram(prior={"own": 0.5, "rent": 0.5}),
    ("prior", "categories"),
)
for what, v in [
    ("0", 0.0),
    ("1", 1.0),
    ("1.5", 1.5),
    ("-0.1", -0.1),
    ("NaN", NAN),
    ("str '0.1'", "0.1"),
]:
    add(
        P, f".dp.pram prior='dp' prior_share={what}", pram(prior="dp", prior_share=v), "prior_share"
    )
add(P, ".dp.pram diagonal='dominantt'", pram(diagonal="dominantt"), "diagonal")
add(P, ".dp.pram diagonal=None", pram(diagonal=None), "diagonal")
add(P, ".dp.pram seed=-1", pram(seed=-1), "seed")
add(P, ".dp.pram seed='7'", pram(seed="7"), "seed")
add(P, ".dp.pram accountant='x'", pram(accountant="x"), "accountant", acct=None)
add(
    P,
    ".dp.pram under add_remove neighbours",
    pram(),
    ("add_remove", "neighbours", "substitute"),
    acct="add_remove",
)
add(P, ".dp.pram under a person-unit accountant", pram(), "unit", acct="person")
add(P, ".dp.pram without any accountant", pram(), "accountant", acct=None)
add(P, ".dp.pram run by a plain lf.collect()", pram(runner="plain"), ("collect", "runner"))
add(
    P,
    ".dp.pram run by dpframe.sink_parquet with nulls",
    pram(runner="sink", frame=with_col(PEOPLE, "tenure", [None] + ["own"] * 99)),
    "tenure",
)
add(P, "df.dpf.select(.dp.pram, public='region')", pram(runner="eager", public="region"), "public")
add(P, ".dp.pram expr=123", lambda ctx: dpframe.pram.apply(123, 0.5, categories=TENURE), "expr")


def twice(ctx):
    with ctx.acct:
        e = pl.col("tenure").dp.pram(0.5, categories=TENURE)
        return dpframe.collect(PEOPLE.lazy().select(e.alias("a"), e.alias("b")))


add(
    P,
    "the same .dp.pram expression used twice in one query",
    twice,
    ("twice", "once", "same", "release"),
)


def concat_self(ctx):
    with ctx.acct:
        e = pl.col("tenure").dp.pram(0.5, categories=TENURE)
        q = PEOPLE.lazy().select(e)
        return dpframe.collect(pl.concat([q, q]))


add(
    P, ".dp.pram query concatenated with itself", concat_self, ("twice", "once", "release", "place")
)


def derived(ctx):
    with ctx.acct:
        e = pl.col("tenure").dp.pram(0.5, categories=TENURE)
        return dpframe.collect(
            PEOPLE.lazy().select(e).with_columns(pl.col("tenure").str.len_chars().alias("n"))
        )


add(P, "column computed after a release, not public", derived, ("n", "public"))


def map_batches_mix(ctx):
    with ctx.acct:
        e = pl.col("tenure").dp.pram(0.5, categories=TENURE)
        return dpframe.collect(
            PEOPLE.lazy().select(e, pl.col("code").map_batches(lambda s: s * 2)), public=["code"]
        )


add(
    P, ".dp.pram mixed with another map_batches", map_batches_mix, ("map_batches", "python", "step")
)


def two_accts(ctx):
    a1, a2 = dpframe.Accountant(epsilon=1.0), dpframe.Accountant(epsilon=1.0)
    e1 = pl.col("tenure").dp.pram(0.5, categories=TENURE, accountant=a1)
    e2 = pl.col("region").dp.pram(0.5, categories=["N", "S", "E"], accountant=a2)
    out = dpframe.collect(PEOPLE.lazy().select(e1, e2))
    return out, a1.spent, a2.spent


add(P, "one query with releases of two accountants", two_accts, "accountant", acct=None)


def pram_release(columns, frame=None, **kw):
    def fn(ctx):
        f = PEOPLE if frame is None else frame
        rel = dpframe.pram.release(f, columns, accountant=ctx.acct, **kw)
        return rel.write("micro.parquet")

    return fn


COLS = [{"column": "tenure", "epsilon": 0.5, "categories": TENURE}]
add(P, "pram.release columns={} (a dict)", pram_release({"column": "tenure"}), "columns")
add(P, "pram.release columns='tenure' (a string)", pram_release("tenure"), "columns")
add(P, "pram.release columns=[] (empty)", pram_release([]), "columns")
add(
    P,
    "pram.release entry without 'column'",
    pram_release([{"col": "tenure", "epsilon": 0.5}]),
    "column",
)
add(P, "pram.release entry with unknown setting", pram_release([{**COLS[0], "eps": 1}]), "eps")
add(P, "pram.release same column twice", pram_release(COLS * 2), ("columns", "tenure"))
add(P, "pram.release column missing", pram_release([{**COLS[0], "column": "nope"}]), "nope")
add(
    P,
    "pram.release entry without epsilon",
    pram_release([{"column": "tenure", "categories": TENURE}]),
    "epsilon",
)
add(P, "pram.release epsilon='0.5'", pram_release([{**COLS[0], "epsilon": "0.5"}]), "epsilon")
add(
    P,
    "pram.release categories='abc'",
    pram_release([{**COLS[0], "categories": "abc"}]),
    "categories",
)
add(
    P,
    "pram.release value outside categories",
    pram_release([{**COLS[0], "categories": ["own", "rent"]}]),
    "tenure",
)
add(P, "pram.release keep=['nope']", pram_release(COLS, keep=["nope"]), "nope")
add(P, "pram.release max_rows=2 without unit", pram_release(COLS, max_rows=2), ("max_rows", "unit"))
add(P, "pram.release unit='nope' max_rows=2", pram_release(COLS, unit="nope", max_rows=2), "nope")
add(P, "pram.release unit='pid' without max_rows", pram_release(COLS, unit="pid"), "max_rows")
add(
    P,
    "pram.release unit='pid' max_rows=1 (persons have 2 rows)",
    pram_release(COLS, unit="pid", max_rows=1),
    ("max_rows", "pid"),
)
add(P, "pram.release unit='pid' max_rows=0", pram_release(COLS, unit="pid", max_rows=0), "max_rows")
add(
    P,
    "pram.release unit='pid' with null persons",
    pram_release(
        COLS, unit="pid", max_rows=2, frame=with_col(PEOPLE, "pid", [None, *list(range(99))])
    ),
    "pid",
)
add(
    P,
    "pram.release under add_remove",
    pram_release(COLS),
    ("add_remove", "neighbours", "substitute"),
    acct="add_remove",
)
add(
    P,
    "pram.release .write into a missing folder",
    lambda ctx: dpframe.pram.release(PEOPLE, COLS, accountant=ctx.acct).write("nodir/m.parquet"),
    ("path", "nodir"),
)


def _written_once(ctx):
    rel = dpframe.pram.release(PEOPLE, COLS, accountant=ctx.acct)
    rel.write(ctx.tmp / "m1.parquet")
    ctx.data["rel"] = rel


def write_twice(ctx):
    return ctx.data["rel"].write("m2.parquet")


add(
    P,
    "pram.release .write a second time (reuse)",
    write_twice,
    ("release", "written"),
    setup=_written_once,
)


def dp_prior(column="tenure", epsilon=0.2, **kw):
    kw.setdefault("categories", TENURE)
    return lambda ctx: dpframe.pram.dp_prior(PEOPLE, column, epsilon, accountant=ctx.acct, **kw)


add(P, "pram.dp_prior epsilon=0", dp_prior(epsilon=0), "epsilon")
add(P, "pram.dp_prior epsilon='0.2'", dp_prior(epsilon="0.2"), "epsilon")
add(P, "pram.dp_prior column missing", dp_prior(column="nope"), "nope")
add(P, "pram.dp_prior categories=None on a String column", dp_prior(categories=None), "categories")
add(P, "pram.dp_prior value outside categories", dp_prior(categories=["own", "rent"]), "tenure")
add(
    P, "pram.dp_prior under add_remove", dp_prior(), ("add_remove", "neighbours"), acct="add_remove"
)
add(P, "pram.dp_prior under a person unit", dp_prior(), "unit", acct="person")


def design(p, eps, **kw):
    return lambda ctx: dpframe.pram.design(p, eps, **kw)


add(P, "pram.design p with a negative weight", design([0.5, 0.6, -0.1], 1.0), "p", acct=None)
add(P, "pram.design p with NaN", design([0.5, NAN, 0.5], 1.0), "p", acct=None)
add(P, "pram.design p not summing to 1", design([0.5, 0.6, 0.7], 1.0), "p", acct=None, q=True)
add(P, "pram.design p of one category", design([1.0], 1.0), "p", acct=None)
add(P, "pram.design p=[] ", design([], 1.0), "p", acct=None)
add(P, "pram.design p 2-D", design([[0.5, 0.5], [0.5, 0.5]], 1.0), "p", acct=None)
add(P, "pram.design p strings", design(["a", "b"], 1.0), "p", acct=None)
add(P, "pram.design epsilon=0", design([0.5, 0.5], 0), "epsilon", acct=None)
add(P, "pram.design epsilon=NaN", design([0.5, 0.5], NAN), "epsilon", acct=None)
add(P, "pram.design diagonal='x'", design([0.5, 0.5], 1.0, diagonal="x"), "diagonal", acct=None)
add(
    P,
    "pram.krr(1, 1.0)",
    lambda ctx: dpframe.pram.krr(1, 1.0),
    ("n_categories", "categories"),
    acct=None,
)
add(
    P,
    "pram.krr(2.5, 1.0)",
    lambda ctx: dpframe.pram.krr(2.5, 1.0),
    ("n_categories", "categories"),
    acct=None,
)
add(P, "pram.krr(3, -1)", lambda ctx: dpframe.pram.krr(3, -1.0), "epsilon", acct=None)
add(
    P,
    "pram.check_matrix non-square",
    lambda ctx: dpframe.pram.check_matrix(np.ones((2, 3)) / 3),
    "matrix",
    acct=None,
)
add(
    P,
    "pram.check_matrix rows not stochastic",
    lambda ctx: dpframe.pram.check_matrix(np.array([[0.9, 0.3], [0.5, 0.5]])),
    "matrix",
    acct=None,
)
add(
    P,
    "pram.check_matrix negative",
    lambda ctx: dpframe.pram.check_matrix(np.array([[1.5, -0.5], [0.5, 0.5]])),
    "matrix",
    acct=None,
)


def est(released, design_like=None, **kw):
    return lambda ctx: dpframe.pram.estimate(
        released, dpframe.pram.krr(3, 1.0) if design_like is None else design_like, **kw
    )


add(
    P,
    "pram.estimate counts negative",
    est(np.array([10, -1, 5])),
    ("counts", "released"),
    acct=None,
)
add(
    P,
    "pram.estimate counts of wrong length",
    est(np.array([10, 5])),
    ("counts", "released", "design"),
    acct=None,
)
add(P, "pram.estimate counts all zero", est(np.array([0, 0, 0])), ("counts", "released"), acct=None)
add(
    P,
    "pram.estimate counts NaN",
    est(np.array([10.0, NAN, 3.0])),
    ("counts", "released"),
    acct=None,
)
add(
    P,
    "pram.estimate Series with value outside categories",
    est(pl.Series("c", ["own", "flat"]), categories=TENURE),
    "c",
    acct=None,
)
add(
    P,
    "pram.estimate Series without categories",
    est(pl.Series("c", ["own", "rent"])),
    "categories",
    acct=None,
)
add(
    P,
    "pram.estimate Series with nulls",
    est(pl.Series("c", ["own", None]), categories=TENURE),
    "c",
    acct=None,
)
add(
    P,
    "pram.estimate design='krr'",
    est(np.array([10, 5, 5]), "krr"),
    "design",
    acct=None,
)
add(
    P,
    "pram.estimate design dict without q/matrix",
    est(np.array([10, 5, 5]), {"x": 1}),
    "design",
    acct=None,
)
add(
    P,
    "pram.estimate design dict with a forged q",
    est(np.array([10, 5, 5]), {"q": [2.0, 0.5, 0.5], "categories": TENURE}),
    ("design", "q"),
    acct=None,
)
add(
    P,
    "pram.estimate_grouped column missing",
    lambda ctx: dpframe.pram.estimate_grouped(
        PEOPLE, "nope", "region", dpframe.pram.krr(3, 1.0), categories=TENURE
    ),
    "nope",
    acct=None,
)
add(
    P,
    "pram.estimate_grouped without categories",
    lambda ctx: dpframe.pram.estimate_grouped(PEOPLE, "tenure", "region", dpframe.pram.krr(3, 1.0)),
    "categories",
    acct=None,
)
add(
    P,
    "pram.estimate_grouped by=1",
    lambda ctx: dpframe.pram.estimate_grouped(
        PEOPLE, "tenure", 1, dpframe.pram.krr(3, 1.0), categories=TENURE
    ),
    "by",
    acct=None,
)
add(
    P,
    "pram.estimate_grouped frame=dict",
    lambda ctx: dpframe.pram.estimate_grouped(
        {"tenure": ["own"]}, "tenure", "region", dpframe.pram.krr(3, 1.0), categories=TENURE
    ),
    "frame",
    acct=None,
)


# =======================================================================================
# 4. release spec TOML
# =======================================================================================

_DEL = object()


def _walk(d, path):
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    for p in parts[:-1]:
        d = d[p]
    return d, parts[-1]


def setp(*pairs):
    """A mutation setting dotted paths (``_DEL`` deletes)."""

    def mutate(spec):
        for path, value in zip(pairs[::2], pairs[1::2], strict=True):
            d, k = _walk(spec, path)
            if value is _DEL:
                del d[k]
            else:
                d[k] = value

    return mutate


def both(*mutations):
    def mutate(spec):
        for m in mutations:
            m(spec)

    return mutate


def load_and_plan(ctx):
    from dpframe.jobs import load_spec, plan

    return plan(load_spec("spec.toml"))


def load_and_run(ctx):
    from dpframe.jobs import load_spec, run

    return run(load_spec("spec.toml"), progress=False)


def cli_plan(ctx):
    return cli(ctx, "plan", "spec.toml")


def cli_release(ctx):
    return cli(ctx, "release", "spec.toml", "--no-progress", timeout=180)


MODES = {
    "plan": (load_and_plan, "py", False),
    "run": (load_and_run, "py", True),
    "cli-plan": (cli_plan, "cli", False),
    "cli-release": (cli_release, "cli", True),
}


def spec_case(
    label,
    mutate,
    names,
    *,
    kinds=("grouped",),
    data=None,
    mode="plan",
    q=False,
    raw=None,
    extra=None,
    timeout=120,
    xfail=None,
):
    fn, kind, ledger = MODES[mode]
    add(
        S,
        f"[{mode}] {label}",
        fn,
        names,
        acct=None,
        q=q,
        kind=kind,
        timeout=timeout,
        setup=spec_setup(mutate, kinds=kinds, data=data, raw=raw, ledger=ledger, extra=extra),
        xfail=xfail,
    )


def spec_both(label, mutate, names, **kw):
    """The same bad spec through dpframe.jobs in-process and `dpframe plan`."""
    spec_case(label, mutate, names, mode="plan", **kw)
    spec_case(label, mutate, names, mode="cli-plan", **kw)


# budget
for what, v in [
    ("str '10'", "10"),
    ("bool true", True),
    ("list [10]", [10]),
    ("NaN", NAN),
    ("inf", INF),
    ("0", 0),
    ("-1", -1.0),
]:
    (spec_both if what == "str '10'" else spec_case)(
        f"privacy.budget.epsilon = {what}", setp("privacy.budget.epsilon", v), "epsilon"
    )
for what, v in [("str '0'", "0"), ("-0.1", -0.1), ("1", 1.0), ("NaN", NAN), ("true", True)]:
    spec_case(f"privacy.budget.delta = {what}", setp("privacy.budget.delta", v), "delta")
spec_case(
    "privacy.budget with rho and epsilon",
    setp("privacy.budget", {"epsilon": 1.0, "rho": 0.5, "delta": 1e-6}),
    ("rho", "epsilon"),
)
spec_case("privacy.budget rho = 0", setp("privacy.budget", {"rho": 0, "delta": 1e-6}), "rho")
spec_case("privacy.budget rho without delta", setp("privacy.budget", {"rho": 0.5}), "delta")
spec_case(
    "privacy.budget accounting = 'renyi'",
    setp("privacy.budget", {"epsilon": 1.0, "delta": 1e-6, "accounting": "renyi"}),
    "accounting",
)
spec_case("privacy.budget = 10 (a number, not a table)", setp("privacy.budget", 10), "budget")
spec_case("privacy.budget = {} (empty)", setp("privacy.budget", {}), ("budget", "epsilon"))
spec_case("privacy.budget missing", setp("privacy.budget", _DEL), "budget")
# privacy
spec_both("privacy.neighbours = 'bounded'", setp("privacy.neighbours", "bounded"), "neighbours")
spec_case("privacy.neighbours = 1", setp("privacy.neighbours", 1), "neighbours")
spec_case("privacy.unit = ''", setp("privacy.unit", ""), "unit")
spec_case("privacy.unit = 1", setp("privacy.unit", 1), "unit")
spec_case(
    "privacy.unit = 'nope' (not a column), max_rows = 2",
    setp("privacy.unit", "nope", "privacy.max_rows", 2, "privacy.max_groups", 1),
    "nope",
)
spec_case(
    "privacy.unit = 'region' (a key column)",
    setp("privacy.unit", "region", "privacy.max_rows", 2, "privacy.max_groups", 1),
    ("region", "unit"),
)
spec_case("privacy.max_rows with unit 'record'", setp("privacy.max_rows", 3), ("max_rows", "unit"))
for what, v in [("0", 0), ("-1", -1), ("str '2'", "2"), ("1.5", 1.5), ("true", True)]:
    spec_case(
        f"privacy.max_rows = {what} (unit pid)",
        setp("privacy.unit", "pid", "privacy.max_rows", v),
        "max_rows",
    )
spec_case(
    "privacy.max_groups = 0 (unit pid)",
    setp("privacy.unit", "pid", "privacy.max_groups", 0),
    "max_groups",
)
spec_case(  # issue 32: a person unit states its bounds, never a silent 1 and 1
    "privacy.unit = 'pid' without bounds",
    setp("privacy.unit", "pid"),
    ("max_rows", "max_groups", "[privacy]"),
)
spec_case(
    "grouped unit = 'pid' max_rows = 2 only",
    setp("release.0.unit", "pid", "release.0.max_rows", 2),
    "max_groups",
)
for what, v in [("-1", -1), ("str '1'", "1"), ("1.5", 1.5), ("true", True)]:
    (spec_both if what == "-1" else spec_case)(
        f"privacy.seed = {what}", setp("privacy.seed", v), "seed"
    )
spec_case("privacy.ledger missing", setp("privacy.ledger", _DEL), "ledger")
spec_case("privacy.ledger = 1", setp("privacy.ledger", 1), "ledger")
spec_case("privacy.ledger = '' (empty)", setp("privacy.ledger", ""), "ledger")
spec_case("privacy.ledger = '.' (the spec's folder)", setp("privacy.ledger", "."), "ledger")
spec_case(
    "privacy.ledger in a missing folder",
    setp("privacy.ledger", "nodir/ledger.db"),
    ("ledger", "nodir"),
    mode="run",
)
spec_case(
    "privacy.ledger = the input file",
    setp("privacy.ledger", "in.parquet"),
    ("ledger", "in.parquet"),
)
spec_case(
    "privacy.ledger = a garbage file",
    setp("privacy.ledger", "junk.db"),
    ("ledger", "junk.db"),
    extra=lambda t: (t / "junk.db").write_text("junk"),
)
spec_case(
    "privacy.ledger = a garbage file",
    setp("privacy.ledger", "junk.db"),
    ("ledger", "junk.db"),
    extra=lambda t: (t / "junk.db").write_text("junk"),
    mode="cli-plan",
)
spec_case(
    "privacy.ledger = 'new.json' (new ledger with a .json name)",
    setp("privacy.ledger", "new.json"),
    ("ledger", "json"),
    mode="run",
    q=True,
)
spec_case(
    "privacy.ledger inside output folder",
    setp("privacy.ledger", "released/ledger.db"),
    ("ledger", "output"),
)
spec_case(
    "privacy.ledger = postgresql:// URL unreachable",
    setp("privacy.ledger", "postgresql://nobody@127.0.0.1:1/x"),
    ("ledger", "postgres", "127.0.0.1"),
    q=True,
)
spec_case(
    "ledger opened with another budget (mismatch)",
    setp("privacy.budget.epsilon", 5.0),
    ("epsilon", "ledger"),
    extra=lambda t: dpframe.Accountant.open(t / "ledger.db", epsilon=10.0),
)
# version / unknown fields
spec_both("version = 2", setp("version", 2), "version")
spec_case("version = '1' (str)", setp("version", "1"), "version")
spec_case("version missing", setp("version", _DEL), "version")
spec_both("unknown top-level field 'budget'", setp("budget", 5), "budget")
spec_case("unknown field privacy.epsilon", setp("privacy.epsilon", 1.0), "epsilon")
spec_case(
    "unknown release field 'epsilon' on a grouped release",
    setp("release.0.epsilon", 1.0),
    "epsilon",
)
spec_case(
    "typo in statistic field 'colum'", setp("release.0.statistics.1.colum", "income"), "colum"
)
spec_case("unknown section [outputs]", setp("outputs", {"folder": "x"}), "outputs")
spec_case("empty spec file", None, ("version", "privacy", "release"), raw="")
spec_both("not TOML at all", None, ("toml", "spec.toml"), raw="this is = not [valid toml")
spec_case(
    "TOML top level is not a table (array of release only)",
    None,
    ("version", "privacy"),
    raw="[[release]]\nname='x'\n",
)
# input
spec_both(
    "input.path missing file", setp("input.path", "missing.parquet"), ("input", "missing.parquet")
)
spec_case("input.path = 1", setp("input.path", 1), ("input", "path"))
spec_case("input section missing", setp("input", _DEL), ("input",))
spec_both(
    "input.path is a CSV file",
    setp("input.path", "in.csv"),
    ("input", "in.csv", "parquet"),
    extra=lambda t: PEOPLE.drop("band").write_csv(t / "in.csv"),
)
spec_case(
    "input.path glob matching nothing", setp("input.path", "none/*.parquet"), ("input", "none")
)
spec_case(
    "input.path a text file named .parquet",
    setp("input.path", "fake.parquet"),
    ("input", "fake.parquet"),
    extra=lambda t: (t / "fake.parquet").write_text("nope"),
)
# output
spec_case(
    "output.folder = the input file",
    setp("output.folder", "in.parquet"),
    ("output", "folder"),
)
spec_case("output.folder = 1", setp("output.folder", 1), ("output", "folder"))
spec_case(
    "output.folder = the input file",
    setp("output.folder", "in.parquet"),
    ("output", "folder"),
    mode="run",
)
spec_case("release name '../escape'", setp("release.0.name", "../escape"), "name")
spec_case("release name '' (empty)", setp("release.0.name", ""), "name")
spec_case("release name with a space", setp("release.0.name", "by region"), "name")
spec_case(
    "release name 'in' writes released/in.parquet = the input? (folder '.')",
    setp("output.folder", ".", "release.0.name", "in"),
    ("in", "input", "output"),
)
spec_case(
    "two releases with the same name", lambda s: s["release"].append(dict(s["release"][0])), "name"
)
spec_case("release list empty", setp("release", []), "release")
spec_case("release kind 'histogram'", setp("release.0.kind", "histogram"), "kind")
spec_case("release without kind", setp("release.0.kind", _DEL), "kind")
# margins
spec_both("margins name not defined", setp("release.0.margins", "nope"), ("margins", "nope"))
spec_case("margins values list empty", setp("margins.reg.values.region", []), ("values", "region"))
spec_case(
    "margins values repeated",
    setp("margins.reg.values.region", ["N", "N", "S"]),
    ("values", "region"),
)
spec_case(
    "margins with both path and values", setp("margins.reg.path", "m.csv"), ("path", "values")
)
spec_case("margins with neither path nor values", setp("margins.reg", {}), ("path", "values"))
spec_case("margins path missing file", setp("margins.reg", {"path": "m.csv"}), ("margins", "m.csv"))
spec_case(
    "margins path CSV lacking the key column",
    setp("margins.reg", {"path": "m.csv"}),
    ("margins", "region"),
    extra=lambda t: pl.DataFrame({"area": ["N", "S"]}).write_csv(t / "m.csv"),
)
spec_case(
    "margins path CSV with a null key",
    setp("margins.reg", {"path": "m.csv"}),
    ("margins", "region", "null"),
    extra=lambda t: pl.DataFrame({"region": ["N", None, "S", "E"]}).write_csv(t / "m.csv"),
)
spec_case(
    "margins path CSV with duplicate keys",
    setp("margins.reg", {"path": "m.csv"}),
    ("margins", "duplicate"),
    extra=lambda t: pl.DataFrame({"region": ["N", "N", "S", "E"]}).write_csv(t / "m.csv"),
)
spec_case(
    "margins path is a text file named .parquet",
    setp("margins.reg", {"path": "m.parquet"}),
    ("margins", "m.parquet"),
    extra=lambda t: (t / "m.parquet").write_text("junk"),
)
spec_case(
    "margins path is an empty CSV",
    setp("margins.reg", {"path": "m.csv"}),
    ("margins", "m.csv"),
    extra=lambda t: (t / "m.csv").write_text(""),
)
spec_case(
    "margins sizes column missing",
    setp("margins.reg", {"path": "m.csv", "sizes": "n"}),
    ("sizes", "n"),
    extra=lambda t: pl.DataFrame({"region": ["N", "S", "E", "W"]}).write_csv(t / "m.csv"),
)
spec_case(
    "margins sizes negative",
    setp("margins.reg", {"path": "m.csv", "sizes": "n"}),
    ("sizes", "n"),
    extra=lambda t: pl.DataFrame({"region": ["N", "S", "E", "W"], "n": [50, 25, -1, 0]}).write_csv(
        t / "m.csv"
    ),
)
spec_case(
    "margins sizes float",
    setp("margins.reg", {"path": "m.csv", "sizes": "n"}),
    ("sizes", "n"),
    extra=lambda t: pl.DataFrame(
        {"region": ["N", "S", "E", "W"], "n": [50.5, 25, 25, 0]}
    ).write_csv(t / "m.csv"),
)
spec_case("margins sizes with values= (no file)", setp("margins.reg.sizes", "n"), "sizes")
spec_case(
    "margins sizes under add_remove",
    both(
        setp("margins.reg", {"path": "m.csv", "sizes": "n"}),
        setp("privacy.neighbours", "add_remove"),
    ),
    ("sizes", "add_remove"),
    extra=lambda t: pl.DataFrame({"region": ["N", "S", "E", "W"], "n": [50, 25, 25, 0]}).write_csv(
        t / "m.csv"
    ),
)
spec_case(
    "margins sizes disagree with the data",
    setp("margins.reg", {"path": "m.csv", "sizes": "n"}),
    ("sizes", "size"),
    extra=lambda t: pl.DataFrame({"region": ["N", "S", "E", "W"], "n": [1, 2, 3, 4]}).write_csv(
        t / "m.csv"
    ),
    mode="run",
)
spec_case(
    "margins values ints for a String key",
    setp("margins.reg.values.region", [1, 2, 3]),
    ("region", "margins"),
)
spec_case(
    "margins values ints for a String key",
    setp("margins.reg.values.region", [1, 2, 3]),
    ("region", "margins"),
    mode="run",
)
spec_case(
    "margins values booleans for a String key",
    setp("margins.reg.values.region", [True, False]),
    ("region", "margins"),
    mode="run",
)
spec_case(
    "margins values mixed types", setp("margins.reg.values.region", ["N", 1]), ("region", "values")
)
spec_case(
    "margins key not in the input",
    setp("margins.reg.values", {"zone": ["a", "b"]}, "release.0.by", ["zone"]),
    "zone",
)
spec_case(
    "margins values missing a key present in data",
    setp("margins.reg.values.region", ["N", "S"]),
    ("margins", "region", "keys"),
    mode="run",
)
spec_case(
    "margins values Enum key with value not in Enum",
    setp("margins.reg.values", {"band": ["a", "b", "zz"]}, "release.0.by", ["band"]),
    ("band", "zz"),
    mode="run",
)
spec_case(
    "margins values for by=['band'] missing 'b'",
    setp("margins.reg.values", {"band": ["a"]}, "release.0.by", ["band"]),
    ("band", "margins"),
    mode="run",
)
# grouped
spec_case("grouped by = [] ", setp("release.0.by", []), "by")
spec_case("grouped by = 'region' (a string)", setp("release.0.by", "region"), "by")
spec_case(
    "grouped by a column missing from the input",
    setp("release.0.by", ["nope"], "margins.reg.values", {"nope": ["a"]}),
    "nope",
)
spec_case(
    "grouped by a column missing from the input",
    setp("release.0.by", ["nope"], "margins.reg.values", {"nope": ["a"]}),
    "nope",
    mode="run",
)
spec_case(
    "grouped by key missing from the margins",
    setp("release.0.by", ["region", "band"]),
    ("band", "margins"),
)
spec_case("grouped statistics = []", setp("release.0.statistics", []), "statistics")
spec_case("stat = 'median'", setp("release.0.statistics.0.stat", "median"), "stat")
spec_case("count with a column", setp("release.0.statistics.0.column", "income"), "column")
spec_case("mean without lower", setp("release.0.statistics.1.lower", _DEL), "lower")
for what, v in [("str '0'", "0"), ("true", True), ("NaN", NAN), ("-inf", -INF), ("[0]", [0])]:
    spec_case(f"mean lower = {what}", setp("release.0.statistics.1.lower", v), "lower")
spec_case("mean upper = inf", setp("release.0.statistics.1.upper", INF), "upper")
spec_case("mean lower > upper", setp("release.0.statistics.1.lower", 200), ("lower", "upper"))
spec_case("mean lower == upper", setp("release.0.statistics.1.lower", 100), ("lower", "upper"))
spec_case(
    "mean bounds -1e308..1e308",
    setp("release.0.statistics.1.lower", -1e308, "release.0.statistics.1.upper", 1e308),
    ("lower", "upper"),
)
spec_case(
    "mean column missing from the input", setp("release.0.statistics.1.column", "nope"), "nope"
)
spec_case(
    "mean column missing from the input",
    setp("release.0.statistics.1.column", "nope"),
    "nope",
    mode="run",
)
spec_case("mean on a String column", setp("release.0.statistics.1.column", "tenure"), "tenure")
spec_case(
    "mean on a String column", setp("release.0.statistics.1.column", "tenure"), "tenure", mode="run"
)
spec_case("mean column = 1", setp("release.0.statistics.1.column", 1), "column")
spec_case(
    "proportion on a Float column",
    setp("release.0.statistics.1", {"stat": "proportion", "column": "income", "epsilon": 0.5}),
    "income",
    mode="run",
)
spec_case(
    "proportion without column",
    setp("release.0.statistics.1", {"stat": "proportion", "epsilon": 0.5}),
    "column",
)
spec_case(
    "cov missing y",
    setp(
        "release.0.statistics.1",
        {
            "stat": "cov",
            "x": "income",
            "lower": 0,
            "upper": 100,
            "lower_y": 0,
            "upper_y": 10,
            "epsilon": 0.5,
        },
    ),
    "y",
)
spec_case(
    "cov x == y",
    setp(
        "release.0.statistics.1",
        {
            "stat": "cov",
            "x": "income",
            "y": "income",
            "lower": 0,
            "upper": 100,
            "lower_y": 0,
            "upper_y": 100,
            "epsilon": 0.5,
        },
    ),
    ("x", "y"),
)
spec_case(
    "mean method='bit' without public sizes", setp("release.0.statistics.1.method", "bit"), "method"
)
spec_case("mean method='median'", setp("release.0.statistics.1.method", "median"), "method")
spec_case(
    "gaussian count on a pure-epsilon budget",
    setp("release.0.statistics.0", {"stat": "count", "mechanism": "gaussian", "rho": 0.05}),
    ("rho", "gaussian", "zcdp", "budget"),
)
spec_case(
    "gaussian count with epsilon",
    setp("release.0.statistics.0", {"stat": "count", "mechanism": "gaussian", "epsilon": 0.5}),
    ("rho", "epsilon"),
)
spec_case(
    "gaussian mean (not offered)",
    setp("release.0.statistics.1.mechanism", "gaussian"),
    ("gaussian", "mechanism"),
)
spec_case(
    "count mechanism = 'Laplace'", setp("release.0.statistics.0.mechanism", "Laplace"), "mechanism"
)
for what, v in [("str '0.5'", "0.5"), ("0", 0), ("-0.5", -0.5), ("NaN", NAN), ("true", True)]:
    spec_case(f"count epsilon = {what}", setp("release.0.statistics.0.epsilon", v), "epsilon")
spec_case("count without epsilon", setp("release.0.statistics.0.epsilon", _DEL), "epsilon")
spec_case(
    "statistic name = 'region' (clashes with key)",
    setp("release.0.statistics.1.name", "region"),
    ("region", "name"),
)
spec_case(
    "two statistics with the same output name",
    setp("release.0.statistics.0.name", "income_mean"),
    ("income_mean", "name"),
)
spec_case(
    "statistic name = '' (empty)",
    setp("release.0.statistics.1.name", ""),
    "name",
)
spec_case("nonnegative = 'yes'", setp("release.0.nonnegative", "yes"), "nonnegative")
for what, v in [
    ("'ignore'", "ignore"),
    ("{} (empty)", {}),
    ("{income = 'zero'} (a string for a number)", {"income": "zero"}),
    ("['drop'] (a list)", ["drop"]),
    ("true", True),
]:
    spec_case(f"nulls = {what}", setp("release.0.nulls", v), ("nulls", "fill"))
spec_case(
    "grouped unit = 'pid' max_rows = 0",
    setp("release.0.unit", "pid", "release.0.max_rows", 0, "release.0.max_groups", 1),
    "max_rows",
)
spec_case(
    "grouped unit = 'region' (a key column)",
    setp("release.0.unit", "region", "release.0.max_rows", 1, "release.0.max_groups", 1),
    ("region", "unit"),
)
spec_case(
    "grouped unit = 'nope' (missing)",
    setp("release.0.unit", "nope", "release.0.max_rows", 1, "release.0.max_groups", 1),
    "nope",
    mode="run",
)
spec_case(
    "grouped max_groups = -1",
    setp("release.0.unit", "pid", "release.0.max_rows", 1, "release.0.max_groups", -1),
    "max_groups",
)
spec_case(
    "overspend: statistics sum to 12 > budget 10",
    setp("release.0.statistics.0.epsilon", 11.5),
    ("epsilon", "budget", "overspend"),
    mode="cli-plan",
)
spec_case(
    "overspend: statistics sum to 12 > budget 10",
    setp("release.0.statistics.0.epsilon", 11.5),
    ("epsilon", "budget", "overspend"),
    mode="cli-release",
)
# pram
spec_case("pram columns = []", setp("release.0.columns", []), "columns", kinds=("pram",))
spec_case(
    "pram column missing from the input",
    setp("release.0.columns.0.column", "nope"),
    "nope",
    kinds=("pram",),
)
spec_case("pram epsilon = 0", setp("release.0.columns.0.epsilon", 0), "epsilon", kinds=("pram",))
spec_case(
    "pram epsilon = '0.5'", setp("release.0.columns.0.epsilon", "0.5"), "epsilon", kinds=("pram",)
)
spec_both(
    "pram categories = 'abc' (a string)",
    setp("release.0.columns.0.categories", "abc"),
    "categories",
    kinds=("pram",),
)
spec_case(
    "pram categories duplicates",
    setp("release.0.columns.0.categories", ["N", "N", "S", "E"]),
    "categories",
    kinds=("pram",),
)
spec_case(
    "pram categories one value",
    setp("release.0.columns.0.categories", ["N"]),
    "categories",
    kinds=("pram",),
)
spec_case(
    "pram categories mixed types",
    setp("release.0.columns.0.categories", ["N", 1]),
    "categories",
    kinds=("pram",),
)
spec_case(
    "pram categories floats",
    setp("release.0.columns.0.categories", [1.5, 2.5]),
    "categories",
    kinds=("pram",),
)
spec_case(
    "pram categories missing on a String column",
    setp("release.0.columns.0.categories", _DEL),
    "categories",
    kinds=("pram",),
)
spec_case(
    "pram prior dict with negative weight",
    setp("release.0.columns.0.prior", {"N": 0.5, "S": 0.6, "E": -0.1, "W": 0.0}),
    "prior",
    kinds=("pram",),
)
spec_case(
    "pram prior dict keys not matching categories",
    setp("release.0.columns.0.prior", {"N": 0.5, "Z": 0.5}),
    ("prior", "categories"),
    kinds=("pram",),
)
spec_case(
    "pram prior list of wrong length",
    setp("release.0.columns.0.prior", [0.5, 0.5]),
    "prior",
    kinds=("pram",),
)
spec_case(
    "pram prior list with NaN",
    setp("release.0.columns.0.prior", [NAN, 0.5, 0.25, 0.25]),
    "prior",
    kinds=("pram",),
)
spec_case(
    "pram diagonal = 'dominantt'",
    setp("release.0.columns.0.diagonal", "dominantt"),
    "diagonal",
    kinds=("pram",),
)
spec_case(
    "pram design = 'globall'",
    setp("release.0.columns.0.design", "globall"),
    "design",
    kinds=("pram",),
)
spec_case(
    "pram estimable = 'yes'",
    setp("release.0.columns.0.estimable", "yes"),
    "estimable",
    kinds=("pram",),
)
spec_case(
    "pram the same column twice",
    lambda s: s["release"][0]["columns"].append(dict(s["release"][0]["columns"][0])),
    ("column", "region"),
    kinds=("pram",),
)
spec_case(
    "pram under add_remove",
    setp("privacy.neighbours", "add_remove"),
    ("add_remove", "pram", "substitute"),
    kinds=("pram",),
)
spec_case(
    "pram value outside categories in data",
    setp("release.0.columns.0.categories", ["N", "S"]),
    "region",
    kinds=("pram",),
    mode="run",
)
spec_case(
    "pram nulls in the data",
    None,
    "region",
    kinds=("pram",),
    mode="run",
    data=with_col(PEOPLE, "region", [None] + ["N"] * 99),
)
spec_case(
    "pram nulls in the data",
    None,
    "region",
    kinds=("pram",),
    mode="cli-release",
    data=with_col(PEOPLE, "region", [None] + ["N"] * 99),
)
spec_case(
    "pram unit = 'pid' max_rows = 1 (2 rows a person)",
    setp("release.0.unit", "pid", "release.0.max_rows", 1),
    ("pid", "max_rows"),
    kinds=("pram",),
    mode="run",
)
spec_case(
    "pram int categories on a String column",
    setp("release.0.columns.0.categories", [1, 2, 3]),
    "region",
    kinds=("pram",),
)
# proportions
spec_case(
    "proportions column missing", setp("release.0.column", "nope"), "nope", kinds=("proportions",)
)
spec_case(
    "proportions String column without categories",
    setp("release.0.column", "tenure"),
    "categories",
    kinds=("proportions",),
)
spec_case(
    "proportions strategy = 'softmax'",
    setp("release.0.strategy", "softmax"),
    "strategy",
    kinds=("proportions",),
)
spec_case(
    "proportions universal_histogram with K = 3",
    setp(
        "release.0.column",
        "tenure",
        "release.0.categories",
        ["own", "rent", "other"],
        "release.0.strategy",
        "universal_histogram",
    ),
    ("strategy", "universal_histogram", "power"),
    kinds=("proportions",),
)
spec_case("proportions n = '100'", setp("release.0.n", "100"), "n", kinds=("proportions",))
spec_case(
    "proportions n = 99 (not the row count)",
    setp("release.0.n", 99),
    "n",
    kinds=("proportions",),
    mode="run",
)
spec_case("proportions n = 100.5", setp("release.0.n", 100.5), "n", kinds=("proportions",))
spec_case("proportions method = 1", setp("release.0.method", 1), "method", kinds=("proportions",))
spec_case(
    "proportions tolerance = 0", setp("release.0.tolerance", 0), "tolerance", kinds=("proportions",)
)
spec_case(
    "proportions tolerance = 0.7",
    setp("release.0.tolerance", 0.7),
    "tolerance",
    kinds=("proportions",),
)
spec_case(
    "proportions under add_remove",
    setp("privacy.neighbours", "add_remove"),
    ("add_remove", "size", "substitute"),
    kinds=("proportions",),
)
spec_case(
    "proportions categories differing from the Enum",
    setp("release.0.categories", ["a", "z"]),
    ("categories", "band"),
    kinds=("proportions",),
)
spec_case(
    "proportions on empty input (0 rows)",
    None,
    ("n", "rows", "input"),
    kinds=("proportions",),
    data=PEOPLE.head(0),
)
spec_case(
    "proportions value outside categories",
    setp("release.0.column", "tenure", "release.0.categories", ["own", "rent"]),
    "tenure",
    kinds=("proportions",),
    mode="run",
)
# covariance
spec_case(
    "covariance one column",
    setp("release.0.columns", ["income"], "release.0.bounds", [[0, 100]]),
    "columns",
    kinds=("covariance",),
)
spec_case(
    "covariance bounds count mismatch",
    setp("release.0.bounds", [[0, 100]]),
    "bounds",
    kinds=("covariance",),
)
spec_case(
    "covariance bounds reversed",
    setp("release.0.bounds", [[100, 0], [0, 10]]),
    ("bounds", "lower"),
    kinds=("covariance",),
)
spec_case(
    "covariance bounds strings",
    setp("release.0.bounds", [["0", "100"], [0, 10]]),
    "bounds",
    kinds=("covariance",),
)
spec_case(
    "covariance bounds with 3 numbers",
    setp("release.0.bounds", [[0, 50, 100], [0, 10]]),
    "bounds",
    kinds=("covariance",),
)
spec_case(
    "covariance bounds NaN",
    setp("release.0.bounds", [[NAN, 100], [0, 10]]),
    "bounds",
    kinds=("covariance",),
)
spec_case(
    "covariance duplicate columns",
    setp("release.0.columns", ["income", "income"]),
    "columns",
    kinds=("covariance",),
)
spec_case(
    "covariance column missing",
    setp("release.0.columns", ["income", "nope"]),
    "nope",
    kinds=("covariance",),
)
spec_case(
    "covariance on a String column",
    setp("release.0.columns", ["income", "tenure"]),
    "tenure",
    kinds=("covariance",),
)
spec_case(
    "covariance on a String column",
    setp("release.0.columns", ["income", "tenure"]),
    "tenure",
    kinds=("covariance",),
    mode="run",
)
spec_case("covariance n = 1", setp("release.0.n", 1), "n", kinds=("covariance",))
spec_case(
    "covariance repair = 'nearest'",
    setp("release.0.repair", "nearest"),
    "repair",
    kinds=("covariance",),
)
spec_case(
    "covariance under add_remove",
    setp("privacy.neighbours", "add_remove"),
    ("add_remove", "size", "substitute"),
    kinds=("covariance",),
)
spec_case(
    "covariance on empty input (0 rows)",
    None,
    ("n", "rows", "input"),
    kinds=("covariance",),
    data=PEOPLE.head(0),
)
spec_case(
    "covariance with NaN in the data",
    None,
    "income",
    kinds=("covariance",),
    data=income_with([NAN]),
    mode="run",
)
# data-level problems found only when the data is read
spec_case("grouped mean with NaN income", None, "income", data=income_with([NAN]), mode="run")
spec_case(
    "grouped mean with NaN income", None, "income", data=income_with([NAN]), mode="cli-release"
)
spec_case("grouped mean with null income", None, "income", data=income_with([None]), mode="run")
spec_case("grouped mean with +inf income", None, "income", data=income_with([INF]), mode="run")
spec_case(
    "grouped with a null key in the data",
    None,
    "region",
    data=with_col(PEOPLE, "region", [None] + ["N"] * 99),
    mode="run",
)
spec_case(
    "grouped key not in margins (data has 'X')",
    None,
    ("region", "margins", "keys"),
    data=with_col(PEOPLE, "region", ["X"] + ["N"] * 99),
    mode="run",
)
spec_case(
    "grouped by Float key with NaN in data",
    setp("release.0.by", ["x"], "margins.reg.values", {"x": [1.0, 2.0]}),
    "x",
    data=with_col(PEOPLE, "x", [NAN] + [1.0] * 99),
    mode="run",
)
spec_case(
    "grouped margins Float key NaN (values = [nan, 1.0])",
    setp("release.0.by", ["x"], "margins.reg.values", {"x": [NAN, 1.0]}),
    ("x", "margins"),
    data=with_col(PEOPLE, "x", [1.0] * 100),
    mode="run",
)
spec_case(
    "grouped key column named '__bad__income'",
    setp(
        "release.0.by",
        ["__bad__income"],
        "margins.reg.values",
        {"__bad__income": ["N", "S", "E", "W"]},
    ),
    "__bad__",
    data=PEOPLE.with_columns(pl.col("region").alias("__bad__income")),
    mode="run",
)
spec_case(
    "grouped key column named '__bad__income'",
    setp(
        "release.0.by",
        ["__bad__income"],
        "margins.reg.values",
        {"__bad__income": ["N", "S", "E", "W"]},
    ),
    "__bad__",
    data=PEOPLE.with_columns(pl.col("region").alias("__bad__income")),
    mode="cli-release",
)
spec_case(
    "grouped key column named '__rows'",
    setp("release.0.by", ["__rows"], "margins.reg.values", {"__rows": ["N", "S", "E", "W"]}),
    "__rows",
    data=PEOPLE.with_columns(pl.col("region").alias("__rows")),
    mode="run",
)
spec_case(
    "grouped on an input with no columns",
    None,
    ("region", "input"),
    data=pl.DataFrame(),
    mode="plan",
)
spec_case(
    "grouped on Int key, margins ['0', '1', '01', '2'] (two strings cast to one key)",
    setp("release.0.by", ["code"], "margins.reg.values", {"code": ["0", "1", "01", "2"]}),
    ("code", "margins", "duplicate"),
    mode="run",
)
spec_case("privacy.seed = -1", setp("privacy.seed", -1), "seed", mode="run")
spec_case(
    "proportions categories differing from the Enum",
    setp("release.0.categories", ["a", "z"]),
    ("categories", "band"),
    kinds=("proportions",),
    mode="run",
)
spec_case(
    "covariance column missing",
    setp("release.0.columns", ["income", "nope"]),
    "nope",
    kinds=("covariance",),
    mode="run",
)
spec_case(
    "statistic name = '' (empty)",
    setp("release.0.statistics.1.name", ""),
    "name",
    mode="run",
)
spec_case(
    "margins values mixed types",
    setp("margins.reg.values.region", ["N", 1]),
    ("region", "values"),
    mode="cli-plan",
)


# =======================================================================================
# 5. the dpframe command
# =======================================================================================


def cli_files(ctx):
    t = ctx.tmp
    pl.DataFrame({"a": [1]}).write_parquet(t / "plain.parquet")
    (t / "garbage.db").write_text("garbage")
    (t / "empty.db").write_bytes(b"")
    (t / "notes.txt").write_text("hello")
    (t / "bad.json").write_text("{not json")
    (t / "list.json").write_text("[1, 2]")
    (t / "fake.parquet").write_text("not parquet")
    os.mkdir(t / "adir")
    a = dpframe.Accountant.open(t / "ledger.db", epsilon=2.0)
    a.spend(0.5, mechanism="laplace")
    ctx.ledgers.append(t / "ledger.db")
    pl.DataFrame({"q": ["a", "b"], "y": ["x", "y"]}).write_csv(t / "t.csv")
    (t / "empty.csv").write_text("")
    (t / "img.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\xff\xfe")


def cmd(*args, names, label=None, q=False, timeout=90, xfail=None):
    add(
        C,
        label or "dpframe " + " ".join(a if a else "''" for a in args),
        lambda ctx: cli(ctx, *args, timeout=timeout),
        names,
        acct=None,
        kind="cli",
        setup=cli_files,
        q=q,
        timeout=timeout + 10,
        xfail=xfail,
    )


cmd("ledger", "show", "plain.parquet", names=("plain.parquet", "provenance"))
cmd("ledger", "show", "fake.parquet", names=("fake.parquet",))
cmd("ledger", "show", "garbage.db", names=("garbage.db",))
cmd("ledger", "show", "empty.db", names=("empty.db",))
cmd("ledger", "show", "bad.json", names=("bad.json",))
cmd("ledger", "show", "list.json", names=("list.json",))
cmd("ledger", "show", "missing.db", names=("missing.db",))
cmd("ledger", "show", "adir", names=("adir",))
cmd("ledger", "show", "", names=("ledger", "path"))
cmd("ledger", "show", "postgresql://nobody@127.0.0.1:1/x", names=("postgres", "127.0.0.1"))
cmd("ledger", "show", names=("ledger", "argument"), label="dpframe ledger show (no argument)")
cmd("ledger", "show", "ledger.db", "--bogus", names=("bogus",))
cmd("ledger", "verify", "missing.db", names=("missing.db",))
cmd("ledger", "verify", "garbage.db", names=("garbage.db",))
cmd("ledger", "verify", "adir", names=("adir",))
cmd("ledger", "verify", "ledger.db", "--against", "missing_dir", names=("missing_dir",))
cmd("ledger", "verify", "ledger.db", "--against", "notes.txt", names=("notes.txt",))
cmd(
    "ledger",
    "verify",
    "ledger.db",
    "--against",
    "plain.parquet",
    names=("plain.parquet", "provenance"),
)
cmd("ledger", "verify", "ledger.db", "--against", "fake.parquet", names=("fake.parquet",))
cmd("ledger", "export", "ledger.db", "--output", "out.txt", names=("output", "out.txt"))
cmd("ledger", "export", "ledger.db", "--output", "nodir/out.json", names=("output", "nodir"))
cmd("ledger", "export", "ledger.db", "--output", "adir", names=("output", "adir"))
cmd("ledger", "export", "missing.db", "--output", "out.json", names=("missing.db",))
cmd(
    "ledger",
    "export",
    "ledger.db",
    names=("output",),
    label="dpframe ledger export without --output",
)
cmd(
    "ledger",
    "export",
    "ledger.db",
    "--output",
    "ledger.db",
    names=("output", "ledger.db"),
    label="dpframe ledger export --output over the ledger itself",
)
cmd("ledger", "cancel", "ledger.db", "nope", names=("nope", "reservation"))
cmd("ledger", "cancel", "missing.db", "nope", names=("missing.db",))
cmd("ledger", "cancel", "garbage.db", "nope", names=("garbage.db",))
cmd("ledger", "migrate", "missing.json", names=("missing.json",))
cmd("ledger", "migrate", "bad.json", names=("bad.json",))
cmd("ledger", "migrate", "list.json", names=("list.json",))
cmd(
    "ledger",
    "migrate",
    "ledger.db",
    names=("ledger.db", "json"),
    label="dpframe ledger migrate on a SQLite ledger",
)
cmd("ledger", "migrate", "bad.json", "--to", "nodir/x.db", names=("bad.json", "nodir"))
cmd("ledger", "bogus", names=("bogus",))


def provenance_cmd(*args, names, label=None):
    """``dpframe provenance ...`` on the files of :func:`copy_setup`."""
    add(
        C,
        label or "dpframe " + " ".join(args),
        lambda ctx: cli(ctx, *args),
        names,
        acct=None,
        kind="cli",
        setup=copy_setup,
        timeout=100,
    )


provenance_cmd("provenance", "copy", "copy.parquet", "raw.parquet", names=("source",))
provenance_cmd("provenance", "copy", "release.parquet", "raw.parquet", names=("income",))
provenance_cmd("provenance", "copy", "release.parquet", "sym.parquet", names=("destination",))
provenance_cmd("provenance", "copy", "release.parquet", "other.parquet", names=("--overwrite",))
provenance_cmd(
    "provenance",
    "copy",
    "release.parquet",
    names=("dst", "argument"),
    label="dpframe provenance copy without DST",
)
provenance_cmd("provenance", "show", "copy.parquet", names=("copy.parquet", "provenance"))
provenance_cmd("provenance", "show", "missing.parquet", names=("missing.parquet",))


cmd("plan", "missing.toml", names=("missing.toml",))
cmd("plan", "adir", names=("adir",))
cmd("plan", "notes.txt", names=("notes.txt", "toml"))
cmd("plan", "plain.parquet", names=("plain.parquet", "toml"))
cmd("plan", names=("spec", "argument"), label="dpframe plan (no argument)")
cmd("release", "missing.toml", names=("missing.toml",))
cmd("release", "notes.txt", "--engine", "dask", names=("engine",))
cmd("release", "notes.txt", "--data-docs=maybe", names=("data-docs", "data_docs"))
cmd("check", "missing.toml", names=("missing.toml",))
cmd(
    "check",
    "adir",
    names=("adir", "manifest", "current"),
    label="dpframe check on a folder that is not an output folder",
)
cmd("check", "notes.txt", names=("notes.txt", "toml"))
cmd("risk", "missing.csv", names=("missing.csv",))
cmd(
    "risk",
    "t.csv",
    names=("qids", "sensitive"),
    label="dpframe risk t.csv without --qids/--sensitive",
)
cmd("risk", "t.csv", "--qids", "nope", "--sensitive", "y", "--levels", "x,y", names=("nope",))
cmd("risk", "t.csv", "--qids", "q", "--sensitive", "nope", names=("nope",))
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    names=("levels",),
    label="dpframe risk t.csv without --levels (String Y)",
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,z",
    names=("levels", "y"),
    label="dpframe risk --levels x,z (data has 'y')",
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--eps-min",
    "0",
    names=("eps-min", "eps_min"),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--eps-min",
    "10",
    "--eps-max",
    "1",
    names=("eps-min", "eps-max", "eps_max"),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--eps-max",
    "nan",
    names=("eps-max", "eps_max"),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--points",
    "0",
    names=("points",),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--show",
    "0",
    names=("show",),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--mechanism",
    "bogus",
    names=("mechanism",),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--measure",
    "bogus",
    names=("measure",),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--mechanism",
    "gaussian_pdp",
    "--delta",
    "2",
    names=("delta",),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--count",
    "nope",
    names=("nope", "count"),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--plot",
    "nodir/r.png",
    names=("plot", "nodir"),
)
cmd(
    "risk",
    "t.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    "--levels",
    "x,y",
    "--csv",
    "nodir/r.csv",
    names=("csv", "nodir"),
)
cmd("risk", "empty.csv", "--qids", "q", "--sensitive", "y", names=("empty.csv",))
cmd(
    "risk",
    "img.csv",
    "--qids",
    "q",
    "--sensitive",
    "y",
    names=("img.csv",),
    label="dpframe risk on a binary file named .csv",
)
cmd("risk", "bankruptcy", "--qids", "x", names=("qids",))
cmd("risk", "bankruptcy", "--eps-min", "abc", names=("eps-min",))
cmd("demo", "--rows", "0", names=("rows",))
cmd("demo", "--out", "notes.txt", "--rows", "1000", names=("out", "notes.txt"), timeout=150)
cmd("bogus", names=("bogus",))
cmd("plan", "--help-me", names=("help-me",))


# =======================================================================================
# 6. issue 32: the raw errors of the first day on real data, on every surface
# =======================================================================================

# -- a privacy amount out of dpframe's range [1e-300, 1e300], and a release's own limits
add(
    A,
    "agg.count epsilon=1e300 (budget 1e300)",
    grouped(count(epsilon=1e300)),
    "epsilon",
    acct="huge",
)
add(
    A,
    "agg.mean epsilon=1e300 (budget 1e300)",
    grouped(amean(epsilon=1e300)),
    "epsilon",
    acct="huge",
)
add(A, ".dp.laplace epsilon=1e300 (budget 1e300)", lap(epsilon=1e300), "epsilon", acct="huge")
add(A, ".dp.gaussian sigma=1e300", gauss(rho=None, sigma=1e300), "sigma", acct="zcdp")
add(
    A,
    "agg.count gaussian sigma=1e300",
    grouped(count(epsilon=None, mechanism="gaussian", sigma=1e300)),
    "sigma",
    acct="zcdp",
)
add(A, ".dp.gaussian rho=1e300 (above the range)", gauss(rho=1.5e300), "rho", acct="zcdp")
add(A, "agg.count epsilon=1e-320 (subnormal)", grouped(count(epsilon=1e-320)), "epsilon")
add(A, ".dp.laplace epsilon=1e-320 (subnormal)", lap(epsilon=1e-320), "epsilon")
add(ACC, "Accountant(epsilon=1.5e300)", acct_new(epsilon=1.5e300), "epsilon", acct=None)
add(ACC, "Accountant(rho=1e300, delta=1e-6)", acct_new(rho=1e300, delta=1e-6), "rho", acct=None)
add(ACC, "Accountant(epsilon=1e-320)", acct_new(epsilon=1e-320), "epsilon", acct=None)
add(
    ACC,
    "Accountant(epsilon=1, delta=1e-320)",
    acct_new(epsilon=1.0, delta=1e-320),
    "delta",
    acct=None,
)
add(ACC, "Accountant.open(epsilon=1.5e300)", op("new.db", epsilon=1.5e300), "epsilon", acct=None)
add(
    ACC,
    "Accountant.open(rho=1e300, delta=1e-6)",
    op("new.db", epsilon=None, rho=1e300, delta=1e-6),
    "rho",
    acct=None,
)
add(ACC, "acct.spend(1e-320) (subnormal)", spend(1e-320), "epsilon")
add(ACC, "acct.spend(0.5, delta=1e-320) (subnormal)", spend(0.5, 1e-320), "delta", acct="zcdp")


def _opened_spend(amount):
    def setup(ctx):
        dpframe.Accountant.open(ctx.tmp / "l.db", epsilon=1.0)
        ctx.ledgers.append(ctx.tmp / "l.db")

    def fn(ctx):
        return dpframe.Accountant.open(ctx.tmp / "l.db").spend(amount, mechanism="laplace")

    return fn, setup


fn_, setup_ = _opened_spend(1e-320)
add(ACC, "Accountant.open(...).spend(1e-320)", fn_, "epsilon", acct=None, setup=setup_)


# -- a ledger whose first bytes are overwritten; a zCDP ledger reopened with an epsilon
def _overwritten(ctx):
    path = ctx.tmp / "ledger.db"
    dpframe.Accountant.open(path, epsilon=2.0).spend(0.5, mechanism="laplace")
    raw = bytearray(path.read_bytes())
    raw[:16] = b"overwritten!!!!!"
    path.write_bytes(bytes(raw))


add(
    ACC,
    "Accountant.open(a SQLite ledger whose first bytes are overwritten)",
    lambda ctx: dpframe.Accountant.open(ctx.tmp / "ledger.db", epsilon=2.0),
    ("not a dpframe ledger, or is corrupt",),
    acct=None,
    setup=_overwritten,
)
add(
    C,
    "dpframe ledger show (a SQLite ledger whose first bytes are overwritten)",
    lambda ctx: cli(ctx, "ledger", "show", "ledger.db"),
    ("not a dpframe ledger, or is corrupt",),
    acct=None,
    kind="cli",
    setup=_overwritten,
)


def _zcdp_ledger(ctx):
    dpframe.Accountant.open(ctx.tmp / "z.db", rho=0.5, delta=1e-6)
    ctx.ledgers.append(ctx.tmp / "z.db")


add(
    ACC,
    "Accountant.open(zCDP ledger rho=0.5, epsilon=5.0, delta=1e-6, accounting='zcdp')",
    lambda ctx: dpframe.Accountant.open(
        ctx.tmp / "z.db", epsilon=5.0, delta=1e-6, accounting="zcdp"
    ),
    ("epsilon",),
    acct=None,
    setup=_zcdp_ledger,
)

# -- keys: named twice, wider than 64 bits; public sizes above 2**63; dpframe's own names
add(A, "group_by keys=['region', 'region']", grouped(keys=["region", "region"]), "keys")
add(
    A,
    "group_by sizes= a UInt64 column holding 2**63",
    grouped(
        amean(),
        margins=REGIONS.with_columns(pl.Series("n", [2**63, 1, 1, 1], dtype=pl.UInt64)),
        sizes="n",
    ),
    "sizes",
)
for pid_name in ("__bound_n", "__bound_i"):
    add(
        A,
        f"group_by with the person column named {pid_name!r} (float keys)",
        grouped(
            frame=PEOPLE.with_columns(pl.col("score").alias("fkey"), pl.col("pid").alias(pid_name)),
            keys="fkey",
            margins=pl.DataFrame({"fkey": [1.0, 2.0, 3.0, 4.0]}),
            unit=pid_name,
            max_rows=2,
            max_groups=1,
        ),
        ("unit", pid_name),
    )
add(
    P,
    ".dp.pram categories=[0, 2**70] (beyond int64)",
    pram(col="code", categories=[0, 2**70]),
    "categories",
)
add(
    P,
    "pram.release categories=[0, 2**70] (beyond int64)",
    lambda ctx: dpframe.pram.release(
        PEOPLE, [{"column": "code", "epsilon": 0.5, "categories": [0, 2**70]}], accountant=ctx.acct
    ).write("out.parquet"),
    "categories",
)
add(
    A,
    "proportions categories=[0, 2**70] (beyond int64)",
    props(column="code", categories=[0, 2**70]),
    "categories",
)
WIDE = PEOPLE.with_columns(pl.col("code").cast(pl.Int128))
add(P, ".dp.pram on an Int128 column", pram(col="code", frame=WIDE, categories=[0, 1, 2]), "code")
add(
    P,
    "pram.release on an Int128 column",
    lambda ctx: dpframe.pram.release(
        WIDE, [{"column": "code", "epsilon": 0.5, "categories": [0, 1, 2]}], accountant=ctx.acct
    ).write("out.parquet"),
    "code",
)
add(
    A,
    "proportions on an Int128 column",
    props(column="code", frame=WIDE, categories=[0, 1, 2]),
    "code",
)
add(
    P,
    "pram.release keep= a randomized column",
    lambda ctx: dpframe.pram.release(
        PEOPLE,
        [{"column": "tenure", "epsilon": 0.5, "categories": TENURE}],
        keep=["tenure"],
        accountant=ctx.acct,
    ).write("out.parquet"),
    ("keep", "tenure"),
)


# -- a struct without its fields; a missing column through dpframe.collect
add(
    A,
    ".dp.laplace on a struct column without a 'value' field",
    lap_on(pl.DataFrame({"m": [{"a": 1.0}, {"a": 2.0}]})),
    "m",
)


def _collected(make, frame):
    def fn(ctx):
        with ctx.acct:
            e = make()
            return dpframe.collect(frame.lazy().with_columns(e))

    return fn


add(
    A,
    "dpframe.collect(.dp.laplace on a missing column)",
    _collected(
        lambda: pl.col("zz").dp.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel"),
        STATS,
    ),
    "zz",
)
add(
    A,
    "dpframe.collect(.dp.laplace on a struct column without a 'value' field)",
    _collected(
        lambda: pl.col("m").dp.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel"),
        pl.DataFrame({"m": [{"a": 1.0}, {"a": 2.0}]}),
    ),
    "m",
)
add(P, "dpframe.collect(.dp.pram on a missing column)", pram(col="nope"), "nope")


# -- the spec: the same inputs, in-process and through the command
HUGE = setp(
    "privacy.budget.epsilon", 1e300, "release.0.statistics", [{"stat": "count", "epsilon": 1e300}]
)
spec_both("count epsilon = 1e300 (budget 1e300)", HUGE, "epsilon")
spec_case(
    "count epsilon = 1e300 (budget 10, the ledger's)",
    setp("release.0.statistics", [{"stat": "count", "epsilon": 1e300}]),
    "epsilon",
    mode="cli-release",
)
spec_case("privacy.budget.epsilon = 1.5e300", setp("privacy.budget.epsilon", 1.5e300), "epsilon")
spec_case(
    "privacy.budget.rho = 1e300",
    setp("privacy.budget", {"rho": 1e300, "delta": 1e-6}),
    "rho",
)
spec_case(
    "count epsilon = 1e-320 (subnormal)",
    setp("release.0.statistics", [{"stat": "count", "epsilon": 1e-320}]),
    "epsilon",
)
spec_case(
    "pram categories = [0, 2**70] (beyond int64)",
    setp("release.0.columns", [{"column": "code", "epsilon": 0.5, "categories": [0, 2**70]}]),
    "categories",
    kinds=("pram",),
)
spec_both("by = ['region', 'region']", setp("release.0.by", ["region", "region"]), "by")
spec_case("unknown_keys = 'dropp'", setp("release.0.unknown_keys", "dropp"), "unknown_keys")
spec_case(
    "pram public = a randomized column",
    setp("release.0.public", ["region"]),
    ("public", "region"),
    kinds=("pram",),
)
spec_case(
    "pram public = a column not in the input",
    setp("release.0.public", ["nope"]),
    "nope",
    kinds=("pram",),
)
spec_case(
    "unit = '__bound_n' (dpframe's own name)",
    setp("privacy.unit", "__bound_n", "privacy.max_rows", 2, "privacy.max_groups", 1),
    ("unit", "__bound_n"),
    data=PEOPLE.with_columns(pl.col("pid").alias("__bound_n")),
)
spec_case(
    "margins sizes: a UInt64 column holding 2**63",
    both(
        setp("margins.reg", {"path": "m.parquet", "sizes": "n"}),
        setp(
            "release.0.statistics",
            [{"stat": "mean", "column": "income", "lower": 0, "upper": 100, "epsilon": 0.5}],
        ),
    ),
    "sizes",
    extra=lambda t: REGIONS.with_columns(
        pl.Series("n", [2**63, 1, 1, 1], dtype=pl.UInt64)
    ).write_parquet(t / "m.parquet"),
)
for mode in ("plan", "cli-plan"):
    spec_case(
        "ledger made with epsilon=2, spec epsilon = 10 (says which spec field to change)",
        None,
        ("privacy.budget.epsilon",),
        mode=mode,
        extra=lambda t: dpframe.Accountant.open(t / "ledger.db", epsilon=2.0),
    )


__all__ = ["CASES"]
