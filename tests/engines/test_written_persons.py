"""The check on what a person-level randomizing pass wrote, brute-forced: every small
dataset of person ids (with several rows per person, nulls and NaN among them)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import polars as pl
import pytest

from dpframe.core.units import PrivacyUnit
from dpframe.engines.polars import check_written_persons
from dpframe.errors import InvalidDataError

IDS = [1.0, 2.0, math.nan, math.inf, None]


@pytest.mark.parametrize("max_rows", [1, 2, 3])
def test_every_small_dataset_of_ids_is_published_only_within_max_rows(max_rows):
    unit = PrivacyUnit("pid", max_rows=max_rows)
    for rows in range(1, 5):
        for ids in itertools.product(IDS, repeat=rows):  # 780 datasets
            written = pl.LazyFrame({"pid": list(ids)}, schema={"pid": pl.Float64})
            missing = any(i is None or not math.isfinite(i) for i in ids)
            most = max(Counter(ids).values())
            should_refuse = missing or most > max_rows
            try:
                check_written_persons(written, unit)
                refused = False
            except InvalidDataError as exc:
                refused = True
                assert "nothing was published" in str(exc)
            assert refused == should_refuse, (ids, max_rows)


@pytest.mark.parametrize("person", ["n", "count", "most"])
def test_a_person_column_named_like_the_count_is_checked(person):
    """The count of rows per person is the check's own column, whatever the person
    column's name (a person named ``n`` failed the PRAM write after its charge)."""
    unit = PrivacyUnit(person, max_rows=2)
    check_written_persons(pl.LazyFrame({person: [1, 1, 2]}), unit)
    with pytest.raises(InvalidDataError, match="nothing was published"):
        check_written_persons(pl.LazyFrame({person: [1, 1, 1]}), unit)
