#!/usr/bin/env bash
# Everything the test suite needs beyond `npm ci`, installed or found by the project itself.
# `npm test` runs this first (npm's `pretest`), so the README's test command works on a fresh machine.
# Idempotent: a second run finds everything in place and downloads nothing.
#   - system packages (Java 17+, Maven, curl, openssl, iproute2, Debian's Chromium, Python 3 venv):
#     installed with apt-get when we are root and apt exists; otherwise one line names them and the
#     command, and the run stops before any test starts.
#   - the Python test servers (moto, schemathesis; test/servers/requirements.txt) in .tmp/venv,
#     rebuilt only when that file or the Python version changes.
#   - a kube-apiserver and an etcd for the Kubernetes HA tests (scripts/build-kube.sh), built once
#     from the Go module proxy into ~/.cache/flink-jar-gateway/kube/ (about a quarter of an hour on
#     two cores the first time); needs Go 1.25+, else one line names it and the run stops. The fast
#     lane (`npm run test:unit`) does not need them and skips this step.
#   - fake-gcs-server, a Google Cloud Storage emulator for the gs:// plugin's tests
#     (scripts/build-fake-gcs.sh), built once from the Go module proxy into
#     ~/.cache/flink-jar-gateway/fake-gcs-server/ (a couple of minutes the first time); the fast
#     lane does not need it either.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
java_major() { java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p'; }
if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  need_apt+=(openjdk-17-jdk-headless)
fi
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# curl runs the README's examples; openssl makes the tests' throwaway TLS certificates.
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# ip (iproute2): the SSRF suite makes a network namespace for link-local addresses (test/security/netns-ssrf.ts).
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
# Debian's Chromium for the Web UI tests (playwright-core drives it; no browser download).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# Python 3 with venv + ensurepip (a fresh Debian python3 has neither pip nor venv).
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3 python3-venv)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test set-up: installing system packages: ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "test set-up: missing system packages ${need_apt[*]}; install them with: sudo apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
fi

venv=.tmp/venv
req=test/servers/requirements.txt
stamp="$(sha256sum "$req" | cut -d' ' -f1) $(python3 -c 'import sys; print(sys.version.split()[0])')"
if [ -x "$venv/bin/moto_server" ] && [ -x "$venv/bin/st" ] && [ "$(cat "$venv/.requirements-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "test set-up: $venv is up to date"
else
  echo "test set-up: installing $req into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-input -r "$req"
  echo "$stamp" > "$venv/.requirements-stamp"
fi

if [ "${npm_lifecycle_event:-}" != "pretest:unit" ]; then
  bash scripts/build-kube.sh
  bash scripts/build-fake-gcs.sh
fi
