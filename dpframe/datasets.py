"""Data dpframe ships: a synthetic survey, generated deterministically.

The survey stands in for confidential microdata in the demo, the docs and the tests.
It is synthetic (no real person is in it), so its seed is no secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import polars as pl

__all__ = [
    "AGE_BANDS",
    "CENSUS_REGION_SHARES",
    "DRHA_TABLES",
    "REGIONS",
    "DRHAData",
    "drha_table",
    "synthetic_survey",
]

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
    ``satisfaction`` and ``trust`` (0-10 scores), ``household`` (an id shared by the 1-5
    respondents of one household, all in one region: several rows per household, for
    person-level releases).

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
    # households: consecutive respondents of one region, 1 to 5 of them
    order = np.argsort(region, kind="stable")
    sizes = rng.choice(np.arange(1, 6), size=n, p=[0.3, 0.3, 0.2, 0.12, 0.08])
    starts = np.cumsum(sizes) - sizes
    first = np.zeros(n, dtype=bool)
    first[starts[starts < n]] = True
    first |= np.r_[True, region[order][1:] != region[order][:-1]]  # never across regions
    household = np.empty(n, dtype=np.int64)
    household[order] = np.cumsum(first) - 1
    return pl.DataFrame(
        {
            "region": pl.Series(region, dtype=pl.Enum(REGIONS)),
            "age_band": pl.Series(band, dtype=pl.Enum(AGE_BANDS)),
            "age": age,
            "income": income,
            "satisfaction": satisfaction,
            "trust": trust,
            "household": household,
        }
    )


@dataclass(frozen=True)
class DRHAData:
    """A shipped DR-HA frequency table: one row per QID x Y combination, with a count."""

    name: str
    frame: pl.DataFrame
    qids: tuple[str, ...]
    sensitive: str
    levels: tuple[str, ...]
    count: str = "count"


#: name -> (file, QIDs, sensitive attribute, its levels); see dpframe/data/drha/README.md
DRHA_TABLES = {
    "bankruptcy": ("bankcount.csv", ("IR", "MR", "FF", "CR", "CO", "OR"), "class", ("B", "NB")),
    "bankruptcy_ff": ("FFcount.csv", ("IR", "MR", "OR", "CR", "CO"), "FF", ("A", "N", "P")),
    "adult": (
        "adultcount.csv",
        ("age", "relationship", "education", "race", "sex", "hours-per-week"),
        "income",
        ("<=50K", ">50K"),
    ),
}


def drha_table(name: str) -> DRHAData:
    """Load one of the DR-HA paper's tables (shipped with dpframe, MIT licence).

    ``"bankruptcy"`` (N = 103 cells, all homogeneous, K = 2), ``"bankruptcy_ff"`` (the
    paper's subset: 78 cells, 54 homogeneous, K = 3) or ``"adult"`` (5,009 QID cells,
    965 heterogeneous; the paper treats its 5,974 rows as cells). The sensitive
    attribute is an Enum of its levels; Adult's leading spaces are stripped.

    Examples
    --------
    >>> from dpframe.datasets import drha_table
    >>> t = drha_table("bankruptcy")
    >>> t.frame.height, t.frame["count"].sum(), t.levels
    (103, 250, ('B', 'NB'))
    """
    if name not in DRHA_TABLES:
        from dpframe.errors import InvalidParameterError

        raise InvalidParameterError(
            f"name must be one of {sorted(DRHA_TABLES)} (the DR-HA paper's tables), got {name!r}"
        )
    file, qids, sensitive, levels = DRHA_TABLES[name]
    path = resources.files("dpframe").joinpath("data", "drha", file)
    with resources.as_file(path) as p:
        raw = pl.read_csv(p, infer_schema_length=0)  # all strings; the count is cast below
    cols = raw.columns
    frame = raw.rename({cols[-1]: "count"}).with_columns(
        pl.col(c).str.strip_chars() for c in cols[:-1]
    )
    frame = frame.with_columns(
        pl.col("count").cast(pl.Int64), pl.col(sensitive).cast(pl.Enum(list(levels)))
    )
    return DRHAData(name, frame, qids, sensitive, levels)
