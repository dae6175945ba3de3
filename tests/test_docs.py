"""The README and the docs: figures written from the code are current, every relative
link in the README reaches a file and a heading that exist, and the site builds with
every warning an error (a broken link, a missing image, a page out of the contents)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def github_slug(heading: str) -> str:
    """A heading's anchor as GitHub (and the site, ``myst_heading_anchors``) make it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {github_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_the_figures_the_docs_quote_are_written_from_the_code():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_figures.py"), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_relative_link_of_the_readme_reaches_a_file_and_a_heading():
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", (ROOT / "README.md").read_text())
    assert len(links) >= 15
    for target, anchor in links:
        if target.startswith("http"):
            continue
        path = ROOT / target
        assert path.exists(), f"README links to {target}, which is not there"
        if anchor:
            assert anchor in anchors(path), f"README links to {target}#{anchor}: no such heading"


def test_the_readme_is_short_and_its_quick_start_makes_the_venv_first():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert quick.index("python3 -m venv") < quick.index("pip install")


@pytest.mark.slow
def test_the_docs_site_builds_with_every_warning_an_error(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(ROOT / "docs"), str(tmp_path / "site")],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "frameworks.html").exists() and (tmp_path / "site" / "providers.html").exists()
