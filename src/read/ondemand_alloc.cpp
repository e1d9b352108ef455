#include "ondemand_alloc.hpp"

#include <cstdint>
#include <memory>
#include <new>

namespace stepprof::detail {
namespace {

// The parser's string buffer is a private member. It is reached the one way the language
// allows without changing simdjson: naming it in an explicit instantiation, where access
// is not checked (C++20 [temp.spec.general]/6). One instantiation, in this file only.
using StringBuf = std::unique_ptr<std::uint8_t[]> simdjson::ondemand::parser::*;
StringBuf string_buf_member();
template <StringBuf M>
struct Access {
  friend StringBuf string_buf_member() { return M; }
};
template struct Access<&simdjson::ondemand::parser::string_buf>;

}  // namespace

void reserve_or_throw(simdjson::ondemand::parser& parser, std::size_t bytes) {
  const auto& buf = parser.*string_buf_member();
  if (parser.capacity() >= bytes && buf) return;
  if (parser.allocate(bytes, parser.max_depth()) == simdjson::MEMALLOC || !buf) throw std::bad_alloc();
}

}  // namespace stepprof::detail
