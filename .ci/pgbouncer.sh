#!/usr/bin/env bash
# Prints the path of a PgBouncer binary for the test that runs the migration runner through a
# transaction pooler (libs/db/src/pgbouncer.test.ts). Debian's package and the shared libraries it
# needs are downloaded once with apt-get download (no root needed, nothing installed) and unpacked
# into .cache/pgbouncer; the printed path is a wrapper that finds those libraries.
# Exit 3 (with the reason on stderr) when this machine has no apt-get: the test is then skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache/pgbouncer"
wrapper="$cache/bin/pgbouncer"
if [ -x "$wrapper" ]; then
  echo "$wrapper"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "pgbouncer.sh: no apt-get/dpkg-deb on this machine: run the PgBouncer test on Debian or Ubuntu" >&2
  exit 3
fi
debs="$(mktemp -d)"
chmod 777 "$debs" # apt-get downloads as its _apt user when it can
tmp="$cache.tmp.$$"
trap 'rm -rf "$debs" "$tmp"' EXIT
# libevent and c-ares are pgbouncer's own dependencies; the rest (libc, OpenSSL, PAM) is on any
# Debian system.
(cd "$debs" && apt-get download pgbouncer libc-ares2 libevent-2.1-7 >&2) || {
  echo "pgbouncer.sh: apt-get download failed (above): run apt-get update, or check that the Debian mirror is reachable" >&2
  exit 1
}
mkdir -p "$tmp/bin"
for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
# Relative to itself: the cache may be reached through another checkout's .cache link.
cat > "$tmp/bin/pgbouncer" <<'WRAPPER'
#!/usr/bin/env bash
here="$(cd "$(dirname "$0")/.." && pwd)"
export LD_LIBRARY_PATH="$here/root/usr/lib/x86_64-linux-gnu:$here/root/usr/lib/aarch64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$here/root/usr/sbin/pgbouncer" "$@"
WRAPPER
chmod +x "$tmp/bin/pgbouncer"
# Readable by the postgres user, which pgbouncer switches to when started as root.
chmod -R a+rX "$tmp"
rm -rf "$cache" && mv "$tmp" "$cache"
"$wrapper" --version >&2
echo "$wrapper"
