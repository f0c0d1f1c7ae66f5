"""``graceguard audit``: the misconfigurations behind the field's stories, found in what was read.

Each check is a pure function from values read in elsewhere (``adapters.kube.audit_read``,
``adapters.aws.audit_read``) to ``findings.Finding`` values: nothing here reads the cluster, AWS,
files or the clock (``now`` is passed in), and nothing here prints (``cli.audit`` does).

- ``findings``: the finding value, its severity and the catalogue of checks (what each looks for);
- ``inputs``: the values the checks read (pods with their owners and preStop hooks, the
  autoscaler's cap, the webhook configurations, the DisruptionPolicy objects, the kubelets'
  shutdown settings, the Auto Scaling groups behind the nodes);
- ``cluster``: the checks over the Kubernetes objects;
- ``kubelet``: the nodes' kubelet shutdown settings and graceguard's node agent;
- ``aws``: the Auto Scaling groups behind the cluster's nodes.
"""
