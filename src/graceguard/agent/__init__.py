"""The node agent's service layer (``graceguard agent``): holds its node's shutdown with a logind
inhibitor lock and, when the OS shuts down, runs the node's drain in phases. It reaches logind,
instance metadata and Kubernetes only through its ports; the adapters and the wiring are in
``graceguard.adapters`` and ``graceguard.processes``."""
