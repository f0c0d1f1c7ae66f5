# graceguard — the two commands: `make demo` and `make test`. Both set up everything they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test venv lint typecheck imports unit scenarios integration e2e bench clean \
        cluster-build cluster-up cluster-down

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

## demo: the bundled scenarios through the simulator, without and with graceguard
demo: $(STAMP)
	$(VENV)/bin/graceguard simulate scenarios/*.yaml

## test: every tier — lint, types, layers, unit + property, scenarios, the real control plane
test: lint typecheck imports unit scenarios integration e2e

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench hack
	$(VENV)/bin/ruff format --check src tests bench hack

typecheck: $(STAMP)
	$(VENV)/bin/mypy

imports: $(STAMP)
	$(VENV)/bin/lint-imports

unit: $(STAMP)
	$(PY) -m pytest tests/unit -q

scenarios: $(STAMP)
	$(PY) -m pytest tests/scenarios -q

## integration: the adapters against real parts — the ledger on SQLite files and on a PostgreSQL
## server the tests start from the machine's binaries (installed from Debian when missing)
integration: $(STAMP)
	@command -v postgres >/dev/null || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || \
	  (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql)
	$(PY) -m pytest tests/integration -q

bench: $(STAMP)
	@for b in bench/bench_*.py; do PYTHONPATH=bench $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build src/*.egg-info .mypy_cache .ruff_cache .pytest_cache

# ---- real Kubernetes control plane (issue 3): hack/ builds it from the Go module proxy ----
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd (k8s.io/kubernetes),
# kwok and cluster-autoscaler (kwok provider), built once into $(GRACEGUARD_CACHE)/<version>/bin
# (default ~/.cache/graceguard); see hack/README.md. Go: /usr/local/go/bin or PATH, or $$GO.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
CONTROLPLANE := GO=$(GO) $(PY) hack/controlplane.py

## cluster-build: build the control plane if it is not cached (fast when it is)
cluster-build: $(STAMP)
	@$(CONTROLPLANE) build

## cluster-up: start a control plane on 127.0.0.1; the last line printed is its kubeconfig
cluster-up: cluster-build
	@$(CONTROLPLANE) up

## cluster-down: stop the control plane started by cluster-up
cluster-down: $(STAMP)
	@$(CONTROLPLANE) down

## e2e: tests against the real control plane (tests/e2e)
e2e: cluster-build
	$(PY) -m pytest tests/e2e -q
