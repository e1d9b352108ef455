// The hierarchy format (docs/hierarchy-format.md) and nesting recorded in logs.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <functional>
#include <set>

#include "stepprof/hierarchy.hpp"
#include "stepprof/reader.hpp"
#include "test_util.hpp"

using namespace stepprof;

namespace {
const std::string kSource = STEPPROF_SOURCE_DIR;
}

TEST(Hierarchy, BundledFileGivesTheDocumentedTree) {
  Diagnostics diag;
  auto h = load_hierarchy(kSource + "/examples/qwen-vggt/hierarchy.txt", diag);
  ASSERT_TRUE(h) << (diag.kept().empty() ? "" : format_diagnostic(diag.kept()[0]));
  EXPECT_EQ(h->nodes().size(), 14u);
  EXPECT_EQ(h->find("vggt_single")->parent, "geometry_total");
  EXPECT_EQ(h->find("micro_step_total")->parent, "");
  EXPECT_EQ(h->find("optimizer")->parent, "deepspeed_step");
  EXPECT_EQ(h->depth("optimizer"), 3);
  EXPECT_TRUE(h->is_ancestor("micro_step_total", "vggt_batched"));
  EXPECT_FALSE(h->is_ancestor("backward_and_engine_step", "vggt_batched"));
  EXPECT_EQ(h->find("backward_and_communication")->role, RegionRole::kCommunication);
  EXPECT_EQ(h->find("batch_fetch_and_count")->role, RegionRole::kData);
  const auto alts = h->alternatives();
  ASSERT_EQ(alts.size(), 1u);
  EXPECT_EQ(alts[0].first, "geometry");
  ASSERT_EQ(alts[0].second.size(), 2u);
  EXPECT_EQ(alts[0].second[1]->microbatches(), "vggt_fallback_microbatches");
  EXPECT_EQ(alts[0].second[1]->frames(), "vggt_single_frames");  // the default name
  std::vector<std::string> kids;
  for (const auto* n : h->children("forward_and_loss")) kids.push_back(n->name);
  EXPECT_EQ(kids, (std::vector<std::string>{"prepare_inputs", "vision_forward", "geometry_total", "language_forward"}));
}

TEST(Hierarchy, ProfilerNamesWithHashesAndSpaces) {
  // PyTorch-profiler names: "## forward ##" (quoted: it starts with '#', and has
  // spaces), "Optimizer.step#SGD.step" ('#' inside a name is not a comment). Any '#'
  // used to start a comment, so neither could be named.
  Diagnostics diag;
  const auto h = parse_hierarchy(
      "\"## forward ##\"  # the forward pass\n"
      "  DistributedDataParallel.forward\n"
      "\"## optimizer ##\" role=optimizer\n"
      "  Optimizer.step#SGD.step alt=opt # a comment after a space\n"
      "  \"say \\\"hi\\\" \\\\ bye\" alt=opt\n",
      "h.txt", diag);
  ASSERT_TRUE(h) << (diag.kept().empty() ? "" : diag.kept().front().message);
  EXPECT_TRUE(diag.kept().empty());
  ASSERT_NE(h->find("## forward ##"), nullptr);
  EXPECT_EQ(h->find("DistributedDataParallel.forward")->parent, "## forward ##");
  EXPECT_EQ(h->find("## optimizer ##")->role, RegionRole::kOptimizer);
  ASSERT_NE(h->find("Optimizer.step#SGD.step"), nullptr);
  EXPECT_EQ(h->find("Optimizer.step#SGD.step")->alt_group, "opt");
  ASSERT_NE(h->find("say \"hi\" \\ bye"), nullptr);  // \" and \\ inside quotes
  EXPECT_EQ(h->find("say \"hi\" \\ bye")->parent, "## optimizer ##");
  EXPECT_EQ(h->nodes().size(), 5u);
}

TEST(Hierarchy, ErrorsNameLineAndColumn) {
  struct Case {
    std::string text;
    std::uint64_t line, column;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"a\n\tb\n", 2, 1, "tabs"},
      {"a\n  b  colour=red\n", 2, 6, "unknown attribute"},
      {"a\n  b role=gpu\n", 2, 10, "unknown role"},
      {"a\n    b\n  c\n", 3, 3, "indentation"},
      {"a\n  b\n  a\n", 3, 3, "appears twice"},
      {"a\n  b junk\n", 2, 5, "key=value"},
      {"a\n  b alt=g alt=h\n", 2, 11, "attribute \"alt\" given twice (first at column 5)"},  // (the last won)
      {"a\n  \"## forward\n", 2, 3, "a quoted region name is not closed"},
      {"a\n  \"x\"y\n", 2, 6, "expected a space after the quoted region name"},
      {"a\n  \"\"\n", 2, 3, "expected a region name"},
      {"# only a comment\n", 0, 0, "names no regions"},
      // Not text (a binary file given by mistake): the bytes are named, not echoed.
      {"a\n  vision_\x01x\n", 2, 10, "control byte 0x01"},
      {"a\n  b # \x7F\n", 2, 7, "control byte 0x7F"},
      {"a\n  vis\xC3\xA4on\n  vi\xFF\xFEsion\n", 3, 5, "byte 0xFF is not UTF-8"},
      {"ab\x91\x10" "c\n", 1, 3, "byte 0x91 is not UTF-8"},  // the first bad byte, not the control byte after it
      {"a\xED\xA0\x80" "b\n", 1, 2, "byte 0xED is not UTF-8"},   // an encoded surrogate
  };
  {
    // Two communication regions: the analyses take one; a warning says which.
    Diagnostics diag;
    const auto h = parse_hierarchy("a role=communication\n  b\nc role=comm\n", "h.txt", diag);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->find("c")->role, RegionRole::kCommunication);  // (comm: the documented short form)
    ASSERT_EQ(diag.kept().size(), 1u);
    EXPECT_EQ(diag.kept().front().severity, Severity::kWarning);
    EXPECT_EQ(diag.kept().front().line, 3u);
    EXPECT_NE(diag.kept().front().message.find("\"c\" has role=communication as \"a\" (line 1) has"),
              std::string::npos)
        << diag.kept().front().message;
  }
  {
    // An indented first region is one error, not one more for each top-level line after it.
    Diagnostics diag;
    EXPECT_FALSE(parse_hierarchy("  a\nb\nc\n", "h.txt", diag));
    ASSERT_EQ(diag.kept().size(), 1u);
    EXPECT_NE(diag.kept().front().message.find("first region must not be indented"), std::string::npos);
  }
  for (const auto& c : cases) {
    Diagnostics diag;
    EXPECT_FALSE(parse_hierarchy(c.text, "h.txt", diag)) << c.text;
    ASSERT_FALSE(diag.kept().empty()) << c.text;
    const auto& d = diag.kept().front();
    EXPECT_EQ(d.problem, Problem::kHierarchy);
    EXPECT_EQ(d.line, c.line) << c.text;
    EXPECT_EQ(d.column, c.column) << c.text;
    EXPECT_NE(d.message.find(c.says), std::string::npos) << d.message;
  }
}

TEST(Hierarchy, CommentsBlankLinesAndDedent) {
  Diagnostics diag;
  auto h = parse_hierarchy("# top\na   # first\n  b\n\n    c\n  d\ne\n", "h.txt", diag);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->find("c")->parent, "b");
  EXPECT_EQ(h->find("d")->parent, "a");
  EXPECT_EQ(h->find("e")->parent, "");
}

TEST(Hierarchy, AByteOrderMarkIsNotPartOfTheFirstName) {
  // A file saved by Notepad: the first region was "\xEF\xBB\xBFa", never in the log.
  Diagnostics diag;
  auto h = parse_hierarchy("\xEF\xBB\xBF" "a\n  b\n", "h.txt", diag);
  ASSERT_TRUE(h);
  EXPECT_EQ(diag.total(), 0u);
  ASSERT_NE(h->find("a"), nullptr);
  EXPECT_EQ(h->find("b")->parent, "a");
}

TEST(Hierarchy, FromParentsInTheLog) {
  const std::string log =
      R"({"type": "config", "rank": 0, "world_size": 1, "region_alternatives": {"fast": "path"}, "region_roles": {"sync": "communication"}})"
      "\n"
      R"({"type": "update", "rank": 0, "step": 1, "wall_ms": 10, "cpu_call_ms": {"step": 9, "fast": 2, "sync": 3}, "parents": {"step": null, "fast": "step", "sync": "step"}})"
      "\n";
  const std::string path = testing::TempDir() + "/parents.jsonl";
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(log.data(), 1, log.size(), f);
  std::fclose(f);
  Diagnostics diag;
  const Dataset d = read_logs({path}, {}, diag);
  EXPECT_EQ(diag.total(), 0u);
  auto h = hierarchy_from_log(d, diag);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->find("fast")->parent, "step");
  EXPECT_EQ(h->find("step")->parent, "");
  EXPECT_EQ(h->find("fast")->alt_group, "path");
  EXPECT_EQ(h->find("sync")->role, RegionRole::kCommunication);
}

// Parents that change between updates keep the first (as the warning says, once per
// change), and a region with an empty name, which cannot be told from the top level, is
// left out instead of nesting the top level inside itself (found by fuzz_kineto).
// (An empty region name never reaches the nesting: the reader rejects its record,
// ReaderTest.EmptyAndOverlongNamesAreRejected.)
TEST(Hierarchy, FromTheLogConflictsKeepTheFirstParent) {
  const std::string log =
      R"({"type": "config", "rank": 0, "world_size": 1})"
      "\n"
      R"({"type": "update", "rank": 0, "step": 1, "wall_ms": 10, "cpu_call_ms": {"a": 9, "b": 2, "c": 1}, "parents": {"a": null, "b": "a", "c": null}})"
      "\n"
      R"({"type": "update", "rank": 0, "step": 2, "wall_ms": 10, "cpu_call_ms": {"a": 9, "b": 2, "c": 1}, "parents": {"a": null, "b": "c", "c": null}})"
      "\n"
      R"({"type": "update", "rank": 0, "step": 3, "wall_ms": 10, "cpu_call_ms": {"a": 9, "b": 2, "c": 1}, "parents": {"a": null, "b": "c", "c": null}})"
      "\n";
  const std::string path = testing::TempDir() + "/conflicts.jsonl";
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(log.data(), 1, log.size(), f);
  std::fclose(f);
  Diagnostics diag;
  const Dataset d = read_logs({path}, {}, diag);
  ASSERT_EQ(d.update_count(), 3u);
  const auto before = diag.total();
  auto h = hierarchy_from_log(d, diag);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->find("b")->parent, "a");
  EXPECT_EQ(diag.total() - before, 1u);  // steps 2 and 3 disagree the same way: one warning
  for (const auto* top : h->children("")) EXPECT_FALSE(top->name.empty());
}

// A chain 3,000 deep whose records list each region before its parent: placing parents
// first took one pass over the regions per level, and after 1,000 passes the rest were
// reported as "circular parents" and left out.
TEST(Hierarchy, FromTheLogAChainListedChildFirstIsPlacedWhole) {
  test::DatasetBuilder b;
  auto& u = b.add(1, 100.0);
  constexpr int kDepth = 3'000;
  for (int i = kDepth - 1; i >= 0; --i) b.region(u, "r" + std::to_string(i), std::nullopt, 1.0);
  for (int i = 0; i < kDepth; ++i) {  // u.regions[k] is r(kDepth - 1 - k); r(i)'s parent is r(i - 1)
    auto& r = u.regions[static_cast<std::size_t>(kDepth - 1 - i)];
    r.parent = i == 0 ? kTopLevel : u.regions[static_cast<std::size_t>(kDepth - i)].region;
  }
  Diagnostics diag;
  const auto h = hierarchy_from_log(b.d, diag);
  ASSERT_TRUE(h);
  EXPECT_EQ(diag.total(), 0u) << (diag.kept().empty() ? "" : diag.kept().front().message);
  ASSERT_EQ(h->nodes().size(), static_cast<std::size_t>(kDepth));
  EXPECT_EQ(h->find("r2999")->parent, "r2998");
  EXPECT_EQ(h->nodes().front().name, "r0");  // parents first
  EXPECT_EQ(h->nodes().back().name, "r2999");
}

// depth(), is_ancestor() and in_background() against a walk up the parents by name, on
// random forests (a node's parent is any earlier node, or the top level; some nodes
// background; some names repeated, whose later nodes find() does not return) and on one
// chain 30,000 deep (the old walk stopped at 1,000 levels).
TEST(Hierarchy, DepthAncestorsAndBackgroundMatchAWalkUpTheParents) {
  auto check = [](const Hierarchy& h, const std::vector<std::string>& names, std::mt19937& rng, int pairs) {
    auto chain = [&](const std::string& name) {  // the node and its ancestors, by name
      std::vector<const HierarchyNode*> up;
      for (const HierarchyNode* n = h.find(name); n; n = n->parent.empty() ? nullptr : h.find(n->parent))
        up.push_back(n);
      return up;
    };
    for (const auto& name : names) {
      const auto up = chain(name);
      EXPECT_EQ(h.depth(name), static_cast<int>(up.size()) - 1) << name;
      const bool bg = std::any_of(up.begin(), up.end(), [](auto* n) { return n->role == RegionRole::kBackground; });
      EXPECT_EQ(h.in_background(name), bg) << name;
    }
    std::uniform_int_distribution<std::size_t> pick(0, names.size() - 1);
    for (int k = 0; k < pairs; ++k) {
      const auto& a = names[pick(rng)];
      const auto& n = names[pick(rng)];
      const auto up = chain(n);
      const bool expected = std::any_of(up.begin() + 1, up.end(), [&](auto* x) { return x->name == a; });
      ASSERT_EQ(h.is_ancestor(a, n), expected) << a << " over " << n;
    }
  };
  std::mt19937 rng(7);
  for (int forest = 0; forest < 40; ++forest) {
    Hierarchy h;
    std::vector<std::string> names;
    const std::size_t n = 1 + rng() % 300;
    for (std::size_t i = 0; i < n; ++i) {
      HierarchyNode node;
      node.name = i > 0 && rng() % 20 == 0 ? names[rng() % names.size()] : "r" + std::to_string(i);
      node.parent = i == 0 || rng() % 5 == 0 ? "" : names[rng() % names.size()];
      if (rng() % 15 == 0) node.role = RegionRole::kBackground;
      names.push_back(node.name);
      h.add(std::move(node));
    }
    names.push_back("not-a-region");
    EXPECT_EQ(h.depth("not-a-region"), -1);
    check(h, names, rng, 2'000);
  }
  Hierarchy deep;
  std::vector<std::string> names;
  constexpr int kDepth = 30'000;
  for (int i = 0; i < kDepth; ++i) {
    names.push_back("r" + std::to_string(i));
    deep.add(HierarchyNode{names.back(), i ? names[static_cast<std::size_t>(i - 1)] : "", "",
                           i == 20'000 ? RegionRole::kBackground : RegionRole::kNone, "", "", "", 0});
  }
  EXPECT_EQ(deep.depth("r29999"), kDepth - 1);
  EXPECT_TRUE(deep.is_ancestor("r0", "r29999"));
  EXPECT_TRUE(deep.is_ancestor("r29998", "r29999"));
  EXPECT_FALSE(deep.is_ancestor("r29999", "r0"));
  EXPECT_FALSE(deep.is_ancestor("r5", "r5"));
  EXPECT_FALSE(deep.in_background("r19999"));
  EXPECT_TRUE(deep.in_background("r25000"));
  std::uniform_int_distribution<int> level(0, kDepth - 1);
  for (int k = 0; k < 20'000; ++k) {  // in a chain, a is above n exactly when its number is lower
    const int a = level(rng), n = level(rng);
    ASSERT_EQ(deep.is_ancestor(names[static_cast<std::size_t>(a)], names[static_cast<std::size_t>(n)]), a < n);
  }
}

// Random parent graphs (forests, with loops, self-parents and parents that are no region
// of any update) against a simulation of the passes the placement is defined by: each
// pass goes over the regions in first-seen order and places every one whose parent is
// placed (or is the top level; a parent that is no region of the update puts its
// children at the top level, with a note). Regions never placed are in or under a loop.
TEST(Hierarchy, FromTheLogPlacesParentsFirstAndSiblingsInTheLogsOrder) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const int extra = static_cast<int>(rng() % 4);  // names only ever seen as parents
    std::vector<int> parent(static_cast<std::size_t>(n));  // -1: top level; >= n: an "extra" name
    for (auto& p : parent) {
      const auto pick = rng() % 10;
      p = pick == 0 ? -1 : pick == 1 && extra ? n + static_cast<int>(rng() % static_cast<unsigned>(extra))
                                               : static_cast<int>(rng() % static_cast<unsigned>(n));
    }
    test::DatasetBuilder b;
    auto& u = b.add(1, 10.0);
    auto name = [](int i) { return "n" + std::to_string(i); };
    for (int i = 0; i < n; ++i) b.region(u, name(i), std::nullopt, 1.0);
    for (int i = 0; i < n; ++i) {
      const int p = parent[static_cast<std::size_t>(i)];
      u.regions[static_cast<std::size_t>(i)].parent = p < 0 ? kTopLevel : b.d.regions.intern(name(p));
    }
    // The simulation: depth first from the regions under the top level (or under a name
    // seen only as a parent), in the log's order; each region's children in the log's
    // order. Regions in a loop of parents, and those under them, are never reached.
    std::vector<std::string> expected;
    std::vector<std::string> expected_parent;
    std::set<int> placed;
    std::set<int> untimed_parents;
    std::function<void(int)> visit = [&](int i) {
      const int p = parent[static_cast<std::size_t>(i)];
      expected.push_back(name(i));
      expected_parent.push_back(p < 0 || p >= n ? "" : name(p));
      placed.insert(i);
      for (int c = 0; c < n; ++c)
        if (c != i && parent[static_cast<std::size_t>(c)] == i) visit(c);
    };
    for (int i = 0; i < n; ++i) {
      const int p = parent[static_cast<std::size_t>(i)];
      if (p >= n) untimed_parents.insert(p);
      if (p < 0 || p >= n) visit(i);
    }
    const std::size_t left_out = static_cast<std::size_t>(n) - std::count_if(placed.begin(), placed.end(),
                                                                             [&](int i) { return i < n; });
    Diagnostics diag;
    const auto h = hierarchy_from_log(b.d, diag);
    ASSERT_TRUE(h);
    ASSERT_EQ(h->nodes().size(), expected.size()) << "round " << round;
    for (std::size_t k = 0; k < expected.size(); ++k) {
      EXPECT_EQ(h->nodes()[k].name, expected[k]) << "round " << round << ", node " << k;
      EXPECT_EQ(h->nodes()[k].parent, expected_parent[k]) << "round " << round << ", node " << k;
    }
    EXPECT_EQ(diag.count(Severity::kWarning), left_out ? 1u : 0u) << "round " << round;
    EXPECT_EQ(diag.count(Severity::kNote), untimed_parents.empty() ? 0u : 1u) << "round " << round;
    for (const auto& d : diag.kept()) {
      if (d.severity == Severity::kWarning) {
        EXPECT_NE(d.message.find(std::to_string(left_out) + " region(s) have circular parents"), std::string::npos)
            << d.message;
        // It names the first three regions (in the log's order) that are their own ancestor.
        int named = 0;
        for (int i = 0; i < n && named < 3; ++i) {
          int j = i;
          bool own_ancestor = false;
          for (int steps = 0; steps <= n && !own_ancestor; ++steps) {
            j = parent[static_cast<std::size_t>(j)];
            if (j < 0 || j >= n) break;
            own_ancestor = j == i;
          }
          if (!own_ancestor) continue;
          ++named;
          EXPECT_NE(d.message.find("\"" + name(i) + "\""), std::string::npos) << "round " << round << ": " << d.message;
        }
        EXPECT_GT(named, 0);
      }
      if (d.severity == Severity::kNote) {
        for (const int p : untimed_parents)  // (at most 3: all named)
          EXPECT_NE(d.message.find("\"" + name(p) + "\""), std::string::npos) << d.message;
      }
    }
  }
}

class HierarchyFile : public test::TempDirTest {};

TEST_F(HierarchyFile, LargeBinaryAndUtf16FilesGetOneErrorWithoutBeingReadWhole) {
  // A 2 GB binary given by mistake was read whole (6.3 GB peak) before its first byte
  // was judged; /dev/zero without end; a UTF-16 file gave an error per line.
  const auto big = (dir_ / "big.bin").string();
  std::filesystem::resize_file(write("big.bin", ""), std::uintmax_t{64} << 20);  // sparse: zeros
  const auto utf16 = write("h16.txt", std::string("a\0\n\0 \0 \0b\0\n\0", 12));
  const auto binary = write("h.bin", std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0e\x0f\x10\x11\x12\x13\x14"
                                                 "\x15\x16\x17\x18" "abc\n", 24));
  // Compressed files: a nesting file is not read as gzip (logs are), and the message said
  // "stepprof reads plain text and gzip".
  const auto gz = write_gz("h.txt.gz", "forward\n  attention\n");
  const auto xz = write("h.txt.xz", std::string("\xFD" "7zXZ\0\0\x04\xE6\xD6\xB4\x46", 12));
  const std::pair<std::string, std::string> cases[] = {
      {big, "larger than 16 MiB"},
      {utf16, "UTF-16LE text"},
      {binary, "binary data, not text"},
      {gz, "gzip-compressed data: a nesting file is read as plain text; decompress it first (`gunzip FILE`)"},
      {xz, "xz-compressed data: a nesting file is read as plain text; decompress it first (`xz -d FILE`)"}};
  for (const auto& [path, says] : cases) {
    Diagnostics diag;
    EXPECT_FALSE(load_hierarchy(path, diag)) << path;
    ASSERT_EQ(diag.kept().size(), 1u) << path;
    EXPECT_EQ(diag.kept().front().line, 0u);
    EXPECT_NE(diag.kept().front().message.find(says), std::string::npos) << diag.kept().front().message;
  }
}
