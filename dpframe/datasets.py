"""Data dpframe ships: a synthetic survey, generated deterministically.

The survey stands in for confidential microdata in the demo, the docs and the tests.
It is synthetic (no real person is in it), so its seed is no secret.
"""

from __future__ import annotations

import polars as pl

__all__ = ["AGE_BANDS", "CENSUS_REGION_SHARES", "REGIONS", "synthetic_survey"]

#: The public list of regions. "Islands" has no respondent in the survey, to show that a
#: grouped release over public margins keeps groups that are empty in the data.
REGIONS = ("North", "South", "East", "West", "Centre", "Islands")
AGE_BANDS = ("18-34", "35-54", "55+")
#: Public region shares from an (imaginary) earlier census: a prior PRAM may use freely.
CENSUS_REGION_SHARES = {
    "North": 0.28,
    "South": 0.26,
    "East": 0.2,
    "West": 0.15,
    "Centre": 0.1,
    "Islands": 0.01,
}


def synthetic_survey(n: int = 200_000, seed: int = 20261122) -> pl.DataFrame:
    """A deterministic synthetic survey of ``n`` respondents.

    Columns: ``region`` (Enum of :data:`REGIONS`; nobody lives in "Islands"),
    ``age_band`` (Enum), ``age`` (18-90), ``income`` (log-normal, >= 0),
    ``satisfaction`` and ``trust`` (0-10 scores).

    Examples
    --------
    >>> from dpframe.datasets import synthetic_survey
    >>> synthetic_survey(1000).height
    1000
    """
    import numpy as np

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    populated = np.array(REGIONS[:-1])
    region = rng.choice(populated, size=n, p=[0.3, 0.25, 0.2, 0.15, 0.1])
    age = np.clip(np.round(rng.gamma(3.0, 10.0, size=n) + 18), 18, 90).astype(np.int64)
    band = np.where(age < 35, AGE_BANDS[0], np.where(age < 55, AGE_BANDS[1], AGE_BANDS[2]))
    income = np.round(rng.lognormal(10.2 + 0.006 * (age - 18), 0.6, size=n), 2)
    satisfaction = np.clip(np.round(rng.normal(6.5, 2.0, size=n)), 0, 10)
    trust = np.clip(np.round(0.5 * satisfaction + rng.normal(2.5, 1.8, size=n)), 0, 10)
    return pl.DataFrame(
        {
            "region": pl.Series(region, dtype=pl.Enum(REGIONS)),
            "age_band": pl.Series(band, dtype=pl.Enum(AGE_BANDS)),
            "age": age,
            "income": income,
            "satisfaction": satisfaction,
            "trust": trust,
        }
    )
