# graceguard — the two commands: `make demo` and `make test`. Both set up everything they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test venv lint typecheck imports unit scenarios badinput integration e2e bench clean \
        cluster-build cluster-up cluster-down helm crds crds-check chart chart-check postgres \
        dist image dbusmock aemm node node-deps

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -e '.[dev,timeline]'
	touch $(STAMP)

venv: $(STAMP)

## demo: the bundled scenarios through the simulator, without and with graceguard
demo: $(STAMP)
	$(VENV)/bin/graceguard simulate scenarios/*.yaml

## test: every tier — lint, types, layers, unit + property, scenarios, the real control plane
## (which tier a new test belongs to, by what is real in it: tests/README.md)
## The Go builds (cluster-build, aemm: most of a cold run) start in the background while the tiers
## that need none of them run, so a cold run's compiling overlaps the checks; their output goes to
## out/prebuild.log, printed if they fail. A second build waits on the first (hack/controlplane.py
## locks its cache), so the tiers after them only find them done.
FIRST_TIERS := lint typecheck imports chart-check unit scenarios badinput
test: $(STAMP) helm
	@mkdir -p out
	@$(MAKE) --no-print-directory cluster-build aemm >out/prebuild.log 2>&1 & prebuild=$$!; \
	  echo "cluster-build and aemm run in the background meanwhile (out/prebuild.log)"; \
	  $(MAKE) --no-print-directory $(FIRST_TIERS) || exit 1; \
	  wait $$prebuild || { cat out/prebuild.log; echo "the background build failed: out/prebuild.log"; exit 1; }; \
	  tail -n 3 out/prebuild.log
	@$(MAKE) --no-print-directory integration e2e node

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench hack
	$(VENV)/bin/ruff format --check src tests bench hack

typecheck: $(STAMP)
	$(VENV)/bin/mypy

imports: $(STAMP)
	$(VENV)/bin/lint-imports

## each tier's pytest keeps its temporary directories (the logs of graceguard's processes and of
## the control plane) in out/pytest/<tier>, emptied when that tier next runs in this checkout, not
## in /tmp/pytest-of-<user>, where every run on the machine rotates them away; a failed test names
## its own (tests/conftest.py). With pytest-xdist each worker has a subdirectory (popen-gw0, ...).
PYTEST = mkdir -p out/pytest && $(PY) -m pytest --basetemp=out/pytest/$@

## unit: unit + property tests; the chart tests read what chart-check renders (out/chart*.yaml)
unit: $(STAMP) chart-check
	$(PYTEST) tests/unit -q

scenarios: $(STAMP)
	$(PYTEST) tests/scenarios -q

## badinput: every command with bad values, files and environment: one line, exit 2, no traceback
badinput: $(STAMP)
	$(PYTEST) tests/badinput -q

## integration: the adapters against real parts — the ledger on SQLite files and on a PostgreSQL
## server the tests start from the machine's binaries (installed from Debian when missing)
## postgres: Debian's PostgreSQL, which the integration and e2e tiers start for their ledgers
postgres:
	@command -v postgres >/dev/null || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || \
	  (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql)

## dbusmock: a private system bus (dbus-daemon) and Debian's python3-dbusmock with its logind
## template, for the node agent's tests (integration, e2e) and bench (hack/logindmock.py)
dbusmock:
	@command -v dbus-daemon >/dev/null && /usr/bin/python3 -c 'import dbusmock' 2>/dev/null || \
	  (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y dbus-daemon python3-dbusmock)

## aemm: AWS's instance-metadata emulator (amazon-ec2-metadata-mock) from the Go module proxy, once,
## into $(GRACEGUARD_CACHE)/ec2-metadata-mock, for tests/integration/test_imds.py
AEMM_VERSION := v1.13.0
AEMM = $(GRACEGUARD_CACHE)/ec2-metadata-mock/ec2-metadata-mock
aemm:
	@test -x $(AEMM) || GOTOOLCHAIN=local GOFLAGS=-mod=mod GOBIN=$(dir $(AEMM)) $(GO) install \
	  github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock@$(AEMM_VERSION)

## integration also installs the wheel of `make dist` in a fresh venv and runs it as a kubectl
## plugin through the real kubectl (tests/integration/test_dist.py), and runs the entrypoint of the
## image of `make image` from its unpacked layers, read-only, as its user (test_image.py)
integration: $(STAMP) postgres image chart cluster-build dbusmock aemm
	$(PYTEST) tests/integration -q

## bench: every bench under bench/, one JSON line of figures each on stdout; the kwok benches start
## a control plane (hack/controlplane.py, built by cluster-build), so hack/ is on their path too
bench: $(STAMP) dbusmock cluster-build
	@for b in bench/bench_*.py; do PYTHONPATH=bench:hack $(PY) $$b || exit 1; done

# ---- the product (issue 11): wheel + sdist, and an OCI image built without a Docker daemon ----
## dist: the wheel and the sdist into dist/ (setuptools as pinned in pyproject, fetched by build)
dist: $(STAMP)
	@rm -rf dist
	@mkdir -p build
	@$(PY) -m build --outdir dist . >build/dist.log 2>&1 || { cat build/dist.log; exit 1; }
	@ls -l dist

## image: graceguard's container image as an OCI image layout in out/image, without a Docker
## daemon: Debian's python3.11 and libraries (apt-get download, dpkg-deb -x) and the wheel with its
## dependencies, non-root, precompiled for a read-only root filesystem (hack/build-image.sh);
## push it with crane or skopeo (README: Install with Helm)
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
image: dist
	@PY=$(PY) GRACEGUARD_CACHE=$(GRACEGUARD_CACHE) \
	  SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
	  hack/build-image.sh dist/graceguard-$(VERSION)-py3-none-any.whl out/image

clean:
	rm -rf $(VENV) build src/*.egg-info .mypy_cache .ruff_cache .pytest_cache

# ---- the CRDs (DisruptionPolicy, Disruption) and the Helm chart (issues 4, 8) ----
# deploy/crds/*.yaml are the CRDs' sources; `make crds` copies each into the chart's crds/ and
# writes the policy's part of the chart's values.schema.json from the DisruptionPolicy CRD.
# helm is built from the Go module proxy into the cache (hack/build-helm.sh; skipped when cached).
HELM_VERSION := v3.22.0
GRACEGUARD_CACHE ?= $(HOME)/.cache/graceguard
HELM := $(GRACEGUARD_CACHE)/helm/$(HELM_VERSION)/helm
CHART := deploy/helm/graceguard
CRDS := deploy/crds/disruptionpolicy.yaml deploy/crds/disruption.yaml
CHART_NS := graceguard-system
# the Kubernetes version the e2e tier runs (helm template without a cluster assumes v1.20)
KUBE_VERSION := v1.37.1

helm:
	@GO=$(GO) HELM_VERSION=$(HELM_VERSION) GRACEGUARD_CACHE=$(GRACEGUARD_CACHE) hack/build-helm.sh >/dev/null

crds:
	cp $(CRDS) $(CHART)/crds/
	$(PY) hack/chart_values_schema.py

## crds-check: the chart's crds/ holds exactly a copy of each of $(CRDS), and its
## values.schema.json's policy.spec is the DisruptionPolicy CRD's (hack/chart_values_schema.py)
crds-check: $(STAMP)
	@$(PY) hack/chart_values_schema.py --check
	@for crd in $(CRDS); do \
	  cmp -s $$crd $(CHART)/crds/$$(basename $$crd) || \
	    { echo "$(CHART)/crds/$$(basename $$crd) differs from $$crd: run make crds"; exit 1; }; \
	done
	@extra=$$(cd $(CHART)/crds && for f in *; do \
	  case " $(notdir $(CRDS)) " in *" $$f "*) ;; *) echo $$f;; esac; done); \
	  [ -z "$$extra" ] || { echo "$(CHART)/crds/ has files no CRD source has: $$extra"; exit 1; }

## chart: helm lint + helm template (default values) into out/chart.yaml
chart: helm crds-check
	@mkdir -p out
	$(HELM) lint --strict --kube-version $(KUBE_VERSION) $(CHART)
	$(HELM) template graceguard $(CHART) --namespace $(CHART_NS) --kube-version $(KUBE_VERSION) --include-crds > out/chart.yaml

## chart-check: the above, and again with each of $(CHART)/ci/*-values.yaml into out/chart-*.yaml:
## the PostgreSQL ledger, the eviction webhook with helm's certificate and with cert-manager's,
## the Grafana dashboard with the PrometheusRule and ServiceMonitors
chart-check: chart
	@for v in postgresql webhook webhook-certmanager aws observability agent; do \
	  $(HELM) lint --strict --kube-version $(KUBE_VERSION) $(CHART) -f $(CHART)/ci/$$v-values.yaml >/dev/null || exit 1; \
	  $(HELM) template graceguard $(CHART) --namespace $(CHART_NS) --kube-version $(KUBE_VERSION) --include-crds \
	    -f $(CHART)/ci/$$v-values.yaml > out/chart-$$v.yaml || exit 1; \
	  echo "rendered out/chart-$$v.yaml"; \
	done

# ---- real Kubernetes control plane (issue 3): hack/ builds it from the Go module proxy ----
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd (k8s.io/kubernetes),
# kwok, cluster-autoscaler and Karpenter (kwok providers), built once into $(GRACEGUARD_CACHE)/<version>/bin
# (default ~/.cache/graceguard); see hack/README.md. Go: /usr/local/go/bin or PATH, or $$GO.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
CONTROLPLANE := GO=$(GO) $(PY) hack/controlplane.py

## cluster-build: build the control plane if it is not cached (fast when it is)
cluster-build: $(STAMP)
	@$(CONTROLPLANE) build

## cluster-up: start a control plane on 127.0.0.1; the last line printed is its kubeconfig.
## REAL_NODE=1: with two real nodes (kubelet, containerd; hack/realnode.py) and `make image`'s
## image, the pause image and a test workload imported into their containerd
REALNODE := GO=$(GO) $(PY) hack/realnode.py
cluster-up: cluster-build $(if $(REAL_NODE),node-deps image)
	@$(if $(REAL_NODE),$(REALNODE) up --image out/image,$(CONTROLPLANE) up)

## cluster-down: stop what cluster-up started, real nodes included (mounts, cgroups, interfaces)
cluster-down: $(STAMP)
	@$(REALNODE) down

## node-deps: Debian's containerd, runc, CNI plugins, iptables (kube-proxy), conntrack, and gcc
## for the pause image, installed when missing (hack/realnode.py)
NODE_PACKAGES := containerd runc containernetworking-plugins iptables conntrack gcc libc6-dev
node-deps:
	@command -v containerd >/dev/null && command -v runc >/dev/null && test -x /usr/lib/cni/bridge && \
	  command -v iptables-restore >/dev/null && command -v conntrack >/dev/null && \
	  command -v gcc >/dev/null && test -f /usr/lib/x86_64-linux-gnu/libc.a || \
	  (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(NODE_PACKAGES))

## e2e: tests against the real control plane (tests/e2e), on E2E_WORKERS pytest-xdist workers
## (default 2), each with a control plane of its own; a file's tests stay on one worker
## (--dist loadfile), as they share its module fixtures. E2E_WORKERS=0 runs them in this process.
E2E_WORKERS ?= 2
e2e: cluster-build chart postgres dbusmock
	$(PYTEST) tests/e2e -q -n $(E2E_WORKERS) --dist loadfile --durations=15

## node: the real-node tier (tests/node): the control plane with two real nodes, graceguard's image
## installed with helm in pods, a workload that gets its SIGTERM (hack/realnode.py)
## Its temporary directories are not under out/: containerd's and the kubelet's unix sockets live
## in them, and a socket's path may not pass 107 bytes (hack/realnode.py), which a checkout's own
## path would eat into; so a short one in /tmp, one per checkout, kept until its next run.
NODE_BASETEMP := /tmp/graceguard-node-$(shell printf %s '$(CURDIR)' | cksum | cut -d' ' -f1)
node: cluster-build node-deps image helm
	$(PY) -m pytest --basetemp=$(NODE_BASETEMP) tests/node -q --durations=10
