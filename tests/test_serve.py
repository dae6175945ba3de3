"""``glyphpack serve``: the index of projects and conversations, search across them,
one conversation's page, recall from it; in Chromium on every session file in
tests/data imported (the slow test)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient
from test_import_harness import _long_compacted_session

import glyphpack
from glyphpack._cli import main
from glyphpack._history.recall import hinted_refs
from glyphpack._history.view import read_view, request_messages
from glyphpack._session.serve import RECORDED, Index, serve_app

SESSIONS = Path(__file__).parent / "data" / "sessions"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every session file in tests/data imported, and a long Claude Code session
    compacted by glyphpack (its stubs carry refs)."""
    folder = tmp_path_factory.mktemp("serve")
    ws = folder / "ws"
    main(["import", str(SESSIONS), "--workspace", str(ws)])  # one fixture is broken on purpose: the rest import
    long = folder / "projects" / "-home-ada-parser" / "long.jsonl"
    long.parent.mkdir(parents=True)
    long.write_text("\n".join(json.dumps(line) for line in _long_compacted_session(20, 12)))
    assert main(["import", str(long), "--workspace", str(ws)]) == 0
    assert main(["compact", str(ws), "long", "--budget", "9000", "--model", "claude-sonnet-4-5"]) == 0
    return ws


@pytest.fixture
def client(workspace: Path) -> Any:
    with glyphpack.Workspace(workspace, read_only=True) as ws:
        yield TestClient(serve_app(ws))


def test_the_index_lists_each_conversation_with_its_project_harness_dates_and_sizes(client, workspace):
    listed = client.get("/api/conversations").json()["conversations"]
    with glyphpack.Workspace(workspace, read_only=True) as ws:
        ids = {c.id for c in ws.tree.conversations()}
        long = ws.load("long", "main").messages
        view = read_view(ws, "long", "main")
    assert {c["id"] for c in listed} == ids and len(ids) >= 20
    assert [c["last"] for c in listed] == sorted((c["last"] for c in listed), reverse=True)  # newest first
    row = next(c for c in listed if c["id"] == "long")
    assert row["harness"] == "claude-code" and row["project"] == "/home/ada/parser"  # Claude Code's folder names the working directory
    assert row["location"].endswith("projects/-home-ada-parser")
    assert row["calls"] == sum(len(m.tool_calls) for m in long) and row["messages"] == len(long)
    assert (row["first"], row["last"]) == (min(m.time for m in long if m.time), max(m.time for m in long if m.time))
    assert row["compactions"] >= 2 and row["next_request"] < row["tokens"]  # the harness's and glyphpack's; what is sent is smaller
    sent, _ = request_messages(view, long)
    assert row["next_request"] == sum(glyphpack._history.pricing.message_tokens(m, glyphpack._history.pricing.EstimatePricer()) for m in sent)
    ohmyposh = next(c for c in listed if c["id"] == "ohmyposh-6beb436f6cd8-0")
    assert ohmyposh["title"] == "Security advisories analysis and fixes" and ohmyposh["project"] == "sessions"  # the file's own title
    assert ohmyposh["model"] == "claude-sonnet-5"  # as the file recorded it
    assert client.get("/api/conversations").json()["workspace"] == "ws"


def test_a_conversation_recorded_here_is_listed_apart_and_shows_up_once_stored(tmp_path):
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        index = Index(ws)
        assert index.conversations() == []
        session = glyphpack.open_session(ws, "live", "main", model="claude-sonnet-4-5")
        session.extend([glyphpack.Message("user", "where is the parser?"), glyphpack.Message("assistant", "in mod_03.py")])
        first = index.conversations()
        assert [(c["id"], c["project"], c["messages"], c["title"]) for c in first] == [("live", RECORDED, 2, "where is the parser?")]
        session.extend([glyphpack.Message("user", "and the lexer?"), glyphpack.Message("assistant", "mod_04.py")])
        assert index.conversations()[0]["messages"] == 4  # the tip moved: made again, not the kept one
        session.close()


def test_search_finds_words_inside_tool_outputs_across_conversations(client, workspace):
    with glyphpack.Workspace(workspace, read_only=True) as ws:
        output = next(r.text for m in ws.load("long", "main").messages for r in m.tool_results if "early7" in r.text)
    word = re.search(r"line of early7 source code", output).group()
    results = client.get("/api/search", params={"q": word.upper()}).json()["results"]
    assert [r["id"] for r in results] == ["long"]
    match = results[0]["matches"][0]
    assert match["role"] == "tool" and word in match["text"] and match["message"].startswith("long/")
    assert client.get("/api/search", params={"q": ""}).json()["results"] == []
    assert client.get("/api/search").json()["results"] == []  # no query at all
    assert client.get("/api/search", params={"q": "no such words anywhere 0xdeadbeef"}).json()["results"] == []


def test_a_conversation_page_is_its_own_and_recalls_each_ref_exactly(client, workspace):
    page = client.get("/c/long")
    assert page.status_code == 200 and "connect-src 'self'" in page.text and "recall " in page.text
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page.text, re.S).group(1))
    assert {c["id"] for c in data["conversations"]} == {"long"}  # this conversation alone, not the workspace
    with glyphpack.Workspace(workspace, read_only=True) as ws:
        messages = ws.load("long", "main").messages
        sent, _ = request_messages(read_view(ws, "long", "main"), messages)
    refs = [ref for ref, _ in hinted_refs(sent)]
    assert refs
    for ref in refs[:3]:
        answer = client.get("/api/recall/long/main", params={"ref": ref}).json()
        expected = glyphpack._history.recall.recall(messages, ref, 1, range_text=glyphpack._compaction.snapshot.serialize_messages)
        assert answer == {"text": expected.as_text(), "error": False}
    unknown = client.get("/api/recall/long/main", params={"ref": "nothing-by-this-ref"}).json()
    assert unknown["error"] is True and "nothing-by-this-ref" in unknown["text"]
    missing = client.get("/c/no-such-conversation")
    assert missing.status_code == 404 and "no conversation 'no-such-conversation'" in missing.json()["error"]
    assert missing.headers["cache-control"] == "no-store"
    assert page.text.count("connect-src 'self'") == 1 and page.text.count("glyphpack recall") >= 1
    assert page.text.index("// On a page glyphpack serve serves") < page.text.index("</body>")  # the served script, inside the page


def test_serve_says_what_is_wrong_in_one_line(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "nothing-here")]) == 2
    err = capsys.readouterr().err
    assert "is not a glyphpack workspace" in err and "Traceback" not in err


@pytest.mark.slow  # Chromium and a server process: CI runs it
def test_serve_in_a_browser(workspace, tmp_path):
    from browser import browser, page_errors

    server = subprocess.Popen([sys.executable, "-m", "glyphpack", "serve", str(workspace), "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        url = re.search(r"on (http://\S+):", line).group(1)
        with browser(1400, 900) as driver:
            driver.get(url)
            wait = _waiter(driver)
            wait("return window.glyphpackIndex && window.glyphpackIndex.conversations >= 20")
            projects = driver.execute_script("return [...document.querySelectorAll('section.project')].map(s => [s.dataset.project, s.querySelector('.meta').textContent])")
            assert ["/home/ada/parser", "sessions"] <= [p for p, _ in projects] or {"/home/ada/parser", "sessions"} <= {p for p, _ in projects}
            meta = dict(projects)["/home/ada/parser"]
            assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", meta) and re.search(r"[\d,]+ tokens", meta)
            assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")  # no sideways scroll
            _shot(driver, tmp_path, "serve-index.png")
            # A word inside a folded tool output, found from the index.
            box = driver.find_element("id", "filter")
            box.send_keys("line of early7 source code")
            wait("return document.querySelectorAll('#found .hit').length > 0")
            assert driver.execute_script("return [...document.querySelectorAll('#found .hit')].map(h => h.dataset.id)") == ["long"]
            # A conversation opens on its own page in under a second, at the first prompt typed.
            driver.get(f"{url}/c/ohmyposh-6beb436f6cd8-0")
            wait("return window.glyphpackNavigator && window.glyphpackNavigator.ready")
            assert driver.execute_script("return window.glyphpackNavigator.sinceNavigation") < 1000
            shown = driver.execute_script(
                "const e = document.querySelector('.msg.first-prompt'); const r = e.getBoundingClientRect();"
                "return [e.textContent, r.top >= 0 && r.top < window.innerHeight]")
            assert "I have a few security advisories" in shown[0] and shown[1]
            assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")  # no sideways scroll here either
            _shot(driver, tmp_path, "serve-first-prompt.png")
            # A recall from the page shows the exact text.
            driver.get(f"{url}/c/long")
            wait("return window.glyphpackNavigator && window.glyphpackNavigator.served && document.querySelectorAll('button.recall').length > 0")
            button = driver.find_element("css selector", "button.recall")
            ref = button.get_attribute("data-ref")
            driver.execute_script("arguments[0].closest('details').open = true; arguments[0].scrollIntoView({block: 'center'})", button)
            button.click()  # as a person clicks it: the compaction's refs opened, the button in view
            wait("return document.querySelector('pre.recalled') && !document.querySelector('pre.recalled').textContent.startsWith('recalling')")
            shown_text = driver.execute_script("return document.querySelector('pre.recalled').textContent")
            with glyphpack.Workspace(workspace, read_only=True) as ws:
                messages = ws.load("long", "main").messages
            expected = glyphpack._history.recall.recall(messages, ref, 1, range_text=glyphpack._compaction.snapshot.serialize_messages)
            assert shown_text == expected.as_text() and not expected.is_error
            driver.execute_script("document.querySelector('pre.recalled').scrollIntoView({block: 'center'})")
            _shot(driver, tmp_path, "serve-recall.png")
            # What is recorded while the index is open shows up without a reload.
            driver.get(url)
            wait("return window.glyphpackIndex && window.glyphpackIndex.ready")
            with glyphpack.Workspace(workspace) as ws:
                session = glyphpack.open_session(ws, "recorded-now", "main", model="claude-sonnet-4-5")
                session.extend([glyphpack.Message("user", "a question asked just now"), glyphpack.Message("assistant", "an answer")])
                session.close()
            wait("return [...document.querySelectorAll('tr.conversation')].some(r => r.dataset.id === 'recorded-now')", seconds=10)
            assert page_errors(driver) == []
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.mark.slow  # Chromium, a server process and claude-code-log: CI runs it
def test_serve_beside_claude_code_log_on_the_same_session(workspace, tmp_path):
    """The same Claude Code session in ``glyphpack serve`` and in claude-code-log (the
    peer people browse their sessions with), each on its first screen, side by side in
    docs/serve-vs-claude-code-log.png. glyphpack's first screen holds the first prompt
    the person typed, and its page holds the session's longest tool output whole."""
    from browser import browser
    from harness_clients import CI_DIR, installed
    from PIL import Image, ImageDraw

    peer = installed("claude-code-log", "GLYPHPACK_CLAUDE_CODE_LOG", "claude-code-log",
                     local=CI_DIR / "claude-code-log" / "bin" / "claude-code-log", how="pip install")
    version = subprocess.run([peer, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    session = SESSIONS / "ohmyposh-6beb436f6cd8-0.jsonl"
    converted = tmp_path / "claude-code-log.html"
    subprocess.run([peer, "convert", str(session), "-o", str(converted)], capture_output=True, text=True, check=True,
                   env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    with glyphpack.Workspace(workspace, read_only=True) as ws:
        results = [r.text for m in ws.load("ohmyposh-6beb436f6cd8-0", "main").messages for r in m.tool_results]
    longest = max(results, key=len)
    server = subprocess.Popen([sys.executable, "-m", "glyphpack", "serve", str(workspace), "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"on (http://\S+):", server.stderr.readline()).group(1)
        with browser(1000, 900) as driver:
            wait = _waiter(driver)
            driver.get(f"{url}/c/ohmyposh-6beb436f6cd8-0")
            wait("return window.glyphpackNavigator && window.glyphpackNavigator.ready")
            first = driver.execute_script(
                "const e = document.querySelector('.msg.first-prompt'); const r = e.getBoundingClientRect();"
                "return [e.textContent, r.top >= 0 && r.top < window.innerHeight]")
            assert "I have a few security advisories" in first[0] and first[1]
            assert longest in driver.execute_script("return document.body.textContent")  # folded, and whole
            driver.save_screenshot(str(tmp_path / "ours.png"))
            driver.get(converted.as_uri())
            wait("return document.readyState === 'complete'")
            driver.save_screenshot(str(tmp_path / "peer.png"))
    finally:
        server.terminate()
        server.wait(timeout=20)
    shots = [Image.open(tmp_path / "ours.png"), Image.open(tmp_path / "peer.png")]
    header = 36
    both = Image.new("RGB", (sum(s.width for s in shots) + 12, max(s.height for s in shots) + header), "white")
    draw = ImageDraw.Draw(both)
    x = 0
    for shot, label in zip(shots, ("glyphpack serve", version)):
        both.paste(shot, (x, header))
        draw.text((x + 10, 10), f"{label}: {session.name}", fill="black")
        x += shot.width + 12
    both.save(tmp_path / "serve-vs-claude-code-log.png")
    _keep_for_docs(tmp_path, "serve-vs-claude-code-log.png")


def _keep_for_docs(folder: Path, name: str) -> None:
    """Copy ``folder/name`` into docs/ when GLYPHPACK_WRITE_DOCS is set (docs/navigator.md's)."""
    import os
    import shutil

    if os.environ.get("GLYPHPACK_WRITE_DOCS"):
        shutil.copy(folder / name, Path(__file__).resolve().parent.parent / "docs" / name)


def _shot(driver: Any, folder: Path, name: str) -> None:
    """A screenshot, copied into docs/ when GLYPHPACK_WRITE_DOCS is set (docs/navigator.md's)."""
    driver.save_screenshot(str(folder / name))
    _keep_for_docs(folder, name)


def _waiter(driver: Any) -> Any:
    def wait(script: str, seconds: float = 5.0) -> None:
        deadline = time.monotonic() + seconds
        while not driver.execute_script(script):
            assert time.monotonic() < deadline, f"waited {seconds} s for: {script}"
            time.sleep(0.05)

    return wait


def test_search_keeps_to_its_limits_and_cuts_each_snippet_around_the_match(tmp_path, monkeypatch):
    """At most ``SEARCH_CONVERSATIONS`` conversations, the first found, each with at most
    ``SEARCH_MATCHES`` matches, in the order stored; a snippet is the match with
    ``SNIPPET_CHARS`` / 2 characters either side, its whitespace made single spaces; a
    call's arguments are searched too."""
    from glyphpack import Message, ToolCall
    from glyphpack._session import serve

    monkeypatch.setattr(serve, "SEARCH_CONVERSATIONS", 2)
    monkeypatch.setattr(serve, "SEARCH_MATCHES", 3)
    text = "x" * 100 + "needle" + "\n\n" + "y" * 100
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        for name in ("c1", "c2", "c3"):
            session = glyphpack.open_session(ws, name, "main", model="claude-sonnet-4-5")
            session.extend([Message("user", f"{name}: {text}"), Message("assistant", (ToolCall("t1", "grep", {"pattern": "needle here"}),)),
                            Message("tool", (glyphpack.ToolResult("t1", (glyphpack.Text("needle found"),)),)), Message("assistant", "a needle"),
                            Message("user", "no match"), Message("assistant", "needle again")])
            session.close()
        found = Index(ws).search("NEEDLE")
        first_id = ws.load("c1", "main").messages[0].id
    assert [f["id"] for f in found] == ["c1", "c2"]
    assert [[m["role"] for m in f["matches"]] for f in found] == [["user", "assistant", "tool"]] * 2
    first = found[0]["matches"][0]
    assert first["text"] == "x" * 40 + "needle " + "y" * 38 and first["agent"] == "main" and first["message"] == first_id
    assert found[0]["matches"][1]["text"] == '{"pattern": "needle here"}'  # the call's arguments, as JSON


def test_the_index_page_names_the_workspace_as_text_and_every_answer_is_not_cached(client, tmp_path):
    from glyphpack._session.serve import index_page

    with glyphpack.Workspace(tmp_path / "a <b>&c") as ws:
        page = index_page(ws)
    assert "a &lt;b&gt;&amp;c" in page and "a <b>&c" not in page
    assert "<title>" in client.get("/").text and "glyphpackIndex" in client.get("/").text
    for path in ("/", "/api/conversations", "/api/search?q=x", "/c/long"):
        answer = client.get(path)
        assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store" and answer.headers["x-content-type-options"] == "nosniff", path
    bad_page = client.get("/api/recall/long/main", params={"ref": "x", "page": "two"}).json()
    assert bad_page["error"] is True and "page" in bad_page["text"]


def test_a_summary_counts_every_agent_and_falls_back_to_the_id_for_a_title(tmp_path):
    from glyphpack._session.serve import conversation_summary

    with glyphpack.Workspace(tmp_path / "ws") as ws:
        for conversation, agent, messages in (("quiet", "main", [glyphpack.Message("assistant", "nothing typed first")]),
                                              ("busy", "main", [glyphpack.Message("user", "help"), glyphpack.Message("assistant", "helped")]),
                                              ("busy", "helper", [glyphpack.Message("user", "a task, " + "long " * 200), glyphpack.Message("assistant", "done"),
                                                                  glyphpack.Message("user", "more"), glyphpack.Message("assistant", "done")])):
            session = glyphpack.open_session(ws, conversation, agent, model="claude-sonnet-4-5")
            session.extend(messages)
            session.close()
        quiet = conversation_summary(ws, ws.tree.conversation("quiet"))
        busy = conversation_summary(ws, ws.tree.conversation("busy"))
    assert (quiet["title"], quiet["agents"], quiet["messages"], quiet["cost"], quiet["harness"]) == ("quiet", ["main"], 1, None, "")
    assert (busy["title"], busy["agents"], busy["messages"]) == ("help", ["helper", "main"], 6)
    assert busy["next_request"] < 100  # the main agent's next request, not the longer helper's
    assert quiet["first"] == quiet["last"] > 0  # no message time: the conversation's creation
    assert quiet["project"] == RECORDED and quiet["location"] == ""
