# tests/daemon/catalog_lib.sh - shared setup of the integration tests of the
# daemon's artifact catalog (tests/daemon/catalog_*_test.sh) and of the
# feedback flow end to end (tests/feedback/); source it. Defaults point at
# this checkout's build directories for manual runs; scripts/test.sh passes
# the real ones.
PT_SRC=${PT_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
: "${PT_BUILD_DEV:=$PT_SRC/build/dev}"
: "${PT_BUILD_PROF:=$PT_SRC/build/profile}"
# shellcheck source=../lib.sh
. "$PT_SRC/tests/lib.sh"
CAT_DIR=$PT_SRC/tests/daemon
export POLYTOKEN_RESPONDER_DELAY_MS=1

ipc() { python3 "$CAT_DIR/catalog_client.py" "$POLYTOKEN_HOME" "$@"; }
mkprofile() { python3 "$PT_SRC/tests/mkprofile.py" "$@"; }
# jget JSON EXPR: evaluates a Python expression over the parsed JSON `j`.
jget() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }

# new_active_session BUILD: creates a session, attaches it (so it is the
# active one) and sets SID / PDIR (its profiling directory, created).
new_active_session() {
  SID=$("$1/polytoken" new --name catalog-test)
  ipc sessions.attach "{\"id\":\"$SID\"}" >/dev/null || fail "attach $SID failed"
  PDIR=$POLYTOKEN_HOME/sessions/$SID/profiling
  mkdir -p "$PDIR"
}
