#!/usr/bin/env bash
# Builds fake-gcs-server (a Google Cloud Storage emulator: JSON API, ranged reads, generations,
# CRC32C and MD5) from the Go module proxy, once, into
#   ${XDG_CACHE_HOME:-~/.cache}/flink-jar-gateway/fake-gcs-server/v<version>/fake-gcs-server
# for the gs:// plugin's tests (test/servers/fake-gcs.ts starts it on loopback).
# Idempotent: a stamp file names what was built; a second run with the same stamp does nothing.
# Its go.mod has no replace directives, so `go install module@version` builds it as published.
# The first run costs about 150 MB of modules and two minutes of CPU on two cores.
# Without Go it prints one line naming what to install.
set -euo pipefail

FAKE_GCS_VERSION="${FAKE_GCS_VERSION:-1.56.1}"
GO_MIN_MINOR=24 # fake-gcs-server 1.56's go.mod asks for go 1.24

cache="${XDG_CACHE_HOME:-$HOME/.cache}/flink-jar-gateway/fake-gcs-server/v$FAKE_GCS_VERSION"
stamp_file="$cache/.stamp"
stamp="fake-gcs-server v$FAKE_GCS_VERSION build 1"

up_to_date() { [ -x "$cache/fake-gcs-server" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; }

if up_to_date; then
  echo "fake-gcs build: $cache is up to date"
  exit 0
fi

. "$(dirname "$0")/lib/go-build.sh"
require_go "fake-gcs build" "$GO_MIN_MINOR" "the test GCS emulator, fake-gcs-server v$FAKE_GCS_VERSION"
lock_build "fake-gcs build" "$cache" up_to_date

echo "fake-gcs build: building fake-gcs-server v$FAKE_GCS_VERSION from the Go module proxy (first run only)"
# The toolchain that is installed builds it; no toolchain download behind the user's back.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$cache/.bin"
rm -rf "$GOBIN"
go install -trimpath -ldflags="-s -w" "github.com/fsouza/fake-gcs-server@v$FAKE_GCS_VERSION"
mv "$GOBIN/fake-gcs-server" "$cache/fake-gcs-server"
rm -rf "$GOBIN"
echo "$stamp" > "$stamp_file"
echo "fake-gcs build: fake-gcs-server ready in $cache"
