"""The machinery of the bad-input table (issue 17): the :class:`Case` record, the context a
case runs in, helpers that build data, specs and subprocess calls, and :func:`run_case`,
which runs one case and classifies what it did.

Classes (the first that applies; only ``pass`` passes):

``pass``
    a :class:`~dpframe.errors.DPFrameError` subclass whose message names the argument
    (one of ``case.names``, case-insensitive); nothing spent, nothing written
``spent``
    it raised, but budget was charged (the case's accountant or a ledger its setup made)
``wrote``
    it raised, but a file appeared or changed in the case's folder after its setup
``wrong-exception``
    it raised something that is not a DPFrameError (the CLI: printed a traceback, or
    exited with a code other than 1 or 2)
``no-name``
    a DPFrameError whose message names none of ``case.names``
``python-advice``
    a refusal from a release spec or the ``dpframe`` command whose advice is a Python
    argument (``x=None``, ``pass x=...``, ``frame.rename(...)``, ...) that a spec or a
    command line cannot take (issue 32: the entry point chooses the words)
``silent-accept``
    it returned (the CLI: exit code 0)
``timeout``
    it did not finish in ``case.timeout`` seconds
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

import dpframe
from dpframe.errors import DPFrameError

NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------------------------------
# the case record and the context it runs in
# ---------------------------------------------------------------------------------------


@dataclass
class Case:
    surface: str
    label: str
    fn: Callable[[Ctx], Any]
    #: substrings (case-insensitive), one of which the message must contain
    names: tuple[str, ...]
    #: which fresh accountant the runner gives the case (ctx.acct); None: none
    acct: str | None = "pure"
    #: an input the library may legitimately accept (kept only while it is refused)
    questionable: bool = False
    #: run before the "nothing written" snapshot (writes inputs, specs, ledgers)
    setup: Callable[[Ctx], None] | None = None
    timeout: float = 60.0
    #: "py" (in-process), "cli" (fn returns a CLIResult), "remote" (fn runs code as
    #: uid 65534 and raises RemoteError or returns a RemoteOutcome)
    kind: str = "py"
    #: what the library does today, for a case that does not pass yet (an xfail reason)
    xfail: str | None = None

    @property
    def title(self) -> str:
        return self.label + (" [questionable]" if self.questionable else "")


@dataclass
class Ctx:
    tmp: Path
    acct: Any = None
    #: ledger files created by setup, whose spend the runner compares before/after
    ledgers: list[Path] = field(default_factory=list)
    #: free slot for setup -> fn
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class CLIResult:
    rc: int | None
    stdout: str
    stderr: str
    timed_out: bool = False


class RemoteError(Exception):
    """An exception raised in a subprocess (run as an unprivileged user)."""

    outcome: Any = None

    def __init__(self, type_name: str, mro: list[str], message: str) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.mro = mro
        self.message = message

    @property
    def is_dpframe(self) -> bool:
        return "DPFrameError" in self.mro


CASES: list[Case] = []


def add(
    surface: str,
    label: str,
    fn: Callable[[Ctx], Any],
    names: tuple[str, ...] | str,
    *,
    acct: str | None = "pure",
    q: bool = False,
    setup: Callable[[Ctx], None] | None = None,
    timeout: float = 60.0,
    kind: str = "py",
    xfail: str | None = None,
) -> None:
    """Append a case to :data:`CASES` (``q``: questionable; ``xfail``: what happens today
    if the case does not pass yet)."""
    if isinstance(names, str):
        names = (names,)
    CASES.append(Case(surface, label, fn, names, acct, q, setup, timeout, kind, xfail))


# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------


def people(n: int = 100) -> pl.DataFrame:
    k = n // 4
    return pl.DataFrame(
        {
            "region": ["N", "S", "E", "N"] * k,
            "income": [10.0, 20.0, 30.0, 40.0] * k,
            "score": [1.0, 2.0, 3.0, 4.0] * k,
            "ok": [True, False, True, True] * k,
            "pid": list(range(n // 2)) * 2,
            "band": pl.Series(["a", "b", "a", "b"] * k, dtype=pl.Enum(["a", "b"])),
            "code": [0, 1, 2, 1] * k,
            "tenure": ["own", "rent", "other", "own"] * k,
        }
    )


PEOPLE = people()
REGIONS = pl.DataFrame({"region": ["N", "S", "E", "W"]})
STATS = pl.DataFrame({"m": [3.5, 4.1, 5.0]})


def with_col(df: pl.DataFrame, name: str, values: list[Any], dtype: Any = None) -> pl.DataFrame:
    return df.with_columns(pl.Series(name, values, dtype=dtype))


def income_with(values_head: list[Any]) -> pl.DataFrame:
    """PEOPLE with the first income values replaced (nulls, NaN, inf)."""
    vals = list(PEOPLE["income"])
    vals[: len(values_head)] = values_head
    return with_col(PEOPLE, "income", vals, pl.Float64)


# ---------------------------------------------------------------------------------------
# TOML specs
# ---------------------------------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def _is_aot(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def dump_toml(d: dict[str, Any]) -> str:
    """The spec as TOML: top-level scalars, then [tables] (margins.<name> as sub-tables,
    other dicts inline), then [[arrays of tables]] with inline values."""
    lines: list[str] = []
    tables, aots = [], []
    for k, v in d.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif _is_aot(v):
            aots.append((k, v))
        else:
            lines.append(f"{_key(k)} = {toml_value(v)}")
    for k, v in tables:
        subs = []
        lines += ["", f"[{_key(k)}]"]
        for ik, iv in v.items():
            if k == "margins" and isinstance(iv, dict):
                subs.append((ik, iv))
            else:
                lines.append(f"{_key(ik)} = {toml_value(iv)}")
        for ik, iv in subs:
            lines += ["", f"[{_key(k)}.{_key(ik)}]"]
            lines += [f"{_key(a)} = {toml_value(b)}" for a, b in iv.items()]
    for k, v in aots:
        for item in v:
            lines += ["", f"[[{_key(k)}]]"]
            lines += [f"{_key(a)} = {toml_value(b)}" for a, b in item.items()]
    return "\n".join(lines) + "\n"


GROUPED = {
    "name": "by_region",
    "kind": "grouped",
    "by": ["region"],
    "margins": "reg",
    "statistics": [
        {"stat": "count", "epsilon": 0.5},
        {"stat": "mean", "column": "income", "lower": 0, "upper": 100, "epsilon": 0.5},
    ],
}
PRAM = {
    "name": "micro",
    "kind": "pram",
    "columns": [{"column": "region", "epsilon": 0.5, "categories": ["N", "S", "E", "W"]}],
}
PROPS = {"name": "shares", "kind": "proportions", "column": "band", "epsilon": 0.5}
COV = {
    "name": "cov",
    "kind": "covariance",
    "columns": ["income", "score"],
    "bounds": [[0, 100], [0, 10]],
    "epsilon": 0.5,
}
KIND_TEMPLATES = {"grouped": GROUPED, "pram": PRAM, "proportions": PROPS, "covariance": COV}


def base_spec(*kinds: str) -> dict[str, Any]:
    kinds = kinds or ("grouped",)
    return {
        "version": 1,
        "input": {"path": "in.parquet"},
        "privacy": {"budget": {"epsilon": 10.0}, "ledger": "ledger.db"},
        "output": {"folder": "released"},
        "margins": {"reg": {"values": {"region": ["N", "S", "E", "W"]}}},
        "release": [copy.deepcopy(KIND_TEMPLATES[k]) for k in kinds],
    }


def spec_setup(
    mutate: Callable[[dict[str, Any]], Any] | None = None,
    *,
    kinds: tuple[str, ...] = ("grouped",),
    data: pl.DataFrame | None = None,
    raw: str | None = None,
    ledger: bool = False,
    extra: Callable[[Path], Any] | None = None,
) -> Callable[[Ctx], None]:
    """A setup that writes in.parquet, spec.toml (and, for release runs, the ledger)."""

    def setup(ctx: Ctx) -> None:
        (PEOPLE if data is None else data).write_parquet(ctx.tmp / "in.parquet")
        if extra is not None:
            extra(ctx.tmp)
        if raw is not None:
            text = raw
        else:
            spec = base_spec(*kinds)
            if mutate is not None:
                mutate(spec)
            text = dump_toml(spec)
        (ctx.tmp / "spec.toml").write_text(text)
        ctx.data["spec_text"] = text
        if ledger:
            path = ctx.tmp / "ledger.db"
            dpframe.Accountant.open(path, epsilon=10.0)
            ctx.ledgers.append(path)

    return setup


# ---------------------------------------------------------------------------------------
# subprocesses: the dpframe command, and code run as uid 65534
# ---------------------------------------------------------------------------------------

CLI_ENV = {
    **os.environ,
    "TYPER_STANDARD_TRACEBACK": "1",
    "_TYPER_STANDARD_TRACEBACK": "1",
    "NO_COLOR": "1",
    "COLUMNS": "200",
    "TERM": "dumb",
    "PYTHONWARNINGS": "ignore",
}


def cli(ctx: Ctx, *args: str, timeout: float = 90.0) -> CLIResult:
    """``dpframe *args`` run by this interpreter in the case's folder."""
    try:
        p = subprocess.run(
            [sys.executable, "-m", "dpframe.cli", *args],
            cwd=ctx.tmp,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=CLI_ENV,
        )
    except subprocess.TimeoutExpired as exc:
        return CLIResult(None, str(exc.stdout or ""), str(exc.stderr or ""), timed_out=True)
    return CLIResult(p.returncode, p.stdout, p.stderr)


NOBODY = 65534
_SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

_REMOTE = r"""
import json, os, sys, warnings
warnings.simplefilter("ignore")

def files():
    out = {}
    for root, dirs, names in os.walk("."):
        for n in names:
            p = os.path.join(root, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[p] = (st.st_size, st.st_mtime_ns)
    return out

setup_code, code = json.loads(sys.stdin.read())
g = {}
exec(compile(setup_code, "<setup>", "exec"), g)
before = files()
try:
    spent_before = g["acct"].spent if "acct" in g else None
except Exception as exc:
    spent_before = None
doc = {}
try:
    exec(compile(code, "<case>", "exec"), g)
except BaseException as exc:
    doc = {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
           "msg": str(exc)}
else:
    doc = {"returned": True}
after = files()
doc["wrote"] = sorted(p for p, v in after.items() if before.get(p) != v
                      and not p.endswith(("-wal", "-shm")))
if spent_before is not None:
    try:
        doc["spent"] = g["acct"].spent != spent_before
    except Exception as exc:
        doc["spent"] = f"could not read: {exc}"
print(json.dumps(doc))
"""


@dataclass
class RemoteOutcome:
    """What a case run as an unprivileged user did (its own snapshot and spend check)."""

    returned: bool
    wrote: list[str]
    spent: Any
    error: RemoteError | None = None

    def __repr__(self) -> str:
        return "remote call returned normally"


def _nobody_env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp), "PYTHONDONTWRITEBYTECODE": "1"}


def as_nobody(ctx: Ctx, code: str, setup: str = "", timeout: float = 60.0) -> Any:
    """Run ``setup`` then ``code`` as uid/gid 65534 in ctx.tmp (the subprocess checks what
    ``code`` wrote, and whether ``acct``, if ``setup`` defines it, was charged).

    Raises RemoteError (carrying ``outcome``) if ``code`` raised; returns RemoteOutcome.
    The test makes ctx.tmp reachable by that user first (see :func:`reachable_by_nobody`).
    """
    os.chmod(ctx.tmp, 0o777)
    p = subprocess.run(
        [*_SETPRIV, sys.executable, "-c", _REMOTE],
        input=json.dumps([setup, code]),
        cwd=ctx.tmp,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_nobody_env(ctx.tmp),
    )
    line = (p.stdout.strip().splitlines() or ["{}"])[-1]
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        doc = {}
    if not doc:
        err = RemoteError("CrashedSubprocess", [], (p.stdout + p.stderr)[-400:])
        err.outcome = RemoteOutcome(False, [], None, err)
        raise err
    outcome = RemoteOutcome(bool(doc.get("returned")), doc.get("wrote", []), doc.get("spent"))
    if outcome.returned:
        return outcome
    err = RemoteError(doc["type"], doc["mro"], doc["msg"])
    outcome.error = err
    err.outcome = outcome
    raise err


def nobody_missing() -> str | None:
    """Why the cases run as uid 65534 cannot run here (None: they can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (the case runs as uid 65534 through setpriv)"
    if shutil.which("setpriv") is None:
        return "needs setpriv (util-linux) to run the case as uid 65534"
    return None


@contextlib.contextmanager
def reachable_by_nobody(tmp: Path) -> Iterator[str | None]:
    """Let uid 65534 reach ``tmp``: pytest makes its temporary folders 0700, so each
    ancestor of ``tmp`` lacking search permission for others gets it (o+x, nothing more)
    for the duration and its mode back afterwards. Yields why uid 65534 still cannot run
    this interpreter with dpframe in ``tmp`` (None: it can); the folders inside ``tmp``
    are made writable again on exit, for pytest's clean-up."""
    changed: list[tuple[Path, int]] = []
    try:
        for parent in reversed(tmp.resolve().parents):
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(parent, stat.S_IMODE(mode) | stat.S_IXOTH)
                changed.append((parent, stat.S_IMODE(mode)))
        yield _nobody_can_import(tmp)
    finally:
        for parent, mode in reversed(changed):
            os.chmod(parent, mode)
        for root, dirs, _files in os.walk(tmp):
            for d in dirs:
                with contextlib.suppress(OSError):
                    os.chmod(Path(root) / d, 0o755)


_NOBODY_IMPORT: dict[str, str | None] = {}


def _nobody_can_import(tmp: Path) -> str | None:
    """Whether uid 65534 can run this interpreter and import dpframe (asked once)."""
    if "answer" not in _NOBODY_IMPORT:
        mode = stat.S_IMODE(tmp.stat().st_mode)
        os.chmod(tmp, 0o777)
        try:
            p = subprocess.run(
                [*_SETPRIV, sys.executable, "-c", "import dpframe"],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=60,
                env=_nobody_env(tmp),
            )
        finally:
            os.chmod(tmp, mode)
        _NOBODY_IMPORT["answer"] = (
            None
            if p.returncode == 0
            else f"uid {NOBODY} cannot import dpframe with {sys.executable}: "
            + (p.stderr.strip().splitlines() or ["?"])[-1]
        )
    return _NOBODY_IMPORT["answer"]


# ---------------------------------------------------------------------------------------
# running and classifying one case
# ---------------------------------------------------------------------------------------


@dataclass
class Outcome:
    cls: str
    type: str = ""
    message: str = ""
    wrote: list[str] = field(default_factory=list)
    spent: list[str] = field(default_factory=list)
    detail: str = ""

    def explain(self, case: Case) -> str:
        lines = [
            f"{case.title}: {self.cls}",
            f"  raised: {self.type or '(nothing)'}",
            f"  message: {self.message[:600]}",
            f"  expected one of {list(case.names)} in a DPFrameError's message",
        ]
        if self.spent:
            lines.append("  spent: " + "; ".join(self.spent))
        if self.wrote:
            lines.append("  wrote: " + ", ".join(self.wrote[:10]))
        if self.detail:
            lines.append(self.detail[-3000:])
        return "\n".join(lines)


def make_accountant(kind: str | None) -> Any:
    if kind is None:
        return None
    if kind == "pure":
        return dpframe.Accountant(epsilon=10.0)
    if kind == "big":
        return dpframe.Accountant(epsilon=1000.0)
    if kind == "huge":  # the largest budget there is: a release's own limits must refuse
        return dpframe.Accountant(epsilon=1e300)
    if kind == "zcdp":
        return dpframe.Accountant(rho=1.0, delta=1e-6)
    if kind == "add_remove":
        return dpframe.Accountant(epsilon=10.0, neighbours="add_remove")
    if kind == "person":
        return dpframe.Accountant(epsilon=10.0, unit="pid", max_rows=2, max_groups=1)
    raise ValueError(kind)


def budget_state(acct: Any) -> Any:
    if acct is None:
        return None
    try:
        s = acct.spent
        return (s.epsilon, s.delta, s.rho, len(acct.ledger), acct.reserved.epsilon)
    except Exception as exc:  # an accountant the case broke on purpose
        return f"unreadable: {type(exc).__name__}"


def ledger_state(path: Path) -> Any:
    try:
        return budget_state(dpframe.Accountant.open(path))
    except Exception as exc:
        return f"unreadable: {type(exc).__name__}: {str(exc)[:80]}"


def spend_state(ctx: Ctx) -> dict[str, Any]:
    spend = {"acct": budget_state(ctx.acct)}
    for p in ctx.ledgers:
        spend[str(p.relative_to(ctx.tmp))] = ledger_state(p)
    return spend


def spent_diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [
        f"{k}: {v} -> {after.get(k)}"
        for k, v in before.items()
        if v is not None and after.get(k) != v
    ]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            try:
                st = p.lstat()
            except OSError:
                continue
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def changed(before: dict, after: dict, ledgers: tuple[str, ...] = ()) -> list[str]:
    """Files new or modified since ``before``. A ledger created beforehand (its spend is
    compared separately) and SQLite's -wal/-shm files are not counted."""
    return sorted(
        p
        for p, v in after.items()
        if before.get(p) != v and not re.search(r"-(wal|shm)$", p) and p not in ledgers
    )


#: advice only Python can take, refused in a spec's or a command's messages
PYTHON_ONLY = re.compile(
    r"\w=None\b|\bpass \w+=|use an accountant with|\bframe\.rename\(|\bpl\.col\("
    r"|dpframe\.Accountant\(|\(nulls=",
    re.IGNORECASE,
)


def python_advice(case: Case, message: str) -> bool:
    """A spec's or a command's refusal advising a Python argument."""
    return case.surface in ("4-spec", "5-cli") and bool(PYTHON_ONLY.search(message))


def names_ok(case: Case, message: str) -> bool:
    m = message.lower()
    return any(n.lower() in m for n in case.names)


def describe_return(r: Any) -> str:
    if isinstance(r, pl.DataFrame):
        return f"DataFrame {r.shape} {r.head(2).to_dicts()}"[:200]
    if isinstance(r, tuple):
        return "(" + ", ".join(describe_return(x) for x in r) + ")"
    name = type(r).__name__
    if name == "JobPlan":
        return f"JobPlan(fits={r.fits}, epsilon={r.epsilon}, rows={r.rows.height})"
    if name == "JobResult":
        return f"JobResult(outputs={list(r.outputs)}, epsilon={r.epsilon})"
    return f"{name}: {r!r}"[:200]


class CaseTimeout(BaseException):
    pass


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise CaseTimeout in the case after ``seconds`` (main thread, where SIGALRM exists)."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum: int, frame: Any) -> None:
        raise CaseTimeout()

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(max(1, int(seconds)))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _leave_accountants() -> None:
    """Clear an accountant a case left entered, so that it cannot leak into the next."""
    from dpframe.core import accountant

    if dpframe.current_accountant() is not None:
        accountant._ACTIVE.set(())


_TB_LAST = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)\w*)(?::\s?(.*))?$"
)


def parse_cli(res: CLIResult) -> tuple[bool, str, str]:
    """(traceback?, exception type, message) from a CLI run."""
    text = res.stderr + "\n" + res.stdout
    if "Traceback (most recent call last)" in text:
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        for k in range(len(lines) - 1, -1, -1):
            m = _TB_LAST.match(lines[k].strip())
            if m and not lines[k].startswith(" "):
                msg = " ".join([m.group(2) or "", *[ln.strip() for ln in lines[k + 1 :]]])
                return True, m.group(1), msg.strip()
        return True, "Traceback", "\n".join(lines[-5:])
    err = res.stderr.strip() or res.stdout.strip()
    return False, "", re.sub(r"\s+", " ", err)


def run_case(case: Case, tmp: Path) -> Outcome:
    """Run ``case`` in the folder ``tmp`` (the current directory) and classify it."""
    ctx = Ctx(tmp=tmp, acct=make_accountant(case.acct))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.setup is not None:
            case.setup(ctx)
        before = snapshot(tmp)
        spend_before = spend_state(ctx)
        if case.kind == "cli":
            return _finish_cli(case, ctx, before, spend_before, case.fn(ctx))
        return _run_py(case, ctx, before, spend_before)


def _side_effects(ctx: Ctx, before: dict, spend_before: dict) -> tuple[list[str], list[str]]:
    ledgers = tuple(str(p.relative_to(ctx.tmp)) for p in ctx.ledgers)
    wrote = changed(before, snapshot(ctx.tmp), ledgers)
    return wrote, spent_diff(spend_before, spend_state(ctx))


def _run_py(case: Case, ctx: Ctx, before: dict, spend_before: dict) -> Outcome:
    exc: BaseException | None = None
    ret: Any = None
    tb = ""
    t0 = time.perf_counter()
    try:
        with _alarm(case.timeout):
            ret = case.fn(ctx)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # SystemExit too: a library must not exit the program
        exc = e
        if not isinstance(e, CaseTimeout):
            tb = traceback.format_exc()
    finally:
        _leave_accountants()
    elapsed = time.perf_counter() - t0
    wrote, spent = _side_effects(ctx, before, spend_before)
    remote = None
    if isinstance(exc, RemoteError):
        remote = exc.outcome
    elif isinstance(ret, RemoteOutcome):
        remote = ret
    if remote is not None:  # the subprocess checked its own writes and spend
        wrote = list(remote.wrote)
        spent = [f"remote acct spent: {remote.spent}"] if remote.spent not in (None, False) else []
    if isinstance(exc, CaseTimeout):
        return Outcome("timeout", "timeout", f"{elapsed:.0f} s > {case.timeout} s", wrote, spent)
    if exc is None or (remote is not None and remote.returned):
        return Outcome("silent-accept", "", "returned " + describe_return(ret), wrote, spent)
    if isinstance(exc, RemoteError):
        type_name, is_dp, message = exc.type_name, exc.is_dpframe, exc.message
    else:
        type_name = f"{type(exc).__module__}.{type(exc).__qualname__}"
        is_dp = isinstance(exc, DPFrameError)
        message = str(exc)
    if spent:
        cls = "spent"
    elif wrote:
        cls = "wrote"
    elif not is_dp:
        cls = "wrong-exception"
    elif not names_ok(case, message):
        cls = "no-name"
    elif python_advice(case, message):
        cls = "python-advice"
    else:
        cls = "pass"
    return Outcome(cls, type_name, message, wrote, spent, tb if cls != "pass" else "")


def _finish_cli(case: Case, ctx: Ctx, before: dict, spend_before: dict, res: CLIResult) -> Outcome:
    wrote, spent = _side_effects(ctx, before, spend_before)
    detail = f"exit code {res.rc}\nstdout:\n{res.stdout[-1500:]}\nstderr:\n{res.stderr[-3000:]}"
    if res.timed_out:
        return Outcome("timeout", "timeout", f"> {case.timeout} s", wrote, spent, detail)
    tb, type_name, message = parse_cli(res)
    side = "spent" if spent else "wrote" if wrote else None
    if tb:
        return Outcome(
            side or "wrong-exception", f"traceback: {type_name}", message, wrote, spent, detail
        )
    if res.rc == 0:
        out = re.sub(r"\s+", " ", res.stdout.strip())[-200:]
        return Outcome("silent-accept", "exit 0", "accepted: " + out, wrote, spent, detail)
    if res.rc not in (1, 2):  # 3: a check failed; 4: "any other failure": not an input error
        kind = f"exit {res.rc} (not an input-error code)"
        return Outcome(side or "wrong-exception", kind, message, wrote, spent, detail)
    cls = side or (
        "no-name"
        if not names_ok(case, message)
        else "python-advice"
        if python_advice(case, message)
        else "pass"
    )
    return Outcome(cls, f"exit {res.rc}", message, wrote, spent, detail if cls != "pass" else "")
