import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import glyphpack
from glyphpack._cli import main


def test_render_writes_pages_and_prints_a_table(tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("hello\tworld\n" * 5000)
    assert main(["render", str(source), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "pages" in out and "cells used" in out and "folded" in out
    pngs = sorted((tmp_path / "out").glob("page-*.png"))
    assert [p.name for p in pngs] == ["page-0001.png", "page-0002.png", "page-0003.png"]
    assert main(["read", *map(str, pngs)]) == 0
    assert capsys.readouterr().out == ("hello   world\n" * 5000).rstrip("\n") + "\n"


@pytest.mark.slow  # a new process (1.5-2 s of imports): CI runs it
def test_render_json_and_stdin(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "glyphpack", "render", "-", "--json", "--layout", "lines", "--shape", "8x13"],
        input="def f():\n    return 1\n",
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["pages"] == 1 and report["shape"] == "8x13" and report["layout"] == "lines"
    assert report["page_height"] == 2 * 13


def test_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["render", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"nope")
    assert main(["read", str(bad)]) == 2
    assert "not a readable image" in capsys.readouterr().err
    from PIL import Image

    Image.new("1", (40, 16)).save(tmp_path / "photo.png")
    assert main(["read", str(tmp_path / "photo.png")]) == 2
    err = capsys.readouterr().err
    assert "photo.png: the page does not say which shape drew it" in err and "Traceback" not in err


def test_read_takes_the_shape_and_layout_from_the_page(tmp_path, capsys):
    source = tmp_path / "code.py"
    source.write_text("def f(x):\n    return x * 2\n")
    assert main(["render", str(source), "--shape", "9x15-loose", "--layout", "lines", "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert main(["read", str(tmp_path / "out" / "page-0001.png")]) == 0
    assert capsys.readouterr().out == "def f(x):\n    return x * 2\n"


def test_fonts_lists_every_shape(capsys):
    assert main(["fonts"]) == 0
    out = capsys.readouterr().out
    for name in ("5x8", "6x13", "8x13", "8x13-loose", "unifont"):
        assert name in out


def test_confusables_listing(capsys):
    assert main(["fonts", "--confusables", "5x8"]) == 0
    out = capsys.readouterr().out
    assert "U+003B ;  U+037E" in out and "identical" in out
    assert out.strip().splitlines()[-1].startswith("5x8: ")


@pytest.mark.slow  # 2.4 s of downscaling for a plot: CI runs it
def test_legibility_command_writes_plot_and_table(tmp_path, capsys):
    plot = tmp_path / "legibility.png"
    assert main(["legibility", "--shape", "5x8", "--out", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "| 5x8 | bicubic | 1.00 |" in out
    assert "5x8: unreadable" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_generate_context_compact_shake(tmp_path, capsys):
    session = tmp_path / "session.json"
    assert main(["generate-session", str(session), "--chars", "200000", "--seed", "4"]) == 0
    capsys.readouterr()
    assert main(["context", str(session), "--model", "claude-sonnet-4-5"]) == 0
    out = capsys.readouterr().out
    assert "tool results" in out and "█" in out
    out_dir = tmp_path / "view"
    assert main(["compact", str(session), "--model", "claude-sonnet-4-5", "--budget", "8000", "--out", str(out_dir)]) == 0
    report = capsys.readouterr().out
    assert "snapshot" in report and "fits:" in report
    view = json.loads((out_dir / "view.json").read_text())
    assert any(m["id"].startswith("snapshot-") for m in view)
    assert sorted(p.name for p in out_dir.glob("page-*.png"))
    assert main(["compact", str(session), "--model", "o3-mini", "--budget", "100"]) == 1  # cannot fit: says so
    assert "does not fit" in capsys.readouterr().out
    assert main(["shake", str(session), "--model", "gpt-5.4"]) == 0
    assert "shake:" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["context", str(bad), "--model", "gpt-5.4"]) == 2


def test_contact_sheet(tmp_path, capsys):
    import io

    from PIL import Image

    source = tmp_path / "in.txt"
    source.write_text("contact sheet text " * 8000)
    sheet = tmp_path / "sheet.png"
    assert main(["render", str(source), "--model", "claude-sonnet-4-5", "--contact-sheet", str(sheet)]) == 0
    assert "contact sheet" in capsys.readouterr().out
    with Image.open(io.BytesIO(sheet.read_bytes())) as image:
        assert image.width == 1600 and image.height > 100
    import pytest

    from glyphpack import GlyphpackError
    from glyphpack._render.sheet import contact_sheet

    with pytest.raises(GlyphpackError, match="no pages"):
        contact_sheet([])


def test_version(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("glyphpack ")


def test_cli_shape_choices_are_the_catalog():
    """The CLI names shapes without loading fonts; catches a shape added to SHAPES only."""
    from glyphpack._cli.common import SHAPE_NAMES
    from glyphpack._render.shapes import SHAPES

    assert set(SHAPE_NAMES) == set(SHAPES)


def test_cli_format_choices_are_the_registry():
    """Catches a format the importers read that the CLI does not offer, or the reverse."""
    from glyphpack._cli.common import FORMAT_NAMES
    from glyphpack._importers.registry import FORMATS

    assert set(FORMAT_NAMES) == set(FORMATS)


@pytest.mark.slow
def test_warm_fills_the_caches_so_a_new_process_compiles_nothing(tmp_path):
    """``glyphpack warm`` (a container build step): afterwards a new process renders
    from the caches: no kernel compiled, no atlas built."""
    import os

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), GLYPHPACK_CACHE_DIR=str(tmp_path / "cache"))
    warm = subprocess.run([sys.executable, "-m", "glyphpack", "warm"], env=env, capture_output=True, text=True, timeout=300)
    assert warm.returncode == 0, warm.stderr
    assert "font atlases" in warm.stdout and "render kernels" in warm.stdout

    def cached() -> dict[str, float]:
        return {str(p): p.stat().st_mtime for p in tmp_path.rglob("*") if p.is_file()}

    before = cached()
    assert any("map_codepoints" in name for name in before) and any("draw_page" in name for name in before)
    probe = (
        "import glyphpack; glyphpack.render('tab\\there\\nline ' * 9000, layout='lines'); "
        "glyphpack.render('x' * 9000, model='gpt-5.4'); glyphpack.render('x' * 99, shape='10x20')"
    )
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, timeout=300)
    assert cached() == before  # nothing compiled or built again


def test_render_with_a_model_draws_what_it_reads_unless_told_dense(tmp_path, capsys):
    from glyphpack._cli import main

    source = tmp_path / "notes.txt"
    source.write_text("the parser keeps each record's offset\n" * 40)
    assert main(["render", str(source), "--model", "claude-sonnet-4-5", "--out", str(tmp_path / "exact")]) == 0
    shape_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("shape"))
    assert shape_line.split()[1] == "9x15-loose" and "no reading evidence for claude-sonnet-4-5" in shape_line  # as the README says it
    assert main(["render", str(source), "--model", "claude-opus-4-8", "--out", str(tmp_path / "opus")]) == 0
    shape_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("shape"))
    assert "the densest shape claude-opus-4-8 is known to read exactly (pxpipe" in shape_line
    assert main(["render", str(source), "--model", "claude-sonnet-4-5", "--fidelity", "dense", "--out", str(tmp_path / "d")]) == 0
    assert next(line for line in capsys.readouterr().out.splitlines() if line.startswith("shape")).split()[1] == "5x8"
    assert main(["render", str(source), "--out", str(tmp_path / "none")]) == 0  # no model: the default shape
    assert next(line for line in capsys.readouterr().out.splitlines() if line.startswith("shape")).split()[1] == "5x8"


def test_context_of_a_file_by_agent_and_of_a_workspace_as_its_slash_command(tmp_path, capsys):
    from glyphpack._cli import main

    source = Path(__file__).parent / "data" / "sessions" / "as-claude-small-schemadrift.jsonl"
    assert main(["context", str(source), "--model", "claude-sonnet-4-5", "--agent", "sidechain-1", "--context-window", "1000"]) == 0
    shown = capsys.readouterr()
    lines = shown.out.splitlines()
    assert lines[0] == "agent sidechain-1: 5 messages, ~77 tokens for claude-sonnet-4-5 (claude via anthropic)"
    assert lines[1] == "window 1,000: 8% used, 923 free"
    assert "messages of agent main" in shown.err
    assert main(["context", str(source), "--model", "claude-sonnet-4-5", "--agent", "nobody"]) == 2
    assert "no agent 'nobody' in " in (err := capsys.readouterr().err) and "(agents: main, sidechain-1)" in err
    ws = tmp_path / "ws"
    assert main(["import", str(source), "--workspace", str(ws), "--conversation", "c"]) == 0
    capsys.readouterr()
    assert main(["context", str(ws), "c", "--model", "claude-sonnet-4-5", "--agent", "sidechain-1"]) == 0
    from glyphpack import Workspace
    from glyphpack._session.session import Session

    with Workspace(ws) as workspace:
        expected = Session(workspace, "c", "sidechain-1", model="claude-sonnet-4-5").command("/context").text
    assert capsys.readouterr().out == expected + "\n"
    assert main(["context", str(ws), "--model", "claude-sonnet-4-5"]) == 2
    assert "name the conversation" in capsys.readouterr().err


@pytest.mark.parametrize(("fidelity", "shape"), [(None, b"shape=9x15-loose;"), ("dense", b"shape=5x8;")])
def test_compact_draws_the_readers_exact_shape_unless_told_dense(tmp_path, capsys, fidelity, shape):
    import base64

    from glyphpack._cli import main
    from glyphpack._history.codec import history_to_json, json_bytes
    from glyphpack.testing import generate_session

    source = tmp_path / "s.json"
    source.write_bytes(json_bytes(history_to_json(generate_session(60_000, seed=2))))
    out = tmp_path / "view"
    argv = ["compact", str(source), "--model", "claude-sonnet-4-5", "--budget", "9000", "--out", str(out)]
    assert main(argv + (["--fidelity", fidelity] if fidelity else [])) == 0
    pages = [b["data"] for m in json.loads((out / "view.json").read_text()) for b in m["content"] if b["type"] == "image"]
    assert pages and all(shape in base64.b64decode(page)[:200] for page in pages)


def test_render_warns_before_drawing_when_the_pages_cost_more_than_the_text(tmp_path, capsys):
    """``--layout lines`` for Sonnet cost 1.56x the text's tokens without a word."""
    from glyphpack._cli import main

    code = tmp_path / "short.py"
    code.write_text("def f(x):\n    return x\n" + "".join(f"    a = {n}\n" for n in range(200)))
    assert main(["render", str(code), "--model", "claude-sonnet-4-5", "--layout", "lines", "--out", str(tmp_path / "pages")]) == 0
    captured = capsys.readouterr()
    assert re.search(r"^warning: these pages cost [\d,]+ image tokens, [\d.]+x the ~[\d,]+ tokens the same text costs as text \(9x15-loose, lines layout\)", captured.err, re.M)
    assert re.search(r"compression +[\d.]+x more tokens than the text", captured.out)
    prose = tmp_path / "prose.txt"
    prose.write_text("plain words that run on " * 2_000)
    assert main(["render", str(prose), "--model", "claude-sonnet-4-5", "--out", str(tmp_path / "prose")]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and re.search(r"compression +[\d.]+x fewer tokens", captured.out)


def test_profiles_shows_what_each_model_gets_by_default(capsys):
    """``profiles`` listed 5x8 for every reader while ``render --model`` drew 9x15 for
    most: it now shows each model's default (exact) shape and its gist shape first, the
    very shapes render and a Session choose."""
    from glyphpack._cli import main

    assert main(["profiles"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["model", "default", "(exact)"]
    assert re.match(r"claude-sonnet-4-5 +9x15-loose +4\.9 +9x15-loose +4\.9 ", next(line for line in out if line.startswith("claude-sonnet-4-5")))
    assert re.match(r"claude-fable-5 +5x8 +19\.6 +5x8 +19\.6 ", out[1])
    assert any(line.startswith("claude via anthropic") and " 5x8 " in line for line in out)
    assert main(["profiles", "--model", "gpt-5.4"]) == 0
    (header, row) = capsys.readouterr().out.splitlines()
    assert row.split()[:5] == ["gpt-5.4", "9x15-loose", "5.3", "9x15-loose", "5.3"]
    pages = glyphpack.render("x" * 50, model="gpt-5.4", fidelity="exact")
    assert pages.report.shape == "9x15-loose"  # what profiles said


NUMERIC = ("numpy", "numba", "PIL")
#: Runs a command in this process and prints the numeric packages it imported.
IMPORTS_PROBE = """
import sys
from glyphpack._cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(sorted(name for name in {numeric!r} if name in sys.modules), file=sys.stderr)
"""


@pytest.mark.slow  # a second or more: CI runs it
def test_commands_that_read_a_workspace_import_nothing_numeric(tmp_path):
    """``tree`` and ``export`` of a real session (non-ASCII text, images, usage), and
    ``context`` of a small ASCII one, start without numpy, numba or Pillow: only counting
    non-ASCII text (numpy counts it 7-22x faster than a pure-Python pass on large texts),
    fitting a calibration or drawing pages needs them (``tree`` once took 0.69 s to print
    7 lines)."""
    session = Path(__file__).parent / "data" / "sessions" / "ohmyposh-6beb436f6cd8-0.jsonl"
    workspace = tmp_path / "ws"
    assert main(["import", "--workspace", str(workspace), str(session)]) == 0
    probe = IMPORTS_PROBE.format(numeric=NUMERIC)
    with glyphpack.open_session(workspace, "ascii", "main", model="claude-sonnet-4-5") as s:
        s.add_user("hello")
    for command in (["tree", str(workspace)], ["export", str(workspace), session.stem], ["context", str(workspace), "ascii", "--model", "claude-sonnet-4-5"]):
        done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, timeout=120)
        assert done.stdout.strip(), command
        assert done.stderr.strip().splitlines()[-1] == "[]", (command, done.stderr)
    # the probe sees an import: a command that draws pages loads them
    done = subprocess.run([sys.executable, "-c", probe, "render", "-", "--out", str(tmp_path / "p")], input="x", capture_output=True, text=True, timeout=300)
    assert done.stderr.strip().splitlines()[-1] == "['numba', 'numpy']", done.stderr  # PNGs need no Pillow
