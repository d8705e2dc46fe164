#!/bin/bash
# Ray 2.60.0 for the device (cp312), for the `ray` step of tput.py: the wheel less its Java jars,
# RLlib and the dashboard's JavaScript source maps, xz, split in two parts that ride with two
# calls next to .gpu/b (a call carries 64 MiB at most): REPO/.gpu/r1/ray.partaa,
# REPO/.gpu/r2/ray.partab and REPO/.gpu/r2/ray.sha256 (common.sh joins and checks them there).
# usage: bench/gpu/prep_ray.sh REPO     (about 4 minutes on 2 busy cores; downloads in $WORK/ray)
set -euo pipefail
REPO=$(cd "${1:?usage: prep_ray.sh REPO}" && pwd)
W=${WORK:-/work/gpuprep}/ray; mkdir -p "$W"
cd "$W"
ls ray-2.60.0-cp312-*.whl > /dev/null 2>&1 || env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null python3 -m pip download \
  --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d . ray==2.60.0
if [ ! -f ray.tar.xz ]; then
  rm -rf x && mkdir x && (cd x && unzip -q ../ray-2.60.0-cp312-*.whl)
  rm -rf x/ray/jars x/ray/rllib x/ray/dashboard/client/build/static/js/*.map
  (cd x && tar cf - ray ray-2.60.0.dist-info) | xz -T0 -6 > ray.tar.xz
fi
rm -rf parts && mkdir parts && split -b 15300000 ray.tar.xz parts/ray.part
mkdir -p "$REPO/.gpu/r1" "$REPO/.gpu/r2"
rm -f "$REPO/.gpu/r1/"* "$REPO/.gpu/r2/"*
cp parts/ray.partaa "$REPO/.gpu/r1/"; cp parts/ray.partab "$REPO/.gpu/r2/"
sha256sum ray.tar.xz | cut -d' ' -f1 > "$REPO/.gpu/r2/ray.sha256"
ls -la "$REPO/.gpu/r1" "$REPO/.gpu/r2"
