"""The griffe extensions of the reference site: the docstrings' Sphinx roles
(``:func:`dpframe.collect```, ``:class:`~dpframe.core.records.Budget```) shown as code
(``dpframe.collect``, ``Budget``), as Sphinx shows them, instead of as raw text; and the
``.dp`` namespace's forwarded methods shown as methods."""

from __future__ import annotations

import ast
import inspect
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


class Forwards(griffe.Extension):
    """The ``.dp`` namespace's methods (``name = forward(function, doc)`` in
    ``dpframe/polars/namespace.py``) shown as the methods they are at run time: the
    function's parameters after its receiver, and the docstring ``doc``."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "dpframe":
            return
        module = pkg["polars.namespace"]
        for cls in module.classes.values():
            for name, attr in list(cls.attributes.items()):
                call = attr.value
                if not (isinstance(call, griffe.ExprCall) and str(call.function) == "forward"):
                    continue
                target, doc = call.arguments
                function = module[str(target)].final_target
                receiver = griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)
                method = griffe.Function(
                    name,
                    lineno=attr.lineno,
                    endlineno=attr.endlineno,
                    parameters=griffe.Parameters(receiver, *list(function.parameters)[1:]),
                    returns=function.returns,
                    docstring=griffe.Docstring(
                        _ROLE.sub(_code, inspect.cleandoc(ast.literal_eval(str(doc)))),
                        parser=function.docstring.parser,
                        parser_options=function.docstring.parser_options,
                    ),
                )
                cls.set_member(name, method)
