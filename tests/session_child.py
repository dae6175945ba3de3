"""A harness process for the kill-and-resume test: runs the example agent's loop against
the fake Anthropic server until the script's last answer, resuming whatever an earlier,
killed run left. Prints a line as each request reaches the fake model and "done" at the end.

Usage: python session_child.py WORKSPACE PROJECT_DIR TURNS
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import agent  # examples/agent.py

import glyphpack
from glyphpack.testing.fake import FakeModel, Turn


def main() -> None:
    workspace, root, turns = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    script = [Turn(text=f"reading {n}", calls=(("read_file", {"path": f"mod_{n:02d}.py"}),)) for n in range(turns)]
    script.append(Turn(text="finished"))
    with glyphpack.open_session(workspace, "task", "coder", model="claude-sonnet-4-5", system=agent.SYSTEM, context_window=30_000) as s:
        if s.state == "empty":
            s.add_user("Read every module.")
        elif s.state == "answered":
            print("done", flush=True)
            return
        def answering(number: int) -> None:  # the parent times its kill from these lines
            print("request", number, flush=True)
            time.sleep(0.01)  # a model takes time

        fake = FakeModel(script, on_request=answering)
        fake.answered = sum(1 for m in s.messages if m.role == "assistant")  # the model's place in its script
        print("resumed", len(s.messages), flush=True)
        agent.run(s, fake.client("anthropic"), "anthropic", root, max_turns=turns + 5)
    print("done", flush=True)


if __name__ == "__main__":
    main()
