"""What a query holding ``.dp`` releases lets out, decided from its plan, never from values.

The runner (:mod:`dpframe.polars.runner`) hands this module the query's plan as polars
serializes it (the DSL, MessagePack-encoded; the data frames inside it are skipped, never
decoded) with each dpframe release replaced by a marker. :func:`check_lineage` walks the
plan from its scans to its output and follows every column: what it depends on (its
*atoms*: a scanned column, a release's output, the row position), whether each of its
values belongs to one record that gives no other row (*aligned*), and whether it is
exactly a release's output. It refuses, before anything is read or charged:

1. **an output column that is neither a release's own output** -- the release at the top
   of its expression, followed by nothing but renames and selections -- **nor named in
   ``public``**;
2. **any use of a release's output other than selecting or renaming it** (a ``when``, a
   ``diff``, a filter or sort key, a join key, an aggregate): post-processing happens after
   the run, on what it released;
3. **a row-wise release (PRAM) whose input is not aligned**: an input computed with anything but
   row-wise functions of one row's own values (``shift``, ``sort``, windows, aggregates,
   ``explode``, a join that repeats a record, a concat that reads a source twice), which
   would give one record's value to several rows or order the values by the data;
4. **rows selected, limited, joined, grouped, de-duplicated or ordered by a column that is
   not published as it is** (``public``): a filter on a private column publishes how many
   rows pass it, a sort on it publishes the order. The row position (``with_row_index``)
   and literals are public.

Anything the walk does not know (a plan node or expression it cannot follow, a selector
by dtype, a struct unnested) is refused: the check fails closed, and the names it derives
are compared with polars' own output schema.

Examples
--------
>>> import polars as pl, dpframe
>>> lf = pl.LazyFrame({"c": ["a", "b"], "income": [1, 2]})
>>> cats = ["a", "b"]
>>> with dpframe.Accountant(epsilon=1.0):
...     q = lf.filter(pl.col("income") > 1).select(pl.col("c").dp.pram(0.5, categories=cats))
...     dpframe.collect(q)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpframe.errors.LineageError: the query selects rows by column(s) ['income'] (a filter), ...
"""

from __future__ import annotations

import glob
import io
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dpframe.errors import LineageError

__all__ = ["MARKER", "Lineage", "check_lineage", "marker"]

#: the bytes that stand for the i-th dpframe release in a serialized plan
MARKER = b"\x00DPFRAME-RELEASE:"
_MARKER_RE = re.compile(re.escape(MARKER) + rb"(\d+);")

_NOTHING = " Nothing was charged."


def marker(i: int) -> bytes:
    """What the runner's serializer writes for the ``i``-th release of a plan."""
    return MARKER + str(i).encode() + b";"


# -- atoms and columns -------------------------------------------------------------------

#: an atom: ("col", source, name), ("release", i), ("index",) or ("external",)
Atom = tuple[Any, ...]
_INDEX: Atom = ("index",)
_EXTERNAL: Atom = ("external",)


@dataclass(frozen=True)
class Col:
    """One column at one step of the plan."""

    atoms: frozenset[Atom]
    #: each value is one record's own, and no record gives two rows
    aligned: bool
    #: exactly the output of release ``i`` (nothing computed after it)
    release: int | None = None
    #: exactly this scanned column, renamed at most (publishing it publishes the atom)
    source: Atom | None = None

    @property
    def released(self) -> frozenset[Atom]:
        return frozenset(a for a in self.atoms if a[0] == "release")


@dataclass
class Frame:
    """The columns of one plan node, in order, and the sources it reads."""

    cols: dict[str, Col]
    sources: frozenset[Any] = frozenset()
    releases: frozenset[int] = frozenset()


@dataclass
class Lineage:
    """What :func:`check_lineage` found: the output columns and the releases in use."""

    columns: dict[str, Col]
    #: the release indices that reach the output
    released: dict[str, int] = field(default_factory=dict)
    #: every release index met in the plan
    releases: frozenset[int] = frozenset()


# -- reading the plan --------------------------------------------------------------------


def _read_plan(serialized: bytes) -> tuple[bytes, Any, list[Any]]:
    """The header, root reference and plan arena of a serialized LazyFrame.

    The ``dataframes`` arena (the data of in-memory frames) is skipped without decoding.
    """
    import msgpack

    start = serialized.find(b"\xa4root")
    if start < 1:
        raise LineageError("the query's plan has an unknown layout; it cannot be checked")
    header = serialized[: start - 1]
    unpacker = msgpack.Unpacker(
        io.BytesIO(serialized[start - 1 :]),
        raw=False,
        strict_map_key=False,
        max_buffer_size=0,
    )
    root, plans = None, None
    for _ in range(unpacker.read_map_header()):
        key = unpacker.unpack()
        if key == "root":
            root = unpacker.unpack()
        elif key == "dsl_plans":
            plans = unpacker.unpack()
        else:
            unpacker.skip()
    if root is None or plans is None:
        raise LineageError("the query's plan has an unknown layout; it cannot be checked")
    return header, root, plans


def _one(d: Any, what: str) -> tuple[str, Any]:
    if isinstance(d, str):
        return d, None
    if isinstance(d, dict) and len(d) == 1:
        return next(iter(d.items()))
    raise LineageError(f"the runner cannot follow {what} {str(d)[:80]!r} in the query")


# row-wise functions of one row's values (polars' DSL names); anything else is not aligned
_ELEMENTWISE = {
    "Abs", "Negate", "Sign", "Floor", "Ceil", "Round", "Clip", "Pow", "Log", "Log1p", "Exp",
    "Trigonometry", "FillNull", "Coalesce", "AsStruct", "Replace", "ReplaceStrict", "Hash",
    "MinHorizontal", "MaxHorizontal", "SumHorizontal", "MeanHorizontal", "Cut",
    "TemporalExpr", "StructExpr", "ListExpr", "ArrayExpr", "BinaryExpr", "Cast",
}  # fmt: skip
_ELEMENTWISE_VARIANTS = {
    "Boolean": {
        "IsNull", "IsNotNull", "Not", "IsNan", "IsNotNan", "IsFinite", "IsInfinite", "IsIn",
        "IsBetween", "AllHorizontal", "AnyHorizontal", "IsClose",
    },
    "StringExpr": {
        "Uppercase", "Lowercase", "Titlecase", "StripChars", "StripCharsStart",
        "StripCharsEnd", "StripPrefix", "StripSuffix", "Slice", "Head", "Tail", "Contains",
        "StartsWith", "EndsWith", "Replace", "LenChars", "LenBytes", "ConcatHorizontal",
        "ZFill", "PadStart", "PadEnd", "ToInteger", "Strptime", "Find", "CountMatches",
        "Extract", "ContainsAny", "ReplaceMany", "Reverse", "Split",
    },
}  # fmt: skip


def _elementwise(function: Any) -> bool:
    name, value = _one(function, "function")
    if name in _ELEMENTWISE:
        return True
    variants = _ELEMENTWISE_VARIANTS.get(name)
    if variants is None:
        return False
    variant, _ = _one(value, "function")
    return variant in variants


#: the plan steps the walk follows (polars' DSL name -> method of _Walk)
_STEPS = {
    "DataFrameScan": "_memory_scan",
    "Scan": "_file_scan",
    "Select": "_select",
    "HStack": "_with_columns",
    "Filter": "_filter",
    "Sort": "_sort",
    "Slice": "_slice",
    "Cache": "_cache",
    "Distinct": "_unique",
    "GroupBy": "_group_by",
    "Join": "_join",
    "Union": "_concat",
    "HConcat": "_hconcat",
    "MapFunction": "_map_function",
}


class _Walk:
    def __init__(self, plans: list[Any], header: bytes, per_record: frozenset[int]) -> None:
        self.plans = plans
        self.header = header
        self.per_record = per_record
        self.frames: dict[int, Frame] = {}
        self.met: set[int] = set()
        self.row_keys: list[tuple[str, frozenset[Atom]]] = []

    # -- plan nodes ------------------------------------------------------------------

    def plan(self, ref: Any) -> Frame:
        """The frame a plan node gives (``ref``: an arena reference or the node itself)."""
        if isinstance(ref, dict) and set(ref) == {"idx", "version"}:
            idx = ref["idx"]
            if idx in self.frames:  # the same sub-query read at two places
                frame = self.frames[idx]
                if frame.releases:
                    raise LineageError(
                        "a sub-query holding a .dp release is used at more than one place (a "
                        "concat or join of a query with itself): each place would randomize "
                        "the same records again under one charge. Build one query per "
                        "release." + _NOTHING
                    )
                return frame
            frame = self.step(self.plans[idx]["value"])
            self.frames[idx] = frame
            return frame
        return self.step(ref)

    def step(self, node: Any) -> Frame:
        kind, body = _one(node, "plan step")
        step = _STEPS.get(kind)
        method = getattr(self, step) if step else None
        if method is None:
            raise LineageError(
                f"the runner cannot follow a {kind} step in a query holding a .dp release; "
                "run that step in a separate query (before the release, or on the released "
                "table)." + _NOTHING
            )
        frame: Frame = method(body)
        return frame

    def _scan_frame(self, names: Sequence[str], source: Any) -> Frame:
        cols = {
            n: Col(frozenset({("col", source, n)}), True, source=("col", source, n)) for n in names
        }
        return Frame(cols, frozenset({source}))

    def _memory_scan(self, body: Any) -> Frame:
        names = list(body["schema"]["fields"])
        return self._scan_frame(names, ("df", body["df"]["idx"]))

    def _file_scan(self, body: Any) -> Frame:
        import msgpack

        sources = body.get("sources")
        paths = sources.get("Paths") if isinstance(sources, dict) else None
        if not paths:
            raise LineageError(
                "the query reads a source the runner cannot identify (not files); "
                "nothing was charged"
            )
        expanded: set[str] = set()
        for p in paths:
            path = p["inner"] if isinstance(p, dict) else p
            hits = glob.glob(path) if glob.has_magic(path) else [path]
            expanded.update(os.path.realpath(h) for h in hits)
        one = {
            "root": {"idx": 1, "version": 1},
            "dataframes": [{"value": None, "version": 0}],
            "dsl_plans": [{"value": None, "version": 0}, {"value": {"Scan": body}, "version": 1}],
        }
        try:
            lf = pl.LazyFrame.deserialize(
                io.BytesIO(self.header + msgpack.packb(one, use_bin_type=True))
            )
            names = lf.collect_schema().names()
        except Exception as exc:
            raise LineageError(
                f"the runner cannot read the schema of a scan ({type(exc).__name__}: {exc})."
                + _NOTHING
            ) from None
        return self._scan_frame(names, ("files", frozenset(expanded)))

    def _select(self, body: Any) -> Frame:
        frame = self.plan(body["input"])
        return self._project(frame, body["expr"], keep=False)

    def _with_columns(self, body: Any) -> Frame:
        frame = self.plan(body["input"])
        return self._project(frame, body["exprs"], keep=True)

    def _project(self, frame: Frame, exprs: list[Any], *, keep: bool) -> Frame:
        cols = dict(frame.cols) if keep else {}
        releases = set(frame.releases)
        for e in exprs:
            for name, col in self.top(e, frame, releases):
                cols[name] = col
        return Frame(cols, frame.sources, frozenset(releases))

    def _filter(self, body: Any) -> Frame:
        frame = self.plan(body["input"])
        self.key(body["predicate"], frame, "selects rows by", "a filter")
        return frame

    def _sort(self, body: Any) -> Frame:
        frame = self.plan(body["input"])
        for e in body["by_column"]:
            self.key(e, frame, "orders rows by", "a sort")
        return frame

    def _slice(self, body: Any) -> Frame:
        return self.plan(body["input"])

    def _cache(self, body: Any) -> Frame:
        return self.plan(body["input"])

    def _unique(self, body: Any) -> Frame:
        frame = self.plan(body["input"])
        subset = body.get("options", {}).get("subset")
        if subset is None:
            atoms = frozenset().union(*(c.atoms for c in frame.cols.values()))
            self._row_key(atoms, frame, "selects rows by", "unique()")
        else:
            for e in subset:
                self.key(e, frame, "selects rows by", "unique()")
        return frame

    def _group_by(self, body: Any) -> Frame:
        frame = self.plan(body["input"])
        if body.get("apply") is not None:
            raise LineageError("the query groups with a Python function." + _NOTHING)
        cols: dict[str, Col] = {}
        for e in body["keys"]:
            for name, col in self.values(e, frame, "groups rows by", "group_by()"):
                self._row_key(col.atoms, frame, "groups rows by", "group_by()")
                cols[name] = Col(col.atoms, False, source=col.source)
        for e in body["aggs"]:
            for name, col in self.values(e, frame, "aggregates", "group_by().agg()"):
                cols[name] = Col(col.atoms, False)
        return Frame(cols, frame.sources, frame.releases)

    def _join(self, body: Any) -> Frame:
        left = self.plan(body["input_left"])
        right = self.plan(body["input_right"])
        args = body["options"]["args"]
        how, _ = _one(args["how"], "join type")
        condition, on = _one(body.get("condition"), "join condition")
        if condition != "Equi":
            raise LineageError(
                f"the runner follows equi-joins only, not a {condition} join." + _NOTHING
            )
        left_on, right_on = on["left_on"], on["right_on"]
        validation = args.get("validation")
        # a left join that matches each left row at most once selects no left row: its
        # keys only decide which right values are attached (published only if public)
        selects = not (how == "Left" and validation in ("ManyToOne", "OneToOne"))
        selects = selects or bool(right.releases)  # released rows picked by the left keys
        for e, side in [*((e, left) for e in left_on), *((e, right) for e in right_on)]:
            if selects:
                self.key(e, side, "joins rows on", "a join")
            else:
                self.values(e, side, "joins rows on", "a join")
        shared = bool(left.sources & right.sources)
        # a record repeats when a row matches several rows of the other side
        left_once = validation in ("ManyToOne", "OneToOne") and not shared
        right_once = validation in ("OneToMany", "OneToOne") and not shared
        if how in ("Semi", "Anti"):
            return Frame(dict(left.cols), left.sources | right.sources, left.releases)
        if how == "Cross":
            left_once = right_once = False
        cols = {n: Col(c.atoms, c.aligned and left_once, c.release, c.source)
                for n, c in left.cols.items()}  # fmt: skip
        key_names = {_simple_name(e) for e in right_on}
        coalesce = args.get("coalesce")
        drop_keys = how in ("Inner", "Left") and coalesce != "KeepColumns"
        suffix = args.get("suffix") or "_right"
        # a right value is attached by the left row's key: it depends on that key too
        key_atoms = frozenset().union(*(self.value(e, left).atoms for e in left_on))
        for n, c in right.cols.items():
            if drop_keys and n in key_names:
                continue
            name = n + suffix if n in cols else n
            cols[name] = Col(c.atoms | key_atoms, c.aligned and right_once, c.release)
        return Frame(cols, left.sources | right.sources, left.releases | right.releases)

    def _concat(self, body: Any) -> Frame:
        frames = [self.plan(r) for r in body["inputs"]]
        first = frames[0]
        seen: set[Any] = set()
        disjoint = True
        for f in frames:
            if seen & f.sources:
                disjoint = False
            seen |= f.sources
        cols = {}
        for i, name in enumerate(first.cols):
            parts = [list(f.cols.values())[i] for f in frames if i < len(f.cols)]
            atoms = frozenset().union(*(p.atoms for p in parts))
            cols[name] = Col(atoms, disjoint and all(p.aligned for p in parts))
        releases = frozenset().union(*(f.releases for f in frames))
        return Frame(cols, frozenset(seen), releases)

    def _hconcat(self, body: Any) -> Frame:
        frames = [self.plan(r) for r in body["inputs"]]
        cols: dict[str, Col] = {}
        for f in frames:
            cols.update(f.cols)
        sources = frozenset().union(*(f.sources for f in frames))
        return Frame(cols, sources, frozenset().union(*(f.releases for f in frames)))

    def _map_function(self, body: Any) -> Frame:
        frame = self.plan(body["input"])
        kind, spec = _one(body["function"], "step")
        if kind == "RowIndex":
            cols = {spec["name"]: Col(frozenset({_INDEX}), True, source=_INDEX), **frame.cols}
            return Frame(cols, frame.sources, frame.releases)
        if kind == "Rename":
            mapping = dict(zip(spec["existing"], spec["new"], strict=True))
            cols = {mapping.get(n, n): c for n, c in frame.cols.items()}
            return Frame(cols, frame.sources, frame.releases)
        if kind in ("Rechunk",):
            return frame
        if kind == "Explode":
            cols = {n: Col(c.atoms, False) for n, c in frame.cols.items()}
            return Frame(cols, frame.sources, frame.releases)
        raise LineageError(
            f"the runner cannot follow a {kind} step in a query holding a .dp release; run it "
            "in a separate query (before the release, or on the released table)." + _NOTHING
        )

    # -- expressions ---------------------------------------------------------------

    def top(self, e: Any, frame: Frame, releases: set[int]) -> list[tuple[str, Col]]:
        """The columns a select/with_columns expression gives: a release at its top, or
        values (a release anywhere else is refused)."""
        name, inner = _strip_names(e)
        release = _release_index(inner)
        if release is None:
            return self.values(e, frame, "computes", "an expression")
        if release in self.met:
            raise LineageError(
                "a .dp release is used at more than one place of the query: each place "
                "would randomize the same records again under one charge. Build one "
                "expression per use." + _NOTHING
            )
        self.met.add(release)
        releases.add(release)
        _, body = _one(inner, "expression")
        inputs = body["input"]
        src = self.value(inputs[0], frame) if len(inputs) == 1 else None
        if src is None:
            raise LineageError("a .dp release with several inputs cannot be followed." + _NOTHING)
        if src.released:
            raise LineageError(
                "a .dp release is applied to the output of another release; release the "
                "raw column once (post-processing happens after the run)." + _NOTHING
            )
        if release in self.per_record and not src.aligned:
            raise LineageError(
                f"the input of the .dp release named {name or '?'!r} is not computed row by "
                "row from each record's own values (it uses shift, sort, a window, an "
                "aggregate, explode, or rows a join or concat repeats): one record's value "
                "could reach several rows, or the rows be ordered by the data. Release a "
                "column computed with row-wise expressions only." + _NOTHING
            )
        out = Col(frozenset({("release", release)}), True, release=release)
        if name is None:
            name = _first_column(inputs[0]) or "literal"
        return [(name, out)]

    def values(self, e: Any, frame: Frame, verb: str, what: str) -> list[tuple[str, Col]]:
        """Each column of a (possibly multi-column) expression, named."""
        out = []
        for one in _expand(e, frame):
            col = self.value(one, frame)
            if col.released and col.release is None:
                raise LineageError(
                    f"the query {verb} the output of a .dp release ({what}): a release's "
                    "output may only be selected or renamed in the query that releases it. "
                    "Post-process the released table after the run." + _NOTHING
                )
            out.append((_output_name(one), col))
        return out

    def key(self, e: Any, frame: Frame, verb: str, what: str) -> None:
        for one in _expand(e, frame):
            col = self.value(one, frame)
            self._row_key(col.atoms, frame, verb, what)

    def _row_key(self, atoms: frozenset[Atom], frame: Frame, verb: str, what: str) -> None:
        if any(a[0] == "release" for a in atoms):
            raise LineageError(
                f"the query {verb} the output of a .dp release ({what}): post-process the "
                "released table after the run." + _NOTHING
            )
        self.row_keys.append((f"{verb}|{what}", atoms))

    def value(self, e: Any, frame: Frame) -> Col:
        kind, body = _one(e, "expression")
        if kind == "Column":
            if body not in frame.cols:
                raise LineageError(f"the runner cannot follow column {body!r}." + _NOTHING)
            return frame.cols[body]
        if kind == "Alias":
            return self.value(body[0], frame)
        if kind == "KeepName":
            return self.value(body, frame)
        if kind == "RenameAlias":
            return self.value(body["expr"], frame)
        if kind == "Literal":
            lit, _ = _one(body, "literal")
            if lit == "Series":
                return Col(frozenset({_EXTERNAL}), False)
            return Col(frozenset(), True)
        if kind == "Len":
            return Col(frozenset(), False)
        if kind == "AnonymousFunction":
            raise LineageError(
                "a .dp release must be the whole expression of a selected column (followed "
                "by nothing but .alias): an expression computed from it, or a release "
                "inside a filter, sort, join, group_by or window, is refused; post-process "
                "the released table after the run." + _NOTHING
            )
        parts: list[Col]
        aligned = True
        if kind == "Cast":
            parts = [self.value(body["expr"], frame)]
        elif kind == "BinaryExpr":
            parts = [self.value(body["left"], frame), self.value(body["right"], frame)]
        elif kind == "Ternary":
            parts = [self.value(body[k], frame) for k in ("predicate", "truthy", "falsy")]
        elif kind == "Function":
            parts = [self.value(x, frame) for x in body["input"]]
            aligned = _elementwise(body["function"])
        elif kind == "Agg":
            _, agg = _one(body, "aggregation")
            inner = agg["input"] if isinstance(agg, dict) and "input" in agg else agg
            parts, aligned = [self.value(inner, frame)], False
        elif kind in ("Sort", "SortBy", "Filter", "Gather", "Slice", "Explode", "Over"):
            parts, aligned = self._reorder(kind, body, frame), False
        else:
            raise LineageError(
                f"the runner cannot follow a {kind} expression in a query holding a .dp "
                "release; compute it in a separate query." + _NOTHING
            )
        atoms = frozenset().union(*(p.atoms for p in parts)) if parts else frozenset()
        if any(a[0] == "release" for a in atoms):
            raise LineageError(
                "the query computes something from the output of a .dp release: a release's "
                "output may only be selected or renamed in the query that releases it. "
                "Post-process the released table after the run." + _NOTHING
            )
        return Col(atoms, aligned and all(p.aligned for p in parts))

    def _reorder(self, kind: str, body: Any, frame: Frame) -> list[Col]:
        """Expressions that select or order values: their keys are row keys."""
        if kind == "Sort":
            col = self.value(body["expr"], frame)
            self._row_key(col.atoms, frame, "orders values by", "sort()")
            return [col]
        if kind == "SortBy":
            for k in body["by"]:
                self.key(k, frame, "orders values by", "sort_by()")
            return [self.value(body["expr"], frame)]
        if kind == "Filter":
            self.key(body["by"], frame, "selects values by", "filter()")
            return [self.value(body["input"], frame)]
        if kind == "Gather":
            self.key(body["idx"], frame, "selects values by", "gather()")
            return [self.value(body["expr"], frame)]
        if kind == "Slice":
            for k in ("offset", "length"):
                self.key(body[k], frame, "selects values by", "slice()")
            return [self.value(body["input"], frame)]
        if kind == "Explode":
            return [self.value(body["input"], frame)]
        # Over: a window
        if body.get("mapping") == "Explode":
            raise LineageError("over(mapping_strategy='explode') cannot be followed." + _NOTHING)
        for k in body.get("partition_by") or []:
            self.key(k, frame, "groups values by", "over()")
        order = body.get("order_by")
        if order:
            self.key(order[0], frame, "orders values by", "over(order_by=...)")
        return [self.value(body["function"], frame)]


# -- names ---------------------------------------------------------------------------


def _strip_names(e: Any) -> tuple[str | None, Any]:
    """An expression's alias (if any) and what it names."""
    name = None
    while isinstance(e, dict) and len(e) == 1:
        kind, body = next(iter(e.items()))
        if kind == "Alias":
            name = name or body[1]
            e = body[0]
        elif kind == "KeepName":
            e = body
        else:
            break
    return name, e


def _release_index(e: Any) -> int | None:
    if isinstance(e, dict) and "AnonymousFunction" in e:
        fn = e["AnonymousFunction"].get("function")
        if isinstance(fn, list):
            fn = bytes(fn)
        found = _MARKER_RE.search(fn) if isinstance(fn, bytes) else None
        if found is None:
            raise LineageError("the query holds a Python function that is not a dpframe release")
        return int(found.group(1))
    return None


def _simple_name(e: Any) -> str | None:
    name, inner = _strip_names(e)
    if name:
        return name
    return inner.get("Column") if isinstance(inner, dict) else None


def _first_column(e: Any) -> str | None:
    """polars' output name of an unnamed expression: its first column."""
    if isinstance(e, dict):
        if "Column" in e:
            return str(e["Column"])
        for v in e.values():
            found = _first_column(v)
            if found is not None:
                return found
    elif isinstance(e, list):
        for v in e:
            found = _first_column(v)
            if found is not None:
                return found
    return None


def _output_name(e: Any) -> str:
    if isinstance(e, dict) and "RenameAlias" in e:
        fn, arg = _one(e["RenameAlias"]["function"], "name function")
        base = _output_name(e["RenameAlias"]["expr"])
        if fn == "Prefix":
            return str(arg) + base
        if fn == "Suffix":
            return base + str(arg)
        if fn == "ToLowercase":
            return base.lower()
        if fn == "ToUppercase":
            return base.upper()
        raise LineageError(f"the runner cannot follow .name.{fn} in the query." + _NOTHING)
    name, inner = _strip_names(e)
    if name is not None:
        return str(name)
    if inner == "Len":
        return "len"
    first = _first_column(inner)
    if first is not None:
        return first
    if isinstance(inner, dict) and "Literal" in inner:
        return "literal"
    raise LineageError("the runner cannot name a column of the query." + _NOTHING)


def _selector_names(sel: Any, frame: Frame) -> list[str]:
    names = list(frame.cols)
    kind, body = _one(sel, "selector")
    if kind == "Wildcard":
        return names
    if kind == "ByName":
        return [n for n in body["names"] if n in frame.cols or body.get("strict")]
    if kind == "ByIndex":
        return [names[i] for i in body["indices"] if -len(names) <= i < len(names)]
    if kind == "Matches":
        return [n for n in names if re.search(body, n)]
    if kind in ("Union", "Difference", "Intersection", "ExclusiveOr"):
        a, b = (_selector_names(x, frame) for x in body)
        if kind == "Union":
            return a + [n for n in b if n not in a]
        if kind == "Difference":
            return [n for n in a if n not in b]
        if kind == "Intersection":
            return [n for n in a if n in b]
        return [n for n in a if n not in b] + [n for n in b if n not in a]
    raise LineageError(
        f"the runner cannot follow a column selector by {kind} in a query holding a .dp "
        "release: name the columns." + _NOTHING
    )


def _expand(e: Any, frame: Frame) -> list[Any]:
    """A multi-column expression as one expression per column (selectors replaced)."""
    found: list[Any] = []

    def find(x: Any) -> None:
        if isinstance(x, dict):
            if len(x) == 1 and "Selector" in x:
                found.append(x["Selector"])
                return
            for v in x.values():
                find(v)
        elif isinstance(x, list):
            for v in x:
                find(v)

    find(e)
    if not found:
        return [e]
    if any(f != found[0] for f in found):
        raise LineageError(
            "an expression with several column selectors cannot be followed: name the "
            "columns." + _NOTHING
        )
    names = _selector_names(found[0], frame)

    def replace(x: Any, name: str) -> Any:
        if isinstance(x, dict):
            if len(x) == 1 and "Selector" in x:
                return {"Column": name}
            return {k: replace(v, name) for k, v in x.items()}
        if isinstance(x, list):
            return [replace(v, name) for v in x]
        return x

    return [replace(e, n) for n in names]


# -- the check -------------------------------------------------------------------------


def check_lineage(
    lf: pl.LazyFrame,
    serialized: bytes,
    public: Sequence[str],
    per_record: frozenset[int] = frozenset(),
) -> Lineage:
    """Check a query's plan (see the module docstring); raise :class:`LineageError`.

    ``serialized`` is ``lf.serialize()`` with the ``i``-th release written as
    :func:`marker` ``(i)``; ``public`` are output columns published as they are;
    ``per_record`` are the releases whose input rows are records (row-wise releases such
    as PRAM: their input must be aligned). A column release (``.dp.laplace``) reads a
    column of statistics, one per row, whatever computed it.
    """
    header, root, plans = _read_plan(serialized)
    walk = _Walk(plans, header, per_record)
    out = walk.plan(root)
    expected = lf.collect_schema().names()
    if list(out.cols) != expected:
        raise LineageError(
            f"the runner followed the query's columns to {list(out.cols)}, but polars gives "
            f"{expected}; the query cannot be checked." + _NOTHING
        )
    pub = set(public)
    public_atoms = {_INDEX} | {c.source for n, c in out.cols.items() if n in pub and c.source}
    for what, atoms in walk.row_keys:
        private = sorted(
            str(a[2]) if a[0] == "col" else "a literal Series" for a in atoms - public_atoms
        )
        if private:
            verb, step = what.split("|")
            harm = (
                "the order of the published rows would tell their order"
                if "order" in verb
                else "the published rows would tell how many records pass it"
            )
            raise LineageError(
                f"the query {verb} column(s) {private} ({step}), which it does not publish "
                f"as they are: {harm}. Declare them public=[...] if they may be published "
                "as they are, or drop the step." + _NOTHING
            )
    released: dict[str, int] = {}
    for name, col in out.cols.items():
        if col.release is not None:
            released[name] = col.release
        elif name not in pub:
            why = (
                "computed from a release's output"
                if col.released
                else "raw, or computed from raw columns"
            )
            raise LineageError(
                f"column {name!r} would leave the query without being released by a .dp "
                f"expression (it is {why}). Drop it, or declare it public with "
                f"public=[{name!r}] if it may be published as it is; post-process released "
                "columns after the run." + _NOTHING
            )
    return Lineage(out.cols, released, frozenset(walk.met))
