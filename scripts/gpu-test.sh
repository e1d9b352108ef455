#!/usr/bin/env bash
# Builds stepprof and runs the recorder's real-GPU tests (tests/test_recorder_gpu.cpp:
# regions around kernels that spin a known time, CUDA events read back at the update
# boundary, with and without the boundary synchronization, a second thread on its own
# stream). Needs an NVIDIA GPU and driver (libcuda.so.1); no CUDA toolkit is needed (the
# kernel is PTX, JIT-compiled by the driver).
# Without a driver or a GPU it prints why and exits 0. Exit 1: a test failed, or a GPU is
# present but the tests skipped themselves (the recorder could not use it).
# Usage: scripts/gpu-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "gpu-test: skipped: $*"; exit 0; }

have_driver=0
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then have_driver=1; fi
ld_path=${LD_LIBRARY_PATH:-}
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib /usr/local/nvidia/lib64 ${ld_path//:/ }; do
  [ -e "$d/libcuda.so.1" ] && have_driver=1
done
[ "$have_driver" = 1 ] || skip "no NVIDIA driver (libcuda.so.1 not found)"
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  [ "$gpus" -gt 0 ] || skip "the NVIDIA driver lists no GPU (nvidia-smi -L)"
fi

scripts/install-deps.sh test
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target test_recorder_gpu test_recorder_device

echo "==> device timing logic (fake device clock)"
build/release/tests/test_recorder_device
echo "==> real GPU"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
build/release/tests/test_recorder_gpu 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { echo "gpu-test: FAILED (exit $status)"; exit 1; }
if grep -q '\[  SKIPPED \]' "$out"; then
  if [ "$gpus" -gt 0 ]; then
    echo "gpu-test: FAILED: nvidia-smi lists $gpus GPU(s) but the recorder could not use one (see the skip reason above)"
    exit 1
  fi
  skip "no usable CUDA device (see above)"
fi
echo "gpu-test: passed"
