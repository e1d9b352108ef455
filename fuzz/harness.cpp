#include "harness.hpp"

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "record_parser.hpp"
#include "stepprof/analysis/report.hpp"
#include "stepprof/hierarchy.hpp"
#include "stepprof/reader.hpp"
#include "stepprof/render/render.hpp"

namespace stepprof::fuzz {
namespace {

bool has_nonblank_line(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") != std::string_view::npos;
}

// An in-memory file with a path the reader can open (memfd: no disk, no clean-up).
class MemFile {
 public:
  explicit MemFile(std::string_view content) {
    fd_ = ::memfd_create("stepprof-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("memfd_create failed");
    for (std::size_t done = 0; done < content.size();) {
      const auto n = ::write(fd_, content.data() + done, content.size() - done);
      if (n <= 0) throw std::runtime_error("write to memfd failed");
      done += static_cast<std::size_t>(n);
    }
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  [[nodiscard]] std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

std::string gzip(std::string_view text) {
  uLongf size = compressBound(static_cast<uLong>(text.size())) + 32;
  std::string out(size, '\0');
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // gzip wrapper
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Everything downstream of the reader, as `stepprof report` runs it.
void analyze(const Dataset& data, const Hierarchy* given, Diagnostics& diag) {
  std::optional<Hierarchy> from_log;
  if (!given && data.update_count() > 0) from_log = hierarchy_from_log(data, diag);
  const Hierarchy* h = given ? given : (from_log ? &*from_log : nullptr);
  if (data.update_count() == 0) return;
  const Report report = build_report({data, h});
  (void)render_json(report, diag);
  (void)render_text(report, diag);
  (void)render_markdown(report, diag);
}

}  // namespace

Outcome record(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  text.append(detail::kParsePadding, '\0');
  NameTable regions, counters;
  detail::RecordParser parser(regions, counters);
  std::vector<RawField> config;
  UpdateRecord u;
  std::string unknown;
  detail::RecordError error;
  Outcome o;
  o.nonblank_input = has_nonblank_line(std::string_view(text.data(), size));
  // Twice: the second parse goes through the name caches the first one filled.
  for (int i = 0; i < 2; ++i) {
    const auto kind = parser.parse(std::string_view(text.data(), size), config, u, unknown, error);
    if (kind == detail::RecordKind::kUpdate) o.updates = 1;
    if (kind == detail::RecordKind::kError) o.diagnostics = 1;
  }
  if (o.updates) (void)make_config(config);
  // A parser that does not keep sample indices (as `stepprof report` reads) skips a
  // plain index array unread: it must reach the same verdict, word for word.
  detail::RecordParser skipping(regions, counters);
  skipping.set_keep_sample_indices(false);
  detail::RecordError skipped_error;
  UpdateRecord skipped;
  const auto kind = parser.parse(std::string_view(text.data(), size), config, u, unknown, error);
  const auto skipped_kind = skipping.parse(std::string_view(text.data(), size), config, skipped, unknown, skipped_error);
  if (kind != skipped_kind ||
      (kind == detail::RecordKind::kError &&
       (error.problem != skipped_error.problem || error.column != skipped_error.column ||
        error.message != skipped_error.message || error.cause != skipped_error.cause)))
    throw std::logic_error("the record parser's verdict depends on whether sample indices are kept");
  return o;
}

Outcome log(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return {};
  const std::uint8_t mode = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  Outcome o;
  o.nonblank_input = has_nonblank_line(body);
  std::vector<std::string> contents;
  switch (mode & 7) {
    case 1: {  // a markdown table
      std::string table = "| record |\n| --- |\n";
      std::size_t pos = 0;
      while (pos <= body.size()) {
        const auto nl = std::min(body.find('\n', pos), body.size());
        table += "| ";
        table.append(body.substr(pos, nl - pos));
        table += " |\n";
        pos = nl + 1;
      }
      contents.push_back(table);
      break;
    }
    case 2:
      contents.push_back(gzip(body));
      break;
    case 3: {  // gzip cut short, where the data says
      const std::string z = gzip(body);
      contents.push_back(z.substr(0, z.size() * (1 + (mode >> 5)) / 9));
      break;
    }
    case 4: {  // three files, split at newlines
      std::size_t a = body.find('\n', body.size() / 3), b = body.find('\n', 2 * body.size() / 3);
      a = a == std::string_view::npos ? body.size() : a + 1;
      b = b == std::string_view::npos || b < a ? body.size() : b + 1;
      contents = {std::string(body.substr(0, a)), std::string(body.substr(a, b - a)), std::string(body.substr(b))};
      break;
    }
    default:
      contents.push_back(std::string(body));
  }
  std::vector<std::unique_ptr<MemFile>> files;
  std::vector<std::string> paths;
  for (const auto& c : contents) {
    files.push_back(std::make_unique<MemFile>(c));
    paths.push_back(files.back()->path());
  }
  Diagnostics diag((mode & 8) != 0);
  ReadOptions opt;
  opt.threads = contents.size() > 1 ? 2 : 1;  // several files: merged from two readers
  if (mode & 16) opt.steps = StepRange{2, 40};
  const Dataset dataset = read_logs(paths, opt, diag);
  o.updates = dataset.update_count();
  if (!diag.should_stop()) analyze(dataset, nullptr, diag);
  o.diagnostics = diag.total();
  return o;
}

Outcome kineto(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return {};
  const std::uint8_t mode = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  Outcome o;
  o.nonblank_input = has_nonblank_line(body);
  std::string content;
  ReadOptions opt;
  switch (mode & 3) {
    case 1:
      content = gzip(body);
      break;
    case 2: {  // gzip cut short, where the data says
      const std::string z = gzip(body);
      content = z.substr(0, z.size() * (1 + (mode >> 5)) / 9);
      break;
    }
    case 3:
      content = std::string(body);
      opt.traces_only = true;
      opt.kineto.rank = 0;
      opt.kineto.world_size = 2;
      break;
    default:
      content = std::string(body);
  }
  const MemFile file(content);
  Diagnostics diag;
  const Dataset dataset = read_logs({file.path()}, opt, diag);
  o.updates = dataset.update_count();
  analyze(dataset, nullptr, diag);
  o.diagnostics = diag.total();
  return o;
}

Outcome hierarchy(const std::uint8_t* data, std::size_t size) {
  static const Dataset real = [] {
    Diagnostics d;
    return read_logs({std::string(STEPPROF_SOURCE_DIR) + "/examples/qwen-vggt/rank1.jsonl"}, {}, d);
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Diagnostics diag;
  Outcome o;
  o.nonblank_input = has_nonblank_line(text);
  const auto h = parse_hierarchy(text, "fuzz.txt", diag);
  if (h) {
    for (const auto& node : h->nodes()) {
      (void)h->depth(node.name);
      (void)h->is_ancestor(node.parent, node.name);
      (void)h->children(node.name);
    }
    (void)h->alternatives();
    analyze(real, &*h, diag);
  }
  o.updates = real.update_count();
  o.diagnostics = diag.total();
  return o;
}

}  // namespace stepprof::fuzz
