"""What a query holding ``.dp`` releases lets out, decided from its plan, never from values.

The runner (:mod:`dpframe.polars.runner`) hands this module the query's plan as polars
serializes it, with each dpframe release written as a marker. :func:`check_lineage`
rebuilds the query with every release replaced by a stand-in expression that carries a
secret tag (``hash(seed=<secret + i>)`` of the release's input), and walks **polars' own
resolved plan** of it (its IR, with no optimisation): the column names, the selectors'
expansions, the join suffixes and the schemas are polars', never re-derived here. The
walk follows every column from the scans to the output: what it depends on (its *atoms*:
a scanned column, a release's output, the row position), whether each of its values
belongs to one record that gives no other row (*aligned*, with the *row map* it follows),
and whether it is exactly a release's output. It refuses, before anything is read or
charged:

1. **an output column that is neither a release's own output** -- the release is the
   whole expression of a selected column, followed by nothing but renames and selections
   -- **nor named in ``public``**;
2. **any use of a release's output other than selecting or renaming it** (a ``when``, a
   ``diff``, a filter or sort key, a join key, an aggregate): post-processing happens after
   the run, on what it released;
3. **a row-wise release (PRAM) whose input is not aligned**: computed with anything but
   row-wise functions of one row's own values (``shift``, ``sort``, windows, aggregates,
   ``explode``, a join, a concat that may read a record twice, columns of two row maps
   mixed), which could give one record's value to several rows;
4. **rows selected, limited, joined, grouped, de-duplicated or ordered by a column that is
   not published as it is** (``public``, output unchanged): a filter on a private column
   publishes how many rows pass it, a sort on it publishes the order. The row position
   (``with_row_index``) and scalar literals are public; a literal Series is not.

Anything the walk does not know (a plan step, an expression or a function it cannot
follow) is refused: the check fails closed.

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

import io
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import count
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
#: how many records a group or window holds: data, never published by a key
_COUNT: Atom = ("count",)


@dataclass(frozen=True)
class Col:
    """One column at one step of the plan."""

    atoms: frozenset[Atom]
    #: the row map its values follow (row r holds record map(r), each record at most one
    #: row); ``None``: not aligned. Columns holding no record (literals, the row index)
    #: are aligned with any map: ``FREE``.
    rows: int | None
    #: exactly the output of release ``i`` (nothing computed after it)
    release: int | None = None
    #: exactly this scanned column, renamed at most (publishing it publishes the atom)
    source: Atom | None = None
    #: the row keys (their indices in the walk) applied to the frames it passed through:
    #: publishing it publishes that atom for the rows those keys saw
    ops: frozenset[int] = frozenset()

    @property
    def released(self) -> bool:
        return any(a[0] == "release" for a in self.atoms)


FREE = -1  # the row map of a column that holds no record's value


@dataclass
class Frame:
    """The columns of one plan node, by name."""

    cols: dict[str, Col]
    releases: frozenset[int] = frozenset()
    #: the atoms that selected or ordered its rows so far (a row index made now tells them)
    arranged: frozenset[Atom] = frozenset()


@dataclass
class Lineage:
    """What :func:`check_lineage` found: the output columns and the releases in use."""

    columns: dict[str, Col]
    #: output name -> the release it is the output of
    released: dict[str, int] = field(default_factory=dict)
    #: every release index met in the plan
    releases: frozenset[int] = frozenset()


# -- the shadow query: releases replaced by tagged stand-ins ------------------------------


def _shadow(serialized: bytes, tag: int, float_output: frozenset[int]) -> pl.LazyFrame:
    """The query with release ``i`` replaced by a stand-in of the same dtype that carries
    the secret tag: ``when(lit(tag + i) == lit(tag + i)).then(x).otherwise(x)`` of its
    input ``x`` (cast to Float64 for a column release, whose output is Float64).

    Only the plan arena is decoded and re-encoded. The in-memory frames' data is skipped,
    never decoded: each frame of the shadow is an empty one (:func:`_no_data`). The walk
    reads a frame's columns from the plan's own declared schema (the one polars plans the
    real run with), never from its data, so the verdict is the one the data would get; the
    caller checks that the shadow resolves to the query's schema.
    """
    import msgpack

    start = serialized.find(b"\xa4root")
    if start < 1:
        raise LineageError("the query's plan has an unknown layout; it cannot be checked")
    start -= 1
    header = serialized[:start]
    body = memoryview(serialized)[start:]  # not copied: it holds the data
    source = io.BytesIO(serialized)  # shares the bytes until written
    source.seek(start)
    unpacker = msgpack.Unpacker(source, raw=False, strict_map_key=False, max_buffer_size=0)
    out = bytearray(header)
    try:
        n = unpacker.read_map_header()
        if n > 15:
            raise LineageError("the query's plan has an unknown layout; it cannot be checked")
        out += bytes([0x80 | n])
        for _ in range(n):
            key = unpacker.unpack()
            out += msgpack.packb(key, use_bin_type=True)
            if key == "dataframes":  # the data: skipped, never decoded
                out += msgpack.packb(_no_data(unpacker, body), use_bin_type=True)
            else:
                plans = _replace_releases(unpacker.unpack(), tag, float_output)
                out += msgpack.packb(plans, use_bin_type=True)
    except (ValueError, msgpack.UnpackException) as exc:
        raise LineageError(
            f"the query's plan has an unknown layout ({type(exc).__name__}); it cannot be "
            "checked." + _NOTHING
        ) from None
    try:
        return pl.LazyFrame.deserialize(io.BytesIO(bytes(out)))
    except Exception as exc:
        raise LineageError(
            f"the query's plan cannot be rebuilt for its check ({type(exc).__name__}: {exc})."
            + _NOTHING
        ) from None


def _no_data(unpacker: Any, body: memoryview) -> list[Any]:
    """The plan's frame arena with every frame replaced by an empty frame of its schema.

    Each slot keeps its place and version (the plan's nodes refer to them). A frame's
    bytes are an Arrow IPC stream, written by polars as chunks of byte values: only its
    first message (the schema) is decoded; the record batches are skipped. Anything but
    this layout refuses.
    """
    slots = []
    for _ in range(unpacker.read_array_header()):
        slot: dict[str, Any] = {}
        if unpacker.read_map_header() != 2:
            raise LineageError("the query's plan has an unknown layout; it cannot be checked")
        for _ in range(2):
            name = unpacker.unpack()
            if name == "value":
                begin = unpacker.tell()
                unpacker.skip()
                if body[begin] == 0xC0:  # nil: a vacant slot
                    slot[name] = None
                else:
                    schema = _ipc_schema_message(body[begin : unpacker.tell()])
                    slot[name] = [list(schema + _IPC_END)]
            elif name == "version":
                slot[name] = unpacker.unpack()
            else:
                raise LineageError("the query's plan has an unknown layout; it cannot be checked")
        slots.append(slot)
    return slots


#: an Arrow IPC stream's end: continuation marker, then a message of length zero
_IPC_END = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def _ipc_schema_message(value: memoryview) -> bytes:
    """The first message (the schema) of a frame's IPC stream, from its serialized chunks."""
    import msgpack

    unpacker = msgpack.Unpacker(raw=False)
    fed = 0

    def read(method: Any) -> Any:
        nonlocal fed
        while True:
            try:
                return method()
            except msgpack.OutOfData:
                if fed >= len(value):
                    raise LineageError(
                        "the query's plan has an unknown layout; it cannot be checked"
                    ) from None
                unpacker.feed(value[fed : fed + 65536])
                fed += 65536

    def stream() -> Any:  # the stream's bytes, chunk after chunk
        for _ in range(read(unpacker.read_array_header)):
            for _ in range(read(unpacker.read_array_header)):
                yield read(unpacker.unpack)

    data = stream()

    def take(n: int) -> bytes:
        out = [next(data, None) for _ in range(n)]
        if not all(isinstance(b, int) and 0 <= b < 256 for b in out):
            raise LineageError("the query's plan has an unknown layout; it cannot be checked")
        return bytes(out)  # type: ignore[arg-type]

    head = take(8)
    size = int.from_bytes(head[4:], "little", signed=True)
    if head[:4] != b"\xff\xff\xff\xff" or not 0 < size <= 2**28:
        raise LineageError("the query's plan has an unknown layout; it cannot be checked")
    return head + take(size)


def _replace_releases(x: Any, tag: int, float_output: frozenset[int]) -> Any:
    if isinstance(x, dict):
        if len(x) == 1 and "AnonymousFunction" in x:
            body = x["AnonymousFunction"]
            fn = body.get("function")
            fn = bytes(fn) if isinstance(fn, list) else fn
            found = _MARKER_RE.search(fn) if isinstance(fn, bytes) else None
            if found is None or len(body.get("input") or []) != 1:
                raise LineageError(
                    "the query holds a Python function that is not a dpframe release." + _NOTHING
                )
            i = int(found[1])
            inner = _replace_releases(body["input"][0], tag, float_output)
            if i in float_output:
                inner = {
                    "Cast": {"expr": inner, "dtype": {"Literal": "Float64"}, "options": "Strict"}
                }
            lit = {"Literal": {"Dyn": {"Int": (tag + i).to_bytes(16, "big", signed=True)}}}
            pred = {"BinaryExpr": {"left": lit, "op": "Eq", "right": lit}}
            return {"Ternary": {"predicate": pred, "truthy": inner, "falsy": inner}}
        return {k: _replace_releases(v, tag, float_output) for k, v in x.items()}
    if isinstance(x, list):
        return [_replace_releases(v, tag, float_output) for v in x]
    return x


# -- functions ---------------------------------------------------------------------------

# row-wise functions of one row's values (polars' IR names)
_ELEMENTWISE = {
    "abs", "negate", "sign", "floor", "ceil", "round", "round_sig_figs", "clip", "pow",
    "sqrt", "cbrt", "log", "log1p", "exp", "fill_null", "coalesce", "as_struct", "hash",
    "min_horizontal", "max_horizontal", "sum_horizontal", "mean_horizontal", "cut",
    "trigonometry", "arctan2",
}  # fmt: skip
_ELEMENTWISE_FAMILIES = {"StringFunction", "TemporalFunction", "StructFunction"}
_ELEMENTWISE_VARIANTS = {
    "BooleanFunction": {
        "IsNull", "IsNotNull", "Not", "IsNan", "IsNotNan", "IsFinite", "IsInfinite", "IsIn",
        "IsBetween", "AllHorizontal", "AnyHorizontal", "IsClose",
    },
}  # fmt: skip
# not row-wise even in their families: they read the whole column
# (Strptime without a format infers one from the first value; ToDecimal its scale from the
# data; JsonDecode its schema)
_WHOLE_COLUMN = {"ConcatVertical", "JsonDecode", "Strptime", "ToDecimal"}
# their arguments after the first are a set or a mapping taken from the whole column
_TABLE_ARGUMENTS = {"replace", "replace_strict", "IsIn"}
# they select or order values by what they read
_ORDERING = {
    "top_k", "top_k_by", "bottom_k", "bottom_k_by", "arg_sort", "arg_max", "arg_min",
    "rank", "arg_unique", "unique", "mode", "search_sorted", "IsFirstDistinct",
    "IsLastDistinct", "IsUnique", "IsDuplicated", "drop_nulls", "drop_nans", "value_counts",
    "unique_counts", "peak_max", "peak_min", "arg_true", "sort", "hist", "index_of",
}  # fmt: skip


def _function_name(data: Any) -> tuple[str, str]:
    """``(family, name)`` of an IR function: ('', 'shift'), ('StringFunction', 'Slice')."""
    head = data[0] if isinstance(data, tuple) and data else data
    if isinstance(head, str):
        return "", head
    family = type(head).__name__
    name = getattr(head, "name", None) or str(head).rsplit(".", 1)[-1]
    return family, str(name)


def _elementwise(family: str, name: str) -> bool:
    if name in _WHOLE_COLUMN:
        return False
    if family == "":
        return name in _ELEMENTWISE
    if family in _ELEMENTWISE_FAMILIES:
        return True
    return name in _ELEMENTWISE_VARIANTS.get(family, set())


# -- the walk ----------------------------------------------------------------------------


class _Walk:
    def __init__(self, visitor: Any, tag: int, per_record: frozenset[int]) -> None:
        self.v = visitor
        self.tag = tag
        self.per_record = per_record
        self.met: set[int] = set()
        self.row_keys: list[tuple[str, str, frozenset[Atom]]] = []
        self._own: list[list[int]] = []  # per node being walked: the keys it applied
        self._maps = count()
        self._caches: dict[Any, Frame] = {}

    def new_map(self) -> int:
        return next(self._maps)

    # -- plan nodes ------------------------------------------------------------------

    def node(self) -> Frame:
        """The frame of the visitor's current node."""
        node = self.v.view_current_node()
        kind = type(node).__name__
        method = getattr(self, f"_ir_{kind.lower()}", None)
        if method is None:
            raise LineageError(
                f"the runner cannot follow a {kind} step in a query holding a .dp release; "
                "run that step in a separate query (before the release, or on the released "
                "table)." + _NOTHING
            )
        start = len(self.row_keys)
        self._own.append([])
        frame: Frame = method(node)
        own = frozenset(self._own.pop())
        if own:  # the columns of this step's frame have passed through its keys
            frame.cols = {n: replace(c, ops=c.ops | own) for n, c in frame.cols.items()}
        # every key that selected, ordered or counted rows in this sub-plan: a row index
        # made from this frame on tells them (a position after a sort by a group tells
        # the groups' sizes)
        frame.arranged = frame.arranged.union(*(a for _, _, a in self.row_keys[start:]))
        names = list(self.v.get_schema())
        if list(frame.cols) != names:  # the walk and polars must agree on every column
            cols = {n: frame.cols[n] for n in names if n in frame.cols}
            frame = Frame(cols, frame.releases, frame.arranged)
            if list(frame.cols) != names:
                raise LineageError(
                    f"the runner cannot follow the columns of a {kind} step." + _NOTHING
                )
        return frame

    def input(self, index: int) -> Frame:
        here = self.v.get_node()
        self.v.set_node(index)
        try:
            return self.node()
        finally:
            self.v.set_node(here)

    def _ir_dataframescan(self, node: Any) -> Frame:
        rows = self.new_map()
        source = ("df", rows)
        names = list(self.v.get_schema())
        return Frame({n: Col(frozenset({("col", source, n)}), rows, source=("col", source, n))
                      for n in names})  # fmt: skip

    def _ir_pythonscan(self, node: Any) -> Frame:
        from dpframe.polars.memory import FrameSource

        if type(node.options[0]) is not FrameSource:  # only dpframe.scan_frame's source
            raise LineageError(
                "the query reads a Python scan that is not dpframe.scan_frame's; its rows "
                "cannot be seen." + _NOTHING
            )
        return self._ir_dataframescan(node)  # one in-memory frame, as frame.lazy() reads it

    def _ir_scan(self, node: Any) -> Frame:
        paths = [str(p) for p in (node.paths or [])]
        if not paths:
            raise LineageError("the query reads a source that is not files." + _NOTHING)
        seen: set[Any] = set()
        twice = False
        for p in paths:
            local = p.removeprefix("file://")
            try:
                st = os.stat(local)
                key: Any = (st.st_dev, st.st_ino)
            except OSError:  # not a local file: cannot tell it from another source
                key, twice = ("unknown", p), True
            twice = twice or key in seen
            seen.add(key)
        rows = None if twice else self.new_map()  # one file read twice repeats records
        source = ("files", frozenset(seen))
        names = list(self.v.get_schema())
        return Frame({n: Col(frozenset({("col", source, n)}), rows, source=("col", source, n))
                      for n in names})  # fmt: skip

    def _ir_cache(self, node: Any) -> Frame:
        if node.id_ in self._caches:  # one cached sub-query read at two places
            frame = self._caches[node.id_]
            if frame.releases:
                raise LineageError(
                    "a sub-query holding a .dp release is used at more than one place: "
                    "each place would randomize the same records again under one charge." + _NOTHING
                )
            return frame
        frame = self.input(node.input)
        self._caches[node.id_] = frame
        return frame

    def _ir_simpleprojection(self, node: Any) -> Frame:
        frame = self.input(node.input)
        return Frame({n: frame.cols[n] for n in self.v.get_schema()}, frame.releases)

    def _ir_select(self, node: Any) -> Frame:
        frame = self.input(node.input)
        return self._project(frame, node.expr, keep=False)

    def _ir_hstack(self, node: Any) -> Frame:
        frame = self.input(node.input)
        return self._project(frame, node.exprs, keep=True)

    def _project(self, frame: Frame, exprs: list[Any], *, keep: bool) -> Frame:
        cols = dict(frame.cols) if keep else {}
        releases = set(frame.releases)
        for pe in exprs:
            cols[pe.output_name] = self.top(pe.node, frame, releases, pe.output_name)
        return Frame(cols, frozenset(releases))

    def _ir_filter(self, node: Any) -> Frame:
        frame = self.input(node.input)
        self.key(node.predicate.node, frame, "selects rows by", "a filter")
        return self._moved(frame)

    def _ir_sort(self, node: Any) -> Frame:
        frame = self.input(node.input)
        for pe in node.by_column:
            self.key(pe.node, frame, "orders rows by", "a sort")
        return self._moved(frame)

    def _ir_slice(self, node: Any) -> Frame:
        return self._moved(self.input(node.input))

    def _ir_distinct(self, node: Any) -> Frame:
        frame = self.input(node.input)
        subset = node.options[1] if isinstance(node.options, tuple) else None
        names = list(frame.cols) if subset is None else list(subset)
        atoms = frozenset().union(*(frame.cols[n].atoms for n in names))
        self._row_key(atoms, "selects rows by", "unique()")
        return self._moved(frame)

    def _moved(self, frame: Frame) -> Frame:
        """Rows selected or reordered, none repeated: a new row map, the same records."""
        rows = self.new_map()
        cols = {
            n: replace(c, rows=None if c.rows is None else (FREE if c.rows == FREE else rows))
            for n, c in frame.cols.items()
        }  # fmt: skip
        return Frame(cols, frame.releases)

    def _ir_groupby(self, node: Any) -> Frame:
        frame = self.input(node.input)
        if (
            node.apply
            or getattr(node.options, "dynamic", None)
            or getattr(node.options, "rolling", None)
        ):
            raise LineageError(
                "the runner follows plain group_by() only (not group_by_dynamic, rolling or "
                "a Python function)." + _NOTHING
            )
        cols: dict[str, Col] = {}
        for pe in node.keys:
            col = self.value(pe.node, frame, aggregating=True)
            self._check_not_released(col, "groups rows by", "group_by()")
            self._row_key(col.atoms, "groups rows by", "group_by()")
            cols[pe.output_name] = Col(col.atoms, None, source=col.source, ops=col.ops)
        for pe in node.aggs:
            col = self.value(pe.node, frame, aggregating=True)
            self._check_not_released(col, "aggregates", "group_by().agg()")
            cols[pe.output_name] = Col(col.atoms, None)
        return Frame(cols, frame.releases)

    def _ir_join(self, node: Any) -> Frame:
        left = self.input(node.input_left)
        right = self.input(node.input_right)
        how = node.options[0] if isinstance(node.options, tuple) else None
        if not isinstance(how, str) or how not in (
            "Inner", "Left", "Right", "Full", "Semi", "Anti", "Cross",
        ):  # fmt: skip
            raise LineageError(f"the runner follows equi-joins only, not {how!r}." + _NOTHING)
        key_atoms: frozenset[Atom] = frozenset()
        for side, exprs in ((left, node.left_on), (right, node.right_on)):
            for pe in exprs:
                col = self.value(pe.node, side)
                self._check_not_released(col, "joins rows on", "a join")
                self._row_key(col.atoms, "joins rows on", "a join")
                key_atoms |= col.atoms
        # a join may repeat a row of either side (polars' plan does not carry validate=):
        # no column of a join is aligned, and every column depends on the keys
        suffix = node.options[3] or "_right"
        cols = {}
        for n in self.v.get_schema():
            if n in left.cols and n in right.cols:  # a coalesced key: either side's
                a, b = left.cols[n], right.cols[n]
                cols[n] = Col(a.atoms | b.atoms | key_atoms, None)
                continue
            base = left.cols.get(n) or right.cols.get(n)
            if base is None and n.endswith(suffix):
                base = right.cols.get(n[: -len(suffix)])
            if base is None:
                raise LineageError("the runner cannot follow a join's columns." + _NOTHING)
            cols[n] = Col(base.atoms | key_atoms, None, base.release)
        return Frame(cols, left.releases | right.releases)

    def _ir_union(self, node: Any) -> Frame:
        frames = [self.input(i) for i in node.inputs]
        names = list(self.v.get_schema())
        rows = self.new_map()
        cols = {}
        for n in names:
            parts = [f.cols.get(n) for f in frames]
            if any(p is None for p in parts):
                raise LineageError("the runner cannot follow a concat's columns." + _NOTHING)
            atoms = frozenset().union(*(p.atoms for p in parts))  # type: ignore[union-attr]
            sources = [frozenset(a[1] for a in p.atoms if a[0] == "col") for p in parts]  # type: ignore[union-attr]
            # aligned only when every part is aligned and the parts read different files
            disjoint = all(
                all(s[0] == "files" for s in src) for src in sources
            ) and _disjoint_files(sources)
            aligned = disjoint and all(p.rows is not None for p in parts)  # type: ignore[union-attr]
            cols[n] = Col(atoms, rows if aligned else None)
        return Frame(cols, frozenset().union(*(f.releases for f in frames)))

    def _ir_hconcat(self, node: Any) -> Frame:
        frames = [self.input(i) for i in node.inputs]
        cols: dict[str, Col] = {}
        for f in frames:
            cols.update(f.cols)  # each part keeps its own row map: mixing them misaligns
        return Frame(cols, frozenset().union(*(f.releases for f in frames)))

    def _ir_mapfunction(self, node: Any) -> Frame:
        frame = self.input(node.input)
        fn = node.function
        kind = fn[0] if isinstance(fn, tuple) and fn else fn
        if kind == "row_index":  # positions, which tell what arranged the rows before
            name = fn[1]
            index = Col(frozenset({_INDEX}) | frame.arranged, FREE, source=_INDEX)
            return Frame({name: index, **frame.cols}, frame.releases, frame.arranged)
        if kind in ("rechunk",):
            return frame
        if kind == "explode":  # the number of rows follows the exploded lists
            exploded = fn[1] if isinstance(fn, tuple) and len(fn) > 1 else list(frame.cols)
            for name in exploded:
                self._row_key(frame.cols[name].atoms, "sets the number of rows by", "explode()")
            return Frame({n: Col(c.atoms, None) for n, c in frame.cols.items()}, frame.releases)
        raise LineageError(
            f"the runner cannot follow a {kind} step in a query holding a .dp release; run it "
            "in a separate query (before the release, or on the released table)." + _NOTHING
        )

    # -- expressions ---------------------------------------------------------------

    def _release_of(self, e: Any) -> int | None:
        """The release a stand-in stands for (its tag), else ``None``."""
        if type(e).__name__ != "Ternary":
            return None
        p = self.v.view_expression(e.predicate)
        if type(p).__name__ != "BinaryExpr" or "Eq" not in str(p.op):
            return None
        a, b = self.v.view_expression(p.left), self.v.view_expression(p.right)
        if type(a).__name__ != "Literal" or type(b).__name__ != "Literal":
            return None
        value = a.value
        if not isinstance(value, int) or value != b.value or not 0 <= value - self.tag < 2**20:
            return None
        return int(value - self.tag)

    def top(self, n: int, frame: Frame, releases: set[int], name: str) -> Col:
        """A select/with_columns column: a release at its top, or a value."""
        e = self.v.view_expression(n)
        while type(e).__name__ == "Alias":
            n = e.expr
            e = self.v.view_expression(n)
        release = self._release_of(e)
        if release is None:
            col = self.value(n, frame)
            if col.released and col.release is None:
                self._computed_from_release()
            return col
        if release in self.met:
            raise LineageError(
                "a .dp release is used at more than one place of the query: each place "
                "would randomize the same records again under one charge. Build one "
                "expression per use." + _NOTHING
            )
        self.met.add(release)
        releases.add(release)
        src = self.value(e.truthy, frame)
        if src.released:
            raise LineageError(
                "a .dp release is applied to the output of another release; release the "
                "raw column once (post-processing happens after the run)." + _NOTHING
            )
        if release in self.per_record and (src.rows is None or src.rows == FREE):
            raise LineageError(
                f"the input of the .dp release named {name!r} is not computed row by row "
                "from each record's own values (it uses shift, sort, a window, an aggregate, "
                "explode, a join, or rows a concat may repeat): one record's value could "
                "reach several rows, or the rows be ordered by the data. Release a column "
                "computed with row-wise expressions only." + _NOTHING
            )
        rows = src.rows if src.rows is not None else None
        return Col(frozenset({("release", release)}), rows, release=release)

    def key(self, n: int, frame: Frame, verb: str, what: str) -> None:
        col = self.value(n, frame)
        self._check_not_released(col, verb, what)
        self._row_key(col.atoms, verb, what)

    def _row_key(self, atoms: frozenset[Atom], verb: str, what: str) -> None:
        if any(a[0] == "release" for a in atoms):
            self._computed_from_release()
        self.row_keys.append((verb, what, atoms))
        if self._own:
            self._own[-1].append(len(self.row_keys) - 1)

    def _check_not_released(self, col: Col, verb: str, what: str) -> None:
        if col.released:
            raise LineageError(
                f"the query {verb} the output of a .dp release ({what}): a release's output "
                "may only be selected or renamed in the query that releases it. "
                "Post-process the released table after the run." + _NOTHING
            )

    @staticmethod
    def _computed_from_release() -> None:
        raise LineageError(
            "the query computes something from the output of a .dp release: a release's "
            "output may only be selected or renamed in the query that releases it. "
            "Post-process the released table after the run." + _NOTHING
        )

    def _combine(self, parts: list[Col], aligned: bool = True) -> Col:
        atoms = frozenset().union(*(p.atoms for p in parts)) if parts else frozenset()
        if any(a[0] == "release" for a in atoms):
            self._computed_from_release()
        rows: int | None = FREE
        for p in parts:
            if p.rows is None:
                rows = None
                break
            if p.rows != FREE:
                if rows not in (FREE, p.rows):  # two row maps mixed in one row
                    rows = None
                    break
                rows = p.rows
        return Col(atoms, rows if aligned else None)

    def value(self, n: int, frame: Frame, *, aggregating: bool = False) -> Col:
        e = self.v.view_expression(n)
        kind = type(e).__name__
        if kind == "Column":
            if e.name not in frame.cols:
                raise LineageError(f"the runner cannot follow column {e.name!r}." + _NOTHING)
            return frame.cols[e.name]
        if kind == "Literal":
            if type(e.value).__name__ == "PySeries":
                return Col(frozenset({_EXTERNAL}), None)
            return Col(frozenset(), FREE)
        if kind == "Len":  # a group's or window's size is data; the frame's is public
            return Col(frozenset({_COUNT}) if aggregating else frozenset(), None)
        if self._release_of(e) is not None:
            raise LineageError(
                "a .dp release must be the whole expression of a selected column (followed "
                "by nothing but .alias): an expression computed from it, or a release "
                "inside a filter, sort, join, group_by or window, is refused; post-process "
                "the released table after the run." + _NOTHING
            )

        def sub(i: int) -> Col:
            return self.value(i, frame, aggregating=aggregating)

        if kind == "Alias":
            return sub(e.expr)
        if kind == "Cast":
            return self._combine([sub(e.expr)])
        if kind == "BinaryExpr":
            return self._combine([sub(e.left), sub(e.right)])
        if kind == "Ternary":
            return self._combine([sub(e.predicate), sub(e.truthy), sub(e.falsy)])
        if kind == "Function":
            family, name = _function_name(e.function_data)
            parts = [sub(i) for i in e.input]
            if name in _TABLE_ARGUMENTS and any(p.atoms or p.rows is None for p in parts[1:]):
                return self._combine(parts, aligned=False)  # a table from whole columns
            elementwise = _elementwise(family, name)
            if not elementwise and not aggregating:
                # across rows: it may order, select or count values by what it reads
                atoms = frozenset().union(*(p.atoms for p in parts))
                self._row_key(atoms, "computes across rows with", f"{name}()")
            return self._combine(parts, aligned=elementwise)
        if kind == "Agg":
            return self._combine([sub(i) for i in e.arguments], aligned=False)
        if kind == "Sort":
            col = sub(e.expr)
            self._row_key(col.atoms, "orders values by", "sort()")
            return self._combine([col], aligned=False)
        if kind == "SortBy":
            for i in e.by:
                self._row_key(sub(i).atoms, "orders values by", "sort_by()")
            return self._combine([sub(e.expr)], aligned=False)
        if kind == "Filter":
            self._row_key(sub(e.by).atoms, "selects values by", "filter()")
            return self._combine([sub(e.input)], aligned=False)
        if kind == "Gather":
            self._row_key(sub(e.idx).atoms, "selects values by", "gather()")
            return self._combine([sub(e.expr)], aligned=False)
        if kind == "Slice":
            for i in (e.offset, e.length):
                self._row_key(sub(i).atoms, "selects values by", "slice()")
            return self._combine([sub(e.input)], aligned=False)
        if kind == "Explode":
            col = sub(e.expr)
            self._row_key(col.atoms, "sets the number of rows by", "explode()")
            return self._combine([col], aligned=False)
        if kind == "Window":
            mapping = getattr(e.options, "kind", None)
            if mapping is not None and str(mapping).lower() not in (
                "groups_to_rows",
                "grouptorows",
            ):
                raise LineageError(
                    f"over(mapping_strategy={str(mapping)!r}) cannot be followed." + _NOTHING
                )
            inner = self.value(e.function, frame, aggregating=True)  # per partition
            parts = [inner, *(sub(i) for i in e.partition_by)]
            if e.order_by is not None:
                self._row_key(sub(e.order_by).atoms, "orders values by", "over(order_by=...)")
            return self._combine(parts, aligned=False)
        raise LineageError(
            f"the runner cannot follow a {kind} expression in a query holding a .dp "
            "release; compute it in a separate query." + _NOTHING
        )


_GROUPS_TO_ROWS = ("groups_to_rows", "grouptorows")


def _disjoint_files(sources: list[frozenset[Any]]) -> bool:
    seen: set[Any] = set()
    for src in sources:
        files = set().union(*(s[1] for s in src)) if src else set()
        if seen & files:
            return False
        seen |= files
    return True


# -- the check -------------------------------------------------------------------------


def check_lineage(
    lf: pl.LazyFrame,
    serialized: bytes,
    public: Sequence[str],
    per_record: frozenset[int] = frozenset(),
    float_output: frozenset[int] = frozenset(),
) -> Lineage:
    """Check a query's plan (see the module docstring); raise :class:`LineageError`.

    ``serialized`` is ``lf.serialize()`` with the ``i``-th release written as
    :func:`marker` ``(i)``; ``public`` are output columns published as they are;
    ``per_record`` are the releases whose input rows are records (row-wise releases such
    as PRAM: their input must be aligned). A column release (``.dp.laplace``) reads a
    column of statistics, one per row, whatever computed it; ``float_output`` are the
    releases whose output is Float64 (the column releases), so the stand-in has the
    release's own dtype and every selector by dtype resolves as in the real query.
    """
    tag = secrets.randbits(62) + 2**62 - 2**21  # a secret no query can write
    shadow = _shadow(serialized, tag, float_output)
    try:
        visitor = shadow._ldf.with_optimizations(pl.QueryOptFlags.none()._pyoptflags).visit()
    except Exception as exc:
        raise LineageError(
            f"the query's plan cannot be resolved ({type(exc).__name__}: {exc})." + _NOTHING
        ) from None
    walk = _Walk(visitor, tag, per_record)
    try:
        out = walk.node()
    except LineageError:
        raise
    except (NotImplementedError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise LineageError(
            f"the runner cannot follow the query ({type(exc).__name__}: {exc})." + _NOTHING
        ) from None
    expected = lf.collect_schema()
    if shadow.collect_schema() != expected or list(out.cols) != expected.names():
        raise LineageError(
            f"the runner followed the query's columns to {list(out.cols)}, but polars gives "
            f"{dict(expected)}; the query cannot be checked." + _NOTHING
        )
    pub = set(public)
    published = [c for n, c in out.cols.items() if n in pub and c.source is not None]
    for k, (verb, step, atoms) in enumerate(walk.row_keys):
        # each atom a key reads must be published unchanged, by a column that passed
        # through that very key (not the same column of other rows, in another branch)
        private = sorted(
            str(a[2])
            if a[0] == "col"
            else "a group's size"
            if a[0] == "count"
            else "a literal Series"
            for a in atoms
            if a not in (_INDEX,)
            and a[0] != "release"
            and not any(c.source == a and k in c.ops for c in published)
        )
        if private:
            harm = (
                "the order or number of the published rows would tell about them"
                if "across rows" in verb or "number" in verb
                else "the order of the published rows would tell their order"
                if "order" in verb
                else "the published groups would tell which values occur"
                if "group" in verb
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
            why = "computed from a release's output" if col.released else "raw, or computed"
            raise LineageError(
                f"column {name!r} would leave the query without being released by a .dp "
                f"expression (it is {why}). Drop it, or declare it public with "
                f"public=[{name!r}] if it may be published as it is; post-process released "
                "columns after the run." + _NOTHING
            )
    return Lineage(out.cols, released, frozenset(walk.met))
