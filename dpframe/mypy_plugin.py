"""A mypy plugin that shows mypy the ``.dp`` and ``.dpf`` namespaces dpframe registers.

polars registers a namespace at run time (``pl.api.register_expr_namespace``), which a
static type checker cannot see: without this plugin mypy reports ``"Expr" has no attribute
"dp"``. Enable it in the project's mypy configuration::

    # pyproject.toml
    [tool.mypy]
    plugins = ["dpframe.mypy_plugin"]

Then ``pl.col("x").dp`` is a :class:`dpframe.polars.namespace.ExprDP`,
``frame.dp`` a :class:`~dpframe.polars.namespace.DataFrameDP` and ``lazy.dp`` a
:class:`~dpframe.polars.namespace.LazyFrameDP`, so every argument and return type is
checked. Type checkers without plugins (pyright, IDEs) can use the typed functions the
namespace forwards to (``dpframe.group_by(lazy, ...)``, ``dpframe.laplace(expr, ...)``),
which are the API proper.

How it works: while mypy analyses polars it adds two attributes, ``dp`` and ``dpf``, to
``Expr``, ``DataFrame`` and ``LazyFrame``; when a program reads one of them the plugin
gives it dpframe's namespace class. If the program never imports dpframe the attribute
is an error, as it would be at run time.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import MDEF, SymbolTableNode, TypeInfo, Var
from mypy.plugin import AttributeContext, ClassDefContext, Plugin
from mypy.types import AnyType, Instance, Type, TypeOfAny

from dpframe.version import __version__

#: the polars classes that get a namespace, and dpframe's class for each
NAMESPACES = {
    "polars.expr.expr.Expr": "dpframe.polars.namespace.ExprDP",
    "polars.dataframe.frame.DataFrame": "dpframe.polars.namespace.DataFrameDP",
    "polars.lazyframe.frame.LazyFrame": "dpframe.polars.namespace.LazyFrameDP",
}
#: the attribute names dpframe registers (``.dpf`` always; ``.dp`` unless taken)
NAMES = ("dp", "dpf")
NAMESPACE_MODULE = "dpframe.polars.namespace"


def _add_attributes(ctx: ClassDefContext) -> None:
    """Add ``dp`` and ``dpf`` to a polars class while mypy analyses polars."""
    info = ctx.cls.info
    for name in NAMES:
        if name in info.names:
            continue  # polars itself defines it, or a second pass over the class
        var = Var(name, AnyType(TypeOfAny.special_form))
        var.info = info
        var._fullname = f"{info.fullname}.{name}"
        var.is_property = True  # read-only, like the runtime accessor
        info.names[name] = SymbolTableNode(MDEF, var, plugin_generated=True)


def _namespace_type(class_name: str) -> Callable[[AttributeContext], Type]:
    def hook(ctx: AttributeContext) -> Type:
        module = getattr(ctx.api, "modules", {}).get(NAMESPACE_MODULE)
        if module is None:
            ctx.api.fail(
                "dpframe's namespace is registered by `import dpframe`; this program does "
                "not import it",
                ctx.context,
            )
            return AnyType(TypeOfAny.from_error)
        symbol = module.names.get(class_name.rpartition(".")[2])
        if symbol is None or not isinstance(symbol.node, TypeInfo):
            # dpframe's own modules, checked before the namespace module is analysed
            return AnyType(TypeOfAny.special_form)
        return Instance(symbol.node, [])

    return hook


class DPFramePlugin(Plugin):
    """Adds ``.dp`` / ``.dpf`` to polars' ``Expr``, ``DataFrame`` and ``LazyFrame``."""

    def get_customize_class_mro_hook(
        self, fullname: str
    ) -> Callable[[ClassDefContext], None] | None:
        return _add_attributes if fullname in NAMESPACES else None

    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        owner, _, name = fullname.rpartition(".")
        if name in NAMES and owner in NAMESPACES:
            return _namespace_type(NAMESPACES[owner])
        return None

    def report_config_data(self, ctx: object) -> str:
        # mypy keeps polars' analysis in its cache: a new dpframe version re-analyses it
        return f"dpframe {__version__}"


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the plugin class for this mypy ``version``."""
    return DPFramePlugin
