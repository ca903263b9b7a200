"""The report renders in a real browser: headless Chromium takes a screenshot that is not blank."""

from __future__ import annotations

import os
import shutil

import pytest
from report_world import build_report_run

from ade_core.testing import run_command

REQUIRE_ENV = "ADE_REPORT_REQUIRE_CHROMIUM"  # set by CI (.ci/run installs Debian's chromium): fail, never skip


def chromium() -> str:
    """The Chromium executable; skip without one — or fail where CI requires it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    reason = "needs headless Chromium (apt-get install chromium)"
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set: " + reason)
    pytest.skip(reason)


def test_chromium_renders_the_report(tmp_path):
    browser = chromium()
    world = build_report_run(tmp_path)
    shot = tmp_path / "report.png"
    done = run_command(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,4000",
            world.report.resolve().as_uri(),
        ],
        idle_s=10,
    )
    assert shot.is_file(), f"no screenshot:\n{done.stderr[-2000:]}"
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (4000, 1280)
    assert pixels[..., :3].std() > 0.05  # text, tables and figures, not a blank page
    # The figures are drawn: the page holds the figures' blue (in-loop line, lineage arrows) somewhere.
    rgb = pixels[..., :3]
    blue = (rgb[..., 2] > 0.6) & (rgb[..., 0] < 0.35) & (rgb[..., 1] > 0.3) & (rgb[..., 1] < 0.6)
    assert blue.sum() > 500
