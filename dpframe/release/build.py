"""Spec entries -> dpframe release objects (shared by ``plan`` and ``release``)."""

from __future__ import annotations

from typing import Any

from dpframe.release.spec import StatisticSpec

__all__ = ["statistic"]


def statistic(s: StatisticSpec) -> Any:
    """The :mod:`dpframe.agg` statistic a spec entry describes."""
    from dpframe import agg

    name = {"name": s.name} if s.name else {}
    if s.stat == "count":
        return agg.count(epsilon=s.epsilon, **name)
    if s.stat == "sum":
        return agg.sum(s.column, lower=s.lower, upper=s.upper, epsilon=s.epsilon, **name)
    if s.stat == "mean":
        return agg.mean(
            s.column, lower=s.lower, upper=s.upper, epsilon=s.epsilon, method=s.method, **name
        )
    if s.stat == "proportion":
        return agg.proportion(s.column, epsilon=s.epsilon, method=s.method, **name)
    if s.stat == "var":
        return agg.var(
            s.column, lower=s.lower, upper=s.upper, epsilon=s.epsilon, method=s.method, **name
        )
    return agg.cov(
        s.x,
        s.y,
        lower_x=s.lower,
        upper_x=s.upper,
        lower_y=s.lower_y,
        upper_y=s.upper_y,
        epsilon=s.epsilon,
        method=s.method,
        **name,
    )
