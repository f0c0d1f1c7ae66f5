"""The disruption sources of a scenario, one module each; ``make`` builds one from its spec."""

from __future__ import annotations

from graceguard.sim.actors.asg import AutoScalingGroup
from graceguard.sim.actors.base import Actor
from graceguard.sim.actors.cluster_autoscaler import ClusterAutoscaler
from graceguard.sim.actors.eks_nodegroup import EksNodeGroup
from graceguard.sim.actors.expiry import Expiry
from graceguard.sim.actors.shutdown import NodeShutdown
from graceguard.sim.actors.spot import Spot
from graceguard.sim.actors.upgrade import Upgrade
from graceguard.sim.actors.workload_scale_in import WorkloadScaleIn
from graceguard.sim.scenario import ActorSpec
from graceguard.sim.world import Mode, World

ACTORS: dict[str, type[Actor]] = {
    "cluster-autoscaler": ClusterAutoscaler,
    "asg": AutoScalingGroup,
    "eks-nodegroup": EksNodeGroup,
    "spot": Spot,
    "node-shutdown": NodeShutdown,
    "upgrade": Upgrade,
    "expiry": Expiry,
    "workload-scale-in": WorkloadScaleIn,
}


def make(spec: ActorSpec, world: World, mode: Mode) -> Actor:
    return ACTORS[spec.kind](spec, world, mode)
