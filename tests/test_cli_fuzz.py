"""A fuzz test of the command line: every subcommand gets mutated real inputs (session
files, transcripts, pages, SQLite workspaces with flipped bytes, hostile ids and paths).

For every run: the exit code is 0, 1 or 2; no traceback escapes; nothing is written
outside the output the command names; no input file changes.

A seeded generator makes the cases, so a failure names its seed and replays exactly.
A run makes ``GLYPHPACK_FUZZ_CASES`` cases (10 by default, 300 in CI); a longer hunt:
``GLYPHPACK_FUZZ_CASES=5000 GLYPHPACK_FUZZ_SEED=7 python -m pytest tests/test_cli_fuzz.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import shutil
from pathlib import Path

import pytest

import glyphpack
from glyphpack._cli import main
from glyphpack._history.codec import history_to_json

DATA = Path(__file__).parent / "data" / "sessions"
CASES = int(os.environ.get("GLYPHPACK_FUZZ_CASES", "300" if os.environ.get("CI") else "6"))
FIRST_SEED = int(os.environ.get("GLYPHPACK_FUZZ_SEED", "0"))
BATCH = 20
MODELS = ("claude-sonnet-4-5", "gpt-5.4", "gemini-3-pro", "o3-mini", "no-such-model", "")
HOSTILE_IDS = ("c", "c2", "../x", "a\n", "", "x" * 300, "-rf", "a b", "\u00e9", "m", "zz")


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The unmutated inputs, as bytes."""
    history = glyphpack.generate_session(6_000, seed=5)
    page = glyphpack.render("fuzz page\nwith two lines", model="claude-sonnet-4-5")[0].png
    workspace = tmp_path_factory.mktemp("seed") / "ws"
    with glyphpack.Workspace(workspace) as ws:
        ws.save("c", "a", history, revision=0)
        tree = ws.tree  # the save recorded the history in the tree; add a branch beside it
        tree.branch("c", history[3].id)
        tree.append("c", glyphpack.Message("user", "another way", id="m-branch"))
    return {
        "history.json": json.dumps(history_to_json(history)).encode(),
        "transcript.json": (workspace / "transcripts" / "c" / "a.json").read_bytes(),
        "page.png": page,
        "text.txt": "plain text\twith a tab, \x1b[31mcolour\x1b[0m and \u4e2d\u6587\n".encode(),
        "tree.sqlite3": (workspace / "tree.sqlite3").read_bytes(),
        **{path.name: b"".join(path.read_bytes().splitlines(keepends=True)[:30]) for path in sorted(DATA.glob("*.jsonl"))},
    }


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One of: unchanged, flipped bytes, truncated, a JSON value of the wrong type, a key
    dropped, a lone surrogate, emptied, duplicated."""
    kind = rng.choice(("same", "flip", "truncate", "json", "json", "surrogate", "empty", "double"))
    if kind == "flip" and data:
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == "truncate" and data:
        return data[: rng.randrange(len(data))]
    if kind == "json":
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return data
        return json.dumps(_mutate_value(value, rng)).encode()
    if kind == "surrogate":
        return data.replace(b'"text": "', b'"text": "\\ud800', 1).replace(b'"text":"', b'"text":"\\udfff', 1)
    if kind == "empty":
        return b""
    if kind == "double":
        return data + data
    return data


def _mutate_value(value: object, rng: random.Random) -> object:
    """The same JSON value with one random node replaced or a key dropped."""
    path: list[object] = []
    node = value
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append(key)
        node = node[key]  # type: ignore[index]
    if not path:
        return rng.choice([None, 12, "text", [], {}, True])
    parent = value
    for key in path[:-1]:
        parent = parent[key]  # type: ignore[index]
    if isinstance(parent, dict) and rng.random() < 0.4:
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice([None, 12, -1, "text", [], {}, True, "\ud800", [{"type": "video"}]])  # type: ignore[index]
    return value


def command(rng: random.Random, files: dict[str, Path], out: Path) -> tuple[list[str], set[Path]]:
    """A random command line and the paths it may write."""
    history = files[rng.choice([k for k in files if k.endswith((".json", ".jsonl"))])]
    ws = files["ws"]
    conversation = rng.choice(HOSTILE_IDS)
    model = rng.choice(MODELS)
    out_choice = rng.choice([out, out / "sub", files["text.txt"], files["ws"], out / "missing" / "deeper"])
    choice = rng.choice(
        ("render", "read", "context", "shake", "compact", "tree", "branch", "fork", "export", "generate", "profiles")
    )
    if choice == "render":
        argv = ["render", str(files[rng.choice(["text.txt", "history.json", "page.png"])])]
        argv += rng.choice([[], ["--model", model]]) + rng.choice([[], ["--layout", "lines"], ["--shape", "unifont"]])
        argv += rng.choice([[], ["--page-size", rng.choice(["800x400", "4x4", "99999x8", "0x0", "200x100"])]])
        argv += rng.choice([[], ["--max-pages", str(rng.choice([0, 1, 5]))]]) + ["--out", str(out_choice)]
        return argv, {out_choice}
    if choice == "read":
        return ["read", str(files[rng.choice(["page.png", "text.txt", "tree.sqlite3"])])] + rng.choice([[], ["--shape", "6x13"]]), set()
    if choice == "context":
        return ["context", str(history), "--model", model], set()
    if choice in ("shake", "compact"):
        argv = [choice, str(history), "--model", model, "--out", str(out_choice)]
        if choice == "compact":
            argv += ["--budget", str(rng.choice([1, 500, 5_000, 100_000, -3]))]
        return argv + rng.choice([[], ["--protect-turns", str(rng.choice([0, 1, -1]))]]), {out_choice}
    if choice == "tree":
        return ["tree", str(ws)] + rng.choice([[], [conversation]]), set()
    if choice == "branch":
        return ["branch", str(ws), conversation, rng.choice(["m", "m-branch", "s5", "", "zz"])], {ws}
    if choice == "fork":
        return ["fork", str(ws), conversation] + rng.choice([[], ["--at", "s5"], ["--new", rng.choice(HOSTILE_IDS)]]), {ws}
    if choice == "export":
        target = out_choice / "c.md" if rng.random() < 0.5 else out_choice
        argv = ["export", str(ws), conversation, "--format", rng.choice(["md", "json"]), "--out", str(target)]
        return argv + rng.choice([[], ["--whole-tree"]]), {target}
    if choice == "generate":
        target = out_choice / "s.json" if rng.random() < 0.5 else out_choice
        return ["generate-session", str(target), "--chars", str(rng.choice([0, 100, 2000]))], {target}
    return ["profiles", "--shape", rng.choice(["5x8", "all"])], set()


def snapshot(root: Path) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir" for p in root.rglob("*")}


def allowed(path: Path, outputs: set[Path]) -> bool:
    return any(path == out or out in path.parents for out in outputs)


@pytest.mark.parametrize("batch", range(-(-CASES // BATCH)))
def test_cli_survives_mutated_input(batch, seeds, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for seed in range(FIRST_SEED + batch * BATCH, FIRST_SEED + min((batch + 1) * BATCH, CASES)):
        rng = random.Random(seed)
        case = tmp_path / f"case-{seed}"
        inputs = case / "in"
        inputs.mkdir(parents=True)
        files: dict[str, Path] = {}
        for name, data in seeds.items():
            if name == "tree.sqlite3":
                continue
            files[name] = inputs / name
            files[name].write_bytes(mutate(data, rng))
        files["ws"] = inputs / "ws"
        files["ws"].mkdir()
        files["tree.sqlite3"] = files["ws"] / "tree.sqlite3"
        (files["ws"] / "tree.sqlite3").write_bytes(mutate(seeds["tree.sqlite3"], rng) if rng.random() < 0.5 else seeds["tree.sqlite3"])
        out = case / "out"
        argv, outputs = command(rng, files, out)
        before = snapshot(case)
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(argv)
            except SystemExit as exit:  # argparse refusing an argument
                code = exit.code
        err = stderr.getvalue()
        where = f"seed {seed}: glyphpack {' '.join(argv)!r}\n{err}"
        assert code in (0, 1, 2), where
        assert "Traceback" not in err and "internal error" not in err, where
        after = snapshot(case)
        changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
        # SQLite's own temporary files may come and go beside the database.
        changed = {p for p in changed if not p.name.endswith(("-wal", "-shm", "-journal"))}
        assert all(allowed(p, outputs) for p in changed), f"{where}\nwrote outside its outputs: {sorted(changed)}"
        shutil.rmtree(case)
