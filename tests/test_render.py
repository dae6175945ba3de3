import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image
from reference import glyphs_to_text

import glyphpack
from glyphpack import LimitError, PageError, ShapeError, count_pages, plan, read_page, read_pages, render
from glyphpack._render.layout import lay_out
from glyphpack._render.shapes import SHAPES
from glyphpack._render.text import normalize

PIECES = st.sampled_from(
    ["\n", "\t", "\r\n", "\r", "\x1b[31m", "\x00", "\x85", "\ud800", "中文", "é", "e\u0301", "  ", "\u200b", "\U0001f600", "Ж"]
)
TEXTS = st.lists(st.one_of(st.characters(), st.text(max_size=12), PIECES), max_size=120).map("".join)
SMALL_PAGES = {"5x8": (5 * 17, 8 * 3), "8x13-loose": (11 * 9, 16 * 2), "unifont": (8 * 11, 16 * 3)}


def expected_text(text, shape, layout):
    atlas = shape.atlas
    return glyphs_to_text(normalize(text, atlas, layout).glyphs, atlas)


@pytest.mark.parametrize("layout", ["flow", "lines"])
@pytest.mark.parametrize("name", sorted(SMALL_PAGES))
@given(text=TEXTS)
def test_reading_pages_back_gives_the_normalized_text(name, layout, text):
    shape = SHAPES[name].with_page_size(*SMALL_PAGES[name])
    pages = render(text, shape=shape, layout=layout, max_pages=10**6)
    read = read_pages(pages, shape)
    assert read == lay_out(normalize(text, shape.atlas, layout), shape, layout).text()
    expected = expected_text(text, shape, layout)
    if shape.atlas.has_wide:
        # a wide glyph that does not fit at a row end leaves a blank cell, read as a space
        assert read.replace(" ", "") == expected.replace(" ", "")
    else:
        assert read == expected
    for page in pages:
        assert page.width <= shape.max_width and page.height <= shape.max_height
        assert page.height == page.rows * shape.pitch and page.width == page.cols * shape.advance
    assert len(pages) == count_pages(text, shape=shape, layout=layout)


@given(text=TEXTS)
def test_rendering_twice_gives_identical_bytes(text):
    first = render(text, shape="5x8", page_size=(200, 40), max_pages=10**6)
    second = render(text, shape="5x8", page_size=(200, 40), max_pages=10**6)
    assert [p.png for p in first] == [p.png for p in second]


def test_pages_decode_with_pillow_as_one_bit_images():
    pages = render("The quick brown fox jumps over the lazy dog.\n" * 2000)
    assert len(pages) == 3
    for page in pages:
        with Image.open(io.BytesIO(page.png)) as image:
            assert image.format == "PNG" and image.mode == "P"
            assert image.size == (page.width, page.height)
            assert image.info.get("transparency") is None
    # full pages are the shape's full size; the last one hugs its rows
    assert (pages[0].width, pages[0].height) == (1565, 784)
    assert pages[-1].height < 784 and pages[-1].height % 8 == 0


def test_report_counts():
    text = "a\x00b\x1b[0m\u200b\u27f6 \U0001f600 \ue000\ufe0f\n" * 3
    pages = render(text)
    report = pages.report
    assert report.pages == 1 and report.shape == "5x8"
    # dropped: the zero-width space and the variation selector; folded: the arrow and
    # the emoji (by name); replaced: the private-use character no font draws
    assert (report.controls, report.ansi_sequences, report.dropped, report.folded, report.replaced) == (3, 3, 6, 6, 3)
    assert report.replaced_scripts == {"private use": 3}
    assert read_page(pages[0]).startswith("a^@b--> :grinning_face: \ufffd\na^@b")
    assert report.png_bytes == sum(len(p.png) for p in pages)
    assert report.chars == sum(p.chars for p in pages)
    assert glyphpack.plan(text).chars == report.chars


def test_empty_and_whitespace_text_gives_no_pages():
    for text in ("", "   \n\n  "):
        pages = render(text)
        assert list(pages) == [] and pages.report.pages == 0
        assert count_pages(text) == 0


def test_cjk_text_chooses_unifont():
    pages = render("日本語のテキストです。" * 10)
    assert pages[0].shape == "unifont"
    assert read_page(pages[0]) == "日本語のテキストです。" * 10
    # one character the dense font lacks is enough: no character is replaced silently
    one = render("mostly ascii with one 字", model="claude-sonnet-4-5", fidelity="dense")
    assert one[0].shape == "unifont" and one.report.replaced == 0
    assert "lacks characters of the text (1 CJK" in one.report.shape_reason
    assert read_page(one[0]) == "mostly ascii with one 字"
    # a shape given is kept, and what it cannot draw is counted per script
    given = render("ascii, 字字 and 한 and ก", shape="5x8").report
    assert given.replaced == 4 and given.replaced_scripts == {"CJK": 2, "HANGUL": 1, "THAI": 1}
    assert render("only ascii and an emoji \U0001f680")[0].shape == "5x8"


@pytest.mark.slow
def test_a_ten_megabyte_line_renders(monkeypatch):
    line = "0123456789abcdef" * (10 * 1024 * 1024 // 16)
    pages = render(line, layout="lines")
    assert len(pages) == count_pages(line, layout="lines") == -(-len(line) // (312 * 98))
    assert read_page(pages[0], layout="lines") == line[: 312 * 98]


def test_page_limit_is_checked_before_rasterizing(monkeypatch):
    import glyphpack._render.render as render_module

    def fail(*args):
        raise AssertionError("rasterized despite the page limit")

    monkeypatch.setattr(render_module, "draw", fail)
    with pytest.raises(LimitError, match="needs (at least )?4 pages .* over max_pages=3"):
        render("x" * (30674 * 3 + 1), max_pages=3)


def test_text_length_limit(monkeypatch):
    import glyphpack._render.render as render_module

    monkeypatch.setattr(render_module, "MAX_TEXT_CHARS", 10)
    with pytest.raises(LimitError, match="11 characters, over the limit of 10"):
        render("x" * 11)


def test_bad_arguments_get_clear_errors():
    with pytest.raises(TypeError, match="decode bytes first"):
        render(b"bytes")
    with pytest.raises(ShapeError, match="unknown shape 'nope'"):
        render("x", shape="nope")
    with pytest.raises(ShapeError, match="needs at least 4 columns"):
        render("x", page_size=(10, 784))
    with pytest.raises(ValueError, match="layout must be one of"):
        render("x", layout="grid")


def test_reader_rejects_foreign_images():
    with pytest.raises(PageError, match="not a readable image"):
        read_page(b"not a png")
    buffer = io.BytesIO()
    Image.new("1", (13, 8)).save(buffer, "PNG")
    with pytest.raises(PageError, match="does not say which shape drew it"):
        read_page(buffer.getvalue())  # 5x8 was assumed once: garbage read back, exit 0
    with pytest.raises(PageError, match="not a grid of 5x8 cells"):
        read_page(buffer.getvalue(), "5x8")


def test_a_page_says_how_it_was_drawn():
    """``glyphpack read page.png`` of a 9x15-loose page once decoded it as 5x8 garbage."""
    from glyphpack._render.png import page_metadata

    text = "def f(x):\n    return x  # 漢字"
    for shape, layout in (("9x15-loose", "lines"), ("5x8", "flow"), ("10x20", "lines")):
        page = render(text, shape=shape, layout=layout)[0]
        assert page_metadata(page.png)["shape"] == shape and page_metadata(page.png)["layout"] == layout
        expected = read_page(page)  # the Page object knows its shape
        assert read_page(page.png) == expected and "return x" in expected
        assert Image.open(io.BytesIO(page.png)).text["glyphpack"].startswith("v=1;shape=")  # a standard tEXt chunk
    custom = glyphpack.Shape("wide-5x8", "5x8", 7, 9)
    page = render("custom cells", shape=custom)[0]
    assert read_page(page.png) == "custom cells"  # rebuilt from its shipped font and cell
    from glyphpack._render.png import encode_png

    with pytest.raises(glyphpack.UsageError, match="must be ASCII without"):
        encode_png(np.zeros((1, 2), np.uint8), 8, {"shape": "a;b"})


def test_reader_marks_unreadable_cells():
    pixels = np.zeros((8, 10), np.uint8)
    pixels[2:6, 5:10] = 1  # a solid block matches no 5x8 glyph
    grid = glyphpack.read_grid(pixels, "5x8")
    assert grid.tolist() == [[-1, -3]]


def test_progress_is_reported_per_page():
    calls = []
    render("y" * 30674 * 20, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(done, 20) for done in range(1, 21)]
    calls.clear()
    render("y", progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 1)]


def test_renders_from_many_threads_at_once_match_serial_renders():
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"thread {i} " * (3000 + 500 * i) for i in range(8)]
    serial = [[p.png for p in render(t, model="claude-sonnet-4-5")] for t in texts]
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda t: [p.png for p in render(t, model="claude-sonnet-4-5")], texts))
    assert threaded == serial


@pytest.mark.slow
def test_workqueue_threading_layer_survives_concurrent_renders(tmp_path):
    """Numba's fallback threading layer aborts on concurrent parallel launches unless
    glyphpack serializes them. Rendering has no parallel region; the legibility
    check's glyph matching has one: both at once on six threads, in a child process
    with that layer forced."""
    import os
    import subprocess
    import sys

    probe = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "import glyphpack\n"
        "texts = ['w%d ' % i * 40000 for i in range(6)]\n"
        "def work(text):\n"
        "    pages = glyphpack.render(text)\n"
        "    return len(pages), glyphpack.legibility(pages[0], '5x8', text[:20000])\n"
        "with ThreadPoolExecutor(6) as pool:\n"
        "    results = list(pool.map(work, texts))\n"
        "import numba\n"
        "print(numba.threading_layer(), sum(n for n, _ in results), min(score for _, score in results))\n"
    )
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue", NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    layer, pages, score = out.stdout.split()
    assert layer == "workqueue" and int(pages) >= 6 and float(score) == 1.0


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_reads_back_exactly(name):
    """Catches a shape whose font breaks the atlas (a glyph colliding with a marker, a
    bitmap bleeding out of its cell): every shape's pages read back as the normalized
    text, in both layouts."""
    shape = SHAPES[name].with_page_size(640, 320)
    text = "Mixed input: tabs\there, ids 0x5f3a9c, ünïcödé, Ελληνικά, Кириллица, ┌─┐ and 中文.\n" * 30
    for layout in ("flow", "lines"):
        pages = render(text, shape=shape, layout=layout)
        read, expected = read_pages(pages, shape), expected_text(text, shape, layout)  # not via the grid's own text
        if shape.atlas.has_wide:  # a wide glyph that does not fit at a row end leaves a blank cell
            assert read.replace(" ", "") == expected.replace(" ", "")
        else:
            assert read == expected


@given(st.text(alphabet="ab Z9;\n\t\r\x1b[m\u00e9e\u0301\u0416\u4e2d\U0001f600", max_size=300))
def test_the_report_estimates_text_tokens_of_the_input_as_the_estimator_does(text):
    """The render counts script classes in its own pass over the code points when
    cleaning left the text as it was; either way the estimate is the input's."""
    assert plan(text).text_tokens == glyphpack.estimate_text_tokens(text)
    assert render(text, shape="unifont").report.text_tokens == glyphpack.estimate_text_tokens(text)


@pytest.mark.parametrize(
    "text",
    [
        "a\r\nb\rc\r\r\nd",  # CRLF pairs and lone CRs
        "\x1b]0;titré ✓ 中\x07ok \x1b[1;31mred\x1b[0m \x1bP+qdata\x1b\\ end",  # OSC, CSI, DCS
        "col\tnext\t\tlast\n\tindent",  # tabs to stops
        "\x1b[2Jé\r\n\tx e\u0301",  # all at once, and NFC composing (the input counted apart)
    ],
)
def test_the_estimate_of_a_cleaned_text_is_the_inputs(text):
    """Cleaning removes and adds characters; the classes it changed are put back, so the
    estimate is the input's without decoding it a second time."""
    assert plan(text).text_tokens == glyphpack.estimate_text_tokens(text)
    assert glyphpack.TextEstimator().counts(text).tolist() == normalize_classes(text)


def normalize_classes(text):
    from glyphpack._providers.text_tokens import script_classes
    from glyphpack._render.text import normalize

    return normalize(text, SHAPES["5x8"].atlas, "flow", script_classes()).classes_counted[:5].tolist()


def test_a_forked_child_renders(tmp_path):
    """A child forked after a multi-page render hung forever in its next render: it
    inherited the page pool without its threads."""
    import multiprocessing

    render("x" * 30674 * 3)  # several pages: the pool's threads are running
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        pages = pool.apply_async(_child_render).get(timeout=60)
    assert pages == 3


def _child_render() -> int:
    return len(render("y" * 30674 * 3))


def test_the_kernels_a_build_prebuilt_are_seeded_once_and_never_over_a_users_own(tmp_path, monkeypatch):
    """A fresh install's first render loads the kernels its build compiled
    (glyphpack/_render/prebuilt.py; benchmarks/test_bench_cli_startup.py times it)."""
    from glyphpack._render import prebuilt

    packaged = tmp_path / "packaged"
    packaged.mkdir()
    (packaged / "kernels.draw_page-1.py311.nbi").write_bytes(b"index")
    (packaged / "kernels.draw_page-1.py311.1.nbc").write_bytes(b"code")
    monkeypatch.setattr(prebuilt, "KERNELS", packaged)
    target = tmp_path / "cache" / "numba" / "_render_abc"
    assert prebuilt.seed_kernel_cache(target) == 2
    assert (target / "kernels.draw_page-1.py311.1.nbc").read_bytes() == b"code"
    (target / "kernels.draw_page-1.py311.nbi").write_bytes(b"the user's own, newer")
    assert prebuilt.seed_kernel_cache(target) == 0  # nothing overwritten
    assert (target / "kernels.draw_page-1.py311.nbi").read_bytes() == b"the user's own, newer"
    assert not list(target.glob("*.seeding"))
    monkeypatch.setattr(prebuilt, "KERNELS", tmp_path / "absent")
    assert prebuilt.seed_kernel_cache(tmp_path / "other") == 0  # a checkout has none
    (tmp_path / "blocked").write_text("a file where the folder would go")
    monkeypatch.setattr(prebuilt, "KERNELS", packaged)
    assert prebuilt.seed_kernel_cache(tmp_path / "blocked" / "numba") == 0  # never raises


def test_render_threads_from_the_environment(monkeypatch):
    import os

    from glyphpack import UsageError
    from glyphpack._render.render import RENDER_THREADS_VARIABLE, render_threads

    monkeypatch.delenv(RENDER_THREADS_VARIABLE, raising=False)
    assert render_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv(RENDER_THREADS_VARIABLE, " 3 ")
    assert render_threads() == 3
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv(RENDER_THREADS_VARIABLE, bad)
        with pytest.raises(UsageError, match=f"GLYPHPACK_RENDER_THREADS must be a whole number of threads, 1 or more; it is '{bad}'"):
            render_threads()


@pytest.mark.parametrize(
    ("total", "threads", "firsts"),
    [
        (0, 2, []),
        (1, 2, [0]),
        (4, 2, [0, 1, 2, 3]),  # no more pages than 2 x threads: one a task
        (5, 2, [0, 2, 3, 4]),
        (9, 2, [0, 2, 4, 6, 7, 8]),  # two a task until 4 are left
        (9, 1, [0, 2, 4, 6, 8]),
    ],
)
def test_pages_go_two_to_a_task_and_the_last_one_each(total, threads, firsts):
    from glyphpack._render.render import task_firsts

    assert task_firsts(total, threads) == firsts


def test_a_render_on_one_thread_and_on_three_is_the_same(monkeypatch):
    """The pool made with the threads the environment names (a fresh pool each time):
    the same pages, in order, whatever the tasks' order of finishing."""
    import glyphpack._render.render as render_module
    from glyphpack._render.render import RENDER_THREADS_VARIABLE

    text = "".join(f"line {i}: {'x' * (i % 70)}\n" for i in range(4000))
    results = []
    for threads in ("1", "3"):
        monkeypatch.setenv(RENDER_THREADS_VARIABLE, threads)
        monkeypatch.setattr(render_module, "_POOL", None)
        pages = glyphpack.render(text, shape="5x8", model="claude-sonnet-4-5")
        assert render_module._POOL_THREADS == int(threads) and len(pages) > 6
        assert [page.index for page in pages] == list(range(pages.report.pages))
        assert sum(page.chars for page in pages) == pages.report.chars == len(text.rstrip("\n"))
        results.append([page.png for page in pages])
    assert results[0] == results[1]
