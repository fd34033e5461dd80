"""``report.html``: one self-contained page a data owner opens offline.

A release job (:func:`dpframe.jobs.run`) writes ``report.html`` into its run, next to the
tables, so it is published with them; ``dpframe check`` rewrites it with the new check
results. The page holds, for the run: its id, time, spec folder, output folder and ledger
(its location never shows a password), and the epsilon and delta it spent; for each
release: its name, its privacy unit (record, or the person column with the
``max_rows``/``max_groups`` bounds it assumes) and neighbour relation, its plan rows
(mechanism, epsilon, delta, sensitivity, scale, expected error at 95 %, and the error
under the other relation or why there is none), and its checks (every expectation with
its rule, passed or failed, and the lines that say why a check failed); for a spec with
error95 targets, the budgets found (each target, the budget found, the error95 it gives
and what it assumes); and, when given, a DR-HA risk curve (an assessment, not a release:
it spends no budget) drawn as an inline SVG line chart.

Nothing is fetched when the page is opened: the styles are inline (one ``<style>``
element), the charts are SVG written here, there is no script, no external font and no
``http(s)://`` source or link. Every string that comes from the data or the spec is
escaped with :func:`html.escape`.

:func:`render_report` is the pure part (data in, HTML text out). :func:`write_report`
writes ``report.html`` and ``report.json`` (the run's facts, the plan rows and the risk
curve, so that ``dpframe check`` can render the page again with new check results) into a
run folder, each file whole or not at all.

Examples
--------
>>> import polars as pl
>>> from dpframe.jobs.report import RunInfo, render_report
>>> info = RunInfo(run="0123abcd", time="2025-01-01T00:00:00+00:00", spec="/data",
...                output="/data/released", ledger="/data/ledger.db", epsilon=0.5,
...                delta=0.0, plan=[{"release": "shares", "mechanism": "laplace",
...                                  "epsilon": 0.5}])
>>> page = render_report(info, [])
>>> page.startswith("<!DOCTYPE html>") and "shares" in page and "http" not in page
True
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.files import atomic_write_text
from dpframe.errors import DPFrameError, InvalidParameterError

__all__ = [
    "REPORT",
    "REPORT_DATA",
    "RISK_LABEL",
    "RunInfo",
    "check_risk",
    "read_report_data",
    "redacted_ledger",
    "render_report",
    "write_report",
]

#: the report's file name in a run
REPORT = "report.html"
#: the facts the report was rendered from (read back by ``dpframe check``)
REPORT_DATA = "report.json"
#: the label of a risk curve in the report
RISK_LABEL = "assessment, not a release: spends no budget"

_FORMAT = "dpframe-report"
_VERSION = 1

#: the plan's columns shown, with their headings
PLAN_COLUMNS = {
    "statistic": "statistic",
    "mechanism": "mechanism",
    "epsilon": "epsilon",
    "delta": "delta",
    "sensitivity": "sensitivity",
    "scale": "scale",
    "error95": "expected error (95 %)",
    "other": "under the other neighbour relation",
    "note": "note",
}

#: the columns of the budgets found for error95 targets (``JobPlan.accuracy_rows``)
ACCURACY_COLUMNS = {
    "statistic": "statistic",
    "target": "error95 target",
    "currency": "budget",
    "budget": "found",
    "error95": "error95 it gives",
    "assumption": "assuming",
}

#: the risk table's columns the chart needs (``dpframe.risk.drha``'s output)
RISK_COLUMNS = ("mechanism", "measure", "weighted", "epsilon", "delta", "risk", "exact")

#: the page's background (the Chromium test looks for it in a screenshot)
BACKGROUND = "#f3efe6"

_PALETTE = ("#1f5fa8", "#c0392b", "#2e8b57", "#8e44ad", "#d35400", "#16808a", "#7f6a00", "#555")

_CSS = f"""
* {{ box-sizing: border-box; }}
body {{ background: {BACKGROUND}; color: #1d1d1b; margin: 0; padding: 24px 32px;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }}
main {{ max-width: 1100px; margin: 0 auto; }}
h1 {{ font-size: 24px; margin: 0 0 12px; }}
h2 {{ font-size: 19px; margin: 28px 0 8px; border-bottom: 2px solid #c9c1b0; }}
section > h2:first-child {{ margin-top: 4px; }}
h3 {{ font-size: 15px; margin: 18px 0 6px; }}
section.release, section.risk, section.run {{ background: #fffdf8; border: 1px solid #d8d0bf;
  border-radius: 6px; padding: 12px 18px 16px; margin: 16px 0; }}
table {{ border-collapse: collapse; width: 100%; margin: 4px 0 8px; font-size: 13px; }}
th, td {{ border: 1px solid #ddd5c4; padding: 3px 7px; text-align: left; vertical-align: top; }}
th {{ background: #ece5d6; font-weight: 600; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
td.rule {{ font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px;
  word-break: break-word; }}
dl.facts {{ display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }}
dl.facts dt {{ font-weight: 600; }}
dl.facts dd {{ margin: 0; word-break: break-all; }}
.passed {{ color: #1d6b34; font-weight: 600; }}
.failed {{ color: #a61b1b; font-weight: 700; }}
.badge {{ display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
  font-weight: 700; color: #fff; vertical-align: middle; }}
.badge.passed {{ background: #2e7d32; }}
.badge.failed {{ background: #b71c1c; }}
ul.failures {{ background: #fbeaea; border-left: 4px solid #b71c1c; padding: 6px 10px 6px 28px;
  margin: 6px 0; }}
ul.failures li {{ font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }}
.label {{ display: inline-block; background: #fff4cc; border: 1px solid #e0c75a;
  padding: 2px 8px; border-radius: 4px; font-weight: 600; }}
.muted {{ color: #6b6558; }}
svg.chart {{ background: #fff; border: 1px solid #ddd5c4; margin: 6px 12px 6px 0; }}
svg.chart text {{ font: 11px system-ui, "DejaVu Sans", sans-serif; fill: #333; }}
svg.chart .axis {{ stroke: #333; stroke-width: 1; }}
svg.chart .grid {{ stroke: #e6e0d2; stroke-width: 1; }}
footer {{ margin-top: 24px; font-size: 12px; }}
"""


@dataclass(frozen=True)
class RunInfo:
    """The facts of one run that its report shows (and ``report.json`` keeps).

    ``plan`` is the run's plan rows (``JobPlan.rows`` as dicts: release, statistic,
    mechanism, epsilon, delta, sensitivity, scale, error95, note, unit, neighbours,
    error95_other, other); ``accuracy`` the budgets found for its error95 targets
    (``JobPlan.accuracy_rows()``: a summary line and one row per target), or None;
    ``risk`` a DR-HA table
    as dicts (``dpframe.risk.drha``'s output), or None. ``ledger`` must already be free
    of passwords (:func:`redacted_ledger`).
    """

    run: str
    time: str
    spec: str
    output: str
    ledger: str
    epsilon: float | None
    delta: float | None
    plan: list[dict[str, Any]] = field(default_factory=list)
    risk: list[dict[str, Any]] | None = None
    risk_title: str | None = None
    checked: str | None = None
    accuracy: dict[str, Any] | None = None

    def to_json(self) -> str:
        doc = {"format": _FORMAT, "version": _VERSION, **asdict(self)}
        return json.dumps(_finite(doc), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RunInfo:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            raise DPFrameError(f"not a dpframe report data file (format {_FORMAT!r})")
        if doc.get("version") != _VERSION:
            raise DPFrameError(f"report data version {doc.get('version')!r}; this reads {_VERSION}")
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in doc.items() if k in names})


def _finite(obj: Any) -> Any:
    """NaN and infinities as None (strict JSON)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def redacted_ledger(target: Path | str) -> str:
    """A ledger's location for the report: a file's path, or a URL without its password."""
    if isinstance(target, str) and "://" in target:
        from dpframe.core.postgres import redact  # no driver imported: string work only

        return redact(target)
    return str(target)


def now() -> str:
    """The current time, UTC, to the second (ISO 8601)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# -- formatting ------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        v = float(value)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        return format(v, ".6g")
    return _e(value)


def _value(v: Any) -> str:
    if isinstance(v, list):
        shown = ", ".join(_value(x) for x in v[:20])
        return f"[{shown}{f', … ({len(v)} values)' if len(v) > 20 else ''}]"
    if isinstance(v, float):
        return format(v, ".10g")
    return repr(v) if isinstance(v, str) else str(v)


def _rule(config: Mapping[str, Any]) -> str:
    kwargs = {k: v for k, v in (config.get("kwargs") or {}).items() if k != "batch_id"}
    args = ", ".join(f"{k}={_value(v)}" for k, v in kwargs.items())
    return f"{config.get('type', '?')}({args})"


def _expectations(check: Any) -> list[tuple[str, str, bool]]:
    """(table, rule, success) of every expectation a check evaluated."""
    out = []
    results = (check.result or {}).get("results") or {}
    for table, res in results.items():
        for r in res.get("results") or []:
            out.append((str(table), _rule(r.get("expectation_config") or {}), bool(r["success"])))
    return out


# -- the page --------------------------------------------------------------------------------


def _facts(info: RunInfo, checks: Sequence[Any]) -> str:
    failed = sum(1 for c in checks if not c.success)
    verdict = (
        "no checks"
        if not checks
        else (
            f'<span class="passed">all {len(checks)} release checks passed</span>'
            if not failed
            else f'<span class="failed">{failed} of {len(checks)} release checks FAILED</span>'
        )
    )
    rows = [
        ("run", _e(info.run)),
        ("time", _e(info.time)),
        *([("checked", _e(info.checked))] if info.checked else []),
        ("spec folder", _e(info.spec)),
        ("output folder", _e(info.output)),
        ("ledger", _e(info.ledger)),
        ("epsilon spent", _num(info.epsilon)),
        ("delta spent", _num(info.delta)),
        ("checks", verdict),
    ]
    items = "\n".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return (
        f'<section class="run"><h2>Run {_e(info.run)}</h2><dl class="facts">{items}</dl></section>'
    )


def _plan_table(rows: list[dict[str, Any]], columns: Mapping[str, str] = PLAN_COLUMNS) -> str:
    if not rows:
        return '<p class="muted">no plan rows</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h in columns.values())
    body = []
    for row in rows:
        cells = []
        for col in columns:
            v = row.get(col)
            if (isinstance(v, int | float) and not isinstance(v, bool)) or v is None:
                cells.append(f'<td class="num">{_num(v)}</td>')
            else:
                cells.append(f"<td>{_e(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<table class="plan"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def _check_block(check: Any | None) -> str:
    if check is None:
        return '<p class="muted">not checked</p>'
    status = "passed" if check.success else "failed"
    exps = _expectations(check)
    met = sum(1 for *_, ok in exps if ok)
    parts = [
        f'<p>checks: <span class="badge {status}">{status}</span> '
        f"{met} of {len(exps) or check.n_expectations} expectations met</p>"
    ]
    if check.failures:
        items = "".join(f"<li>{_e(f)}</li>" for f in check.failures)
        parts.append(f'<ul class="failures">{items}</ul>')
    if exps:
        rows = "".join(
            f"<tr><td>{_e(t)}</td><td class='rule'>{_e(rule)}</td>"
            f'<td class="{"passed" if ok else "failed"}">{"passed" if ok else "FAILED"}</td></tr>'
            for t, rule, ok in exps
        )
        parts.append(
            '<table class="checks"><thead><tr><th>table</th><th>expectation (rule)</th>'
            f"<th>result</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    return "\n".join(parts)


def _accuracy_section(info: RunInfo) -> str:
    """The budgets found for the run's error95 targets (none without targets)."""
    if not info.accuracy:
        return ""
    said = info.accuracy.get("summary") or ""
    rows = [
        {**r, "target": r.get("target") if r.get("share") is None else f"share {r['share']:g}"}
        for r in info.accuracy.get("rows") or []
    ]
    return (
        '<section class="run accuracy"><h2>Plan by accuracy</h2>'
        f"<p>{_e(said)}</p>{_plan_table(rows, ACCURACY_COLUMNS)}</section>"
    )


def _release_sections(info: RunInfo, checks: Sequence[Any]) -> str:
    names: list[str] = []
    for row in info.plan:
        if row.get("release") not in names:
            names.append(row.get("release"))
    by_name = {c.release: c for c in checks}
    names += [n for n in by_name if n not in names]
    out = []
    for name in names:
        rows = [r for r in info.plan if r.get("release") == name]
        kind = next((r.get("kind") for r in rows if r.get("kind")), None)
        eps = sum(float(r["epsilon"]) for r in rows if r.get("epsilon") is not None)
        # a report of an older version has neither in its plan rows: said, not guessed
        unit = next((r.get("unit") for r in rows if r.get("unit")), "unknown")
        relation = next((r.get("neighbours") for r in rows if r.get("neighbours")), "unknown")
        out.append(
            f'<section class="release"><h2>Release {_e(name)}'
            + (f' <span class="muted">({_e(kind)})</span>' if kind else "")
            + f'</h2><dl class="facts"><dt>privacy unit</dt><dd class="unit">{_e(unit)}</dd>'
            + f"<dt>neighbours</dt><dd>{_e(relation)}</dd>"
            + f"<dt>epsilon of its plan</dt><dd>{_num(eps)}</dd></dl>"
            + f"<h3>Plan</h3>{_plan_table(rows)}"
            + f"<h3>Checks</h3>{_check_block(by_name.get(name))}</section>"
        )
    return "\n".join(out)


def _ticks(lo: float, hi: float) -> list[float]:
    """About five round values in [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    return [start + i * step for i in range(int((hi - start) / step + 1e-9) + 1)]


def _series(frame: pl.DataFrame) -> list[tuple[str, pl.DataFrame, bool]]:
    keys = frame.select("measure", "weighted", "delta").unique(maintain_order=True)
    out = []
    for measure, weighted, delta in keys.rows():
        part = frame.filter(
            (pl.col("measure") == measure)
            & (pl.col("weighted") == weighted)
            & (pl.col("delta").is_null() if delta is None else pl.col("delta") == delta)
        ).sort("epsilon")
        label = f"{measure}, {'weighted' if weighted else 'unweighted'}"
        if delta is not None:
            label += f", δ={delta:g}"
        out.append((label, part, bool(part["exact"].all())))
    return out


def _chart(mechanism: str, frame: pl.DataFrame) -> str:
    """One SVG line chart: risk against epsilon (log scale), a line per series."""
    w, h = 500, 300
    left, right, top = 58, 16, 30
    pw, ph = w - left - right, 220
    data = frame.filter(
        (pl.col("epsilon") > 0) & pl.col("epsilon").is_finite() & pl.col("risk").is_finite()
    )
    if data.is_empty():
        return f'<p class="muted">{_e(mechanism)}: no finite risk values to draw</p>'
    lx = [math.log10(e) for e in data["epsilon"].to_list()]
    x0, x1 = min(lx), max(lx)
    if x1 - x0 < 1e-12:
        x0, x1 = x0 - 0.5, x1 + 0.5
    rmax = max(data["risk"].to_list())
    y0, y1 = 0.0, (min(1.0, rmax * 1.05) if rmax <= 1 else rmax * 1.05)
    if y1 <= 0:
        y1 = 1.0
    series = _series(data)
    h = max(h, top + ph + 52 + 15 * len(series))

    def sx(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * pw

    def sy(v: float) -> float:
        return top + ph - (v - y0) / (y1 - y0) * ph

    parts = [
        f'<svg class="chart" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" role="img" aria-label="DR-HA against epsilon, {_e(mechanism)}">',
        f'<text x="{left + pw / 2:.1f}" y="18" text-anchor="middle" font-weight="600">'
        f"{_e(mechanism)}</text>",
    ]
    for d in range(math.ceil(x0 - 1e-9), math.floor(x1 + 1e-9) + 1):
        x = sx(d)
        parts.append(
            f'<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}"/>'
            f'<text x="{x:.1f}" y="{top + ph + 15}" text-anchor="middle">{10.0**d:g}</text>'
        )
    for t in _ticks(y0, y1):
        y = sy(t)
        parts.append(
            f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}"/>'
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}"/>'
        f'<text x="{left + pw / 2:.1f}" y="{top + ph + 32}" text-anchor="middle">'
        "epsilon (log scale)</text>"
        f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + ph / 2:.1f})">DR-HA (risk)</text>'
    )
    for i, (label, part, exact) in enumerate(series):
        colour = _PALETTE[i % len(_PALETTE)]
        pts = " ".join(
            f"{sx(math.log10(e)):.2f},{sy(r):.2f}"
            for e, r in zip(part["epsilon"].to_list(), part["risk"].to_list(), strict=True)
        )
        dash = "" if exact else ' stroke-dasharray="6 4"'
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{pts}">'
            f"<title>{_e(label)}</title></polyline>"
        )
        ly = top + ph + 48 + 15 * i
        parts.append(
            f'<line x1="{left}" y1="{ly - 4}" x2="{left + 24}" y2="{ly - 4}" stroke="{colour}" '
            f'stroke-width="2"{dash}/><text x="{left + 30}" y="{ly}">'
            f"{_e(label)}{'' if exact else ' (not exact)'}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def check_risk(risk: Any) -> None:
    """Refuse (before a job spends anything) a ``risk=`` that is not a DR-HA table."""
    if risk is None:
        return
    if not isinstance(risk, pl.DataFrame):
        raise InvalidParameterError(
            f"risk must be a polars DataFrame from dpframe.risk.drha, got {type(risk).__name__}"
        )
    missing = [c for c in RISK_COLUMNS if c not in risk.columns]
    if missing:
        raise InvalidParameterError(
            f"risk must be a DR-HA table (dpframe.risk.drha); it lacks the columns {missing}"
        )
    wrong = [
        f"{c} ({risk.schema[c]})"
        for c, ok in (
            ("epsilon", lambda t: t.is_numeric()),
            ("risk", lambda t: t.is_numeric()),
            ("delta", lambda t: t.is_numeric() or t == pl.Null),
            ("weighted", lambda t: t == pl.Boolean),
            ("exact", lambda t: t == pl.Boolean),
        )
        if not ok(risk.schema[c])
    ]
    if wrong:
        raise InvalidParameterError(
            f"risk must be a DR-HA table (dpframe.risk.drha); wrong column types: {wrong}"
        )


def _risk_section(info: RunInfo, risk: pl.DataFrame | None) -> str:
    if risk is None:
        return ""
    check_risk(risk)
    title = info.risk_title or "DR-HA: disclosure risk from homogeneity attack"
    notes = []
    if "assessment" in risk.columns and risk.height:
        notes = [str(a) for a in risk["assessment"].unique(maintain_order=True).to_list() if a]
    charts = "".join(
        _chart(str(m), risk.filter(pl.col("mechanism") == m))
        for m in risk["mechanism"].unique(maintain_order=True).to_list()
    )
    return (
        f'<section class="risk"><h2>{_e(title)}</h2>'
        f'<p><span class="label">{_e(RISK_LABEL)}</span></p>'
        + "".join(f'<p class="muted">{_e(n)}</p>' for n in notes)
        + "<p>Risk against epsilon on a log scale, one chart per mechanism; a dashed line "
        "holds values that are not exact (bounds).</p>" + f"{charts}</section>"
    )


def render_report(info: RunInfo, checks: Sequence[Any], risk: pl.DataFrame | None = None) -> str:
    """The report of one run, as one self-contained HTML page (no network, no script).

    Parameters
    ----------
    info : RunInfo
        The run's facts and plan rows.
    checks : sequence of CheckResult
        The checks of its releases (:func:`dpframe.jobs.checks.check_release`).
    risk : polars.DataFrame, optional
        A DR-HA table on an epsilon grid (``dpframe.risk.drha``); default ``info.risk``.
        Drawn as line charts, labelled as an assessment that spends no budget.
    """
    if risk is None and info.risk is not None:
        risk = pl.DataFrame(info.risk, infer_schema_length=None)
    body = "\n".join(
        [
            f"<h1>dpframe release report — run {_e(info.run)}</h1>",
            _facts(info, checks),
            _accuracy_section(info),
            _release_sections(info, checks),
            _risk_section(info, risk),
            '<footer class="muted">Written by dpframe. The tables, their suites '
            "(<code>*.suite.json</code>) and validation results (<code>*.validation.json</code>) "
            "are next to this file.</footer>",
        ]
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>dpframe report — run {_e(info.run)}</title>"
        f"<style>{_CSS}</style></head>\n"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def write_report(
    folder: Path, info: RunInfo, checks: Sequence[Any], risk: pl.DataFrame | None = None
) -> Path:
    """Write ``report.json`` and ``report.html`` into ``folder`` (each whole or not at all).

    ``risk`` (a DR-HA table) is kept in ``report.json``, so the page rendered again by
    ``dpframe check`` still has the curve. Returns the page's path.
    """
    if risk is not None:
        cols = [c for c in (*RISK_COLUMNS, "assessment") if c in risk.columns]
        info = RunInfo(**{**asdict(info), "risk": risk.select(cols).to_dicts()})
    page = render_report(info, checks)
    atomic_write_text(folder / REPORT_DATA, info.to_json())
    atomic_write_text(folder / REPORT, page)
    return folder / REPORT


def read_report_data(folder: Path) -> RunInfo | None:
    """The facts a run's report was rendered from, or None if the run has none."""
    try:
        text = (folder / REPORT_DATA).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return RunInfo.from_json(text)
