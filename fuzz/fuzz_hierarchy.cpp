// libFuzzer entry point: stepprof::fuzz::hierarchy (fuzz/harness.hpp). Run by scripts/fuzz.sh.
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  stepprof::fuzz::hierarchy(data, size);
  return 0;
}
