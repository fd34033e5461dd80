"""The neighbour relation a budget is made for, and what each relation permits.

An accountant is created for one relation (``docs/privacy.md``, "Neighbouring
datasets"):

* ``"substitute"`` -- same size, one record changed (bounded DP; the default). A record
  may change its values and its group, so it can change two rows of a per-group
  release, unless group membership is public.
* ``"add_remove"`` -- one record added or removed (unbounded DP). The number of
  records, and every group's size, then differ between neighbours: they are private.

Three kinds of release need ``"substitute"``, each refused otherwise by
:func:`require_substitute` with the reason and the way out:

* ``"public sizes"`` -- releases calibrated to declared public group sizes;
* ``"dataset size"`` -- releases calibrated to the public dataset size ``n``
  (covariance matrices, proportion vectors);
* ``"pram"`` -- PRAM protects the values of records, not their presence.

Examples
--------
>>> from dpframe.core.neighbours import groups_changed, require_substitute
>>> groups_changed("substitute", public_groups=False), groups_changed("add_remove", False)
(2, 1)
>>> require_substitute("add_remove", "pram", argument="accountant")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpframe.errors.InvalidParameterError: accountant: PRAM protects the values of records, ...
"""

from __future__ import annotations

from dpframe.core.advice import advise
from dpframe.core.constraints import check
from dpframe.errors import InvalidParameterError

__all__ = [
    "MEANING",
    "OTHER",
    "REASONS",
    "SHORT",
    "groups_changed",
    "require_substitute",
    "short_reason",
]

#: Why a release needs substitute neighbours, by kind (the fix follows, in the words of
#: the entry point: :func:`_fix`).
REASONS = {
    "public sizes": (
        "group sizes cannot be public under neighbours='add_remove' (a neighbouring dataset "
        "has one record more or less); drop the public sizes or {fix}."
    ),
    "dataset size": (
        "this release needs the dataset size n to be public, which it is not under "
        "neighbours='add_remove'; {fix}."
    ),
    "pram": (
        "PRAM protects the values of records, not their presence: it is not differentially "
        "private under add/remove neighbours. {Fix}."
    ),
}


#: The other relation: a plan shows what each statistic would cost under it.
OTHER = {"substitute": "add_remove", "add_remove": "substitute"}

#: Each relation in words (plans and reports).
MEANING = {
    "substitute": "one person's values changed; the number of people is public",
    "add_remove": "one person added or removed; every size is private",
}

#: Why a release needs substitute neighbours, in a table cell (a summary's ``other``).
SHORT = {
    "public sizes": "group sizes are public only under substitute",
    "dataset size": "the dataset size is public only under substitute",
    "pram": "PRAM protects values, not presence",
}


def short_reason(message: str) -> str | None:
    """The :data:`SHORT` reason of a refusal by :func:`require_substitute` (``None``: the
    message is not one of its refusals).

    Examples
    --------
    >>> short_reason("neighbours: " + REASONS["pram"])
    'PRAM protects values, not presence'
    """
    # a reason's words up to its fix (which the entry point words: :func:`_fix`)
    return next((SHORT[k] for k, v in REASONS.items() if v.split("{")[0] in message), None)


def _fix() -> str:
    return advise(
        python="use an accountant with neighbours='substitute'",
        spec='set privacy.neighbours = "substitute" in the spec',
    )


def require_substitute(neighbours: str, why: str, *, argument: str) -> None:
    """Refuse a release that needs substitute neighbours under any other relation.

    ``why`` is a key of :data:`REASONS`; ``argument`` is named first in the message.
    """
    check("neighbours", neighbours)
    if neighbours != "substitute":
        fix = _fix()
        reason = REASONS[why].format(fix=fix, Fix=fix[:1].upper() + fix[1:])
        raise InvalidParameterError(f"{argument}: {reason}")


def groups_changed(neighbours: str, public_groups: bool) -> int:
    """How many disjoint groups (rows of a per-group release) one record can change.

    One under add/remove (the record is in one group). Under substitution two -- the
    record may leave one group and join another -- unless group membership is public.
    """
    check("neighbours", neighbours)
    return 2 if neighbours == "substitute" and not public_groups else 1
