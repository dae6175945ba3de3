"""The four framework examples of docs/frameworks.md, run as written in a fresh process,
each against a fake provider on 127.0.0.1 (its base URL set in the environment, as
each client reads it): the example prints the model's answer, the request reached the
fake, and the workspace holds the conversation."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import glyphpack
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn

DOCS = Path(__file__).resolve().parent.parent / "docs" / "frameworks.md"
EXAMPLES = dict(re.findall(r"^## (.+?)\n.*?```python\n(.*?)```", DOCS.read_text(), flags=re.S | re.M))
#: Each example's framework -> (module it needs, the environment pointing its client at the fake).
ENVIRONMENT = {
    "OpenAI Agents SDK": ("agents", lambda url: {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test", "OPENAI_AGENTS_DISABLE_TRACING": "1"}),
    "LangChain": ("langchain", lambda url: {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test"}),
    "Pydantic AI": ("pydantic_ai", lambda url: {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test"}),
    "Google ADK": ("google.adk", lambda url: {"GOOGLE_GEMINI_BASE_URL": url, "GOOGLE_API_KEY": "test"}),
}


def test_every_framework_section_has_one_example():
    assert sorted(EXAMPLES) == sorted(ENVIRONMENT)


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(ENVIRONMENT))
def test_the_example_runs_as_written(tmp_path, framework):
    module, environment = ENVIRONMENT[framework]
    pytest.importorskip(module)
    fake = FakeModel([Turn(text="The parser is in parse.py.")])
    with FakeUpstream(fake) as upstream:
        env = {**os.environ, **environment(upstream.url)}
        done = subprocess.run([sys.executable, "-c", EXAMPLES[framework]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "The parser is in parse.py."
    assert fake.statuses == [200]
    with glyphpack.Workspace(tmp_path / "runs" / "ws") as workspace:
        (conversation,) = workspace.tree.conversations()
        path = workspace.tree.path(conversation.id)
    assert [m.role for m in path if m.role != "system"] == ["user", "assistant"]
    assert path[-1].text == "The parser is in parse.py."
