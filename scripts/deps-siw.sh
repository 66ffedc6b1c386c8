#!/usr/bin/env bash
# Opt-in prerequisites of the live Linux siw interop tests (ctest -L siw, see
# tests/interop/README.md): installs the Debian 12 host packages the siw-vm
# harness needs (../shared/siw-vm/README.md section 1), then builds the guest
# kernel + initramfs once with `siw-peer.sh build`. Idempotent: when all is
# present the apt step only checks and the build returns at once.
#
#   qemu-system-x86                  runs the guest (TCG or KVM)
#   busybox-static cpio kmod         assemble the guest initramfs
#   gcc-12 make binutils xz-utils    build siw.ko out of tree for the guest kernel
#   tcpdump                          wire captures the tests check (as root)
#   python3                          the harness's mpa_tool.py / iwarp_decode.py
#
# The shared tree is $UWARP_SHARED if set, else ../shared beside the
# repository. The guest goes to $SIWVM_WORK (default ~/.cache/siw-vm).
# Not part of scripts/deps.sh on purpose: CI does not run the siw tests, and
# the guest build downloads ~225 MB and takes a few minutes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
shared=${UWARP_SHARED:-$here/../../shared}
peer=$shared/siw-vm/siw-peer.sh
if [ ! -x "$peer" ]; then
  echo "deps-siw: $peer not found; set UWARP_SHARED to the shared tree (with siw-vm/)" >&2
  exit 1
fi

PKGS=(qemu-system-x86 busybox-static cpio kmod gcc-12 make binutils xz-utils tcpdump python3)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps-siw: all ${#PKGS[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps-siw: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  echo "deps-siw: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The guest payload is built from Debian packages fetched with apt-get
# download, which needs package lists even when nothing had to be installed.
if ! apt-cache show linux-image-amd64 >/dev/null 2>&1; then
  echo "deps-siw: apt has no package lists; running apt-get update"
  if [ "$(id -u)" -eq 0 ]; then apt-get update -q; else sudo apt-get update -q; fi
fi

echo "deps-siw: building the siw guest (first time: a few minutes)"
"$peer" build
"$peer" paths
