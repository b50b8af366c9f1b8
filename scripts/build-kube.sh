#!/usr/bin/env bash
# Builds a real kube-apiserver and etcd from the Go module proxy, once, into
#   ${XDG_CACHE_HOME:-~/.cache}/flink-jar-gateway/kube/v<version>/{kube-apiserver,etcd}
# for the Kubernetes tests (test/servers/kube-apiserver.ts starts them on loopback).
# Idempotent: a stamp file names what was built; a second run with the same stamp does nothing.
#
# Why a wrapper module: `go install k8s.io/kubernetes/cmd/kube-apiserver@vX` fails, because the
# kubernetes go.mod replaces its staging modules (k8s.io/api, k8s.io/apiserver, ...) with ./staging
# paths that are not in the module zip. A module of our own that requires k8s.io/kubernetes and
# replaces each staging module with its published v0.<minor>.<patch> builds the same binary.
#
# The first run costs ~800 MB of modules, ~3 GB of Go build cache and about a quarter of an hour of
# CPU on two cores; later runs cost nothing. Without Go it prints one line naming what to install.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"
GO_MIN_MINOR=25 # kubernetes 1.37's go.mod asks for go 1.25

cache="${XDG_CACHE_HOME:-$HOME/.cache}/flink-jar-gateway/kube/v$KUBE_VERSION"
stamp_file="$cache/.stamp"
stamp="kube-apiserver v$KUBE_VERSION etcd v$ETCD_VERSION build 1"

up_to_date() { [ -x "$cache/kube-apiserver" ] && [ -x "$cache/etcd" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; }

if up_to_date; then
  echo "kube build: $cache is up to date"
  exit 0
fi

. "$(dirname "$0")/lib/go-build.sh"
require_go "kube build" "$GO_MIN_MINOR" "the test kube-apiserver v$KUBE_VERSION and etcd"
lock_build "kube build" "$cache" up_to_date

work="$cache/.build"
mkdir -p "$work/apiserver" "$work/etcd"
# The toolchain that is installed builds it; no toolchain download behind the user's back.
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
# etcd reads every ETCD_* variable as a flag, and the build does not need any.
for v in $(env | sed -n 's/^\(ETCD_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

minor="${KUBE_VERSION#*.}"; minor="${minor%%.*}"
staging_version="v0.${KUBE_VERSION#*.}"

if [ ! -x "$cache/kube-apiserver" ] || [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp" ]; then
  echo "kube build: building kube-apiserver v$KUBE_VERSION from the Go module proxy (first run only; ~15 min on 2 cores)"
  cd "$work/apiserver"
  rm -f go.mod go.sum
  go mod init flink-jar-gateway.test/kube-apiserver >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@v$KUBE_VERSION"
  go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" >/dev/null
  kmod="$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  # Every `k8s.io/X => ./staging/...` replace of kubernetes' own go.mod becomes `k8s.io/X => k8s.io/X v0.<minor>.<patch>`.
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._/-]*\) => \./staging/.*#\1#p' "$kmod"); do
    go mod edit -replace="$m=$m@$staging_version"
  done
  cat > tools.go <<'EOF'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
EOF
  go mod tidy -e >/dev/null
  go build -trimpath -o "$cache/kube-apiserver.tmp" \
    -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    k8s.io/kubernetes/cmd/kube-apiserver
  mv "$cache/kube-apiserver.tmp" "$cache/kube-apiserver"
fi

echo "kube build: building etcd v$ETCD_VERSION from the Go module proxy"
cd "$work/etcd"
rm -f go.mod go.sum
go mod init flink-jar-gateway.test/etcd >/dev/null 2>&1
go mod edit -require="go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
cat > main.go <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
go mod tidy >/dev/null
go build -trimpath -o "$cache/etcd.tmp" -ldflags="-s -w" .
mv "$cache/etcd.tmp" "$cache/etcd"

echo "$stamp" > "$stamp_file"
echo "kube build: kube-apiserver and etcd ready in $cache"
