#!/bin/sh
# Builds the offline example image:  ./build.sh <tag> [engine command]
#   → $IMAGE:<tag>, IMAGE defaulting to localhost/cutover-example-app
# The engine command defaults to `podman`; e.g. "docker", or "podman --runtime runc" where crun fails.
# Needs busybox-static (/bin/busybox) on this machine: nothing is pulled.
set -eu
tag="${1:?usage: ./build.sh <tag> [engine command]}"
engine="${2:-podman}"
image="${IMAGE:-localhost/cutover-example-app}"
here="$(cd "$(dirname "$0")" && pwd)"
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp /bin/busybox "$context/busybox"
cp "$here/app.sh" "$here/Containerfile" "$context/"
# $engine is split into words on purpose: it may carry flags.
$engine build -q -t "$image:$tag" "$context"
