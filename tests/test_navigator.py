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
from test_importers import EXPECTED

import glyphpack
from glyphpack._cli import main as cli_main
from glyphpack._session.navigator import export_html, workspace_data

MODEL = "claude-sonnet-4-5"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
REAL = sorted(SHARED / expected[0] for expected in EXPECTED) if SHARED.is_dir() else []  # the files that import today
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
        dense = glyphpack.CompactionPolicy(rungs=("image drop", "snapshot", "summarization"), fidelity="dense")
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
        # the tree: long linear runs folded to their ends and a count; a click shows a run
        runs = driver.find_elements("css selector", "#tree .node.run")
        assert runs and all(re.search(r"… \d+ messages …$", r.text) for r in runs)
        shown = [i for i in node_ids(driver) if i]
        folded = sum(int(r.get_attribute("data-count")) for r in runs)
        assert len(shown) + folded == len(nodes) and folded > 0
        while runs:
            runs[0].click()
            runs = driver.find_elements("css selector", "#tree .node.run")
        # then every node, the tip path highlighted and shown
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
        # a call is shown by what it does, its result under it, the tool message folded
        call = driver.find_element("css selector", "#transcript details.call")
        assert call.find_element("tag name", "summary").text.startswith("read_file x.py")
        assert call.get_attribute("open") is None
        call.find_element("tag name", "summary").click()
        result = call.find_element("css selector", "details.result")
        assert result.get_attribute("open") is None
        result.find_element("tag name", "summary").click()
        assert result.get_attribute("open") == "true" and "def function_" in result.text
        assert driver.find_elements("css selector", "#transcript .msg.tool.folded")
        # search opens the collapsed result that holds the hit
        box = driver.find_element("id", "search")
        box.send_keys("return 5\n")  # only in the result of module 5 (the Enter goes to the hit)
        assert driver.find_element("id", "hits").text.startswith("1 in this path")
        opened = driver.find_element("css selector", "#transcript .msg.hit details.call")
        assert opened.get_attribute("open") == "true" and opened.find_element("css selector", "details.result").get_attribute("open") == "true"
        box.clear()
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
        with glyphpack.Workspace(workspace, read_only=True) as ws:
            tips = ws.tree.agent_tips("task")
            leaves = [i for i in nodes if not ws.tree.children(i)]
        for _ in leaves:  # n through every branch: the header says which, and whose
            driver.find_element("tag name", "body").send_keys("n")
            path = transcript_ids(driver)
            on = [(path.index(tip), agent) for agent, tip in tips.items() if tip in path]
            selected = driver.execute_script("return [...document.querySelectorAll('#agents button[aria-selected=true]')].map(b => b.dataset.agent)")
            assert selected == ([max(on)[1]] if on else []), (path[-1], on, selected)
            assert re.fullmatch(rf"branch \d of {len(leaves)}( · no agent's tip)?", driver.find_element("id", "branch").text)
            assert ("no agent's tip" in driver.find_element("id", "branch").text) == (not on)
        assert transcript_ids(driver)[-1] == before  # round the branches, back where it started
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
            shown = driver.execute_script(
                "return [...document.querySelectorAll('#tree .node')].map(e => e.dataset.run ? Number(e.dataset.count) : 1)"
            )
            assert sum(shown) == count, conversation  # every message, shown or counted in a folded run
        # Claude Code's subagents nest under the Task call that started them
        driver.execute_script(
            "const s = document.getElementById('conversation'); s.value = arguments[0]; s.dispatchEvent(new Event('change'))",
            "ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b",
        )
        nested = driver.find_elements("css selector", "#transcript details.subagent")
        assert nested, "no Task call linked to its sidechain"
        driver.execute_script("arguments[0].closest('details.call').open = true; arguments[0].open = true", nested[0])
        assert driver.find_elements("css selector", "#transcript details.subagent .submsg")
        # each row of a subagent says something (a tool message whose results sit under their calls is not drawn)
        rows = driver.execute_script("return [...document.querySelectorAll('#transcript details.subagent .submsg')].filter(e => e.offsetParent)"
                                     ".map(e => e.textContent.length - e.querySelector('.head').textContent.length)")
        assert rows and min(rows) > 0
        # subagents are named by what their caller called them, in the tabs and where they nest
        tabs = driver.execute_script("return [...document.querySelectorAll('#agents button')].map(b => b.textContent)")
        assert {"Setup Next.js project · general-purpose", "Create data models · general-purpose"} <= set(tabs), tabs
        assert "Setup Next.js project" in nested[0].find_element("tag name", "summary").text
        # Claude Code 2.1's attachments: folded as the harness's reminders; every message with its time
        driver.execute_script(
            "const s = document.getElementById('conversation'); s.value = arguments[0]; s.dispatchEvent(new Event('change'))",
            "ohmyposh-6beb436f6cd8-0",
        )
        folded = driver.execute_script("return [...document.querySelectorAll('#transcript details.reminder > summary')].map(e => e.textContent)")
        assert folded and set(folded) == {"system reminder (from the harness)"}
        times = driver.execute_script("return [...document.querySelectorAll('#transcript .msg .head time.when')].map(e => e.textContent)")
        assert times and times[0] == "2026-08-01 09:13:34 UTC"
        assert page_errors(driver) == []


def test_an_image_with_a_hostile_media_type_is_not_embedded(tmp_path):
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg==")
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        history = [glyphpack.Message("user", (glyphpack.Image('image/png" onerror="x', png),)), glyphpack.Message("assistant", "ok")]
        ws.save("c", "a", history, revision=0)
        data = workspace_data(ws)
    # shown as its media type, as text (the page sets it with textContent)
    assert data["images"] == {} and data["nodes"][0]["b"][0] == {"k": "image", "ref": 'image/png" onerror="x'}


@pytest.fixture(scope="module")
def compacted(tmp_path_factory) -> Path:
    """A session for a 5x8 reader compacted with the whole ladder: ten results elided,
    then the middle drawn as pages (the stubs with it)."""
    path = tmp_path_factory.mktemp("compacted") / "ws"
    with glyphpack.Workspace(path) as ws:
        s = glyphpack.open_session(ws, "c", "a", model="claude-fable-5", policy=glyphpack.CompactionPolicy())
        for n in range(12):
            s.add_user(f"step {n}: read module {n}")
            s.request("anthropic")
            call = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": f"/src/m{n}.py"}}
            s.add_response({"role": "assistant", "content": [{"type": "text", "text": f"reading {n}"}, call]})
            s.add_tool_results({f"t{n}": f"def f{n}():\n    return {n}\n" * 200})
            s.request("anthropic")
            s.add_response({"role": "assistant", "content": [{"type": "text", "text": f"module {n} returns **{n}**, see `m{n}.py`"}]})
        s.compact(2500)
    return path


def test_the_compaction_panel_counts_what_the_pages_draw(compacted):
    """The navigator shows the text the pages draw, and it is exactly that: drawn again
    with the view's geometry it gives the stored pages byte for byte; the stubs counted
    are those in it (the ten results outside the protected turns), none sent as text."""
    from glyphpack._compaction.rungs import ELIDED_MARK

    with glyphpack.Workspace(compacted, read_only=True) as ws:
        (compaction,) = workspace_data(ws)["compactions"]
        view = glyphpack.open_session(ws, "c", "a", model="claude-fable-5").view
    pages = [b.data for m in view.messages for b in m.content if isinstance(b, glyphpack.Image)]
    drawn = glyphpack.render(compaction["page_text"], model="claude-fable-5", shape=view.shape, page_size=view.page_size)
    assert pages and [p.png for p in drawn] == pages
    assert compaction["stubs_on_pages"] == {"elided": 10, "dropped": 0} == {"elided": compaction["page_text"].count(ELIDED_MARK), "dropped": 0}
    assert compaction["stubs_sent"] == {"elided": 0, "dropped": 0} and compaction["verbatim"] == len(view.messages) - 1


@pytest.mark.slow  # Chromium
def test_calls_markdown_and_the_compaction_panel_in_a_browser(compacted, tmp_path):
    out = tmp_path / "compacted.html"
    with glyphpack.Workspace(compacted, read_only=True) as ws:
        out.write_text(export_html(ws))
    with browser() as driver:
        driver.get(out.as_uri())
        labels = [e.text for e in driver.find_elements("css selector", "#transcript details.call > summary .label")]
        assert labels == [f"Read /src/m{n}.py" for n in range(12)]
        strong = [e.text for e in driver.find_elements("css selector", "#transcript .msg.assistant .md strong")]
        code = [e.text for e in driver.find_elements("css selector", "#transcript .msg.assistant .md code")]
        assert strong == [str(n) for n in range(12)] and code == [f"m{n}.py" for n in range(12)]
        panel = driver.find_element("css selector", "#transcript .compaction")
        assert "drawing" in panel.find_element("css selector", ".counts-pages").text
        assert panel.find_element("css selector", ".counts-pages").text.endswith(": 10 elision stub(s)")
        assert panel.find_element("css selector", ".counts-sent").text.endswith(": 0 elision stub(s)")
        assert page_errors(driver) == []
        if os.environ.get("GLYPHPACK_WRITE_DOCS"):  # the README's picture of calls with their results
            driver.execute_script(
                "const c = document.querySelectorAll('#transcript details.call')[1]; c.open = true;"
                "c.querySelector('details.result').open = true; c.closest('.msg').scrollIntoView()"
            )
            driver.save_screenshot(str(DOCS / "navigator-calls.png"))


@pytest.mark.slow  # Chromium
def test_runs_open_whole_search_folds_back_and_marks_and_paged_messages_say_so(compacted, tmp_path):
    """A folded run opens whole in one click; a search marks each word it finds, opens
    what holds a hit and folds it again when cleared; Enter walks the hits; a message the
    model sees only on a compaction's pages says so."""
    out = tmp_path / "compacted.html"
    with glyphpack.Workspace(compacted, read_only=True) as ws:
        out.write_text(export_html(ws))
        (compaction,) = workspace_data(ws)["compactions"]
        path = [m.id for m in ws.tree.path("c")]
    with browser() as driver:
        driver.get(out.as_uri())
        (run,) = driver.find_elements("css selector", "#tree .node.run")
        hidden = int(run.get_attribute("data-count"))
        before = len([i for i in node_ids(driver) if i])
        run.click()
        assert not driver.find_elements("css selector", "#tree .node.run")  # one click: the whole run
        assert len([i for i in node_ids(driver) if i]) == before + hidden
        open_before = driver.execute_script("return document.querySelectorAll('#transcript details[open]').length")
        box = driver.find_element("id", "search")
        box.send_keys("return 7")  # inside the folded results of module 7
        marks = driver.execute_script("return [...document.querySelectorAll('#transcript mark.find')].map(m => m.textContent)")
        assert marks and set(marks) == {"return 7"}
        assert driver.execute_script("return document.querySelectorAll('#transcript details[open]').length") > open_before
        box.send_keys("\n")
        assert len(driver.find_elements("css selector", "#transcript .msg.current-hit")) == 1
        box.clear()
        box.send_keys("x")
        box.send_keys("\ue003")  # Backspace: the box is empty again
        assert driver.execute_script("return document.querySelectorAll('#transcript details[open]').length") == open_before
        assert not driver.find_elements("css selector", "#transcript mark.find")
        assert "Enter/Shift+Enter" in driver.find_element("css selector", ".keys").text
        first, last = path.index(compaction["source"][0]), path.index(compaction["source"][1])
        paged = driver.execute_script("return [...document.querySelectorAll('#transcript .msg.paged')].map(m => m.id.slice(2))")
        assert paged == path[first : last + 1] and paged
        badge = driver.find_element("css selector", "#transcript .msg.paged .badge.paged").text
        assert badge == f"drawn on the {len(compaction['pages'])} page(s) of compaction 1"
        assert page_errors(driver) == []


@pytest.mark.slow  # Chromium
def test_checkpoints_errors_folded_results_and_scroll_read_as_the_tree_does(tmp_path):
    """The navigator says what ``glyphpack tree`` says: checkpoint labels on their
    messages, ``[error]`` for a failed result; a tool message whose results all sit under
    their calls is not drawn as an empty box; another conversation opens at its top."""
    from glyphpack._history.export import draw_tree

    ws_path = tmp_path / "ws"
    with glyphpack.Workspace(ws_path) as ws:
        for conversation in ("first", "second"):
            s = glyphpack.open_session(ws, conversation, "main", model="claude-sonnet-4-5")
            for n in range(30):
                s.add_user(f"step {n}")
                call = {"type": "tool_use", "id": f"{conversation}-t{n}", "name": "Bash", "input": {"command": f"make {n}"}}
                s.add_response({"role": "assistant", "content": [call]}, "anthropic")
                s.add_tool_results([glyphpack.ToolResult(f"{conversation}-t{n}", (glyphpack.Text(f"exit {n % 2}\n" * 30),), bool(n % 2))])
            s.command("/checkpoint before-the-fix")
            s.add_user("now fix it:\n1. reproduce\n   - run make 3\n   - read its log\n2. patch\n3. test\n\nthen:\n4. ship\n5. tell me")
        tree_lines = draw_tree(ws.tree, "first", collapse=False)
        html = export_html(ws)
    out = tmp_path / "nav.html"
    out.write_text(html)
    with browser() as driver:
        driver.get(out.as_uri())
        for run in driver.find_elements("css selector", "#tree .node.run"):
            run.click()
        rows = [e.text for e in driver.find_elements("css selector", "#tree .node")]
        assert sum("[checkpoint before-the-fix]" in r for r in rows) == 1 == sum("[checkpoint before-the-fix]" in line for line in tree_lines)
        assert sum("[error]" in r for r in rows) == sum("[error]" in line for line in tree_lines) == 15
        assert driver.find_elements("css selector", "#transcript .badge.checkpoint")
        # a nested list nests, and numbering goes on where the text says
        lists = driver.execute_script(
            "const md = [...document.querySelectorAll('#transcript .msg.user .md')].pop();"
            "return [...md.children].filter(e => e.tagName === 'OL').map(ol => [ol.start, [...ol.children].map(li => li.childNodes[0].textContent),"
            " [...ol.querySelectorAll('ul > li')].map(li => li.textContent)])"
        )
        assert lists == [[1, ["reproduce", "patch", "test"], ["run make 3", "read its log"]], [4, ["ship", "tell me"], []]]
        assert "results shown under their calls" not in driver.find_element("id", "transcript").text
        folded = driver.find_elements("css selector", "#transcript .msg.tool.folded")
        assert folded and not [m for m in folded if m.is_displayed()]
        driver.execute_script("const t = document.getElementById('transcript'); t.scrollTop = t.scrollHeight")
        assert driver.execute_script("return document.getElementById('transcript').scrollTop") > 0
        driver.execute_script("const s = document.getElementById('conversation'); s.value = 'second'; s.dispatchEvent(new Event('change'))")
        assert driver.execute_script("return document.getElementById('transcript').scrollTop") == 0
        assert page_errors(driver) == []


@pytest.mark.parametrize(
    ("call", "label"),
    [
        (glyphpack.ToolCall("1", "Bash", {"command": "ls -la\n  src", "description": "list"}), "$ ls -la src"),
        (glyphpack.ToolCall("1", "Read", {"file_path": "/src/a.py", "limit": 10}), "Read /src/a.py"),
        (glyphpack.ToolCall("1", "exec_command", {"cmd": "pytest -q"}), "$ pytest -q"),
        (glyphpack.ToolCall("1", "think", {"n": 3}), "think"),
        (glyphpack.ToolCall("1", "Grep", {"pattern": "x" * 300}), "Grep " + "x" * 154 + "…"),
        (glyphpack.ToolCall("1", "Grep", {"pattern": "x" * 155}), "Grep " + "x" * 155),  # exactly LABEL_CHARS: whole
    ],
)
def test_a_call_is_labelled_by_what_it_does(call, label):
    from glyphpack._session.navigator import LABEL_CHARS, call_label

    assert call_label(call) == label and len(call_label(call)) <= LABEL_CHARS


def test_arguments_read_as_text_with_their_line_breaks():
    from glyphpack._session.navigator import arguments_text

    text = arguments_text({"file_path": "a.py", "new_string": "def f():\n    return 1\n", "lines": [1, 2], "flag": True})
    assert text == 'file_path: a.py\nnew_string:\n    def f():\n        return 1\nlines: [\n  1,\n  2\n]\nflag: true'
    # every line of a text value indented, blank ones too; other values' text as it is
    assert arguments_text({"body": "a\n\nb", "names": ["é"]}) == 'body:\n    a\n    \n    b\nnames: [\n  "é"\n]'


#: The pattern inline Markdown was drawn with, before: the reference for the spans.
OLD_INLINE = r"/(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\s][^*\n]*\*)|(\[([^\]\n]+)\]\((https?:\/\/[^)\s]+)\))/g"


@pytest.mark.slow  # Chromium
def test_inline_markdown_finds_the_patterns_spans_in_linear_time(tmp_path):
    """The one-pass scanner finds exactly the spans the regular expression found, on
    random text made of the characters that open and close spans; and a message of
    200,000 '[' (41 s with the pattern, which backtracks) draws with the page."""
    import random

    rng = random.Random(7)
    alphabet = ["`", "*", "**", "[", "]", "(", ")", "](http://", "](https://", "x", " ", "\n", "\t", "é"]
    samples = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(3000)]
    samples += ["[a](https://x.org/p)", "[a](http://)", "**b** and *c*", "`d`", "* e*", "[f]\n(https://g)", "[h](https://i j)", "*", "**", "``"]
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        s = glyphpack.open_session(ws, "md", "main", model=MODEL)
        s.add_user("[" * 200_000)
        s.request("anthropic")
        s.add_response(reply("*" * 100_000 + "`" + "[x]" * 30_000))
    out = tmp_path / "md.html"
    assert cli_main(["export", str(tmp_path / "ws"), "--format", "html", "--out", str(out)]) == 0
    with browser() as driver:
        driver.set_page_load_timeout(60)
        driver.get(out.as_uri())
        assert driver.execute_script("return window.glyphpackNavigator.ready") is True
        mismatches = driver.execute_script(
            "const old = " + OLD_INLINE + ";"
            "const bad = [];"
            "for (const text of arguments[0]) {"
            "  const want = [...text.matchAll(old)].map(m => [m.index, m.index + m[0].length, m[1] ? 'code' : m[2] ? 'strong' : m[3] ? 'em' : 'link']);"
            "  const got = window.glyphpackNavigator.inlineSpans(text).map(s => [s.start, s.end, s.kind]);"
            "  if (JSON.stringify(want) !== JSON.stringify(got)) bad.push([text, want, got]);"
            "}"
            "return bad;",
            samples,
        )
        assert mismatches == []
        assert "[" * 1000 in driver.find_element("css selector", "#transcript").text
        assert page_errors(driver) == []


def test_a_workspace_name_with_markup_is_text_in_the_page_title(tmp_path):
    """The page title is the workspace's name: a folder called ``<b>&x</b>`` is that
    text in the title, never markup that could open an element."""
    path = tmp_path / "<b>&x<script>"
    with glyphpack.Workspace(path) as ws:
        ws.save("c", "a", [glyphpack.Message("user", "hello"), glyphpack.Message("assistant", "hi")], revision=0)
        page = export_html(ws)
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    assert title == "glyphpack: &lt;b&gt;&amp;x&lt;script&gt;"
    assert page.count("<script") == 2
