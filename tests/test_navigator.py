"""The HTML navigator (``glyphpack export WS --format html``): one self-contained file,
checked as text and driven in headless Chromium (tests/browser.py) on a generated tree
with branches, forks, a rewind, two agents, two compactions and hostile message text,
and on the real sessions in shared/sessions."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from browser import browser, page_errors

import glyphpack
from glyphpack._cli import main as cli_main
from glyphpack._session.navigator import export_html, workspace_data

MODEL = "claude-sonnet-4-5"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
REAL = sorted(p for p in SHARED.glob("*/*") if p.parent.name != "licenses") if SHARED.is_dir() else []
DOCS = Path(__file__).resolve().parent.parent / "docs"

INJECTIONS = (
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "</textarea><b>bold?</b>",
    "</script><script>window.__pwned = 3</script>",
    "<!-- an open comment",
)


def reply(text: str, calls: tuple[tuple[str, str], ...] = ()) -> dict:
    content = [{"type": "text", "text": text}] + [{"type": "tool_use", "id": i, "name": n, "input": {"path": "x.py"}} for i, n in calls]
    return {"role": "assistant", "content": content}


def turn(s: glyphpack.Session, n: int, *, words: int = 150, tool: bool = True) -> None:
    s.add_user(f"step {n}: look at module {n}")
    s.request("anthropic")
    if tool:
        s.add_response(reply(f"reading module {n}", ((f"call-{s.conversation}-{n}", "read_file"),)))
        s.add_tool_results({f"call-{s.conversation}-{n}": f"def function_{n}():\n    return {n}\n" * words})
        s.request("anthropic")
    s.add_response(reply(f"module {n} returns {n}; " + "details " * words))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """Branches, a fork (carrying the compaction in force), a rewind, two agents, two compactions, hostile text."""
    path = tmp_path_factory.mktemp("nav") / "ws"
    with glyphpack.Workspace(path) as ws:
        dense = glyphpack.CompactionPolicy(rungs=("image drop", "snapshot", "summarization"), fidelity=None)
        s = glyphpack.open_session(ws, "task", "coder", model=MODEL, system="You are careful.", policy=dense)
        for n in range(4):
            turn(s, n)
        s.command("/checkpoint plan")
        for n in range(4, 8):
            turn(s, n)
        s.command("/compact 6000")
        s.command("/rewind plan modules 4-7 were a dead end")
        for n in range(8, 12):
            turn(s, n)
        s.command("/compact 6000")
        for text in INJECTIONS:
            s.add_user(text)
            s.request("anthropic")
            s.add_response(reply("noted: " + text))
        screenshot = glyphpack.render("a screenshot, sent twice", model=MODEL)[0].png
        for _ in range(2):  # the same image twice: stored once in the page
            s.add_user([glyphpack.Text("what do you see?"), glyphpack.Image("image/png", screenshot)])
            s.request("anthropic")
            s.add_response(reply("a screenshot"))
        helper = glyphpack.open_session(ws, "task", "helper", model=MODEL)
        turn(helper, 100, words=5)
        s.command("/fork task-fork")
        turn(s, 50, words=5)
    return path


@pytest.fixture(scope="module")
def html_file(workspace, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "navigator.html"
    assert cli_main(["export", str(workspace), "--format", "html", "--out", str(out)]) == 0
    return out


def test_the_file_is_self_contained_and_escaped(workspace, html_file):
    page = html_file.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)  # no external asset
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert page.count("<script") == 2 and page.count("</script>") == 2  # the messages cannot add or close one
    for text in INJECTIONS:
        assert text not in page  # only as JSON escapes inside the data
        assert any(b.get("x") == text for n in data["nodes"] for b in n["b"])
    # images once each: every page PNG appears a single time in the file
    blobs = [image["d"] for image in data["images"].values()]
    assert len(blobs) == len(set(blobs)) and all(page.count(blob) == 1 for blob in blobs)
    image_blocks = [b["i"] for n in data["nodes"] for b in n["b"] if b["k"] == "image"]
    assert len(image_blocks) == 4 and len(set(image_blocks)) == 1  # twice, and twice again in the fork
    # two in the task, and the one in force the fork carried along
    assert [(c["conv"], c["n"]) for c in data["compactions"]] == [("task", 1), ("task", 2), ("task-fork", 1)]
    assert all(c["pages"] for c in data["compactions"])


def test_the_data_matches_the_tree(workspace):
    with glyphpack.Workspace(workspace, read_only=True) as ws:
        data = workspace_data(ws)
        for conversation in ("task", "task-fork"):
            assert sum(n["c"] == conversation for n in data["nodes"]) == len(ws.tree.nodes(conversation))
        assert [c["id"] for c in data["conversations"]] == ["task", "task-fork"]
        assert set(data["conversations"][0]["agents"]) == {"coder", "helper"}
        with pytest.raises(glyphpack.StoreError, match="no conversation 'nope'"):
            export_html(ws, "nope")


def test_export_errors_are_one_line(tmp_path, workspace, capsys):
    assert cli_main(["export", str(workspace), "--format", "html"]) == 2
    assert "needs --out" in capsys.readouterr().err
    assert cli_main(["export", str(workspace), "--format", "md"]) == 2
    assert "exports one conversation" in capsys.readouterr().err
    assert cli_main(["export", str(tmp_path / "none"), "--format", "html", "--out", str(tmp_path / "x.html")]) == 2
    assert not (tmp_path / "x.html").exists()


def ids(driver, selector: str) -> list[str]:
    """The message ids of the elements ``selector`` finds, in one round trip."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.id || e.id.slice(2))", selector
    )


def node_ids(driver) -> list[str]:
    return ids(driver, "#tree .node")


def transcript_ids(driver) -> list[str]:
    return ids(driver, "#transcript .msg")


@pytest.mark.slow  # 4 s of Chromium: CI installs it and runs this
def test_in_a_browser(workspace, html_file, tmp_path):
    with glyphpack.Workspace(workspace, read_only=True) as ws:
        tree = ws.tree
        nodes = {n.message.id: n for n in tree.nodes("task")}
        coder_tip = tree.agent_tip("task", "coder")
        explored = [i for i in nodes if not tree.children(i) and i not in tree.agent_tips("task").values()]
    with browser() as driver:
        driver.get(html_file.as_uri())
        assert driver.execute_script("return window.glyphpackNavigator.ready") is True
        assert driver.execute_script("return window.__pwned") is None  # nothing the messages held ran
        body = driver.find_element("tag name", "body").text
        assert all(text in body for text in ("<script>window.__pwned = 1</script>", "</textarea><b>bold?</b>"))
        # the tree: every node, the tip path highlighted and shown
        assert sorted(node_ids(driver)) == sorted(nodes)
        assert transcript_ids(driver)[-1] == coder_tip
        assert ids(driver, "#tree .node.on-path") == transcript_ids(driver)
        # two compaction points, with their pages; the first covers the explored (rewound) path
        assert len(driver.find_elements("css selector", "#transcript .compaction")) == 1  # on this path: the second
        # switch to the explored branch (the path the rewind left): one click in the tree
        driver.find_element("css selector", f'#tree .node[data-id="{explored[0]}"]').click()
        assert transcript_ids(driver)[-1] == explored[0]
        assert len(driver.find_elements("css selector", "#transcript .compaction")) == 1  # the first compaction
        widths = driver.execute_script("return [...document.querySelectorAll('#transcript .compaction img')].map(i => i.naturalWidth)")
        assert widths and all(w > 0 for w in widths)  # the pages decode
        # expand a tool result
        result = driver.find_element("css selector", "#transcript details.result")
        assert result.get_attribute("open") is None
        result.find_element("tag name", "summary").click()
        assert result.get_attribute("open") == "true"
        # search
        box = driver.find_element("id", "search")
        box.send_keys("module 5 returns")
        assert driver.find_element("id", "hits").text.startswith("1 in this path")
        assert len(driver.find_elements("css selector", "#transcript .msg.hit")) == 1
        box.clear()
        box.send_keys("\ue00c")  # Escape leaves the box
        # keyboard: j moves to the next message, n to the next branch
        driver.find_element("tag name", "body").send_keys("j")
        assert len(driver.find_elements("css selector", ".msg.focused")) == 1
        before = transcript_ids(driver)[-1]
        driver.find_element("tag name", "body").send_keys("n")
        assert transcript_ids(driver)[-1] != before
        # a permalink into the explored branch opens that branch at the message
        target = explored[0]
        driver.get(html_file.as_uri() + "#m-" + target)
        driver.refresh()
        assert driver.find_element("id", "m-" + target).get_attribute("class").endswith("target")
        # another agent's transcript, and the fork
        driver.find_element("xpath", "//span[@id='agents']/button[text()='helper']").click()
        assert "step 100" in driver.find_element("id", "transcript").text
        driver.execute_script("const s = document.getElementById('conversation'); s.value = 'task-fork'; s.dispatchEvent(new Event('change'))")
        assert "step 50" in driver.find_element("id", "transcript").text
        assert page_errors(driver) == []
        driver.get(html_file.as_uri())
        driver.find_element("css selector", f'#tree .node[data-id="{explored[0]}"]').click()
        driver.find_element("css selector", "#transcript .compaction").location_once_scrolled_into_view  # noqa: B018
        shot = tmp_path / "navigator.png"
        driver.save_screenshot(str(shot))
        assert shot.read_bytes().startswith(b"\x89PNG")
        if os.environ.get("GLYPHPACK_WRITE_DOCS"):
            shutil.copy(shot, DOCS / "navigator.png")


@pytest.mark.slow
@pytest.mark.skipif(not REAL, reason="shared/sessions is not beside the repository")
def test_real_sessions_in_a_browser(tmp_path):
    ws_path = tmp_path / "ws"
    with glyphpack.Workspace(ws_path) as ws:
        for path in REAL:
            ws.import_session(glyphpack.import_file(path), path.name.split(".")[0][:40])
        counts = {c.id: len(ws.tree.nodes(c.id)) for c in ws.tree.conversations()}
        html = export_html(ws)
    out = tmp_path / "real.html"
    out.write_text(html)
    with browser() as driver:
        driver.get(out.as_uri())
        assert driver.execute_script("return window.glyphpackNavigator.ready") is True
        for conversation, count in counts.items():
            driver.execute_script(
                "const s = document.getElementById('conversation'); s.value = arguments[0]; s.dispatchEvent(new Event('change'))",
                conversation,
            )
            assert len(driver.find_elements("css selector", "#tree .node")) == count, conversation
        assert page_errors(driver) == []


def test_an_image_with_a_hostile_media_type_is_not_embedded(tmp_path):
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg==")
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        history = [glyphpack.Message("user", (glyphpack.Image('image/png" onerror="x', png),)), glyphpack.Message("assistant", "ok")]
        ws.save("c", "a", history, revision=0)
        data = workspace_data(ws)
    assert data["images"] == {} and data["nodes"][0]["b"][0]["k"] == "image" and "ref" in data["nodes"][0]["b"][0]
