"""``glyphpack eval`` offline: the official SDK clients against a local fake server that
answers from the probe's ground truth, with injected misreads, refusals, malformed
replies and rate limits; the scorer's exact values; retries, resume, the report, the
plot, ``--apply`` and the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

import glyphpack
from glyphpack._cli import main as cli_main
from glyphpack._compaction.cost import CostModel
from glyphpack._eval import run
from glyphpack._eval.probes import KINDS, cer, levenshtein, parse_reply, probe_set, score, wilson
from glyphpack.testing.fake import Turn as FakeTurn
from glyphpack.testing.fake import answer_body, count_tokens, error_response, http

httpx = http()

MODELS = {"anthropic": "claude-sonnet-4-5", "openai-chat": "gpt-5.4", "openai-responses": "gpt-5.4", "gemini": "gemini-3-pro"}
SHAPES = ("5x8", "9x15-loose")


def png_of(api: str, body: dict) -> bytes:
    """The page a request carries, as each API carries it."""
    text = json.dumps(body)
    if api == "anthropic":
        data = body["messages"][0]["content"][0]["source"]["data"]
    elif api in ("openai-chat", "openai-responses"):
        data = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text).group(1)
    else:
        part = next(p for p in body["contents"][0]["parts"] if "inlineData" in p)
        data = part["inlineData"]["data"].replace("-", "+").replace("_", "/")
    return base64.b64decode(data)


class ProbeServer:
    """A reader that sees the page exactly (it knows each page's probe) and answers the
    prompt; ``misread(probe, label, text)`` may change a line, ``faults`` by request
    number: "429", "refuse", "garbage"."""

    def __init__(self, api: str, plan: run.EvalPlan, misread=None, faults=None, misanswer=None):
        self.api, self.misread, self.faults, self.misanswer = api, misread, faults or {}, misanswer
        self.requests: list[dict] = []
        self.pages = {}
        for probe in plan.probes():
            page = glyphpack.render(probe.text, model=plan.model, shape=probe.shape, layout="lines")[0]
            self.pages[hashlib.sha256(page.png).hexdigest()] = probe

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        number = len(self.requests)
        fault = self.faults.get(number)
        if fault == "429":
            return error_response(self.api, 429, "rate_limit", headers={"retry-after-ms": "1", "retry-after": "0"})
        probe = self.pages[hashlib.sha256(png_of(self.api, body)).hexdigest()]
        if fault == "refuse":
            text = "I'm sorry, I can't help with reading this image."
        elif fault == "garbage":
            text = "}{ not an answer"
        else:
            lines = []
            for label in probe.asked:
                truth = probe.truth(label)
                lines.append(f"{label}: {self.misread(probe, label, truth) if self.misread else truth}")
            wrong = self.misanswer is not None and self.misanswer(probe)
            lines += [f"Q{i + 1}: {'no idea' if wrong else answer}" for i, (_, answer) in enumerate(probe.questions)]
            text = "\n".join(lines)
        return httpx.Response(200, json=answer_body(self.api, FakeTurn(text=text), number, count_tokens(body)))

    def client(self):
        http = httpx.Client(transport=httpx.MockTransport(self.handle))
        if self.api == "anthropic":
            import anthropic

            return anthropic.Anthropic(api_key="test", http_client=http, max_retries=0)
        if self.api in ("openai-chat", "openai-responses"):
            import openai

            return openai.OpenAI(api_key="test", http_client=http, max_retries=0)
        from google import genai
        from google.genai import types

        return genai.Client(api_key="test", http_options=types.HttpOptions(httpx_client=http))


def swap_one_hex_char(probe, label, text):
    """The silent, plausible substitution a dense page invites: one hex digit, at 5x8."""
    if probe.shape == "5x8" and probe.kind(label) == "hex":
        return text[:5] + ("0" if text[5] != "0" else "8") + text[6:]
    return text


# --------------------------------------------------------------------- the scorer


def test_levenshtein_and_cer_exact_values():
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3 and levenshtein("abc", "abc") == 0
    assert cer("abcd", "abce") == 0.25
    assert cer("", "abcd") == 1.0
    assert cer("abcdxyz", "abc") == pytest.approx(4 / 3)  # can exceed 1: extra text counts
    assert cer("ab", "") == 2.0


def test_wilson_interval_known_values():
    low, high = wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(10, 10)[1] == pytest.approx(1.0) and round(wilson(10, 10)[0], 3) == 0.722


def test_parse_and_score():
    probe = probe_set(["5x8"], 1, seed=3)[0]
    assert len(probe.asked) == len(KINDS) and len(probe.questions) == 2
    first = probe.asked[0]
    truth = probe.truth(first)
    reply = f"**{first}:** {truth[:-1]}X\nrubbish line\nQ1: it went to {probe.questions[0][1]}.\nQ2) no idea"
    assert parse_reply(reply)[first] == truth[:-1] + "X"
    scored = score(probe, reply)
    line = scored["lines"][0]
    assert line["exact"] is False and line["cer"] == pytest.approx(1 / len(truth))
    assert all(not x["exact"] and x["cer"] == 1.0 for x in scored["lines"][1:])  # not answered: nothing read
    assert scored["gist"] == [True, probe.questions[1][1] == "no idea"]


# --------------------------------------------------------------------- end to end


#: Anthropic by default; the other SDKs in CI (and with --run-slow).
APIS = ["anthropic", *(pytest.param(api, marks=pytest.mark.slow) for api in list(MODELS)[1:])]


@pytest.mark.parametrize("api", APIS)
def test_eval_end_to_end_through_each_sdk(tmp_path, api):
    plan = run.EvalPlan(MODELS[api], api, SHAPES, per_shape=2, seed=1)
    # requests: 5x8 #0, 9x15-loose #0, a 429 for 5x8 #1 and its retry (refused), 9x15-loose #1 (garbage)
    server = ProbeServer(api, plan, misread=swap_one_hex_char, faults={3: "429", 4: "refuse", 5: "garbage"})
    waits = []
    data = run.run_eval(plan, server.client(), tmp_path / "results.json", sleep=waits.append)
    assert waits == [run.BACKOFF_SECONDS]  # the rate limit was waited out, once, then retried
    assert len(data["trials"]) == 4 and len(server.requests) == 5
    # the request: one page and the prompt, in the API's own blocks, unresized
    body = server.requests[0]
    text = json.dumps(body)
    assert "Transcribe lines" in text and png_of(api, body).startswith(b"\x89PNG")
    reader = glyphpack.resolve(MODELS[api]).reader
    if api.startswith("openai"):
        assert f'"detail": "{reader.detail}"' in text
    if api == "gemini":
        assert reader.media_resolution in text
    rows = {row["shape"]: row for row in run.summary(data)}
    # 5x8: probe 0 read with one hex digit wrong; probe 1 refused -> nothing read
    dense = rows["5x8"]
    assert dense["exact_by_kind"]["hex"] == 0.0 and dense["exact_by_kind"]["number"] == 0.5
    hex_lines = [line for t in data["trials"] if t["shape"] == "5x8" for line in t["lines"] if line["kind"] == "hex"]
    assert sorted(round(line["cer"], 4) for line in hex_lines) == sorted([round(1 / 38, 4), 1.0])
    # 9x15-loose: probe 0 read exactly, probe 1 a malformed reply
    legible = rows["9x15-loose"]
    assert legible["exact"] == 0.5 and legible["gist"] == 0.5
    assert legible["chars_per_token"] < dense["chars_per_token"]
    report = run.markdown(data)
    assert report.count("\n| ") == 3 and "9x15-loose" in report  # the plot: in the CLI test


def test_a_stopped_run_resumes_without_sending_again(tmp_path):
    plan = run.EvalPlan("claude-sonnet-4-5", "anthropic", SHAPES, per_shape=3)
    results = tmp_path / "results.json"
    first = ProbeServer("anthropic", plan, faults={4: "429"})
    with pytest.raises(Exception) as stopped:  # the rate limit outlasts the retries: the run stops
        run.run_eval(plan, first.client(), results, sleep=lambda s: first.faults.update({len(first.requests) + 1: "429"}))
    assert getattr(stopped.value, "status_code", None) == 429
    kept = json.loads(results.read_text())["trials"]
    assert len(kept) == 3
    second = ProbeServer("anthropic", plan)
    data = run.run_eval(plan, second.client(), results)
    assert len(data["trials"]) == 6 and len(second.requests) == 3  # only what was missing
    assert [t["id"] for t in data["trials"][:3]] == [t["id"] for t in kept]
    other = run.EvalPlan("gpt-5.4", "openai-chat", SHAPES, per_shape=3)
    with pytest.raises(glyphpack.UsageError, match="holds results for claude-sonnet-4-5"):
        run.run_eval(other, second.client(), results)


@pytest.mark.slow  # renders and applies a probe: CI runs it
def test_apply_writes_a_profile_that_render_and_the_ladder_use(tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHPACK_READING_PROFILES", str(tmp_path / "profiles.json"))
    model = "claude-sonnet-4-5"
    assert glyphpack.reading_profile(model).exact.shape == "9x15-loose"  # no published evidence
    plan = run.EvalPlan(model, "anthropic", ("5x8", "6x13", "9x15-loose"), per_shape=12)
    server = ProbeServer("anthropic", plan, misread=swap_one_hex_char)
    run.run_eval(plan, server.client(), tmp_path / "results.json")
    path, profile, remarks = run.apply(tmp_path / "results.json")
    assert remarks == []
    # 5x8 misread every hex id: exact falls to 6x13, the densest shape read without a miss;
    # the gist survived 5x8
    assert (profile.exact.shape, profile.gist.shape) == ("6x13", "5x8")
    assert glyphpack.reading_profile(model) == profile
    assert glyphpack.render("x", model=model, fidelity="exact").report.shape == "6x13"
    history = glyphpack.generate_session(200_000, seed=1)
    budget = CostModel.for_model(model).history(history) // 2
    pages = glyphpack.compact(history, model, budget, policy=glyphpack.CompactionPolicy(rungs=("snapshot",))).pages
    assert pages and {p.shape for p in pages} == {"6x13"}
    for content, problem in ((b"{broken", "is damaged (Expecting"), (b'{"m": "\xff"}', "is damaged (not UTF-8 at byte 7)")):
        (tmp_path / "profiles.json").write_bytes(content)
        # Work that reads profiles goes on with the published ones, named once; writing
        # over the file (--apply) stops and names it.
        with pytest.warns(glyphpack.ProfileWarning) as warned:
            assert glyphpack.reading_profile(model) == glyphpack.reading_profile(model, measured=False)
            glyphpack.reading_profile(model)
        assert len(warned) == 1 and f"profiles.json {problem}" in str(warned[0].message) and "published reading profiles are used" in str(warned[0].message)
        with pytest.raises(glyphpack.GlyphpackError, match=re.escape(f"profiles.json {problem}")):
            run.apply(tmp_path / "results.json")


@pytest.mark.slow  # drives the whole probe through the CLI: CI runs it
def test_the_cli_prints_the_cost_first_and_spends_only_with_yes(tmp_path, monkeypatch, capsys):
    out = tmp_path / "eval"
    assert cli_main(["eval", "--model", "claude-sonnet-4-5", "--shapes", "5x8", "--per-shape", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 trials" in printed and "input tokens" in printed and "nothing was sent" in printed
    assert not (out / "results.json").exists()
    plan = run.EvalPlan("claude-sonnet-4-5", "anthropic", ("5x8",), per_shape=2)
    server = ProbeServer("anthropic", plan)
    monkeypatch.setattr(run, "make_client", lambda api, base_url=None: server.client())
    args = ["eval", "--model", "claude-sonnet-4-5", "--shapes", "5x8", "--per-shape", "2", "--out", str(out), "--yes"]
    assert cli_main(args) == 0
    assert {p.name for p in out.iterdir()} >= {"results.json", "report.md", "plot.png"} and len(server.requests) == 2
    assert "| 5x8 |" in capsys.readouterr().out
    assert cli_main(["eval", "--model", "claude-sonnet-4-5", "--shapes", "7x7"]) == 2
    assert "unknown shape" in capsys.readouterr().err
    assert cli_main(["eval"]) == 2
    monkeypatch.undo()
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    assert cli_main(args) == 2
    assert "needs your key in ANTHROPIC_API_KEY" in capsys.readouterr().err


def garble_every_line(probe, label, text):
    """A reader that gets no line of a 9x15-loose page right (and every other right)."""
    return ("#" + text[1:]) if probe.shape == "9x15-loose" else text


def test_apply_never_keeps_a_published_shape_the_measurement_contradicts_without_saying_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GLYPHPACK_READING_PROFILES", str(tmp_path / "profiles.json"))
    model = "claude-sonnet-4-5"  # published exact: 9x15-loose
    plan = run.EvalPlan(model, "anthropic", ("9x15-loose",), per_shape=3)
    server = ProbeServer("anthropic", plan, misread=garble_every_line)
    run.run_eval(plan, server.client(), tmp_path / "results.json")
    # An earlier measurement here said 5x8: this one replaces it, against the published profile.
    earlier = {"shape": "5x8", "source": "an earlier run", "note": "", "recorded": "2026-11-01"}
    (tmp_path / "profiles.json").write_text(json.dumps({"claude-sonnet-4-5": {"name": "measured", "exact": earlier, "gist": earlier}}))
    assert cli_main(["eval", "--apply", str(tmp_path / "results.json")]) == 0
    err = capsys.readouterr().err
    assert "exact stays the published 9x15-loose, which this measurement contradicts: 0% of 3 probes (exact), lower 95% bound 0%" in err
    profile = glyphpack.reading_profile(model)
    assert profile.exact.shape == "9x15-loose" and profile.gist.shape == "9x15-loose"  # gist never sparser


def test_a_measured_profile_naming_an_unknown_shape_falls_back_to_the_published_one_with_one_warning(tmp_path, monkeypatch):
    path = tmp_path / "profiles.json"
    monkeypatch.setenv("GLYPHPACK_READING_PROFILES", str(path))
    evidence = {"shape": "7x7", "source": "edited by hand", "note": "", "recorded": "2026-12-03"}
    path.write_text(json.dumps({"claude-sonnet-4-5": {"name": "measured: claude-sonnet-4-5", "exact": evidence, "gist": evidence}}))
    with pytest.warns(glyphpack.ProfileWarning) as warned:
        first = glyphpack.render("x", model="claude-sonnet-4-5", fidelity="exact")
        glyphpack.render("y", model="claude-sonnet-4-5", fidelity="exact")
    assert first.report.shape == glyphpack.reading_profile("claude-sonnet-4-5", measured=False).exact.shape
    assert len(warned) == 1 and "names shape '7x7', which glyphpack does not have" in str(warned[0].message) and str(path) in str(warned[0].message)


@pytest.mark.slow  # renders and reads 28 probes (about 5 s)
def test_apply_never_makes_gist_sparser_than_exact(tmp_path, monkeypatch, capsys):
    """Every line of 6x13 read exactly but its questions missed: exact is 6x13, and gist,
    whose own bar only 9x15-loose cleared, is 6x13 too (exact reading keeps the gist)."""
    monkeypatch.setenv("GLYPHPACK_READING_PROFILES", str(tmp_path / "profiles.json"))
    plan = run.EvalPlan("claude-sonnet-4-5", "anthropic", ("6x13", "9x15-loose"), per_shape=14)
    server = ProbeServer("anthropic", plan, misanswer=lambda probe: probe.shape == "6x13")
    run.run_eval(plan, server.client(), tmp_path / "results.json")
    _, profile, remarks = run.apply(tmp_path / "results.json")
    assert (profile.exact.shape, profile.gist.shape) == ("6x13", "6x13")
    assert remarks == ["gist 9x15-loose would be sparser than exact 6x13: gist is 6x13 too"]


@pytest.mark.slow  # renders and reads four probe pages (about 3 s with the SDK import)
def test_a_reader_that_reads_every_script_exactly_scores_each_exact_where_its_font_draws_it(tmp_path):
    """Cyrillic shares look-alike glyphs with Latin (р and p): the page read back shows
    Latin, but the line is drawn, and a reader that answers it exactly scores exact.
    CJK is scored only where the shape's font has it."""
    plan = run.EvalPlan("claude-sonnet-4-5", "anthropic", ("5x8", "9x15-loose"), per_shape=2)
    server = ProbeServer("anthropic", plan)
    data = run.run_eval(plan, server.client(), tmp_path / "results.json")
    by_shape = {row["shape"]: row["exact_by_kind"] for row in run.summary(data)}
    assert by_shape["5x8"] == {"hex": 1.0, "number": 1.0, "code": 1.0, "cyrillic": 1.0, "cjk": None}  # 5x8 has no CJK
    assert by_shape["9x15-loose"] == dict.fromkeys(("hex", "number", "code", "cyrillic", "cjk"), 1.0)


def test_a_local_openai_compatible_server_needs_no_key(monkeypatch):
    """vLLM, Ollama and LM Studio take any key: with --base-url, none need be set."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for api in ("openai-chat", "openai-responses"):
        client = run.make_client(api, "http://127.0.0.1:11434/v1")
        assert str(client.base_url) == "http://127.0.0.1:11434/v1/" and client.api_key == run.LOCAL_KEY
    assert run.make_client("anthropic", "http://127.0.0.1:8080").api_key == run.LOCAL_KEY
    with pytest.raises(glyphpack.UsageError, match="needs your key in OPENAI_API_KEY"):
        run.make_client("openai-chat")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-mine")
    assert run.make_client("openai-chat", "http://127.0.0.1:11434/v1").api_key == "sk-mine"  # a key that is set is used


def _results(**changes):
    trial = {"id": "p0", "shape": "5x8", "page_tokens": 900, "chars": 400, "reply": "", "error": None,
             "lines": [{"label": "A", "kind": "hex", "exact": True, "cer": 0.0}], "gist": [True, False], "parsed": True}
    data = {"format": run.FORMAT, "model": "claude-sonnet-4-5", "api": "anthropic", "seed": 0, "started": "2026-12-03T00:00:00+00:00", "trials": [trial]}
    for key, value in changes.items():
        target, _, field = key.partition("__")
        if field:
            data["trials"][0][field] = value
        else:
            data[target] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (_results(model=None), "'model' must be a str, not None"),
        (_results(started=1733000000), "'started' must be a timestamp string, not 1733000000"),
        (_results(seed=True), "'seed' must be a int, not True"),
        (_results(api="claude"), "'api' must be one of anthropic"),
        (_results(trials=["p0", "p1"]), "trial 0 must be an object, not str"),
        (_results(trials__shape="7x7"), "trial 0: needs a string 'id' and a 'shape' glyphpack has, got 'p0' and '7x7'"),
        (_results(trials__page_tokens=float("inf")).replace("Infinity", "1e999"), "trial 0: 'page_tokens' must be a finite number, not inf"),
        (_results(trials__gist=["yes"]), "trial 0: needs a list of 'lines' and a list of true/false 'gist' answers"),
        (_results(trials__lines=[{"kind": "hex", "exact": "true", "cer": 0}]), "trial 0: every line needs a 'kind'"),
        ("[" * 100_000 + "]" * 100_000, "is not readable eval results (RecursionError"),
    ],
)
def test_a_damaged_results_file_is_named_with_what_is_wrong(tmp_path, capsys, content, problem):
    path = tmp_path / "results.json"
    path.write_text(content)
    assert cli_main(["eval", "--apply", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"glyphpack: error: {path}") and problem in err and "internal error" not in err


def test_a_server_that_is_down_is_named_with_what_to_check(tmp_path, monkeypatch, capsys):
    """Not "internal error (APIConnectionError)": the URL, and what to check."""
    from postgres_server import free_port

    port = free_port()  # a port nothing listens on
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = f"http://127.0.0.1:{port}/v1"
    args = ["eval", "--model", "gpt-5.4", "--api", "openai-chat", "--base-url", url, "--shapes", "5x8", "--per-shape", "1",
            "--out", str(tmp_path / "eval"), "--yes"]
    monkeypatch.setattr(run, "make_client", lambda api, base_url=None: __import__("openai").OpenAI(base_url=base_url, api_key="k", max_retries=0))
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert f"cannot reach {url} (APIConnectionError: Connection error.): check that the server is running and the URL" in err
    assert "internal error" not in err
