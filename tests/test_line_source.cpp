// LineSource (src/read/line_source.hpp): the line reader under the log reader. These
// tests cover what a crash leaves: a zero-filled tail longer than a chunk, which used to
// be held whole in memory before it was counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "line_source.hpp"
#include "test_util.hpp"

namespace stepprof::detail {
namespace {

using namespace std::literals;

class LineSourceTest : public test::TempDirTest {};

std::size_t zeros_in(std::string_view s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\0')); }

TEST_F(LineSourceTest, AZeroFilledTailCostsAChunkNotItsLength) {
  constexpr std::size_t kChunk = 1 << 16, kZeros = 10'000'000;
  const auto path = write("tail.jsonl", "first\nabc" + std::string(kZeros, '\0') + "xyz\nlast");
  std::string err;
  auto src = LineSource::open(path, err, kChunk);
  ASSERT_TRUE(src) << err;
  std::string_view line;
  bool terminated = false;
  ASSERT_TRUE(src->next(line, terminated));
  EXPECT_EQ(line, "first");
  EXPECT_EQ(src->zeros_dropped(), 0u);

  ASSERT_TRUE(src->next(line, terminated));
  EXPECT_TRUE(terminated);
  EXPECT_EQ(src->line_number(), 2u);
  EXPECT_TRUE(line.starts_with("abc\0"sv)) << line.substr(0, 8);
  EXPECT_TRUE(line.ends_with("\0xyz"sv));
  // Every zero is either in the line or counted, and the line is at most a few chunks.
  EXPECT_EQ(zeros_in(line) + src->zeros_dropped(), kZeros);
  EXPECT_GT(src->zeros_dropped(), 0u);
  EXPECT_LE(line.size(), 3 * kChunk);

  ASSERT_TRUE(src->next(line, terminated));
  EXPECT_FALSE(terminated);
  EXPECT_EQ(line, "last");
  EXPECT_EQ(src->zeros_dropped(), 0u);
  EXPECT_FALSE(src->next(line, terminated));
}

TEST_F(LineSourceTest, ShortZeroRunsAndTextBetweenThemAreKept) {
  // Runs up to kZerosKept bytes are left whole; text between longer runs is kept in order.
  const std::size_t keep = LineSource::kZerosKept;
  std::string text;
  std::string expected;
  for (int i = 0; i < 20'000; ++i) {  // about 2.5 MB without a newline: many chunks
    text += "r" + std::to_string(i) + std::string(keep, '\0') + "s" + std::string(keep + 100, '\0');
    expected += "r" + std::to_string(i) + std::string(keep, '\0') + "s";
  }
  const auto path = write("runs.jsonl", text + "\n");
  std::string err;
  auto src = LineSource::open(path, err, 1 << 16);
  ASSERT_TRUE(src) << err;
  std::string_view line;
  bool terminated = false;
  ASSERT_TRUE(src->next(line, terminated));
  // Outside the last chunk (read with the newline, not squeezed) each long run is cut to
  // `keep` bytes; so removing the zeros leaves exactly the text, and the counts add up.
  std::string text_only, expected_text;
  std::copy_if(line.begin(), line.end(), std::back_inserter(text_only), [](char c) { return c != '\0'; });
  std::copy_if(expected.begin(), expected.end(), std::back_inserter(expected_text), [](char c) { return c != '\0'; });
  EXPECT_EQ(text_only, expected_text);
  EXPECT_EQ(zeros_in(line) + src->zeros_dropped(), zeros_in(text));
  EXPECT_GT(src->zeros_dropped(), 0u);
  EXPECT_FALSE(src->next(line, terminated));
}

TEST_F(LineSourceTest, ACancelStopsALineThatNeverEnds) {
  const auto path = write("long.jsonl", std::string(5'000'000, 'x'));
  std::atomic<bool> cancel{true};
  std::string err;
  auto src = LineSource::open(path, err, 1 << 16, &cancel);
  ASSERT_TRUE(src) << err;
  std::string_view line;
  bool terminated = false;
  EXPECT_FALSE(src->next(line, terminated));
}

}  // namespace
}  // namespace stepprof::detail
