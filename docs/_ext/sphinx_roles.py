"""A griffe extension for the reference site: the docstrings' Sphinx roles
(``:func:`dpframe.collect```, ``:class:`~dpframe.core.records.Budget```) shown as code
(``dpframe.collect``, ``Budget``), as Sphinx shows them, instead of as raw text."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2).strip()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring griffe loads (the site only; the code is not
    changed)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
