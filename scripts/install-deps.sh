#!/usr/bin/env bash
# Installs the Debian 12 packages stepprof needs, and only those that are missing
# (safe to run again). Usage: scripts/install-deps.sh [build|test]
#   build  compilers, CMake, Ninja and the libraries the analyzer and recorder use
#   test   build + what the tests need (GoogleTest, Google Benchmark, pytest,
#          Debian's PyTorch, headless Chromium, clang for the fuzzers)
set -euo pipefail
profile=${1:-build}

build_pkgs=(g++ cmake ninja-build pkg-config
            libsimdjson-dev libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
            libeigen3-dev libjemalloc-dev pybind11-dev python3-dev nodejs)
test_pkgs=(googletest libgtest-dev libgmock-dev libbenchmark-dev python3-pytest
           python3-torch python3-numpy chromium clang-14 libclang-rt-14-dev)

case "$profile" in
  build) want=("${build_pkgs[@]}") ;;
  test)  want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
  *) echo "usage: $0 [build|test]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
# npm comes with NodeSource's nodejs; Debian splits it into its own package.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

# The HTML report's browser test drives Chromium with playwright-core, which needs Node.js 20.
if [ "$profile" = test ] && command -v node >/dev/null 2>&1; then
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$node_major" -lt 20 ]; then
    echo "install-deps: Node.js $(node --version) found; the browser test needs Node.js 20 (e.g. NodeSource's nodejs)" >&2
  fi
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
