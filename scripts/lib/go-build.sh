# Sourced by the scripts that build a test server from the Go module proxy once into a cache
# (build-kube.sh, build-fake-gcs.sh): the Go check and the one-builder-at-a-time lock they share.

# require_go LABEL MIN_MINOR WHAT — stops with one line naming what to install when Go is missing
# or older than 1.MIN_MINOR (WHAT says what it would build).
require_go() {
  local label=$1 min=$2 what=$3 minor
  if ! command -v go >/dev/null 2>&1; then
    echo "$label: Go 1.$min+ is missing (it builds $what); install it from https://go.dev/dl/ (or: sudo apt-get install -y golang-go, if your distribution's is 1.$min or later)" >&2
    exit 1
  fi
  minor="$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
  if [ -z "$minor" ] || [ "$minor" -lt "$min" ]; then
    echo "$label: $(go env GOVERSION) is too old to build $what; install Go 1.$min+ from https://go.dev/dl/" >&2
    exit 1
  fi
}

# lock_build LABEL CACHE UP_TO_DATE — one builder at a time (two test runs on a fresh machine would
# otherwise both build); when the command UP_TO_DATE succeeds once the lock is held, another run
# built it meanwhile and this one stops. The lock is held until the script exits.
lock_build() {
  local label=$1 cache=$2 up_to_date=$3
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  if command -v flock >/dev/null 2>&1; then
    flock 9
    if "$up_to_date"; then
      echo "$label: $cache is up to date (built by another run)"
      exit 0
    fi
  fi
}
