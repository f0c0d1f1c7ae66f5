"""The one error type for a document that cannot be read."""

from __future__ import annotations


class ManifestError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
