"""Kubernetes-shaped documents (parsed JSON/YAML mappings) -> domain values. Pure: no I/O.

The Kubernetes adapter, ``explain`` and the simulator all read pods the way the API serves them;
this package is the one place that knows those shapes. Bad input raises ``ManifestError`` naming
the field and the reason.
"""
