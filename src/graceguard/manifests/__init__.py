"""Kubernetes-shaped documents (parsed JSON/YAML mappings) -> domain values. Pure: no I/O.

The Kubernetes adapter, ``explain`` and the simulator all read pods the way the API serves them;
this package is the one place that knows those shapes (the ``DisruptionPolicy`` in ``policies``,
a ``Disruption`` and its hold in ``disruptions``). Bad input raises ``ManifestError`` naming the
field and the reason (a policy's fields: ``domain.policy.PolicyError``).
"""
