"""The resume half of the fleet benchmark, in a fresh process: open a session of a
workspace and build its next request.

Usage: python fleet_resume.py WORKSPACE CONVERSATION
Prints one JSON line: {"import": s, "driver": s, "open": s, "request": s, "messages": n}
("driver": importing psycopg and its pool, for a PostgreSQL workspace; 0 for a folder).
"""

import json
import sys
import time

started = time.perf_counter()
import glyphpack  # noqa: E402

imported = time.perf_counter()


def main() -> None:
    location, conversation = sys.argv[1], sys.argv[2]
    before_driver = time.perf_counter()
    if location.startswith("postgresql://"):
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    driver = time.perf_counter() - before_driver
    opening = time.perf_counter()
    with glyphpack.open_session(location, conversation, "agent", model="claude-sonnet-4-5", context_window=2_000_000) as s:
        opened = time.perf_counter()
        s.request("anthropic")
        built = time.perf_counter()
        print(json.dumps({
            "import": imported - started, "driver": driver, "open": opened - opening, "request": built - opened,
            "messages": len(s.messages),
        }))


if __name__ == "__main__":
    main()
