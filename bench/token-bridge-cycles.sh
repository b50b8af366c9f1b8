#!/usr/bin/env bash
# Flink's own delegation-token manager (flink-runtime, as in a JobManager) driving the token bridge
# beside a second provider, on a virtual timeline: the other provider's obtains per hour before and
# after the bridge followed the gateway's nextUpdateAt, idle and with jobs arriving, a new job's
# first-token latency, and the gap in delivery after the other provider fails once. Prints JSON.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
mvn -q -B -f "$here/token-bridge/pom.xml" test \
  -Dtest=FlinkManagerCyclesTest#measuresCallsPerHourAndFirstTokenLatency -Dbridge.cycles.json="$out" >&2
cat "$out"
