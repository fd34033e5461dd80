"""The published report.html in a real browser (headless Chromium), offline.

A real release job writes the report; Chromium renders it from a ``file://`` URL with
its networking features off, and we read back the DOM it built and a screenshot. The
page's own CSS sets a background colour no browser uses by default: finding it in the
screenshot shows the inline styles were applied with nothing fetched.

``make test`` installs Chromium (``make setup-chromium``) and sets
``DPFRAME_REQUIRE_CHROMIUM=1``, so a missing browser fails there; elsewhere the test
skips, saying why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dpframe.jobs import load_spec, run
from dpframe.jobs.report import BACKGROUND
from tests.jobs.conftest import write_spec

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
URL_ATTR = re.compile(r"""(?:src|href)\s*=\s*["']?\s*https?:|url\(\s*["']?\s*https?:""", re.I)

REQUIRED = os.environ.get("DPFRAME_REQUIRE_CHROMIUM") == "1"


@pytest.fixture
def chromium() -> str:
    if CHROMIUM is None:
        reason = (
            "headless Chromium is not installed (make setup-chromium, or apt-get install chromium)"
        )
        if REQUIRED:
            pytest.fail(f"DPFRAME_REQUIRE_CHROMIUM=1 but {reason}")
        pytest.skip(reason)
    return CHROMIUM


def _chromium(browser: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "HOME": str(tmp)},
    )


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def test_the_published_report_renders_offline_with_its_styles(chromium: str, tmp_path: Path):
    spec = load_spec(write_spec(tmp_path, rows=2_000))
    result = run(spec, progress=False)
    page = tmp_path / "released" / "report.html"
    text = page.read_text()
    # nothing to fetch: no remote source, link or url(), no script, no external stylesheet
    assert not URL_ATTR.search(text)
    assert "<script" not in text.lower() and "<link" not in text.lower()

    dom = _chromium(chromium, tmp_path, "--dump-dom", page.resolve().as_uri()).stdout
    assert "<main>" in dom and result.run in dom
    rows = result.plan.rows
    for name in ("by_region", "microdata", "age_shares", "scores_cov"):
        assert f"Release {name}" in dom
        for mechanism, epsilon in (
            rows.filter(rows["release"] == name).select("mechanism", "epsilon").rows()
        ):
            assert f"<td>{mechanism}</td>" in dom
            assert f'<td class="num">{epsilon:.6g}</td>' in dom
    assert dom.count('<span class="badge passed">passed</span>') == 4
    assert "FAILED" not in dom

    shot = tmp_path / "r.png"
    _chromium(
        chromium,
        tmp_path,
        f"--screenshot={shot}",
        "--window-size=1200,2000",
        page.resolve().as_uri(),
    )
    assert shot.exists() and shot.stat().st_size > 10_000
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - PIL is in the dev environment
        return
    with Image.open(shot) as img:
        img = img.convert("RGB")
        assert img.size == (1200, 2000)
        colours = img.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50  # text, tables, badges: not blank
        # the page's CSS background, where no box covers it (a browser default is white)
        assert img.getpixel((3, 3)) == _rgb(BACKGROUND)
        assert img.getpixel((3, 1990)) == _rgb(BACKGROUND)
