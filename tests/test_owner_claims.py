"""A conversation's first claim is compared and set in the store: of two proxies (threads,
or processes) claiming one name at once, exactly one holds it, in both stores."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from glyphpack import Workspace

CLAIMANTS = 6


def _owner(n: int) -> dict[str, str]:
    return {"salt": f"salt-{n}", "digest": f"digest-{n}"}


def _claim_in_a_process(location: str, conversation: str, n: int, ready: multiprocessing.Queue, start: multiprocessing.synchronize.Event,
                        results: multiprocessing.Queue) -> None:
    with Workspace(location) as workspace:
        ready.put(n)
        start.wait()
        results.put((n, workspace.claim_owner(conversation, _owner(n))))


def test_racing_threads_claim_a_name_once(workspace_location: str) -> None:
    barrier = threading.Barrier(CLAIMANTS)
    held: dict[int, dict[str, str]] = {}
    with Workspace(workspace_location) as workspace:

        def claim(n: int) -> None:
            barrier.wait()
            held[n] = workspace.claim_owner("shared-name", _owner(n))

        threads = [threading.Thread(target=claim, args=(n,)) for n in range(CLAIMANTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = {json for json in (tuple(sorted(owner.items())) for owner in held.values())}
        assert len(held) == CLAIMANTS and len(winners) == 1  # every claimant is told the one winner
        assert workspace.owner("shared-name") == dict(next(iter(winners)))
        assert workspace.claim_owner("shared-name", _owner(99)) == workspace.owner("shared-name")  # a later claim changes nothing


@pytest.mark.slow  # four spawned processes (about 1.3 s over both stores); the threads' race runs in the default run
def test_racing_processes_claim_a_name_once(workspace_location: str) -> None:
    context = multiprocessing.get_context("spawn")
    ready, start, results = context.Queue(), context.Event(), context.Queue()
    Workspace(workspace_location).close()  # made before the race
    processes = [context.Process(target=_claim_in_a_process, args=(workspace_location, "raced", n, ready, start, results)) for n in range(4)]
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=60)  # every process has its workspace open: then all claim at once
    start.set()
    told = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert {tuple(sorted(owner.items())) for _, owner in told} == {tuple(sorted(told[0][1].items()))}
    with Workspace(workspace_location) as workspace:
        assert workspace.owner("raced") == told[0][1] and told[0][1] in [_owner(n) for n in range(4)]


def test_a_claim_keeps_what_else_the_record_holds_and_set_owner_still_replaces(tmp_path) -> None:
    with Workspace(tmp_path / "ws") as workspace:
        workspace._update_measured("c", "main", source="/x/session.jsonl")
        assert workspace.claim_owner("c", _owner(1)) == _owner(1)
        assert workspace.source("c") == "/x/session.jsonl"
        workspace.set_owner("c", _owner(2))  # a deliberate hand-over
        assert workspace.owner("c") == _owner(2) == workspace.claim_owner("c", _owner(3))
