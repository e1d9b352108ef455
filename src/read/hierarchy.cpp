#include "stepprof/hierarchy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "file_kind.hpp"
#include "json_error.hpp"
#include "stepprof/schema.hpp"

namespace stepprof {

std::string_view role_name(RegionRole r) {
  switch (r) {
    case RegionRole::kNone: return "";
    case RegionRole::kCommunication: return "communication";
    case RegionRole::kData: return "data";
    case RegionRole::kOptimizer: return "optimizer";
    case RegionRole::kBackground: return "background";
  }
  return "";
}

namespace {

// What several regions of role communication mean (find_comm_region, waiting.hpp).
constexpr std::string_view kOneCommunicationRegion =
    "the analyses take one communication region, of these the one the most ranks have (the first on a tie), and "
    "count time in the others as each rank's own work (a rank that waits in a pipeline's receive looks busy): "
    "time a rank's sends, receives and collectives inside one region to compare the ranks' own work";

// One case per schema::kRegionRoleNames entry.
std::optional<RegionRole> parse_role(std::string_view s) {
  static_assert(schema::kRegionRoleNames.size() == 5, "a role was added: map it here");
  if (s == "communication" || s == "comm") return RegionRole::kCommunication;
  if (s == "data") return RegionRole::kData;
  if (s == "optimizer") return RegionRole::kOptimizer;
  if (s == "background") return RegionRole::kBackground;
  return std::nullopt;
}

// Why a line of a nesting file is not text, with the 1-based column of the first bad
// byte: a control byte (other than tab and carriage return) or a byte that is not UTF-8
// (region names are JSON strings in the log, so UTF-8). nullopt for a line of text.
std::optional<std::pair<std::uint64_t, std::string>> not_text(std::string_view line) {
  std::size_t control = line.size();
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7F) {
      control = i;
      break;
    }
  }
  const std::size_t bad_utf8 = detail::first_invalid_utf8(line.substr(0, control)).value_or(line.size());
  if (bad_utf8 < control)
    return std::pair{bad_utf8 + 1, fmt::format("byte 0x{:02X} is not UTF-8 text: a nesting file names regions as the "
                                               "log writes them (is this the right file?)",
                                               static_cast<unsigned char>(line[bad_utf8]))};
  if (control < line.size())
    return std::pair{control + 1, fmt::format("control byte 0x{:02X}: a nesting file is text (is this the right file?)",
                                              static_cast<unsigned char>(line[control]))};
  return std::nullopt;
}

}  // namespace

void Hierarchy::add(HierarchyNode node) {
  const std::size_t at = nodes_.size();
  Link link{kNoParent, at, 0, node.role == RegionRole::kBackground};
  if (const auto p = node.parent.empty() ? index_.end() : index_.find(node.parent); p != index_.end()) {
    const Link& up = links_[p->second];
    link.parent = p->second;
    link.depth = up.depth + 1;
    link.background = link.background || up.background;
    // Jump as far as the parent's jump goes again when the parent's jump and its jump's
    // jump cover equal spans (Myers 1983); else to the parent.
    const Link& j = links_[up.jump];
    link.jump = up.depth - j.depth == j.depth - links_[j.jump].depth ? j.jump : p->second;
  }
  index_.try_emplace(node.name, at);
  children_[node.parent].push_back(at);
  nodes_.push_back(std::move(node));
  links_.push_back(link);
}

const HierarchyNode* Hierarchy::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

std::vector<const HierarchyNode*> Hierarchy::children(std::string_view parent) const {
  std::vector<const HierarchyNode*> out;
  if (const auto it = children_.find(parent); it != children_.end()) {
    out.reserve(it->second.size());
    for (const std::size_t i : it->second) out.push_back(&nodes_[i]);
  }
  return out;
}

std::size_t Hierarchy::ancestor_at_depth(std::size_t node, int depth) const {
  while (links_[node].depth > depth)
    node = links_[links_[node].jump].depth >= depth ? links_[node].jump : links_[node].parent;
  return node;
}

bool Hierarchy::is_ancestor(std::string_view ancestor, std::string_view name) const {
  const auto a = index_.find(ancestor);
  const auto n = index_.find(name);
  if (a == index_.end() || n == index_.end()) return false;
  const int d = links_[a->second].depth;
  return links_[n->second].depth > d && ancestor_at_depth(n->second, d) == a->second;
}

bool Hierarchy::in_background(std::string_view name) const {
  const auto it = index_.find(name);
  return it != index_.end() && links_[it->second].background;
}

int Hierarchy::depth(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? -1 : links_[it->second].depth;
}

std::vector<std::pair<std::string, std::vector<const HierarchyNode*>>> Hierarchy::alternatives() const {
  std::vector<std::pair<std::string, std::vector<const HierarchyNode*>>> out;
  for (const auto& n : nodes_) {
    if (n.alt_group.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == n.alt_group; });
    if (it == out.end()) {
      out.emplace_back(n.alt_group, std::vector<const HierarchyNode*>{});
      it = std::prev(out.end());
    }
    it->second.push_back(&n);
  }
  return out;
}

namespace {
// Whether `line` (from its first non-space) starts a JSON document: it parses as one, or
// is a pretty-printed document's first line ("{" or "["). A region named "[fwd]" does not.
bool json_start(std::string_view line) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
  return line == "{" || line == "[" || nlohmann::json::accept(line);
}
}  // namespace

std::optional<Hierarchy> parse_hierarchy(std::string_view text, const std::string& file_name, Diagnostics& diag) {
  Hierarchy h;
  h.source = file_name;
  bool ok = true;
  auto error = [&](std::uint64_t line, std::uint64_t col, std::string msg) {
    diag.report({Severity::kError, Problem::kHierarchy, file_name, line, col, std::move(msg)});
    ok = false;
  };
  // Open ancestors: (indent, name).
  std::vector<std::pair<std::size_t, std::string>> stack;
  bool first_indented = false;  // the first region was indented (an error said so)
  std::uint64_t line_no = 0;
  // A UTF-8 byte-order mark (Notepad writes one) would be part of the first region's name.
  std::size_t pos = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (auto bad = not_text(line)) {  // (a binary file, or the wrong one: its bytes are not echoed)
      error(line_no, bad->first, bad->second);
      continue;
    }
    auto is_space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; };
    const std::size_t content = std::find_if_not(line.begin(), line.end(), is_space) - line.begin();
    if (content == line.size() || line[content] == '#') continue;  // blank, or a comment
    // A step log or a trace given as the nesting: one error, not one per line (a log's
    // every line was "expected an attribute key=value": 2,981 errors).
    if (h.nodes().empty() && ok && (line[content] == '{' || line[content] == '[') && json_start(line.substr(content))) {
      error(line_no, content + 1,
            "a JSON line (a step log or a profiler trace?), not a nesting file: it lists region names one per "
            "line, indented by nesting (docs/hierarchy-format.md); give logs and traces as LOG arguments");
      return std::nullopt;
    }
    std::size_t indent = 0;
    while (indent < line.size() && line[indent] == ' ') ++indent;
    if (indent < line.size() && line[indent] == '\t') {
      error(line_no, indent + 1, "indent with spaces, not tabs");
      continue;
    }

    // Tokens: the name, then attributes key=value. A name with spaces or a leading '#'
    // (profiler names such as "## forward ##") is written in double quotes, with \" and
    // \\ inside; '#' at the start of a token starts a comment ("a#b" is a name).
    std::vector<std::pair<std::size_t, std::string>> tokens;  // (column, token)
    bool bad_quote = false;
    for (std::size_t i = indent; i < line.size();) {
      while (i < line.size() && is_space(line[i])) ++i;
      if (i >= line.size() || line[i] == '#') break;
      std::size_t j = i;
      std::string token;
      if (tokens.empty() && line[i] == '"') {
        for (j = i + 1; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size() && (line[j + 1] == '"' || line[j + 1] == '\\')) ++j;
          token += line[j];
        }
        if (j >= line.size()) {
          error(line_no, i + 1, "a quoted region name is not closed (a closing \" is missing)");
          bad_quote = true;
          break;
        }
        ++j;  // (past the closing quote)
        if (j < line.size() && !is_space(line[j])) {
          error(line_no, j + 1, "expected a space after the quoted region name");
          bad_quote = true;
          break;
        }
      } else {
        while (j < line.size() && !is_space(line[j])) ++j;
        token = std::string(line.substr(i, j - i));
      }
      tokens.emplace_back(i + 1, std::move(token));
      i = j;
    }
    if (bad_quote) continue;
    HierarchyNode node;
    node.name = tokens.front().second;
    node.line = line_no;
    const bool quoted = line[tokens.front().first - 1] == '"';
    if (node.name.empty() || (!quoted && node.name.find('=') != std::string::npos)) {
      error(line_no, tokens.front().first, fmt::format("expected a region name, found \"{}\"", node.name));
      continue;
    }
    std::vector<std::pair<std::string_view, std::size_t>> keys;  // the line's attributes: (key, column)
    for (std::size_t t = 1; t < tokens.size(); ++t) {
      const std::size_t col = tokens[t].first;
      const std::string_view tok = tokens[t].second;
      const auto eq = tok.find('=');
      if (eq == std::string_view::npos || eq == 0 || eq + 1 == tok.size()) {
        error(line_no, col,
              fmt::format("expected an attribute key=value (alt, role, samples, frames, microbatches), found \"{}\"",
                          tok));
        continue;
      }
      const auto key = tok.substr(0, eq);
      const auto value = tok.substr(eq + 1);
      if (const auto seen = std::find_if(keys.begin(), keys.end(), [&](const auto& k) { return k.first == key; });
          seen != keys.end()) {
        error(line_no, col, fmt::format("attribute \"{}\" given twice (first at column {}); give it once", key,
                                        seen->second));
        continue;
      }
      keys.emplace_back(key, col);
      if (key == "alt") node.alt_group = std::string(value);
      else if (key == "samples") node.samples_counter = std::string(value);
      else if (key == "frames") node.frames_counter = std::string(value);
      else if (key == "microbatches") node.microbatches_counter = std::string(value);
      else if (key == "role") {
        if (auto r = parse_role(value)) node.role = *r;
        else error(line_no, col + eq + 1,
                   fmt::format("unknown role \"{}\" (expected communication, data, optimizer or background)", value));
      } else {
        error(line_no, col,
              fmt::format("unknown attribute \"{}\" (expected alt, role, samples, frames or microbatches)", key));
      }
    }
    while (!stack.empty() && stack.back().first >= indent) {
      if (stack.back().first > indent && (stack.size() < 2 || stack[stack.size() - 2].first < indent)) {
        // (After an indented first region every later top-level line would be one more
        // error: the first says it.)
        if (!first_indented) error(line_no, indent + 1, "indentation does not match any enclosing level");
        break;
      }
      stack.pop_back();
    }
    if (stack.empty() && indent > 0 && h.nodes().empty()) {
      error(line_no, 1, "the first region must not be indented");
      first_indented = true;
    }
    node.parent = stack.empty() ? std::string() : stack.back().second;
    if (const auto* prev = h.find(node.name)) {
      error(line_no, indent + 1,
            fmt::format("region \"{}\" appears twice (first at line {}); each region has one parent", node.name,
                        prev->line));
      continue;
    }
    stack.emplace_back(indent, node.name);
    h.add(std::move(node));
  }
  if (ok && h.nodes().empty()) error(0, 0, "the hierarchy file names no regions");
  if (!ok) return std::nullopt;
  // The waiting and cross-rank analyses take one communication region: the first of
  // these that occurs in the log.
  const HierarchyNode* first_comm = nullptr;
  for (const auto& n : h.nodes()) {
    if (n.role != RegionRole::kCommunication) continue;
    if (!first_comm) {
      first_comm = &n;
      continue;
    }
    diag.report({Severity::kWarning, Problem::kHierarchy, file_name, n.line, 0,
                 fmt::format("\"{}\" has role=communication as \"{}\" (line {}) has: {}", n.name, first_comm->name,
                             first_comm->line, kOneCommunicationRegion)});
  }
  return h;
}

std::optional<Hierarchy> load_hierarchy(const std::string& path, Diagnostics& diag) {
  if (path == "-" && !std::filesystem::exists(path)) {
    diag.report({Severity::kError, Problem::kUnreadable, path, 0, 0,
                 "the hierarchy file is not read from stdin (- is for logs): give its path"});
    return std::nullopt;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    diag.report({Severity::kError, Problem::kUnreadable, path, 0, 0,
                 "cannot read the hierarchy file: it is a directory"});
    return std::nullopt;
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diag.report({Severity::kError, Problem::kUnreadable, path, 0, 0,
                 fmt::format("cannot read the hierarchy file{}", errno ? ": " + std::string(std::strerror(errno)) : "")});
    return std::nullopt;
  }
  // A nesting file lists a job's regions: kilobytes. Reading a large file or a device
  // whole (a binary given by mistake, /dev/zero) took gigabytes before its first byte
  // was judged.
  constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxBytes && in.read(chunk, sizeof chunk).gcount() > 0)
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxBytes) {
    diag.report({Severity::kError, Problem::kHierarchy, path, 0, 0,
                 "larger than 16 MiB: a nesting file lists a job's regions, one per line (is this the right file?)"});
    return std::nullopt;
  }
  if (in.bad()) {
    diag.report({Severity::kError, Problem::kUnreadable, path, 0, 0, "cannot read the hierarchy file"});
    return std::nullopt;
  }
  // Compressed data, UTF-16 and binary files: one error, not one per line.
  if (auto format = detail::unreadable_format(std::string_view(text).substr(0, std::size_t{1} << 16), "a nesting file",
                                              /*reads_gzip=*/false);
      !format.empty()) {
    diag.report({Severity::kError, Problem::kHierarchy, path, 0, 0, format});
    return std::nullopt;
  }
  return parse_hierarchy(text, path, diag);
}

std::optional<Hierarchy> hierarchy_from_log(const Dataset& data, Diagnostics& diag) {
  // region id -> parent id (first seen), plus where it was first seen (one pass over
  // every region of every update: indexed by id, no tree lookups).
  struct Parent {
    bool known = false;
    NameTable::Id parent = 0;
    SourceLocation where;
    std::optional<NameTable::Id> reported;  // the other parent last warned about
  };
  std::vector<Parent> parent_of(data.regions.size());
  std::vector<NameTable::Id> order;
  std::vector<char> occurs(data.regions.size(), 0);  // 1: a region of some update
  for (const auto& rank : data.ranks)
    for (const auto& u : rank.updates)
      for (const auto& r : u.regions) {
        occurs[r.region] = 1;
        // (A region with an empty name cannot be placed: "" is the top level.)
        if (!r.parent || data.regions.name(r.region).empty()) continue;
        Parent& p = parent_of[r.region];
        if (!p.known) {
          p = {true, *r.parent, u.source, std::nullopt};
          order.push_back(r.region);
        } else if (p.parent != *r.parent && p.reported != *r.parent) {
          auto name = [&](NameTable::Id id) {
            return id == kTopLevel ? std::string("(top level)") : std::string(data.regions.name(id));
          };
          diag.report({Severity::kWarning, Problem::kHierarchy, data.files[u.source.file], u.source.line, 0,
                       fmt::format("region \"{}\" has parent \"{}\" here but \"{}\" at {}:{}; the first is used",
                                   data.regions.name(r.region), name(*r.parent), name(p.parent),
                                   data.files[p.where.file], p.where.line)});
          p.reported = *r.parent;  // the first parent stays; warn again only when the other one changes
        }
      }
  if (order.empty()) return std::nullopt;

  // Config-level annotations: alternatives and roles.
  std::map<std::string, std::string> alt, role;
  for (const auto& rank : data.ranks) {
    if (!rank.config) continue;
    auto read_map = [&](std::string_view key, std::map<std::string, std::string>& out) {
      const RawField* f = rank.config->find(key);
      if (!f) return;
      auto j = nlohmann::json::parse(f->json, nullptr, false);
      if (!j.is_object()) return;
      for (auto& [k, v] : j.items())
        if (v.is_string()) out.emplace(k, v.get<std::string>());
    };
    read_map(schema::kRegionAlternatives, alt);
    read_map(schema::kRegionRoles, role);
  }

  Hierarchy h;
  h.source = std::string(kNestingFromLog);
  // Parents before children, and siblings in the order of their first appearance (the
  // order the trace, the region table and the charts lay them out in: docs/exports.md).
  // The regions are walked depth first from the top, each parent's children in first-seen
  // order; the walk needs no recursion (a crafted chain 30,000 deep). A region whose chain
  // of parents loops is left out, with the regions under it. (Repeated passes over the
  // first-seen order put a child listed after its parent ahead of its siblings listed
  // before the parent: a gradient-accumulation step's optimizer before its backward.)
  constexpr std::uint32_t kNotInOrder = UINT32_MAX;
  std::vector<std::uint32_t> index_of(data.regions.size(), kNotInOrder);
  for (std::size_t i = 0; i < order.size(); ++i) index_of[order[i]] = static_cast<std::uint32_t>(i);
  enum class State : std::uint8_t { kNew, kOnPath, kPlaced, kInLoop };
  std::vector<State> state(order.size(), State::kNew);
  std::vector<std::uint32_t> path;  // a chain of unplaced regions, child first
  for (std::size_t start = 0; start < order.size(); ++start) {
    path.clear();
    // Walk up until the top level or a parent with no recorded parent (placeable), a
    // placed region (placeable), a region in a loop, or the path itself (a loop).
    std::uint32_t i = static_cast<std::uint32_t>(start);
    bool placeable = true;
    while (true) {
      if (state[i] != State::kNew) {
        placeable = state[i] == State::kPlaced;  // kOnPath: the path closed on itself
        break;
      }
      state[i] = State::kOnPath;
      path.push_back(i);
      const auto parent = parent_of[order[i]].parent;
      if (parent == kTopLevel || index_of[parent] == kNotInOrder) break;
      i = index_of[parent];
    }
    for (const std::uint32_t n : path) state[n] = placeable ? State::kPlaced : State::kInLoop;
  }
  // Each placed region under its placed parent (first-seen order), or a root: under the
  // top level or a parent with no recorded parent of its own.
  std::vector<std::vector<std::uint32_t>> children(order.size());
  std::vector<std::uint32_t> roots;
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    if (state[i] != State::kPlaced) continue;
    const auto parent = parent_of[order[i]].parent;
    const std::uint32_t p = parent == kTopLevel ? kNotInOrder : index_of[parent];
    (p == kNotInOrder ? roots : children[p]).push_back(i);
  }
  std::vector<std::uint32_t> placement;
  std::vector<std::uint32_t> stack;
  for (const std::uint32_t root : roots) {
    stack.push_back(root);
    while (!stack.empty()) {
      const std::uint32_t n = stack.back();
      stack.pop_back();
      placement.push_back(n);
      stack.insert(stack.end(), children[n].rbegin(), children[n].rend());
    }
  }
  // A parent that is a region of no update (named in `parents` only: a region open
  // across every update boundary, which is written when it ends, or one the log left
  // out) has no time to nest in: its children are placed at the top level, so that the
  // time outside them counts as outside every region.
  std::vector<NameTable::Id> untimed;  // such parents, in order of their first child
  const Parent* first_untimed = nullptr;
  for (const std::uint32_t i : placement) {
    const auto parent = parent_of[order[i]].parent;
    const bool untimed_parent = parent != kTopLevel && index_of[parent] == kNotInOrder && occurs[parent] != 1 &&
                                !data.regions.name(parent).empty();
    if (untimed_parent) {
      if (!first_untimed) first_untimed = &parent_of[order[i]];
      if (occurs[parent] == 0) untimed.push_back(parent), occurs[parent] = 2;  // (2: listed, still untimed)
    }
    std::string pname =
        parent == kTopLevel || untimed_parent ? std::string() : std::string(data.regions.name(parent));
    if (!pname.empty() && !h.find(pname))  // a parent with no recorded parent of its own: at the top level
      h.add(HierarchyNode{pname, "", "", RegionRole::kNone, "", "", "", 0});
    HierarchyNode node;
    node.name = std::string(data.regions.name(order[i]));
    node.parent = pname;
    if (auto it = alt.find(node.name); it != alt.end()) node.alt_group = it->second;
    if (auto it = role.find(node.name); it != role.end())
      if (auto r = parse_role(it->second)) node.role = *r;
    if (!h.find(node.name)) h.add(std::move(node));
  }
  const std::size_t remaining = order.size() - placement.size();
  if (first_untimed) {
    std::string names;
    for (std::size_t k = 0; k < untimed.size() && k < 3; ++k)
      names += fmt::format("{}\"{}\"", k ? ", " : "", data.regions.name(untimed[k]));
    if (untimed.size() > 3) names += fmt::format(" and {} more", untimed.size() - 3);
    diag.report({Severity::kNote, Problem::kHierarchy, data.files[first_untimed->where.file], first_untimed->where.line,
                 0,
                 fmt::format("{} {} a parent in the log's `parents` but no region of any update (not timed: e.g. a "
                             "region open across every update boundary, written only when it ends); the regions "
                             "under {} are placed at the top level",
                             names, untimed.size() == 1 ? "is" : "are", untimed.size() == 1 ? "it" : "them")});
  }
  if (remaining > 0) {
    // Named: the first few regions on a loop itself (an ancestor of itself), in the log's
    // order, and where the first one's parent was read. Each region is walked once: a
    // walk ends where it meets an earlier one, or goes round a loop, which it marks.
    std::vector<std::uint32_t> walked(order.size(), 0);  // 1 + the start of the walk that passed it
    std::vector<char> on_loop(order.size(), 0);
    auto up = [&](std::uint32_t j) -> std::optional<std::uint32_t> {
      const auto parent = parent_of[order[j]].parent;
      if (parent == kTopLevel || index_of[parent] == kNotInOrder) return std::nullopt;
      return index_of[parent];
    };
    for (std::uint32_t i = 0; i < order.size(); ++i) {
      if (state[i] != State::kInLoop || walked[i]) continue;
      for (std::optional<std::uint32_t> j = i; j; j = up(*j)) {
        if (walked[*j] == i + 1) {  // round a loop: mark it
          std::uint32_t k = *j;
          do {
            on_loop[k] = 1;
            k = *up(k);
          } while (k != *j);
          break;
        }
        if (walked[*j]) break;
        walked[*j] = i + 1;
      }
    }
    std::string names;
    std::size_t named = 0;
    const Parent* first = nullptr;
    for (std::uint32_t i = 0; i < order.size() && named < 3; ++i) {
      if (!on_loop[i]) continue;
      if (!first) first = &parent_of[order[i]];
      names += fmt::format("{}\"{}\"", named++ ? ", " : "", data.regions.name(order[i]));
    }
    diag.report({Severity::kWarning, Problem::kHierarchy,
                 first ? data.files[first->where.file] : (data.files.empty() ? "" : data.files.front()),
                 first ? first->where.line : 0, 0,
                 fmt::format("{} region(s) have circular parents in the log (each an ancestor of itself: {}{}), or "
                             "are under such a region, and are left out of the nesting",
                             remaining, names, named == 3 ? ", ..." : "")});
  }
  // Several communication regions from the config's roles: as for a nesting file.
  std::vector<std::string> comm;
  for (const auto& n : h.nodes())
    if (n.role == RegionRole::kCommunication) comm.push_back(fmt::format("\"{}\"", n.name));
  if (comm.size() > 1) {
    const RankLog* with = nullptr;
    for (const auto& rank : data.ranks)
      if (!with && rank.config && rank.config->find(schema::kRegionRoles)) with = &rank;
    diag.report({Severity::kWarning, Problem::kHierarchy, data.files[with->config->source.file],
                 with->config->source.line, 0,
                 fmt::format("{} regions have role communication in region_roles ({}): {}", comm.size(),
                             fmt::join(comm, ", "), kOneCommunicationRegion)});
  }
  return h;
}

}  // namespace stepprof
