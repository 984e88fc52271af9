#!/bin/sh
# The example app of examples/app/server.js, in busybox sh: so the image builds offline, FROM
# scratch, with nothing pulled. busybox httpd serves on $PORT (8080 when unset):
#   GET /         {"version": "$VERSION"}   (watch traffic move from blue to green)
#   GET /healthz  ok                         (absent with UNHEALTHY=1: a broken release)
# SIGTERM stops it at once (as PID 1 a shell has no default handler, so it is trapped).
mkdir -p /www
echo "{\"version\":\"${VERSION:-unknown}\"}" > /www/index.html
if [ "$UNHEALTHY" != 1 ]; then echo ok > /www/healthz; fi
echo "app ${VERSION:-unknown} listening on ${PORT:-8080}"
httpd -f -p "${PORT:-8080}" -h /www &
trap 'kill $! 2>/dev/null; exit 0' TERM INT
wait
