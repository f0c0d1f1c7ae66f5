"""Unit and property tests of the pure core: domain/, engine/, manifests/ and ``explain``."""
