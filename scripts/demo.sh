#!/usr/bin/env bash
# Main demo: installs what is missing, builds (the plain packagers' way) and
# shows MPA at work: RFC 5044 Figures 5 and 6 built and decoded by uwarp, then
# the CRC32c speed of every implementation on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
./build/tools/uwarp-mpa demo "$@"
