#!/usr/bin/env bash
# Runs HERE (the workstation, with internet), from the repo root. Prepares what the GPU host lacks for
# tests/harness/device/gpu-run.sh: the wheels pinned in tests/harness/device/gpu-kit.txt (vllm==0.25.0 and
# the needs the device image does not carry), unpacked into one site tree, stripped of what this run never
# loads, packed as tar.xz and split into parts that each fit one `run` call (64 MiB travel limit).
#
#   PY312=python3.12 tests/harness/device/gpu-kit.sh   # -> .whl-gpu/p1/kit.part-0, .whl-gpu/p2/kit.part-1, ...
#
# .whl-gpu/ must be git-ignored (echo /.whl-gpu/ >> .git/info/exclude). Carry each .whl-gpu/pN in its own
# `run` call that copies it to /tmp/kit/ there; the last call carries the last part and runs gpu-run.sh.
# Left behind on purpose (see gpu_kit_resolve.py SKIP): FlashAttention-2 kernels (Hopper uses FA3), the Rust
# front end (vllm-rs), deep_gemm builds for other Pythons, flashinfer-cubin, cutlass-dsl, tilelang and the
# other heavy optional kernel packages; torch, triton, numpy, transformers... are the image's own.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PY312:-python3.12}          # markers and wheel tags as on the device (Python 3.12)
W=.whl-gpu
PART_MB=${PART_MB:-58}
NICE="nice -n 19 ionice -c3"
git check-ignore -q "$W/x" || { echo "$W is not git-ignored: echo /$W/ >> .git/info/exclude" >&2; exit 1; }
mkdir -p "$W/wheels"
plat=()
for n in 17 24 27 28 31 34 35; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
plat+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
pins=$(grep -v '^#' tests/harness/device/gpu-kit.txt | grep -v '^$')
# shellcheck disable=SC2086
$NICE "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d "$W/wheels" $pins
# One wheel per pinned name, nothing else: a stray older download would shadow the pinned one.
wheels=()
for pin in $pins; do
  name=${pin%%==*}; version=${pin#*==}
  norm=$(echo "$name" | tr 'A-Z-.' 'a-z__')
  f=$(ls "$W/wheels" | awk -v n="$norm" -v v="$version" 'BEGIN{IGNORECASE=1} {split($0,a,"-"); x=tolower(a[1]); gsub(/[-.]/,"_",x); if (x==n && a[2]==v) print}' | head -1)
  [ -n "$f" ] || { echo "no wheel for $pin" >&2; exit 1; }
  wheels+=("$W/wheels/$f")
done
rm -rf "$W/site" "$W"/p[0-9]*
$NICE "$PY" -m pip install -q --no-deps --no-compile --no-index --only-binary=:all: --python-version 3.12 \
  --implementation cp "${plat[@]}" --target "$W/site" "${wheels[@]}"
rm -f "$W/site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$W/site/vllm/vllm-rs"
find "$W/site/vllm/third_party/deep_gemm" -name '_C.cpython-*.so' ! -name '_C.cpython-312-*' -delete
find "$W/site" -name '*.a' -delete   # static libraries (xgrammar ships a 65 MB one): never loaded
rm -rf "$W/site/bin"                # console scripts carry this machine's interpreter path
(cd "$W/site" && find . -type f | sort > ../site-files.txt)
echo "site tree: $(du -sm "$W/site" | cut -f1) MiB, $(wc -l < "$W/site-files.txt") files"
# KIT_COMPRESS=gzip: about 230 MiB in 20 s instead of about 150 MiB in 20+ minutes of xz on a loaded 2-core
# machine; two more parts to carry, each a few seconds of device time (lib.sh's unpack_kit reads either).
if [ "${KIT_COMPRESS:-xz}" = gzip ]; then kit=kit.tar.gz; pack=(gzip -1); else kit=kit.tar.xz; pack=(xz -T2 -6); fi
$NICE tar -C "$W/site" -cf - . | $NICE "${pack[@]}" > "$W/$kit"
(cd "$W" && sha256sum "$kit" > kit.sha256 && split -b "${PART_MB}M" -d -a 1 "$kit" kit.part-)
i=1
for part in "$W"/kit.part-*; do
  mkdir -p "$W/p$i"; mv "$part" "$W/p$i/"; cp "$W/kit.sha256" "$W/p$i/"; i=$((i + 1))
done
rm -f "$W/$kit"
# The unpacked tree holds 100+ YAML files (ansible-core's own): `yamllint .` would walk into it.
rm -rf "$W/site"
ls -l "$W"/p*/
