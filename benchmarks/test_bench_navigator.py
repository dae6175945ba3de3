"""Opening the HTML navigator of the real pi session (2.4 MB of JSONL) in headless
Chromium: file size, time from the start of loading the file to the page ready, and the
script's own share; median of five loads, one run. Skipped without Chromium."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
from conftest import RESULTS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from browser import browser

import glyphpack

PI = Path(__file__).resolve().parents[2] / "shared" / "sessions" / "pi" / "pimono-before-compaction.jsonl"


@pytest.mark.skipif(not PI.is_file(), reason="shared/sessions is not beside the repository")
def test_navigator_opens_the_real_session(tmp_path):
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.import_session(glyphpack.import_file(PI), "pi")
        page = glyphpack.export_html(ws)
        nodes = len(ws.tree.nodes("pi"))
    out = tmp_path / "pi.html"
    out.write_text(page)
    loads, scripts = [], []
    with browser() as driver:
        for _ in range(5):
            driver.get(out.as_uri())
            state = driver.execute_script("return window.glyphpackNavigator")
            loads.append(state["sinceNavigation"])
            scripts.append(state["ms"])
            assert driver.execute_script("return document.querySelectorAll('#tree .node').length") == nodes
    RESULTS["navigator: pi session file"] = (out.stat().st_size / 1e6, f"MB ({nodes} messages)")
    RESULTS["navigator: load to ready, median of 5"] = (statistics.median(loads), "ms")
    RESULTS["navigator: of which the page's script"] = (statistics.median(scripts), "ms")
