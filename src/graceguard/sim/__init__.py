"""The discrete-event simulator: a simulated clock, cluster and actors around graceguard's real
code: the engine, the controller's reconcile round and executor (``controller.rounds``,
``controller.executor``) and the webhook's service, each through its ports, implemented here over
the simulated world (``view``, ``cluster``, ``ledger``, ``admission``).

It may import domain/, engine/ and manifests/, and the service layers (controller/, webhook/)
but not the controller's loop, which waits on the wall clock; it reads no files, network or wall
clock (the CLI loads scenario files and hands their parsed documents in). ``.importlinter``.
"""
