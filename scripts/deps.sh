#!/usr/bin/env bash
# Installs the Debian 12 packages uwarp builds and tests with. Idempotent:
# when everything is present it only checks and returns.
#   libisal-dev     Intel ISA-L: CRC32c at memory speed
#   libcmocka-dev   unit test framework
#   clang, libclang-rt-14-dev   libFuzzer and clang sanitizer runtimes
#   cmake, gcc, make, pkg-config   the build
#   tshark          Wireshark's dissectors check our wire format in the tests
#   libcap2-bin     setcap/getcap, to let tshark capture without root if needed
set -euo pipefail

PKGS=(build-essential cmake pkg-config clang libclang-rt-14-dev libisal-dev libcmocka-dev
      tshark libcap2-bin)
# `deps.sh bench` adds what bench/report needs (the plot).
if [ "${1:-}" = bench ]; then
  PKGS+=(gnuplot-nox)
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
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
