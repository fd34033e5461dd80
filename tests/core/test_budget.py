"""Exact budget arithmetic: splitting an epsilon, rounding a charge up."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpframe.core.budget import split_epsilon
from tests.oracles import exact_sum


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("eps", [1.0, 0.7, 0.1, 3.3, 1e-3])
@pytest.mark.parametrize("parts", [1, 3, 6, 7, 10, 28])
def test_split_epsilon_fits_exactly(eps, parts):
    shares = split_epsilon(eps, [1.0] * parts)
    assert exact_sum(shares) <= Fraction(repr(eps))
    assert max(shares) - min(shares) <= 1e-15 * eps * parts
    w = rng(parts).uniform(0.1, 3.0, size=parts)
    shares = split_epsilon(eps, w)
    assert exact_sum(shares) <= Fraction(repr(eps))
    np.testing.assert_allclose(shares, eps * w / w.sum(), rtol=1e-12)


def test_a_budget_spent_in_decimal_shares_shows_nothing_left():
    """Three thirds of 0.2 (split_epsilon's shares) leave 1e-17 of a budget of 2 unspent:
    `dpframe ledger show` prints that as 0, not as "remaining 1e-17" (issue 32)."""
    from dpframe.core.budget import shown

    shares = split_epsilon(0.2, [1, 1, 1])
    left = 2.0 - 1.8 - float(sum(Fraction(repr(s)) for s in shares))
    assert shown(1e-17, 2.0) == "0"
    assert shown(max(left, 0.0), 2.0) == "0"
    assert shown(0.25, 2.0) == "0.25"  # what a release can still use is shown as it is
    assert shown(2e-6, 2.0) == "2e-06"
    assert shown(0.0, 0.0) == "0"


def test_ledger_show_prints_a_fully_spent_budget_as_0(tmp_path):
    from typer.testing import CliRunner

    import dpframe
    from dpframe.cli import app

    path = tmp_path / "ledger.db"
    with dpframe.Accountant.open(path, epsilon=2.0) as acct:
        for eps in [1.8, *split_epsilon(0.2, [1, 1, 1])]:
            acct.spend(eps, mechanism="laplace")
        assert 0 < acct.remaining.epsilon < 1e-15  # exact: the shares sum a hair below 0.2
    res = CliRunner().invoke(app, ["ledger", "show", str(path)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "remaining 0" in " ".join(res.output.split()), res.output
    assert "1e-17" not in res.output
