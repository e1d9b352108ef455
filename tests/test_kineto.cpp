// The Kineto trace reader: the byte splitter (at every chunk boundary), the event
// parser, the attribution of annotations and GPU work on a small trace whose figures
// are worked out by hand in the comments, and every kind of bad trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "byte_source.hpp"
#include "kineto_event.hpp"
#include "kineto_model.hpp"
#include "../util/text.hpp"
#include "stepprof/schema.hpp"
#include "stepprof/kineto.hpp"
#include "stepprof/reader.hpp"
#include "test_util.hpp"
#include "trace_scanner.hpp"

namespace fs = std::filesystem;
using namespace stepprof;
using namespace stepprof::detail;

// Fresh arrays from new[] are filled with 0xA5 in this test binary, so that a test can see
// bytes a reader never wrote (ByteSource's buffers are not zeroed when made): zeros there
// would come by chance from fresh pages. (A replacement of the global operators,
// [replacement.functions]; sized and aligned forms fall back to these two. Not under a
// sanitizer, whose runtime replaces them itself: its new[] met this delete[].)
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
void* operator new[](std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0xA5, n);
  return p;
}
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

class KinetoTest : public test::TempDirTest {
 protected:

  std::optional<KinetoTrace> read(const std::string& path, KinetoOptions opt = {}) {
    diag_ = Diagnostics();
    regions_ = NameTable();
    counters_ = NameTable();
    return read_kineto_trace(path, 0, regions_, counters_, diag_, opt);
  }
  const Diagnostic* first(Problem p) const {
    for (const auto& d : diag_.kept())
      if (d.problem == p) return &d;
    return nullptr;
  }
  const RegionSample* region(const UpdateRecord& u, std::string_view name) const {
    auto id = regions_.find(name);
    return id ? u.region(*id) : nullptr;
  }
  std::optional<double> counter(const UpdateRecord& u, std::string_view name) const {
    auto id = counters_.find(name);
    return id ? u.counter(*id) : std::nullopt;
  }

  Diagnostics diag_;
  NameTable regions_, counters_;
};

struct Piece {
  TraceScanner::Item item;
  std::string key, text;
  std::uint64_t line, column;
};

std::vector<Piece> scan_all(const std::string& path, std::size_t chunk, std::string* error = nullptr,
                            std::size_t* max_capacity = nullptr) {
  std::string err;
  auto src = ByteSource::open(path, err, chunk);
  EXPECT_TRUE(src) << err;
  TraceScanner scan(*src);
  std::vector<Piece> out;
  TraceScanner::Piece p;
  for (;;) {
    const auto item = scan.next(p);
    if (max_capacity) *max_capacity = std::max(*max_capacity, src->capacity());
    out.push_back({item, std::string(p.key), std::string(p.text), p.where.line, p.where.column});
    if (item == TraceScanner::Item::kError && error) *error = p.error;
    if (item == TraceScanner::Item::kEnd || item == TraceScanner::Item::kError) return out;
  }
}

// Strings that hold brackets, quotes and escapes, values on both sides of traceEvents.
const std::string kTricky =
    "\xEF\xBB\xBF{\"a\": \"x}\\\"{[\",\n"
    "  \"traceEvents\": [\n"
    "  {\"name\": \"q\\\\\\\"}]\", \"ts\": 1},\n"
    "  {\"b\": [1, {\"c\": \"]\"}], \"d\": \"\\\\\"}\n"
    "  ],\n"
    "  \"z\": {\"k\": [1, 2]}, \"n\": 12.5, \"s\": \"str\\\\\"\n"
    "}\n";

TEST_F(KinetoTest, ScannerSplitsAtEveryChunkSize) {
  const std::string plain = write("t.json", kTricky);
  const std::string gz = write_gz("t.json.gz", kTricky);
  for (const auto& path : {plain, gz}) {
    for (std::size_t chunk : {64, 65, 67, 71, 100, 1 << 20}) {
      const auto pieces = scan_all(path, chunk);
      ASSERT_EQ(pieces.size(), 7u) << "chunk " << chunk;
      EXPECT_EQ(pieces[0].item, TraceScanner::Item::kTopValue);
      EXPECT_EQ(pieces[0].key, "a");
      EXPECT_EQ(pieces[0].text, "\"x}\\\"{[\"");
      EXPECT_EQ(pieces[0].line, 1u);
      EXPECT_EQ(pieces[1].item, TraceScanner::Item::kEvent);
      EXPECT_EQ(pieces[1].text, "{\"name\": \"q\\\\\\\"}]\", \"ts\": 1}");
      EXPECT_EQ(pieces[1].line, 3u);
      EXPECT_EQ(pieces[1].column, 3u);
      EXPECT_EQ(pieces[2].text, "{\"b\": [1, {\"c\": \"]\"}], \"d\": \"\\\\\"}");
      EXPECT_EQ(pieces[2].line, 4u);
      EXPECT_EQ(pieces[3].key, "z");
      EXPECT_EQ(pieces[3].text, "{\"k\": [1, 2]}");
      EXPECT_EQ(pieces[3].line, 6u);
      EXPECT_EQ(pieces[4].key, "n");
      EXPECT_EQ(pieces[4].text, "12.5");
      EXPECT_EQ(pieces[5].key, "s");
      EXPECT_EQ(pieces[5].text, "\"str\\\\\"");
      EXPECT_EQ(pieces[6].item, TraceScanner::Item::kEnd);
    }
  }
}

TEST_F(KinetoTest, ScannerMemoryStaysBoundedOnALongTrace) {
  // 20 MB of events read in 64 KiB chunks: the buffer never grows past a chunk and a half.
  std::string text = "{\"traceEvents\": [\n";
  const std::string ev = R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2})";
  std::size_t n = 0;
  while (text.size() < 20'000'000) {
    text += (n++ ? ",\n" : "") + ev;
  }
  text += "\n]}\n";
  const auto path = write("long.json", text);
  std::size_t cap = 0;
  std::string err;
  auto src = ByteSource::open(path, err, 1 << 16);
  TraceScanner scan(*src);
  TraceScanner::Piece p;
  std::size_t events = 0;
  for (auto item = scan.next(p); item == TraceScanner::Item::kEvent; item = scan.next(p)) {
    ++events;
    cap = std::max(cap, src->capacity());
  }
  EXPECT_EQ(events, n);
  EXPECT_LE(cap, (1u << 16) * 3 / 2 + ByteSource::padding);
}

// The reviewer's valgrind run: a last line with no newline that leaves less than half a
// chunk of room made the last fill() grow the buffer and then find the end of the input,
// leaving the padding after the data unwritten; the record parser reads it.
TEST_F(KinetoTest, ByteSourcePaddingIsZeroAfterAGrowthAtTheEnd) {
  for (const std::size_t size : {std::size_t{40'000}, std::size_t{65'536}, std::size_t{100'000}}) {
    const auto path = write("tail.json", std::string(size, 'x'));
    std::string err;
    auto src = ByteSource::open(path, err, 1 << 16);
    ASSERT_TRUE(src) << err;
    while (src->fill()) {
    }
    ASSERT_TRUE(src->error().empty()) << src->error();
    ASSERT_EQ(src->size(), size);
    for (std::size_t i = 0; i < ByteSource::padding; ++i) ASSERT_EQ(src->data()[size + i], '\0') << size << " " << i;
  }
}

TEST_F(KinetoTest, ScannerRejectsWhatIsNotATraceObject) {
  struct Case {
    std::string text, message;
    std::uint64_t line, column;
  };
  const std::vector<Case> cases = {
      {"", "the input is empty", 1, 1},
      {"  [1, 2]", "expected a JSON object ('{'), found '['", 1, 3},
      {"hello", "expected a JSON object ('{'), found 'h'", 1, 1},
      {"{\"traceEvents\": [\n {\"a\": 1}\n {\"b\": 2}]}", "expected ',' or ']' between events, found '{'", 3, 2},
      // (At the event's start, not at the end of the input.)
      {"{\"traceEvents\": [\n {\"a\": 1},\n {\"b\": ", "the input ends inside the event that starts here: the trace is truncated, or that event's brackets do not balance", 3, 2},
      // Brackets opened in an event and never closed swallow the rest of the trace: it
      // reads as cut off, so the message offers both.
      {"{\"traceEvents\": [\n {\"ph\": \"X\", \"args\": {\"a\": [[[[}},\n {\"b\": 2}\n]}",
       "the input ends inside the event that starts here: the trace is truncated, or that event's brackets do not "
       "balance (the rest of the trace was read as part of it)", 2, 2},
      // An event without its '}' runs on until the array's ']' closes it: said at the event.
      {"{\"traceEvents\": [\n {\"a\": 1,\n {\"b\": 2},\n {\"c\": [3]}\n]}",
       "the object that starts here is closed by a ']' at line 5, column 1: a bracket is missing or misplaced inside it", 2, 2},
      {"{\"traceEvents\": [\n {\"a\": [1, 2}\n]}",
       "the object that starts here is closed by a ']' at line 3, column 1: a bracket is missing or misplaced inside it", 2, 2},
      {"{\"x\": 1} tail", "unexpected 't' after the end of the trace object", 1, 10},
      {"{\"x\" 1}", "expected ':' after a key, found '1'", 1, 6},
      {"{\"traceEvents\": 3}", "traceEvents is not an array (found '3')", 1, 17},
  };
  for (const auto& c : cases) {
    const auto path = write("bad.json", c.text);
    std::string err;
    const auto pieces = scan_all(path, 64, &err);
    ASSERT_EQ(pieces.back().item, TraceScanner::Item::kError) << c.text;
    EXPECT_EQ(err.substr(0, c.message.size()), c.message) << c.text << " -> " << err;
    EXPECT_EQ(pieces.back().line, c.line) << c.text;
    EXPECT_EQ(pieces.back().column, c.column) << c.text;
  }
}

TEST(KinetoEvent, MicrosecondsToNanosecondsIsExact) {
  std::int64_t ns = 0;
  ASSERT_TRUE(microseconds_to_ns("1694128201426674", ns));
  EXPECT_EQ(ns, 1694128201426674000);
  ASSERT_TRUE(microseconds_to_ns("4458676416788.066", ns));
  EXPECT_EQ(ns, 4458676416788066);
  ASSERT_TRUE(microseconds_to_ns("0.5", ns));
  EXPECT_EQ(ns, 500);
  ASSERT_TRUE(microseconds_to_ns("1.2345", ns));
  EXPECT_EQ(ns, 1235);  // the fourth decimal rounds
  ASSERT_TRUE(microseconds_to_ns("1.2344", ns));
  EXPECT_EQ(ns, 1234);
  ASSERT_TRUE(microseconds_to_ns("-3", ns));
  EXPECT_EQ(ns, -3000);
  ASSERT_TRUE(microseconds_to_ns("2.5e3", ns));
  EXPECT_EQ(ns, 2500000);
  ASSERT_TRUE(microseconds_to_ns("1.5e15", ns));  // epoch microseconds written with an exponent
  EXPECT_EQ(ns, 1500000000000000000);
  EXPECT_FALSE(microseconds_to_ns("1e16", ns));  // beyond int64 nanoseconds
  for (const char* bad : {"", "abc", "1.", "-", "1x", "\"1\"", "99999999999999999999"})
    EXPECT_FALSE(microseconds_to_ns(bad, ns)) << bad;
}

TEST(KinetoEvent, ParsesTheFieldsOfAKernel) {
  // A kernel event as in the real DLRM trace (args shortened).
  std::string text =
      R"J({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", "pid": 0, )J"
      R"("tid": 7, "ts": 1694128201428473, "dur": 8.5, "args": {"External id": 40875, "queued": 0, "device": 0, )"
      R"("context": 1, "stream": 7, "correlation": 40875, "registers per thread": 32}})";
  const std::size_t n = text.size();
  text.append(simdjson::SIMDJSON_PADDING, ' ');
  EventParser parser;
  TraceEvent ev;
  EventError err;
  ASSERT_TRUE(parser.parse(std::string_view(text.data(), n), ev, err)) << err.message;
  EXPECT_EQ(ev.kind, EventKind::kKernel);
  EXPECT_EQ(ev.name, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)");
  EXPECT_EQ(ev.ts_ns, 1694128201428473000);
  EXPECT_EQ(ev.dur_ns, 8500);
  EXPECT_TRUE(ev.has_correlation && ev.has_stream && ev.has_device);
  EXPECT_EQ(ev.correlation, 40875);
  EXPECT_EQ(ev.stream, 7);
  EXPECT_EQ(ev.device, 0);
}

TEST(KinetoEvent, KindsAndRejections) {
  EventParser parser;
  TraceEvent ev;
  EventError err;
  auto parse = [&](std::string text) {
    const std::size_t n = text.size();
    text.append(simdjson::SIMDJSON_PADDING, ' ');
    static std::string keep;
    keep = text;
    return parser.parse(std::string_view(keep.data(), n), ev, err);
  };
  ASSERT_TRUE(parse(R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2})"));
  EXPECT_EQ(ev.kind, EventKind::kOther);  // operators are not used
  ASSERT_TRUE(parse(R"({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#3", "ts": 1, "dur": 2})"));
  EXPECT_EQ(ev.kind, EventKind::kCpuOp);
  ASSERT_TRUE(parse(R"({"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": "Spans", "tid": 5, )"
                    R"("ts": 1, "dur": 2, "args": {"correlation": 9}})"));
  EXPECT_EQ(ev.kind, EventKind::kLaunch);  // older traces spell it "Runtime"
  EXPECT_NE(ev.pid, 0);                     // a string pid is hashed
  ASSERT_TRUE(parse(R"({"ph": "s", "id": 9, "pid": 1, "tid": 5, "ts": 1, "cat": "ac2g", "name": "ac2g"})"));
  EXPECT_EQ(ev.kind, EventKind::kFlowStart);
  EXPECT_EQ(ev.id, 9);
  ASSERT_TRUE(parse(R"({"ph": "f", "id": 9, "pid": 1, "tid": 5, "ts": 1, "cat": "ac2g", "name": "ac2g"})"));
  EXPECT_EQ(ev.kind, EventKind::kOther);
  ASSERT_TRUE(parse(R"({"name": "process_name", "ph": "M", "ts": 1, "pid": 0, "tid": 0, "args": {}})"));
  EXPECT_EQ(ev.kind, EventKind::kOther);

  EXPECT_FALSE(parse(R"([1, 2])"));
  EXPECT_EQ(err.message, "an event should be a JSON object");
  EXPECT_FALSE(parse(R"({"ph": "X", "cat": "kernel", "ts": tru})"));
  EXPECT_EQ(err.problem, Problem::kMalformedJson);
  EXPECT_FALSE(parse(R"({"ph": "X", "cat": "kernel", "ts": "5"})"));
  EXPECT_EQ(err.problem, Problem::kBadField);
  EXPECT_EQ(err.offset, 35u);  // where "5" starts
  // A string field holding a bare token that is no JSON value is malformed JSON (it was
  // a bad field); one holding a value of another type is a bad field.
  EXPECT_FALSE(parse(R"({"ph": X, "cat": "kernel", "ts": 1})"));
  EXPECT_EQ(err.problem, Problem::kMalformedJson);
  EXPECT_FALSE(parse(R"({"ph": 5, "cat": "kernel", "ts": 1})"));
  EXPECT_EQ(err.problem, Problem::kBadField);
  EXPECT_FALSE(parse(R"({"ph": "X", "cat": kernel, "ts": 1})"));
  EXPECT_EQ(err.problem, Problem::kMalformedJson);
  EXPECT_FALSE(parse(R"({"ph": "X", "cat": "kernel", "tid": [1]})"));
  EXPECT_EQ(err.problem, Problem::kBadField);
  EXPECT_FALSE(parse(R"({"ph": "X", "cat": "kernel", "tid": 1e300})"));
  EXPECT_EQ(err.problem, Problem::kBadField);
  // A kernel without a name could be an NCCL kernel: it was counted as compute, silently
  // moving time from nccl to compute. A copy needs no name (its category says what it is).
  EXPECT_FALSE(parse(R"({"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 1, "dur": 2})"));
  EXPECT_EQ(err.problem, Problem::kMissingField);
  EXPECT_EQ(err.message, R"(a kernel has no "name" (it tells NCCL communication from compute))");
  EXPECT_FALSE(parse(R"({"ph": "X", "cat": "kernel", "name": "", "pid": 0, "tid": 7, "ts": 1, "dur": 2})"));
  EXPECT_EQ(err.problem, Problem::kBadField);
  EXPECT_EQ(err.message, R"(a kernel's "name" is empty (it tells NCCL communication from compute))");
  ASSERT_TRUE(parse(R"({"ph": "X", "cat": "gpu_memcpy", "pid": 0, "tid": 7, "ts": 1, "dur": 2})"));
  EXPECT_EQ(ev.kind, EventKind::kMemcpy);
  ASSERT_TRUE(parse(R"({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "ts": 1, "dur": 2})"));
  EXPECT_EQ(ev.kind, EventKind::kKernel);
}

// A small trace with every attribution rule; expected figures worked out by hand.
//   step 3 on thread 1, [0, 1000) ns
//   thread 1:  A [10, 500) { B [20, 200), A [300, 400) }   D [550, 900)   E [1500, 1600) (no step)
//   thread 2:  C [600, 700): no annotation of its own open -> its parent is D (open on thread 1 at 600)
//   launches (correlation: thread, ts): 1: (1, 30) in B and A; 2: (1, 350) in A; 3: (2, 650) in C, so D;
//     4: (2, 920) nothing open on either thread; 5: (1, 1200) no step; 6: flow only (1, 560) in D;
//     7: (1, 580) in D; 8: (2, 800) nothing open on thread 2, D open on the step's thread -> D
//   GPU: 1 kernel s7 [100, 300); 2 kernel s7 [250, 400); 3 nccl kernel s9 [700, 800); 4 memcpy s7 [930, 950);
//     5 kernel [1300, 1400); 6 memset s8 [600, 610); 7 nccl kernel s9 [750, 900); 8 kernel s7 [960, 980);
//     99 kernel s7 [500, 520) with no launch: counted in step 3 by its GPU start, in no region
KinetoModel small_model() {
  KinetoModel m;
  m.add_step(3, 1, 0, 1000, 5);
  m.add_annotation("A", 1, 10, 500);
  m.add_annotation("B", 1, 20, 200);
  m.add_annotation("A", 1, 300, 400);
  m.add_annotation("D", 1, 550, 900);
  m.add_annotation("E", 1, 1500, 1600);
  m.add_annotation("C", 2, 600, 700);
  m.add_launch(1, 1, 30);
  m.add_launch(2, 1, 350);
  m.add_launch(3, 2, 650);
  m.add_launch(4, 2, 920);
  m.add_launch(5, 1, 1200);
  m.add_flow(6, 1, 560);
  m.add_launch(7, 1, 580);
  m.add_launch(8, 2, 800);
  m.add_gpu(GpuKind::kKernel, false, 1, 0, 7, 100, 300);
  m.add_gpu(GpuKind::kKernel, false, 2, 0, 7, 250, 400);
  m.add_gpu(GpuKind::kKernel, true, 3, 0, 9, 700, 800);
  m.add_gpu(GpuKind::kMemcpy, false, 4, 0, 7, 930, 950);
  m.add_gpu(GpuKind::kKernel, false, 5, 0, 7, 1300, 1400);
  m.add_gpu(GpuKind::kMemset, false, 6, 0, 8, 600, 610);
  m.add_gpu(GpuKind::kKernel, true, 7, 0, 9, 750, 900);
  m.add_gpu(GpuKind::kKernel, false, 99, 0, 7, 500, 520);
  m.add_gpu(GpuKind::kKernel, false, 8, 0, 7, 960, 980);
  return m;
}

TEST_F(KinetoTest, AttributionWorkedOutByHand) {
  KinetoModel m = small_model();
  KinetoStats stats;
  const auto updates = m.build(regions_, counters_, "nccl", "nccl_exposed", 4, stats);
  ASSERT_EQ(updates.size(), 1u);
  const UpdateRecord& u = updates[0];
  EXPECT_EQ(u.step, 3);
  EXPECT_DOUBLE_EQ(u.wall_ms, 1000e-6);
  EXPECT_EQ(u.source.file, 4u);
  EXPECT_EQ(u.source.line, 5u);

  const auto* a = region(u, "A");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a->calls, 2);
  EXPECT_DOUBLE_EQ(*a->host_ms, 490e-6);    // the inner A adds a call, not time
  EXPECT_DOUBLE_EQ(*a->device_ms, 300e-6);  // kernels 1 and 2 on stream 7: [100, 400)
  EXPECT_EQ(*a->parent, kTopLevel);

  const auto* b = region(u, "B");
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(*b->host_ms, 180e-6);
  EXPECT_DOUBLE_EQ(*b->device_ms, 200e-6);  // kernel 1
  EXPECT_EQ(*b->parent, *regions_.find("A"));

  const auto* c = region(u, "C");
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(*c->device_ms, 100e-6);  // kernel 3
  EXPECT_EQ(*c->parent, *regions_.find("D"));

  const auto* d = region(u, "D");
  ASSERT_TRUE(d);
  EXPECT_DOUBLE_EQ(*d->host_ms, 350e-6);
  // kernels 3 (via C) and 7 on stream 9: [700, 900) = 200; memset 6 on stream 8: 10;
  // kernel 8 on stream 7 (launched from thread 2 while D was open on thread 1): 20.
  EXPECT_DOUBLE_EQ(*d->device_ms, 230e-6);

  EXPECT_EQ(region(u, "E"), nullptr);  // starts in no step
  const auto* nccl = region(u, "nccl");
  ASSERT_TRUE(nccl);
  EXPECT_EQ(*nccl->calls, 2);
  EXPECT_DOUBLE_EQ(*nccl->device_ms, 200e-6);  // [700, 800) and [750, 900) on stream 9
  EXPECT_FALSE(nccl->host_ms);
  // Compute kernels of the step: [100, 400), 99 [500, 520), 8 [960, 980): none overlaps [700, 900).
  const auto* exposed = region(u, "nccl_exposed");
  ASSERT_TRUE(exposed);
  EXPECT_DOUBLE_EQ(*exposed->device_ms, 200e-6);
  EXPECT_EQ(*exposed->parent, *regions_.find("nccl"));

  EXPECT_EQ(counter(u, "gpu_kernels"), 6);  // 1, 2, 3, 7, 8, 99
  EXPECT_EQ(counter(u, "gpu_memcpys"), 1);
  EXPECT_EQ(counter(u, "gpu_memsets"), 1);
  EXPECT_EQ(counter(u, "nccl_kernels"), 2);
  EXPECT_EQ(stats.annotations_outside_steps, 1u);
  EXPECT_EQ(stats.gpu_ops_outside_steps, 1u);
  EXPECT_EQ(stats.gpu_ops_without_launch, 1u);
}

// Exposed communication, worked out by hand: step [0, 1000) on thread 1.
//   NCCL kernels: [100, 300) stream 9, [250, 400) stream 10, [600, 700) stream 9
//     union over streams [100, 400) + [600, 700) = 400 (nccl; summed per-stream unions,
//     300 + 150 = 450, would count [250, 300) twice)
//   compute kernels: [50, 150), [200, 220) stream 7, [350, 650) stream 8; a memcpy
//     [150, 200) stream 7 is not compute
//   exposed: [100, 400) less 50 + 20 + 50 = 180, [600, 700) less 50 = 50: 230
TEST_F(KinetoTest, ExposedCommunicationWorkedOutByHand) {
  KinetoModel m;
  m.add_step(1, 1, 0, 1000, 2);
  const std::int64_t spans[][4] = {{1, 9, 100, 300},  {2, 10, 250, 400}, {3, 9, 600, 700},
                                   {4, 7, 50, 150},   {5, 7, 200, 220},  {6, 8, 350, 650}, {7, 7, 150, 200}};
  for (const auto& [corr, stream, start, end] : spans) {
    m.add_launch(corr, 1, 10 * corr);
    m.add_gpu(corr == 7 ? GpuKind::kMemcpy : GpuKind::kKernel, corr <= 3, corr, 0, stream, start, end);
  }
  KinetoStats stats;
  const auto updates = m.build(regions_, counters_, "nccl", "nccl_exposed", 0, stats);
  ASSERT_EQ(updates.size(), 1u);
  const auto* nccl = region(updates[0], "nccl");
  const auto* exposed = region(updates[0], "nccl_exposed");
  ASSERT_TRUE(nccl && exposed);
  EXPECT_DOUBLE_EQ(*nccl->device_ms, 400e-6);
  EXPECT_DOUBLE_EQ(*exposed->device_ms, 230e-6);
  EXPECT_EQ(*exposed->calls, 3);
  EXPECT_FALSE(exposed->host_ms);
  // Without a name for it, no exposed region is written.
  KinetoModel again;
  again.add_step(1, 1, 0, 1000, 2);
  again.add_launch(1, 1, 10);
  again.add_gpu(GpuKind::kKernel, true, 1, 0, 9, 100, 300);
  const auto without = again.build(regions_, counters_, "nccl", "", 0, stats);
  EXPECT_EQ(region(without[0], "nccl_exposed"), nullptr);
}

// GPU work too long to have run in the trace (longer than its steps together plus an hour:
// a corrupt "dur") is "not counted", and had still made its step busy throughout in
// gpu_busy_ms. Step [0, 1000) ns; kernel 1 [100, 300) counts; kernel 2 from 400 for two
// hours (launched in the step) does not: busy 200 ns, not 900.
TEST_F(KinetoTest, GpuWorkTooLongToHaveRunIsNotBusyTime) {
  KinetoModel m;
  m.add_step(1, 1, 0, 1000, 2);
  m.add_launch(1, 1, 50);
  m.add_gpu(GpuKind::kKernel, false, 1, 0, 7, 100, 300);
  m.add_launch(2, 1, 60);
  const std::int64_t two_hours_ns = std::int64_t{2} * 3600 * 1'000'000'000;
  m.add_gpu(GpuKind::kKernel, false, 2, 0, 7, 400, 400 + two_hours_ns);
  KinetoStats stats;
  const auto updates = m.build(regions_, counters_, "nccl", "nccl_exposed", 0, stats);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(stats.gpu_ops_too_long, 1u);
  EXPECT_EQ(counter(updates[0], "gpu_kernels"), 1);
  const auto busy = updates[0].extra_number(stepprof::schema::kGpuBusyMs);
  ASSERT_TRUE(busy);
  EXPECT_DOUBLE_EQ(*busy, 200e-6);
}

// A ProfilerStep event written twice: the copy, which "started last" on the tie, took
// the step's work, and was then skipped as a duplicate step, leaving the kept update with
// its time and none of its work. One of each exact repeat is used now. Step 5 [0, 1000)
// twice on thread 1; kernel [100, 300) launched at 50 in annotation A [10, 400).
TEST_F(KinetoTest, AStepEventWrittenTwiceKeepsItsWork) {
  KinetoModel m;
  m.add_step(5, 1, 0, 1000, 2);
  m.add_step(5, 1, 0, 1000, 3);
  m.add_annotation("A", 1, 10, 400);
  m.add_launch(1, 1, 50);
  m.add_gpu(GpuKind::kKernel, false, 1, 0, 7, 100, 300);
  KinetoStats stats;
  const auto updates = m.build(regions_, counters_, "nccl", "nccl_exposed", 0, stats);
  EXPECT_EQ(stats.repeated_steps, 1u);
  EXPECT_EQ(stats.first_repeat_line, 3u);
  EXPECT_EQ(stats.first_repeat_step, 5);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].source.line, 2u);
  const auto* a = region(updates[0], "A");
  ASSERT_TRUE(a);
  EXPECT_DOUBLE_EQ(*a->device_ms, 200e-6);
  EXPECT_EQ(counter(updates[0], "gpu_kernels"), 1);
  // Not an exact repeat (another end): both are kept, for the reader's duplicate-step check.
  KinetoModel other;
  other.add_step(5, 1, 0, 1000, 2);
  other.add_step(5, 1, 0, 999, 3);
  KinetoStats other_stats;
  EXPECT_EQ(other.build(regions_, counters_, "nccl", "nccl_exposed", 0, other_stats).size(), 2u);
  EXPECT_EQ(other_stats.repeated_steps, 0u);
}

// A name called from several places is one region per place (torchrec calls
// nccl:all_to_all under five annotations); worked out by hand:
//   step 1 on thread 1, [0, 1000)
//   thread 1: "c (in a)" [0, 5) (a name that reads like a place: it keeps its name)
//             a [10, 100) { c [10, 40) }   b [200, 400) { c [250, 300), c [310, 330) }
//             d [500, 600) { e [510, 520) }
//   thread 2: c [205, 215): nothing open on its own thread; hangs under b (open on thread
//             1 then), a place of its own, "c (other thread)"
//   launch 1 (thread 1, 260) in c under b: kernel s7 [300, 350)
TEST_F(KinetoTest, ANameCalledFromSeveralPlacesIsARegionPerPlace) {
  KinetoModel m;
  m.add_step(1, 1, 0, 1000, 2);
  m.add_annotation("c (in a)", 1, 0, 5);
  m.add_annotation("a", 1, 10, 100);
  m.add_annotation("c", 1, 10, 40);
  m.add_annotation("b", 1, 200, 400);
  m.add_annotation("c", 1, 250, 300);
  m.add_annotation("c", 1, 310, 330);
  m.add_annotation("d", 1, 500, 600);
  m.add_annotation("e", 1, 510, 520);
  m.add_annotation("c", 2, 205, 215);
  m.add_launch(1, 1, 260);
  m.add_gpu(GpuKind::kKernel, false, 1, 0, 7, 300, 350);
  KinetoStats stats;
  const auto updates = m.build(regions_, counters_, "nccl", "", 0, stats);
  ASSERT_EQ(updates.size(), 1u);
  const UpdateRecord& u = updates[0];
  EXPECT_EQ(stats.names_at_several_places, 1u);
  EXPECT_EQ(stats.first_split_name, "c");
  EXPECT_FALSE(stats.places_not_used);

  const auto* in_a = region(u, "c (in a) [2]");  // "c (in a)" is the trace's own name
  ASSERT_TRUE(in_a);
  EXPECT_EQ(*in_a->calls, 1);
  EXPECT_DOUBLE_EQ(*in_a->host_ms, 30e-6);
  EXPECT_EQ(*in_a->parent, *regions_.find("a"));
  EXPECT_FALSE(in_a->device_ms);
  const auto* literal = region(u, "c (in a)");
  ASSERT_TRUE(literal);
  EXPECT_DOUBLE_EQ(*literal->host_ms, 5e-6);
  EXPECT_EQ(*literal->parent, kTopLevel);

  const auto* in_b = region(u, "c (in b)");
  ASSERT_TRUE(in_b);
  EXPECT_EQ(*in_b->calls, 2);
  EXPECT_DOUBLE_EQ(*in_b->host_ms, 70e-6);  // 50 + 20
  EXPECT_EQ(*in_b->parent, *regions_.find("b"));
  EXPECT_DOUBLE_EQ(*in_b->device_ms, 50e-6);
  EXPECT_DOUBLE_EQ(*region(u, "b")->device_ms, 50e-6);

  const auto* other_thread = region(u, "c (other thread)");
  ASSERT_TRUE(other_thread);
  EXPECT_EQ(*other_thread->calls, 1);
  EXPECT_DOUBLE_EQ(*other_thread->host_ms, 10e-6);
  EXPECT_EQ(*other_thread->parent, *regions_.find("b"));
  EXPECT_EQ(region(u, "c"), nullptr);

  // e is at one place only: its own name.
  ASSERT_TRUE(region(u, "e"));
  EXPECT_EQ(*region(u, "e")->parent, *regions_.find("d"));
  EXPECT_EQ(u.regions.size(), 8u);  // the literal, a, b, d, e, c in a, c in b, c on thread 2
}

// Calls at the top of a worker thread, worked out by hand (step 1 on thread 1, [0, 1000)):
//   thread 1: P [0, 500) { a [100, 400) }   fwd [600, 700)   q [800, 900)
//   thread 2: a [150, 250): inside a on thread 1, by its own name: a recursive call of it
//             (a call, no time), not a region of its own with no time
//   thread 3: q [610, 620): at the top of its thread, under fwd by timing, and q [800, 900)
//             on thread 1 at the top level: two places, so fwd's self time stays 100 - 10;
//             q [950, 960) with nothing open on thread 1 is at the worker place too
TEST_F(KinetoTest, CallsAtTheTopOfAWorkerThread) {
  KinetoModel m;
  m.add_step(1, 1, 0, 1000, 2);
  m.add_annotation("P", 1, 0, 500);
  m.add_annotation("a", 1, 100, 400);
  m.add_annotation("a", 2, 150, 250);
  m.add_annotation("fwd", 1, 600, 700);
  m.add_annotation("q", 3, 610, 620);
  m.add_annotation("q", 1, 800, 900);
  m.add_annotation("q", 3, 950, 960);  // nothing open on thread 1: the same worker place
  KinetoStats stats;
  const auto updates = m.build(regions_, counters_, "nccl", "", 0, stats);
  ASSERT_EQ(updates.size(), 1u);
  const UpdateRecord& u = updates[0];
  const auto* a = region(u, "a");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a->calls, 2);
  EXPECT_DOUBLE_EQ(*a->host_ms, 300e-6);
  EXPECT_EQ(*a->parent, *regions_.find("P"));
  const auto* q = region(u, "q");
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q->host_ms, 100e-6);
  EXPECT_EQ(*q->parent, kTopLevel);
  const auto* q_worker = region(u, "q (other thread)");
  ASSERT_TRUE(q_worker);
  EXPECT_EQ(*q_worker->calls, 2);
  EXPECT_DOUBLE_EQ(*q_worker->host_ms, 20e-6);
  EXPECT_EQ(*q_worker->parent, *regions_.find("fwd"));
  EXPECT_EQ(u.regions.size(), 5u);
  EXPECT_EQ(stats.names_at_several_places, 1u);
}

// x and y nested alternately: 60 deep, every level is a place of its own, and the names
// stay distinct and short (a place deeper than 256 characters of qualifiers is numbered);
// 100 deep, over the 64 levels places are kept to, one region per name.
TEST_F(KinetoTest, DeepAlternatingNesting) {
  for (const int depth : {60, 100}) {
    KinetoModel m;
    m.add_step(1, 1, 0, 1000, 2);
    for (int i = 0; i < depth; ++i) m.add_annotation(i % 2 ? "y" : "x", 1, i, 1000 - i);
    KinetoStats stats;
    const auto updates = m.build(regions_, counters_, "nccl", "", 0, stats);
    ASSERT_EQ(updates.size(), 1u);
    const auto& u = updates[0];
    if (depth == 60) {
      EXPECT_FALSE(stats.places_not_used);
      ASSERT_EQ(u.regions.size(), 60u);
      std::set<std::string> names;
      for (const auto& r : u.regions) {
        const auto name = std::string(regions_.name(r.region));
        EXPECT_LE(name.size(), 256u + 40u) << name;
        names.insert(name);
      }
      EXPECT_EQ(names.size(), 60u);
      EXPECT_EQ(stats.names_at_several_places, 2u);
    } else {
      EXPECT_TRUE(stats.places_not_used);
      EXPECT_EQ(stats.names_at_several_places, 0u);
      ASSERT_EQ(u.regions.size(), 2u);
      const auto* x = region(u, "x");
      ASSERT_TRUE(x);
      EXPECT_EQ(*x->calls, 50);
      EXPECT_DOUBLE_EQ(*x->host_ms, 1000e-6);  // the outermost call's; the others are inside it
      EXPECT_EQ(*x->parent, kTopLevel);
      EXPECT_EQ(*region(u, "y")->parent, *regions_.find("x"));
      EXPECT_DOUBLE_EQ(*region(u, "y")->host_ms, 998e-6);
    }
  }
}

// The limit on places counts those beyond a name's first: 1,500 names made with a number
// in them (one place each) keep places; a name under 1,002 different parents (1,001
// places beyond its first, over the 1,000 allowed) makes the trace one region per name.
TEST_F(KinetoTest, PlacesBeyondANamesFirstAreLimitedTo1000) {
  for (const int parents : {1'001, 1'002}) {
    KinetoModel m;
    m.add_step(1, 1, 0, 1'000'000, 2);
    for (int i = 0; i < 1'500; ++i) m.add_annotation("batch_" + std::to_string(i), 1, 10 * i, 10 * i + 5);
    for (int i = 0; i < parents; ++i) {
      const std::int64_t at = 100'000 + 100 * i;
      m.add_annotation("p" + std::to_string(i), 1, at, at + 50);
      m.add_annotation("x", 1, at + 10, at + 20);
    }
    KinetoStats stats;
    const auto updates = m.build(regions_, counters_, "nccl", "", 0, stats);
    ASSERT_EQ(updates.size(), 1u);
    const auto& u = updates[0];
    if (parents == 1'001) {
      EXPECT_FALSE(stats.places_not_used);
      EXPECT_EQ(stats.names_at_several_places, 1u);
      ASSERT_TRUE(region(u, "x (in p1000)"));
      EXPECT_EQ(*region(u, "x (in p1000)")->parent, *regions_.find("p1000"));
      EXPECT_EQ(u.regions.size(), 1'500u + 2u * 1'001u);
    } else {
      EXPECT_TRUE(stats.places_not_used);
      const auto* x = region(u, "x");
      ASSERT_TRUE(x);
      EXPECT_EQ(*x->calls, 1'002);
      EXPECT_DOUBLE_EQ(*x->host_ms, 1'002 * 10e-6);
      EXPECT_EQ(*x->parent, *regions_.find("p0"));  // its first call's
      EXPECT_EQ(u.regions.size(), 1'500u + 1'002u + 1u);
    }
  }
}

std::string small_trace(const std::string& top) {
  return "{\n" + top +
         "\"traceEvents\": [\n"
         R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 100, "dur": 50},)"
         "\n"
         R"({"ph": "X", "cat": "user_annotation", "name": "fwd", "pid": 1, "tid": 1, "ts": 110, "dur": 20.5})"
         "\n]}\n";
}

TEST_F(KinetoTest, ReadsASmallTraceIntoTheLogModel) {
  const auto path = write_gz("t.json.gz", small_trace(
      R"("schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 2, "world_size": 4},
         "deviceProperties": [{"id": 0, "name": "GPU0"}], "traceName": "x",)"
      "\n"));
  EXPECT_TRUE(is_kineto_trace(path));
  const auto t = read(path);
  ASSERT_TRUE(t) << (diag_.kept().empty() ? "" : diag_.kept()[0].message);
  // (Only the note that the trace has no GPU activity.)
  ASSERT_EQ(diag_.total(), 1u);
  EXPECT_EQ(diag_.kept()[0].severity, Severity::kNote);
  EXPECT_NE(diag_.kept()[0].message.find("no GPU kernel, copy or memset in the trace"), std::string::npos);
  EXPECT_EQ(t->config.rank, 2);
  EXPECT_EQ(t->config.world_size, 4);
  EXPECT_EQ(t->config.first_step, 7);
  ASSERT_TRUE(t->config.find("distributed_backend"));
  EXPECT_EQ(t->config.find("distributed_backend")->json, "\"nccl\"");
  ASSERT_TRUE(t->config.find("kineto_traceName"));
  EXPECT_FALSE(t->config.find("device_properties"));  // no GPU activity: no device was used
  ASSERT_EQ(t->updates.size(), 1u);
  EXPECT_EQ(t->updates[0].rank, 2);
  EXPECT_DOUBLE_EQ(t->updates[0].wall_ms, 0.05);
  EXPECT_DOUBLE_EQ(*region(t->updates[0], "fwd")->host_ms, 0.0205);
  EXPECT_EQ(t->updates[0].source.line, 5u);
  EXPECT_EQ(t->stats.events, 2u);
}

TEST_F(KinetoTest, BadTraces) {
  const std::string dist = R"("distributedInfo": {"rank": 0, "world_size": 1},)";
  struct Case {
    std::string name, text, message;
  };
  const std::vector<Case> cases = {
      {"nodist.json", small_trace(""), "no \"distributedInfo\""},
      {"nostep.json", "{" + dist + R"("traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "f", "ts": 1, "dur": 2}]})",
       "no ProfilerStep#N range among 1 events"},
      {"noevents.json", "{" + dist + R"("x": 1})", "no \"traceEvents\" array"},
      {"norank.json", small_trace(R"("distributedInfo": {"world_size": 2},)"), "distributedInfo has no integer \"rank\""},
      {"cut.json", small_trace(dist).substr(0, 120), "the input ends inside the event that starts here: the trace is truncated"},
  };
  for (const auto& c : cases) {
    const auto path = write(c.name, c.text);
    EXPECT_FALSE(read(path)) << c.name;
    const auto* d = first(Problem::kBadTrace);
    ASSERT_TRUE(d) << c.name;
    EXPECT_EQ(d->severity, Severity::kError);
    EXPECT_EQ(d->file, path);
    EXPECT_NE(d->message.find(c.message), std::string::npos) << c.name << ": " << d->message;
  }
  // A truncated gzip stream names the cut and where it happened.
  std::string big = small_trace(dist);
  while (big.size() < 200000) big.insert(big.find("\n]}"), ",\n" R"({"ph": "M", "name": "thread_name", "pid": 1})");
  const auto gz = write_gz("full.json.gz", big);
  std::string bytes;
  {
    std::ifstream in(gz, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto cut = write("cut.json.gz", bytes.substr(0, bytes.size() / 2));
  EXPECT_FALSE(read(cut));
  const auto* d = first(Problem::kBadTrace);
  ASSERT_TRUE(d);
  EXPECT_NE(d->message.find("the input is cut off"), std::string::npos) << d->message;
  EXPECT_GT(d->line, 1u);
  // Rank and world size can be supplied for a trace without distributedInfo.
  KinetoOptions opt;
  opt.rank = 5;
  opt.world_size = 8;
  const auto t = read(write("nodist.json", small_trace("")), opt);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->config.rank, 5);
  EXPECT_EQ(t->config.world_size, 8);
}

TEST_F(KinetoTest, EveryCutAndCorruptedByteGivesADiagnosticNotACrash) {
  // A small trace with strings, escapes and nested args, cut at every byte and with every
  // byte replaced by a JSON structural character: each read either succeeds or reports
  // an error, never crashes (this test runs under AddressSanitizer too).
  const std::string text =
      "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 1, \"world_size\": 2},\n\"traceEvents\": [\n"
      R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 0, "dur": 90},)"
      "\n"
      R"({"ph": "X", "cat": "user_annotation", "name": "a\"{b", "pid": 1, "tid": 1, "ts": 5, "dur": 50},)"
      "\n"
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 6, "dur": 1, "args": {"correlation": 3}},)"
      "\n"
      R"({"ph": "X", "cat": "kernel", "name": "ncclK", "pid": 0, "tid": 7, "ts": 20, "dur": 4, "args": {"stream": 7, "correlation": 3, "grid": [1, 2]}})"
      "\n], \"traceName\": \"x\\\\\"}\n";
  ASSERT_TRUE(read(write("whole.json", text)));
  EXPECT_EQ(diag_.total(), 0u);
  std::size_t ok = 0, failed = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    for (const std::string& variant :
         {text.substr(0, i), text.substr(0, i) + "\"" + text.substr(i + 1), text.substr(0, i) + "\\" + text.substr(i + 1),
          text.substr(0, i) + "{" + text.substr(i + 1), text.substr(0, i) + "]" + text.substr(i + 1),
          text.substr(0, i) + "," + text.substr(i + 1), text.substr(0, i) + "\xff" + text.substr(i + 1)}) {
      // A new file each time: rewriting one file makes ext4 flush it to disk on every close.
      const auto path = write("v" + std::to_string(ok + failed) + ".json", variant);
      const auto t = read(path);
      fs::remove(path);
      if (t) {
        ++ok;
      } else {
        ++failed;
        EXPECT_GT(diag_.count(Severity::kError), 0u) << variant;
      }
    }
  }
  EXPECT_GT(ok, 0u);
  EXPECT_GT(failed, text.size());  // at least every cut before the end fails
}

TEST_F(KinetoTest, ZerosAfterTheTraceAreAWarningNotALostTrace) {
  // A step log with a crash's zero-fill was read with a warning; a trace was rejected whole.
  const std::string text =
      small_trace(R"("distributedInfo": {"rank": 0, "world_size": 1},)" "\n") + std::string(1000, '\0');
  const auto t = read(write("zeros.json", text));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->updates.size(), 1u);
  EXPECT_EQ(diag_.count(Problem::kBadTrace), 0u);
  ASSERT_EQ(diag_.count(Problem::kZeroBytes), 1u);
  const auto zeros = std::find_if(diag_.kept().begin(), diag_.kept().end(),
                                  [](const auto& d) { return d.problem == Problem::kZeroBytes; });
  EXPECT_EQ(zeros->severity, Severity::kWarning);
  EXPECT_NE(zeros->message.find("1000 zero bytes after the end of the trace"), std::string::npos);
  // Anything else after the zeros is still an error.
  EXPECT_FALSE(read(write("zeros-x.json", text + "x")));
}

TEST_F(KinetoTest, ATraceWhoseFirstValueIsLargeIsStillATrace) {
  // Metadata of 200 KB before "traceEvents": once missed (only 64 KB were looked at), the
  // trace was then read as a step log and rejected.
  const std::string meta = "\"zMeta\": \"" + std::string(200000, 'x') + "\", ";
  const auto one_line = write("one.json", "{" + meta + R"("traceEvents": [])" + "}\n");
  EXPECT_TRUE(is_kineto_trace(one_line));
  std::string pretty = small_trace(meta + "\n");
  EXPECT_TRUE(is_kineto_trace(write("pretty.json", pretty)));
  // Step logs whose records do not begin with "type" are still logs, after one line.
  const auto log = write("reordered.jsonl", R"({"rank": 0, "type": "config"})" "\n" +
                                                std::string(R"({"step": 1, "type": "update", "wall_ms": 5})") + "\n");
  EXPECT_FALSE(is_kineto_trace(log));
}

TEST_F(KinetoTest, ReportInputIsDetectedFromContent) {
  // A trace named like a log and a log side by side: read_logs tells them apart by content.
  const auto trace = write("rank0.jsonl", small_trace(R"("distributedInfo": {"rank": 0, "world_size": 2},)"));
  const auto log = write("trace.json", R"({"type": "config", "rank": 1, "world_size": 2})"
                                       "\n"
                                       R"({"type": "update", "rank": 1, "step": 7, "wall_ms": 0.06})"
                                       "\n");
  EXPECT_TRUE(is_kineto_trace(trace));
  EXPECT_FALSE(is_kineto_trace(log));
  EXPECT_FALSE(is_kineto_trace("-"));
  Diagnostics diag;
  const Dataset ds = read_logs({trace, log}, {}, diag);
  EXPECT_EQ(diag.count(Severity::kError), 0u);
  ASSERT_EQ(ds.ranks.size(), 2u);
  EXPECT_EQ(ds.ranks[0].rank, 0);
  EXPECT_DOUBLE_EQ(ds.ranks[0].updates.at(0).wall_ms, 0.05);
  EXPECT_EQ(ds.ranks[1].rank, 1);
}

TEST_F(KinetoTest, TracesOfAnotherJobOnAnotherGpuAreNotMergedIntoARank) {
  // The A100 job's rank 3 (world size 8, as the V100 DLRM job) was merged into the DLRM
  // job's rank 3 without a word: steps 10 and 1009..1014, medians of both jobs.
  const std::string dir = std::string(STEPPROF_SOURCE_DIR) + "/examples/kineto/";
  std::vector<std::string> files;
  for (int w = 0; w < 8; ++w) files.push_back(dir + "param-dlrm-8rank-v100-worker" + std::to_string(w) + "_step_12.json.gz");
  files.push_back(dir + "hta-a100-rank3of8.json.gz");
  Diagnostics diag;
  const Dataset ds = read_logs(files, {}, diag);
  ASSERT_EQ(diag.count(Problem::kMixedRuns), 1u);
  for (const auto& d : diag.kept())
    if (d.problem == Problem::kMixedRuns) {
      EXPECT_TRUE(d.file.ends_with("hta-a100-rank3of8.json.gz")) << d.file;
      EXPECT_NE(d.message.find("in its run settings (gpu_name \"NVIDIA A100-PG509-200\" against \"Tesla V100-SXM2-32GB\")"),
                std::string::npos)
          << d.message;
    }
  ASSERT_EQ(ds.ranks.size(), 8u);
  ASSERT_EQ(ds.ranks[3].updates.size(), 1u);
  EXPECT_EQ(ds.ranks[3].updates[0].step, 10);
}

TEST_F(KinetoTest, RealTraceStepsAndNcclKernels) {
  // examples/kineto/param-dlrm-8rank-v100-worker0_step_12.json.gz: ProfilerStep#10 has
  // "dur": 14455 (us), and the trace holds 8 kernels whose names contain "nccl"
  // (3 ncclKernel_AllReduce_RING_LL_Sum_float, 5 ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t),
  // all launched inside the step (zcat ... | grep -c '"cat": "kernel", "name": "nccl').
  const auto t = read(std::string(STEPPROF_SOURCE_DIR) + "/examples/kineto/param-dlrm-8rank-v100-worker0_step_12.json.gz");
  ASSERT_TRUE(t);
  EXPECT_EQ(diag_.count(Severity::kError), 0u);
  ASSERT_EQ(t->updates.size(), 1u);
  EXPECT_EQ(t->updates[0].step, 10);
  EXPECT_DOUBLE_EQ(t->updates[0].wall_ms, 14.455);
  EXPECT_EQ(counter(t->updates[0], "nccl_kernels"), 8);
  EXPECT_EQ(*region(t->updates[0], "nccl")->calls, 8);
  EXPECT_EQ(t->config.world_size, 8);
  EXPECT_EQ(t->stats.events, 3290u);  // python3 -c "...len(json.load(...)['traceEvents'])"
}

}  // namespace

// prefix_at_character (src/util/text.hpp): a cut inside a well-formed character leaves
// the character out whole; bytes that are no valid UTF-8 are cut where the count says (a
// run of 60 stray continuation bytes had been backed off to an empty prefix).
TEST(Text, PrefixAtCharacter) {
  using stepprof::detail::prefix_at_character;
  EXPECT_EQ(prefix_at_character("abc", 5), "abc");
  EXPECT_EQ(prefix_at_character("abcdef", 3), "abc");
  EXPECT_EQ(prefix_at_character("a\xc3\xa9" "b", 2), "a");               // é would be cut after its lead
  EXPECT_EQ(prefix_at_character("a\xc3\xa9" "b", 3), "a\xc3\xa9");
  EXPECT_EQ(prefix_at_character("a\xf0\x9f\x98\x80" "b", 4), "a");       // an emoji cut after 3 of 4 bytes
  EXPECT_EQ(prefix_at_character("a\xf0\x9f\x98\x80" "b", 5), "a\xf0\x9f\x98\x80");
  EXPECT_EQ(prefix_at_character("[r" + std::string(60, '\xa0'), 10), "[r" + std::string(8, '\xa0'));
  EXPECT_EQ(prefix_at_character("\xa0\xa0\xa0\xa0", 2), "\xa0\xa0");
  EXPECT_EQ(prefix_at_character("\xc3\xa9", 0), "");
}

