"""The discrete-event simulator: a simulated clock, cluster and actors around graceguard's real
code: the engine, the controller's reconcile round and executor (``controller.rounds``,
``controller.executor``) and the webhook's service, each through its ports, implemented here
(``view``, ``cluster``, ``ledger``, ``admission``) over the simulated world (``world``: its clock
and what happens to its pods, with its nodes in ``fleet``, its pods and where they run in
``population``, where a new pod starts in ``placement``, its open requests in ``requests`` and its
API server in ``api``), which the scenario's actors (``actors``) disrupt and ``runner`` advances.

It may import the layers below it (domain/, engine/, manifests/ and the service layers), but not
the controller's loop, which waits on the wall clock, nor adapters/ or processes/; it reads no
files, network or wall clock (the CLI loads scenario files and hands their parsed documents in).
``.importlinter`` keeps it so.
"""
