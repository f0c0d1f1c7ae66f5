"""The webhook's facts are rebuilt a chunk at a time with the event loop left to reviews for
``pause`` after each chunk (``LiveAdmissionState.rebuild``), and come out as one build would.

No API server here: the pod informer's store is filled directly with compact pods, as its watch
would fill it (the seam tests/unit/test_admission_owner.py uses)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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


def test_rebuilds_filling_their_lists_in_place_see_every_change_a_fresh_build_sees() -> None:
    """Each rebuild hands the tally the store's keys and pods in one of two lists filled in turn;
    the tally compares them with the last pass's: pods made unready, replaced, deleted and added
    between rebuilds, and a rebuild cancelled half way, still come out as one build of the store
    would."""
    state = _state()
    store = state.view.pods.store

    def fresh() -> admission_facts.Facts:
        workloads, owners = state.view.workloads()
        return admission_facts.FactsBuilder(
            workloads=list(workloads), budgets=[], owners=owners, pol=state.policy()
        ).build(list(store.values()))

    async def cancelled_half_way() -> None:
        task = asyncio.create_task(state.rebuild())
        await asyncio.sleep(PAUSE * 2.5)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def run() -> None:
        await state.rebuild()
        for step in range(6):
            for i in range(step, PODS, 7):  # a different few each time
                key = f"web/db-{i}"
                if key in store:
                    store[key] = dataclasses.replace(store[key], ready=not store[key].ready)
            del store[f"web/db-{step}"]
            added = cluster.Pod("web", f"new-{step}", "n1", workload=store["web/db-10"].workload)
            store[added.key] = dataclasses.replace(added, uid=f"uid-new-{step}")
            if step == 3:
                await cancelled_half_way()
            await state.rebuild()
            assert state.facts() == fresh(), step

    asyncio.run(run())
