// The log reader on the real log, its other encodings, and every kind of bad input.
// Expected values are read off the real log by hand (see the line quoted in each test)
// or follow from the small inputs written in the test.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <algorithm>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "stepprof/analysis/padding.hpp"
#include "stepprof/reader.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace stepprof;

namespace {

const std::string kSource = STEPPROF_SOURCE_DIR;
const std::string kRealLog = kSource + "/examples/qwen-vggt/rank1.jsonl";
const std::string kRealTable = kSource + "/examples/qwen-vggt/rank1.table.md";

const std::string kConfig =
    R"({"type": "config", "rank": 1, "world_size": 4, "micro_batch": 8, "accumulation": 2, "global_batch": 64})";

std::string update(int step, double wall = 100.0, const std::string& extra = "") {
  return R"({"type": "update", "rank": 1, "step": )" + std::to_string(step) + R"(, "wall_ms": )" +
         std::to_string(wall) + R"(, "cuda_stream_ms": {"fwd": 40.0, "bwd": 50.0}, "cpu_call_ms": {"fwd": 39.0}, )" +
         R"("calls": {"fwd": 2, "bwd": 2}, "counts": {"samples": 16})" + extra + "}";
}

class ReaderTest : public test::TempDirTest {
 protected:

  Dataset read(const std::vector<std::string>& files, bool strict = false, std::optional<StepRange> steps = {}) {
    diag_ = Diagnostics(strict);
    ReadOptions opt;
    opt.steps = steps;
    return read_logs(expand_inputs(files, diag_), opt, diag_);
  }

  const Diagnostic* first(Problem p) const {
    for (const auto& d : diag_.kept())
      if (d.problem == p) return &d;
    return nullptr;
  }

  // The kept diagnostics of kind `p`, in order (valid until the next read()).
  std::vector<const Diagnostic*> all(Problem p) const {
    std::vector<const Diagnostic*> out;
    for (const auto& d : diag_.kept())
      if (d.problem == p) out.push_back(&d);
    return out;
  }

  Diagnostics diag_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_F(ReaderTest, RealLogAllRecordsAndFields) {
  const Dataset d = read({kRealLog});
  EXPECT_EQ(diag_.total(), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  const RankLog& r = d.ranks[0];
  EXPECT_EQ(r.rank, 1);
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->world_size, 4);
  EXPECT_EQ(r.config->micro_batch, 8);
  EXPECT_EQ(r.config->accumulation, 2);
  EXPECT_EQ(r.config->global_batch, 64);
  EXPECT_EQ(r.config->model, "/models/Qwen3.5-4B");
  // Fields stepprof has no typed member for are kept verbatim.
  ASSERT_NE(r.config->find("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_EQ(r.config->find("NCCL_NVLS_ENABLE")->json, "\"0\"");
  EXPECT_EQ(r.config->find("supervised_token_loss")->json, "true");
  EXPECT_EQ(r.config->fields.size(), 15u);  // 16 keys in the record, minus "type"

  ASSERT_EQ(r.updates.size(), 20u);
  EXPECT_EQ(r.updates.front().step, 11);
  EXPECT_EQ(r.updates.back().step, 30);
  // Line 2 of the real log (step 11).
  const UpdateRecord& u = r.updates.front();
  EXPECT_DOUBLE_EQ(u.wall_ms, 15479.411385953426);
  const auto single = d.regions.find("vggt_single");
  ASSERT_TRUE(single);
  const RegionSample* s = u.region(*single);
  ASSERT_NE(s, nullptr);
  EXPECT_DOUBLE_EQ(*s->device_ms, 6007.375244140625);
  EXPECT_DOUBLE_EQ(*s->host_ms, 6007.80863314867);
  EXPECT_EQ(*s->calls, 16);
  EXPECT_FALSE(s->parent.has_value());  // this log records no parents
  EXPECT_EQ(u.counter(*d.counters.find("token_slots")), 49672);
  EXPECT_EQ(u.counter(*d.counters.find("supervised_tokens")), 64);
  ASSERT_EQ(u.frame_histogram.size(), 4u);
  EXPECT_EQ(u.frame_histogram[0], (std::pair<std::int64_t, std::int64_t>{9, 13}));
  ASSERT_EQ(u.input_shapes.size(), 2u);
  EXPECT_EQ(u.input_shapes[0].dims, (std::vector<std::int64_t>{8, 3154}));
  EXPECT_EQ(u.input_shapes[0].microbatches, 1);
  ASSERT_EQ(u.sample_indices.size(), 16u);
  EXPECT_EQ(u.sample_indices.front(), 1365027);
  EXPECT_EQ(u.sample_indices.back(), 2236997);
  EXPECT_DOUBLE_EQ(*u.padding_fraction, 0.12349009502335317);
}

TEST_F(ReaderTest, AbsentRegionAndCounterStayAbsent) {
  const Dataset d = read({kRealLog});
  // Step 11 ran only the fallback: vggt_batched and its counters are absent, not 0.
  const auto batched = d.regions.find("vggt_batched");
  ASSERT_TRUE(batched);
  const UpdateRecord& u11 = d.ranks[0].updates.front();
  EXPECT_EQ(u11.region(*batched), nullptr);
  EXPECT_FALSE(u11.counter(*d.counters.find("vggt_batched_frames")).has_value());
  // Step 22 (line 13) ran only the batched path.
  const UpdateRecord& u22 = d.ranks[0].updates[11];
  ASSERT_EQ(u22.step, 22);
  EXPECT_EQ(u22.region(*d.regions.find("vggt_single")), nullptr);
  EXPECT_EQ(u22.counter(*d.counters.find("vggt_batched_frames")), 144);
}

TEST_F(ReaderTest, MarkdownTableReadsLikeTheJsonLines) {
  const Dataset a = read({kRealLog});
  const Dataset b = read({kRealTable});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  EXPECT_EQ(diag_.count(Severity::kWarning), 0u);
  ASSERT_EQ(b.ranks.size(), 1u);
  ASSERT_EQ(b.ranks[0].updates.size(), a.ranks[0].updates.size());
  for (std::size_t i = 0; i < a.ranks[0].updates.size(); ++i) {
    const auto& x = a.ranks[0].updates[i];
    const auto& y = b.ranks[0].updates[i];
    EXPECT_EQ(x.step, y.step);
    EXPECT_EQ(x.wall_ms, y.wall_ms);
    EXPECT_EQ(x.regions.size(), y.regions.size());
    EXPECT_EQ(x.sample_indices, y.sample_indices);
  }
}

TEST_F(ReaderTest, MarkdownCellWithEscapedPipe) {
  const auto p = write("t.md", "| record |\n|---|\n| " + kConfig.substr(0, kConfig.size() - 1) +
                                   R"(, "tag": "a\|b"} |)" + "\n| " + update(1) + " |\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].config->find("tag")->json, "\"a|b\"");
  EXPECT_EQ(diag_.count(Severity::kNote), 1u);  // the header row
}

// A record in inline code is read; one beside another cell (a row number) or in bold is
// an error at its line. Both were a header row's note: the record was dropped in
// silence, also under --strict.
TEST_F(ReaderTest, MarkdownRowsWithARecordInBackticksOrBesideAnotherCell) {
  const auto p = write("t.md", "| record |\n|---|\n| `" + kConfig + "` |\n| " + update(1) + " |\n| `` " + update(2) +
                                   " `` |\n| 3 | " + update(3) + " |\n| **" + update(4) + "** |\n| " + update(5) +
                                   " |\n");
  const Dataset d = read({p});
  ASSERT_EQ(d.ranks.size(), 1u);
  ASSERT_TRUE(d.ranks[0].config);
  std::vector<std::int64_t> steps;
  for (const auto& u : d.ranks[0].updates) steps.push_back(u.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 5}));
  const auto errors = all(Problem::kMalformedJson);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0]->line, 6u);
  EXPECT_EQ(errors[1]->line, 7u);
  EXPECT_NE(errors[0]->message.find("a record that is not its only cell"), std::string::npos) << errors[0]->message;
  EXPECT_EQ(diag_.count(Severity::kNote), 1u);  // the header row
  read({p}, /*strict=*/true);
  EXPECT_TRUE(diag_.should_stop());
}

TEST_F(ReaderTest, TableRowsInAFencedCodeBlockAreExamples) {
  // A markdown document's code block showing a row was read as a record (step 99 joined
  // the run); its lines are notes, like the fence lines themselves.
  const auto p = write("doc.md", "# Run\n\n| record |\n|---|\n| " + kConfig + " |\n| " + update(1) + " |\n\n" +
                                     "An example row:\n\n```\n| " + update(99) + " |\n```\n\n~~~json\n| " +
                                     update(98) + " |\n~~~\n| " + update(2) + " |\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  std::vector<std::int64_t> steps;
  for (const auto& u : d.ranks[0].updates) steps.push_back(u.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2}));
  const auto inside = all(Problem::kUnknownRecord);
  std::vector<std::uint64_t> lines;
  for (const auto* x : inside)
    if (x->message.find("fenced code block") != std::string::npos) lines.push_back(x->line);
  EXPECT_EQ(lines, (std::vector<std::uint64_t>{11, 15}));  // (lines 10-12 and 14-16 are the blocks)
}

TEST_F(ReaderTest, GzipInputIsDetectedFromContent) {
  const std::string text = slurp(kRealLog);
  const auto p = (dir_ / "log.data").string();  // no .gz in the name on purpose
  gzFile f = gzopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(f);
  const Dataset d = read({p});
  EXPECT_EQ(diag_.total(), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].updates.size(), 20u);
}

TEST_F(ReaderTest, TruncatedGzipKeepsCompleteRecords) {
  const std::string text = slurp(kRealLog);
  const auto full = (dir_ / "full.gz").string();
  gzFile f = gzopen(full.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  const std::string gz = slurp(full);
  const auto cut = write("cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  const Dataset d = read({cut});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  EXPECT_GE(diag_.count(Problem::kTruncatedLine), 1u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_GT(d.ranks[0].updates.size(), 0u);
  EXPECT_LT(d.ranks[0].updates.size(), 20u);
}

TEST_F(ReaderTest, CorruptGzipIsAReadErrorNotATruncatedRecord) {
  // A large file (so that zlib hands out most of it before it checks the CRC) whose gzip
  // trailer's CRC-32 is wrong: the data error is reported once, as unreadable, with the
  // records before the last line read; no "the last line ends mid-record" warning.
  std::string text = kConfig + "\n";
  for (int s = 1; s <= 20000; ++s) text += update(s) + "\n";
  const auto full = (dir_ / "full.gz").string();
  gzFile f = gzopen(full.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  std::string gz = slurp(full);
  gz[gz.size() - 8] = static_cast<char>(gz[gz.size() - 8] ^ 0xFF);
  const auto bad = write("bad.jsonl.gz", gz);
  const Dataset d = read({bad});
  EXPECT_EQ(diag_.count(Problem::kTruncatedLine), 0u);
  ASSERT_EQ(diag_.count(Problem::kUnreadable), 1u);
  const Diagnostic* e = first(Problem::kUnreadable);
  EXPECT_NE(e->message.find("incorrect data check"), std::string::npos) << e->message;
  // The data is inflated whole before the trailer is checked: every record was read, and
  // the error is the file's, after its last line (and makes the exit status 1). It stood
  // at line 20001 and said "read before line 20002": two lines, neither of them bad.
  EXPECT_EQ(d.update_count(), 20000u);
  EXPECT_EQ(e->line, 0u);
  EXPECT_NE(e->message.find("cannot read the rest of the file after line 20001"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("the 20000 update record(s) read up to there are kept"), std::string::npos) << e->message;
  // They decompressed, but not to what was written: the message says they may be altered
  // (it presented them as good; a flipped byte had changed 7372.9 ms into 7376.9).
  EXPECT_NE(e->message.find("but the gzip checksum over them failed: any of them may hold altered values"),
            std::string::npos)
      << e->message;
  EXPECT_EQ(e->severity, Severity::kError);
}

namespace {
std::string gzip_of(const std::string& text) {
  uLongf n = compressBound(static_cast<uLong>(text.size())) + 32;
  std::string out(n, '\0');
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(n);
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}
}  // namespace

TEST_F(ReaderTest, GzipMembersAreReadInTurnAndTrailingBytesAreReported) {
  const std::string text = slurp(kRealLog);
  const auto cut = text.find('\n', text.size() / 2) + 1;  // two members, split at a line
  const Dataset two = read({write("two.jsonl.gz", gzip_of(text.substr(0, cut)) + gzip_of(text.substr(cut)))});
  EXPECT_EQ(diag_.total(), 0u);
  EXPECT_EQ(two.update_count(), 20u);

  // zlib's gzread skips whatever follows the last member without a word: plain records
  // appended to a .gz file, or the zeros a crash leaves, were lost silently.
  const Dataset tail = read({write("tail.jsonl.gz", gzip_of(text) + update(21) + "\n")});
  EXPECT_EQ(tail.update_count(), 20u);
  ASSERT_EQ(diag_.count(Problem::kUnreadable), 1u);
  EXPECT_NE(first(Problem::kUnreadable)->message.find(fmt::format("{} bytes after the end of the gzip data are not "
                                                                  "gzip data", update(21).size() + 1)),
            std::string::npos)
      << first(Problem::kUnreadable)->message;

  const Dataset zeros = read({write("zeros.jsonl.gz", gzip_of(text) + std::string(4096, '\0'))});
  EXPECT_EQ(zeros.update_count(), 20u);
  ASSERT_EQ(diag_.count(Problem::kUnreadable), 1u);
  EXPECT_NE(first(Problem::kUnreadable)->message.find("4096 bytes after"), std::string::npos);

  // A gzip file cut off mid-record: one warning, not one for the line and one for the file.
  const std::string gz = gzip_of(kConfig + "\n" + update(1) + "\n" + update(2));
  const Dataset cut_gz = read({write("cut.jsonl.gz", gz.substr(0, gz.size() - 12))});
  EXPECT_EQ(cut_gz.update_count(), 1u);
  EXPECT_EQ(diag_.total(), 1u);
  ASSERT_EQ(diag_.count(Problem::kTruncatedLine), 1u);
  EXPECT_TRUE(first(Problem::kTruncatedLine)->message.starts_with("input ends early (")) << first(Problem::kTruncatedLine)->message;
  EXPECT_NE(first(Problem::kTruncatedLine)->message.find("the file was cut off mid-record: "), std::string::npos);
  // The cut is known: not "text after the record, or the line was cut short" as well.
  EXPECT_EQ(first(Problem::kTruncatedLine)->message.find("text after the record"), std::string::npos)
      << first(Problem::kTruncatedLine)->message;

  // A plain file named .gz is read as it is.
  const Dataset plain = read({write("plain.jsonl.gz", text)});
  EXPECT_EQ(diag_.total(), 0u);
  EXPECT_EQ(plain.update_count(), 20u);
}

TEST_F(ReaderTest, DirectoryReadsLogFilesAndNotesOthers) {
  write("a.jsonl", kConfig + "\n" + update(1) + "\n");
  write("b.jsonl", update(2) + "\n");
  write("notes.csv", "x,y\n");
  const Dataset d = read({dir_.string()});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  EXPECT_EQ(diag_.count(Severity::kNote), 1u);
  ASSERT_EQ(d.files.size(), 2u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);
}

TEST_F(ReaderTest, DirectoryNotesABrokenLinkAndAFifo) {
  write("a.jsonl", kConfig + "\n" + update(1) + "\n");
  std::filesystem::create_symlink(dir_ / "nowhere.jsonl", dir_ / "broken.jsonl");
  ASSERT_EQ(::mkfifo((dir_ / "pipe.jsonl").c_str(), 0600), 0);
  std::filesystem::create_symlink(dir_ / "loop.jsonl", dir_ / "loop.jsonl");  // leads back to itself
  std::filesystem::create_symlink(dir_ / "a.jsonl", dir_ / "same.jsonl");     // read once, as a.jsonl
  const Dataset d = read({dir_.string()});
  EXPECT_EQ(d.update_count(), 1u);
  std::vector<std::string> notes;
  for (const auto& x : diag_.kept())
    if (x.severity == Severity::kNote) notes.push_back(std::filesystem::path(x.file).filename().string() + ": " + x.message);
  std::sort(notes.begin(), notes.end());
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "broken.jsonl: not read from the directory: a symbolic link to nothing (its target does not "
                       "exist)",
                       "loop.jsonl: not read from the directory: a symbolic link that loops (it leads back to itself)",
                       "pipe.jsonl: not read from the directory: not a regular file (a FIFO, socket or device)",
                       "same.jsonl: the same file as " + (dir_ / "a.jsonl").string() +
                           " (a link, or named twice); read once"}));
}

TEST_F(ReaderTest, ManyBadLinesAreCountedAndTheLastProblemOfAnotherKindIsKept) {
  // Each kept problem holds its file name and message (about 200 bytes): a million bad
  // lines held 219 MB, and "nothing to analyze", reported last, fell beyond the 10,000 kept.
  std::string text = kConfig + "\n";
  const std::size_t n = Diagnostics::kDefaultMaxKept + 50;
  for (std::size_t i = 0; i < n; ++i) text += update(static_cast<int>(i), -1.0) + "\n";
  const Dataset d = read({write("bad.jsonl", text)});
  EXPECT_EQ(d.update_count(), 0u);
  EXPECT_EQ(diag_.count(Problem::kNegativeTime), n);
  EXPECT_EQ(diag_.count(Problem::kNegativeTime, Severity::kError), n);
  EXPECT_EQ(diag_.count(Severity::kError), n + 1);  // and "nothing to analyze", kept:
  EXPECT_NE(first(Problem::kEmptyInput), nullptr);
  std::size_t kept = 0;
  for (const auto& x : diag_.kept()) kept += x.problem == Problem::kNegativeTime;
  EXPECT_EQ(kept, Diagnostics::kDefaultMaxKept);

  Diagnostics small(false, 2);
  for (int i = 0; i < 5; ++i) small.report({Severity::kError, Problem::kMalformedJson, "f", 1, 0, "x"});
  small.report({Severity::kError, Problem::kEmptyInput, "f", 0, 0, "nothing to analyze"});
  small.count_unkept(Severity::kWarning, Problem::kZeroBytes, 7);
  ASSERT_EQ(small.kept().size(), 3u);
  EXPECT_EQ(small.kept().back().problem, Problem::kEmptyInput);
  EXPECT_EQ(small.count(Severity::kError), 6u);
  EXPECT_EQ(small.count(Severity::kWarning), 7u);
  EXPECT_EQ(small.count(Problem::kZeroBytes, Severity::kWarning), 7u);
}

TEST_F(ReaderTest, OneFileOfSeveralRanksIsReadAsEachRanksLog) {
  // `cat rank*.jsonl > all.jsonl`, or a log shipper's stream of every rank's
  // /dev/stdout: it was read as rank 0's, with an error per other rank and its records
  // skipped. Now each record is its rank's, with one note.
  std::string text;
  for (int r = 0; r < 3; ++r) {
    text += fmt::format(R"({{"type": "config", "rank": {}, "world_size": 3}})", r) + "\n";
    for (int step = 1; step <= 2; ++step)
      text += fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": {}}})", r, step, 10 * r + step) +
              "\n";
  }
  const Dataset d = read({write("all.jsonl", text)});
  ASSERT_EQ(d.ranks.size(), 3u);
  for (std::int64_t r = 0; r < 3; ++r) {
    ASSERT_EQ(d.ranks[r].rank, r);
    ASSERT_TRUE(d.ranks[r].config);
    EXPECT_EQ(d.ranks[r].config->source.line, static_cast<std::uint64_t>(1 + 3 * r));
    ASSERT_EQ(d.ranks[r].updates.size(), 2u);
    EXPECT_EQ(d.ranks[r].updates[1].wall_ms, static_cast<double>(10 * r + 2));
    EXPECT_EQ(d.ranks[r].updates[1].source.line, static_cast<std::uint64_t>(3 + 3 * r));
  }
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  const Diagnostic* note = first(Problem::kSeveralRanks);
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->severity, Severity::kNote);
  EXPECT_EQ(note->line, 4u);
  EXPECT_NE(note->message.find("this file holds several ranks' logs"), std::string::npos) << note->message;
}

TEST_F(ReaderTest, InterleavedRanksAndAnUpdateBeforeItsRanksConfig) {
  // Lines of two ranks interleaved, as a shipper merges them; rank 2's update comes before
  // any config of rank 2: an error, skipped, as in a one-rank file.
  const std::string text = std::string(R"({"type": "config", "rank": 0, "world_size": 3})") + "\n" +
                           R"({"type": "config", "rank": 1, "world_size": 3})" + "\n" +
                           R"({"type": "update", "rank": 1, "step": 1, "wall_ms": 11})" + "\n" +
                           R"({"type": "update", "rank": 0, "step": 1, "wall_ms": 1})" + "\n" +
                           R"({"type": "update", "rank": 2, "step": 1, "wall_ms": 21})" + "\n" +
                           R"({"type": "update", "rank": 0, "step": 2, "wall_ms": 2})" + "\n" +
                           R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 12})" + "\n" +
                           R"({"type": "update", "step": 3, "wall_ms": 3})" + "\n";
  const Dataset d = read({write("mix.jsonl", text)});
  ASSERT_EQ(d.ranks.size(), 2u);
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);
  EXPECT_EQ(d.ranks[1].updates.size(), 2u);
  EXPECT_EQ(d.ranks[0].updates[1].wall_ms, 2.0);
  EXPECT_EQ(d.ranks[1].updates[0].wall_ms, 11.0);
  // ... and an update that names no rank cannot be told whose: an error too (it was
  // read as the last config's rank's).
  std::vector<const Diagnostic*> errors;
  for (const auto& x : diag_.kept())
    if (x.severity == Severity::kError) errors.push_back(&x);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0]->line, 5u);
  EXPECT_NE(errors[0]->message.find("update for rank 2"), std::string::npos) << errors[0]->message;
  EXPECT_EQ(errors[1]->line, 8u);
  EXPECT_NE(errors[1]->message.find("without a rank in a file of several ranks' logs"), std::string::npos);
}

TEST_F(ReaderTest, ARestartInAStreamOfSeveralRanksKeepsOneRun) {
  // Every rank's stream, then the job restarted with another world size and appended:
  // each rank's records after its new config are the new run's, as with one file per rank.
  std::string text;
  for (int r = 0; r < 2; ++r) text += fmt::format(R"({{"type": "config", "rank": {}, "world_size": 2}})", r) + "\n";
  for (int step = 1; step <= 3; ++step)
    for (int r = 0; r < 2; ++r)
      text += fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": 5}})", r, step) + "\n";
  for (int r = 0; r < 3; ++r) text += fmt::format(R"({{"type": "config", "rank": {}, "world_size": 3}})", r) + "\n";
  for (int step = 4; step <= 5; ++step)
    for (int r = 0; r < 3; ++r)
      text += fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": 7}})", r, step) + "\n";
  const Dataset d = read({write("restart.jsonl", text)});
  // The run most ranks have: world size 3 (3 ranks against 2).
  ASSERT_EQ(d.ranks.size(), 3u);
  for (const auto& r : d.ranks) {
    ASSERT_TRUE(r.config);
    EXPECT_EQ(r.config->world_size, 3);
    ASSERT_EQ(r.updates.size(), 2u) << r.rank.value_or(-1);
    EXPECT_EQ(r.updates[0].step, 4);
  }
  EXPECT_EQ(d.updates_of_other_runs, 6u);
}

TEST_F(ReaderTest, InAStreamOfSeveralRanksEachConfigIsComparedWithItsOwnRanks) {
  auto config = [](int rank, int world, std::string_view run_id) {
    return fmt::format(R"({{"type": "config", "run_id": "{}", "rank": {}, "world_size": {}}})", run_id, rank, world) +
           "\n";
  };
  auto update = [](int rank, int step) {
    return fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": 5}})", rank, step) + "\n";
  };
  // Rank 0 restarts alone (world size 1) after both ranks' configs: its warning named
  // rank 1's config (line 2) as the one it differs from.
  const std::string restart = config(0, 2, "a") + config(1, 2, "a") + update(0, 1) + update(1, 1) +
                              config(0, 1, "a") + update(0, 2);
  read({write("restart.jsonl", restart)});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  const Diagnostic* w = first(Problem::kMixedRuns);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->line, 5u);
  EXPECT_NE(w->message.find("differs from the one at line 1 "), std::string::npos) << w->message;
  // Rank files concatenated, rank 0's with a restart in it: rank 1's first config is
  // no restart (it was warned of as one, differing from rank 0's second config).
  const std::string cat = config(0, 2, "a") + update(0, 1) + config(0, 1, "a") + update(0, 2) + config(1, 2, "a") +
                          update(1, 1);
  read({write("cat.jsonl", cat)});
  std::vector<std::uint64_t> warned;
  for (const auto& x : diag_.kept())
    if (x.problem == Problem::kMixedRuns && x.message.find("a second config record") != std::string::npos)
      warned.push_back(x.line);
  EXPECT_EQ(warned, std::vector<std::uint64_t>{3});
  ASSERT_NE(first(Problem::kSeveralRanks), nullptr);
  EXPECT_EQ(first(Problem::kSeveralRanks)->line, 5u);
  // Two jobs (other run_ids) in one stream cannot be told apart: an error, and the
  // records after it are skipped (they were filed under each rank's latest config).
  const std::string two = config(0, 2, "a") + config(1, 2, "a") + update(0, 1) + update(1, 1) + config(0, 2, "b") +
                          config(1, 2, "b") + update(0, 2) + update(0, 1);
  const Dataset d = read({write("two.jsonl", two)});
  EXPECT_EQ(d.update_count(), 2u);
  ASSERT_GE(diag_.count(Severity::kError), 1u);
  const Diagnostic* e = first(Problem::kMixedRuns);
  EXPECT_EQ(e->line, 5u);
  EXPECT_NE(e->message.find("this file mixes two jobs' records"), std::string::npos) << e->message;
  // A config that names no rank in such a stream: an error, and the rest skipped.
  read({write("norank.jsonl", config(0, 2, "a") + config(1, 2, "a") + update(1, 1) +
                                  R"({"type": "config", "run_id": "a", "world_size": 4})" + "\n" + update(1, 2))});
  bool said = false;
  for (const auto& x : diag_.kept())
    said = said || (x.severity == Severity::kError && x.line == 4 && x.message.starts_with("a config record without a rank"));
  EXPECT_TRUE(said);
}

TEST_F(ReaderTest, AResumedJobsRepeatedStepsReplaceTheCopiesBeforeItsConfig) {
  // A job checkpointed after step 2, killed during step 4, resumed from the checkpoint with
  // the recorder's `append`: its config again, then steps 3 and 4 run again. Each of those
  // was a duplicate-step error (exit status 1) and the first copy, the lost work, was kept.
  const auto p = write("resume.jsonl", kConfig + "\n" + update(1, 100) + "\n" + update(2, 100) + "\n" +
                                           update(3, 700) + "\n" + update(4, 900) + "\n" + kConfig + "\n" +
                                           update(3, 110) + "\n" + update(4, 120) + "\n" + update(5, 130) + "\n");
  const Dataset d = read({p});
  ASSERT_EQ(d.ranks.size(), 1u);
  std::vector<std::pair<std::int64_t, double>> got;
  for (const auto& u : d.ranks[0].updates) got.emplace_back(u.step, u.wall_ms);
  EXPECT_EQ(got, (std::vector<std::pair<std::int64_t, double>>{{1, 100}, {2, 100}, {3, 110}, {4, 120}, {5, 130}}));
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  const auto dups = all(Problem::kDuplicateStep);
  ASSERT_EQ(dups.size(), 1u);
  EXPECT_EQ(dups[0]->severity, Severity::kWarning);
  EXPECT_EQ(dups[0]->line, 6u);
  // 700 + 900 ms of update time were lost.
  EXPECT_NE(dups[0]->message.find("steps 3..4 of rank 1 ran again after the config record at this line"),
            std::string::npos)
      << dups[0]->message;
  EXPECT_NE(dups[0]->message.find("the 2 earlier update record(s) (lines 4..5; 1600.0 ms of update time"),
            std::string::npos)
      << dups[0]->message;
  bool noted = false;
  for (const auto& x : diag_.kept())
    noted = noted || (x.severity == Severity::kNote && x.line == 6 &&
                      x.message.starts_with("a second config record of the same run as at line 1"));
  EXPECT_TRUE(noted);
  // --strict reads the resumed log through too.
  read({p}, /*strict=*/true);
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
}

// A log read while the resumed job runs: killed after step 6, resumed from step 3, and
// now at step 4. Steps 5 and 6 of the earlier run are the only records of those steps
// (kept), but the restart went back over them too: the warning said only the 2 steps run
// again (a helper: 51 said where 541 were lost).
TEST_F(ReaderTest, AResumedJobsEarlierStepsPastItsLastAreSaid) {
  const auto p = write("resume-ahead.jsonl", kConfig + "\n" + update(1, 100) + "\n" + update(2, 100) + "\n" +
                                                 update(3, 700) + "\n" + update(4, 900) + "\n" + update(5, 50) +
                                                 "\n" + update(6, 60) + "\n" + kConfig + "\n" + update(3, 110) +
                                                 "\n" + update(4, 120) + "\n");
  const Dataset d = read({p});
  ASSERT_EQ(d.ranks.size(), 1u);
  std::vector<std::int64_t> steps;
  for (const auto& u : d.ranks[0].updates) steps.push_back(u.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}));
  const auto dups = all(Problem::kDuplicateStep);
  ASSERT_EQ(dups.size(), 1u);
  EXPECT_NE(dups[0]->message.find("the 2 earlier update record(s) (lines 4..5; 1600.0 ms of update time"),
            std::string::npos)
      << dups[0]->message;
  EXPECT_NE(dups[0]->message.find("; the earlier run's 2 records of steps 5..6 (lines 6..7; 110.0 ms of update time) "
                                  "are past the resumed run's last step, not run again yet: kept"),
            std::string::npos)
      << dups[0]->message;
}

TEST_F(ReaderTest, AJobResumedIntoANewFileKeepsTheLaterStartsCopiesWhateverTheFilesOrder) {
  // Rank 1 killed during step 5, resumed from the checkpoint after step 2 into a new file.
  // Each repeated step was a duplicate-step error (exit status 1), and which copy was kept
  // depended on the order of the files (their names, in a directory).
  std::string first = kConfig + "\n", resumed = kConfig + "\n";
  for (int s = 1; s <= 5; ++s) first += update(s, 100) + "\n";
  for (int s = 3; s <= 7; ++s) resumed += update(s, 200) + "\n";
  const auto a = write("a.jsonl", first);
  const auto b = write("b.jsonl", resumed);
  for (const auto& order : {std::vector{a, b}, std::vector{b, a}}) {
    const Dataset d = read(order);
    ASSERT_EQ(d.ranks.size(), 1u);
    std::vector<std::pair<std::int64_t, double>> got;
    for (const auto& u : d.ranks[0].updates) got.emplace_back(u.step, u.wall_ms);
    EXPECT_EQ(got, (std::vector<std::pair<std::int64_t, double>>{
                       {1, 100}, {2, 100}, {3, 200}, {4, 200}, {5, 200}, {6, 200}, {7, 200}}));
    EXPECT_EQ(diag_.count(Severity::kError), 0u);
    const auto dups = all(Problem::kDuplicateStep);
    ASSERT_EQ(dups.size(), 1u);
    EXPECT_EQ(dups[0]->severity, Severity::kWarning);
    EXPECT_EQ(dups[0]->file, b);
    EXPECT_NE(dups[0]->message.find("steps 3..5 of rank 1 in " + a + " ran again in this file, which starts later (at "
                                    "step 3) and goes on beyond its end"),
              std::string::npos)
        << dups[0]->message;
    EXPECT_NE(dups[0]->message.find("the 3 earlier update record(s) (300.0 ms of update time"), std::string::npos)
        << dups[0]->message;
  }
  // With a --steps window inside both files' steps, the kept records of both start and end
  // together: the files' own steps still tell the resume (it was errors, the old copies kept).
  for (const auto& order : {std::vector{a, b}, std::vector{b, a}}) {
    const Dataset d = read(order, false, StepRange{3, 5});
    ASSERT_EQ(d.ranks.size(), 1u);
    std::vector<std::pair<std::int64_t, double>> got;
    for (const auto& u : d.ranks[0].updates) got.emplace_back(u.step, u.wall_ms);
    EXPECT_EQ(got, (std::vector<std::pair<std::int64_t, double>>{{3, 200}, {4, 200}, {5, 200}}));
    EXPECT_EQ(diag_.count(Severity::kError), 0u);
  }
  // A file that starts later but ends inside the other's steps is a rerun of some of them
  // (or another job's log), not a resume: errors, as before.
  std::string inside = kConfig + "\n";
  for (int s = 2; s <= 4; ++s) inside += update(s, 250) + "\n";
  read({a, write("inside.jsonl", inside)});
  EXPECT_EQ(diag_.count(Problem::kDuplicateStep), 3u);
  EXPECT_EQ(diag_.count(Severity::kError), 3u);
  // Two files that start at the same step are two runs of it, not a resume: errors, as before.
  const auto c = write("c.jsonl", first);
  std::string other = kConfig + "\n";
  for (int s = 1; s <= 5; ++s) other += update(s, 150) + "\n";
  read({c, write("d.jsonl", other)});
  EXPECT_EQ(diag_.count(Problem::kDuplicateStep), 5u);
  EXPECT_EQ(diag_.count(Severity::kError), 5u);
}

TEST_F(ReaderTest, TheFirstUpdateAfterEachRanksConfigIsMarkedInAStreamOfSeveralRanks) {
  // One stream of two ranks' logs; both resume. Rank 1's last record before its own restart
  // comes after rank 0's resumed config: one flag for the file marked it, and not rank 1's
  // first update after its own config.
  const auto cfg = [](int r) {
    return fmt::format(R"({{"type": "config", "rank": {}, "world_size": 2, "run_id": "a"}})", r) + "\n";
  };
  const auto rec = [](int r, int step) {
    return fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": {}}})", r, step, 10 + step) + "\n";
  };
  const std::string text = cfg(0) + cfg(1) + rec(0, 1) + rec(1, 1) + rec(0, 2) + rec(1, 2) + cfg(0) + rec(1, 3) +
                           cfg(1) + rec(0, 2) + rec(1, 3) + rec(0, 3);
  const Dataset d = read({write("stream.jsonl", text)});
  ASSERT_EQ(d.ranks.size(), 2u);
  std::vector<std::tuple<std::int64_t, std::int64_t, std::uint64_t, bool>> got;
  for (const auto& r : d.ranks)
    for (const auto& u : r.updates) got.emplace_back(*r.rank, u.step, u.source.line, u.source.after_config);
  EXPECT_EQ(got, (std::vector<std::tuple<std::int64_t, std::int64_t, std::uint64_t, bool>>{
                     {0, 1, 3, true}, {0, 2, 10, true}, {0, 3, 12, false},
                     {1, 1, 4, true}, {1, 2, 6, false}, {1, 3, 11, true}}));
}

TEST_F(ReaderTest, SeveralResumesEachReplaceWhatTheyRanAgainAndARepeatWithinAPartIsStillADuplicate) {
  // Resumed twice: steps 2..3 after the first resume (line 5), step 3 again after the second
  // (line 8). Step 3's first copy is replaced by the first resume (the next run of it), and
  // the first resume's copy by the second. Step 4 repeated after the second resume, with no
  // config between, is a duplicate as before.
  const auto p = write("twice.jsonl", kConfig + "\n" + update(1, 1) + "\n" + update(2, 2) + "\n" + update(3, 3) +
                                          "\n" + kConfig + "\n" + update(2, 20) + "\n" + update(3, 30) + "\n" +
                                          kConfig + "\n" + update(3, 300) + "\n" + update(4, 400) + "\n" +
                                          update(4, 401) + "\n");
  const Dataset d = read({p});
  ASSERT_EQ(d.ranks.size(), 1u);
  std::vector<std::pair<std::int64_t, double>> got;
  for (const auto& u : d.ranks[0].updates) got.emplace_back(u.step, u.wall_ms);
  EXPECT_EQ(got, (std::vector<std::pair<std::int64_t, double>>{{1, 1}, {2, 20}, {3, 300}, {4, 400}}));
  std::vector<std::tuple<std::uint64_t, Severity, std::string>> dups;
  for (const auto* x : all(Problem::kDuplicateStep)) dups.emplace_back(x->line, x->severity, x->message);
  ASSERT_EQ(dups.size(), 3u);
  std::sort(dups.begin(), dups.end());
  EXPECT_EQ(std::get<0>(dups[0]), 5u);
  EXPECT_NE(std::get<2>(dups[0]).find("steps 2..3 of rank 1 ran again"), std::string::npos) << std::get<2>(dups[0]);
  EXPECT_NE(std::get<2>(dups[0]).find("(lines 3..4; 5.0 ms"), std::string::npos) << std::get<2>(dups[0]);
  EXPECT_EQ(std::get<0>(dups[1]), 8u);
  EXPECT_NE(std::get<2>(dups[1]).find("step 3 of rank 1 ran again"), std::string::npos) << std::get<2>(dups[1]);
  EXPECT_NE(std::get<2>(dups[1]).find("(lines 7..7; 30.0 ms"), std::string::npos) << std::get<2>(dups[1]);
  EXPECT_EQ(std::get<0>(dups[2]), 11u);
  EXPECT_EQ(std::get<1>(dups[2]), Severity::kError);
  EXPECT_NE(std::get<2>(dups[2]).find("duplicate step 4 for rank 1 (first at"), std::string::npos)
      << std::get<2>(dups[2]);
}

TEST_F(ReaderTest, CarriageReturnLineEndingsAreNamed) {
  // A file with \r alone between records was "the last line ends mid-record (was the
  // writing job killed?)".
  const Dataset d = read({write("mac.jsonl", kConfig + "\r" + update(1) + "\r" + update(2) + "\r")});
  EXPECT_EQ(d.update_count(), 0u);
  const Diagnostic* e = first(Problem::kMalformedJson);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("separated by carriage returns alone (\\r, not \\n or \\r\\n), so this line holds 3 of "
                            "them"),
            std::string::npos)
      << e->message;
  EXPECT_EQ(diag_.count(Problem::kTruncatedLine), 0u);
}

TEST_F(ReaderTest, ZerosFromACrashAreSkippedAndWhatFollowsIsRead) {
  // A power loss zero-filled the tail of the file, cutting a record; the restarted job then
  // appended its config (another seed: another run) and updates. The zeros used to swallow
  // that config, so the new run's updates were merged into the old one without a word.
  const std::string cut = update(3).substr(0, 40);
  const std::string restart = R"({"type": "config", "rank": 1, "world_size": 4, "micro_batch": 8, "accumulation": 2, )"
                              R"("global_batch": 64, "seed": 7})";
  const auto p = write("zeros.jsonl", kConfig + "\n" + update(1) + "\n" + update(2) + "\n" + cut +
                                          std::string(4096, '\0') + restart + "\n" + update(3) + "\n");
  const Dataset d = read({p});
  ASSERT_EQ(diag_.count(Problem::kZeroBytes), 1u);
  const Diagnostic* z = first(Problem::kZeroBytes);
  EXPECT_EQ(z->severity, Severity::kWarning);
  EXPECT_EQ(z->line, 4u);
  EXPECT_NE(z->message.find("4096 zero bytes and 40 bytes of a record cut short by them skipped"), std::string::npos)
      << z->message;
  EXPECT_EQ(diag_.count(Problem::kMixedRuns), 2u);  // the second config, and the records skipped
  // Each run has the one rank; the restart's reaches the higher step (3) and is kept.
  EXPECT_EQ(d.update_count(), 1u);

  // Whole records before the zeros (the zero-fill took their newline) are read: they were
  // counted as "bytes of a record cut short" and lost.
  const Dataset before = read({write("before.jsonl", kConfig + "\n" + update(1) + update(2) + std::string(64, '\0') +
                                                         update(3) + "\n" + update(4) + std::string(8, '\0') + "\n")});
  EXPECT_EQ(before.update_count(), 4u);
  EXPECT_EQ(diag_.count(Problem::kZeroBytes), 2u);
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  const Diagnostic* w = first(Problem::kZeroBytes);
  EXPECT_NE(w->message.find("64 zero bytes skipped: a crash or power loss leaves zeros where a file was being written, "
                            "and records written there are lost; the 2 whole record(s) before them are read; the text "
                            "after them is read as a record"),
            std::string::npos)
      << w->message;

  // Zeros alone at the end of the file: a warning, not "the job was killed mid-record".
  const Dataset tail = read({write("tail.jsonl", kConfig + "\n" + update(1) + "\n" + std::string(100, '\0'))});
  EXPECT_EQ(tail.update_count(), 1u);
  EXPECT_EQ(diag_.count(Problem::kZeroBytes), 1u);
  EXPECT_EQ(diag_.count(Problem::kTruncatedLine), 0u);
  EXPECT_EQ(diag_.total(), 1u);
}

TEST_F(ReaderTest, AFileOfZeroBytesIsToldAsZerosNotAsAHeadingLine) {
  // A log preallocated or zero-filled by a crash before its first record was written: it
  // was "a heading, comment or text line before the first record", a note.
  const Dataset d = read({write("allzeros.jsonl", std::string(5000, '\0'))});
  EXPECT_EQ(d.update_count(), 0u);
  EXPECT_EQ(diag_.count(Problem::kUnknownRecord), 0u);
  ASSERT_EQ(diag_.count(Problem::kZeroBytes), 1u);
  const Diagnostic* z = first(Problem::kZeroBytes);
  EXPECT_EQ(z->severity, Severity::kWarning);
  EXPECT_EQ(z->line, 1u);
  EXPECT_NE(z->message.find("5000 zero bytes skipped"), std::string::npos) << z->message;
  // After a real heading line, the heading is still a note and the zeros a warning.
  const Dataset h = read({write("headzeros.jsonl", "# run 7\n" + std::string(100, '\0') + "\n" + kConfig + "\n" +
                                                       update(1) + "\n")});
  EXPECT_EQ(h.update_count(), 1u);
  EXPECT_EQ(diag_.count(Problem::kUnknownRecord), 1u);
  EXPECT_EQ(diag_.count(Problem::kZeroBytes), 1u);
  EXPECT_EQ(first(Problem::kZeroBytes)->line, 2u);
  // Zeros first, then a heading: the heading is still a note, not "other output" (review).
  const Dataset zh = read({write("zerohead.jsonl", std::string(100, '\0') + "\n# run 7\n" + kConfig + "\n" +
                                                      update(1) + "\n")});
  EXPECT_EQ(zh.update_count(), 1u);
  EXPECT_EQ(diag_.count(Problem::kZeroBytes), 1u);
  EXPECT_EQ(diag_.count(Problem::kUnknownRecord), 1u);
  EXPECT_EQ(diag_.total(), 2u);
}

TEST_F(ReaderTest, AZeroRunLongerThanAChunkIsCountedWholeAndColumnsAfterItAreTheFiles) {
  // Zero runs longer than the reader's 1 MiB chunk are cut short as they are read (so a
  // 1 GB zero-filled tail no longer costs 1 GB of memory); the count and the column of
  // what follows must still be the file's.
  constexpr std::size_t kZeros = 5'000'000;
  const std::string cut = update(2).substr(0, 40);
  const auto p = write("longzeros.jsonl", kConfig + "\n" + update(1) + "\n" + cut + std::string(kZeros, '\0') +
                                              "{oops\n" + update(3) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 2u);
  ASSERT_EQ(diag_.count(Problem::kZeroBytes), 1u);
  const Diagnostic* z = first(Problem::kZeroBytes);
  EXPECT_EQ(z->line, 3u);
  EXPECT_NE(z->message.find("5000000 zero bytes and 40 bytes of a record cut short by them skipped"), std::string::npos)
      << z->message;
  const Diagnostic* e = first(Problem::kMalformedJson);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 3u);
  EXPECT_EQ(e->column, cut.size() + kZeros + 5);  // 1-based: the last byte of "{oops", where it should end
}

TEST_F(ReaderTest, RecordsThatLostTheNewlineBetweenThemAreEachRead) {
  // Two whole records on one line were one malformed-json error, though two were lost.
  const std::string joined = update(2) + update(3, 90.0) + "  " + update(4);
  const auto p = write("joined.jsonl", kConfig + "\n" + update(1) + "\n" + joined + "\n" + update(5) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 5u);
  EXPECT_EQ(diag_.count(Problem::kMalformedJson), 0u);
  ASSERT_EQ(diag_.count(Problem::kJoinedRecords), 2u);
  std::vector<std::uint64_t> columns;
  for (const auto& x : diag_.kept())
    if (x.problem == Problem::kJoinedRecords) {
      EXPECT_EQ(x.severity, Severity::kWarning);
      EXPECT_EQ(x.line, 3u);
      columns.push_back(x.column);
    }
  const std::uint64_t second = update(2).size() + 1, third = second + update(3, 90.0).size() + 2;
  EXPECT_EQ(columns, (std::vector<std::uint64_t>{second, third}));
  ASSERT_EQ(d.ranks.size(), 1u);
  std::vector<double> walls;
  for (const auto& u : d.ranks[0].updates) walls.push_back(u.wall_ms);
  EXPECT_EQ(walls, (std::vector<double>{100, 100, 90, 100, 100}));
}

TEST_F(ReaderTest, AKilledJobsCutRecordFollowedByARestartedJobsConfigIsSplit) {
  // The job was killed mid-record (no zeros: the page cache was written out) and a
  // restarted job, with another seed, appended its config to the same line: the config
  // was lost in one malformed-json error, and the new run's updates were merged into
  // the old one without a word.
  const std::string restart = R"({"type":"config", "rank": 1, "world_size": 4, "micro_batch": 8, "accumulation": 2, )"
                              R"("global_batch": 64, "seed": 7})";
  const std::string cut = update(3).substr(0, 50);
  const auto p = write("restart.jsonl", kConfig + "\n" + update(1) + "\n" + update(2) + "\n" + cut + restart + "\n" +
                                            update(3) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 1u);  // (the restart's run, which reaches the higher step)
  const Diagnostic* e = first(Problem::kMalformedJson);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 4u);
  EXPECT_NE(e->message.find("the record is cut short by another that starts at column 51 of the same line"),
            std::string::npos)
      << e->message;
  EXPECT_EQ(diag_.count(Problem::kMixedRuns), 2u);  // the second config, and the update after it
  EXPECT_EQ(diag_.count(Problem::kJoinedRecords), 0u);

  // An object inside a record that begins like one is not another record: a cut record
  // holding one gave a phantom update (step 99), and a record with a bad value two errors.
  const Dataset inner = read({write("inner.jsonl",
                                    kConfig + "\n" + update(1) + "\n" +
                                        R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 5, "meta": {"type": "update", "rank": 1, "step": 99, "wall_ms": 7})" +
                                        "\n" +
                                        R"({"type": "update", "rank": 1, "step": 3, "wall_ms": -5, "meta": [{"type": "update", "rank": 1, "step": 98, "wall_ms": 7}]})" +
                                        "\n")});
  EXPECT_EQ(inner.update_count(), 1u);
  EXPECT_EQ(diag_.total(), 2u);
  EXPECT_EQ(diag_.count(Problem::kMalformedJson), 1u);
  EXPECT_EQ(diag_.count(Problem::kNegativeTime), 1u);

  // A nested "type" key inside a value is not a record start.
  const Dataset nested = read({write("nested.jsonl", kConfig + "\n" + update(1, 100.0, R"(, "x": {"type": "adamw"})") +
                                                        "\n")});
  EXPECT_EQ(nested.update_count(), 1u);
  EXPECT_EQ(diag_.total(), 0u);
}

TEST_F(ReaderTest, NamesMadeWithTheStepInThemAreNamedOnce) {
  // A region per step ("batch_17"): every table listed them one by one, the html page of
  // 4,000 updates took 1.1 GB and the trace 163 s, and nothing said why.
  auto record = [](int step, bool per_step_counter) {
    const std::string b = "batch_" + std::to_string(step);
    return R"({"type": "update", "rank": 1, "step": )" + std::to_string(step) +
           R"(, "wall_ms": 100, "cpu_call_ms": {"fwd": 40, ")" + b + R"(": 1}, "counts": {"samples": 16)" +
           (per_step_counter ? R"(, "loss_)" + std::to_string(step) + R"(": 2)" : std::string()) + "}}";
  };
  std::string text = kConfig + "\n";
  for (int step = 0; step < 25; ++step) text += record(step, step >= 5) + "\n";
  const Dataset d = read({write("perstep.jsonl", text)});
  EXPECT_EQ(d.update_count(), 25u);
  ASSERT_EQ(diag_.count(Problem::kOneOffNames), 2u);
  std::vector<std::string> messages;
  for (const auto& x : diag_.kept())
    if (x.problem == Problem::kOneOffNames) {
      EXPECT_EQ(x.severity, Severity::kWarning);
      messages.push_back(fmt::format("{}: {}", x.line, x.message));
    }
  EXPECT_TRUE(messages[0].starts_with("2: 25 of the 26 region names occur in one step each, e.g. \"batch_0\" (step 0), "
                                      "\"batch_1\" (step 1), \"batch_2\" (step 2): names made with the step number"))
      << messages[0];
  EXPECT_TRUE(messages[1].starts_with("7: 20 of the 21 counter names occur in one step each, e.g. \"loss_5\" (step 5)"))
      << messages[1];

  // Below 20 such names, or all in one step (a log of one update), or a quarter of the
  // names or fewer: nothing.
  std::string few = kConfig + "\n";
  for (int step = 0; step < 19; ++step) few += record(step, false) + "\n";
  read({write("few.jsonl", few)});
  EXPECT_EQ(diag_.total(), 0u);
  std::string one = kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 3, "wall_ms": 100, "cpu_call_ms": {)";
  for (int r = 0; r < 40; ++r) one += fmt::format("{}\"r{}\": 1", r ? ", " : "", r);
  read({write("one.jsonl", one + "}}\n")});
  EXPECT_EQ(diag_.total(), 0u);
  read({kRealLog});
  EXPECT_EQ(diag_.count(Problem::kOneOffNames), 0u);
}

TEST_F(ReaderTest, UpdatesWithoutAWallTimeAreNamed) {
  // Every share read "0.0 %" and the time outside every region was -13,245 ms, with no
  // word that wall_ms was 0.
  const auto p = write("zerowall.jsonl", kConfig + "\n" + update(1) + "\n" + update(2, 0.0) + "\n" +
                                             update(3, 0.0) + "\n" + update(4) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 4u);
  ASSERT_EQ(diag_.count(Problem::kZeroWallTime), 1u);
  const Diagnostic* z = first(Problem::kZeroWallTime);
  EXPECT_EQ(z->severity, Severity::kWarning);
  EXPECT_EQ(z->line, 3u);
  EXPECT_TRUE(z->message.starts_with("wall_ms is 0 in 2 of 4 update(s), first step 2, though their regions took time"))
      << z->message;
  // An update that did nothing in 0 ms is not one, beside others that took time.
  read({write("empty.jsonl", kConfig + "\n" + update(1) + "\n" +
                                 R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 0})" + "\n")});
  EXPECT_EQ(diag_.total(), 0u);
  // But when no update took any time (a trace whose ProfilerStep ranges last 0 us), the
  // report's every figure is 0: said once, at the first update.
  read({write("untimed.jsonl", kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 1, "wall_ms": 0})" + "\n" +
                                   R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 0, "cpu_call_ms": {"f": 0}})" +
                                   "\n")});
  ASSERT_EQ(diag_.count(Problem::kZeroWallTime), 1u);
  z = first(Problem::kZeroWallTime);
  EXPECT_EQ(z->line, 2u);
  EXPECT_TRUE(z->message.starts_with("every update (2) has wall_ms 0 and no region with time: nothing was timed"))
      << z->message;
}

TEST_F(ReaderTest, AWallTimeFarAboveItsRanksMedianIsNamed) {
  // A wall_ms of 9.9e11 ms among 13 s updates (a helper's edit) was used without a word:
  // the first finding became "update time varies" at 33 billion ms per update.
  const auto at = [](int step, double wall) {
    return fmt::format(R"({{"type": "update", "rank": 1, "step": {}, "wall_ms": {}, "cpu_call_ms": {{"f": 60}}}})",
                       step, wall);
  };
  // Median 100 ms (of 100 x4, 10,000, 10,001): 10,000 is 100x, not over; 10,001 is.
  read({write("outlier.jsonl", kConfig + "\n" + at(1, 100) + "\n" + at(2, 100) + "\n" + at(3, 10000) + "\n" +
                                   at(4, 10001) + "\n" + at(5, 100) + "\n" + at(6, 100) + "\n")});
  ASSERT_EQ(diag_.count(Problem::kWallTimeOutlier), 1u);
  const Diagnostic* w = first(Problem::kWallTimeOutlier);
  EXPECT_EQ(w->severity, Severity::kWarning);
  EXPECT_EQ(w->line, 5u);
  EXPECT_TRUE(w->message.starts_with("1 update(s) have a wall_ms over 100x their rank's median; the largest: step 4 "
                                     "of rank 1, 10001 ms, 100x the rank's median 100 ms (its longest region: 60 ms)"))
      << w->message;
  // The first update after a config record is warm-up (compilation: 25 s among 100 ms
  // updates, a review found at 107x), neither judged nor in the median.
  read({write("warmup.jsonl", kConfig + "\n" + at(1, 25000) + "\n" + at(2, 100) + "\n" + at(3, 100) + "\n" +
                                  at(4, 100) + "\n" + at(5, 100) + "\n" + at(6, 100) + "\n")});
  EXPECT_EQ(diag_.count(Problem::kWallTimeOutlier), 0u);
  // Four timed updates are too few to judge by; the bundled real log has none.
  read({write("few.jsonl", kConfig + "\n" + at(1, 100) + "\n" + at(2, 100) + "\n" + at(3, 100) + "\n" +
                               at(4, 1e9) + "\n" + R"({"type": "update", "rank": 1, "step": 5, "wall_ms": 0})" +
                               "\n")});
  EXPECT_EQ(diag_.count(Problem::kWallTimeOutlier), 0u);
  read({kRealLog});
  EXPECT_EQ(diag_.count(Problem::kWallTimeOutlier), 0u);
}

TEST_F(ReaderTest, ARankWhoseEveryRegionTimeIsZeroIsNamed) {
  // Rank 2's regions all 0 ms in 13 s updates: no word, and the rank was named a straggler.
  const auto at = [](int rank, int step, double f, double g) {
    return fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": 100, "cuda_stream_ms": {{"f": {}}}, )"
                       R"("cpu_call_ms": {{"f": {}, "g": {}}}}})",
                       rank, step, f, f, g);
  };
  const std::string config2 = R"({"type": "config", "rank": 2, "world_size": 4})";
  read({write("r1.jsonl", kConfig + "\n" + at(1, 1, 50, 0) + "\n" + at(1, 2, 0, 0) + "\n"),
        write("r2.jsonl", config2 + "\n" + at(2, 1, 0, 0) + "\n" + at(2, 2, 0, 0) + "\n" +
                              R"({"type": "update", "rank": 2, "step": 3, "wall_ms": 100})" + "\n")});
  ASSERT_EQ(diag_.count(Problem::kZeroRegionTimes), 1u);
  const Diagnostic* z = first(Problem::kZeroRegionTimes);
  EXPECT_EQ(z->severity, Severity::kWarning);
  EXPECT_EQ(std::filesystem::path(z->file).filename(), "r2.jsonl");
  EXPECT_EQ(z->line, 2u);
  EXPECT_TRUE(z->message.starts_with("every region time is 0 ms in the 2 update(s) of rank 2 with regions, whose "
                                     "wall_ms are not"))
      << z->message;
  // Rank 1 has one region time above 0 (step 1's f): not named. A rank without regions,
  // or whose updates took no time either (zero-wall-time's), is not named either.
  read({write("r3.jsonl", kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 1, "wall_ms": 100})" + "\n")});
  EXPECT_EQ(diag_.count(Problem::kZeroRegionTimes), 0u);
  read({kRealLog});
  EXPECT_EQ(diag_.count(Problem::kZeroRegionTimes), 0u);
}

TEST_F(ReaderTest, RegionTimesFarBeyondTheirUpdateAreNamed) {
  // A device time of 9.9e11 ms (in a 100 ms update) gave the region a share of the update
  // of 321,121,927 % without a word.
  const auto at = [](int step, double fwd_device, double bwd_host) {
    return R"({"type": "update", "rank": 1, "step": )" + std::to_string(step) +
           R"(, "wall_ms": 100, "cuda_stream_ms": {"fwd": )" + std::to_string(fwd_device) +
           R"(}, "cpu_call_ms": {"bwd": )" + std::to_string(bwd_host) + "}}";
  };
  // 100x the update (10,000 ms) is not beyond it; 10,001 ms is, on either clock.
  const auto p = write("beyond.jsonl", kConfig + "\n" + at(1, 40, 10000) + "\n" + at(2, 10001, 50) + "\n" +
                                           at(3, 9.9e11, 20001) + "\n" + at(4, 40, 50) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 4u);  // used as written
  ASSERT_EQ(diag_.count(Problem::kRegionBeyondUpdate), 1u);
  const Diagnostic* w = first(Problem::kRegionBeyondUpdate);
  EXPECT_EQ(w->severity, Severity::kWarning);
  EXPECT_EQ(w->line, 4u);  // the largest relative to its update: step 3's fwd
  EXPECT_TRUE(w->message.starts_with("3 region time(s) in 2 update(s) are over 100x their update's wall_ms; the "
                                     "largest: fwd's device time 9.9e+11 ms in step 3 of rank 1 is 9.9e+09x the "
                                     "update's 100 ms"))
      << w->message;
  EXPECT_EQ(w->message.find("threads"), std::string::npos) << w->message;  // (a device time: no sum over threads)
  // The bundled real log has none.
  read({kRealLog});
  EXPECT_EQ(diag_.count(Problem::kRegionBeyondUpdate), 0u);
  // Nor is a log imported from a profiler trace checked: a step that only launched a CUDA
  // graph lasts 0.1 ms, and the graph's 25 ms of kernels count in it.
  const std::string trace_config =
      R"x({"type": "config", "rank": 1, "world_size": 4, "trace_format": "pytorch-profiler (kineto)"})x";
  read({write("trace.jsonl", trace_config + "\n" +
                                 R"({"type": "update", "rank": 1, "step": 1, "wall_ms": 0.1, "cuda_stream_ms": )"
                                 R"({"graph_replay": 25}})" + "\n")});
  EXPECT_EQ(diag_.count(Problem::kRegionBeyondUpdate), 0u);
  // A host time of many calls: the same region on a pool of threads at once sums their
  // times, and the message asked only whether the unit was wrong.
  read({write("pool.jsonl", kConfig + "\n" +
                                R"({"type": "update", "rank": 1, "step": 1, "wall_ms": 10, )"
                                R"("cpu_call_ms": {"decode": 1280}, "calls": {"decode": 128}})" + "\n")});
  const Diagnostic* pool = first(Problem::kRegionBeyondUpdate);
  ASSERT_NE(pool, nullptr);
  EXPECT_NE(pool->message.find("(its 128 calls' times are summed: the same region entered on several threads at "
                               "once? Give such threads' regions their own names, or the role \"background\""),
            std::string::npos)
      << pool->message;
}

TEST_F(ReaderTest, DirectoriesBeyondTheDepthOrBehindALinkAreNoted) {
  // Files five levels down were skipped without a word.
  std::filesystem::path deep = dir_ / "logs";
  for (int level = 1; level <= 9; ++level) {
    deep /= fmt::format("d{}", level);
    std::filesystem::create_directories(deep);
    write(std::filesystem::relative(deep / "r.jsonl", dir_).string(),
          kConfig + "\n" + update(level) + "\n");
  }
  std::filesystem::create_directories(dir_ / "elsewhere");
  std::filesystem::create_directory_symlink(dir_ / "elsewhere", dir_ / "logs" / "linked");
  const Dataset d = read({(dir_ / "logs").string()});
  EXPECT_EQ(d.update_count(), 8u);  // d1 .. d8
  std::vector<std::string> notes;
  for (const auto& x : diag_.kept())
    if (x.severity == Severity::kNote) notes.push_back(std::filesystem::path(x.file).filename().string() + ": " + x.message);
  std::sort(notes.begin(), notes.end());
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "d9: not read: directories are read 8 levels down; name this one to read it",
                       "linked: not read: a symbolic link to a directory (not followed); name it to read it"}));
}

TEST_F(ReaderTest, ANamedFifoIsReadOnceAndAWaitOnItCanBeCancelled) {
  // A FIFO named on the command line (or `<(cat log)`): it used to be opened twice, once to
  // look for a profiler trace, so its first 64 KB were lost without a word (and a FIFO
  // waited for a second writer forever).
  const std::string text = slurp(kRealLog);
  const auto fifo = (dir_ / "live.jsonl").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream(fifo, std::ios::binary) << text;
  });
  Dataset d = read({fifo});
  writer.join();
  EXPECT_EQ(diag_.total(), 0u);
  EXPECT_EQ(d.update_count(), 20u);

  // No writer ever comes: setting the cancel flag ends the wait.
  const auto idle = (dir_ / "idle.jsonl").string();
  ASSERT_EQ(::mkfifo(idle.c_str(), 0600), 0);
  std::atomic<bool> cancel{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  Diagnostics diag;
  ReadOptions opt;
  opt.cancel = &cancel;
  d = read_logs({idle}, opt, diag);
  stopper.join();
  EXPECT_EQ(d.update_count(), 0u);
}

TEST_F(ReaderTest, MalformedLineNamesFileLineColumnAndContinues) {
  // Line 3: the value of wall_ms is missing; the parser stops at the '}' (column 44).
  const std::string bad = R"({"type": "update", "step": 12, "wall_ms": })";
  const auto p = write("m.jsonl", kConfig + "\n" + update(11) + "\n" + bad + "\n" + update(13) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Severity::kError), 1u);
  const Diagnostic* e = first(Problem::kMalformedJson);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->file, p);
  EXPECT_EQ(e->line, 3u);
  EXPECT_GE(e->column, 43u);
  EXPECT_LE(e->column, 44u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);  // steps 11 and 13
}

TEST_F(ReaderTest, WrongTypeNamesTheFieldAndColumn) {
  const std::string bad = R"({"type": "update", "step": 12, "wall_ms": "fast"})";
  const auto p = write("w.jsonl", kConfig + "\n" + bad + "\n");
  read({p});
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 2u);
  EXPECT_EQ(e->column, 43u);  // where "fast" starts
  EXPECT_NE(e->message.find("wall_ms"), std::string::npos);
  EXPECT_NE(e->message.find("expected a number"), std::string::npos);
}

// A misspelt schema field (`counts` as `count`) was kept as a field of the job's own
// without a word, and its data was left out of every analysis. Fields of the job's own
// far from every schema name (`loss`, `lr`), near a short one (`steps`, `ranks`) or of
// another kind than the name they are near (`cuda_stream_id`: 3, `counts_x`: 2) stay
// silent; each name is said once per file.
TEST_F(ReaderTest, AMisspeltFieldIsANoteAndTheJobsOwnFieldsAreNot) {
  const std::string a = R"({"type": "update", "step": 11, "wall_ms": 5, "count": {"samples": 8}, "loss": 0.5})";
  const std::string b = R"({"type": "update", "step": 12, "wall_ms": 5, "count": {"samples": 8}, "lr": 0.1,)"
                        R"( "Wall_MS": 5, "cuda_stream_msx": {"x": 1}, "steps_done": 3, "steps": 12, "ranks": 4,)"
                        R"( "cuda_stream_id": 3, "counts_x": 2})";
  const auto p = write("typo.jsonl", kConfig + "\n" + a + "\n" + b + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);
  std::vector<std::pair<std::uint64_t, std::string>> said;
  EXPECT_EQ(diag_.count(Severity::kWarning), 0u);  // (a note: --strict does not stop at it)
  for (const Diagnostic* w : all(Problem::kBadField)) {
    EXPECT_EQ(w->severity, Severity::kNote);
    const auto q = w->message.find('"');
    said.emplace_back(w->line, w->message.substr(q, w->message.find('?') - q));
  }
  EXPECT_EQ(said, (std::vector<std::pair<std::uint64_t, std::string>>{
                      {2, R"("count" is not in the log schema: a misspelling of "counts")"},
                      {3, R"("Wall_MS" is not in the log schema: a misspelling of "wall_ms")"},
                      {3, R"("cuda_stream_msx" is not in the log schema: a misspelling of "cuda_stream_ms")"}}));
}

// A config whose last_step is before its first_step was taken as it was: every
// "stopped early?" and stride check then used a window that cannot be.
TEST_F(ReaderTest, AWindowThatEndsBeforeItStartsIsAnErrorAndNotUsed) {
  const std::string config = R"({"type": "config", "rank": 1, "world_size": 4, "first_step": 11, "last_step": 5})";
  const auto p = write("window.jsonl", config + "\n" + update(11) + "\n" + update(12) + "\n");
  const Dataset d = read({p});
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->severity, Severity::kError);
  EXPECT_EQ(e->line, 1u);
  EXPECT_NE(e->message.find("the last step is before the first"), std::string::npos) << e->message;
  ASSERT_EQ(d.ranks.size(), 1u);
  ASSERT_TRUE(d.ranks[0].config);
  EXPECT_FALSE(d.ranks[0].config->first_step);
  EXPECT_FALSE(d.ranks[0].config->last_step);
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);
}

// A logger's prefix before each record, and a lost newline between two of them:
// `{rec}INFO:root:{rec}`. The first record, glued to the second's prefix, was skipped as
// "cut short by another".
TEST_F(ReaderTest, ARecordFollowedByTheNextOnesPrefixOnItsLineIsRead) {
  const auto p = write("logger.jsonl", kConfig + "\nINFO:root:" + update(11) + "INFO:root:" + update(12) + "\n" +
                                           "INFO:root:" + update(13) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  EXPECT_EQ(diag_.count(Problem::kJoinedRecords), 1u);
  ASSERT_EQ(d.ranks.size(), 1u);
  ASSERT_EQ(d.ranks[0].updates.size(), 3u);
  EXPECT_EQ(d.ranks[0].updates[1].step, 12);
}

TEST_F(ReaderTest, TruncatedFinalLineIsAWarningAndEarlierRecordsCount) {
  const std::string full = update(12);
  const auto p = write("t.jsonl", kConfig + "\n" + update(11) + "\n" + full.substr(0, full.size() / 2));
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  const Diagnostic* w = first(Problem::kTruncatedLine);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->severity, Severity::kWarning);
  EXPECT_EQ(w->line, 3u);
  // It counts the update records analyzed (1), not the config record with them.
  EXPECT_NE(w->message.find("the 1 update record(s) read before it are kept"), std::string::npos) << w->message;
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].updates.size(), 1u);
}

TEST_F(ReaderTest, AWholeFinalLineWithABadFieldIsThatErrorNotACutRecord) {
  // No newline after the last record, but the record is whole: its bad field is the
  // error it would be on any other line, not "the last line ends mid-record".
  std::string bad = update(12);
  const auto at = bad.find("\"wall_ms\": ");
  ASSERT_NE(at, std::string::npos) << bad;
  bad.insert(at + 11, "-");  // a negative wall time
  const auto p = write("bad-last.jsonl", kConfig + "\n" + update(11) + "\n" + bad + " ");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Problem::kTruncatedLine), 0u);
  const Diagnostic* e = first(Problem::kNegativeTime);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->severity, Severity::kError);
  EXPECT_EQ(e->line, 3u);
  EXPECT_EQ(d.ranks[0].updates.size(), 1u);
}

TEST_F(ReaderTest, EveryCutOfAFinalRecordIsATruncatedLineWarning) {
  // Whatever byte a killed job stopped at, a cut record is a warning, never a field error.
  const std::string full = update(12);
  for (std::size_t n = 1; n < full.size(); ++n) {
    const auto p = write("cut-" + std::to_string(n) + ".jsonl", kConfig + "\n" + update(11) + "\n" + full.substr(0, n));
    const Dataset d = read({p});
    EXPECT_EQ(diag_.count(Severity::kError), 0u) << "cut after " << n << " bytes: " << full.substr(0, n);
    EXPECT_EQ(diag_.count(Problem::kTruncatedLine), 1u) << "cut after " << n << " bytes: " << full.substr(0, n);
  }
}

TEST_F(ReaderTest, CompleteFinalLineWithoutNewlineIsFine) {
  const auto p = write("n.jsonl", kConfig + "\n" + update(11));
  const Dataset d = read({p});
  EXPECT_EQ(diag_.total(), 0u);
  EXPECT_EQ(d.ranks[0].updates.size(), 1u);
}

TEST_F(ReaderTest, CrlfLineEndings) {
  const auto p = write("crlf.jsonl", kConfig + "\r\n" + update(11) + "\r\n" + update(12) + "\r\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.total(), 0u);
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);
}

TEST_F(ReaderTest, EmptyInputIsItsOwnError) {
  const auto p = write("empty.jsonl", "");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 0u);
  EXPECT_EQ(diag_.count(Problem::kEmptyInput), 2u);  // the file (warning) and the whole input (error)
  EXPECT_EQ(diag_.count(Severity::kError), 1u);
}

TEST_F(ReaderTest, ConfigOnlyIsNothingToAnalyze) {
  const auto p = write("c.jsonl", kConfig + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 0u);
  const Diagnostic* e = first(Problem::kEmptyInput);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("no update records"), std::string::npos);
}

TEST_F(ReaderTest, MissingConfigIsReported) {
  const auto p = write("nc.jsonl", update(11) + "\n" + update(12) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Problem::kMissingConfig), 1u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_FALSE(d.ranks[0].config.has_value());
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);
}

TEST_F(ReaderTest, AConfigWithoutAUsableRankIsTheRankOfTheFilesUpdates) {
  // No rank, and a negative one (an error: not used): either way the file's updates all
  // name rank 1, so the config is rank 1's and every update is read under it.
  for (const std::string& rank_field : {std::string(), std::string(R"("rank": -1, )")}) {
    diag_ = Diagnostics();
    const std::string config =
        R"({"type": "config", )" + rank_field + R"("world_size": 4, "micro_batch": 8, "accumulation": 2})";
    const auto p = write("r.jsonl", config + "\n" + update(11) + "\n" + update(12) + "\n");
    const Dataset d = read({p});
    ASSERT_EQ(d.ranks.size(), 1u) << rank_field;
    ASSERT_TRUE(d.ranks[0].config.has_value()) << rank_field;
    EXPECT_EQ(d.ranks[0].config->rank, 1);
    EXPECT_EQ(d.ranks[0].config->micro_batch, 8);
    EXPECT_EQ(d.ranks[0].updates.size(), 2u);
    EXPECT_EQ(diag_.count(Problem::kMixedRuns), 0u);
    EXPECT_EQ(diag_.count(Severity::kError), rank_field.empty() ? 0u : 1u);
    const Diagnostic* n = first(Problem::kMissingConfig);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->severity, Severity::kNote);
    EXPECT_NE(n->message.find("read as rank 1's, the rank of the first update record after it (line 2)"),
              std::string::npos)
        << n->message;
  }
  // A record of another rank after that: one file holds one rank's log, as under a
  // config that names its rank.
  diag_ = Diagnostics();
  std::string other = update(13);
  other.replace(other.find("\"rank\": 1"), 9, "\"rank\": 2");
  const auto p = write("two.jsonl", R"({"type": "config", "world_size": 4})" "\n" + update(11) + "\n" + other + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 1u);
  EXPECT_EQ(diag_.count(Problem::kMixedRuns), 1u);
  // A second config of the same run that names rank 1 (the job fixed its config and
  // appended): the same run's, and every record is read.
  diag_ = Diagnostics();
  const auto q = write("again.jsonl", R"({"type": "config", "world_size": 4, "micro_batch": 8})" "\n" + update(11) +
                                          "\n" R"({"type": "config", "rank": 1, "world_size": 4, "micro_batch": 8})"
                                          "\n" + update(12) + "\n");
  const Dataset e = read({q});
  EXPECT_EQ(e.update_count(), 2u);
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
}

TEST_F(ReaderTest, StrictModeKeepsTheRankAConfigWasReadAsWhenItStopsThere) {
  // b's config names no rank and is of another run (seed) than a's rank-1 config: strict
  // mode stops at b's config, as for a config that names rank 1 (it read b again up to
  // the config, which has no update record after it to learn the rank from).
  const auto a = write("a.jsonl", R"({"type": "config", "rank": 1, "world_size": 4, "seed": 42})" "\n" + update(11) + "\n");
  const auto b = write("b.jsonl", R"({"type": "config", "world_size": 4, "seed": 43})" "\n" + update(12) + "\n");
  const Dataset d = read({a, b}, /*strict=*/true);
  const Diagnostic* m = first(Problem::kMixedRuns);
  ASSERT_NE(m, nullptr);
  EXPECT_NE(m->message.find("rank 1"), std::string::npos) << m->message;
  EXPECT_NE(m->message.find("differs from the one in"), std::string::npos) << m->message;
  EXPECT_EQ(diag_.count(Problem::kEmptyInput), 0u);  // not "unknown rank has a config but no update records"
  EXPECT_EQ(diag_.count(Severity::kError), 1u);
  EXPECT_TRUE(diag_.should_stop());
  for (const auto& r : d.ranks) EXPECT_TRUE(r.rank.has_value());  // no "unknown rank" bucket
}

TEST_F(ReaderTest, RecorderErrorsAreSaidToBeOfTheRecordsStepOrBefore) {
  // A record's recorder_errors were counted since the previous record: during its own
  // update too, not only before it.
  const auto p = write("e.jsonl", kConfig + "\n" + update(11) + "\n" +
                                      update(12, 100.0, R"(, "recorder_errors": {"too_many_regions": 81})") + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 2u);
  const Diagnostic* w = first(Problem::kRecorderErrors);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->line, 3u);
  EXPECT_NE(w->message.find("since its previous record, up to the end of step 12: 81 too_many_regions"),
            std::string::npos)
      << w->message;
}

TEST_F(ReaderTest, ARecorderErrorKindIsExplainedOnceAndABadStepIsNamed) {
  // A job whose end_update(step) went back: every record's warning carried the whole
  // bad_argument text, and none said it was the step.
  const std::string bad = R"(, "recorder_errors": {"bad_argument": 1})";
  const auto p = write("bad.jsonl", kConfig + "\n" + update(5) + "\n" + update(3, 100.0, bad) + "\n" +
                                        update(7, 100.0, bad) + "\n");
  read({p});
  std::vector<const Diagnostic*> w;
  for (const auto& d : diag_.kept())
    if (d.problem == Problem::kRecorderErrors) w.push_back(&d);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0]->message.find("1 bad_argument (a value refused is not recorded"), std::string::npos) << w[0]->message;
  EXPECT_NE(w[0]->message.find("; here step 3 is not above step 5 before it, which the recorder counts as a "
                               "bad_argument"),
            std::string::npos)
      << w[0]->message;
  EXPECT_NE(w[1]->message.find("1 bad_argument (as at line 3)"), std::string::npos) << w[1]->message;
  EXPECT_EQ(w[1]->message.find("here step"), std::string::npos) << w[1]->message;  // (step 7 is above step 5)
  // Against the highest step since the recorder opened (steps 10, 5, 7: 7 is not above 10),
  // and not across a resume (the recorder starts afresh at open: another cause).
  read({write("top.jsonl", kConfig + "\n" + update(10) + "\n" + update(5, 100.0, bad) + "\n" + update(7, 100.0, bad) +
                               "\n" + kConfig + "\n" + update(8, 100.0, bad) + "\n")});
  w.clear();
  for (const auto& d : diag_.kept())
    if (d.problem == Problem::kRecorderErrors) w.push_back(&d);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NE(w[0]->message.find("here step 5 is not above step 10 before it"), std::string::npos) << w[0]->message;
  EXPECT_NE(w[1]->message.find("here step 7 is not above step 10 before it"), std::string::npos) << w[1]->message;
  EXPECT_EQ(w[2]->message.find("here step"), std::string::npos) << w[2]->message;
}

// A step below the one before it in its file, no config record between: taken without a
// word (found by a helper, with a recorder's end_update(5), end_update(3)). One warning per
// file counts them and names the first; a restart's config between is no such step.
TEST_F(ReaderTest, StepsThatGoBackInAFileAreSaid) {
  const auto p = write("back.jsonl", kConfig + "\n" + update(1) + "\n" + update(2) + "\n" + update(5) + "\n" +
                                         update(3) + "\n" + update(6) + "\n" + update(4) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 6u);
  ASSERT_EQ(diag_.count(Problem::kStepsBackwards), 1u);
  const Diagnostic* w = first(Problem::kStepsBackwards);
  EXPECT_EQ(w->severity, Severity::kWarning);
  EXPECT_EQ(w->line, 5u);
  EXPECT_NE(w->message.find("2 update record(s) have a step below the one before them"), std::string::npos)
      << w->message;
  EXPECT_NE(w->message.find("step 3 here, after step 5 at line 4"), std::string::npos) << w->message;
  // (A restart from an earlier checkpoint, appended with its config record.)
  const auto restart = write("restart-back.jsonl", kConfig + "\n" + update(5) + "\n" + kConfig + "\n" + update(3) + "\n");
  diag_ = Diagnostics();
  (void)read({restart});
  EXPECT_EQ(diag_.count(Problem::kStepsBackwards), 0u);
}

// A log written by a newer recorder (config "schema": 2) was read as version 1 without a
// word, its figures possibly wrong (found by a helper). One warning per file says so; the
// records are still read. Version 1 and a config without "schema" say nothing.
TEST_F(ReaderTest, ANewerSchemaVersionIsSaid) {
  const auto p = write("newer.jsonl", R"({"type": "config", "schema": 2, "rank": 1})" "\n" + update(1) + "\n" +
                                          R"({"type": "config", "schema": 2, "rank": 1})" "\n" + update(2) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 2u);
  ASSERT_EQ(diag_.count(Problem::kNewerSchema), 1u);
  const Diagnostic* w = first(Problem::kNewerSchema);
  EXPECT_EQ(w->severity, Severity::kWarning);
  EXPECT_EQ(w->line, 1u);
  EXPECT_NE(w->message.find("schema version 2"), std::string::npos) << w->message;
  EXPECT_NE(w->message.find("reads version 1"), std::string::npos) << w->message;
  diag_ = Diagnostics();
  (void)read({write("v1.jsonl", R"({"type": "config", "schema": 1, "rank": 1})" "\n" + update(1) + "\n")});
  EXPECT_EQ(diag_.count(Problem::kNewerSchema), 0u);
}

TEST_F(ReaderTest, DuplicateStepKeepsTheFirstAndSaysWhere) {
  const auto p = write("d.jsonl", kConfig + "\n" + update(11, 100) + "\n" + update(11, 200) + "\n");
  const Dataset d = read({p});
  const Diagnostic* e = first(Problem::kDuplicateStep);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 3u);
  EXPECT_NE(e->message.find(":2"), std::string::npos);  // the first one's line
  ASSERT_EQ(d.ranks[0].updates.size(), 1u);
  EXPECT_DOUBLE_EQ(d.ranks[0].updates[0].wall_ms, 100);
}

TEST_F(ReaderTest, NegativeTimeIsRejected) {
  const std::string bad = R"({"type": "update", "step": 12, "wall_ms": 10, "cuda_stream_ms": {"fwd": -3.5}})";
  const auto p = write("neg.jsonl", kConfig + "\n" + bad + "\n");
  const Dataset d = read({p});
  const Diagnostic* e = first(Problem::kNegativeTime);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("cuda_stream_ms.fwd"), std::string::npos);
  EXPECT_EQ(e->column, bad.find("-3.5") + 1);
  EXPECT_EQ(d.update_count(), 0u);
}

TEST_F(ReaderTest, NegativeSampleIndexIsRejected) {
  // A sample index is a position in the dataset; -7 was taken silently.
  const std::string bad = update(2, 100.0, R"(, "sample_indices": [4, -7, 9])");
  const Dataset d = read({write("negidx.jsonl", kConfig + "\n" + update(1) + "\n" + bad + "\n")});
  const Diagnostic* e = first(Problem::kNegativeTime);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 3u);
  EXPECT_EQ(e->column, bad.find("-7") + 1);
  EXPECT_NE(e->message.find("sample_indices[1]"), std::string::npos) << e->message;
  EXPECT_EQ(d.update_count(), 1u);
}

// A record-level error found at a key (a key given twice, an unknown key, a key that is
// not what its map holds) gave no column (0), on lines of several kilobytes: the column is
// the offending key's opening quote (the second one, for a key given twice).
TEST_F(ReaderTest, ErrorsFoundAtAKeyGiveTheKeysColumn) {
  const std::string head = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, )";
  struct Case {
    std::string body;  // the rest of the record
    std::string key;   // the offending key, quoted: its last occurrence is the error's column
  };
  const std::vector<Case> cases = {
      {R"("cuda_stream_ms": {"a": 1, "b": 2, "a": 3}})", R"("a")"},
      {R"("cpu_call_ms": {"a": 1, "a": 3}})", R"("a")"},
      {R"("calls": {"a": 1, "a": 3}})", R"("a")"},
      {R"("parents": {"a": null, "a": null}})", R"("a")"},
      {R"("counts": {"samples": 1, "samples": 3}})", R"("samples")"},
      {R"("frame_histogram": {"9": 1, "x": 3}})", R"("x")"},
      {R"x("input_shapes": {"(8, 3)": 1, "8x3": 3}})x", R"("8x3")"},
      {R"("recorder_errors": {"": 1}})", R"("")"},
      {R"("microbatches": [{"frames": [1], "frames": [2]}]})", R"("frames")"},
      {R"("microbatches": [{"frames": [1], "colour": 2}]})", R"("colour")"},
  };
  for (const Case& k : cases) {
    const std::string rec = head + k.body;
    diag_ = Diagnostics();
    const Dataset d = read({write("key_columns.jsonl", kConfig + "\n" + rec + "\n")});
    EXPECT_EQ(d.update_count(), 0u) << k.body;
    const Diagnostic* e = first(Problem::kBadField);
    ASSERT_NE(e, nullptr) << k.body;
    EXPECT_EQ(e->line, 2u);
    EXPECT_EQ(e->column, rec.rfind(k.key) + 1) << k.body << ": " << e->message;
  }
}

TEST_F(ReaderTest, EmptyAndOverlongNamesAreRejected) {
  // An empty region name, or a value written where a name goes (100,000 bytes, printed
  // whole in every table), were taken as names.
  const std::string empty = R"({"type": "update", "step": 2, "wall_ms": 10, "cuda_stream_ms": {"": 3.5}})";
  const std::string longer = R"({"type": "update", "step": 3, "wall_ms": 10, "counts": {")" + std::string(1025, 'x') +
                             R"(": 3}})";
  const std::string longest_ok = R"({"type": "update", "step": 4, "wall_ms": 10, "cuda_stream_ms": {")" +
                                 std::string(1024, 'y') + R"(": 3.5}})";
  const Dataset d = read({write("names.jsonl", kConfig + "\n" + empty + "\n" + longer + "\n" + longest_ok + "\n")});
  EXPECT_EQ(d.update_count(), 1u);  // step 4: a name of 1024 bytes is fine
  ASSERT_EQ(diag_.count(Problem::kBadField), 2u);
  const std::vector<const Diagnostic*> bad = all(Problem::kBadField);
  EXPECT_EQ(bad[0]->line, 2u);
  EXPECT_EQ(bad[0]->column, empty.find("\"\"") + 1);
  EXPECT_NE(bad[0]->message.find("cuda_stream_ms: a name is empty"), std::string::npos) << bad[0]->message;
  EXPECT_EQ(bad[1]->line, 3u);
  EXPECT_EQ(bad[1]->column, longer.find("\"xxx") + 1);
  EXPECT_NE(bad[1]->message.find("counts: a name of 1025 bytes"), std::string::npos) << bad[1]->message;
  // The same with an escape in the name: unescaping consumed the key, and the message's
  // position was read from it afterwards (undefined in simdjson; UBSan's "unreachable"
  // in fuzz_log). Both maps, and the position is the key's opening quote.
  for (const std::string map : {"counts", "cpu_call_ms"}) {
    const std::string escaped = R"({"type": "update", "step": 5, "wall_ms": 10, ")" + map + R"(": {"a\"b)" +
                                std::string(1100, 'z') + R"(": 3}})";
    const Dataset e = read({write("escaped.jsonl", kConfig + "\n" + escaped + "\n")});
    EXPECT_EQ(e.update_count(), 0u) << map;
    const Diagnostic* f = first(Problem::kBadField);
    ASSERT_NE(f, nullptr) << map;
    EXPECT_EQ(f->line, 2u);
    EXPECT_EQ(f->column, escaped.find("\"a\\") + 1) << map;
    EXPECT_NE(f->message.find(map + ": a name of 1103 bytes (\"a\"bzz"), std::string::npos) << f->message;
  }
}

TEST_F(ReaderTest, NonFiniteTimesAreRejected) {
  // Python's json module writes NaN and Infinity; 1e999 overflows a double.
  for (const std::string v : {"NaN", "Infinity", "-Infinity", "1e999"}) {
    const std::string bad = R"({"type": "update", "step": 12, "wall_ms": )" + v + "}";
    const auto p = write("nf.jsonl", kConfig + "\n" + bad + "\n");
    const Dataset d = read({p});
    const Diagnostic* e = first(Problem::kNonFinite);
    ASSERT_NE(e, nullptr) << v;
    EXPECT_EQ(e->line, 2u);
    EXPECT_EQ(e->column, bad.find(v) + 1) << v;
    EXPECT_EQ(d.update_count(), 0u);
  }
}

// gpu_busy_ms (a trace's, schema::kGpuBusyMs) must be a time in ms: another value is an
// error naming the field, which is left out; the record stays.
TEST_F(ReaderTest, AGpuBusyTimeThatIsNoTimeIsLeftOutWithAnError) {
  for (const std::string v : {R"("12")", "-1", "1e13", "[1]", "null"}) {
    const std::string rec = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "gpu_busy_ms": )" + v + "}";
    const Dataset d = read({write("gb.jsonl", kConfig + "\n" + rec + "\n" +
                                                  R"({"type": "update", "rank": 1, "step": 3, "wall_ms": 10, )"
                                                  R"("gpu_busy_ms": 7.25})" + "\n")});
    ASSERT_EQ(d.update_count(), 2u) << v;
    const Diagnostic* e = first(Problem::kBadField);
    ASSERT_NE(e, nullptr) << v;
    EXPECT_EQ(e->line, 2u);
    EXPECT_EQ(e->column, rec.find(v) + 1) << v;
    EXPECT_NE(e->message.find("gpu_busy_ms: " + v + " is not a time in milliseconds"), std::string::npos)
        << e->message;
    EXPECT_TRUE(d.ranks[0].updates[0].extra.empty()) << v;
    ASSERT_EQ(d.ranks[0].updates[1].extra.size(), 1u);
    EXPECT_EQ(d.ranks[0].updates[1].extra[0].json, "7.25");
  }
}

// A gpu_busy_ms or start_unix_ms that is no JSON number (tru, +5, .5, 05) lost the whole
// record as malformed JSON; as any other bad value there, it is left out with an error.
// A number too small for a double (1e-999) is 0, as in wall_ms; it was refused.
TEST_F(ReaderTest, AVerbatimSchemaFieldThatIsNoJsonNumberIsLeftOutNotTheRecord) {
  for (const std::string key : {"gpu_busy_ms", "start_unix_ms"})
    for (const std::string v : {"tru", "+5", ".5", "05", "0x10", "1."}) {
      const std::string rec = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, ")" + key + R"(": )" + v + "}";
      const Dataset d = read({write("vf.jsonl", kConfig + "\n" + rec + "\n")});
      ASSERT_EQ(d.update_count(), 1u) << key << " " << v;
      EXPECT_EQ(first(Problem::kMalformedJson), nullptr) << key << " " << v;
      const Diagnostic* e = first(Problem::kBadField);
      ASSERT_NE(e, nullptr) << key << " " << v;
      EXPECT_EQ(e->severity, Severity::kError);
      EXPECT_EQ(e->column, rec.find(v, rec.find(key)) + 1) << key << " " << v;
      EXPECT_NE(e->message.find(key + ": " + v + " is not "), std::string::npos) << e->message;
      EXPECT_TRUE(d.ranks[0].updates[0].extra.empty()) << key << " " << v;
    }
  for (const std::string key : {"gpu_busy_ms", "start_unix_ms"}) {
    const Dataset d = read({write("uf.jsonl", kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 2, )" +
                                                 R"("wall_ms": 10, ")" + key + R"(": 1e-999})" + "\n")});
    ASSERT_EQ(d.update_count(), 1u);
    EXPECT_TRUE(diag_.kept().empty()) << key << ": " << diag_.kept()[0].message;
    ASSERT_EQ(d.ranks[0].updates[0].extra.size(), 1u) << key;
    EXPECT_EQ(d.ranks[0].updates[0].extra_number(key), 0.0) << key;  // (read as 0 where it is used, too)
  }
  // 1 followed by 400 zeros, e-1: 1e399, beyond a double (a negative exponent is no underflow).
  const std::string huge = "1" + std::string(400, '0') + "e-1";
  const Dataset d = read({write("of.jsonl", kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 2, )" +
                                               R"("wall_ms": 10, "gpu_busy_ms": )" + huge + "}\n")});
  ASSERT_EQ(d.update_count(), 1u);
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_TRUE(d.ranks[0].updates[0].extra.empty());
  // A string, array or object that is not JSON there is malformed, as anywhere.
  for (const std::string v : {R"("\x")", "[1, tru]"}) {
    const Dataset m = read({write("mf.jsonl", kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 2, )" +
                                                 R"("wall_ms": 10, "gpu_busy_ms": )" + v + "}\n")});
    EXPECT_EQ(m.update_count(), 0u) << v;
    EXPECT_NE(first(Problem::kMalformedJson), nullptr) << v;
  }
}

// A counter of 2^53 + 1 was read as the double 2^53 and taken, without a word (2^53 + 3
// was refused): the integer is checked as written. One written as a float that reads as
// 2^53 (9007199254740993.0) cannot be told from it either.
TEST_F(ReaderTest, ACounterAbove2To53IsRefusedEvenWhereADoubleRoundsItDown) {
  for (const std::string v : {"9007199254740993", "9007199254740993.0", "9.007199254740993e15"}) {
    const std::string rec = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "counts": {"token_slots": )" +
                            v + "}}";
    const Dataset d = read({write("c53.jsonl", kConfig + "\n" + rec + "\n")});
    EXPECT_EQ(d.update_count(), 0u) << v;
    const Diagnostic* e = first(Problem::kBadField);
    ASSERT_NE(e, nullptr) << v;
    EXPECT_EQ(e->column, rec.find(v) + 1) << v;
    EXPECT_NE(e->message.find("counts.token_slots: count " + v), std::string::npos) << e->message;
  }
  const Dataset d = read({write("c53.jsonl", kConfig + "\n" +
                                                 R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, )"
                                                 R"("counts": {"a": 9007199254740992, "b": 1.5e3}})" + "\n")});
  ASSERT_EQ(d.update_count(), 1u);  // 2^53 itself, as an integer, is exact
  EXPECT_TRUE(diag_.kept().empty());
  EXPECT_EQ(d.ranks[0].updates[0].counters[0].value, 9007199254740992.0);
}

// A key given twice inside a field of the job's own (an update's or a config's) was kept
// as written, and the report showed the second value alone: the field is left out, with
// an error naming the key; the record is kept.
TEST_F(ReaderTest, AKeyGivenTwiceInsideAFieldOfTheJobsOwnLeavesTheFieldOut) {
  const std::string rec = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "loss": {"a": 1, "b": )"
                          R"({"x": 1, "\u0078": 2}}, "lr": 0.1})";
  const std::string config =
      R"({"type": "config", "rank": 1, "world_size": 4, "opt": {"a": 1, "a": 2}, "seed": 3})";
  const Dataset d = read({write("dk.jsonl", config + "\n" + rec + "\n")});
  ASSERT_EQ(d.update_count(), 1u);
  const auto errors = all(Problem::kBadField);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0]->line, 1u);
  EXPECT_NE(errors[0]->message.find(R"(config field "opt" gives the key "a" twice in one object)"), std::string::npos)
      << errors[0]->message;
  EXPECT_EQ(errors[1]->line, 2u);
  EXPECT_EQ(errors[1]->column, rec.find(R"("\u0078")") + 1);  // the second of the two
  EXPECT_NE(errors[1]->message.find(R"(field "loss" gives the key "x" twice in one object)"), std::string::npos)
      << errors[1]->message;
  ASSERT_EQ(d.ranks[0].updates[0].extra.size(), 1u);
  EXPECT_EQ(d.ranks[0].updates[0].extra[0].key, "lr");
  ASSERT_TRUE(d.ranks[0].config);
  EXPECT_EQ(d.ranks[0].config->fields.size(), 3u);  // rank, world_size, seed
  EXPECT_EQ(d.ranks[0].config->seed, 3);
  // Also beside values a JSON library would refuse (a number beyond a double, a lone
  // surrogate escape: JSON as the grammar defines it); a key that differs only inside an
  // escape is another key; the same key in two objects is no repeat.
  for (const std::string v : {R"({"x": 1e999, "lr": 1, "lr": 2})", R"({"x": "\ud800", "lr": 1, "lr": 2})",
                              R"({"lr": 1, "l\u0072": 2})", R"({"\ud83d\ude00": 1, "\uD83D\uDE00": 2, "lr": 3})",
                              R"({"": 1, "": 2})"}) {  // (the empty key was taken for "no repeat")
    const std::string r = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "opt": )" + v + "}";
    const Dataset e = read({write("dk2.jsonl", kConfig + "\n" + r + "\n")});
    ASSERT_EQ(e.update_count(), 1u) << v;
    ASSERT_EQ(all(Problem::kBadField).size(), 1u) << v;
    EXPECT_TRUE(e.ranks[0].updates[0].extra.empty()) << v;
  }
  for (const std::string v : {R"({"a": {"k": 1}, "b": {"k": 2}})", R"({"lr": 1, "l\u0073": 2})", R"([{"k": 1}, {"k": 2}])"}) {
    const std::string r = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "opt": )" + v + "}";
    const Dataset e = read({write("dk3.jsonl", kConfig + "\n" + r + "\n")});
    ASSERT_EQ(e.update_count(), 1u) << v;
    EXPECT_TRUE(diag_.kept().empty()) << v << ": " << diag_.kept()[0].message;
    ASSERT_EQ(e.ranks[0].updates[0].extra.size(), 1u) << v;
  }
  // Two identical escaped keys are named decoded (as "\x00"), not as written ("\u0000").
  const Dataset h = read({write("dk5.jsonl", kConfig + "\n" +
                                                 R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, )"
                                                 R"("opt": {"\u0000": 1, "\u0000": 3}})" + "\n")});
  ASSERT_EQ(h.update_count(), 1u);
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_NE(first(Problem::kBadField)->message.find(R"(gives the key "\x00" twice)"), std::string::npos)
      << first(Problem::kBadField)->message;
  // The empty key given twice in a config's field (it went unreported once the config's
  // check shared the update's grammar pass, which took an empty key for "none").
  const Dataset f = read({write("dk4.jsonl", R"({"type": "config", "rank": 1, "opt": {"": 1, "": 2}, "seed": 3})"
                                             "\n" R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10})" "\n")});
  ASSERT_EQ(f.update_count(), 1u);
  const Diagnostic* g = first(Problem::kBadField);
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->message.find(R"(config field "opt" gives the key "" twice in one object)"), std::string::npos)
      << g->message;
  ASSERT_TRUE(f.ranks[0].config);
  EXPECT_EQ(f.ranks[0].config->find("opt"), nullptr);
}

// An empty parent name, or an empty or over-long recorder error kind, is no name (as a
// region's): each was taken without a word. A kind counted 0 times is no error: it was
// "0 write_failed (records are missing)".
TEST_F(ReaderTest, EmptyParentAndErrorKindNamesAreRefusedAndZeroErrorCountsAreNotWarned) {
  const std::string base = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "cpu_call_ms": {"a": 1}, )";
  for (const std::string& bad : std::vector<std::string>{R"("parents": {"a": ""})", R"("recorder_errors": {"": 1})",
                                                         R"("recorder_errors": {")" + std::string(1025, 'k') + R"(": 1})"}) {
    const Dataset d = read({write("pe.jsonl", kConfig + "\n" + base + bad + "}\n")});
    EXPECT_EQ(d.update_count(), 0u) << bad;
    const Diagnostic* e = first(Problem::kBadField);
    ASSERT_NE(e, nullptr) << bad;
    EXPECT_NE(e->message.find(bad.find("parents") != std::string::npos ? "parents.a: a name is empty"
                              : bad.find("\"\"") != std::string::npos ? "recorder_errors: a name is empty"
                                                                        : "recorder_errors: a name of 1025 bytes"),
              std::string::npos)
        << e->message;
  }
  const Dataset d = read({write("z.jsonl", kConfig + "\n" + base + R"("recorder_errors": {"write_failed": 0}})" + "\n")});
  ASSERT_EQ(d.update_count(), 1u);
  EXPECT_EQ(first(Problem::kRecorderErrors), nullptr);
}

// input_shapes are (batch, padded length): "(8, 9999, 2)" made the padding analysis's
// longest padded length 2, and "(8,)" gave none, without a word. Such shapes are kept,
// said once with a count, and not read as a padded length.
TEST_F(ReaderTest, InputShapesThatAreNotTwoDimensionalAreSaidOnce) {
  const std::string u = R"({"type": "update", "rank": 1, "wall_ms": 10, "counts": {"token_slots": 100, )"
                        R"("valid_tokens": 90}, "input_shapes": )";
  const Dataset d = read({write("sh.jsonl", kConfig + "\n" + u + R"x({"(8, 50)": 1}, "step": 1})x" + "\n" + u +
                                                R"x({"(8, 9999, 2)": 2, "(8,)": 1}, "step": 2})x" + "\n" + u +
                                                R"x({"(4, 70)": 1, "(3, 4, 5)": 1}, "step": 3})x" + "\n")});
  ASSERT_EQ(d.update_count(), 3u);
  const auto warnings = all(Problem::kBadField);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0]->severity, Severity::kWarning);
  EXPECT_EQ(warnings[0]->line, 3u);
  EXPECT_NE(warnings[0]->message.find("3 input shape(s) in 2 update(s) do not have 2 dimensions (first: step 2, "
                                      "(8, 9999, 2))"),
            std::string::npos)
      << warnings[0]->message;
  EXPECT_EQ(d.ranks[0].updates[1].input_shapes.size(), 2u);  // kept
  const AnalysisInput in{d, nullptr};
  const PaddingResult p = analyze_padding(in);
  ASSERT_TRUE(p.max_padded_length);
  EXPECT_EQ(*p.max_padded_length, 70.0);  // of (8, 50) and (4, 70); not 9999 or 5
}

TEST_F(ReaderTest, NonFiniteValuesInTheJobsOwnFieldsLeaveTheFieldOut) {
  // `"loss": NaN` (Python's json, after a divergence) dropped the update as "the JSON
  // structure is broken", while -Infinity, nan, [NaN] or tru were kept as the field's
  // text without a word (and written back by `import` as invalid JSON).
  for (const std::string v : {"NaN", "Infinity", "-Infinity", "-NaN", "nan", "[1, NaN]", R"({"a": Infinity})"}) {
    const std::string rec = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "loss": )" + v +
                            R"(, "lr": 0.5, "note": {"a": "NaN"}})";
    const Dataset d = read({write("nf.jsonl", kConfig + "\n" + update(1) + "\n" + rec + "\n")});
    ASSERT_EQ(d.update_count(), 2u) << v;  // the record is kept
    EXPECT_EQ(diag_.count(Severity::kError), 1u) << v;
    const Diagnostic* e = first(Problem::kNonFinite);
    ASSERT_NE(e, nullptr) << v;
    EXPECT_EQ(e->line, 3u);
    EXPECT_EQ(e->column, rec.find(v) + 1) << v;
    EXPECT_NE(e->message.find("field \"loss\" holds"), std::string::npos) << e->message;
    EXPECT_NE(e->message.find("the field is left out, the record kept"), std::string::npos) << e->message;
    const auto& extra = d.ranks[0].updates[1].extra;  // the others, "NaN" in a string too
    ASSERT_EQ(extra.size(), 2u) << v;
    EXPECT_EQ(extra[0].key, "lr");
    EXPECT_EQ(extra[0].json, "0.5");
    EXPECT_EQ(extra[1].json, R"({"a": "NaN"})");
  }
  // Other text that is not JSON rejects the record, as anywhere else in it.
  for (const std::string v : {"tru", "nul", "01", "1.", "-", "[1, tru]", R"("a\x")", "info", "nancy",
                              "[Infinity, tru]", "[1,]"}) {
    const std::string rec = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "loss": )" + v + "}";
    const Dataset d = read({write("bad.jsonl", kConfig + "\n" + update(1) + "\n" + rec + "\n")});
    EXPECT_EQ(d.update_count(), 1u) << v;
    const Diagnostic* e = first(Problem::kMalformedJson);
    ASSERT_NE(e, nullptr) << v;
    EXPECT_EQ(e->line, 3u);
    EXPECT_NE(e->message.find("in field \"loss\": " + v + " is not a JSON value"), std::string::npos) << e->message;
  }
  // A string left unread and followed by ':' was taken for a key by simdjson, which stepped
  // over the ':' and the next value: these records were kept without a word (the second
  // with the inner "wall_ms" swallowed), and a config took "x": "a".
  for (const auto& [bad, value] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "update", "rank": 1, "step": 2, "x": "a": "b"}, "wall_ms": 10})", R"("a")"},
           {R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "x": "a": {"wall_ms": 9}}})", R"("a")"},
           {R"({"type": "update": 1}, "rank": 1, "step": 2, "wall_ms": 10})", R"("update")"},
           {R"({"type": "config", "rank": 1, "world_size": 4, "x": "a": "b"}})", R"("a")"}}) {
    const Dataset d = read({write("colon.jsonl", kConfig + "\n" + update(1) + "\n" + bad + "\n")});
    EXPECT_EQ(d.update_count(), 1u) << bad;
    const Diagnostic* e = first(Problem::kMalformedJson);
    ASSERT_NE(e, nullptr) << bad;
    EXPECT_EQ(e->line, 3u);
    EXPECT_EQ(e->column, bad.find(value + ":") + value.size() + 1) << bad;  // the ':' after the value
    EXPECT_NE(e->message.find("a ':' after the value of"), std::string::npos) << e->message;
  }
  // Nested deeper than simdjson's limit: said so (it read "is not a JSON value").
  read({write("deep.jsonl", kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "x": )" +
                                std::string(1030, '[') + std::string(1030, ']') + "}\n")});
  ASSERT_NE(first(Problem::kMalformedJson), nullptr);
  EXPECT_NE(first(Problem::kMalformedJson)->message.find("in field \"x\": nested more than 1024 levels deep"),
            std::string::npos)
      << first(Problem::kMalformedJson)->message;
  // An array never closed (its NaN aside) is no JSON value either.
  read({write("open.jsonl", kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "loss": [NaN})" +
                                "\n")});
  EXPECT_EQ(diag_.count(Problem::kMalformedJson), 1u);
  EXPECT_EQ(diag_.count(Problem::kNonFinite), 0u);
  // A NaN field is a key like any other: given twice, the record is rejected.
  read({write("twice.jsonl", kConfig + "\n" + R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, )"
                                                R"("loss": 1, "loss": NaN})" + "\n")});
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_NE(first(Problem::kBadField)->message.find("field \"loss\" appears twice"), std::string::npos);
  // JSON values of every kind are kept as written: numbers beyond a double and a lone
  // surrogate escape (Python's json writes one for an undecodable file name) are JSON, in
  // an array as alone (an array was checked by a parser that converts numbers and rejects
  // both, and dropped the record).
  const std::string ok = R"({"type": "update", "rank": 1, "step": 2, "wall_ms": 10, "a": -0.5e-3, "b": true, )"
                         R"("c": null, "d": "x\u00e9\n", "e": [1, {"f": false}], "g": 1e400, )"
                         R"("h": ["img_\udcff.jpg", 1e400, 123456789012345678901234567890], "i": "\udcff"})";
  const Dataset d = read({write("ok.jsonl", kConfig + "\n" + ok + "\n")});
  EXPECT_EQ(diag_.total(), 0u);
  ASSERT_EQ(d.update_count(), 1u);
  std::vector<std::string> kept;
  for (const auto& f : d.ranks[0].updates[0].extra) kept.push_back(f.json);
  EXPECT_EQ(kept, (std::vector<std::string>{"-0.5e-3", "true", "null", R"("x\u00e9\n")", R"([1, {"f": false}])", "1e400",
                                            R"(["img_\udcff.jpg", 1e400, 123456789012345678901234567890])",
                                            R"("\udcff")"}));
}

TEST_F(ReaderTest, AnElasticJobsAppendedRunIsTheOneMostRanksHaveWhateverTheFilesLayout) {
  // Ranks 0 and 1 ran at world size 2 for steps 1..20, then all four ranks at world size 4
  // for steps 21..40, ranks 0 and 1 appending to their files. The world-2 run was kept
  // (the records after a file's second, differing config were skipped and did not count),
  // while the same records split into one file per run kept the world-4 run, as the log
  // schema says; and --steps 21:40 kept nothing ("outside the window").
  auto config = [](int rank, int world) {
    return fmt::format(R"({{"type": "config", "rank": {}, "world_size": {}}})", rank, world) + "\n";
  };
  auto updates = [](int rank, int first, int last) {
    std::string t;
    for (int step = first; step <= last; ++step)
      t += fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": {}}})", rank, step, 10 + rank) + "\n";
    return t;
  };
  const auto dir = (dir_ / "grow").string();
  const auto split = (dir_ / "split").string();
  std::filesystem::create_directories(dir);
  std::filesystem::create_directories(split);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string later = config(rank, 4) + updates(rank, 21, 40);
    const std::string early = rank < 2 ? config(rank, 2) + updates(rank, 1, 20) : std::string();
    write("grow/rank" + std::to_string(rank) + ".jsonl", early + later);
    write("split/rank" + std::to_string(rank) + ".b.jsonl", later);
    if (rank < 2) write("split/rank" + std::to_string(rank) + ".a.jsonl", early);
  }
  for (const auto& input : {dir, split}) {
    const Dataset d = read({input});
    ASSERT_EQ(d.ranks.size(), 4u) << input;
    for (const auto& r : d.ranks) {
      ASSERT_TRUE(r.config) << input;
      EXPECT_EQ(r.config->world_size, 4) << input;
      ASSERT_EQ(r.updates.size(), 20u) << input << " rank " << *r.rank;
      EXPECT_EQ(r.updates.front().step, 21);
      EXPECT_EQ(r.updates.back().step, 40);
    }
    // Each of ranks 0 and 1: its world-2 records are skipped, and said so.
    std::size_t skipped = 0;
    for (const auto* m : all(Problem::kMixedRuns))
      if (m->message.find("is not of the run most ranks belong to") != std::string::npos &&
          m->message.find("the 20 update record(s) read for rank") != std::string::npos)
        ++skipped;
    EXPECT_EQ(skipped, 2u) << input;
    // Appended to each rank's file, a restart is not bad input: warnings. In files of
    // their own, the runs cannot be told from a mix-up: errors.
    EXPECT_EQ(diag_.count(Severity::kError), input == dir ? 0u : 2u) << input;
  }
  const Dataset window = read({dir}, false, StepRange{21, 40});
  EXPECT_EQ(window.update_count(), 80u);
  // The other way round (world 4, then 2 appended by ranks 0 and 1): the world-4 run
  // stays, and the appended records are skipped, said to be after their config.
  std::filesystem::create_directories(dir_ / "shrink");
  for (int rank = 0; rank < 4; ++rank)
    write("shrink/rank" + std::to_string(rank) + ".jsonl",
          config(rank, 4) + updates(rank, 1, 20) + (rank < 2 ? config(rank, 2) + updates(rank, 21, 40) : ""));
  const Dataset shrink = read({(dir_ / "shrink").string()});
  EXPECT_EQ(shrink.update_count(), 80u);
  for (const auto& r : shrink.ranks) EXPECT_EQ(r.config->world_size, 4);
  std::size_t after = 0;
  for (const auto* m : all(Problem::kMixedRuns))
    if (m->message.find("it is another run's, appended to the file; the 20 update record(s) after it are skipped") !=
        std::string::npos)
      ++after;
  EXPECT_EQ(after, 2u);
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
}

TEST_F(ReaderTest, MixedRunsInOneFile) {
  const std::string other = R"({"type": "config", "rank": 1, "world_size": 8, "micro_batch": 8, "accumulation": 2})";
  const auto p = write("mix.jsonl", kConfig + "\n" + update(11) + "\n" + other + "\n" + update(1) + "\n" + update(2) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Problem::kMixedRuns), 2u);  // the config line and the skipped records
  const Diagnostic* e = first(Problem::kMixedRuns);
  EXPECT_EQ(e->line, 3u);
  // It listed every run setting of both configs; it names the ones that differ.
  EXPECT_NE(e->message.find("a second config record (rank 1) differs from the one at line 1 in its run settings "
                            "(world_size 8 against 4, global_batch absent against 64)"),
            std::string::npos)
      << e->message;
  EXPECT_EQ(d.update_count(), 1u);

  // The same across files: one run_id differs.
  diag_ = Diagnostics();
  const std::string with_id = R"({"type": "config", "rank": 1, "world_size": 4, "run_id": "b"})";
  const auto a = write("a.jsonl", R"({"type": "config", "rank": 1, "world_size": 4, "run_id": "a"})" "\n" + update(2) + "\n");
  const auto b = write("b.jsonl", with_id + "\n" + update(1) + "\n");  // (a reaches the higher step: a is kept)
  read({a, b});
  const Diagnostic* f = first(Problem::kMixedRuns);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("config for rank 1 differs from the one in " + a +
                            ":1 in its run settings (run_id \"b\" against \"a\"): these files come from different runs"),
            std::string::npos)
      << f->message;
}

TEST_F(ReaderTest, UpdateOfAnotherRankInAFile) {
  const std::string other = R"({"type": "update", "rank": 2, "step": 12, "wall_ms": 10})";
  const auto p = write("r.jsonl", kConfig + "\n" + update(11) + "\n" + other + "\n");
  const Dataset d = read({p});
  const Diagnostic* e = first(Problem::kMixedRuns);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 3u);
  EXPECT_EQ(d.update_count(), 1u);
}

TEST_F(ReaderTest, FilesOfDifferentRuns) {
  const auto a = write("a.jsonl", kConfig + "\n" + update(11) + "\n");
  const std::string cfg2 = R"({"type": "config", "rank": 2, "world_size": 8, "micro_batch": 8, "accumulation": 2})";
  const auto b = write("b.jsonl", cfg2 + "\n" + R"({"type": "update", "rank": 2, "step": 11, "wall_ms": 5})" + "\n");
  const Dataset d = read({a, b});
  const Diagnostic* e = first(Problem::kMixedRuns);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->file, b);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].rank, 1);
}

TEST_F(ReaderTest, AFileOfAnotherRunForTheSameRankIsSkippedWhole) {
  // Rank 1 twice: the second file's config has another world size, so its records
  // (including one before its config) belong to another run and are not analyzed.
  const auto a = write("a.jsonl", kConfig + "\n" + update(11) + "\n" + update(12) + "\n");
  const std::string cfg2 = R"({"type": "config", "rank": 1, "world_size": 8, "micro_batch": 8, "accumulation": 2})";
  // (Each run has one rank: the one whose records reach the higher step is kept, a's.)
  const auto b = write("b.jsonl", update(9) + "\n" + cfg2 + "\n" + update(5) + "\n" + update(6) + "\n");
  const Dataset d = read({a, b});
  ASSERT_EQ(d.ranks.size(), 1u);
  ASSERT_EQ(d.ranks[0].updates.size(), 2u);
  EXPECT_EQ(d.ranks[0].updates.back().step, 12);
  EXPECT_EQ(d.ranks[0].files, std::vector<std::uint32_t>{0});
  const Diagnostic* e = first(Problem::kMixedRuns);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->file, b);
  EXPECT_EQ(e->line, 2u);
  EXPECT_NE(e->message.find("3 update record(s) are skipped"), std::string::npos) << e->message;
}

TEST_F(ReaderTest, TheRunMostRanksBelongToIsKeptWhateverTheFileOrder) {
  // Run A: ranks 0 and 1 (world size 2). An old file of run B for rank 1 (world size 8)
  // lies next to them. In any order, rank 1 keeps run A's records and B's file is the one
  // reported and skipped.
  auto cfg = [](int rank, int world) {
    return fmt::format(R"({{"type": "config", "rank": {}, "world_size": {}, "micro_batch": 8, "accumulation": 2}})",
                       rank, world);
  };
  auto upd = [](int rank, int step) {
    return fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": 5}})", rank, step);
  };
  const auto a0 = write("a0.jsonl", cfg(0, 2) + "\n" + upd(0, 1) + "\n" + upd(0, 2) + "\n");
  const auto a1 = write("a1.jsonl", cfg(1, 2) + "\n" + upd(1, 1) + "\n" + upd(1, 2) + "\n");
  const auto b1 = write("b1.jsonl", cfg(1, 8) + "\n" + upd(1, 100) + "\n");
  for (const auto& order : {std::vector<std::string>{a0, a1, b1}, std::vector<std::string>{b1, a0, a1},
                            std::vector<std::string>{a1, b1, a0}}) {
    const Dataset d = read(order);
    ASSERT_EQ(d.ranks.size(), 2u) << order[0];
    for (const auto& r : d.ranks) {
      ASSERT_EQ(r.updates.size(), 2u) << order[0];
      EXPECT_EQ(r.config->world_size, 2);
      EXPECT_EQ(r.updates.back().step, 2);
    }
    ASSERT_EQ(diag_.count(Problem::kMixedRuns), 1u) << order[0];
    EXPECT_EQ(first(Problem::kMixedRuns)->file, b1);
  }
  // With run B on most ranks, B is kept: rank 0 and 1 of A are the ones skipped.
  const auto b0 = write("b0.jsonl", cfg(0, 8) + "\n" + upd(0, 100) + "\n");
  const auto b2 = write("b2.jsonl", cfg(2, 8) + "\n" + upd(2, 100) + "\n");
  const Dataset d = read({a0, a1, b0, b1, b2});
  ASSERT_EQ(d.ranks.size(), 3u);
  for (const auto& r : d.ranks) EXPECT_EQ(r.config->world_size, 8);
  EXPECT_EQ(diag_.count(Problem::kMixedRuns), 2u);
}

TEST_F(ReaderTest, FilesOfTheSameRunWithAStringSetting) {
  // Regression: the first rank's config was moved into the dataset before the later ranks
  // were compared with it, so a string setting (model) looked different.
  auto cfg = [](int rank) {
    return R"({"type": "config", "rank": )" + std::to_string(rank) + R"(, "world_size": 2, "model": "/m"})";
  };
  auto upd = [](int rank) { return R"({"type": "update", "rank": )" + std::to_string(rank) + R"(, "step": 1, "wall_ms": 5})"; };
  const auto a = write("a.jsonl", cfg(0) + "\n" + upd(0) + "\n");
  const auto b = write("b.jsonl", cfg(1) + "\n" + upd(1) + "\n");
  const auto c = write("c.jsonl", cfg(2).replace(cfg(2).find("/m"), 2, "/x") + "\n" + upd(2) + "\n");
  const Dataset d = read({a, b, c});
  ASSERT_EQ(d.ranks.size(), 2u);  // rank 2 names another model
  EXPECT_EQ(diag_.count(Problem::kMixedRuns), 1u);
  EXPECT_NE(first(Problem::kMixedRuns)->message.find(R"(than rank 0 (run settings: model "/x" against "/m"))"),
            std::string::npos)
      << first(Problem::kMixedRuns)->message;
}

TEST_F(ReaderTest, UnknownRecordTypeIsAWarning) {
  const auto p = write("u.jsonl", kConfig + "\n" + R"({"type": "event", "x": 1})" + "\n" + update(11) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Problem::kUnknownRecord), 1u);
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  EXPECT_EQ(d.update_count(), 1u);
}

TEST_F(ReaderTest, RecordsThatAreNotObjectsOrLackFields) {
  const auto p = write("x.jsonl", kConfig + "\n[1, 2]\n" + R"({"step": 3, "wall_ms": 1})" + "\n" +
                                      R"({"type": "update", "wall_ms": 1})" + "\n" + update(11) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Severity::kError), 3u);
  EXPECT_EQ(diag_.count(Problem::kMissingField), 2u);
  EXPECT_EQ(d.update_count(), 1u);
}

TEST_F(ReaderTest, TrailingTextAfterRecord) {
  const auto p = write("tt.jsonl", kConfig + "\n" + update(11) + " {}\n");
  read({p});
  const Diagnostic* e = first(Problem::kMalformedJson);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 2u);
  // Text that is not a second object: the message says where the record closes and
  // points at the text after it (not at column 1, as simdjson's message would; it said
  // "the record ends with 'x' instead of its closing '}'", pointing at the last byte).
  const std::string line = update(11) + " xyz";
  read({write("tx.jsonl", kConfig + "\n" + line + "\n" + update(12) + "\n")});
  e = first(Problem::kMalformedJson);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 2u);
  EXPECT_EQ(e->column, update(11).size() + 2);
  EXPECT_NE(e->message.find(fmt::format("the record closes at column {}, and text follows it (xyz)", update(11).size())),
            std::string::npos)
      << e->message;
  // A record cut short (no closing '}' at all) still says so, at its last byte; one cut
  // inside a string points at the string's opening quote (it had no column).
  const std::string cut = update(13).substr(0, update(13).find(", \"cuda"));
  const std::string in_string = update(13).substr(0, update(13).find("cuda_") + 5);
  read({write("cut.jsonl", kConfig + "\n" + cut + "\n" + in_string + "\n" + update(14) + "\n")});
  const std::vector<const Diagnostic*> cuts = all(Problem::kMalformedJson);
  ASSERT_EQ(cuts.size(), 2u);
  EXPECT_EQ(cuts[0]->column, cut.size());
  EXPECT_NE(cuts[0]->message.find("the record ends with '0' instead of its closing '}': the line was cut short"),
            std::string::npos)
      << cuts[0]->message;
  EXPECT_EQ(cuts[1]->column, in_string.rfind('"') + 1);
  EXPECT_NE(cuts[1]->message.find("a string is not closed: the text ends inside it"), std::string::npos)
      << cuts[1]->message;
}

TEST_F(ReaderTest, UnknownUpdateFieldsAreKept) {
  const auto p = write("k.jsonl", kConfig + "\n" + update(11, 100, R"(, "loss": 2.5, "lr": {"g0": 0.001})") + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.total(), 0u);
  const auto& extra = d.ranks[0].updates[0].extra;
  ASSERT_EQ(extra.size(), 2u);
  EXPECT_EQ(extra[0].key, "loss");
  EXPECT_EQ(extra[0].json, "2.5");
  EXPECT_EQ(extra[1].json, R"({"g0": 0.001})");
}

TEST_F(ReaderTest, StrictStopsAtTheFirstProblem) {
  const std::string bad = R"({"type": "update", "step": 12, "wall_ms": })";
  const auto p = write("s.jsonl", kConfig + "\n" + bad + "\n" + update(13) + "\n" + bad + "\n");
  read({p}, /*strict=*/true);
  EXPECT_TRUE(diag_.should_stop());
  EXPECT_EQ(diag_.count(Severity::kError), 1u);
}

TEST_F(ReaderTest, StepWindow) {
  const Dataset d = read({kRealLog}, false, StepRange{15, 19});
  EXPECT_EQ(d.update_count(), 5u);
  EXPECT_EQ(d.updates_outside_window, 15u);
  EXPECT_EQ(d.ranks[0].updates.front().step, 15);
}

TEST_F(ReaderTest, SampleIndicesCanBeLeftOutButAreStillChecked) {
  ReadOptions opt;
  opt.keep_sample_indices = false;
  diag_ = Diagnostics();
  const Dataset d = read_logs({kRealLog}, opt, diag_);
  const Dataset full = read({kRealLog});
  ASSERT_EQ(d.update_count(), 20u);
  ASSERT_EQ(full.update_count(), 20u);
  for (std::size_t k = 0; k < 20; ++k) {
    const UpdateRecord& x = d.ranks[0].updates[k];
    const UpdateRecord& y = full.ranks[0].updates[k];
    EXPECT_TRUE(x.sample_indices.empty());
    EXPECT_EQ(y.sample_indices.size(), 16u);  // the real log lists 16 per update
    EXPECT_EQ(x.step, y.step);
    EXPECT_EQ(x.regions.size(), y.regions.size());
    EXPECT_EQ(x.frame_histogram, y.frame_histogram);
  }
  // A bad index still rejects its record.
  const auto p = write("bad_index.jsonl", kConfig + "\n" + update(1) + "\n" +
                                             update(2, 100.0, R"(, "sample_indices": [1, "x"])") + "\n");
  diag_ = Diagnostics();
  const Dataset bad = read_logs({p}, opt, diag_);
  EXPECT_EQ(bad.update_count(), 1u);
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 3u);
  EXPECT_NE(e->message.find("sample_indices[1]"), std::string::npos) << e->message;
}

// A reader that does not keep sample indices leaves a plain array of indices unread
// and parses any other: the records kept and every word reported must be the same as
// a reader that keeps them.
TEST_F(ReaderTest, SampleIndicesLeftOutGiveTheSameVerdicts) {
  const std::vector<std::string> arrays = {
      "[]", "[ ]", "[0]", "[7, 0, 12]", "[1,2,3]", " [ 1 ,\t2 ]", "[999999999999999999]",  // plain
      "[9999999999999999999]", "[99999999999999999999]",  // 19 and 20 digits: read, the second out of range
      "[01]", "[00]", "[-1]", "[-0]", "[1.0]", "[2.5]", "[1e3]", "[1E3]", "[1, ]", "[, 1]", "[1 2]",
      "[1,,2]", "[\"3\"]", "[[1]]", "[{}]", "[null]", "[true]", "[1]]", "[1", "[1,", "{}", "3", "\"[1]\"",
      "[1] ", "[1, 2, -3]", "[1, 2, 3.5]", "[0x10]", "[+1]", "[1, 2] , \"x\": 1"};
  std::string text = kConfig + "\n";
  for (std::size_t i = 0; i < arrays.size(); ++i)
    text += update(static_cast<int>(i + 1), 100.0, ", \"sample_indices\": " + arrays[i]) + "\n";
  // The array as the record's last field, and before other fields.
  text += R"({"type": "update", "rank": 1, "step": 900, "wall_ms": 10, "sample_indices": [4, 5]})" "\n";
  text += R"({"type": "update", "rank": 1, "sample_indices": [4, -5], "step": 901, "wall_ms": 10})" "\n";
  text += R"({"type": "update", "rank": 1, "sample_indices": [4, 5], "step": 902, "wall_ms": 10})" "\n";
  const auto p = write("indices.jsonl", text);
  auto verdicts = [&](bool keep) {
    ReadOptions opt;
    opt.keep_sample_indices = keep;
    Diagnostics diag;
    const Dataset d = read_logs({p}, opt, diag);
    std::vector<std::string> out;
    for (const auto& r : d.ranks)
      for (const auto& u : r.updates) out.push_back(fmt::format("kept step {}", u.step));
    for (const auto& x : diag.kept()) out.push_back(fmt::format("{}:{}: {}", x.line, x.column, x.message));
    return out;
  };
  const auto kept = verdicts(true), left_out = verdicts(false);
  EXPECT_EQ(kept, left_out);
  // (The inputs do reach both paths: plain arrays are kept, the others rejected.)
  auto has = [&](const std::string& s) { return std::find(kept.begin(), kept.end(), s) != kept.end(); };
  EXPECT_TRUE(has("kept step 1"));    // []
  EXPECT_TRUE(has("kept step 7"));    // 18 digits
  EXPECT_TRUE(has("kept step 900"));
  EXPECT_TRUE(has("kept step 902"));
  EXPECT_FALSE(has("kept step 10"));  // [01]
  EXPECT_FALSE(has("kept step 12"));  // [-1]
  EXPECT_FALSE(has("kept step 901"));
}

TEST_F(ReaderTest, StepsUseTheWholeInt64Range) {
  // INT64_MAX is an integer a recorder can write; 2^63 and 1e19 are beyond int64.
  const auto p = write("big.jsonl", kConfig + "\n" +
                                        R"({"type": "update", "step": 9223372036854775807, "wall_ms": 5})" + "\n" +
                                        R"({"type": "update", "step": 9007199254740993, "wall_ms": 5})" + "\n" +
                                        R"({"type": "update", "step": 9223372036854775808, "wall_ms": 5})" + "\n");
  const Dataset d = read({p});
  ASSERT_EQ(d.update_count(), 2u);
  EXPECT_EQ(d.ranks[0].updates[0].step, 9007199254740993);  // 2^53 + 1, not rounded to 2^53
  EXPECT_EQ(d.ranks[0].updates[1].step, std::numeric_limits<std::int64_t>::max());
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 4u);
  EXPECT_NE(e->message.find("out of range"), std::string::npos) << e->message;
}

TEST_F(ReaderTest, ARankNotBelowTheWorldSizeIsAnErrorButTheRecordsStay) {
  const auto p = write("rw.jsonl", std::string(R"({"type": "config", "rank": 5, "world_size": 4})") + "\n" +
                                       R"({"type": "update", "step": 1, "wall_ms": 5})" + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 1u);
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 1u);
  EXPECT_NE(e->message.find("\"rank\" (5) is not below \"world_size\" (4)"), std::string::npos) << e->message;
}

TEST_F(ReaderTest, AWorldSizeBeyondAMillionRanksIsNotUsed) {
  // 10^8 in a 100-byte file made the report list 99,999,999 missing ranks (2.3 GB).
  const auto p = write("ws.jsonl", std::string(R"({"type": "config", "rank": 1, "world_size": 100000000})") + "\n" +
                                       update(1) + "\n");
  const Dataset d = read({p});
  ASSERT_TRUE(d.ranks.at(0).config);
  EXPECT_FALSE(d.ranks[0].config->world_size);
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_NE(first(Problem::kBadField)->message.find("\"world_size\" is 100000000, above the 1048576 ranks"),
            std::string::npos);
  EXPECT_EQ(d.update_count(), 1u);

  // Nor is a world size below 1 (the job throughput is per rank x world size).
  const Dataset zero = read({write("ws0.jsonl", std::string(R"({"type": "config", "rank": 1, "world_size": 0})") +
                                                   "\n" + update(1) + "\n")});
  ASSERT_TRUE(zero.ranks.at(0).config);
  EXPECT_FALSE(zero.ranks[0].config->world_size);
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_NE(first(Problem::kBadField)->message.find("should be at least 1, found 0; it is not used"),
            std::string::npos);
}

TEST_F(ReaderTest, AnUnknownRegionRoleIsAnErrorNamingTheRegion) {
  // A misspelt role used to be ignored without a word: the region silently got none.
  const auto p = write("roles.jsonl",
                       std::string(R"({"type": "config", "region_roles": {"nccl": "comm", "loader": "backgorund", )"
                                   R"("opt": 5, "nccl": "data"}})") +
                           "\n" + R"({"type": "update", "step": 1, "wall_ms": 5})" + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(d.update_count(), 1u);
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->severity, Severity::kError);
  EXPECT_EQ(e->line, 1u);
  EXPECT_NE(e->message.find("\"loader\" has the unknown role \"backgorund\""), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("region \"opt\" should have a string, found 5; those entries are not used"),
            std::string::npos)
      << e->message;  // every bad entry, not only the first
  EXPECT_NE(e->message.find("region \"nccl\" is given twice"), std::string::npos) << e->message;

  const auto q = write("alts.jsonl", std::string(R"({"type": "config", "region_alternatives": ["a", "b"]})") + "\n" +
                                         R"({"type": "update", "step": 1, "wall_ms": 5})" + "\n");
  read({q});
  e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("\"region_alternatives\": should be an object {region: group}"), std::string::npos)
      << e->message;
}

TEST_F(ReaderTest, BatchSizesBelowOneAreNotUsed) {
  // micro_batch -1 made the report print "global batch -2" and negative samples per second.
  const auto p = write("mb.jsonl", R"({"type": "config", "rank": 1, "micro_batch": -1, "accumulation": 0, "global_batch": 4})"
                                   "\n" + update(1) + "\n");
  const Dataset d = read({p});
  ASSERT_TRUE(d.ranks.at(0).config);
  EXPECT_FALSE(d.ranks[0].config->micro_batch);
  EXPECT_FALSE(d.ranks[0].config->accumulation);
  EXPECT_EQ(d.ranks[0].config->global_batch, 4);
  ASSERT_EQ(diag_.count(Problem::kBadField), 2u);
  EXPECT_NE(first(Problem::kBadField)->message.find("\"micro_batch\" should be 1 to 2^32, found -1"), std::string::npos)
      << first(Problem::kBadField)->message;
  // Too large: 2^62 x 4 overflowed into "global batch 0"; 2^64 - 1 read as -1. A seed
  // from torch.seed() (up to 2^64 - 1) is kept as written, with no problem.
  diag_ = Diagnostics{};
  const Dataset big = read({write("big.jsonl", R"({"type": "config", "rank": 1, "micro_batch": 4611686018427387904, )"
                                               R"("global_batch": 18446744073709551615, "seed": 18446744073709551611})"
                                               "\n" + update(1) + "\n")});
  ASSERT_TRUE(big.ranks.at(0).config);
  EXPECT_FALSE(big.ranks[0].config->micro_batch);
  EXPECT_FALSE(big.ranks[0].config->global_batch);
  EXPECT_FALSE(big.ranks[0].config->seed);
  ASSERT_NE(big.ranks[0].config->find("seed"), nullptr);
  EXPECT_EQ(diag_.count(Problem::kBadField), 2u);
  // A seed of 2^64 or more: the message gave the range as "-2^63 to 2^63 - 1", which the
  // seed above had passed already (found by a helper). Another field's range stays.
  diag_ = Diagnostics{};
  read({write("seed.jsonl", R"({"type": "config", "rank": 1, "seed": 18446744073709551616, "micro_batch": 1e19})"
                            "\n" + update(1) + "\n")});
  ASSERT_EQ(diag_.count(Problem::kBadField), 2u);
  std::string messages;
  for (const auto& m : diag_.kept()) messages += m.message + "\n";
  EXPECT_NE(messages.find("\"seed\" is out of range (18446744073709551616; an integer from -2^63 to 2^64 - 1)"),
            std::string::npos)
      << messages;
  EXPECT_NE(messages.find("\"micro_batch\" is out of range (1e19; an integer from -2^63 to 2^63 - 1)"),
            std::string::npos)
      << messages;
}

TEST_F(ReaderTest, AKnownConfigFieldThatIsNullIsNotKnown) {
  // {"global_batch": None, "model": None} from a Python config: not given, no error.
  const Dataset d = read({write("null.jsonl", R"({"type": "config", "rank": 1, "global_batch": null, "model": null})"
                                              "\n" + update(1) + "\n")});
  ASSERT_TRUE(d.ranks.at(0).config);
  EXPECT_FALSE(d.ranks[0].config->global_batch);
  EXPECT_FALSE(d.ranks[0].config->model);
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
}

TEST_F(ReaderTest, AConfigValueThatCannotBeWrittenBackIsLeftOutAndTheConfigKept) {
  // Python's json writes NaN and Infinity; simdjson stops at some spellings and not at
  // others. Each is now the same bad-field error, and the rest of the config is used.
  for (const std::string v : {"NaN", "Infinity", "-Infinity", "nan", "NAN", "Inf", "INFINITY", "-NAN", "1e400",
                              "[1, NaN]", "{\"a\": Infinity}"}) {
    SCOPED_TRACE(v);
    const auto p = write("nf.jsonl", R"({"type": "config", "rank": 1, "world_size": 2, "loss_scale": )" + v +
                                         R"(, "note": "x"})" + "\n" + update(1) + "\n");
    const Dataset d = read({p});
    ASSERT_EQ(d.ranks.size(), 1u);
    ASSERT_TRUE(d.ranks[0].config);
    EXPECT_EQ(d.ranks[0].config->world_size, 2);
    EXPECT_EQ(d.ranks[0].config->find("loss_scale"), nullptr);
    ASSERT_NE(d.ranks[0].config->find("note"), nullptr);
    ASSERT_EQ(diag_.count(Problem::kBadField), 1u);
    EXPECT_NE(first(Problem::kBadField)->message.find("config field \"loss_scale\""), std::string::npos);
    EXPECT_EQ(diag_.count(Problem::kMissingConfig), 0u);
    EXPECT_EQ(d.update_count(), 1u);
  }
  // With a NaN before it (read another way), a value nested 100,000 deep overflowed the
  // stack while the fields were written back.
  {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    const Dataset d = read({write("nan-deep.jsonl", R"({"type": "config", "rank": 1, "a": NaN, "x": )" + deep + "}\n" +
                                                        update(1) + "\n")});
    EXPECT_EQ(d.update_count(), 1u);
  }
  // A value nested 100,000 deep made the JSON report overflow the stack (and 30,000 deep
  // wrote 1.8 GB of indentation).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const Dataset d = read({write("deep.jsonl", R"({"type": "config", "rank": 1, "x": )" + deep + "}\n" + update(1) + "\n")});
  ASSERT_TRUE(d.ranks.at(0).config);
  EXPECT_EQ(d.ranks[0].config->find("x"), nullptr);
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_NE(first(Problem::kBadField)->message.find("nested 100000 levels deep (more than 64)"), std::string::npos);
}

TEST(StepRange, Parse) {
  std::string err;
  auto r = parse_step_range("11:20", err);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 11);
  EXPECT_EQ(r->last, 20);
  r = parse_step_range("15", err);
  EXPECT_EQ(r->first, 15);
  EXPECT_EQ(r->last, 15);
  r = parse_step_range(":20", err);
  EXPECT_TRUE(r && r->last == 20 && !r->contains(21) && r->contains(-5));
  EXPECT_FALSE(parse_step_range("a:b", err));
  EXPECT_FALSE(parse_step_range("20:10", err));
  EXPECT_NE(err.find("after"), std::string::npos);
  // Steps are >= 0 (a record with a negative step is rejected); ":" alone says nothing;
  // a step beyond int64 is named as such, not as "not an integer".
  for (const char* negative : {"-3:5", "5:-1", "-2", ":-1"}) {
    EXPECT_FALSE(parse_step_range(negative, err)) << negative;
    EXPECT_NE(err.find("steps are >= 0"), std::string::npos) << err;
  }
  EXPECT_FALSE(parse_step_range(":", err));
  EXPECT_NE(err.find("expected A:B, A:, :B or A"), std::string::npos) << err;
  EXPECT_FALSE(parse_step_range("99999999999999999999:", err));
  EXPECT_NE(err.find("a step beyond 9223372036854775807"), std::string::npos) << err;
  r = parse_step_range("0:", err);
  EXPECT_TRUE(r && r->first == 0 && r->contains(std::numeric_limits<std::int64_t>::max()));
}

TEST_F(ReaderTest, UnreadableFile) {
  const Dataset d = read({(dir_ / "does-not-exist.jsonl").string()});
  EXPECT_EQ(diag_.count(Problem::kUnreadable), 1u);
  EXPECT_EQ(d.update_count(), 0u);
}

TEST_F(ReaderTest, DirectoriesRecurseSkipNotesAndTablesAndReadAFileOnce) {
  fs::create_directories(dir_ / "rank0");
  fs::create_directories(dir_ / "rank1");
  write("rank0/log.jsonl", kConfig + "\n" + update(1) + "\n");
  write("rank1/log.jsonl", update(2) + "\n");
  write("README.md", "# notes\n");
  write("hierarchy.txt", "a\n");
  const std::string log0 = (dir_ / "rank0" / "log.jsonl").string();
  const Dataset d = read({dir_.string(), log0});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  ASSERT_EQ(d.files.size(), 2u);  // rank0/log.jsonl given twice: read once
  EXPECT_EQ(diag_.count(Severity::kNote), 3u);  // README.md, hierarchy.txt, and the second log0
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);
}

TEST_F(ReaderTest, NegativeAndHugeCountsAreRejected) {
  const auto p = write("c.jsonl", kConfig + "\n" + update(1, 100, R"(, "extra": 1)") + "\n" +
                                      R"({"type": "update", "step": 2, "wall_ms": 1, "counts": {"samples": -16}})" +
                                      "\n" + R"({"type": "update", "step": 3, "wall_ms": 1, "counts": {"frames": 1e300}})" +
                                      "\n");
  const Dataset d = read({p});
  const Diagnostic* neg = first(Problem::kNegativeTime);
  ASSERT_NE(neg, nullptr);
  EXPECT_EQ(neg->line, 3u);
  EXPECT_NE(neg->message.find("counts.samples"), std::string::npos);
  const Diagnostic* big = first(Problem::kBadField);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->line, 4u);
  EXPECT_NE(big->message.find("out of range"), std::string::npos);
  EXPECT_EQ(d.update_count(), 1u);
}

// An integer config field too long for 64 bits is read by the JSON parser as a float;
// converting it was undefined behaviour (a fuzzer's "world_size" of 73 digits, UBSan).
// Out of range either way is a bad field; a whole float ("4.0") is the integer.
TEST_F(ReaderTest, ConfigIntegersBeyond64BitsAreOutOfRange) {
  const auto p = write("cfg.jsonl",
                       R"({"type": "config", "schema": 1, "rank": 0, "world_size": 7777777777777777777777777777, )"
                       R"("micro_batch": -1e19, "accumulation": 4.0})"
                       "\n" + update(1) + "\n");
  const Dataset d = read({p});
  ASSERT_EQ(d.ranks.size(), 1u);
  ASSERT_TRUE(d.ranks[0].config);
  EXPECT_FALSE(d.ranks[0].config->world_size);
  EXPECT_FALSE(d.ranks[0].config->micro_batch);
  EXPECT_EQ(d.ranks[0].config->accumulation, 4);
  std::vector<std::string> messages;
  for (const auto& diag : diag_.kept())
    if (diag.problem == Problem::kBadField) messages.push_back(diag.message);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_NE(messages[0].find("config field \"world_size\" is out of range"), std::string::npos) << messages[0];
  EXPECT_NE(messages[1].find("config field \"micro_batch\" is out of range"), std::string::npos) << messages[1];
}

// A config integer written as a float of 2^53 or more is not the integer written
// (9007199254740993.0 reads as 2^53): a bad field, not a silently other value.
TEST_F(ReaderTest, ConfigWholeFloatsFromTwoToThe53AreNotUsed) {
  const auto p = write("cfg53.jsonl",
                       R"({"type": "config", "schema": 1, "rank": 0, "world_size": 1, "seed": 9007199254740993.0, )"
                       R"("max_steps": 9007199254740991.0})"
                       "\n" + update(1) + "\n");
  const Dataset d = read({p});
  ASSERT_TRUE(d.ranks.at(0).config);
  EXPECT_FALSE(d.ranks[0].config->seed);
  EXPECT_EQ(d.ranks[0].config->max_steps, 9007199254740991);  // 2^53 - 1: exact
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("config field \"seed\" is an integer written as a floating-point number of 2^53"),
            std::string::npos)
      << e->message;
}

TEST_F(ReaderTest, ByteOrderMarkIsSkipped) {
  const auto p = write("bom.jsonl", "\xEF\xBB\xBF" + kConfig + "\n" + update(1) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.total(), 0u);
  ASSERT_TRUE(d.ranks[0].config);
}

TEST_F(ReaderTest, CorruptGzipIsAnErrorNotATruncation) {
  std::string text = kConfig + "\n";
  for (int s = 1; s <= 200; ++s) text += update(s) + "\n";
  const auto full = (dir_ / "full.gz").string();
  gzFile f = gzopen(full.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  std::string gz = slurp(full);
  gz[gz.size() - 6] = static_cast<char>(gz[gz.size() - 6] ^ 0x5a);  // corrupt the CRC-32 in the trailer
  const auto bad = write("bad.jsonl.gz", gz);
  const Dataset d = read({bad});
  EXPECT_EQ(diag_.count(Problem::kTruncatedLine), 0u);
  const Diagnostic* e = first(Problem::kUnreadable);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->severity, Severity::kError);
  EXPECT_NE(e->message.find("corrupt"), std::string::npos);
}

TEST_F(ReaderTest, StrictStopsAtTheFirstDuplicateStep) {
  std::string text = kConfig + "\n" + update(1) + "\n" + update(1) + "\n";
  for (int s = 2; s <= 50; ++s) text += update(s) + "\n" + update(s) + "\n";
  const auto p = write("dups.jsonl", text);
  read({p}, /*strict=*/true);
  EXPECT_TRUE(diag_.should_stop());
  EXPECT_EQ(diag_.count(Problem::kDuplicateStep), 1u);
  EXPECT_EQ(first(Problem::kDuplicateStep)->line, 3u);
}

TEST_F(ReaderTest, StrictStopsAtTheFirstDuplicateStepInLineOrderInAStreamOfSeveralRanks) {
  // Every rank's records interleaved in one stream; rank 1 repeats step 2 at line 7 and
  // rank 0 repeats step 1 at line 9. Reading the stream in order meets line 7 first; the
  // reader used to add the stream's records rank by rank and named rank 0's line 9. A
  // malformed line after the first duplicate is never reached (reading stopped).
  std::string text;
  for (int r = 0; r < 2; ++r) text += fmt::format(R"({{"type": "config", "rank": {}, "world_size": 2}})", r) + "\n";
  const auto rec = [](int r, int step) {
    return fmt::format(R"({{"type": "update", "rank": {}, "step": {}, "wall_ms": 10}})", r, step) + "\n";
  };
  text += rec(0, 1) + rec(1, 1) + rec(0, 2) + rec(1, 2) + rec(1, 2) + rec(0, 3) + rec(0, 1) + "{\"type\": \n";
  read({write("stream.jsonl", text)}, /*strict=*/true);
  EXPECT_TRUE(diag_.should_stop());
  const auto dups = all(Problem::kDuplicateStep);
  ASSERT_EQ(dups.size(), 1u);
  EXPECT_EQ(dups[0]->line, 7u);
  EXPECT_NE(dups[0]->message.find("duplicate step 2 for rank 1 (first at line 6)"), std::string::npos)
      << dups[0]->message;
  EXPECT_EQ(diag_.count(Severity::kError), 1u);
}

TEST_F(ReaderTest, TruncatedLineColumnIsWhereItWasCut) {
  const std::string cut = R"({"type": "update", "step": 12, "wall_ms": 15)";
  const auto p = write("cut.jsonl", kConfig + "\n" + update(11) + "\n" + cut);
  read({p});
  const Diagnostic* w = first(Problem::kTruncatedLine);
  ASSERT_NE(w, nullptr);
  EXPECT_GT(w->column, 0u);
  EXPECT_LE(w->column, cut.size() + 1);
}

TEST(StepRangeEmpty, IsAnError) {
  std::string err;
  EXPECT_FALSE(parse_step_range("", err));
  EXPECT_NE(err.find("empty"), std::string::npos);
}

// The parser keeps what it found in earlier records (names, each region's last parent);
// with `parents` objects that repeat, change and fail, each record must still hold
// what reading that record alone gives (a fresh parser).
TEST_F(ReaderTest, RepeatedParentsReadAsIfEachRecordWereAlone) {
  auto rec = [](int step, const std::string& device, const std::string& parents) {
    return R"({"type": "update", "rank": 1, "step": )" + std::to_string(step) +
           R"(, "wall_ms": 100.0, "cuda_stream_ms": )" + device + R"(, "parents": )" + parents + "}";
  };
  const std::vector<std::string> lines = {
      rec(1, R"({"a": 1.0, "b": 2.0})", R"({"a": null, "b": "a"})"),
      rec(2, R"({"b": 2.0})", R"({"a": null, "b": "a"})"),                  // same bytes, other region order
      rec(3, R"({"a": 1.0})", R"({"a": null, "b": "a", "c": "b"})"),        // starts like the last one
      rec(4, R"({"a": 1.0})", R"({"a": null, "b": "a"})"),
      rec(5, R"({"a": 1.0})", R"({"a": null, "b": "a"}  )"),                // then spaces
      rec(6, R"({"a": 1.0})", R"({"a":null, "b": "c"})"),
      rec(7, R"({"a": 1.0})", R"({"a":null, "b": "c"})"),
      rec(8, R"({"a": 1.0})", R"({"a":null, "b": 3})"),                     // an error: left out
      rec(9, R"({"a": 1.0})", R"({"a":null, "b": "c"})"),
  };
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  const Dataset together = read({write("all.jsonl", all)});
  EXPECT_EQ(diag_.count(Severity::kError), 1u);
  auto describe = [](const Dataset& d, const UpdateRecord& u) {
    std::vector<std::string> out;
    for (const auto& r : u.regions)
      out.push_back(std::string(d.regions.name(r.region)) + " in " +
                    (!r.parent ? "?" : *r.parent == kTopLevel ? "(top)" : std::string(d.regions.name(*r.parent))));
    return out;
  };
  ASSERT_EQ(together.ranks.size(), 1u);
  ASSERT_EQ(together.ranks[0].updates.size(), lines.size() - 1);
  for (const auto& u : together.ranks[0].updates) {
    const Dataset alone = read({write("one.jsonl", lines[static_cast<std::size_t>(u.step - 1)] + "\n")});
    ASSERT_EQ(alone.ranks.size(), 1u);
    EXPECT_EQ(describe(together, u), describe(alone, alone.ranks[0].updates[0])) << "step " << u.step;
  }
}

// A sample or micro-batch count beyond 2^32 in one update is no batch: the what-if
// expanded {"9": 4611686018427387904} one entry per sample until memory ran out.
TEST_F(ReaderTest, BatchCountsBeyond32BitsRejectTheRecord) {
  const std::string base = R"({"type": "update", "step": 5, "wall_ms": 1, )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + R"("frame_histogram": {"9": 4294967297}})",
       "frame_histogram.9: 4294967297 samples in one update of one rank cannot be right (at most 4294967296"},
      {base + R"j("input_shapes": {"(8, 100)": 4611686018427387904}})j",
       "4611686018427387904 micro-batches in one update of one rank cannot be right"},
  };
  for (const auto& [line, message] : cases) {
    const auto p = write("huge.jsonl", kConfig + "\n" + line + "\n" + update(6) + "\n");
    const Dataset d = read({p});
    const Diagnostic* e = first(Problem::kBadField);
    ASSERT_NE(e, nullptr) << line;
    EXPECT_EQ(e->line, 2u) << line;
    EXPECT_NE(e->message.find(message), std::string::npos) << e->message;
    EXPECT_EQ(d.update_count(), 1u) << line;
  }
  // 2^32 itself is read.
  const auto p = write("edge.jsonl", kConfig + "\n" + base + R"("frame_histogram": {"9": 4294967296}})" + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(first(Problem::kBadField), nullptr);
  ASSERT_EQ(d.update_count(), 1u);
  EXPECT_EQ(d.ranks[0].updates[0].frame_histogram[0].second, std::int64_t{1} << 32);
}

// A key given twice, at any level, rejects the record: keeping either value would
// silently drop the other (e.g. two "counts" objects, or "samples" twice in one).
TEST_F(ReaderTest, ABadKeyIsQuotedAsWritten) {
  // " 3" was quoted as "3", a key that would have been fine.
  const std::string base = R"({"type": "update", "step": 5, "wall_ms": 1, )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + R"("frame_histogram": {"9": 16, " 3": 1}})", R"(frame_histogram: key " 3" should be a frame count)"},
      {base + R"j("input_shapes": {" (8, x) ": 1}})j", R"j(input_shapes: key " (8, x) " should be a shape)j"},
  };
  for (const auto& [line, message] : cases) {
    const auto p = write("key.jsonl", kConfig + "\n" + line + "\n" + update(6) + "\n");
    const Dataset d = read({p});
    const Diagnostic* e = first(Problem::kBadField);
    ASSERT_NE(e, nullptr) << line;
    EXPECT_NE(e->message.find(message), std::string::npos) << e->message;
    EXPECT_EQ(d.update_count(), 1u) << line;
  }
}

TEST_F(ReaderTest, KeysGivenTwiceRejectTheRecord) {
  const std::string base = R"({"type": "update", "step": 5, "wall_ms": 1, )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + R"("counts": {"samples": 1}, "counts": {"samples": 16}})", R"(field "counts" appears twice)"},
      {base + R"("counts": {"samples": 1, "samples": 16}})", "counts.samples: counter listed twice"},
      {base + R"("step": 7})", R"(field "step" appears twice)"},
      {base + R"("cuda_stream_ms": {"a": 1}, "cuda_stream_ms": {"b": 1}})", R"(field "cuda_stream_ms" appears twice)"},
      {base + R"("parents": {"a": null, "a": "b"}})", "parents.a: region listed twice"},
      {base + R"("frame_histogram": {"9": 16, "8": 1, "9": 3}})", "frame_histogram: frame count 9 listed twice"},
      {base + R"j("input_shapes": {"(8, 100)": 1, "(8,100)": 1}})j", "input_shapes: shape (8, 100) listed twice"},
      {base + R"("recorder_errors": {"write_failed": 1, "write_failed": 2}})", R"(recorder_errors: "write_failed" listed twice)"},
      {base + R"("note": 1, "note": 2})", R"(field "note" appears twice)"},
      {base + R"("microbatches": [{"path": "a", "path": "b"}]})", "microbatches[0].path: key listed twice"},
      {R"({"type": "config", "type": "update", "step": 5, "wall_ms": 1})", R"(field "type" appears twice)"},
  };
  for (const auto& [line, message] : cases) {
    const auto p = write("twice.jsonl", kConfig + "\n" + line + "\n" + update(6) + "\n");
    const Dataset d = read({p});
    const Diagnostic* e = first(Problem::kBadField);
    ASSERT_NE(e, nullptr) << line;
    EXPECT_EQ(e->line, 2u) << line;
    EXPECT_NE(e->message.find(message), std::string::npos) << e->message;
    EXPECT_EQ(d.update_count(), 1u) << line;  // the next record is read as usual
  }
  // Many distinct keys (compared by sorting, beyond a few) are no repeat; one repeat among them is.
  std::string many = base + R"("frame_histogram": {)";
  for (int i = 0; i < 40; ++i) many += (i ? ", \"" : "\"") + std::to_string(i) + "\": 1";
  const auto ok = write("many.jsonl", kConfig + "\n" + many + "}}\n");
  EXPECT_EQ(read({ok}).update_count(), 1u);
  EXPECT_EQ(first(Problem::kBadField), nullptr);
  const auto bad = write("many2.jsonl", kConfig + "\n" + many + R"(, "17": 2}})" + "\n");
  EXPECT_EQ(read({bad}).update_count(), 0u);
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_NE(first(Problem::kBadField)->message.find("frame count 17 listed twice"), std::string::npos);
  // A repeated config setting is rejected as well.
  const std::string cfg = R"({"type": "config", "rank": 1, "seed": 1, "seed": 2})";
  read({write("cfg.jsonl", cfg + "\n" + update(1) + "\n")});
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_NE(first(Problem::kBadField)->message.find(R"(field "seed" appears twice)"), std::string::npos);
}

// "type" written with an escape is still the type (every other key is unescaped too).
TEST_F(ReaderTest, EscapedTypeKeyIsTheType) {
  const std::string line = R"({"typ\u0065": "update", "step": 5, "wall_ms": 2.5})";
  const auto p = write("esc.jsonl", R"({"t\u0079pe": "config", "rank": 1, "world_size": 4})" "\n" + line + "\n");
  const Dataset d = read({p});
  EXPECT_TRUE(diag_.kept().empty()) << diag_.kept().front().message;
  ASSERT_EQ(d.update_count(), 1u);
  EXPECT_EQ(d.ranks.at(0).updates.at(0).wall_ms, 2.5);
  ASSERT_TRUE(d.ranks.at(0).config);
  EXPECT_EQ(d.ranks.at(0).config->world_size, 4);
}

// Times above 1e12 ms (31.7 years) are corrupt: kept, they would make sums inf.
TEST_F(ReaderTest, AbsurdlyLongTimesAreRejected) {
  const std::string bad = R"({"type": "update", "step": 12, "wall_ms": 10, "cpu_call_ms": {"fwd": 1e300}})";
  const auto p = write("long.jsonl", kConfig + "\n" + bad + "\n" +
                                         R"({"type": "update", "step": 13, "wall_ms": 1e12})" + "\n");
  const Dataset d = read({p});
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("cpu_call_ms.fwd: time 1e300 ms is out of range"), std::string::npos) << e->message;
  EXPECT_EQ(e->column, bad.find("1e300") + 1);
  EXPECT_EQ(d.update_count(), 1u);  // 1e12 ms itself is allowed
}

// A number JSON does not allow (a leading zero, a bare '.', a leading '+') is a syntax error, not a
// number out of range.
TEST_F(ReaderTest, MalformedNumbersAreSyntaxErrors) {
  for (const std::string v : {"02", "-01.5", "1.", "1e", "+5", ".5"}) {
    const std::string bad = R"({"type": "update", "step": 12, "wall_ms": )" + v + "}";
    read({write("num.jsonl", kConfig + "\n" + bad + "\n")});
    const Diagnostic* e = first(Problem::kMalformedJson);
    ASSERT_NE(e, nullptr) << v;
    EXPECT_NE(e->message.find("is not a number as JSON writes them"), std::string::npos) << e->message;
    EXPECT_EQ(first(Problem::kNonFinite), nullptr) << v;
  }
}

// A whole number written as a float (Python's json.dumps of a float step) is that integer;
// from 2^53 on a double no longer tells neighbours apart (2^53 + 1 written as
// 9007199254740993.0 reads as 2^53), so such a step is an error, not a silently other step.
TEST_F(ReaderTest, WholeNumberFloatStepsAreTakenBelowTwoToThe53Only) {
  const Dataset d = read({write("f.jsonl", kConfig + "\n" + R"({"type": "update", "step": 16.0, "wall_ms": 1})" +
                                               "\n" + R"({"type": "update", "step": 1.7e1, "wall_ms": 1})" + "\n" +
                                               R"({"type": "update", "step": 9007199254740993.0, "wall_ms": 1})" +
                                               "\n" + R"({"type": "update", "step": 9007199254740993, "wall_ms": 1})" +
                                               "\n")});
  std::vector<std::int64_t> steps;
  for (const auto& u : d.ranks.at(0).updates) steps.push_back(u.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{16, 17, 9007199254740993}));
  const Diagnostic* e = first(Problem::kBadField);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 4u);
  EXPECT_NE(e->message.find("9007199254740993.0 written as a floating-point number is 2^53 or more"),
            std::string::npos)
      << e->message;
  // 1e19 is beyond int64 however written: out of range (not "write it without an exponent").
  read({write("f2.jsonl", kConfig + "\n" + R"({"type": "update", "step": 1e19, "wall_ms": 1})" + "\n")});
  ASSERT_NE(first(Problem::kBadField), nullptr);
  EXPECT_NE(first(Problem::kBadField)->message.find("step: integer 1e19 is out of range (-2^63 to 2^63 - 1)"),
            std::string::npos)
      << first(Problem::kBadField)->message;
}

TEST_F(ReaderTest, StringFaultsAreNamedInPlainWordsWithTheirColumn) {
  // simdjson's own wording leaked ("Problem while parsing a string", "Within strings, some
  // characters must be escaped, ...") without a column for the second.
  std::string e1 = update(2), e2 = update(3), e3 = update(4);
  e1.replace(e1.find("\"bwd\""), 5, "\"b\\xd\"");          // an escape JSON lacks
  e2.replace(e2.find("\"fwd\""), 5, std::string("\"f\x01w\""));  // a raw control byte
  e3.replace(e3.find("\"bwd\""), 5, "\"\\u12\"");           // \u with two hex digits
  const Dataset d = read({write("str.jsonl", kConfig + "\n" + update(1) + "\n" + e1 + "\n" + e2 + "\n" + e3 + "\n")});
  EXPECT_EQ(d.update_count(), 1u);
  ASSERT_EQ(diag_.count(Problem::kMalformedJson), 3u);
  const std::vector<const Diagnostic*> found = all(Problem::kMalformedJson);
  ASSERT_EQ(found.size(), 3u);
  // Columns are 1-based and point at the offending byte.
  EXPECT_EQ(found[0]->line, 3u);
  EXPECT_EQ(found[0]->column, e1.find("\\x") + 1);
  EXPECT_NE(found[0]->message.find("invalid escape \\x"), std::string::npos) << found[0]->message;
  EXPECT_EQ(found[1]->line, 4u);
  EXPECT_EQ(found[1]->column, e2.find('\x01') + 1);
  EXPECT_NE(found[1]->message.find("unescaped control byte 0x01 in a string (JSON writes it as \\u0001)"),
            std::string::npos)
      << found[1]->message;
  EXPECT_EQ(found[2]->line, 5u);
  EXPECT_EQ(found[2]->column, e3.find("\\u12") + 1);
  EXPECT_NE(found[2]->message.find("\\u needs four hex digits"), std::string::npos) << found[2]->message;
  for (const auto* x : found) {
    EXPECT_EQ(x->message.find("Problem while"), std::string::npos) << x->message;
    EXPECT_EQ(x->message.find("Within strings"), std::string::npos) << x->message;
  }
  // (The diagnostics above are gone after the next read.)
  // A lone surrogate escape and a byte that is not UTF-8: named, at their column.
  std::string e4 = update(6), e5 = update(7);
  e4.replace(e4.find("\"bwd\""), 5, "\"b\\ud800\"");
  e5.replace(e5.find("\"bwd\""), 5, std::string("\"b\xC3(d\""));
  const Dataset d2 = read({write("str2.jsonl", kConfig + "\n" + e4 + "\n" + e5 + "\n" + update(8) + "\n")});
  EXPECT_EQ(d2.update_count(), 1u);
  ASSERT_EQ(diag_.count(Problem::kMalformedJson), 2u);
  const std::vector<const Diagnostic*> more = all(Problem::kMalformedJson);
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(more[0]->column, e4.find("\\ud800") + 1);
  EXPECT_NE(more[0]->message.find("unpaired surrogate escape \\ud800"), std::string::npos) << more[0]->message;
  EXPECT_EQ(more[1]->column, e5.find('\xC3') + 1);
  EXPECT_NE(more[1]->message.find("byte 0xC3 is not UTF-8 text"), std::string::npos) << more[1]->message;
}

TEST_F(ReaderTest, AOneLineArrayOfTraceEventsIsNamedNotACutRecord) {
  // The Chrome trace format's array form on one line (no newline at the end) was "the
  // last line ends mid-record (was the writing job killed?)".
  const std::string events =
      R"([{"ph": "X", "name": "aten::mm", "ts": 10, "dur": 5, "pid": 1, "tid": 1}, {"ph": "X", "name": "k", "ts": 20, "dur": 2, "pid": 1, "tid": 7}])";
  const Dataset d = read({write("events.json", events)});
  EXPECT_EQ(d.update_count(), 0u);
  EXPECT_EQ(diag_.count(Problem::kTruncatedLine), 0u);
  const Diagnostic* e = first(Problem::kBadTrace);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 1u);
  EXPECT_NE(e->message.find("JSON array of trace events"), std::string::npos) << e->message;
  // Which torch writes it (a helper's Debian torch 1.13 has no Kineto: it writes this form).
  EXPECT_NE(e->message.find("A torch built without Kineto (torch.autograd.kineto_available() is False)"),
            std::string::npos)
      << e->message;

  // A record followed by a whole JSON array as the last line (no newline): an error
  // about that line, not a cut record.
  const Dataset d2 = read({write("tail.jsonl", kConfig + "\n" + update(1) + "\n[1, 2, 3]")});
  EXPECT_EQ(d2.update_count(), 1u);
  EXPECT_EQ(diag_.count(Problem::kTruncatedLine), 0u);
  EXPECT_EQ(diag_.count(Severity::kError), 1u);
}

TEST_F(ReaderTest, NegativeStepsAndRanksAreBadFields) {
  // A step of -5 (or INT64_MIN, which the dataset checks take for "no step seen") and a
  // rank of -1 were accepted without a word.
  std::string neg_step = update(2), min_step = update(3), neg_rank = update(4);
  neg_step.replace(neg_step.find("\"step\": 2"), 9, "\"step\": -5");
  min_step.replace(min_step.find("\"step\": 3"), 9, "\"step\": -9223372036854775808");
  neg_rank.replace(neg_rank.find("\"rank\": 1"), 9, "\"rank\": -1");
  const Dataset d = read({write("neg.jsonl", kConfig + "\n" + update(1) + "\n" + neg_step + "\n" + min_step + "\n" +
                                                 neg_rank + "\n" + update(5) + "\n")});
  EXPECT_EQ(d.update_count(), 2u);
  ASSERT_EQ(diag_.count(Problem::kBadField), 3u);
  const std::vector<const Diagnostic*> bad = all(Problem::kBadField);
  ASSERT_EQ(bad.size(), 3u);
  EXPECT_EQ(bad[0]->line, 3u);
  EXPECT_EQ(bad[0]->column, neg_step.find("-5") + 1);
  EXPECT_NE(bad[0]->message.find("negative step -5"), std::string::npos) << bad[0]->message;
  EXPECT_EQ(bad[1]->line, 4u);
  EXPECT_NE(bad[1]->message.find("negative step -9223372036854775808"), std::string::npos) << bad[1]->message;
  EXPECT_EQ(bad[2]->line, 5u);
  EXPECT_NE(bad[2]->message.find("negative rank -1"), std::string::npos) << bad[2]->message;
}

TEST_F(ReaderTest, PrettyPrintedRecordsAreNamedNotTakenForATrace) {
  // `jq . log.jsonl` output (each record over several lines) was "this starts like a
  // PyTorch profiler trace, but no "traceEvents" key ...; convert it with stepprof
  // import kineto".
  const std::string pretty = "{\n  \"type\": \"config\",\n  \"rank\": 1\n}\n{\n  \"type\": \"update\",\n  \"rank\": 1,\n"
                             "  \"step\": 1,\n  \"wall_ms\": 5\n}\n";
  const Dataset d = read({write("pretty.jsonl", pretty)});
  EXPECT_EQ(d.update_count(), 0u);
  EXPECT_EQ(diag_.count(Problem::kBadTrace), 0u);
  const Diagnostic* e = first(Problem::kMalformedJson);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->line, 1u);
  EXPECT_NE(e->message.find("the records span several lines each"), std::string::npos) << e->message;
  EXPECT_EQ(diag_.count(Problem::kMalformedJson), 1u);  // one error for the file, not one per line
}

TEST_F(ReaderTest, AByteOrderMarkInsideTheFileIsSkippedWithANote) {
  // `cat a.jsonl b.jsonl`, b starting with a UTF-8 byte-order mark: the record after it
  // was "cut short by another that starts at column 4".
  const Dataset d =
      read({write("bom.jsonl", kConfig + "\n" + update(1) + "\n\xEF\xBB\xBF" + update(2) + "\n" + update(3) + "\n")});
  EXPECT_EQ(d.update_count(), 3u);
  EXPECT_EQ(diag_.count(Severity::kError) + diag_.count(Severity::kWarning), 0u);
  const Diagnostic* n = first(Problem::kJoinedRecords);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->severity, Severity::kNote);
  EXPECT_EQ(n->line, 3u);
  EXPECT_NE(n->message.find("byte-order mark"), std::string::npos) << n->message;
}

TEST_F(ReaderTest, BrokenStructureInsideAFieldIsNamedAtItsByte) {
  // A missing or doubled comma inside an array or an object had no column ("line 2:"
  // alone); the message now points at the token where the structure breaks.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {update(2, 100.0, R"(, "sample_indices": [1 2])"), "2]"},
      {update(3, 100.0, R"(, "frame_histogram": {"9": 14 "7": 1})"), "\"7\""},
      {update(4, 100.0, R"(, "frame_histogram": {"9": 14,, "7": 1})"), ", \"7\""},
  };
  std::string text = kConfig + "\n" + update(1) + "\n";
  for (const auto& [line, at] : cases) text += line + "\n";
  const Dataset d = read({write("structure.jsonl", text)});
  EXPECT_EQ(d.update_count(), 1u);
  const std::vector<const Diagnostic*> found = all(Problem::kMalformedJson);
  ASSERT_EQ(found.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(found[i]->line, i + 3);
    // The second occurrence for the doubled comma: the first is the valid one.
    const std::string& line = cases[i].first;
    const std::size_t want = line.rfind(cases[i].second) + 1;
    EXPECT_EQ(found[i]->column, want) << found[i]->message;
  }
}

// Config values are compared in canonical form: whitespace and key order do not count,
// but numbers a double cannot tell apart are compared as written (two 128-bit hashes
// that differ in their last digits were one value).
TEST(CanonicalJson, IgnoresLayoutButNotDigitsADoubleLoses) {
  using stepprof::canonical_json;
  EXPECT_EQ(canonical_json(R"({"b": 2, "a": [1, 2]})"), canonical_json(R"({"a":[1,2],"b":2})"));
  EXPECT_NE(canonical_json(R"({"a": 1})"), canonical_json(R"({"a": 2})"));
  EXPECT_NE(canonical_json("340282366920938463463374607431768211455"),
            canonical_json("340282366920938463463374607431768211000"));
  EXPECT_NE(canonical_json(R"({"h": 9007199254740993.0})"), canonical_json(R"({"h": 9007199254740992.0})"));
  EXPECT_EQ(canonical_json("not json {"), "not json {");
}

TEST_F(ReaderTest, TwoLogsWithoutARankSayWhyTheirStepsRepeat) {
  // Both files are read as one unknown rank: each step of the second is a duplicate. The
  // error said only "duplicate step 1 for unknown rank", which reads like a rerun.
  const std::string cfg = R"({"type": "config", "world_size": 2})";
  const auto rec = [](int step, int ms) {
    return fmt::format(R"({{"type": "update", "step": {}, "wall_ms": {}}})", step, ms) + "\n";
  };
  const auto a = write("a.jsonl", cfg + "\n" + rec(1, 10) + rec(2, 10));
  const auto b = write("b.jsonl", cfg + "\n" + rec(1, 11) + rec(2, 11));
  read({a, b});
  const auto dups = all(Problem::kDuplicateStep);
  ASSERT_EQ(dups.size(), 2u);
  for (const auto* d : dups)
    EXPECT_NE(d->message.find("logs without a rank are read as one rank: give each log's config line its \"rank\""),
              std::string::npos)
        << d->message;
  // A rerun of a step within one rankless log is a plain duplicate.
  const auto c = write("c.jsonl", cfg + "\n" + rec(1, 10) + rec(1, 12));
  read({c});
  const auto again = all(Problem::kDuplicateStep);
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(again.back()->message.find("without a rank"), std::string::npos) << again.back()->message;
  // --strict stops at the first one, and says why too.
  read({a, b}, /*strict=*/true);
  const auto strict = all(Problem::kDuplicateStep);
  ASSERT_EQ(strict.size(), 1u);
  EXPECT_NE(strict[0]->message.find("logs without a rank are read as one rank"), std::string::npos) << strict[0]->message;
  EXPECT_NE(strict[0]->message.find("stopping (--strict)"), std::string::npos) << strict[0]->message;
}

TEST_F(ReaderTest, ALineCutByAKilledJobBeforeARestartsConfigIsTheRecordInFlightLost) {
  // The job was killed mid-record and restarted with append: the recorder ends the cut
  // line, then writes its config record. That was an error (exit status 1) for what the
  // end of a file calls a warning: the record in flight lost.
  const std::string cut = R"({"type": "update", "step": 12, "wall_ms": 15)";
  const auto p = write("restart.jsonl", kConfig + "\n" + update(11) + "\n" + cut + "\n" + kConfig + "\n" + update(12) + "\n");
  const Dataset d = read({p});
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  const auto cuts = all(Problem::kTruncatedLine);
  ASSERT_EQ(cuts.size(), 1u);
  EXPECT_EQ(cuts[0]->line, 3u);
  EXPECT_EQ(cuts[0]->severity, Severity::kWarning);
  EXPECT_NE(cuts[0]->message.find("the next record is a config record"), std::string::npos) << cuts[0]->message;
  // The same cut line before another update record is an error, as is one at the end of
  // the file with a newline after it; --strict stops at either.
  read({write("mid.jsonl", kConfig + "\n" + update(11) + "\n" + cut + "\n" + update(13) + "\n")});
  EXPECT_EQ(all(Problem::kMalformedJson).size(), 1u);
  EXPECT_EQ(all(Problem::kTruncatedLine).size(), 0u);
  read({write("end.jsonl", kConfig + "\n" + update(11) + "\n" + cut + "\n")});
  ASSERT_EQ(all(Problem::kMalformedJson).size(), 1u);
  EXPECT_EQ(all(Problem::kMalformedJson)[0]->line, 3u);
  read({p}, /*strict=*/true);
  EXPECT_TRUE(diag_.should_stop());
  EXPECT_EQ(all(Problem::kMalformedJson).size(), 1u);
  // A whole record with a bad number or a bad escape before a config record was not cut:
  // it is that error (it was called a cut line, exit status 0).
  for (const std::string bad : {R"({"type": "update", "step": 12, "wall_ms": 02})",
                                R"({"type": "update", "step": 12, "wall_ms": 15, "cpu_call_ms": {"f\xd": 1}})"}) {
    read({write("bad.jsonl", kConfig + "\n" + update(11) + "\n" + bad + "\n" + kConfig + "\n" + update(12) + "\n")});
    EXPECT_EQ(all(Problem::kTruncatedLine).size(), 0u) << bad;
    ASSERT_EQ(all(Problem::kMalformedJson).size(), 1u) << bad;
    EXPECT_EQ(all(Problem::kMalformedJson)[0]->line, 3u);
  }
}
