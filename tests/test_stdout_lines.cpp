// The lines of a job's stdout: launcher and collector prefixes, and other output told
// from records and damaged pieces of them (src/read/stdout_lines.hpp).
#include "stdout_lines.hpp"

#include <gtest/gtest.h>

#include <string>

namespace stepprof::detail {
namespace {

const std::string kRecord = R"({"type": "update", "rank": 3, "step": 1, "wall_ms": 5})";

TEST(StdoutLines, KnownPrefixesAreMeasured) {
  // Each prefix as its tool writes it, and the length of what comes before the record.
  const std::pair<std::string, std::size_t> cases[] = {
      {"[rank3]:", 8},
      {"[default12]:", 12},
      {"3: ", 3},
      {"2026-12-03T10:00:00.123456789Z stdout F ", 40},
      {"2026-12-03T10:00:00.123456789Z stderr P ", 40},
      {"2026-12-03T10:00:00Z ", 21},
      {"2026-12-03T10:00:00.5+01:00 ", 28},
      {"[pod/train-0/main] ", 19},
      {"2026-12-03T10:00:00.1Z [rank3]:", 31},  // kubectl --timestamps over torchrun's prefix
      {"[pod/train-0/main] 2026-12-03T10:00:00Z ", 40},
      {" 45%|####5     | 9/20 [00:09<00:11,  1.0it/s]\r", 46},  // a progress bar, then the record
      {"\r 45%|####5     | 9/20 [00:09<00:11,  1.0it/s]", 46},  // tqdm: the bar redrawn, the record after it
      {"100%|##########| 10/10 [00:01<00:00]\r", 37},  // a bar without a rate: no letter in it
  };
  for (const auto& [prefix, length] : cases) EXPECT_EQ(known_prefix_length(prefix + kRecord), length) << prefix;
}

TEST(StdoutLines, TerminalCodesAfterARecordAreMeasured) {
  // ECMA-48 control sequences (a colour reset, an erase to the end of the line) and blanks
  // after the record's closing brace; anything else there is no such suffix.
  EXPECT_EQ(trailing_terminal_codes(kRecord + "\x1b[0m"), 4u);
  EXPECT_EQ(trailing_terminal_codes(kRecord + " \x1b[0m\x1b[K\r"), 9u);
  EXPECT_EQ(trailing_terminal_codes(kRecord + "\x1b[38;5;208m"), 11u);
  EXPECT_EQ(trailing_terminal_codes(kRecord + "\x1b(B\x1b[m"), 6u);  // tput sgr0
  EXPECT_EQ(trailing_terminal_codes(kRecord + "\x1b("), 0u);        // cut before its final byte
  EXPECT_EQ(trailing_terminal_codes(kRecord), 0u);
  EXPECT_EQ(trailing_terminal_codes(kRecord + "  "), 0u);               // blanks alone: no code
  EXPECT_EQ(trailing_terminal_codes(kRecord + "\x1b[0m done"), 0u);     // text after the code
  EXPECT_EQ(trailing_terminal_codes(kRecord + "\x1b]0;title\x07"), 0u);  // an OSC sequence, not CSI
  EXPECT_EQ(trailing_terminal_codes(kRecord + "\x1b["), 0u);            // cut before its final byte
  EXPECT_EQ(trailing_terminal_codes("\x1b[0m"), 0u);                    // no record before it
}

TEST(StdoutLines, CriLinesGiveTheirTagStreamAndContent) {
  // The CRI logging format: `TIME STREAM TAG CONTENT`, one blank between the fields.
  const std::string t = "2026-12-03T10:00:00.123456789Z";
  struct Case {
    std::string line;
    std::size_t content_at;
    bool partial, to_stderr;
  };
  const Case cases[] = {
      {t + " stdout F " + kRecord, t.size() + 10, false, false},
      {t + " stdout P {\"type\": \"upd", t.size() + 10, true, false},
      {t + " stderr P  leading blank kept", t.size() + 10, true, true},
      {t + " stderr F", t.size() + 9, false, true},  // an empty line
      {"2026-12-03T10:00:00+01:00 stdout F x", 35, false, false},
  };
  for (const auto& c : cases) {
    const CriLine cri = cri_line(c.line);
    EXPECT_EQ(cri.content_at, c.content_at) << c.line;
    EXPECT_EQ(cri.partial, c.partial) << c.line;
    EXPECT_EQ(cri.to_stderr, c.to_stderr) << c.line;
  }
  for (const std::string& line : {kRecord, t + " " + kRecord, t + " stdout X " + kRecord, t + "  stdout P x",
                                 t + " stdout Px", t + " stdin P x", std::string("2026-12-03 10:00:00Z stdout P x")})
    EXPECT_EQ(cri_line(line).content_at, 0u) << line;
}

TEST(StdoutLines, DockerEntriesAreUnwrapped) {
  // Docker's json-file driver: the job's line JSON-escaped in `log`, with its newline
  // unless Docker split the line.
  const std::string t = R"(,"time":"2026-12-03T10:00:00.1Z"})";
  DockerLine d = docker_line(R"({"log":"{\"type\": \"update\"}\n","stream":"stdout")" + t);
  EXPECT_TRUE(d.is_docker);
  EXPECT_FALSE(d.partial);
  EXPECT_FALSE(d.to_stderr);
  EXPECT_EQ(d.text, R"({"type": "update"})");
  d = docker_line(R"({"log":"{\"type\": \"upd","stream":"stderr")" + t);
  EXPECT_TRUE(d.is_docker && d.partial && d.to_stderr);
  EXPECT_EQ(d.text, R"({"type": "upd)");
  d = docker_line(R"({"log":"\n","stream":"stdout")" + t);  // an empty line
  EXPECT_TRUE(d.is_docker && !d.partial && d.text.empty());
  for (const std::string& line :
       {kRecord, std::string(R"({"log":"x\n","stream":"stdout"})"),                 // no time
        std::string(R"({"log":"x\n","stream":"stdin")") + t,                         // no such stream
        std::string(R"({"log":1,"stream":"stdout")") + t,                             // not a string
        std::string(R"({"log":"x\n","stream":"stdout","type":"update")") + t,        // a record
        std::string(R"({"log":"x\n","stream":"stdout","time":"2026-12-03T10:00)"),  // cut
        std::string(R"( {"log":"x\n","stream":"stdout")") + t})                      // not Docker's form
    EXPECT_FALSE(docker_line(line).is_docker) << line;
}

TEST(StdoutLines, OtherTextIsNoPrefix) {
  for (const std::string prefix : {"# ", "// ", "> ", "- ", "+", "\x01\x02", "rank3: ", "[rank]:", "[rank3] ",
                                   "12:", "2026-12-03 10:00:00 ", "2026-12-03T10:00:00.1 ", "[pod/a b] ",
                                   "ValueError: rejected record ", ": 0.128}\r", "# \r"})
    EXPECT_EQ(known_prefix_length(prefix + kRecord), 0u) << prefix;
  EXPECT_EQ(known_prefix_length(kRecord), 0u);
}

TEST(StdoutLines, OtherOutputIsTextThatHoldsNoRecord) {
  for (const std::string line :
       {"NCCL INFO Channel 00/02 : 0 1 2 3", "node1:123:456 [0] NCCL INFO Using network IB",
        "[2026-12-03 10:00:01,234] [INFO] [logging.py:96:log_dist] step=10", "[1/20] loss=1.25",
        " 45%|####5     | 9/20 [00:09<00:11,  1.0it/s]\r", "{'loss': 1.234, 'grad_norm': 0.5, 'epoch': 0.1}",
        "Warning: \"foo\" is deprecated, use bar", "\x1b[32mstarting\x1b[0m", "Schrittweite geändert",
        "(RayTrainWorker pid=123) {'loss': 1.0, 'epoch': 2}", "    assert x == {'a': 1}",
        // Separator lines of tables and banners (a Lightning model summary, rich's boxes).
        "-----------------------------------------", "===", "| --- | --- |", "+-----+-----+",
        "\xE2\x94\x8F\xE2\x94\x81\xE2\x94\x81\xE2\x94\x93", "\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90",
        // A Python 3.11 traceback printed to stdout (traceback.print_exc(file=sys.stdout)):
        // its source line subscripts by string keys, its caret line marks the expression.
        "    y = batch[\"x\"] + batch[\"labels\"]", "                     ~~~~~^^^^^^^^^^", "    ^^^^^^^^^^^", "        ^", "   ^^", "  ~^~",
        "    loss = out[\"logits\"][0][\"tok\"].sum()", "    v = f(x)[\"k\"]"})
    EXPECT_TRUE(other_output(line)) << line;
}

TEST(StdoutLines, DamagedRecordsAndJsonAreNotOtherOutput) {
  for (const std::string& line :
       {std::string(R"("micro_batch": 8, "accumulation": 2})"),  // a record cut at its start
        std::string(R"(ples": 4, "frames"  : [1, 2)"),              // a middle piece, key before blanks
        std::string(R"(8, 9], "ba)"),                               // ... cut inside a key
        std::string(R"(total")"),                                   // ... or at a key's end
        std::string("ples\": 4, \"frames\"\t: [1, 2"),             // ... before a tab
        std::string("0.25, 0.5, 0.75"),                            // numbers only
        std::string("wall_ms 5}"),                                  // a record's tail
        std::string("[\"a\", \"b\"]"),                              // a JSON value
        std::string("shape\": [\"a\"]"),                              // a piece: `[` after a blank
        std::string("ids\":[\"x\"]"),                                  // ... or after `:`
        std::string("x[\"a\\\"b\"] cut"),                             // an escape: not a plain key
        std::string("\"a string\""),
        std::string("text with a \x01 control byte"),
        std::string("bad \xff\xfe UTF-8"),
        std::string("--"),                                          // too short for a separator
        std::string("-1"),                                          // a number
        std::string("\xE2\x94"),                                  // a box character cut short
        std::string("")})
    EXPECT_FALSE(other_output(line)) << line;
}

// The job's metrics printed as JSON among its records are its output (a step number and
// a rank too); an object with a record's own fields is a record that lost its type (an
// error, as before).
TEST(StdoutLines, TheJobsOwnJsonIsToldFromRecordsThatLostTheirType) {
  for (const std::string line : {R"({"loss": 0.52, "lr": 0.0003})", R"({"loss": NaN, "grad_norm": Infinity})",
                                 R"({"step": 5, "loss": 1.2})", R"({"rank": 0, "step": 5, "loss": 1.2})",
                                 R"({"eval": {"step": 4, "wall_ms": 9}})", "{}", R"({"epoch": 1, "ste\u0070s": 9})"})
    EXPECT_TRUE(json_output_of_the_job(line)) << line;
  for (const std::string& line : std::initializer_list<std::string>{
           kRecord, R"({"step": 3, "wall_ms": 5})", R"({"rank": 0, "world_size": 4, "micro_batch": 8})",
           R"({"loss": 1, "counts": {"samples": 8}})", R"({"wall\u005fms": 3})", R"({"loss": 0.5,)", "[1, 2]",
           R"("text")", "not json"})
    EXPECT_FALSE(json_output_of_the_job(line)) << line;
}

}  // namespace
}  // namespace stepprof::detail
