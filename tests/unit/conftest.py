"""Hypothesis profiles for the unit tier.

``unit`` (the default) keeps the whole tier under a minute on a shared 2-core machine; ``thorough``
(``HYPOTHESIS_PROFILE=thorough``) runs ten times the examples when hunting for counter-examples.
Tests that drive the engine set their own, smaller ``max_examples`` (``driver.ENGINE_EXAMPLES``,
raised by ``GRACEGUARD_ENGINE_EXAMPLES``).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "unit",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "unit"))
