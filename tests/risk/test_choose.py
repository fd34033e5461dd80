"""Choosing ε for a DR-HA target (dpframe.risk.choose) and the TVD of marginals."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import integrate, stats

from dpframe.errors import (
    DPFrameError,
    EpsilonAtEdgeWarning,
    EpsilonNotFoundError,
    InvalidParameterError,
)
from dpframe.risk.choose import DEFAULT_EPSILONS, EpsilonChoice, choose_epsilon, marginal_tvd
from dpframe.risk.measures import cell_risk

STEP = 10 ** (5 / 200)  # ratio between points of the default grid
FF_CSV = Path("/work/shared/data/drha/FFcount.csv")
FF_QIDS = ["IR", "MR", "OR", "CR", "CO"]


def risk_of(counts, eps, **kw):
    kw.setdefault("mechanism", "laplace")
    weighted = kw.pop("weighted", False)
    return cell_risk(counts, epsilon=np.atleast_1d(eps), **kw).average(weighted)


def all_homogeneous(n_cells=60, n_levels=2, seed=0):
    rng = np.random.default_rng(seed)
    counts = np.zeros((n_cells, n_levels), dtype=np.int64)
    counts[np.arange(n_cells), rng.integers(0, n_levels, n_cells)] = rng.integers(1, 9, n_cells)
    return counts


# tables whose conservative curve is not monotone (see test_non_monotone_*)
DIP = np.array([[1, 0], [50, 50]])  # 0.375 -> dips to ~0.14 near ε = 0.1 -> rises to 0.5
HUMP = np.array([[3, 0], [1, 1]])  # 0.375 -> ~0.558 -> falls back to 0.5


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("target", [0.3, 0.5, 0.9])
def test_all_homogeneous_largest_epsilon(target, weighted):
    counts = all_homogeneous()
    ch = choose_epsilon(counts, target, weighted=weighted)
    assert isinstance(ch, EpsilonChoice)
    assert ch.monotone
    assert ch.risk_at_epsilon <= target
    assert ch.risk_at_epsilon == pytest.approx(target, abs=1e-6)
    assert risk_of(counts, ch.epsilon, weighted=weighted)[0] <= target
    assert risk_of(counts, ch.epsilon * STEP, weighted=weighted)[0] > target
    assert ch.feasible_intervals == [(DEFAULT_EPSILONS[0], ch.epsilon)]
    assert ch.interval == (DEFAULT_EPSILONS[0], ch.epsilon)
    grid = ch.curve["epsilon"].to_numpy()
    assert np.all(ch.curve["risk"].to_numpy()[grid <= ch.epsilon] <= target)
    assert ch.epsilon_min_utility is None and ch.utility_curve is None
    assert "from the bottom of the grid" in ch.note


@pytest.mark.parametrize(
    ("mechanism", "delta"),
    [("gaussian", 1e-5), ("gaussian_pdp", 1e-5), ("analytic_gaussian", 1e-5)],
)
def test_gaussians(mechanism, delta):
    counts = all_homogeneous(n_levels=3)
    grid = DEFAULT_EPSILONS[DEFAULT_EPSILONS < 1] if mechanism == "gaussian" else DEFAULT_EPSILONS
    ends = risk_of(counts, grid[[0, -1]], mechanism=mechanism, delta=delta)
    target = float(ends.mean())
    ch = choose_epsilon(counts, target, mechanism=mechanism, delta=delta)
    np.testing.assert_array_equal(ch.curve["epsilon"].to_numpy(), grid)
    assert grid.size == (120 if mechanism == "gaussian" else 201)
    assert ch.monotone and ch.feasible_intervals == [(grid[0], ch.epsilon)]
    above = risk_of(counts, ch.epsilon * 1.001, mechanism=mechanism, delta=delta)[0]
    assert ch.risk_at_epsilon <= target < above


@pytest.mark.parametrize("n_levels", [2, 3])
def test_infeasible_target_reports_the_minimum(n_levels):
    counts = all_homogeneous(n_levels=n_levels)
    floor = 2.0**-n_levels
    with pytest.raises(InvalidParameterError) as info:
        choose_epsilon(counts, floor * 0.9)
    msg = str(info.value)
    assert f"{floor:.6g}" in msg and "2^-K" in msg
    assert f"{risk_of(counts, 1e-3)[0]:.6g}" in msg  # the grid's smallest value
    # between the limit 2^-K and the grid's first value: suggest a wider grid
    between = (floor + risk_of(counts, 1e-3)[0]) / 2
    with pytest.raises(InvalidParameterError, match="extend epsilons"):
        choose_epsilon(counts, between)


def test_target_above_the_curve():
    counts = all_homogeneous()
    with pytest.warns(EpsilonAtEdgeWarning, match="top of the grid"):
        ch = choose_epsilon(counts, 1.0)
    assert ch.epsilon == DEFAULT_EPSILONS[-1]
    assert ch.feasible_intervals == [(DEFAULT_EPSILONS[0], DEFAULT_EPSILONS[-1])]
    assert "every ε on the grid meets it" in ch.note


def test_non_monotone_dip_connected_from_below():
    target = 0.4
    ch = choose_epsilon(DIP, target)
    r = ch.curve["risk"].to_numpy()
    grid = ch.curve["epsilon"].to_numpy()
    assert not ch.monotone
    assert r[0] < target and r.min() < 0.2  # it dips well below the start
    assert len(ch.feasible_intervals) == 1
    lo, hi = ch.feasible_intervals[0]
    assert lo == grid[0] and hi == ch.epsilon
    assert grid[np.argmin(r)] < ch.epsilon  # the crossing is on the rising side
    assert np.all(r[grid <= ch.epsilon] <= target)
    assert risk_of(DIP, ch.epsilon)[0] <= target < risk_of(DIP, ch.epsilon * STEP)[0]
    assert "NOT monotone" in ch.note


def test_non_monotone_hump_keeps_the_lower_interval():
    """Feasible, then not, then feasible again: the answer is the top of the first stretch."""
    target = 0.52
    ch = choose_epsilon(HUMP, target)
    assert not ch.monotone
    assert len(ch.feasible_intervals) == 2
    (lo1, hi1), (lo2, hi2) = ch.feasible_intervals
    assert lo1 == DEFAULT_EPSILONS[0] and hi2 == DEFAULT_EPSILONS[-1]
    assert ch.epsilon == hi1 < lo2
    # the refined ends are crossings of the target
    for e in (hi1, lo2):
        assert risk_of(HUMP, e)[0] == pytest.approx(target, abs=1e-6)
    assert risk_of(HUMP, (hi1 * lo2) ** 0.5)[0] > target
    assert "met again" in ch.note


def test_non_monotone_dip_not_reaching_the_bottom():
    target = 0.3  # below the risk at ε = 0.001 (0.375); met only around the dip
    with pytest.warns(EpsilonAtEdgeWarning, match="MORE risk"):
        ch = choose_epsilon(DIP, target)
    assert len(ch.feasible_intervals) == 1
    lo, hi = ch.feasible_intervals[0]
    assert DEFAULT_EPSILONS[0] < lo < hi == ch.epsilon
    assert risk_of(DIP, lo)[0] == pytest.approx(target, abs=1e-6)
    assert risk_of(DIP, lo / 1.01)[0] > target
    assert "above the target" in ch.note and "MORE risk" in ch.note
    assert ch.interval == (lo, hi)


@pytest.mark.filterwarnings("ignore::dpframe.errors.EpsilonAtEdgeWarning")
def test_other_measures_and_scenario8():
    counts = np.array([[3, 0], [1, 2], [0, 5], [4, 4]])
    a = choose_epsilon(counts, 0.4, measure="expected")
    assert risk_of(counts, a.epsilon, measure="expected")[0] <= 0.4
    b = choose_epsilon(counts, 0.4, measure="shrinkage", alpha=[1.0, 1.0])
    assert risk_of(counts, b.epsilon, measure="shrinkage", alpha=[1.0, 1.0])[0] <= 0.4
    c = choose_epsilon(counts, 0.4, scenario8="records")
    assert risk_of(counts, c.epsilon, scenario8="records")[0] <= 0.4
    d = choose_epsilon(counts, 0.4, measure="marginal", size_model="poisson")
    assert d.risk_at_epsilon <= 0.4


def test_custom_grid_is_sorted_and_validated():
    counts = all_homogeneous()
    ch = choose_epsilon(counts, 0.5, epsilons=[10.0, 0.01, 1.0, 0.1])
    assert ch.curve["epsilon"].to_list() == [0.01, 0.1, 1.0, 10.0]
    assert ch.risk_at_epsilon <= 0.5
    for bad in ([1.0], [0.1, -1.0], [[0.1, 1.0]], ["a", "b"]):
        with pytest.raises(InvalidParameterError):
            choose_epsilon(counts, 0.5, epsilons=bad)
    with pytest.raises(InvalidParameterError, match="epsilon < 1"):
        choose_epsilon(counts, 0.5, mechanism="gaussian", delta=1e-5, epsilons=[0.1, 2.0])


@pytest.mark.parametrize(
    "kw",
    [
        dict(target_risk=-0.1),
        dict(target_risk=1.5),
        dict(target_risk="0.5"),
        dict(weighted="yes"),
        dict(mechanism="poisson"),
        dict(scenario8="half"),
        dict(max_tvd=0.1),  # no table
        dict(measure="shrinkage"),  # no alpha
    ],
)
def test_bad_parameters(kw):
    args = dict(target_risk=0.5)
    args.update(kw)
    with pytest.raises(DPFrameError):
        choose_epsilon(all_homogeneous(), **args)


# --------------------------------------------------------------------------- TVD


def small_table():
    return pl.DataFrame(
        {
            "a": ["x", "x", "y", "y", "z", "z"],
            "b": ["p", "q", "p", "p", "q", "q"],
            "y": ["u", "v", "u", "v", "u", "u"],
            "count": [5, 2, 4, 3, 6, 1],
        }
    )


def test_marginal_tvd_one_cell_matches_quadrature():
    """E TVD of a two-level Y marginal, Laplace, against a 2-d numerical integral."""
    t = pl.DataFrame({"a": ["x", "x"], "y": ["u", "v"], "count": [3, 1]})
    out = marginal_tvd(
        t,
        qids=["a"],
        sensitive="y",
        mechanism="laplace",
        epsilon=0.5,
        reps=20000,
        rng=1,
        levels=["u", "v"],
        orders=(1, 2),
    )
    b = 2.0

    def f(x):
        return np.exp(-abs(x) / b) / (2 * b)

    def cdf(x):
        return 0.5 * np.exp(x / b) if x < 0 else 1 - 0.5 * np.exp(-x / b)

    both, _ = integrate.dblquad(
        lambda y, x: abs(x / (x + y) - 0.75) * f(x - 3) * f(y - 1), 0, np.inf, 0, np.inf
    )
    a3, a1 = cdf(-3), cdf(-1)  # released as 0 after max(n~, 0)
    expected = a3 * a1 * 0.25 + a3 * (1 - a1) * 0.75 + (1 - a3) * a1 * 0.25 + both
    row = out.filter(pl.col("marginal") == "y").row(0, named=True)
    assert abs(row["tvd_mean"] - expected) <= 4.5 * row["tvd_se"]
    assert out.filter(pl.col("marginal") == "a")["tvd_mean"].item() == 0.0  # one QID cell
    assert out.filter(pl.col("marginal") == "a×y")["tvd_mean"].item() == row["tvd_mean"]


def test_marginal_tvd_decreases_with_epsilon():
    eps = np.logspace(-2, 2, 9)
    out = marginal_tvd(
        small_table(),
        qids=["a", "b"],
        sensitive="y",
        mechanism="laplace",
        epsilon=eps,
        reps=300,
        rng=3,
        levels=["u", "v"],
    )
    assert out.columns == ["epsilon", "order", "marginal", "tvd_mean", "tvd_se", "assessment"]
    assert out.height == eps.size * (3 + 3 + 1)
    for name, part in out.group_by("marginal"):
        part = part.sort("epsilon")
        rho = stats.spearmanr(part["epsilon"], part["tvd_mean"]).statistic
        assert rho < -0.9, (name, rho)
    top = out.filter(pl.col("epsilon") == eps[-1])["tvd_mean"]
    assert top.max() < 0.01


def test_marginal_tvd_reproducible_and_validated():
    kw = dict(qids=["a", "b"], sensitive="y", mechanism="laplace", epsilon=[0.5, 1.0])
    kw.update(levels=["u", "v"], reps=50)
    a = marginal_tvd(small_table(), rng=7, **kw)
    b = marginal_tvd(small_table(), rng=np.random.default_rng(7), **kw)
    assert a.equals(b)
    one = marginal_tvd(small_table(), rng=7, **{**kw, "epsilon": 1.0})
    # common random numbers: the ε = 1 rows do not depend on the other ε asked for
    assert one["tvd_mean"].to_list() == a.filter(pl.col("epsilon") == 1.0)["tvd_mean"].to_list()
    with pytest.raises(DPFrameError):
        marginal_tvd(small_table(), **{**kw, "orders": (4,)})
    with pytest.raises(DPFrameError):
        marginal_tvd(small_table(), **{**kw, "reps": 1})
    with pytest.raises(DPFrameError):
        marginal_tvd(small_table(), **{**kw, "levels": None})  # Y is not an Enum
    with pytest.raises(DPFrameError):
        marginal_tvd(small_table(), **{**kw, "qids": ["nope"]})


def test_utility_bound_moves_the_lower_end():
    from dpframe.risk.frame import cell_table

    table = small_table()
    counts = cell_table(table, ["a", "b"], "y", levels=["u", "v"], count="count").counts
    base = choose_epsilon(counts, 0.6, table=table, levels=["u", "v"], rng=1)
    assert base.utility_curve is not None and base.epsilon_min_utility is None
    assert base.interval[0] == DEFAULT_EPSILONS[0]
    tvd = base.utility_curve["tvd_max"].to_numpy()
    max_tvd = 0.2
    ch = choose_epsilon(
        counts, 0.6, table=table, levels=["u", "v"], max_tvd=max_tvd, rng=1, tvd_reps=200
    )
    assert ch.epsilon == base.epsilon
    lo = ch.epsilon_min_utility
    assert DEFAULT_EPSILONS[0] < lo < ch.epsilon
    assert ch.interval == (lo, ch.epsilon)
    grid = ch.curve["epsilon"].to_numpy()
    assert np.all(tvd[grid >= lo] <= max_tvd)  # the same draws: the same utility curve
    assert tvd[grid < lo].max() > max_tvd
    assert "Both hold" in ch.note
    # the table alone is enough
    again = choose_epsilon(None, 0.6, table=table, levels=["u", "v"], max_tvd=max_tvd, rng=1)
    assert again.epsilon == ch.epsilon and again.epsilon_min_utility == lo


def test_utility_and_risk_incompatible():
    table = small_table()
    ch = choose_epsilon(None, 0.35, table=table, levels=["u", "v"], max_tvd=0.05, rng=1)
    assert ch.interval is None
    assert ch.epsilon_min_utility > ch.epsilon
    assert "cannot both hold" in ch.note
    never = choose_epsilon(None, 0.35, table=table, levels=["u", "v"], max_tvd=1e-6, rng=1)
    assert never.epsilon_min_utility == np.inf and never.interval is None


def test_hump_with_utility_points_to_the_higher_interval():
    """Utility above the first feasible stretch: no interval, but the note names the
    higher stretch where both hold (one QID: default orders (1, 2, 3) skip order 3)."""
    table = pl.DataFrame({"a": ["x", "y", "y"], "y": ["u", "u", "v"], "count": [3, 1, 1]})
    ch = choose_epsilon(None, 0.52, table=table, levels=["u", "v"], max_tvd=0.1, rng=1)
    (_, hi1), (lo2, _) = ch.feasible_intervals
    assert ch.epsilon == hi1 < ch.epsilon_min_utility
    assert f"[{max(lo2, ch.epsilon_min_utility):.4g}," in ch.note
    assert ch.interval is None
    assert "cannot both hold" in ch.note and "Both are met on" in ch.note
    assert ch.utility_curve["marginal"].unique().len() <= 3


def test_table_must_match_counts():
    with pytest.raises(InvalidParameterError, match="different frequency tables"):
        choose_epsilon(
            np.array([[1, 0], [0, 2]]), 0.5, table=small_table(), levels=["u", "v"], max_tvd=0.1
        )


# ------------------------------------------------------------------- the paper's data


def read_ff() -> pl.DataFrame:
    df = pl.read_csv(FF_CSV)  # CRLF; the last header repeats "FF"
    return df.rename({df.columns[-1]: "count"})


@pytest.mark.skipif(not FF_CSV.exists(), reason="paper data not available")
def test_bankruptcy_subset_tvd_drops_sharply():
    """§5.3 / Figure 4: TVD falls sharply from ε = 0.1 to 1 and from 1 to 10."""
    df = read_ff()
    eps = [0.1, 1.0, 10.0]
    out = marginal_tvd(
        df,
        qids=FF_QIDS,
        sensitive="FF",
        mechanism="laplace",
        epsilon=eps,
        reps=200,
        rng=2022,
        levels=["A", "N", "P"],
    )
    counts = out.group_by("order").len().sort("order")["len"].to_list()
    assert counts == [6 * 3, 15 * 3, 20 * 3]  # 6 one-way, 15 two-way, 20 three-way marginals
    summary = (
        out.group_by("epsilon", "order")
        .agg(
            pl.col("tvd_mean").median().alias("median"),
            pl.col("tvd_mean").min().alias("min"),
            pl.col("tvd_mean").max().alias("max"),
        )
        .sort("order", "epsilon")
    )
    for order in (1, 2, 3):
        med = summary.filter(pl.col("order") == order).sort("epsilon")["median"].to_numpy()
        assert med[0] > 2 * med[1] > 4 * med[2]
    # every marginal improves at every step
    wide = out.pivot(on="epsilon", index="marginal", values="tvd_mean")
    assert (wide["0.1"] > wide["1.0"]).all() and (wide["1.0"] > wide["10.0"]).all()


@pytest.mark.skipif(not FF_CSV.exists(), reason="paper data not available")
def test_bankruptcy_subset_choice():
    df = read_ff()
    ch = choose_epsilon(None, 0.5, table=df, levels=["A", "N", "P"], max_tvd=0.15, rng=5)
    r = ch.curve["risk"].to_numpy()
    # the paper's asymptotes (Sec. 5.2): 54/78 homogeneous cells; lower asymptote ~0.16
    assert r[-1] == pytest.approx(54 / 78, abs=1e-3)
    assert r[0] == pytest.approx(0.165, abs=0.005)
    assert ch.interval is not None and ch.interval[0] == ch.epsilon_min_utility


def test_a_risk_falling_as_epsilon_grows_warns_loudly_at_the_top_of_the_grid():
    """Issue 32: the risk of heterogeneous cells falls as ε grows, so a low target is met
    only near the top of the grid: the answer is the grid's edge, not a risk-limited ε."""
    counts = np.array([[5, 5], [3, 4], [6, 2], [2, 7]])
    with pytest.warns(EpsilonAtEdgeWarning) as caught:
        ch = choose_epsilon(counts, 0.05)
    message = str(caught[0].message)
    assert "top of the grid" in message and "MORE risk" in message
    assert ch.epsilon == DEFAULT_EPSILONS[-1] and not ch.monotone
    assert ch.curve["risk"][0] > 0.05  # the bottom of the grid does not meet the target


def test_a_choice_inside_the_grid_from_the_bottom_does_not_warn():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", EpsilonAtEdgeWarning)
        ch = choose_epsilon(np.array([[4, 0], [0, 2], [7, 0], [1, 0]]), 0.5)
    assert DEFAULT_EPSILONS[0] < ch.epsilon < DEFAULT_EPSILONS[-1]


def test_no_epsilon_meeting_the_target_is_its_own_error():
    with pytest.raises(EpsilonNotFoundError, match=r"target_risk=0\.01 is below every value"):
        choose_epsilon(np.array([[4, 0], [0, 2]]), 0.01)


@pytest.mark.parametrize("mechanism", ["laplace", "discrete_gaussian"])
@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
def test_choose_epsilon_takes_the_sensitivity_of_drha_for_a_neighbour_relation(
    mechanism, neighbours
):
    """One rule: the same neighbour relation gives choose_epsilon and drha the same
    sensitivity (table_sensitivity), so the same risk curve; and the same default (1)."""
    from dpframe.risk.frame import drha
    from dpframe.risk.noise import table_sensitivity

    frame = pl.DataFrame({"q": ["a", "a", "b", "c", "c", "c"], "y": ["u", "v", "u", "u", "v", "v"]})
    counts = np.array([[1, 1], [1, 0], [1, 2]])
    grid = [0.1, 0.5, 1.0, 5.0]
    param = "rho" if mechanism == "discrete_gaussian" else "epsilon"
    kw = {"mechanism": mechanism, "epsilons": grid, "target_risk": 1.0}
    with pytest.warns(EpsilonAtEdgeWarning):
        by_relation = choose_epsilon(counts, neighbours=neighbours, **kw)
        by_number = choose_epsilon(
            counts, sensitivity=table_sensitivity(mechanism, neighbours), **kw
        )
        default = choose_epsilon(counts, **kw)
    assert by_relation.curve.equals(by_number.curve)
    for relation, chosen in ((neighbours, by_relation), (None, default)):
        table = drha(
            frame,
            ["q"],
            "y",
            levels=["u", "v"],
            mechanism=mechanism,
            measure="local",
            weighted=False,
            neighbours=relation,
            **{param: grid},
        )
        assert np.allclose(table.sort(param)["risk"].to_numpy(), chosen.curve["risk"].to_numpy())
    with pytest.raises(InvalidParameterError, match="neighbours= sets the sensitivity"):
        choose_epsilon(counts, 0.5, sensitivity=1.0, neighbours=neighbours)
