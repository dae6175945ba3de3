import json
import subprocess
import sys

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


def test_legibility_command_writes_plot_and_table(tmp_path, capsys):
    plot = tmp_path / "legibility.png"
    assert main(["legibility", "--shape", "5x8", "--out", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "| 5x8 | bicubic | 1.00 |" in out
    assert "5x8: unreadable" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
