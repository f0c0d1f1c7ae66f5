"""The webhook's facts are rebuilt a chunk at a time with the event loop left to reviews for
``pause`` after each chunk (``LiveAdmissionState.rebuild``), and come out as one build would.

No API server here: the pod informer's store is filled directly with compact pods, as its watch
would fill it (the seam tests/unit/test_admission_owner.py uses)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from graceguard.adapters.kube import admission_state
from graceguard.domain import cluster
from graceguard.engine import admission_facts

PODS, CHUNK, PAUSE = 1000, 100, 0.01


def _state() -> admission_state.LiveAdmissionState:
    state = admission_state.LiveAdmissionState(cast(Any, None), chunk=CHUNK, pause=PAUSE)
    workload = cluster.WorkloadRef("StatefulSet", "web", "db")
    for i in range(PODS):
        pod = cluster.Pod("web", f"db-{i}", "n1", workload=workload, uid=f"uid-{i}")
        state.view.pods.store[pod.key] = pod
    return state


def test_a_rebuild_leaves_the_loop_free_between_its_chunks_and_builds_the_same_facts() -> None:
    state = _state()
    turns = 0

    async def reviews() -> None:  # what else the loop runs meanwhile
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    async def run() -> float:
        other = asyncio.create_task(reviews())
        started = time.monotonic()
        await state.rebuild()
        took = time.monotonic() - started
        other.cancel()
        return took

    took = asyncio.run(run())
    chunks = PODS // CHUNK
    assert took >= chunks * PAUSE  # a pause after every chunk, not a bare turn of the loop
    assert turns >= chunks  # the other task ran between the chunks
    pods = list(state.view.pods.store.values())
    workloads, owners = state.view.workloads()
    whole = admission_facts.FactsBuilder(
        workloads=list(workloads), budgets=[], owners=owners, pol=state.policy()
    ).build(pods)
    assert state.facts() == whole
    assert len(state.facts().counted) == PODS
