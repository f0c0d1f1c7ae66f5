"""``admission_facts.FactsTally`` keeps the webhook's facts up to date pass after pass over a
store whose pods, workloads and budgets change a few at a time, and after every pass they are the
facts a fresh build of the same store makes (``FactsBuilder``) and those worked out here pod by
pod.

The store is a dictionary changed as an informer changes its store (a changed object is a new
value under its key): random rounds of pods turning Ready or not, deleted, created, joining and
leaving gangs, moving between ReplicaSets and workloads, ReplicaSets adopted by a Deployment,
budgets and workloads replaced, the policy's default floor changed."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Generator, Mapping

from graceguard.domain import annotations as ann
from graceguard.domain import budgets as domain_budgets
from graceguard.domain import cluster, gangs, intorpercent, policy
from graceguard.engine import admission_facts

STARTED = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
NAMESPACES = ("a", "b")


def _workload(i: int) -> cluster.WorkloadRef:
    kinds = ("ReplicaSet", "StatefulSet", "Deployment")
    return cluster.WorkloadRef(kinds[i % 3], NAMESPACES[i % 2], f"w{i}")


def _pod(rng: random.Random, i: int) -> cluster.Pod:
    labels: dict[str, str] = {}
    if rng.random() < 0.2:
        labels[gangs.GROUP] = f"g{rng.randrange(3)}"
    return cluster.Pod(
        NAMESPACES[i % 2],
        f"p{i}-{rng.randrange(1000)}",
        "n1",
        start_time=STARTED,
        labels=labels,
        workload=_workload(rng.randrange(8)) if rng.random() < 0.9 else None,
        ready=rng.random() < 0.7,
        phase=rng.choice((cluster.PodPhase.RUNNING, cluster.PodPhase.PENDING)),
        deleting_since=STARTED if rng.random() < 0.05 else None,
        uid=f"uid-{i}-{rng.randrange(1_000_000)}",
    )


def _workloads(rng: random.Random) -> list[cluster.Workload]:
    found = []
    for i in range(8):
        ref = _workload(i)
        annotations = {ann.MIN_AVAILABLE: str(rng.randrange(3))} if rng.random() < 0.5 else {}
        if ref.kind != "ReplicaSet":
            found.append(cluster.Workload(ref, rng.randrange(1, 6), annotations))
    return found


def _owners(rng: random.Random) -> dict[str, cluster.WorkloadRef]:
    """Some ReplicaSets owned by Deployment w2 (the rest count on their own)."""
    return {_workload(i).key: _workload(2) for i in range(8) if i % 3 == 0 and rng.random() < 0.5}


def _budgets(rng: random.Random) -> list[cluster.PodDisruptionBudget]:
    return [
        cluster.PodDisruptionBudget(
            ns, f"pdb{i}", cluster.LabelSelector(), intorpercent.IntOrPercent(1)
        )
        for i, ns in enumerate(NAMESPACES)
        if rng.random() < 0.5
    ]


def _comparable(facts: admission_facts.Facts) -> admission_facts.Facts:
    """A gang's members in no order (the tally keeps a changed member last)."""
    members = {
        key: tuple(sorted(pods, key=lambda p: p.uid)) for key, pods in facts.gang_members.items()
    }
    return dataclasses.replace(facts, counted=frozenset(facts.counted), gang_members=members)


def _fresh(
    store: Mapping[str, cluster.Pod],
    workloads: list[cluster.Workload],
    budgets: list[cluster.PodDisruptionBudget],
    owners: dict[str, cluster.WorkloadRef],
    pol: policy.Policy,
) -> admission_facts.Facts:
    """The facts as the webhook reads them, worked out here pod by pod (not by a tally)."""
    ready: dict[str, int] = {}
    coming: dict[str, int] = {}
    members: dict[str, list[cluster.Pod]] = {}
    for p in store.values():
        gang = gangs.gang_of(p)
        if gang is not None:
            members.setdefault(gang.key, []).append(p)
        if p.workload is None:
            continue
        owner = cluster.owned_by(p.workload, owners).key
        if p.healthy:
            ready[owner] = ready.get(owner, 0) + 1
        elif not p.terminating and not p.finished:
            coming[owner] = coming.get(owner, 0) + 1
    floors = {}
    for w in workloads:
        floor, _ = domain_budgets.workload_floor(
            w, default=pol.default_min_available, current_healthy=ready.get(w.ref.key, 0)
        )
        if floor is not None:
            floors[w.ref.key] = floor
    return admission_facts.Facts(
        floors=floors,
        pdbs_by_namespace={
            ns: tuple(b for b in budgets if b.namespace == ns)
            for ns in {b.namespace for b in budgets}
        },
        counted=frozenset(p.uid for p in store.values() if p.workload is not None and p.healthy),
        gang_members={key: tuple(found) for key, found in members.items()},
        ready=ready,
        coming=coming,
        deployments={w.ref.key: w for w in workloads if w.ref.kind == "Deployment"},
        namespaces={"a": {}},
    )


def test_each_pass_makes_the_facts_a_fresh_build_makes() -> None:
    rng = random.Random(22)
    store = {p.key: p for p in (_pod(rng, i) for i in range(300))}
    workloads, budgets, owners = _workloads(rng), _budgets(rng), _owners(rng)
    pol = policy.DEFAULT
    tally = admission_facts.FactsTally()
    changed_facts = 0
    yielded = 0
    for _round in range(60):
        before = tally.facts()
        for _ in range(rng.randrange(0, 30)):
            key = rng.choice(list(store))
            move = rng.random()
            if move < 0.3:
                del store[key]
            elif move < 0.5:
                fresh = _pod(rng, rng.randrange(10_000))
                store[fresh.key] = fresh
            elif move < 0.9:
                p = store[key]
                store[key] = dataclasses.replace(
                    p,
                    ready=not p.ready,
                    workload=_workload(rng.randrange(8)) if rng.random() < 0.3 else p.workload,
                    labels={} if p.labels else {gangs.GROUP: "g0"},
                )
            else:
                store[key] = dataclasses.replace(store[key])  # a new object, the same pod
        if rng.random() < 0.2:
            workloads = _workloads(rng)
        if rng.random() < 0.2:
            owners = _owners(rng)
        if rng.random() < 0.2:
            budgets = _budgets(rng)
        if rng.random() < 0.1:
            pol = dataclasses.replace(
                pol, default_min_available=intorpercent.IntOrPercent(rng.randrange(4))
            )
        steps = list(
            tally.steps(
                keys=list(store),
                pods=list(store.values()),
                workloads=workloads,
                budgets=budgets,
                owners=owners,
                pol=pol,
                namespaces={"a": {}},
                chunk=7,
            )
        )
        yielded += len(steps)
        got = tally.facts()
        want = _comparable(_fresh(store, workloads, budgets, owners, pol))
        assert _comparable(got) == want
        built = admission_facts.FactsBuilder(
            workloads=workloads, budgets=budgets, owners=owners, pol=pol, namespaces={"a": {}}
        ).build(list(store.values()))
        assert _comparable(built) == want
        changed_facts += got != before
    assert changed_facts > 30  # the rounds did change the facts
    assert yielded > 60  # in chunks (of 7 pods' work)


def test_a_pass_over_an_unchanged_store_keeps_the_facts() -> None:
    rng = random.Random(7)
    store = {p.key: p for p in (_pod(rng, i) for i in range(100))}
    workloads, budgets, owners = _workloads(rng), _budgets(rng), _owners(rng)
    tally = admission_facts.FactsTally()

    def run() -> admission_facts.Facts:
        for _ in tally.steps(
            keys=list(store),
            pods=list(store.values()),
            workloads=tuple(workloads),  # a new sequence of the same objects, as the view makes
            budgets=list(budgets),
            owners=dict(owners),
            pol=policy.DEFAULT,
            namespaces={"a": {}},
            chunk=10,
        ):
            pass
        return tally.facts()

    first = run()
    again = run()
    assert again.floors is first.floors
    assert again.counted is first.counted
    assert again.pdbs_by_namespace is first.pdbs_by_namespace
    key = next(k for k, p in store.items() if p.healthy and p.workload is not None)
    store[key] = dataclasses.replace(store[key], ready=False)
    after = run()
    assert store[key].uid not in after.counted
    assert _comparable(after) == _comparable(
        _fresh(store, workloads, budgets, owners, policy.DEFAULT)
    )


def test_a_store_in_another_order_or_a_pass_left_half_done_costs_work_not_correctness() -> None:
    """The pass compares its lists with the last pass's by position (a store keeps the order of
    the keys that stay); a store rebuilt in another order, or a pass abandoned between two
    chunks (its task cancelled), still ends in the facts of the store."""
    rng = random.Random(3)
    store = {p.key: p for p in (_pod(rng, i) for i in range(200))}
    workloads, budgets, owners = _workloads(rng), _budgets(rng), _owners(rng)
    tally = admission_facts.FactsTally()

    def steps() -> Generator[None, None, None]:
        return tally.steps(
            keys=list(store),
            pods=list(store.values()),
            workloads=workloads,
            budgets=budgets,
            owners=owners,
            pol=policy.DEFAULT,
            namespaces={"a": {}},
            chunk=5,
        )

    def want() -> admission_facts.Facts:
        return _comparable(_fresh(store, workloads, budgets, owners, policy.DEFAULT))

    for _ in steps():
        pass
    assert _comparable(tally.facts()) == want()
    shuffled = list(store.items())
    rng.shuffle(shuffled)
    store = {key: dataclasses.replace(p, ready=not p.ready) for key, p in shuffled[:150]}
    for _ in steps():
        pass
    assert _comparable(tally.facts()) == want()
    for key in list(store)[:40]:
        store[key] = dataclasses.replace(store[key], ready=not store[key].ready)
    half = steps()
    next(half)
    next(half)
    half.close()  # abandoned after two chunks
    for _ in steps():
        pass
    assert _comparable(tally.facts()) == want()
