#!/usr/bin/env bash
# tests/packaging/check_unit.sh UNIT CONFIG BIN_DIR — the systemd unit of the package is valid:
# `systemd-analyze verify` accepts it without a single warning (with ExecStart* pointing at the
# built binary, since /usr/bin/ratelimitd exists only once the package is installed), it has the
# directives the service relies on, and the packaged configuration passes `ratelimitd --check`.
set -euo pipefail
unit=$1 config=$2 bin=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for want in 'Type=notify' 'ExecReload=/bin/kill -HUP $MAINPID' 'DynamicUser=yes' \
            'NoNewPrivileges=yes' 'ProtectSystem=strict' 'RestartPreventExitStatus=2' \
            'ExecStart=/usr/bin/ratelimitd --config /etc/ratelimit/ratelimit.yaml'; do
  grep -qxF -- "$want" "$unit" || fail "$unit lacks the line: $want"
done
sed "s|/usr/bin/ratelimitd|$bin/ratelimitd|g" "$unit" > "$tmp/ratelimitd.service"
out=$(timeout 60 systemd-analyze verify "$tmp/ratelimitd.service" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify printed warnings:
$out"
echo "systemd-analyze verify: no warnings"
timeout 10 "$bin/ratelimitd" --config "$config" --check || fail "the packaged $config does not pass --check"
