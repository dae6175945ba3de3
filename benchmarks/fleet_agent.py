"""One agent of the fleet benchmark, in a process of its own (a host): saves TURNS turns
of a conversation of its own, timing each save.

Usage: python fleet_agent.py WORKSPACE CONVERSATION TURNS GO_FILE
Prints "ready" when imported and opened, waits for GO_FILE, then one JSON line:
{"start": t0, "end": t1, "latencies": [seconds per save]} (wall-clock times).
"""

import json
import random
import sys
import time
from pathlib import Path

from glyphpack import Message, Text, ToolCall, ToolResult, Workspace

WORDS = "the parser reads each token and the tree keeps every message with its parent so nothing is lost".split()


def text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    length = -1
    while length < chars:
        out.append(rng.choice(WORDS))
        length += len(out[-1]) + 1
    return " ".join(out)


def turn(rng: random.Random, conversation: str, n: int) -> list[Message]:
    """A turn as agents make them: a request, a tool call, its result (~2 KB), an answer."""
    call = f"{conversation}-call-{n}"
    return [
        Message("user", text(rng, 300), id=f"{conversation}-u{n}"),
        Message("assistant", (ToolCall(call, "read_file", {"path": f"src/mod_{n}.py"}),), id=f"{conversation}-c{n}"),
        Message("user", (ToolResult(call, (Text(text(rng, 2_000)),)),), id=f"{conversation}-r{n}"),
        Message("assistant", text(rng, 600), id=f"{conversation}-a{n}"),
    ]


def main() -> None:
    location, conversation, turns, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    rng = random.Random(conversation)
    with Workspace(location, pool_size=1) as workspace:
        loaded = workspace.load(conversation, "agent")
        messages, revision = list(loaded.messages), loaded.revision
        turns_made = [turn(rng, conversation, n) for n in range(turns)]  # made before the clock starts
        print("ready", flush=True)
        while not go.exists():
            time.sleep(0.002)
        latencies = []
        start = time.time()
        for made in turns_made:
            messages += made
            began = time.perf_counter()
            revision = workspace.save(conversation, "agent", messages, revision=revision).revision
            latencies.append(time.perf_counter() - began)
        print(json.dumps({"start": start, "end": time.time(), "latencies": latencies}), flush=True)


if __name__ == "__main__":
    main()
