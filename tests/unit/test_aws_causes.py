"""Who made Auto Scaling terminate an instance: ``domain.interruptions.scaling_source`` on the
``Cause`` sentences ``DescribeScalingActivities`` returns, in AWS's wording (the forms its User
Guide and knowledge-center articles show: "Why did Amazon EC2 Auto Scaling terminate an
instance?", "Why did my Auto Scaling group scale down?", "View the reason for health check
failures"), with this test's own times and sizes."""

from __future__ import annotations

import pytest

from graceguard.domain import interruptions as intr

AT = "At 2026-11-21T02:00:05Z"

CASES = [
    (
        f"{AT} a user request update of AutoScalingGroup constraints to min: 0, max: 3, "
        "desired: 1 changing the desired capacity from 2 to 1.  At 2026-11-21T02:00:10Z an "
        "instance was taken out of service in response to a difference between desired and "
        "actual capacity, shrinking the capacity from 2 to 1.  At 2026-11-21T02:00:10Z instance "
        "i-0abc12345678 was selected for termination.",
        intr.SCALE_IN_SOURCE,
    ),
    (
        f"{AT} a user request explicitly set group desired capacity changing the desired "
        "capacity from 3 to 2.  At 2026-11-21T02:00:09Z an instance was taken out of service in "
        "response to a difference between desired and actual capacity, shrinking the capacity "
        "from 3 to 2.",
        intr.SCALE_IN_SOURCE,
    ),
    (
        f"{AT} a monitor alarm web-low-cpu in state ALARM triggered policy scale-in changing "
        "the desired capacity from 4 to 3.",
        intr.SCALE_IN_SOURCE,
    ),
    (
        f"{AT} a scheduled action update of AutoScalingGroup constraints to min: 1, max: 5, "
        "desired: 2 changing the desired capacity from 3 to 2.",
        intr.SCALE_IN_SOURCE,
    ),
    (
        f"{AT} an instance was taken out of service in response to an AZ rebalancing.",
        intr.AZ_REBALANCE_SOURCE,
    ),
    (
        f"{AT} instances were launched to balance instances in zones us-east-1a us-east-1b "
        "with other zones resulting in more than desired number of instances in the group.  "
        f"{AT} an instance was taken out of service in response to a difference between desired "
        "and actual capacity, shrinking the capacity from 4 to 3.",
        intr.AZ_REBALANCE_SOURCE,
    ),
    (
        f"{AT} an instance was taken out of service in response to an instance refresh.  "
        f"{AT} instance i-0abc12345678 was selected for termination.",
        intr.INSTANCE_REFRESH_SOURCE,
    ),
    (
        f"{AT} an instance was taken out of service in response to an EC2 health check "
        "indicating it has been terminated or stopped.",
        intr.HEALTH_CHECK_SOURCE,
    ),
    (
        f"{AT} an instance was taken out of service in response to an EC2 instance status "
        "checks failure.",
        intr.HEALTH_CHECK_SOURCE,
    ),
    (
        f"{AT} an instance was taken out of service in response to a user health-check.",
        intr.HEALTH_CHECK_SOURCE,
    ),
    (
        f"{AT} an instance was taken out of service in response to an ELB system health check "
        "failure.",
        intr.HEALTH_CHECK_SOURCE,
    ),
    (
        f"{AT} an instance was taken out of service in response to an EC2 instance rebalance "
        "recommendation.",
        intr.CAPACITY_REBALANCE_SOURCE,
    ),
    (
        f"{AT} an instance was taken out of service in response to a user request.",
        intr.LIFECYCLE_SOURCE,
    ),
    ("", intr.LIFECYCLE_SOURCE),
    ("something AWS has never said", intr.LIFECYCLE_SOURCE),
]


@pytest.mark.parametrize(("cause", "source"), CASES)
def test_aws_cause_sentences_name_the_source(cause: str, source: str) -> None:
    assert intr.scaling_source(intr.ScalingCause(cause=cause)) == source


def test_no_activity_is_the_lifecycle_source() -> None:
    assert intr.scaling_source(None) == "asg-lifecycle"


def test_an_eks_managed_node_groups_scale_in_has_the_eks_source() -> None:
    scale_in = CASES[0][0]
    found = intr.ScalingCause(cause=scale_in, eks_nodegroup="ng-batch")
    assert intr.scaling_source(found) == "eks-nodegroup-scale-in"
    refresh = intr.ScalingCause(cause=CASES[6][0], eks_nodegroup="ng-batch")
    assert intr.scaling_source(refresh) == "asg-instance-refresh"


def test_the_sources_are_the_simulators() -> None:
    from graceguard.sim.actors import asg, eks_nodegroup  # noqa: PLC0415

    assert set(asg.SOURCES.values()) <= {
        intr.SCALE_IN_SOURCE,
        intr.AZ_REBALANCE_SOURCE,
        intr.INSTANCE_REFRESH_SOURCE,
    }
    assert eks_nodegroup.EksNodeGroup.source(None, "scale-in") == intr.EKS_SCALE_IN_SOURCE  # type: ignore[arg-type]


def test_the_rebalance_notice_names_the_node_and_instance_when_known() -> None:
    told = intr.rebalance_notice(node="w-1", instance_id="i-0abc12345678")
    assert "instance i-0abc12345678 (node w-1)" in told and "no eviction is planned" in told
    assert "the instance (node w-1)" in intr.rebalance_notice(node="w-1", instance_id=None)
