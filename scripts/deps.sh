#!/usr/bin/env bash
# Installs the Debian 12 packages uwarp builds and tests with. Idempotent:
# when everything is present it only checks and returns.
#   libisal-dev     Intel ISA-L: CRC32c at memory speed
#   libcmocka-dev   unit test framework
#   clang, libclang-rt-14-dev   libFuzzer and clang sanitizer runtimes
#   clang-format                the style check (tests/style)
#   cmake, gcc, make, pkg-config   the build
#   tshark          Wireshark's dissectors check our wire format in the tests
#   libcap2-bin     setcap/getcap, to let tshark capture without root if needed
# The real programs the preload library is tested with (tests/apps, label apps)
# and measured with (bench/preload/run.sh):
#   iperf3          bulk throughput, -R, -P 4, byte counts in --json
#   redis-server, redis-tools   redis-server, redis-benchmark and redis-cli
#   nginx-light     nginx serving a large file in the foreground
#   socat           relays a file between a listener and a client
#   memcached       a threaded server (-t 4) with many connections
#   sockperf        ping-pong latency (bench/preload)
#   curl            HTTP client to nginx and python3 -m http.server
#   python3         the asyncio echo server and client, small socket clients
#   iproute2        ss: the app tests watch listeners and pick free ports
set -euo pipefail

PKGS=(build-essential cmake pkg-config clang clang-format libclang-rt-14-dev libisal-dev libcmocka-dev
      tshark libcap2-bin
      iperf3 redis-server redis-tools nginx-light socat memcached sockperf curl python3 iproute2)
# `deps.sh bench` adds what bench/ needs: bench/report's plot (gnuplot-nox)
# and bench/preload's wall-time comparison (hyperfine).
if [ "${1:-}" = bench ]; then
  PKGS+=(gnuplot-nox hyperfine)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# redis-server, memcached and nginx start their system services when they are
# installed; the tests start their own private instances, and a service on
# port 6379, 11211 or 80 would only be in the way (in a container it may not
# even start). A policy-rc.d answering 101 ("action forbidden") stops
# invoke-rc.d from starting them, for the length of the install only; one that
# is already there (Docker images ship one) is left as it is.
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
  trap '$SUDO rm -f "$POLICY"' EXIT
  printf '#!/bin/sh\n# scripts/deps.sh: no service starts during the install\nexit 101\n' |
    $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod 755 "$POLICY"
fi
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
