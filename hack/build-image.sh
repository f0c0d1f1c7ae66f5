#!/usr/bin/env bash
# Build graceguard's container image as an OCI image layout, without a Docker daemon:
#   hack/build-image.sh WHEEL OUT_DIR
# (make image: WHEEL = dist/graceguard-<version>-py3-none-any.whl, OUT_DIR = out/image).
#
# Three layers, each a directory tree turned into a tar by hack/oci_layout.py:
#   1. base: Debian bookworm's Python 3.11 and the C libraries it and the wheels link against,
#      unpacked from .deb files (apt-get download + dpkg-deb -x; no maintainer scripts run),
#      docs/man pages dropped, the CA bundle assembled as update-ca-certificates would, a nonroot
#      user (65532), the standard library precompiled;
#   2. deps: the wheel's dependencies (pip install --target from a wheelhouse in the cache that
#      pip download fills from the package index), tests and caches stripped, precompiled;
#   3. app: graceguard itself and /usr/local/bin/graceguard, precompiled.
# .pyc files are written at build time (unchecked-hash: never compared with the source, never
# rewritten), so a read-only root filesystem costs nothing at start-up.
#
# Needs a Debian bookworm machine (apt-get, dpkg-deb; lists fetched with apt-get update when the
# packages cannot be found) and a CPython 3.11 ($PY, default .venv/bin/python) to run pip and to
# byte-compile for the image's 3.11 interpreter (same bytecode magic, checked below).
# Caches: ${GRACEGUARD_CACHE:-$HOME/.cache/graceguard}/{debs,wheelhouse}.
set -euo pipefail

wheel="${1:?usage: build-image.sh WHEEL OUT_DIR}"
out="${2:?usage: build-image.sh WHEEL OUT_DIR}"
py="${PY:-.venv/bin/python}"
cache="${GRACEGUARD_CACHE:-$HOME/.cache/graceguard}"
debs="$cache/debs"
wheelhouse="$cache/wheelhouse"
hack="$(cd "$(dirname "$0")" && pwd)"
work="${IMAGE_WORK:-build/image}"
start=$SECONDS

# The image's Python and only the shared libraries something in it links against: the standard
# library's extension modules that graceguard's code and dependencies use (ssl, sqlite3, ctypes,
# bz2, lzma, zlib, pyexpat, uuid), and libstdc++/libgcc_s for the manylinux wheels. Left out on
# purpose: readline, ncurses, gdbm/db, crypt and nis (interactive or deprecated modules).
packages=(
  libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libssl3 libffi8 libbz2-1.0 liblzma5 libsqlite3-0
  libuuid1 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
  media-types netbase ca-certificates
)

[[ -f "$wheel" ]] || { echo "build-image: $wheel is missing: run make dist" >&2; exit 1; }
for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "build-image: needs $tool (a Debian machine)" >&2; exit 1; }
done

# ---- the .deb files: downloaded once into the cache (apt-get checks each file's hash) ----
mkdir -p "$debs"
uris() { apt-get download --print-uris "${packages[@]}" 2>/dev/null; }
if ! listing="$(uris)" || [[ -z "$listing" ]]; then
  echo "build-image: apt lists do not have the packages: apt-get update" >&2
  apt-get update -qq
  listing="$(uris)"
fi
files=()
missing=()
while read -r _uri file _size _hash; do
  files+=("$file")
  [[ -f "$debs/$file" ]] || missing+=("${file%%_*}")
done <<<"$listing"
if ((${#missing[@]})); then
  echo "build-image: downloading ${#missing[@]} Debian packages" >&2
  (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "${missing[@]}")
fi

rm -rf "$work"
base="$work/base" deps="$work/deps" app="$work/app"
mkdir -p "$base" "$deps" "$app"

# ---- layer 1: base ----
for file in "${files[@]}"; do
  dpkg-deb -x "$debs/$file" "$base"
done
rm -rf "$base"/usr/share/{doc,man,info,lintian,locale,bug,gdb} "$base"/usr/lib/python3.11/{ensurepip,idlelib,lib2to3,pydoc_data,turtledemo,test}
rm -rf "$base"/etc/{ld.so.conf.d,default,init.d} "$base"/usr/lib/x86_64-linux-gnu/gconv
ln -sf python3.11 "$base/usr/bin/python3"
# update-ca-certificates' result: every certificate the package ships, in one bundle, and
# OpenSSL's default locations pointing at it.
mkdir -p "$base/etc/ssl/certs" "$base/usr/lib/ssl"
find "$base/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | xargs cat \
  >"$base/etc/ssl/certs/ca-certificates.crt"
ln -sfn /etc/ssl/certs "$base/usr/lib/ssl/certs"
ln -sf /etc/ssl/certs/ca-certificates.crt "$base/usr/lib/ssl/cert.pem"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$base/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$base/etc/group"
mkdir -p "$base/tmp" "$base/home/nonroot" "$base/root"
chmod 1777 "$base/tmp"
chmod 0755 "$base/home/nonroot"

# Bytecode for the image's interpreter: the host's CPython must be 3.11 (one magic number).
image_magic="$("$py" -c 'import sys; print(sys.version_info[:2] == (3, 11))')"
[[ "$image_magic" == True ]] || { echo "build-image: $py is not CPython 3.11" >&2; exit 1; }
compile() {  # compile DIR-IN-LAYER LAYER-ROOT: paths in the .pyc as the image sees them
  "$py" -m compileall -q -j 2 --invalidation-mode unchecked-hash -s "$2" -p / "$2$1" >/dev/null
}
compile /usr/lib/python3.11 "$base"

# ---- layers 2 and 3: the wheel and its dependencies ----
site=/usr/local/lib/python3.11/dist-packages
"$py" -m pip --quiet download --dest "$wheelhouse" "$wheel"
rm -f "$wheelhouse/$(basename "$wheel")"  # the wheel installed is the one given
"$py" -m pip --quiet install --no-index --find-links "$wheelhouse" --no-compile \
  --target "$deps$site" "$wheel"
rm -rf "$deps$site/bin"  # console scripts written for the build's interpreter
mkdir -p "$app$site" "$app/usr/local/bin"
mv "$deps$site"/graceguard "$deps$site"/graceguard-*.dist-info "$app$site/"
# Not needed at run time: test suites, caches, C headers, Cython sources. matplotlib and numpy (only
# `simulate --timeline FILE.png`) are the optional extra `timeline`, left out of the image.
find "$deps$site" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} +
find "$deps$site" -type f \( -name '*.pyx' -o -name '*.pxd' -o -name '*.c' -o -name '*.h' \) -delete
compile "$site" "$deps"
compile "$site" "$app"
cat >"$app/usr/local/bin/graceguard" <<'EOF'
#!/usr/bin/python3.11
import sys

from graceguard.cli.main import app

sys.exit(app())
EOF
chmod 0755 "$app/usr/local/bin/graceguard"

version="$(basename "$wheel" | cut -d- -f2)"
"$py" "$hack/oci_layout.py" write --out "$out" --tag "$version" \
  --created-epoch "${SOURCE_DATE_EPOCH:-0}" \
  --layer "$base=Debian bookworm: python3.11 and its libraries" \
  --layer "$deps=the dependencies of graceguard $version" \
  --layer "$app=graceguard $version" \
  --label "org.opencontainers.image.title=graceguard" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.licenses=Apache-2.0" \
  --label "org.opencontainers.image.base.name=debian:bookworm (python3.11-minimal, libpython3.11-stdlib)"
echo "build-image: done in $((SECONDS - start)) s" >&2
