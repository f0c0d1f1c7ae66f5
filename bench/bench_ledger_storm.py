"""ledger_storm: the webhook's refusal records of a takeover storm in a SQLite ledger (issue 22).

A takeover of 20 nodes x 30 pods makes 600 refusals at once, and the webhook records each in its
ledger (``adapters.ledger``, ``Denials.record_denial``) before it posts the pod's
``EvictionBlocked``. This bench writes ``RECORDS`` such records at once (``asyncio.gather``, as
the webhook's writers do) into a fresh SQLite ledger, ``ROUNDS`` times, and the same number one
after another, and prints the best wall and CPU time of each (in this process, which is also the
one aiosqlite's thread runs in), with the CPU per record and the ratio of the two. A record
written alone takes a transaction of its own; records written at once go through the group
commit (``database.Database.insert_new``): a few multi-row INSERTs in one transaction.

No control plane; a few seconds. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
import tempfile
import time

from graceguard.adapters.ledger import Ledger
from graceguard.domain import ledger

RECORDS, ROUNDS = 600, 5
NOW = dt.datetime(2026, 11, 21, 3, 47, 13, tzinfo=dt.UTC)
EVERY = dt.timedelta(minutes=10)


def _refusal(run: str, i: int) -> ledger.DenialRecord:
    """A takeover's refusal as the webhook records it (``AdmissionService._record``)."""
    return ledger.DenialRecord(
        namespace="batch",
        pod=f"train-{run}-{i}",
        uid=f"uid-{run}-{i}",
        node=f"node-{i // 30:02d}",
        source="cluster-autoscaler",
        requester="system:serviceaccount:kube-system:cluster-autoscaler",
        rule="takeover",
        message=(
            "graceguard takes this eviction over: graceguard evicts it itself at "
            "2026-11-21T04:00:00Z, with notice and its own grace period of 7200s"
        ),
        until=NOW + dt.timedelta(hours=1),
        at=NOW,
        period=ledger.reporting_period(NOW, EVERY),
    )


async def _timed(led: Ledger, run: str, *, at_once: bool) -> tuple[float, float]:
    """Wall and CPU seconds to write ``RECORDS`` new refusals."""
    records = [_refusal(run, i) for i in range(RECORDS)]
    cpu, wall = time.process_time(), time.perf_counter()
    if at_once:
        answers = await asyncio.gather(*(led.denials.record_denial(r) for r in records))
    else:
        answers = [await led.denials.record_denial(r) for r in records]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if not all(answers):
        raise RuntimeError(f"{run}: a new refusal was answered as already recorded")
    return wall, cpu


async def _measure() -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="gg-bench-ledger-") as tmp:
        url = f"sqlite+aiosqlite:///{pathlib.Path(tmp) / 'ledger.db'}"
        async with await Ledger.open(url) as led:
            await _timed(led, "warm", at_once=True)
            found: dict[str, dict[str, float]] = {}
            for mode in ("at_once", "one_by_one"):
                runs = [
                    await _timed(led, f"{mode}-{n}", at_once=mode == "at_once")
                    for n in range(ROUNDS)
                ]
                wall, cpu = min(w for w, _ in runs), min(c for _, c in runs)
                found[mode] = {
                    "wall_ms": round(wall * 1000, 1),
                    "cpu_ms": round(cpu * 1000, 1),
                    "cpu_us_per_record": round(cpu / RECORDS * 1e6, 1),
                }
            return found


def main() -> None:
    found = asyncio.run(_measure())
    print(
        json.dumps(
            {
                "bench": "ledger_storm",
                "records": RECORDS,
                "rounds": ROUNDS,
                **found,
                "one_by_one_over_at_once_cpu": round(
                    found["one_by_one"]["cpu_ms"] / found["at_once"]["cpu_ms"], 2
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
