"""Kubernetes through lightkube: informers (list + watch into domain values), the writer that
carries out actions, and Lease-based leader election.

graceguard keeps its own informers rather than kopf's watch handlers: after a relist it must
drop objects deleted while the watch was down, it must know each object's resourceVersion to
wait until its own writes are observed (so no notice or eviction is sent twice), and it stores
only compact domain values (a few hundred bytes per pod).
"""
