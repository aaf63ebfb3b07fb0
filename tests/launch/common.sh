# Sourced by the launcher tests (tests/launch/*.sh). A test that cannot run here says why and
# exits 77 (ctest's SKIP_RETURN_CODE); the reason also goes to $HOOP_SKIP_DIR/<test>.skip, where
# the suite's skip check (tests/skip_check.py) reads it.

skip() {
  echo "SKIPPED: $*"
  if [ -n "${HOOP_SKIP_DIR:-}" ]; then
    mkdir -p "$HOOP_SKIP_DIR"
    printf '%s\n' "$*" > "$HOOP_SKIP_DIR/$(basename "$0" .sh).skip"
  fi
  exit 77
}

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# Skips unless every program is installed; $1 names the Debian packages that provide them.
require_programs() {
  local packages=$1
  shift
  for program in "$@"; do
    command -v "$program" >/dev/null || skip "$program is not installed (apt install $packages)"
  done
}

# A TCP port of the loopback interface that is free right now, and so is the one after it:
# hoop's store takes MASTER_PORT + 1, and other tests running beside this one take ephemeral
# ports of their own.
free_port() {
  python3 - <<'PY'
import socket
for _ in range(100):
    held = []
    try:
        a = socket.socket(); held.append(a); a.bind(("127.0.0.1", 0))
        port = a.getsockname()[1]
        if port >= 65535:
            continue
        b = socket.socket(); held.append(b); b.bind(("127.0.0.1", port + 1))
        print(port)
        break
    except OSError:
        continue
    finally:
        for s in held:
            s.close()
else:
    raise SystemExit("no two free ports in a row")
PY
}

# Every line of hoop-bench's table (rows starting with a size) has #wrong 0 in both columns;
# $1 is the output, $2 the number of rows expected at least.
check_bench_table() {
  local rows
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 { n++; if ($9 != 0 || $13 != 0) bad++ } END { print n + 0, bad + 0 }' <<<"$1")
  [ "${rows% *}" -ge "$2" ] || fail "hoop-bench printed ${rows% *} result rows, expected $2"
  [ "${rows#* }" = 0 ] || fail "hoop-bench found wrong elements"
  grep -q "Wrong elements *: 0 OK" <<<"$1" || fail "hoop-bench's summary does not say 0 wrong elements"
}
