"""Running a scenario: once without graceguard and once with it, on the same simulated clock.

A discrete-event loop: at each instant the world advances (pods start, finish, exit, are killed;
nodes go), the actors act on what is due, and, with graceguard, the engine reconciles and its
actions are carried out; this repeats until nothing changes at that instant. The clock then jumps
to the next instant anything is due: a scenario event, a pod's work done or grace period over, an
actor's timer, the engine's ``next_wakeup``. A run ends when nothing is left in flight (no actor
with pending work, no open request, no pod stopping or waiting to start), or at the horizon.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.sim import actors
from graceguard.sim.admission import SimAdmission, SimWebhook
from graceguard.sim.cluster import Event, SimCluster
from graceguard.sim.controller import Controller, Violation
from graceguard.sim.eventloop import EventLoop
from graceguard.sim.ledger import MemoryLedger
from graceguard.sim.scenario import Scenario
from graceguard.sim.world import Mode, World
from graceguard.webhook import service

MAX_STEPS = 100_000
MAX_SETTLE = 64
"""Rounds at one instant before the clock moves on regardless (a guard, never reached in
practice: each round must change something)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    mode: Mode
    world: World
    end: dt.datetime
    truncated: bool
    """Stopped at the horizon (or the step limit) with something still in flight."""
    steps: int
    reconciles: int = 0
    violations: tuple[Violation, ...] = ()
    events: tuple[Event, ...] = ()
    """The events graceguard posted (with graceguard)."""
    ledger: MemoryLedger | None = None
    """What graceguard recorded (with graceguard): its evictions and the webhook's refusals."""


@dataclasses.dataclass(frozen=True, slots=True)
class ScenarioRun:
    scenario: Scenario
    without: Run
    guarded: Run

    @property
    def end(self) -> dt.datetime:
        return max(self.without.end, self.guarded.end)


def run(scenario: Scenario) -> ScenarioRun:
    return ScenarioRun(scenario, run_mode(scenario, Mode.WITHOUT), run_mode(scenario, Mode.WITH))


def run_mode(scenario: Scenario, mode: Mode) -> Run:
    world = World(scenario, mode)
    loop = EventLoop()
    try:
        return _run(scenario, mode, world, loop)
    finally:
        loop.close()


def install_graceguard(world: World, loop: EventLoop) -> Controller:
    """graceguard's controller and its eviction webhook, installed in ``world``."""
    pol = world.scenario.policy
    ledger = MemoryLedger()
    cluster = SimCluster(world)
    state = SimAdmission(world, pol)
    webhook = service.AdmissionService(
        state=state,
        events=cluster,
        denials=ledger,
        opener=state,
        sightings=state,
        trusted=frozenset(),
        failure_policy=service.FailurePolicy.FAIL,
        clock=lambda: world.now,
    )
    world.api.webhook = SimWebhook(world, webhook, loop)
    return Controller(world, pol, cluster=cluster, ledger=ledger, loop=loop)


def _run(scenario: Scenario, mode: Mode, world: World, loop: EventLoop) -> Run:  # noqa: C901 - the discrete-event loop, whole in one place
    controller = install_graceguard(world, loop) if mode is Mode.WITH else None
    webhook = world.api.webhook if isinstance(world.api.webhook, SimWebhook) else None
    cast = [actors.make(spec, world, mode) for spec in scenario.actors]
    horizon = scenario.start + scenario.horizon
    now = scenario.start
    steps = 0
    truncated = False
    while True:
        for _ in range(MAX_SETTLE):
            changed = world.advance(now)
            for actor in cast:
                changed = actor.poll(now) or changed
            if controller is not None:
                changed = controller.step(now) or changed
            if webhook is not None:
                changed = webhook.release(now) or changed
            if not changed:
                break
        if world.settled(now) and not any(a.busy() for a in cast):
            break
        candidates = [world.next_time(now), *(a.next_time(now) for a in cast)]
        if controller is not None:
            candidates.append(controller.wake)
        if webhook is not None:
            candidates.append(webhook.next_release)
        later = [t for t in candidates if t is not None and t > now]
        if not later:
            break  # waiting for something that never comes (e.g. a node no one may remove)
        steps += 1
        if min(later) > horizon:
            truncated, now = True, horizon
            break
        if steps > MAX_STEPS:
            truncated = True
            break
        now = min(later)
    return Run(
        mode=mode,
        world=world,
        end=now,
        truncated=truncated,
        steps=steps,
        reconciles=controller.reconciles if controller else 0,
        violations=tuple(controller.violations) if controller else (),
        events=tuple(controller.cluster.events) if controller else (),
        ledger=controller.ledger if controller else None,
    )
