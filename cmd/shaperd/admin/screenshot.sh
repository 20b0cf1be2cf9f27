#!/usr/bin/env bash
# screenshot.sh takes a headless-Chromium screenshot of a running shaperd's
# status page (GET / on the admin listener).
#
#   cmd/shaperd/admin/screenshot.sh [URL] [OUT.png]
#
# URL defaults to http://127.0.0.1:9090/ and OUT to status-page.png. Installs
# Debian's chromium first if it is missing (needs root). The page needs a few
# seconds of virtual time to poll the API and draw its charts; give the
# daemon a minute of traffic first if the charts should show something.
set -euo pipefail

url=${1:-http://127.0.0.1:9090/}
out=${2:-status-page.png}

if ! command -v chromium >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "screenshot.sh: chromium is not installed; run as root to install it, or: sudo apt-get install -y chromium" >&2
		exit 1
	fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

# Flags: no sandbox (root in a container), and nothing that phones home.
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$profile" --window-size=1280,800 --virtual-time-budget=5000 \
	--screenshot="$out" "$url"
echo "screenshot.sh: wrote $out" >&2
