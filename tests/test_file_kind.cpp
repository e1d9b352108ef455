// file_kind (src/read/file_kind.hpp): what a file holds, judged from its first bytes.
#include <gtest/gtest.h>

#include <string>

#include "file_kind.hpp"
#include "test_util.hpp"

namespace stepprof::detail {
namespace {

using namespace std::literals;

class FileKindTest : public test::TempDirTest {};

const std::string kRecord = R"({"type": "update", "rank": 1, "step": 3, "wall_ms": 12.5})";

TEST(UnreadableFormat, TextAndCrashZerosAreReadable) {
  EXPECT_EQ(unreadable_format(""), "");
  EXPECT_EQ(unreadable_format(kRecord + "\n"), "");
  EXPECT_EQ(unreadable_format(kRecord + std::string(5000, '\0') + kRecord), "");  // a crash's zeros
  EXPECT_EQ(unreadable_format(std::string(4096, '\0')), "");
  EXPECT_EQ(unreadable_format("\x1b[31mred\x1b[0m\f\t\r\n"), "");  // terminal colours, form feed
  // 15 control characters, however few the other bytes: not enough to call it binary.
  EXPECT_EQ(unreadable_format(std::string(15, '\x01') + "x"), "");
  // 20 in 10,000 bytes (0.2 %): a log with a few stray bytes, still text.
  std::string mostly_text(10'000, 'a');
  for (std::size_t i = 0; i < 20; ++i) mostly_text[i * 400] = '\x02';
  EXPECT_EQ(unreadable_format(mostly_text), "");
}

TEST(UnreadableFormat, OtherFormatsAreNamed) {
  EXPECT_TRUE(unreadable_format("\xFD" "7zXZ\0\0\x04"s).starts_with("xz-compressed data: "));
  EXPECT_TRUE(unreadable_format("BZh91AY&SY").starts_with("bzip2-compressed data: "));
  EXPECT_EQ(unreadable_format("BZhx is how this text starts"), "");  // no block size digit: text
  EXPECT_TRUE(unreadable_format("\x28\xB5\x2F\xFD\x04\x58").starts_with("zstd-compressed data: "));
  EXPECT_TRUE(unreadable_format("PK\x03\x04\x14\0"s).starts_with("a zip archive: "));
  EXPECT_TRUE(unreadable_format("\xFF\xFE{\0\"\0"s).starts_with("UTF-16 text: "));
  EXPECT_TRUE(unreadable_format("\xFF\xFE\0\0{\0\0\0"s).starts_with("UTF-32 text: "));
  EXPECT_TRUE(unreadable_format("{\0\"\0t\0"s).starts_with("UTF-16LE text: "));
  EXPECT_TRUE(unreadable_format("\0{\0\"\0t"s).starts_with("UTF-16BE text: "));
  // A burst of damage in a log that holds records: read, its bad lines said one by one.
  std::string damaged = kRecord + "\n";
  for (int i = 0; i < 200; ++i) damaged += "\x01\x02\x03\x04";
  EXPECT_EQ(unreadable_format(damaged + "\n" + kRecord + "\n"), "");
  // DEL is legal in a JSON string: a name full of them is text.
  EXPECT_EQ(unreadable_format(std::string(100, '\x7f')), "");
  // 16 control characters in 1,000 bytes (1.6 %): binary.
  std::string bin(1000, 'a');
  for (std::size_t i = 0; i < 16; ++i) bin[i * 60] = '\x03';
  EXPECT_EQ(unreadable_format(bin),
            "binary data, not text (16 of its first 1000 bytes are control characters): not a step log or a "
            "profiler trace");
}

TEST_F(FileKindTest, WhatIsReadFromADirectory) {
  auto why = [&](const std::string& content) { return not_a_log(write("f.json", content)); };
  EXPECT_EQ(why(kRecord + "\n"), "");
  EXPECT_EQ(why("\xEF\xBB\xBF  " + kRecord + "\n"), "");  // a byte-order mark, spaces
  EXPECT_EQ(why(""), "");                                   // empty: the reader warns
  EXPECT_EQ(why(std::string(100, '\0') + kRecord + "\n"), "");  // a crash's zeros first
  EXPECT_EQ(why(R"({"type": "upd)"), "");                   // cut: the reader says so
  EXPECT_EQ(why(R"({"step": 3, "type": "update", "wall_ms": 1})" "\n"), "");  // "type" not first
  EXPECT_EQ(why(R"({"oops" 1})" "\n"), "");                 // damaged: read, and said
  EXPECT_EQ(why("| a | b |\n"), "");                        // a markdown table
  // A damaged start before the records: a cut first record, a stray print, a lone "{",
  // junk bytes. The file is read (and the damage said): a rank must not vanish.
  EXPECT_EQ(why(kRecord.substr(20) + "\n" + kRecord + "\n"), "");
  EXPECT_EQ(why("Warning: NCCL something\n" + kRecord + "\n"), "");
  EXPECT_EQ(why("{\n" + kRecord + "\n"), "");
  EXPECT_EQ(why("xx" + kRecord + "\n"), "");
  EXPECT_EQ(why("[1, 2]\n" + kRecord + "\n"), "");
  // More than 64 KiB of comment lines before the first record: read, not "a text file".
  std::string env;
  while (env.size() < 70'000) env += "# env dump: SOME_VARIABLE=some value\n";
  EXPECT_EQ(why(env + kRecord + "\n"), "");
  EXPECT_NE(why("# notes\nsome text\n").find("a text file"), std::string::npos);
  EXPECT_NE(why(R"({"hidden_size": 4096})" "\n").find("without a \"type\" field"), std::string::npos);
  EXPECT_NE(why("{\n  \"a\": 1\n}\n").find("a JSON document over several lines"), std::string::npos);
  EXPECT_NE(why("{\n  \"schema\": \"stepprof.report/1\"\n}\n").find("stepprof's own output (schema \"stepprof.report/1\""),
            std::string::npos);
  EXPECT_NE(why(R"({"schema": "stepprof.whatif/1", "x": 1})" "\n").find("stepprof whatif --format json"),
            std::string::npos);
  EXPECT_NE(why("[1, 2]\n").find("a JSON array"), std::string::npos);
  EXPECT_NE(why("[\n  {\"step\": 1}\n]\n").find("a JSON array"), std::string::npos);
  EXPECT_NE(why("[rank1] step 3 loss 1.2\n").find("a text file"), std::string::npos);
  EXPECT_NE(why("2026-11-01 12:00:00 INFO start\n").find("a text file"), std::string::npos);
  // A profiler trace is read; stepprof's own trace export is not.
  EXPECT_EQ(why(R"({"schemaVersion": 1, "traceEvents": []})" "\n"), "");
  EXPECT_NE(why("{\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"generator\":\"stepprof trace\"},\n\"traceEvents\": []}\n")
                .find("stepprof's own trace export"),
            std::string::npos);
  // Re-serialized (jq, Python's json.dump: a space after the colon, or pretty-printed).
  EXPECT_NE(why("{\"displayTimeUnit\": \"ms\", \"otherData\": {\"generator\": \"stepprof trace\"}, \"traceEvents\": []}\n")
                .find("stepprof's own trace export"),
            std::string::npos);
  EXPECT_NE(why("{\n  \"otherData\": {\n    \"generator\" :\n      \"stepprof trace\"\n  },\n  \"traceEvents\": []\n}\n")
                .find("stepprof's own trace export"),
            std::string::npos);
  EXPECT_EQ(stepprof_trace_export(R"({"generator": "stepprof tracer"})"), "");
  EXPECT_EQ(stepprof_trace_export(R"({"generator": 1, "x": "stepprof trace"})"), "");
}

}  // namespace
}  // namespace stepprof::detail
