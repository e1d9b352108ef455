// libFuzzer entry point: stepprof::fuzz::log (fuzz/harness.hpp). Run by scripts/fuzz.sh.
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  stepprof::fuzz::log(data, size);
  return 0;
}
