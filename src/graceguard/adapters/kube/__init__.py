"""Kubernetes through lightkube, one module per job:

- ``client``: connecting (a kubeconfig, else in-cluster), every client through
  ``retry_after`` (a transient refusal with Retry-After waited out within a bound);
  ``unary_transport``: the sending of a client that never watches (the controller's writes) on
  aiohttp, a fraction of httpx's CPU per request;
  ``resources``: the API resources read as generic resources (plain dicts for
  ``graceguard.manifests``).
- ``informer``: list, then watch, into a store of domain values; ``view``: the controller's
  informers assembled into the engine's snapshot, the open, finished and rejected Disruptions and
  the policy (``controller.ports.View``); ``admission_state``: the webhook's informers and the
  facts it decides from.
- ``writer``: ``controller.ports.ClusterWriter`` (notices, evictions, cordons, Disruption
  statuses); ``written``: its pod and node writes until the view's informers have seen them
  (what ``view``'s ``settle`` waits on); ``cordons``: a cordon with graceguard's mark, only
  where nobody had cordoned, and its taking back on uninstall; ``events``: the Event objects
  every process reports;
  ``policy_status``: the DisruptionPolicy's status; ``logs``: ``pods/log`` as the controller's
  ``LogSource``.
- ``disruptions``: the ``Disruption`` store, through which every creation, read, watch and
  write of a ``Disruption`` object goes (its documents are ``manifests.disruptions``'s; the
  views' informer on them is its ``watch``); ``drains``: ``graceguard drain`` and ``graceguard
  plan`` (open, follow, load the cluster once); ``interruptions``: the Kubernetes side of the AWS
  holds (which node an instance is); ``deadlines``: the deadlines nodes and Karpenter's NodeClaims
  announce (``controller.ports.Announcements``); ``sightings``: the webhook telling the
  controller that a taken-over drain's evictor still asks (an event on the Disruption).
- ``lease``: leader election on a Lease; ``state_map``: a ConfigMap's data as the
  controller's ``KeyValues`` (window evictions and the notify outbox a new leader reads);
  ``node_agent``: what one node's agent reads and writes; ``node_view``: its node read afresh
  for the drain it runs itself when no controller does (``agent.ports.NodeDrain``);
  ``audit_read``: what ``graceguard audit`` reads; ``cleanup``: what ``graceguard
  uninstall-cleanup`` takes back from pods and nodes; ``webhook_config``: the webhook arming its
  own ValidatingWebhookConfiguration; ``controller_lease``: whether a controller leads, for the
  webhook.

graceguard keeps its own informers rather than kopf's watch handlers: after a relist it must
drop objects deleted while the watch was down, it must know each object's resourceVersion to
wait until its own writes are observed (so no notice or eviction is sent twice), and it stores
only compact domain values (a few hundred bytes per pod).
"""
