// The process's recorder: open() writes the config record; end_update() collects what
// every thread recorded since the previous update (region totals, device times read
// back from events, counters, histogram, shapes, sample indices, errors) into one
// UpdateRecord and writes it with the log model's serializer (record_writer.hpp).
#include <pthread.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "internal.hpp"
#include "stepprof/device_timer.hpp"
#include "stepprof/diagnostics.hpp"
#include "stepprof/line_sink.hpp"
#include "stepprof/record.hpp"
#include "stepprof/record_writer.hpp"
#include "stepprof/schema.hpp"

namespace stepprof::detail {
namespace {

// Why the log at `path` could not be opened (open_file_sink's error). open_file_sink
// makes a missing directory as `mkdir -p` would; when the directory is still missing,
// the error is why it could not be made, and the text says so (a bare "Permission
// denied" read as if the file itself were unwritable).
std::string open_error_text(const std::string& path, int err) {
  if (err == kErrFileLocked)
    return "another process is recording to this file (it holds the file's lock); the file was left as it is. Give "
           "each process its own path (e.g. logs/rank{rank}.jsonl), and open the recorder inside the training "
           "function, not at module level, where spawned workers (DataLoader with the spawn or forkserver start "
           "method) run it again";
  if (err == kErrFifoNoReader)
    return "it is a FIFO (named pipe) that no process reads: start its reader before the recorder opens it";
  const auto slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 && errno == ENOENT)
      return "its directory " + printable(dir) + " does not exist and could not be created: " + std::strerror(err);
  }
  return std::strerror(err);
}

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "write_failed 2, bad_argument 1": the kinds counted in `counts`, with `total` their sum.
std::string error_kinds_text(const std::array<std::uint64_t, kErrorKinds>& counts, std::uint64_t& total) {
  std::string kinds;
  for (std::size_t k = 0; k < kErrorKinds; ++k) {
    if (!counts[k]) continue;
    total += counts[k];
    kinds += (kinds.empty() ? "" : ", ") + std::string(error_name(static_cast<ErrorKind>(k))) + " " +
             std::to_string(counts[k]);
  }
  return kinds;
}

// Largest device_events_per_thread and device_threads (as the C ABI's options_json).
constexpr std::uint32_t kMaxDeviceOption = std::uint32_t{1} << 20;

std::uint32_t round_up_pow2(std::uint32_t v) {
  std::uint32_t p = 8;
  while (p < v && p < (1u << 24)) p <<= 1;
  return p;
}

// Per-update data other than regions and counters (histogram, shapes, indices, padding,
// per-micro-batch detail; a micro-batch's path is a registered region id).
struct UpdateData {
  std::map<std::int64_t, std::int64_t> histogram;  // frames -> samples
  std::vector<InputShape> shapes;
  std::vector<std::int64_t> indices;
  std::optional<double> padding;
  std::vector<MicroBatch> microbatches;
  std::size_t bytes = 0;  // what the above hold, as Options::max_update_data_bytes counts it
};

class Core {
 public:
  std::mutex mu;  // open, close, end_update, flush, set_device_stream: one at a time
  std::atomic<bool> is_open{false};
  std::mutex data_mu;  // `data`, `data_limit`
  UpdateData data;
  std::size_t data_limit = 0;  // Options::max_update_data_bytes of the open recorder

  Status open(const Options& o, std::string* message);
  Status end_update(std::int64_t step);
  Status begin_update();
  Status flush();
  Status close(std::string* message);
  Status set_device_stream(void* stream);
  Status error_counts(std::vector<std::pair<std::string, std::int64_t>>& out);
  Status info(RecorderInfo& out);
  /// In the child of fork() (only the forking thread runs, every lock is free): the log,
  /// its device timer and the session belong to the parent, so the child's copy of the
  /// recorder is closed without writing, flushing or closing anything.
  void forget_after_fork() noexcept;
  /// At process exit (exit(), return from main) with the recorder still open:
  /// close() was not called, so what was recorded after the last end_update() and the
  /// errors counted since the last record written are in no record. Says so on stderr
  /// (with print_warnings), as close() would. Touches neither the log nor the device (the
  /// CUDA driver may be gone by then), and gives up if another thread holds the lock.
  void say_at_exit() noexcept;
  /// mu held: in a fork() child of a process that recorded (with print_warnings), the
  /// first per-update `call` (end_update) says once on stderr that it records nothing
  /// (a launcher that opened the recorder and then forked its ranks lost every record
  /// without a word: a helper).
  void say_forked_child(const char* call) noexcept;

 private:
  Status enable_device_here(void* stream);  // mu held
  // mu held. With `busy` given (at exit), a lock another thread holds is not waited for:
  // *busy is set and nothing is done (a thread stopped inside the recorder by exit()
  // from a signal handler would hold it for good).
  void collect_errors(bool* busy = nullptr);
  bool recorded_since_last_update(bool* busy = nullptr);
  bool write_line(std::string_view line);    // mu held
  // mu held: writes line_buf_; `written`, when given, gets the bytes written (also on failure).
  bool write_buffer(std::size_t* written = nullptr);
  void drain_device(ThreadStateFull* s);     // mu and the thread registry's lock held
  // mu held: at an update boundary, this thread's regions ended by other threads are
  // closed and the device-timing streams synchronized (sync_at_update).
  void settle_boundary();
  // mu held, before a record is put together: when the log file was deleted while
  // recorded to (a /tmp cleaner, a removed run directory), it is made again at its path,
  // and the record of `step` goes there after the config record; what was written before
  // is in no file (counted as log_deleted, in this record and at close()).
  void check_log_file(std::int64_t step);
  bool log_fd_taken(const char* at, std::int64_t step = -1, std::optional<LineSink::State> state = std::nullopt);
  // mu held, after settle_boundary(): what every thread recorded since the last boundary,
  // into `u` (regions, counters, histogram, shapes, indices, padding, micro-batches); the
  // next update starts empty. Region times use ns_per_tick_. Returns the boundary's time
  // [steady ns], read under the thread list's lock right after every thread's counts: a
  // call counted here ended before it, however long this thread waited for the lock or
  // was descheduled before (another thread's work done meanwhile had gone into an update
  // whose wall_ms ended before it: 12 ms of regions in a 0.06 ms update).
  std::int64_t take_update_data(UpdateRecord& u);
  void touch(std::uint32_t region);
  std::string run_id_for(const Options& o) const;

  // Forked (or forked from a fork) while a recorder was open, with print_warnings: its
  // first per-update call says so (say_forked_child), once in each such process
  // (said_in_); opener_ is the process that opened that recorder.
  bool forked_ = false;
  long opener_ = 0, said_in_ = 0;

  // Session (valid while open).
  std::uint64_t session_ = 0;
  Options opts_;
  std::string path_, run_id_, device_status_;
  // path_ as messages show it: control characters and bytes that are no UTF-8 as \xNN
  // (printable()), so that a path cannot forge a line of stderr or move the cursor.
  std::string shown_path_;
  std::shared_ptr<LineSink> sink_;
  int open_errno_ = 0, write_errno_ = 0;
  bool partial_line_ = false;
  // The line being written, newline included; it keeps its capacity from one record to
  // the next, up to kKeptLineBytes (a record of 1,024 regions is about 100 KB:
  // allocating it anew each time cost page faults on every update).
  static constexpr std::size_t kKeptLineBytes = std::size_t{1} << 20;
  std::string line_buf_;
  // The config record, newline included, while its write at open() failed (a full disk):
  // written in front of the next update record, so that the log still starts with it.
  std::string pending_config_;
  // The write_failed counted for it: taken back once it is out (no record was lost).
  std::uint64_t pending_config_failures_ = 0;
  std::int64_t records_written_ = 0;
  std::int64_t records_deleted_ = 0;  // written to a log file that was then deleted (check_log_file)
  bool remake_failed_ = false;        // ... and the file could not be made again there
  bool deleted_for_good_ = false;      // the path leads to the deleted file itself: not checked again
  bool fd_taken_ = false;              // the log's descriptor now leads to another file of the program's
  std::string config_line_;            // the config record, as written at open()
  std::shared_ptr<DeviceTimer> timer_;  // null: no device timing
  std::atomic<std::uint8_t>* busy_ = nullptr;
  std::uint32_t events_per_thread_ = 0, ranges_used_ = 0, max_ranges_ = 0;
  std::vector<void*> streams_;  // distinct streams of device-timing threads
  ClockPair anchor_{};
  double ns_per_tick_ = 1.0;
  std::int64_t update_start_ns_ = 0;
  std::optional<std::int64_t> last_step_;  ///< highest step given to end_update in this session
  /// Regions of role "background" (Options::region_roles or the config's region_roles):
  /// another thread's, which may end after the last end_update without losing the job's data.
  std::vector<std::string> background_;
  // Errors: kinds' totals at open (global counters), since open, and not yet written.
  std::array<std::uint64_t, kErrorKinds> global_base_{}, total_{}, unreported_{};
  bool closed_ = false;  ///< close() ended the last session: total_ holds its final counts

  // Kept for the process's lifetime: a thread still inside a region when close() ran
  // may touch the previous session's timer or event flags (see docs/recorder.md).
  std::vector<std::shared_ptr<DeviceTimer>> old_timers_;
  // The closed session's timer, whose events close() leaves alive: a thread timing
  // regions on a stream may be between its check of `device` and its cuEventRecord as
  // close() runs, and destroyed events were handed to the driver (found by a helper with
  // a fake driver). The next open() destroys them (release()); at exit the driver does.
  std::shared_ptr<DeviceTimer> retired_timer_;
  std::vector<std::unique_ptr<std::atomic<std::uint8_t>[]>> busy_arrays_;
  // In a child of fork(): the parent's sinks, kept open and untouched (forget_after_fork).
  std::vector<std::shared_ptr<LineSink>> parent_sinks_;

  // Scratch for end_update, indexed by region id (reset after each update).
  std::vector<double> host_ns_ = std::vector<double>(kMaxRegions + 1);
  std::vector<std::uint64_t> calls_ = std::vector<std::uint64_t>(kMaxRegions + 1);
  std::vector<std::uint32_t> parent_ = std::vector<std::uint32_t>(kMaxRegions + 1, kUnsetId);
  std::vector<double> device_ms_ = std::vector<double>(kMaxRegions + 1);
  std::vector<std::uint32_t> device_n_ = std::vector<std::uint32_t>(kMaxRegions + 1);
  std::vector<std::uint8_t> touched_ = std::vector<std::uint8_t>(kMaxRegions + 1);
  std::vector<std::uint32_t> touched_ids_;
};

// fork() copies the recorder's memory with only the forking thread running: a lock that
// another thread held at that moment would stay held in the child forever. So every lock
// of the recorder is taken before the fork (in the order the recorder nests them: the
// recorder's, then the thread registry's, the per-update data's, the names') and released
// after it in both processes; the child then drops its copy of the session.
void lock_for_fork() noexcept;
void unlock_after_fork_in_parent() noexcept;
void unlock_after_fork_in_child() noexcept;
// The std::atexit handler (Core::say_at_exit), registered once.
void ensure_exit_handlers() noexcept;

Core& core() noexcept {
  static Core* c = [] {
    ensure_fork_handlers();
    ensure_exit_handlers();
    return new Core;  // never destroyed: regions may run during static destruction
  }();
  return *c;
}

// True while this thread holds Core::mu (from just before it takes it to just after it
// lets it go, and across fork()). A signal handler that interrupts the thread there and
// calls the recorder (a SIGTERM handler's close()) waited for itself forever: a helper's
// job hung, and a later SIGTERM could not end it. Such a call returns kErrState instead.
// (The other locks, the per-update data's and the names', are held briefly; the recorder
// is not async-signal-safe: docs/recorder.md.)
thread_local bool t_holds_core = false;

class CoreLock {
 public:
  explicit CoreLock(std::mutex& m) : m_(m) {
    t_holds_core = true;
    try {
      m_.lock();
    } catch (...) {  // (std::system_error: the flag must not stay set)
      t_holds_core = false;
      throw;
    }
  }
  ~CoreLock() {
    m_.unlock();
    t_holds_core = false;
  }
  CoreLock(const CoreLock&) = delete;
  CoreLock& operator=(const CoreLock&) = delete;

 private:
  std::mutex& m_;
};

void lock_for_fork() noexcept {
  Core& c = core();
  t_holds_core = true;
  c.mu.lock();
  thread_registry().mu.lock();
  c.data_mu.lock();
  names().mu.lock();
}

void unlock_after_fork_in_parent() noexcept {
  Core& c = core();
  names().mu.unlock();
  c.data_mu.unlock();
  thread_registry().mu.unlock();
  c.mu.unlock();
  t_holds_core = false;
}

void unlock_after_fork_in_child() noexcept {
  unlock_after_fork_in_parent();
  core().forget_after_fork();
  // Also with no recorder open: a child that opens one must not take the regions open in
  // the parent as its own (spurious parents, open_at_end_update, unwritten_at_close).
  forget_threads_after_fork();
}

void Core::forget_after_fork() noexcept {
  // The parent's closed session's events are the parent's too: the child's next open()
  // must not destroy them. (old_timers_ holds every timer, so this destroys nothing.)
  retired_timer_.reset();
  if (!is_open.load(std::memory_order_relaxed)) return;
  is_open.store(false, std::memory_order_release);
  forked_ = opts_.print_warnings;  // (a child's child keeps it: forget_after_fork returns above there)
  for (ThreadStateFull* st : thread_registry().states) st->device.store(false, std::memory_order_release);
  // Kept, never destroyed: destroying the sink could flush or close what the parent
  // writes, and the device timer's events are the parent's. The sink lets go of its copy
  // of the file (and so of the file's lock).
  if (sink_) sink_->release_in_child();
  try {
    parent_sinks_.push_back(std::move(sink_));
    if (timer_) old_timers_.push_back(std::move(timer_));
    std::lock_guard dl(data_mu);
    data = UpdateData{};
  } catch (...) {  // out of memory: the sink and timer stay here, unused until a new open()
    count_global_error(ErrorKind::kOutOfMemory);
  }
}

std::string expand_rank(std::string path, std::int64_t rank) {
  const std::string r = std::to_string(rank);
  for (std::size_t pos = 0; (pos = path.find("{rank}", pos)) != std::string::npos; pos += r.size())
    path.replace(pos, 6, r);
  return path;
}

// The run_id a recorder wrote in a config line too long to parse whole: its own fields
// come first (`{"type":"config","schema":1,"run_id":"..."`), so it is in the line's head.
std::optional<std::string> run_id_in_head(std::string_view head) {
  constexpr std::string_view kStart = R"({"type":"config",)", kKey = R"("run_id":")";
  if (head.substr(0, kStart.size()) != kStart) return std::nullopt;
  const auto at = head.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t end = at + kKey.size();
  while (end < head.size() && head[end] != '"') end += head[end] == '\\' ? 2 : 1;
  if (end >= head.size()) return std::nullopt;
  const auto v = nlohmann::json::parse(head.substr(at + kKey.size() - 1, end - at - kKey.size() + 2), nullptr, false);
  if (!v.is_string()) return std::nullopt;
  return v.get<std::string>();
}

// The run_id of the config record on the first line of the log at `path`, if there is one.
std::optional<std::string> run_id_in_log(const std::string& path) noexcept {
  try {
    std::ifstream in(path, std::ios::binary);
    std::string line;
    constexpr std::size_t kWhole = std::size_t{1} << 20;  // lines parsed whole up to this
    line.resize(kWhole + 1);
    in.read(line.data(), static_cast<std::streamsize>(line.size()));
    line.resize(static_cast<std::size_t>(in.gcount()));
    if (const auto nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
    else if (line.size() > kWhole) return run_id_in_head(line);  // (a config of 60,000 shard paths)
    if (line.empty()) return std::nullopt;
    std::vector<RawField> fields;
    std::string err;
    if (!parse_object_fields(line, fields, err)) return std::nullopt;
    bool is_config = false;
    for (const auto& f : fields) is_config = is_config || (f.key == schema::kType && f.json == "\"config\"");
    if (!is_config) return std::nullopt;
    return make_config(std::move(fields)).run_id;
  } catch (...) {
    return std::nullopt;
  }
}

std::string Core::run_id_for(const Options& o) const {
  if (!o.run_id.empty()) return o.run_id;
  for (const char* var : {"STEPPROF_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"})
    if (const char* v = std::getenv(var); v && *v) return v;
  if (o.world_size != 1) return {};
  // Appending to the log of an earlier process (a job resumed from a checkpoint): go on
  // with its generated id, so that the reader sees one run, not two.
  if (o.append)
    if (auto id = run_id_in_log(path_)) return *id;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "host");
  return std::string(host) + "-" + std::to_string(getpid()) + "-" + std::to_string(std::time(nullptr));
}

constexpr const char* kReentered =
    "stepprof: called while this thread was inside the recorder (from a signal handler?): nothing done; set a flag "
    "in the handler and call it from the training loop";

Status Core::open(const Options& o, std::string* message) {
  if (t_holds_core) {
    if (message) *message = kReentered;
    return Status::kErrState;
  }
  CoreLock lock(mu);
  auto fail = [&](Status s, std::string msg) {
    // A rejected open() records nothing for the whole run: said on stderr too (a config
    // value of 16.5 for global_batch lost a helper's run without a word, where the
    // example ignores open()'s status). (kWarnIo's messages are printed where made.)
    // (Not kErrState: a recorder already open keeps recording.)
    if (o.print_warnings && s == Status::kErrArgument)
      std::fprintf(stderr, "stepprof: open() failed, this process records nothing: %s\n", printable(msg).c_str());
    if (message) *message = std::move(msg);
    return s;
  };
  // (The arguments are checked first: a wrong one is an error whether or not another
  // recorder is open, so that it is fixed before a long run.)
  if (o.world_size < 1) return fail(Status::kErrArgument, "world_size must be >= 1, got " + std::to_string(o.world_size));
  if (o.world_size > kMaxWorldSize)  // (the reader would not use it: record.hpp)
    return fail(Status::kErrArgument, "world_size must be at most " + std::to_string(kMaxWorldSize) +
                                          " (the most ranks stepprof reads), got " + std::to_string(o.world_size));
  // The C ABI's limits (c_api.cpp), here too: 2^20 x 2^20 events could never be
  // reserved, and device timing was off with a word only in the config record.
  for (const auto& [name, value] : {std::pair{"device_events_per_thread", o.device_events_per_thread},
                                    std::pair{"device_threads", o.device_threads}})
    if (value < 1 || value > kMaxDeviceOption)
      return fail(Status::kErrArgument, std::string(name) + " must be in [1, " + std::to_string(kMaxDeviceOption) +
                                            "], got " + std::to_string(value));
  if (o.rank < 0 || o.rank >= o.world_size)
    return fail(Status::kErrArgument, "rank must be in [0, world_size), got rank " + std::to_string(o.rank) +
                                          " with world_size " + std::to_string(o.world_size));
  if (o.path.empty() && !o.sink)  // (it was taken, and warned about as a file that cannot be opened)
    return fail(Status::kErrArgument, "the log path is empty (give Options::path, or Options::sink)");
  if (!o.sink && o.path.find('\0') != std::string::npos)  // (the file opened would be the part before it)
    return fail(Status::kErrArgument, "the log path contains a NUL character");

  // The config record: the recorder's own fields, then the user's.
  namespace s = schema;
  std::vector<RawField> user;
  if (!o.config_json.empty()) {
    std::string err;
    if (!parse_object_fields(o.config_json, user, err)) return fail(Status::kErrArgument, "config_json: " + err);
  }
  for (const auto& [k, v] : o.config) {
    std::vector<RawField> one;
    std::string err;
    if (!parse_object_fields("{" + json_string(k) + ":" + v + "}", one, err) || one.size() != 1)
      return fail(Status::kErrArgument, "config field \"" + k + "\": the value is not valid JSON text: " + v);
    user.push_back(std::move(one.front()));
  }
  for (std::size_t i = 0; i < user.size(); ++i) {
    const std::string& k = user[i].key;
    for (std::string_view own : {s::kType, s::kSchema, s::kRunId, s::kRank, s::kWorldSize, s::kClock, s::kDeviceTiming})
      if (k == own)
        return fail(Status::kErrArgument, "config field \"" + k + "\" is written by the recorder; set the recorder's own option "
                    "instead (C++ Options, C stepprof_open arguments, Python Recorder arguments)");
    // (The reader takes a config with an update's times for a mistyped update record.)
    for (std::string_view times : {s::kWallMs, s::kCpuCallMs, s::kCudaStreamMs})
      if (k == times)
        return fail(Status::kErrArgument, "config field \"" + k + "\" is an update record's field (the reader rejects a "
                    "config that has it); name the setting otherwise");
    if ((k == s::kRegionAlternatives && !o.region_alternatives.empty()) || (k == s::kRegionRoles && !o.region_roles.empty()))
      return fail(Status::kErrArgument, "config field \"" + k + "\" is given both in the config and in Options");
    for (std::size_t j = 0; j < i; ++j)
      if (user[j].key == k) return fail(Status::kErrArgument, "config field \"" + k + "\" is given twice");
    if (k == s::kRegionAlternatives || k == s::kRegionRoles)
      if (auto p = check_region_map(k, user[i].json); !p.empty())
        return fail(Status::kErrArgument, "config field \"" + k + "\": " + p);
  }
  // A region given twice in Options' lists: the JSON object written would keep one.
  for (const auto* list : {&o.region_roles, &o.region_alternatives})
    for (std::size_t i = 0; i < list->size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if ((*list)[j].first == (*list)[i].first)
          return fail(Status::kErrArgument,
                      std::string(list == &o.region_roles ? "region_roles" : "region_alternatives") + ": region \"" +
                          (*list)[i].first + "\" is given twice");
  if (!o.region_roles.empty())
    if (auto p = check_region_map(s::kRegionRoles, json_string_map(o.region_roles)); !p.empty())
      return fail(Status::kErrArgument, "region_roles: " + p);
  // A config field the reader would reject or leave out (micro_batch "8" or -1, model 5,
  // a value nested 100 deep) is rejected here, as unknown roles are: the analyzer would
  // not use it, and reading the log would report an error.
  {
    std::vector<std::string> problems;
    (void)make_config(user, &problems);
    if (!problems.empty()) {
      std::string all = "the config is rejected, as the reader would reject it (this recorder is not opened): ";
      for (std::size_t i = 0; i < problems.size(); ++i) all += (i ? "; " : "") + problems[i];
      return fail(Status::kErrArgument, all);
    }
  }

  if (is_open.load(std::memory_order_relaxed))
    return fail(Status::kErrState, "a stepprof recorder is already open in this process; close() it first");

  opts_ = o;
  forked_ = false;  // (a recorder of its own: nothing to say)
  opener_ = static_cast<long>(::getpid());
  opts_.config.clear();
  opts_.config_json.clear();
  path_ = expand_rank(o.path, o.rank);
  shown_path_ = printable(path_);
  run_id_ = run_id_for(o);

  // Device timing.
  timer_.reset();
  if (retired_timer_) {
    retired_timer_->release();
    retired_timer_.reset();
  }
  busy_ = nullptr;
  if (o.device_timing == DeviceTiming::kOff) {
    device_status_ = "off: disabled by the recorder options";
  } else {
    auto timer = o.device_timer ? o.device_timer : make_cuda_device_timer(o.cuda_device);
    device_status_ = timer->status();
    events_per_thread_ = round_up_pow2(o.device_events_per_thread);
    max_ranges_ = std::max<std::uint32_t>(1, o.device_threads);
    const std::uint64_t capacity = std::uint64_t{events_per_thread_} * max_ranges_;
    if (timer->available() && capacity < 0xFFFFFFF0u && timer->reserve(static_cast<std::uint32_t>(capacity))) {
      busy_arrays_.push_back(std::make_unique<std::atomic<std::uint8_t>[]>(capacity));
      busy_ = busy_arrays_.back().get();
      timer_ = timer;
      old_timers_.push_back(timer);
    } else if (timer->available()) {
      device_status_ = "off: could not reserve " + std::to_string(capacity) + " device events";
    }
  }
  ranges_used_ = 0;
  streams_.clear();
  ++session_;
  if (timer_ && enable_device_here(o.cuda_stream) != Status::kOk) {
    device_status_ = "off: device events could not be created on the opening thread";
    timer_->release();
    timer_.reset();
  }

  RunConfig config;
  config.fields.push_back({std::string(s::kSchema), std::to_string(schema::kVersion)});
  if (!run_id_.empty()) config.fields.push_back({std::string(s::kRunId), json_string(run_id_)});
  config.fields.push_back({std::string(s::kRank), std::to_string(o.rank)});
  config.fields.push_back({std::string(s::kWorldSize), std::to_string(o.world_size)});
  config.fields.push_back({std::string(s::kClock), json_string(clock_name())});
  config.fields.push_back({std::string(s::kDeviceTiming), json_string(device_status_)});
  if (!o.region_alternatives.empty())
    config.fields.push_back({std::string(s::kRegionAlternatives), json_string_map(o.region_alternatives)});
  if (!o.region_roles.empty()) config.fields.push_back({std::string(s::kRegionRoles), json_string_map(o.region_roles)});
  background_.clear();
  for (const auto& [region, role] : o.region_roles)
    if (role == "background") background_.push_back(region);
  for (const auto& f : user)
    if (f.key == s::kRegionRoles)  // (checked above: an object of role names)
      if (const auto roles = nlohmann::json::parse(f.json, nullptr, false); roles.is_object())
        for (const auto& [region, role] : roles.items())
          if (role == "background") background_.push_back(region);
  for (auto& f : user) config.fields.push_back(std::move(f));

  // The output.
  sink_ = o.sink;
  open_errno_ = write_errno_ = 0;
  partial_line_ = false;
  pending_config_.clear();
  pending_config_failures_ = 0;
  records_written_ = 0;
  // A log of this same run about to be truncated: a job resumed (same run_id: a requeued
  // Slurm job, an elastic restart) without `append` loses every record before it.
  bool same_run_log = false;
  if (!sink_ && !o.append && !run_id_.empty()) {
    struct stat st {};
    // (Not the job's own stdout or stderr file, which is never truncated: ranks that share
    // one found the others' records there, "and was truncated", a helper.)
    if (::stat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && !is_own_output_file(path_))
      if (const auto id = run_id_in_log(path_); id && *id == run_id_) same_run_log = true;
  }
  if (!sink_) {
    int err = 0;
    sink_ = open_file_sink(path_, o.append, err);
    open_errno_ = sink_ ? 0 : err;
  }
  std::string truncated_note;
  if (same_run_log && sink_)
    truncated_note = "stepprof: " + shown_path_ + " held records of this run (run_id \"" + printable(run_id_) +
                     "\"), and was truncated: a job resumed from a checkpoint? Open with append (Options::append; "
                     "append=True in Python) to keep the earlier records (the analyzer then reads both parts as one run)";
  if (!truncated_note.empty() && opts_.print_warnings) std::fprintf(stderr, "%s\n", truncated_note.c_str());

  // The first open() calibrates the TSC for ~10 ms: before the counts start, or other
  // threads' region calls in those 10 ms went into the first update, whose wall clock
  // starts after them (a region at 3x its update's wall_ms).
  ns_per_tick_ = initial_ns_per_tick();
  // Start counting from now: what threads recorded before open() is not reported.
  {
    auto& reg = thread_registry();
    std::lock_guard tl(reg.mu);
    for (ThreadStateFull* st : reg.states) {
      for (std::uint32_t r = 0; r <= kMaxRegions; ++r) {
        st->base_calls[r] = st->acc[r].calls.load(std::memory_order_acquire);
        st->base_ticks[r] = st->acc[r].ticks.load(std::memory_order_relaxed);
      }
      for (std::size_t k = 0; k < kErrorKinds; ++k) st->base_errors[k] = st->errors[k].load(std::memory_order_relaxed);
    }
  }
  auto& nr = names();
  for (std::uint32_t c = 0; c <= kMaxCounters; ++c) {
    nr.counter_value[c].store(0, std::memory_order_relaxed);
    nr.counter_touched[c].store(0, std::memory_order_relaxed);
    nr.counter_overflow[c].store(0, std::memory_order_relaxed);
  }
  {
    std::lock_guard dl(data_mu);
    data = UpdateData{};
    data_limit = opts_.max_update_data_bytes;
  }
  for (std::size_t k = 0; k < kErrorKinds; ++k) global_base_[k] = global_error_count(static_cast<ErrorKind>(k));
  total_ = {};
  closed_ = false;
  unreported_ = {};
  if (open_errno_) count_global_error(ErrorKind::kOpenFailed);
  // STEPPROF_CLOCK names the host clock (clock.cpp): a value it does not know was ignored
  // without a word. It is still ignored (the clock was chosen at start-up), and counted.
  // open() returns kWarnErrors with the message (unless a kWarnIo says more), so that a
  // caller that prints nothing itself (the Python package) can say it at once.
  std::string setting_ignored;
  if (const char* env = std::getenv("STEPPROF_CLOCK");
      env && *env && std::strcmp(env, "steady_clock") != 0 && std::strcmp(env, "tsc") != 0) {  // ("": unset)
    count_global_error(ErrorKind::kBadArgument);
    setting_ignored = "stepprof: STEPPROF_CLOCK=" + printable(env) +
                      " is not a clock stepprof knows (steady_clock, tsc); the clock is " +
                      (g_use_tsc ? "tsc" : "steady_clock") + " (counted as bad_argument)";
    if (opts_.print_warnings) std::fprintf(stderr, "%s\n", setting_ignored.c_str());
  }

  anchor_ = read_clock_pair();
  update_start_ns_ = steady_ns();
  last_step_.reset();
  is_open.store(true, std::memory_order_release);

  records_deleted_ = 0;
  remake_failed_ = false;
  deleted_for_good_ = false;
  fd_taken_ = false;
  config_line_ = config_to_json(config);
  const std::string& config_line = config_line_;
  const bool config_written = write_line(config_line);
  if (!config_written && !open_errno_) {
    pending_config_ = config_line + '\n';
    pending_config_failures_ = 1;
    std::string msg = "stepprof: cannot write the config record to " + shown_path_ + ": " +
                      std::strerror(write_errno_ ? write_errno_ : EIO) +
                      "; the recorder keeps running, counts the records it cannot write, and writes the config "
                      "record with the next update record";
    if (opts_.print_warnings) std::fprintf(stderr, "%s\n", msg.c_str());
    return fail(Status::kWarnIo, std::move(msg));
  }
  if (open_errno_) {
    std::string msg = "stepprof: cannot open the log " + shown_path_ + ": " + open_error_text(path_, open_errno_) +
                      "; the recorder keeps running and counts the records it cannot write";
    if (opts_.print_warnings) std::fprintf(stderr, "%s\n", msg.c_str());
    return fail(Status::kWarnIo, std::move(msg));
  }
  if (!setting_ignored.empty())  // (with the truncation's note, when there is one)
    return fail(Status::kWarnErrors,
                truncated_note.empty() ? std::move(setting_ignored) : setting_ignored + "; " + truncated_note);
  if (!truncated_note.empty() && message) *message = std::move(truncated_note);  // (not an error: kOk)
  return Status::kOk;
}

Status Core::enable_device_here(void* stream) {
  if (!timer_) return Status::kErrState;
  ThreadStateFull* t = this_thread_state();
  if (!timer_->bind_thread()) {
    count_global_error(ErrorKind::kDeviceRecordFailed);
    return Status::kErrState;
  }
  if (t->device_session != session_) {
    if (ranges_used_ >= max_ranges_) {
      count_global_error(ErrorKind::kDeviceThreadsExhausted);
      return Status::kErrState;
    }
    const std::uint32_t first = ranges_used_ * events_per_thread_;
    if (!timer_->create_events(first, events_per_thread_)) {
      count_global_error(ErrorKind::kDeviceRecordFailed);
      return Status::kErrState;
    }
    ++ranges_used_;
    t->device.store(false, std::memory_order_relaxed);
    t->pending = std::make_unique<PendingPair[]>(events_per_thread_);
    t->pending_cap = events_per_thread_;
    t->pending_head.store(0, std::memory_order_relaxed);
    t->pending_tail.store(0, std::memory_order_relaxed);
    t->ev_first = first;
    t->ev_mask = events_per_thread_ - 1;
    t->ev_next = 0;
    t->busy = busy_;
    t->timer = timer_.get();
    t->device_session = session_;
  }
  t->stream = stream;
  if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
  t->device.store(true, std::memory_order_release);
  return Status::kOk;
}

Status Core::set_device_stream(void* stream) {
  if (t_holds_core) return Status::kErrState;  // (see CoreLock)
  CoreLock lock(mu);
  if (!is_open.load(std::memory_order_relaxed) || !timer_) return Status::kErrState;
  try {
    return enable_device_here(stream);
  } catch (...) {
    count_global_error(ErrorKind::kOutOfMemory);
    return Status::kErrNoMemory;
  }
}

void Core::collect_errors(bool* busy) {
  auto& reg = thread_registry();
  std::array<std::uint64_t, kErrorKinds> delta{};
  {
    std::unique_lock tl(reg.mu, std::defer_lock);
    if (!busy) tl.lock();
    else if (!tl.try_lock()) {
      *busy = true;
      return;
    }
    for (ThreadStateFull* st : reg.states)
      for (std::size_t k = 0; k < kErrorKinds; ++k) {
        const std::uint64_t e = st->errors[k].load(std::memory_order_relaxed);
        delta[k] += e - st->base_errors[k];
        st->base_errors[k] = e;
      }
  }
  for (std::size_t k = 0; k < kErrorKinds; ++k) {
    const std::uint64_t g = global_error_count(static_cast<ErrorKind>(k));
    delta[k] += g - global_base_[k];
    global_base_[k] = g;
    total_[k] += delta[k];
    unreported_[k] += delta[k];
  }
}

bool Core::write_line(std::string_view line) {
  line_buf_.clear();
  if (partial_line_) line_buf_ += '\n';  // end the partial line a failed write left behind
  line_buf_ += line;
  line_buf_ += '\n';
  return write_buffer();
}

bool Core::write_buffer(std::size_t* written_out) {
  if (written_out) *written_out = 0;
  if (!sink_) {
    count_global_error(ErrorKind::kWriteFailed);
    return false;
  }
  const std::string& buf = line_buf_;
  std::size_t written = 0;
  const int err = sink_->write(buf, written);
  if (written_out) *written_out = err != 0 ? written : buf.size();
  if (err != 0) {
    if (written > 0) partial_line_ = buf[written - 1] != '\n';
    write_errno_ = err;
    count_global_error(ErrorKind::kWriteFailed);
    return false;
  }
  partial_line_ = false;
  ++records_written_;
  return true;
}

void Core::touch(std::uint32_t region) {
  if (!touched_[region]) {
    touched_[region] = 1;
    touched_ids_.push_back(region);
  }
}

void Core::drain_device(ThreadStateFull* s) {
  const std::uint64_t head = s->pending_head.load(std::memory_order_acquire);
  std::uint64_t tail = s->pending_tail.load(std::memory_order_relaxed);
  for (; tail < head; ++tail) {
    const PendingPair p = s->pending[tail & (s->pending_cap - 1)];
    double ms = 0;
    const auto q = timer_->elapsed_ms(p.start, p.end, ms);
    if (q == DeviceTimer::Query::kNotReady) break;  // later pairs on this thread are not either: next boundary
    if (q == DeviceTimer::Query::kReady && !(ms >= 0 && ms <= schema::kMaxTimeMs)) {
      // A timer's NaN, infinity, negative or absurd reading is not a time: written, the
      // reader would reject the whole record (its host times too).
      count_global_error(ErrorKind::kDeviceReadFailed);
    } else if (q == DeviceTimer::Query::kReady && p.region < kOverflowRegion) {
      device_ms_[p.region] += ms;
      ++device_n_[p.region];
      if (parent_[p.region] == kUnsetId) parent_[p.region] = s->acc[p.region].parent.load(std::memory_order_relaxed);
      touch(p.region);
    } else if (q == DeviceTimer::Query::kError) {
      count_global_error(ErrorKind::kDeviceReadFailed);
    }
    busy_[p.start].store(0, std::memory_order_release);
    busy_[p.end].store(0, std::memory_order_release);
  }
  s->pending_tail.store(tail, std::memory_order_release);
}

void Core::settle_boundary() {
  // This thread's regions that other threads ended since its last region entry (a scope
  // object handed over and destroyed there) are closed now, at the time they were
  // destroyed: their time belongs in this record, and they are not open here any more.
  // (Before the stream is synchronized: their device end events are recorded now, and
  // recorded after the synchronization they would not be complete yet.)
  if (t_state != nullptr && t_state->foreign_exit.load(std::memory_order_acquire)) apply_foreign_exits(t_state);
  if (timer_ && opts_.sync_at_update)
    for (void* stream : streams_)
      if (!timer_->synchronize(stream)) count_global_error(ErrorKind::kDeviceSyncFailed);
}

std::int64_t Core::take_update_data(UpdateRecord& u) {
  // Regions: every thread's totals since the previous read; device pairs that are done.
  const std::uint32_t n = names().region_count.load(std::memory_order_acquire);
  std::int64_t now = 0;
  {
    auto& reg = thread_registry();
    std::lock_guard tl(reg.mu);
    for (ThreadStateFull* st : reg.states) {
      for (std::uint32_t r = 0; r < n; ++r) {
        const std::uint64_t c = st->acc[r].calls.load(std::memory_order_acquire);
        if (c == st->base_calls[r]) continue;
        const std::uint64_t tk = st->acc[r].ticks.load(std::memory_order_relaxed);
        calls_[r] += c - st->base_calls[r];
        host_ns_[r] += static_cast<double>(tk - st->base_ticks[r]) * ns_per_tick_;
        st->base_calls[r] = c;
        st->base_ticks[r] = tk;
        if (parent_[r] == kUnsetId) parent_[r] = st->acc[r].parent.load(std::memory_order_relaxed);
        touch(r);
      }
      if (timer_ && st->device_session == session_) drain_device(st);
    }
    now = steady_ns();
  }
  std::sort(touched_ids_.begin(), touched_ids_.end());
  for (const std::uint32_t r : touched_ids_) {
    RegionSample rs;
    rs.region = r;
    if (device_n_[r]) rs.device_ms = device_ms_[r];
    if (calls_[r]) {
      rs.host_ms = host_ns_[r] / 1e6;
      rs.calls = static_cast<std::int64_t>(calls_[r]);
    }
    const std::uint32_t p = parent_[r];
    if (p == kTopParent) rs.parent = kTopLevel;
    else if (p < kOverflowRegion) rs.parent = p;
    u.regions.push_back(rs);
    host_ns_[r] = 0;
    calls_[r] = 0;
    parent_[r] = kUnsetId;
    device_ms_[r] = 0;
    device_n_[r] = 0;
    touched_[r] = 0;
  }
  touched_ids_.clear();

  // Counters (value first, then presence: see add_count).
  auto& nr = names();
  const std::uint32_t nc = nr.counter_count.load(std::memory_order_acquire);
  for (std::uint32_t c = 0; c < nc; ++c) {
    const std::int64_t v = nr.counter_value[c].exchange(0, std::memory_order_relaxed);
    const bool present = nr.counter_touched[c].exchange(0, std::memory_order_relaxed) != 0;
    const bool overflow = nr.counter_overflow[c].exchange(0, std::memory_order_relaxed) != 0;
    // A sum beyond 2^53 (a double's exact integers, what the reader admits), also one that
    // wrapped around, is left out of the record and counted, so the record stays readable.
    constexpr std::int64_t kExact = std::int64_t{1} << 53;
    if (overflow || v < 0 || v > kExact) {
      detail::count_global_error(detail::ErrorKind::kBadArgument);
      continue;
    }
    if (present || v != 0) u.counters.push_back({c, static_cast<double>(v)});
  }

  UpdateData d;
  {
    std::lock_guard dl(data_mu);
    std::swap(d, data);
  }
  for (const auto& [frames, samples] : d.histogram) u.frame_histogram.emplace_back(frames, samples);
  u.input_shapes = std::move(d.shapes);
  u.sample_indices = std::move(d.indices);
  u.padding_fraction = d.padding;
  u.microbatches = std::move(d.microbatches);
  return now;
}

// True when the log's descriptor now leads to another file of the program's (it closed
// the log's and the number was reused): the sink then lets go of it without writing to,
// unlocking or closing it. Checked before each update record, and by flush() and close(),
// which would write to it or close it. `at`: where it was found, for the warning (with
// `step`, that update's record on are write_failed); `state`: the sink's, when just read.
bool Core::log_fd_taken(const char* at, std::int64_t step, std::optional<LineSink::State> state) {
  if (fd_taken_) return true;
  if (!sink_ || opts_.sink || (state ? *state : sink_->state()) != LineSink::State::kReplaced) return false;
  fd_taken_ = true;
  sink_->abandon();
  write_errno_ = EBADF;
  if (opts_.print_warnings)
    std::fprintf(stderr,
                 "stepprof: the descriptor of the log %s was closed by the program and its number now leads to "
                 "another file: no record is written there (found at %s%s)\n",
                 shown_path_.c_str(), at,
                 step >= 0 ? (" " + std::to_string(step) + ": that record and the later ones are write_failed").c_str()
                           : "");
  return true;
}

// Before each update record: is the log still the file opened? Deleted: made again.
// Its descriptor closed by the program and the number reused (LineSink::State::kReplaced):
// nothing more is written through it, and each later record is a write_failed.
void Core::check_log_file(std::int64_t step) {
  if (!sink_ || opts_.sink || fd_taken_) return;
  const LineSink::State state = sink_->state();  // (one fstat per update)
  if (log_fd_taken("end_update", step, state)) return;
  if (state != LineSink::State::kDeleted || deleted_for_good_) return;
  count_global_error(ErrorKind::kLogDeleted);
  if (struct stat at_path {}; ::stat(path_.c_str(), &at_path) == 0 && at_path.st_nlink == 0) {
    // The path leads to the deleted file itself (/dev/stdout or /proc/self/fd/N of a file
    // that was deleted): there is nothing to make again, and every record goes there.
    deleted_for_good_ = true;
    if (opts_.print_warnings)
      std::fprintf(stderr,
                   "stepprof: the log %s leads to a file that was deleted while recorded to: its records are in no "
                   "file\n",
                   shown_path_.c_str());
    return;
  }
  const std::int64_t lost = records_written_;
  records_deleted_ += lost;
  records_written_ = 0;
  sink_->close();  // (its lock goes with it)
  int err = 0;
  sink_ = open_file_sink(path_, /*append=*/true, err);  // (the directory is made again too)
  remake_failed_ = !sink_;
  if (!sink_) write_errno_ = err > 0 ? err : EIO;  // (each record then a write_failed)
  partial_line_ = false;
  pending_config_ = config_line_ + '\n';  // (not a failed write: none is taken back)
  pending_config_failures_ = 0;
  if (!opts_.print_warnings) return;  // (close() says it too)
  const std::string msg = "stepprof: the log " + shown_path_ + " was deleted while recorded to: the " +
                          std::to_string(lost) + " record(s) written to it are in no file; " +
                          (sink_ ? "it is made again, with the config record and update " + std::to_string(step) + " on"
                                 : "it cannot be made again (" + std::string(std::strerror(write_errno_)) +
                                       "): its records are counted as write_failed");
  std::fprintf(stderr, "%s\n", msg.c_str());
}

Status Core::end_update(std::int64_t step) {
  if (t_holds_core) return Status::kErrState;  // (see CoreLock)
  CoreLock lock(mu);
  if (!is_open.load(std::memory_order_relaxed)) {
    say_forked_child("end_update");
    return Status::kErrState;
  }
  // A step below 0: nothing is done (the contract of an error status), and the update goes
  // on; a record of it would be rejected by the reader, and with it the errors it carries.
  if (step < 0) {
    count_global_error(ErrorKind::kBadArgument);
    return Status::kErrArgument;
  }
  settle_boundary();
  // Steps are update indices, >= 0 and increasing: one not above the highest before it
  // is written (the reader reports a repeated one as a duplicate step) and counted.
  if (last_step_ && step <= *last_step_) count_global_error(ErrorKind::kBadArgument);
  // Called inside a region of this thread (a loop body's region around end_update): that
  // region ends after this record, so its time goes in the next update's record.
  if (t_state != nullptr && t_state->depth > 0) count_global_error(ErrorKind::kOpenAtEndUpdate);
  last_step_ = last_step_ ? std::max(*last_step_, step) : step;
  UpdateRecord u;
  u.rank = opts_.rank;
  u.step = step;
  if (g_use_tsc) {  // refine ticks -> ns over the whole session (error shrinks as 1/time)
    const ClockPair p = read_clock_pair();
    if (p.ns - anchor_.ns > 200'000'000 && p.ticks > anchor_.ticks)
      ns_per_tick_ = static_cast<double>(p.ns - anchor_.ns) / static_cast<double>(p.ticks - anchor_.ticks);
  }

  const std::int64_t now = take_update_data(u);
  u.wall_ms = static_cast<double>(now - update_start_ns_) / 1e6;
  update_start_ns_ = now;
  auto& nr = names();
  {
    std::lock_guard nl(nr.mu);
    const auto valid = nr.counters.find(schema::counter::kValidTokens);
    const auto slots = nr.counters.find(schema::counter::kTokenSlots);
    // (-1: the counter is absent; counts are >= 0.)
    const double v = valid ? u.counter(*valid).value_or(-1) : -1, sl = slots ? u.counter(*slots).value_or(-1) : -1;
    if (v >= 0 && sl >= 0 && v > sl) {
      // More valid tokens than slots: the reader would report the record (bad-field, exit
      // status 1). Both are left out of it and counted in this record's recorder_errors
      // (collected below), so that the report names the update they were counted in.
      std::erase_if(u.counters, [&](const auto& c) { return c.name == *valid || c.name == *slots; });
      count_global_error(ErrorKind::kBadArgument);
    } else if (!u.padding_fraction && sl > 0 && v >= 0) {
      u.padding_fraction = 1.0 - v / sl;  // derived from the token counters, as the real log does
    }
  }

  check_log_file(step);
  collect_errors();
  constexpr auto kWriteFailed = static_cast<std::size_t>(ErrorKind::kWriteFailed);
  for (std::size_t k = 0; k < kErrorKinds; ++k) {
    // (A config record written with this one is not a lost record: not said.)
    const std::uint64_t said =
        unreported_[k] - (k == kWriteFailed ? std::min(unreported_[k], pending_config_failures_) : 0);
    if (said)
      u.recorder_errors.emplace_back(std::string(error_name(static_cast<ErrorKind>(k))), static_cast<std::int64_t>(said));
  }

  line_buf_.clear();
  if (partial_line_) line_buf_ += '\n';  // end the partial line a failed write left behind
  line_buf_ += pending_config_;           // (empty unless its write at open() failed)
  const std::size_t config_end = pending_config_.empty() ? 0 : line_buf_.size();
  {
    std::lock_guard nl(nr.mu);
    append_update_json(u, nr.regions, nr.counters, line_buf_);
  }
  line_buf_ += '\n';
  std::size_t bytes = 0;
  const bool written = write_buffer(&bytes);
  if (config_end > 0 && (written || bytes >= config_end)) {  // the config record is out, whole
    pending_config_.clear();
    ++records_written_;
    // Its failed write at open() lost nothing after all.
    total_[kWriteFailed] -= std::min(total_[kWriteFailed], pending_config_failures_);
    unreported_[kWriteFailed] -= std::min(unreported_[kWriteFailed], pending_config_failures_);
    pending_config_failures_ = 0;
  }
  if (line_buf_.capacity() > kKeptLineBytes) std::string().swap(line_buf_);  // (one record with a long tail)
  if (!written) return Status::kWarnIo;
  unreported_ = {};
  return Status::kOk;
}

Status Core::begin_update() {
  if (t_holds_core) return Status::kErrState;  // (see CoreLock)
  CoreLock lock(mu);
  if (!is_open.load(std::memory_order_relaxed)) return Status::kErrState;
  // The update starts over: what was recorded since the last end_update() (an
  // evaluation's regions and counts, model loading before the loop) goes with the time it
  // took. Kept, it landed in the next record against a wall_ms without it: an evaluation
  // region at 10x its update's time. (Not an error: the job asked for it.)
  settle_boundary();
  // Called inside a region of this thread (a loop body's region around it): that region
  // keeps its time from before the restart, and its record holds it against a wall_ms
  // without it (a 26 ms region in a 3 ms update).
  if (t_state != nullptr && t_state->depth > 0) count_global_error(ErrorKind::kOpenAtBeginUpdate);
  UpdateRecord dropped;
  update_start_ns_ = take_update_data(dropped);
  return Status::kOk;
}

Status Core::flush() {
  if (t_holds_core) return Status::kErrState;  // (see CoreLock)
  CoreLock lock(mu);
  if (!is_open.load(std::memory_order_relaxed)) return Status::kErrState;
  if (!sink_ || log_fd_taken("flush()")) return Status::kWarnIo;
  return sink_->sync() == 0 ? Status::kOk : Status::kWarnIo;
}

// True when a region call, a counter or any other per-update data was recorded after
// the last end_update (or open): close() does not write it, so it is counted.
// Regions of role "background" are not counted: a data-loader thread's region that ends
// after the last update is what such a thread does, not data the job lost.
bool Core::recorded_since_last_update(bool* busy) {
  // (`busy`: try each lock, and give up when another thread holds it.)
  auto take = [busy](std::unique_lock<std::mutex>& l) {
    if (!busy) {
      l.lock();
      return true;
    }
    if (l.try_lock()) return true;
    *busy = true;
    return false;
  };
  const std::uint32_t n = names().region_count.load(std::memory_order_acquire);
  std::vector<bool> background(n, false);
  {
    std::unique_lock nl(names().mu, std::defer_lock);
    if (!take(nl)) return false;
    for (const auto& name : background_)
      if (const auto id = names().regions.find(name); id && *id < n) background[*id] = true;
  }
  {
    auto& reg = thread_registry();
    std::unique_lock tl(reg.mu, std::defer_lock);
    if (!take(tl)) return false;
    // (A region nested in a background one runs on its thread too: its parent chain, as
    // last seen on that thread, is followed up to kMaxDepth levels.)
    auto in_background = [&](const ThreadStateFull* st, std::uint32_t r) {
      for (std::uint32_t level = 0; level <= kMaxDepth && r < n; ++level) {
        if (background[r]) return true;
        r = st->acc[r].parent.load(std::memory_order_relaxed);
      }
      return false;
    };
    for (ThreadStateFull* st : reg.states)
      for (std::uint32_t r = 0; r < n; ++r)
        if (st->acc[r].calls.load(std::memory_order_acquire) != st->base_calls[r] && !in_background(st, r))
          return true;
  }
  auto& nr = names();
  const std::uint32_t nc = nr.counter_count.load(std::memory_order_acquire);
  for (std::uint32_t c = 0; c < nc; ++c)
    if (nr.counter_touched[c].load(std::memory_order_relaxed)) return true;
  std::unique_lock dl(data_mu, std::defer_lock);
  if (!take(dl)) return false;
  return !data.histogram.empty() || !data.shapes.empty() || !data.indices.empty() || data.padding ||
         !data.microbatches.empty();
}

void Core::say_forked_child(const char* call) noexcept {
  // mu held. Once per process (a child's child too), none after a recorder opened in it.
  const long self = static_cast<long>(::getpid());
  if (!forked_ || said_in_ == self) return;
  said_in_ = self;
  std::fprintf(stderr,
               "stepprof: %s() in process %ld, a fork() child of process %ld, records nothing: the recorder and its "
               "log are process %ld's, open when it forked; open a recorder in this process (a log of its own) to "
               "record here\n",
               call, self, static_cast<long>(::getppid()), opener_);
}

void Core::say_at_exit() noexcept {
  try {
    t_holds_core = true;  // (see CoreLock; cleared after the lock below is let go)
    struct Clear {
      ~Clear() { t_holds_core = false; }
    } clear_after;
    std::unique_lock lock(mu, std::try_to_lock);
    if (!lock.owns_lock() || !is_open.load(std::memory_order_relaxed) || !opts_.print_warnings) return;
    bool busy = false;
    const bool unwritten = recorded_since_last_update(&busy);
    if (!busy) collect_errors(&busy);
    if (busy) return;  // (another thread is inside the recorder: say nothing rather than wait)
    // Records a pipe's reader has not taken yet: the flusher thread ends with the process.
    const std::size_t queued = sink_ ? sink_->unwritten_records_now().value_or(0) : 0;
    std::uint64_t errors = 0;
    const std::string kinds = error_kinds_text(unreported_, errors);
    if (!unwritten && errors == 0 && queued == 0) return;  // (every record is whole in the log: nothing lost)
    // (A close() in the destructor of a static object made before the recorder's first
    // use runs after this handler: the line says "not closed yet", not "never".)
    std::string msg = "stepprof: at exit the recorder is still open (no close() yet): " +
                      std::to_string(records_written_ - static_cast<std::int64_t>(queued)) + " record(s) written to " +
                      shown_path_;
    if (fd_taken_)
      msg += "; the log's descriptor was closed by the program and its number now leads to another file: " +
             std::to_string(queued) + " record(s) queued for it were dropped, and later records not written";
    else if (queued)
      msg += "; " + std::to_string(queued) + " record(s) its reader had not taken yet are lost";
    if (unwritten) msg += "; what was recorded after the last end_update() is in no record";
    if (errors) msg += "; " + std::to_string(errors) + " error(s) counted since the last record are in none (" + kinds + ")";
    std::fprintf(stderr, "%s (call end_update() and close() before exiting)\n", msg.c_str());
  } catch (...) {  // (out of memory at exit: nothing more to say)
  }
}

Status Core::close(std::string* message) {
  if (t_holds_core) {  // (see CoreLock)
    if (message) *message = kReentered;
    return Status::kErrState;
  }
  CoreLock lock(mu);
  if (!is_open.load(std::memory_order_relaxed)) {
    if (message) *message = "stepprof: close(): no recorder is open";
    return Status::kErrState;
  }
  // Regions still open on the closing thread (close() inside `with region:`) are not
  // written either; other threads' open regions cannot be read from here without a race.
  // (Those other threads ended since this thread's last entry are closed first.)
  if (t_state != nullptr && t_state->foreign_exit.load(std::memory_order_acquire)) apply_foreign_exits(t_state);
  const bool open_here = t_state != nullptr && t_state->depth > 0;
  if (recorded_since_last_update() || open_here) count_global_error(ErrorKind::kUnwrittenAtClose);
  if (timer_) {
    if (opts_.sync_at_update)
      for (void* stream : streams_) timer_->synchronize(stream);
    // The closing thread's own open regions lose their device events (it is here, not in a region exit).
    release_open_frames(this_thread_state(), 0);
    auto& reg = thread_registry();
    std::lock_guard tl(reg.mu);
    for (ThreadStateFull* st : reg.states) {
      if (st->device_session != session_) continue;
      st->device.store(false, std::memory_order_release);
      st->pending_tail.store(st->pending_head.load(std::memory_order_acquire), std::memory_order_release);
    }
    retired_timer_ = std::move(timer_);  // (its events are destroyed by the next open())
  }
  collect_errors();
  if (sink_) {
    (void)log_fd_taken("close()");  // (then neither written to, unlocked nor closed)
    const int err = sink_->close();
    // Records the sink took but its reader never got (a pipe's reader that went away, or
    // that left them queued): each a failed write, not a written record.
    const std::size_t unwritten = sink_->unwritten_records();
    if (err != 0) write_errno_ = err;
    total_[static_cast<std::size_t>(ErrorKind::kWriteFailed)] += unwritten > 0 ? unwritten : err != 0 ? 1 : 0;
    records_written_ -= std::min(records_written_, static_cast<std::int64_t>(unwritten));
    sink_.reset();
  }
  is_open.store(false, std::memory_order_release);
  closed_ = true;
  std::string().swap(line_buf_);

  std::uint64_t errors = 0;
  const std::string kinds = error_kinds_text(total_, errors);
  if (errors == 0) {
    if (message) message->clear();
    return Status::kOk;
  }
  std::string msg = "stepprof: the recorder counted " + std::to_string(errors) + " error(s) while recording to " + shown_path_ + " (" +
                    kinds + "); " + std::to_string(records_written_) + " record(s) written";
  if (total_[static_cast<std::size_t>(ErrorKind::kUnwrittenAtClose)])
    msg += open_here ? "; what was recorded after the last end_update() was not written, and regions were still open "
                       "on the closing thread (close() inside a region, or a region entered and never exited; call "
                       "end_update() before close(), outside every region)"
                     : "; what was recorded after the last end_update() was not written (call end_update() before "
                       "close())";
  if (total_[static_cast<std::size_t>(ErrorKind::kOpenAtEndUpdate)])
    msg += "; end_update() was called inside a region " +
           std::to_string(total_[static_cast<std::size_t>(ErrorKind::kOpenAtEndUpdate)]) +
           " time(s): that region's time went in a later update's record (end the region before end_update())";
  if (total_[static_cast<std::size_t>(ErrorKind::kOpenAtBeginUpdate)])
    msg += "; begin_update() was called inside a region " +
           std::to_string(total_[static_cast<std::size_t>(ErrorKind::kOpenAtBeginUpdate)]) +
           " time(s): that region kept its time from before the restart (call begin_update() outside regions)";
  if (records_deleted_)
    msg += std::string("; the log file was deleted while recorded to") +
           (remake_failed_ ? " and could not be made again (later records: write_failed): " : " and made again: ") +
           std::to_string(records_deleted_) + " record(s) written before are in no file";
  if (deleted_for_good_) msg += "; the log leads to a file deleted while recorded to: its records are in no file";
  if (fd_taken_)
    msg += "; the log's descriptor was closed by the program and its number now leads to another file: later "
           "records were not written";
  if (open_errno_) msg += "; the file could not be opened: " + open_error_text(path_, open_errno_);
  else if (write_errno_)
    msg += "; last write error: " + std::string(std::strerror(write_errno_)) +
           (write_errno_ == EAGAIN ? " (the pipe's reader did not take the records in time)" : "");
  if (opts_.print_warnings) std::fprintf(stderr, "%s\n", msg.c_str());
  if (message) *message = std::move(msg);
  return Status::kWarnErrors;
}

Status Core::error_counts(std::vector<std::pair<std::string, std::int64_t>>& out) {
  if (t_holds_core) return Status::kErrState;  // (see CoreLock)
  CoreLock lock(mu);
  out.clear();
  if (is_open.load(std::memory_order_relaxed)) collect_errors();
  else if (!closed_) return Status::kErrState;  // (after close(): that session's final counts)
  for (std::size_t k = 0; k < kErrorKinds; ++k)
    if (total_[k])
      out.emplace_back(std::string(error_name(static_cast<ErrorKind>(k))), static_cast<std::int64_t>(total_[k]));
  return Status::kOk;
}

Status Core::info(RecorderInfo& out) {
  if (t_holds_core) return Status::kErrState;  // (see CoreLock)
  CoreLock lock(mu);
  if (!is_open.load(std::memory_order_relaxed)) return Status::kErrState;
  out.path = path_;
  out.run_id = run_id_;
  out.clock = std::string(clock_name());
  out.device_timing = device_status_;
  // (Records a pipe's slow reader has not taken yet, or that were dropped, are not out.)
  out.records_written = records_written_ - static_cast<std::int64_t>(sink_ ? sink_->unwritten_records() : 0);
  return Status::kOk;
}

// Runs `f`, turning an exception (bad_alloc, a failed lock) into a counted error.
template <typename F>
Status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    count_global_error(ErrorKind::kOutOfMemory);
    return Status::kErrNoMemory;
  }
}

// Runs `f` on the per-update data if a recorder is open. `bytes(data)` says what `f`
// would add to it (Options::max_update_data_bytes), counted when `f` returns true (it
// stored its data; false: it refused it): where that takes the update past the limit, `f`
// does not run (counted as update_data_full). False when `f` did not run or ran out of
// memory (counted as out_of_memory).
template <typename Bytes, typename F>
bool with_data(Bytes&& bytes, F&& f) noexcept {
  Core& c = core();
  if (!c.is_open.load(std::memory_order_acquire)) return true;
  try {
    std::lock_guard lock(c.data_mu);
    const std::size_t more = bytes(std::as_const(c.data));
    if (c.data_limit != 0 && (more > c.data_limit || c.data.bytes > c.data_limit - more)) {
      count_global_error(ErrorKind::kUpdateDataFull);
      return false;
    }
    if (f(c.data)) c.data.bytes += more;
    return true;
  } catch (...) {
    count_global_error(ErrorKind::kOutOfMemory);
    return false;
  }
}

// What per-update data takes, as Options::max_update_data_bytes counts it [bytes].
constexpr std::size_t kIntegerBytes = sizeof(std::int64_t);
constexpr std::size_t kEntryBytes = 64;  // a histogram bucket, a shape or a micro-batch besides its integers

void say_at_exit() noexcept { core().say_at_exit(); }  // (a plain function for atexit)

// (Not at_quick_exit: quick_exit() is what a signal handler may call, and this handler
// takes locks and allocates.)
void ensure_exit_handlers() noexcept {
  static const bool registered = [] {
    std::atexit(say_at_exit);
    return true;
  }();
  (void)registered;
}

}  // namespace

void ensure_fork_handlers() noexcept {
  static const bool registered = [] {
    pthread_atfork(lock_for_fork, unlock_after_fork_in_parent, unlock_after_fork_in_child);
    return true;
  }();
  (void)registered;
}

}  // namespace stepprof::detail

namespace stepprof {
inline namespace recording {

using detail::core;
using detail::guarded;

Status open(const Options& options, std::string* message) noexcept {
  if (message) message->clear();  // (not a message of an earlier call)
  return guarded([&] { return core().open(options, message); });
}
Status end_update(std::int64_t step) noexcept {
  return guarded([&] { return core().end_update(step); });
}
Status begin_update() noexcept {
  return guarded([&] { return core().begin_update(); });
}
Status flush() noexcept {
  return guarded([&] { return core().flush(); });
}
Status close(std::string* message) noexcept {
  return guarded([&] { return core().close(message); });
}
bool is_open() noexcept { return core().is_open.load(std::memory_order_acquire); }
Status error_counts(std::vector<std::pair<std::string, std::int64_t>>& out) noexcept {
  return guarded([&] { return core().error_counts(out); });
}
Status info(RecorderInfo& out) noexcept {
  return guarded([&] { return core().info(out); });
}
Status set_device_stream(void* cu_stream) noexcept { return core().set_device_stream(cu_stream); }

}  // namespace recording
}  // namespace stepprof

namespace stepprof::detail {

DataAdded add_frames(std::int64_t frames, std::int64_t samples) noexcept {
  // Counts are >= 0, and a bucket holds at most 2^32 samples (what the reader admits).
  constexpr std::int64_t kExact = schema::kMaxBatchCount;
  // (samples above a bucket's bound is a bad argument whatever room the update has left.)
  if (!count_ok(frames) || !count_ok(samples) || samples > kExact) {
    if (core().is_open.load(std::memory_order_acquire)) count_global_error(ErrorKind::kBadArgument);
    return DataAdded::kBadArgument;
  }
  if (samples == 0) return DataAdded::kStored;  // nothing to add: no bucket of 0 samples is written
  bool refused = false;
  const bool ran = with_data(
      [&](const UpdateData& d) { return d.histogram.contains(frames) ? 0 : kEntryBytes; },
      [&](UpdateData& d) {
    const auto it = d.histogram.find(frames);
    std::int64_t sum = 0;
    if (__builtin_add_overflow(it == d.histogram.end() ? 0 : it->second, samples, &sum) || sum > kExact) {
      count_global_error(ErrorKind::kBadArgument);  // this add is left out
      refused = true;
      return false;
    }
    if (it == d.histogram.end()) d.histogram.emplace(frames, sum);
    else it->second = sum;
    return true;
  });
  return !ran ? DataAdded::kNotStored : refused ? DataAdded::kBadArgument : DataAdded::kStored;
}

DataAdded add_input_shape(std::span<const std::int64_t> dims) noexcept {
  if (dims.empty() || !std::all_of(dims.begin(), dims.end(), count_ok)) {
    if (core().is_open.load(std::memory_order_acquire)) count_global_error(ErrorKind::kBadArgument);
    return DataAdded::kBadArgument;
  }
  auto same = [&](const InputShape& s) { return std::equal(s.dims.begin(), s.dims.end(), dims.begin(), dims.end()); };
  const bool ran = with_data(
      [&](const UpdateData& d) {
        return std::any_of(d.shapes.begin(), d.shapes.end(), same) ? 0 : kEntryBytes + kIntegerBytes * dims.size();
      },
      [&](UpdateData& d) {
    if (const auto it = std::find_if(d.shapes.begin(), d.shapes.end(), same); it != d.shapes.end()) ++it->microbatches;
    else d.shapes.push_back(InputShape{std::vector<std::int64_t>(dims.begin(), dims.end()), 1});
    return true;
  });
  return ran ? DataAdded::kStored : DataAdded::kNotStored;
}

DataAdded add_sample_indices(std::span<const std::int64_t> indices) noexcept {
  // A negative index is not a position in a dataset, and one above 2^53 is not exact in
  // the reader (it would reject the record): such calls are not recorded.
  if (!std::all_of(indices.begin(), indices.end(), count_ok)) {
    if (core().is_open.load(std::memory_order_acquire)) count_global_error(ErrorKind::kBadArgument);
    return DataAdded::kBadArgument;
  }
  const bool ran = with_data([&](const UpdateData&) { return kIntegerBytes * indices.size(); },
                             [&](UpdateData& d) {
                               d.indices.insert(d.indices.end(), indices.begin(), indices.end());
                               return true;
                             });
  return ran ? DataAdded::kStored : DataAdded::kNotStored;
}

}  // namespace stepprof::detail

namespace stepprof {
inline namespace recording {

void frame_histogram_add(std::int64_t frames, std::int64_t samples) noexcept { detail::add_frames(frames, samples); }
void input_shape(std::span<const std::int64_t> dims) noexcept { detail::add_input_shape(dims); }
void sample_indices(std::span<const std::int64_t> indices) noexcept { detail::add_sample_indices(indices); }

Status microbatch(std::span<const std::int64_t> frames, std::span<const std::int64_t> tokens, std::string_view path,
                  std::int64_t padded_length) noexcept {
  bool bad = !std::all_of(frames.begin(), frames.end(), detail::count_ok) ||
             !std::all_of(tokens.begin(), tokens.end(), detail::count_ok) ||
             (!frames.empty() && !tokens.empty() && frames.size() != tokens.size()) || padded_length > detail::kMaxCount;
  if (padded_length >= 0)
    bad = bad || std::any_of(tokens.begin(), tokens.end(), [&](std::int64_t t) { return t > padded_length; });
  if (bad) {
    if (core().is_open.load(std::memory_order_acquire)) detail::count_global_error(detail::ErrorKind::kBadArgument);
    return Status::kErrArgument;
  }
  if (!core().is_open.load(std::memory_order_acquire)) return Status::kOk;
  std::optional<RegionId> id;
  bool path_dropped = false;
  if (!path.empty()) {
    id = region_id(path);  // counts too_many_regions or bad_argument itself
    if (*id >= detail::kOverflowRegion) {
      id.reset();
      path_dropped = true;
    }
  }
  const bool stored = detail::with_data(
      [&](const detail::UpdateData&) {
        return detail::kEntryBytes + detail::kIntegerBytes * (frames.size() + tokens.size());
      },
      [&](detail::UpdateData& d) {
    MicroBatch mb;
    mb.path = id;
    mb.frames.assign(frames.begin(), frames.end());
    mb.tokens.assign(tokens.begin(), tokens.end());
    if (padded_length >= 0) mb.padded_length = padded_length;
    d.microbatches.push_back(std::move(mb));
    return true;
  });
  if (!stored) return Status::kErrNoMemory;
  return path_dropped ? Status::kWarnErrors : Status::kOk;
}

Status set_padding_fraction(double fraction) noexcept {
  if (!std::isfinite(fraction) || fraction < 0 || fraction > 1) {
    if (core().is_open.load(std::memory_order_acquire)) detail::count_global_error(detail::ErrorKind::kBadArgument);
    return Status::kErrArgument;
  }
  detail::with_data([](const detail::UpdateData&) { return std::size_t{0}; },
                    [&](detail::UpdateData& d) {
                      d.padding = fraction;
                      return true;
                    });
  return Status::kOk;
}

}  // namespace recording
}  // namespace stepprof
