"""Several clients through two proxies on one workspace (a folder, then PostgreSQL), in
any order hypothesis draws: two clients racing for one conversation name, two users
told apart only by a gateway's per-user key behind one upstream key, a person whose
upstream token rotates on every request (with a client key), and one key's two windows
with the same first prompt. No forwarded request, transcript, tree, view or log line of
one client holds a word only another sent; nothing any client sent is missing from the
transcripts; each window's words are in its own transcript; the rotating client stays
in one conversation."""

from __future__ import annotations

import contextlib
import io
import re
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_proxy_clients import OPENING, SETTINGS, _answer, _body

from glyphpack import Workspace
from glyphpack._history.view import read_archive
from glyphpack._proxy.conversations import ProxySettings, Recorder
from glyphpack._proxy.identity import CLIENT_KEY_HEADER, CONVERSATION_HEADER, Client, ClientKeys

Json = dict[str, Any]
#: Who speaks: each its own words. The two windows are one client (one key).
SPEAKERS = ("alpha", "bravo", "gwuser1", "gwuser2", "rotating", "window1", "window2")
#: Those that may name their conversation (all the same name: a race for it).
NAMING = ("alpha", "bravo", "gwuser1", "gwuser2")
STEPS = st.lists(st.tuples(st.sampled_from(SPEAKERS), st.integers(0, 1), st.booleans()), min_size=6, max_size=16)


def _run(location: str, keys_file: Any, steps: list[tuple[str, int, bool]]) -> None:
    run = uuid.uuid4().hex[:8]  # this example's keys and words: earlier examples' stay apart
    person_key = ClientKeys.issue(keys_file, f"person-{run}")
    keys = ClientKeys(keys_file)
    settings_ = ProxySettings(context_window=SETTINGS.context_window, threshold=SETTINGS.threshold, client_keys=keys)
    proxies = [Recorder(Workspace(location), settings_) for _ in range(2)]
    team = {"x-api-key": f"sk-team-{run}"}
    headers: dict[str, dict[str, str]] = {
        "alpha": {"x-api-key": f"sk-alpha-{run}"},
        "bravo": {"authorization": f"Bearer sk-bravo-{run}"},
        "gwuser1": {**team, "x-litellm-api-key": f"sk-litellm-one-{run}"},
        "gwuser2": {**team, "x-litellm-api-key": f"sk-litellm-two-{run}"},
        "window1": {"x-api-key": f"sk-windows-{run}"},
        "window2": {"x-api-key": f"sk-windows-{run}"},
    }
    histories: dict[str, list[Json]] = {}
    forwarded: dict[str, list[str]] = {speaker: [] for speaker in SPEAKERS}
    errors = io.StringIO()
    rotations = 0
    # Then each speaker once more: a window's first answer, sent again by the other window
    # with the same prompt, reads as a retry (the tree keeps both) until one goes on.
    closing = [(speaker, n % 2, False) for n, speaker in enumerate(dict.fromkeys(s for s, _, _ in steps))]
    with contextlib.redirect_stderr(errors):
        for number, (speaker, proxy, names) in enumerate([*steps, *closing]):
            word = f"{speaker}{run}w{number}"
            opening = OPENING if speaker.startswith("window") else f"{OPENING} {speaker}{run}task"
            history = histories.setdefault(speaker, [{"role": "user", "content": opening}])
            if speaker == "rotating":  # a new upstream token on every request; the client key stays
                rotations += 1
                sent = {"authorization": f"Bearer sk-ant-oat01-{run}-{rotations}", CLIENT_KEY_HEADER: person_key}
            else:
                sent = dict(headers[speaker])
            if names and speaker in NAMING:
                sent[CONVERSATION_HEADER] = f"shared-{run}"
            client = Client.of(sent, keys=keys)
            exchange = proxies[proxy].prepare("anthropic", _body(history), None, client)
            forwarded[speaker].append(str(exchange.forwarded))
            proxies[proxy].finish(exchange, _answer(f"answer {word}"))
            history += [{"role": "assistant", "content": [{"type": "text", "text": f"answer {word}"}]}, {"role": "user", "content": f"asks {word}"}]
    workspace = proxies[0].workspace
    said = {speaker: re.compile(rf"\b{speaker}{run}(w\d+|task)\b") for speaker in SPEAKERS}
    identity = {speaker: "window" if speaker.startswith("window") else speaker for speaker in SPEAKERS}

    def speakers_in(text: str) -> set[str]:
        return {speaker for speaker, pattern in said.items() if pattern.search(text)}

    # Forwarded requests: a client's carry only its own words.
    for speaker, bodies in forwarded.items():
        assert {identity[s] for s in speakers_in(" ".join(bodies))} <= {identity[speaker]}, speaker
    # Transcripts: one speaker each (each window its own); the tree and views: one client each.
    holders: dict[str, set[tuple[str, str]]] = {speaker: set() for speaker in SPEAKERS}
    for key in workspace.transcripts():
        text = " ".join(m.text for m in workspace.load(*key).messages)
        found = speakers_in(text)
        assert len(found) <= 1, (key, found)
        for speaker in found:
            holders[speaker].add(key)
    for conversation in {c for c, _ in workspace.transcripts()}:
        tree_text = " ".join(node.message.text for node in workspace.tree.nodes(conversation))
        views = " ".join(m.text for _, agent in workspace.transcripts() if _ == conversation
                         for view in read_archive(workspace, conversation, agent) for m in view.messages)
        assert len({identity[s] for s in speakers_in(tree_text + " " + views)}) <= 1, conversation
    assert len({c for c, _ in holders["rotating"]}) <= 1  # the rotating token stays one client, in one conversation
    # Nothing lost: every word a speaker sent is in a transcript; a window's, or the rotating
    # client's, all in one (a fleet once kept only the last window's words).
    for speaker, history in histories.items():
        words = set(re.findall(rf"\b{speaker}{run}w\d+\b", " ".join(str(m["content"]) for m in history)))
        kept = [set(said[speaker].findall(" ".join(m.text for m in workspace.load(*key).messages))) for key in holders[speaker]]
        stored = {f"{speaker}{run}{found}" for found in set().union(*kept)} if kept else set()
        assert words <= stored, (speaker, sorted(words - stored)[:3])
        if speaker == "rotating" or speaker.startswith("window"):
            assert len(holders[speaker]) == 1, (speaker, holders[speaker])
    assert not speakers_in(errors.getvalue())
    for recorder in proxies:
        recorder.close()
        recorder.workspace.close()


@pytest.mark.slow  # about 3 s over both stores: the deterministic cases are in test_proxy_recorder and test_proxy_app
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
# One key's two windows, each on its own proxy, turn for turn (the thrash a fleet made).
@example(steps=[(f"window{1 + n % 2}", n % 2, False) for n in range(12)])
# A window's turns on one proxy, the other window's first on the other: that proxy knew only
# the other window's opening, and continued it with the first window's history.
@example(steps=[("window2", 1, False), ("alpha", 0, False), ("alpha", 0, False), ("alpha", 0, False), ("window2", 1, False), ("window1", 0, False)])
def test_clients_through_two_proxies_never_meet(workspace_location: str, tmp_path_factory: Any, steps: list[tuple[str, int, bool]]) -> None:
    _run(workspace_location, tmp_path_factory.mktemp("keys") / "keys", steps)
