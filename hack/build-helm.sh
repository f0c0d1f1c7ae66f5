#!/usr/bin/env bash
# Build helm from the Go module proxy (Debian bookworm has no helm package) into the cache:
#   ${GRACEGUARD_CACHE:-$HOME/.cache/graceguard}/helm/<version>/helm
# Idempotent: a binary already there is kept. Prints the binary's path on its last line.
# helm.sh/helm/v3 has no replace directives, so `go install module@version` builds it directly.
set -euo pipefail

version="${HELM_VERSION:-v3.22.0}"
cache="${GRACEGUARD_CACHE:-$HOME/.cache/graceguard}"
dest="$cache/helm/$version"
bin="$dest/helm"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

go="${GO:-$(command -v go || true)}"
[[ -z "$go" && -x /usr/local/go/bin/go ]] && go=/usr/local/go/bin/go
if [[ -z "$go" || ! -x "$(command -v "$go")" ]]; then
  echo "build-helm: no Go toolchain found (need go >= 1.26: \$GO, PATH or /usr/local/go)" >&2
  exit 1
fi

mkdir -p "$dest"
work="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "build-helm: building helm $version from the Go module proxy (a few minutes)..." >&2
start=$SECONDS
GOBIN="$work" GOFLAGS="${GOFLAGS:-} -buildvcs=false" CGO_ENABLED=0 "$go" install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
  "helm.sh/helm/v3/cmd/helm@$version"
"$work/helm" version --short >&2
mv "$work/helm" "$bin"  # same filesystem: atomic, so a concurrent run never sees half a binary
echo "build-helm: built in $((SECONDS - start)) s" >&2
echo "$bin"
