// libFuzzer entry point: stepprof::fuzz::kineto (fuzz/harness.hpp). Run by scripts/fuzz.sh.
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  stepprof::fuzz::kineto(data, size);
  return 0;
}
