"""The release spec: one TOML file (or the same structure in Python) for a whole release job.

A spec names the input, the privacy unit and neighbour relation, the budget and the ledger
file, the public margins, and the releases -- each with its ε share. It is validated with
pydantic (every error names the field and what is wrong) and versioned (``version = 1``).
Relative paths are resolved against the spec file's folder.

Example (``docs/release-cli.md`` has the full tutorial)::

    version = 1

    [input]
    path = "survey.parquet"

    [privacy]
    unit = "record"
    neighbours = "substitute"
    budget = { epsilon = 2.0 }
    ledger = "ledger.db"

    [output]
    folder = "released"

    [margins.region]
    values = { region = ["North", "South", "Islands"] }

    [[release]]
    name = "by_region"
    kind = "grouped"
    by = ["region"]
    margins = "region"
    statistics = [
        { stat = "count", epsilon = 0.3 },
        { stat = "mean", column = "income", lower = 0, upper = 200000, epsilon = 0.3 },
    ]

    [[release]]
    name = "microdata"
    kind = "pram"
    columns = [{ column = "region", epsilon = 0.5, categories = ["North", "South", "Islands"] }]
"""

from __future__ import annotations

import operator
import os
import tomllib
from fractions import Fraction
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

import polars as pl
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from dpframe.core.accountant import check_budget
from dpframe.core.advice import spec_entry
from dpframe.core.constraints import spec_field
from dpframe.core.outputs import Read, read_conflict
from dpframe.core.postgres import is_postgres_url, redact
from dpframe.core.units import as_unit
from dpframe.engines import is_input_frame
from dpframe.errors import InvalidParameterError, LedgerMismatchError
from dpframe.jobs.kinds import KINDS
from dpframe.polars.frame import CovarianceSpec, ProportionsSpec
from dpframe.polars.grouped import GroupedSpec, StatisticSpec, statistic
from dpframe.polars.pram import PramColumnSpec, PramSpec
from dpframe.polars.release import OptionalEps, SpecEntry

__all__ = [
    "CovarianceSpec",
    "GroupedSpec",
    "MarginSpec",
    "PramColumnSpec",
    "PramSpec",
    "ProportionsSpec",
    "ReleaseSpec",
    "Spec",
    "SpecError",
    "StatisticSpec",
    "load_spec",
    "rebuild_entries",
    "statistic",
]

SPEC_VERSION = 1


class SpecError(InvalidParameterError):
    """A release spec is invalid; the message lists every field at fault."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# each field checked by the parameter's constraint of dpframe.core.constraints, as the
# Python functions check it (no silent coercion of a string to a number)
Delta = Annotated[float, BeforeValidator(spec_field("delta"))]
Neighbours = Annotated[str, BeforeValidator(spec_field("neighbours"))]


class Budget(_Model):
    epsilon: OptionalEps = None
    delta: Delta = 0.0
    rho: Annotated[float | None, BeforeValidator(spec_field("rho", optional=True))] = Field(
        None, description="a zCDP budget (needs delta > 0): Gaussian releases charge rho"
    )
    accounting: Annotated[str | None, BeforeValidator(spec_field("accounting"))] = Field(
        None,
        description="'zcdp' with epsilon and delta: the rho budget that implies them; 'pld': "
        "the (epsilon, delta) budget spent by tight composition of the whole ledger",
    )

    @model_validator(mode="after")
    def _one_budget(self) -> Budget:
        check_budget(self.epsilon, self.delta, self.rho, self.accounting)  # the Accountant's
        return self


class AccuracySpec(_Model):
    """``[accuracy]``: how statistics with an ``error95`` target get their budget
    (:mod:`dpframe.jobs.targets`); ``targets``, ``found``, ``errors`` and ``total`` are
    written by dpframe when it reads the spec (the allocation, recorded in provenance)."""

    budget: Annotated[float | str, BeforeValidator(spec_field("allocation_budget"))] = Field(
        "least",
        description="'least': the least total meeting every error95; a number: that total "
        "split so that the worst error/target is least (the targets are weights)",
    )
    group_size: Annotated[
        int | None, BeforeValidator(spec_field("proportions_n", optional=True))
    ] = Field(
        None,
        description="the group size targets are stated at (a statistic's own group_size "
        "first): a quantile's error95 in its value's units, assuming this many values per "
        "group spread evenly over its bounds (default: in rows of the group); a mean's or "
        "proportion's error95; a relative target's scale",
    )
    targets: dict[str, Annotated[float, BeforeValidator(spec_field("error95"))]] = {}
    shares: dict[str, Annotated[float, BeforeValidator(spec_field("allocation_share"))]] = {}
    relative: dict[str, bool] = {}
    group_sizes: dict[str, Annotated[int, BeforeValidator(spec_field("proportions_n"))]] = {}
    found: dict[str, float] = {}
    errors: dict[str, float] = {}
    total: float | None = None
    assumptions: dict[str, str] = {}


class PrivacySpec(_Model):
    unit: str = Field(
        "record",
        min_length=1,
        description="the privacy unit: 'record' (one row of the input is one person), or "
        "the column identifying a person (each person's rows bounded by max_rows and "
        "max_groups)",
    )
    max_rows: Annotated[int | None, BeforeValidator(spec_field("max_rows", optional=True))] = None
    max_groups: Annotated[int | None, BeforeValidator(spec_field("max_groups", optional=True))] = (
        None
    )
    neighbours: Neighbours = "substitute"
    budget: Budget
    ledger: Path | str = Field(
        description="the ledger, shared by jobs on the same data: a SQLite file, or a "
        "postgresql:// URL for jobs on many hosts"
    )
    seed: Annotated[int | None, BeforeValidator(spec_field("seed", optional=True))] = Field(
        None, description="reproducible noise: UNSAFE for publication"
    )

    @field_validator("ledger", mode="before")
    @classmethod
    def _file_or_url(cls, v: Any) -> Any:
        if isinstance(v, str) and not is_postgres_url(v):
            return Path(v)
        return v

    @model_validator(mode="after")
    def _bounds_need_a_person(self) -> PrivacySpec:
        as_unit(self.unit, self.max_rows, self.max_groups, needs=())  # the Accountant's rule
        return self

    def open_ledger(self, target: Path | str) -> Any:
        """:meth:`dpframe.Accountant.open` with this spec's terms; a ledger made with other
        terms is refused in the spec's words (which field to change), not Python's."""
        from dpframe.core.accountant import Accountant

        try:
            return Accountant.open(target, **self.ledger_terms())
        except LedgerMismatchError as exc:
            if exc.key is None or type(exc) is not LedgerMismatchError:
                raise
            raise self._mismatch(exc, target) from None

    def _mismatch(self, exc: LedgerMismatchError, target: Path | str) -> LedgerMismatchError:
        where = redact(target) if isinstance(target, str) else target
        key, recorded = exc.key, exc.recorded
        if key == "accounting" and (recorded, exc.asked) == ("pure", "zcdp"):
            fix = (
                "remove privacy.budget.rho and privacy.budget.accounting and set "
                f"privacy.budget.epsilon = {self._ledger_epsilon(target)!r}"
            )
            said = "an (epsilon, delta) budget, but the spec asks for a zCDP one"
        elif key == "accounting":  # tight composition on one side
            fix = (
                "remove privacy.budget.accounting"
                if recorded == "pure"
                else f"set privacy.budget.accounting = {recorded!r}"
            )
            said = (
                f"accounting={recorded!r}, but the spec has privacy.budget.accounting = "
                f"{exc.asked!r}"
            )
        elif key == "rho":
            fix = f"set privacy.budget.rho = {recorded!r} (in place of epsilon)"
            said = f"a zCDP budget of rho={recorded!r}, but the spec asks for " + (
                "an (epsilon, delta) budget"
                if exc.asked is None
                else f"rho={exc.asked!r} (its epsilon with accounting = 'zcdp')"
            )
        else:
            field = f"privacy.budget.{key}" if key in ("epsilon", "delta") else f"privacy.{key}"
            shown = "record" if key == "unit" and recorded is None else recorded
            fix = f"set {field} = {shown!r}"
            said = f"{key}={shown!r}, but the spec has {field} = {exc.asked!r}"
        err = LedgerMismatchError(
            f"privacy.ledger: ledger {where} was created with {said}. To charge this ledger, "
            f"{fix} in the spec; for a new budget, point privacy.ledger at a new ledger file. "
            "Nothing was charged."
        )
        err.key, err.recorded, err.asked = exc.key, exc.recorded, exc.asked
        return err

    @staticmethod
    def _ledger_epsilon(target: Path | str) -> Any:
        from dpframe.core.accountant import Accountant

        return Accountant.open(target).epsilon

    def ledger_terms(self) -> dict[str, Any]:
        """The budget, relation and unit, as :meth:`dpframe.Accountant.open` takes them."""
        b = self.budget
        return {
            "epsilon": b.epsilon,
            "delta": b.delta,
            "neighbours": self.neighbours,
            "rho": b.rho,
            "accounting": b.accounting,
            "unit": None if self.unit == "record" else self.unit,
            "max_rows": self.max_rows,
            "max_groups": self.max_groups,
        }


class InputSpec(_Model):
    path: Path | None = Field(None, description="a Parquet file (or glob) of the records")


class OutputSpec(_Model):
    folder: Path = Path("released")


class MarginSpec(_Model):
    """Public keys of a grouped release: a file of key rows, or values to cross."""

    path: Path | None = None
    values: dict[str, list[Any]] | None = None
    sizes: str | None = Field(None, description="a column of the file holding public sizes")

    @model_validator(mode="after")
    def _one_source(self) -> MarginSpec:
        if (self.path is None) == (self.values is None):
            raise ValueError("give exactly one of path= (a file of keys) or values= (lists)")
        if self.values is not None:
            for k, v in self.values.items():
                if not v:
                    raise ValueError(f"values.{k} is empty: list every public key")
                if len(set(map(repr, v))) != len(v):
                    raise ValueError(f"values.{k} has repeated keys")
        if self.sizes is not None and self.path is None:
            raise ValueError("sizes names a column of the margins file (path = ...)")
        return self


#: what a release writes into the output folder, after its name
OUTPUT_SUFFIXES = (".parquet", ".suite.json", ".validation.json", ".checks")


def _entries() -> Any:
    """The spec's release entries: the entry model of each registered kind
    (:data:`dpframe.jobs.kinds.KINDS`, ``Release.spec_model``), told apart by ``kind``."""
    models = [cls.spec_model for cls in KINDS.values() if cls.spec_model is not None]
    return Annotated[reduce(operator.or_, models), Field(discriminator="kind")]


if TYPE_CHECKING:
    ReleaseSpec: TypeAlias = SpecEntry
else:
    ReleaseSpec = _entries()


def rebuild_entries() -> None:
    """Build the spec's release entries again from the registry of kinds (after a kind
    is registered at run time, as ``tests/jobs/test_new_kind.py`` does)."""
    global ReleaseSpec
    ReleaseSpec = _entries()
    Spec.__pydantic_fields__["release"] = FieldInfo.from_annotated_attribute(
        list[ReleaseSpec], Field(min_length=1)
    )
    Spec.model_rebuild(force=True)


class Spec(_Model):
    """A validated release spec (see the module docstring for the TOML form)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    version: Literal[1] = Field(description="spec format version")
    input: InputSpec = InputSpec()
    privacy: PrivacySpec
    output: OutputSpec = OutputSpec()
    margins: dict[str, MarginSpec] = {}
    release: list[ReleaseSpec] = Field(min_length=1)
    accuracy: AccuracySpec | None = Field(
        None,
        description="error95 targets: the budgets dpframe finds (dpframe.jobs.targets)",
        exclude_if=lambda v: v is None,
    )
    base: Path | None = Field(None, exclude=True, description="folder relative paths start from")
    frame: Any = Field(
        None,
        exclude=True,
        description="the input: a polars LazyFrame / DataFrame or a Spark DataFrame",
    )

    @model_validator(mode="after")
    def _references(self) -> Spec:
        names = [r.name for r in self.release]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"release names must be unique; repeated: {dup}")
        for r in self.release:  # each kind's rules within the whole spec
            r.check_in(self)
        if self.frame is not None and not is_input_frame(self.frame):
            raise ValueError(
                "frame must be a polars LazyFrame or DataFrame, or a Spark DataFrame, "
                f"got {type(self.frame).__name__}"
            )
        if self.frame is None and self.input.path is None:
            raise ValueError("input.path is required (or build the spec with frame=...)")
        self.check_outputs()
        return self

    def outputs(self) -> dict[str, list[Path]]:
        """Every file a release writes into the output folder, by release name."""
        folder = self.resolve(self.output.folder)
        return {
            r.name: [folder / f"{r.name}{suffix}" for suffix in OUTPUT_SUFFIXES]
            for r in self.release
        }

    def check_outputs(self, spec_file: Path | None = None) -> None:
        """Refuse an output that would replace the input, the spec, a margins file or the
        ledger, or a ledger inside the output folder (found before anything is charged)."""
        ledger = self.ledger_target()
        kept = {"the ledger": ledger} if isinstance(ledger, Path) else {}
        if self.frame is None and self.input.path is not None:
            kept["the input"] = self.resolve(self.input.path)
        if spec_file is not None:
            kept["the spec"] = spec_file
        for name, m in self.margins.items():
            if m.path is not None:
                kept[f"margins.{name}.path"] = self.resolve(m.path)
        real = {what: Path(os.path.realpath(p)) for what, p in kept.items()}
        reads = [Read(os.fspath(p), what) for what, p in kept.items()]  # globs: as given
        for release, paths in self.outputs().items():
            for out in paths:
                problem = read_conflict(out, reads)  # through links, globs and folders
                if problem is not None:
                    raise ValueError(
                        f"release {release!r} would write {out}, which {problem}: "
                        "rename the release or choose another output.folder"
                    )
        folder = Path(os.path.realpath(self.resolve(self.output.folder)))
        for what, path in real.items():  # the folder itself may not be a file we keep
            if folder == path or (folder.exists() and not folder.is_dir()):
                raise ValueError(
                    f"output.folder {folder} is {what if folder == path else 'a file'}: "
                    "choose a folder for the released files"
                )
        if "the ledger" in real and folder in real["the ledger"].parents:
            raise ValueError(
                f"privacy.ledger {kept['the ledger']} is inside output.folder {folder}: a "
                "publish could replace it; keep the ledger outside the released files"
            )

    # -- helpers -------------------------------------------------------------------------

    def ledger_target(self) -> Path | str:
        """The ledger: its file resolved against the spec's folder, or its URL."""
        ledger = self.privacy.ledger
        return ledger if isinstance(ledger, str) else self.resolve(ledger)

    def resolve(self, path: Path | None) -> Path | None:
        """``path`` against the spec's folder (absolute paths unchanged)."""
        if path is None:
            return None
        if path.is_absolute() or self.base is None:
            return path
        return self.base / path

    @property
    def epsilon_total(self) -> float:
        """Total epsilon of all releases (they compose sequentially)."""
        return float(sum((r.epsilon_total() for r in self.release), Fraction(0)))

    def lazy_input(self) -> pl.LazyFrame:
        """The input as a LazyFrame (scanned, not read)."""
        if self.frame is not None and not isinstance(self.frame, pl.LazyFrame | pl.DataFrame):
            raise SpecError(
                "this spec's input is a Spark DataFrame: run it with "
                "dpframe.jobs.run(spec, engine='spark')"
            )
        if self.frame is not None:
            return self.frame.lazy() if isinstance(self.frame, pl.DataFrame) else self.frame
        path = self.resolve(self.input.path)
        glob = any(ch in str(path) for ch in "*?[")
        if not glob and not path.exists():
            raise SpecError(f"input.path: {path} does not exist")
        if path.is_dir():
            path = path / "*.parquet"  # a folder of Parquet parts
        elif not glob and path.suffix.lower() != ".parquet":
            raise SpecError(
                f"input.path: {path} is not a Parquet file; convert it first, e.g. "
                f"pl.scan_csv({str(path)!r}).sink_parquet('input.parquet')"
            )
        scan = pl.scan_parquet(path)
        try:
            scan.collect_schema()  # read the footer(s) now: a bad file fails here, named
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise SpecError(
                f"input.path: {path} cannot be read as Parquet "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
            ) from None
        return scan

    def margins_frame(self, name: str) -> pl.DataFrame:
        """The public key frame of margins ``name``."""
        m = self.margins[name]
        if m.path is not None:
            path = self.resolve(m.path)
            if not path.exists():
                raise SpecError(f"margins.{name}.path: {path} does not exist")
            try:
                if path.suffix == ".parquet":
                    return pl.read_parquet(path)
                return pl.read_csv(path)
            except (OSError, pl.exceptions.PolarsError) as exc:
                raise SpecError(
                    f"margins.{name}.path: {path} cannot be read "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
                ) from None
        frame: pl.DataFrame | None = None
        for col, vals in (m.values or {}).items():
            try:
                part = pl.DataFrame({col: vals})
            except (TypeError, pl.exceptions.PolarsError):
                raise SpecError(
                    f"margins.{name}.values.{col}: the values must all have one type "
                    f"(all strings or all numbers), got {vals!r}"
                ) from None
            frame = part if frame is None else frame.join(part, how="cross")
        return frame

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec as JSON-ready data (stored in the output's provenance)."""
        return self.model_dump(mode="json", exclude={"base", "frame"})


def _describe(key: str, index: int, item: Any) -> str:
    """One element of a spec's list, by its name where it has one: ``release "by_region"``,
    ``statistic 2 (mean of income)``."""
    what = {"statistics": "statistic", "columns": "column"}.get(key, key)
    if isinstance(item, dict):
        if isinstance(item.get("name"), str):
            return f"{what} {item['name']!r}"
        stat = item.get("stat")
        if isinstance(stat, str):
            cols = [str(item[c]) for c in ("column", "x", "y") if isinstance(item.get(c), str)]
            return f"{what} {index + 1} ({stat}{' of ' + ', '.join(cols) if cols else ''})"
        if isinstance(item.get("column"), str):
            return f"{what} {item['column']!r}"
    return f"{what} {index + 1}"


def _where(loc: tuple[Any, ...], data: Any) -> str:
    """A validation error's location in the user's words: names, not list indices.

    ``release.0.grouped.statistics.1.lower`` becomes ``release 'by_region' > statistic 2
    (mean of income) > lower`` (the ``grouped`` part is pydantic's tag for the kind, not a
    key the user wrote).
    """
    out, plain = "", False  # plain: the last part was a key (keys join with ".")
    node, i = data, 0
    while i < len(loc):
        key = loc[i]
        if isinstance(node, dict) and key not in node and node.get("kind") == key:
            i += 1  # the discriminator's tag
            continue
        child = node.get(key) if isinstance(node, dict) else None
        nxt = loc[i + 1] if i + 1 < len(loc) else None
        if isinstance(child, list) and isinstance(nxt, int) and 0 <= nxt < len(child):
            out += (" > " if out else "") + _describe(str(key), nxt, child[nxt])
            node, i, plain = child[nxt], i + 2, False
            continue
        out += ("." if plain else " > " if out else "") + str(key)
        node, i, plain = child, i + 1, True
    return out or "(top level)"


def _format_errors(exc: ValidationError, source: str, data: Any = None) -> str:
    lines = [f"invalid release spec {source}:"]
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p not in ("base", "frame"))
        where = _where(loc, data) if data is not None else ".".join(map(str, loc))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "union_tag_not_found":
            msg = f"kind is missing: say which release this is ({msg})"
        elif err["type"] == "union_tag_invalid":
            msg = f"unknown kind: {msg}"
        lines.append(f"  - {where or '(top level)'}: {msg}")
    return "\n".join(lines)


@spec_entry
def parse_spec(
    data: dict[str, Any], *, base: Path | None = None, frame: Any = None, source: str = ""
) -> Spec:
    """Validate a spec given as a dict (the TOML structure)."""
    if not isinstance(data, dict):
        raise SpecError(f"a release spec is a table (dict), got {type(data).__name__}")
    from dpframe.jobs import targets

    try:
        taken, wanted = targets.take_targets(data)
    except InvalidParameterError as exc:
        raise SpecError(f"invalid release spec {source or '(dict)'}:\n  - {exc}") from None
    try:
        spec = Spec.model_validate({**taken, "base": base, "frame": frame})
    except ValidationError as exc:
        raise SpecError(_format_errors(exc, source or "(dict)", data)) from None
    if not wanted:
        return spec
    if spec.accuracy is not None and (spec.accuracy.targets or spec.accuracy.shares):
        raise SpecError(
            f"invalid release spec {source or '(dict)'}:\n  - accuracy.targets: recorded "
            "targets and error95 on statistics both given; give error95 on the statistics"
        )
    try:
        settled = targets.settle(spec, taken, wanted)
    except InvalidParameterError as exc:
        raise SpecError(f"invalid release spec {source or '(dict)'}:\n  - {exc}") from None
    return Spec.model_validate({**settled, "base": base, "frame": frame})


@spec_entry
def load_spec(path: str | Path, *, frame: Any = None) -> Spec:
    """Read and validate a TOML release spec; relative paths start from its folder.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "spec.toml")
    >>> _ = open(p, "w").write('''
    ... version = 1
    ... [input]
    ... path = "survey.parquet"
    ... [privacy]
    ... budget = { epsilon = 1.0 }
    ... ledger = "ledger.db"
    ... [[release]]
    ... name = "shares"
    ... kind = "proportions"
    ... column = "age_band"
    ... epsilon = 0.5
    ... ''')
    >>> spec = load_spec(p)
    >>> spec.epsilon_total, spec.release[0].kind
    (0.5, 'proportions')
    """
    p = Path(path)
    if not p.exists():
        raise SpecError(f"spec file {p} does not exist")
    if p.is_dir():
        raise SpecError(f"spec file {p} is a folder; give the path of a TOML release spec")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p} is not valid TOML: {exc}") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise SpecError(f"spec file {p} cannot be read as TOML text ({exc})") from None
    spec = parse_spec(data, base=p.parent, frame=frame, source=str(p))
    try:
        spec.check_outputs(spec_file=p)
    except ValueError as exc:
        raise SpecError(f"invalid release spec {p}:\n  - output: {exc}") from None
    return spec
