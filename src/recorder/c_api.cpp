// The C ABI (stepprof.h) over the C++ recorder. Catches everything: no exception
// crosses into C.
#include "stepprof/stepprof.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "internal.hpp"
#include "stepprof/diagnostics.hpp"
#include "stepprof/schema.hpp"
#include "stepprof/record_writer.hpp"

// A handle is only ever compared with the open one, never read: a call on another thread
// may hold a handle that stepprof_close is freeing.
struct stepprof_recorder {
  char unused;
};

namespace {

using stepprof::Status;

thread_local std::string t_last_error;
std::atomic<stepprof_recorder*> g_open_handle{nullptr};  // the open handle; null when none is open

int status(Status s) { return static_cast<int>(s); }

// Sets the calling thread's stepprof_last_error() text and returns `code`. The text is
// copied into the thread's buffer, which allocates only the first time it is too small
// (stepprof.h: no allocation per call); out of memory, the text is left as it was. The
// parts are joined in place, so that a message built from several never allocates (or
// throws) at the call site.
int set_error(int code, std::initializer_list<std::string_view> parts) noexcept {
  std::size_t n = 0;
  for (std::string_view p : parts) n += p.size();
  try {
    t_last_error.reserve(n);  // (throws before the old text is touched)
  } catch (...) {
    return code;
  }
  t_last_error.clear();
  for (std::string_view p : parts) t_last_error.append(p);
  return code;
}
int set_error(int code, std::string_view msg) noexcept { return set_error(code, {msg}); }

// A call with an argument the recorder cannot use, rejected before it reaches the C++ API
// (which counts its own rejections): counted as bad_argument, as every rejected call is.
int reject(std::string_view msg) noexcept {
  stepprof::detail::count_global_error(stepprof::detail::ErrorKind::kBadArgument);
  return set_error(STEPPROF_ERR_ARGUMENT, msg);
}

// A per-update data call that could not be stored (the recorder counted it as
// update_data_full or out_of_memory): STEPPROF_ERR_NO_MEMORY, as stepprof_microbatch's.
int not_stored(std::string_view call) noexcept {
  return set_error(STEPPROF_ERR_NO_MEMORY, {call, ": out of memory or past max_update_data_bytes: not recorded (counted)"});
}

// The status of a call that passes a recorder status through, with a message in
// last_error whenever it is not ok (stepprof.h promises one for every such status; a
// status passed on bare left the previous call's message there).
int checked(Status s, const char* call) {
  if (s == Status::kOk) return STEPPROF_OK;
  const char* why = "failed";
  switch (s) {
    case Status::kWarnIo: why = "the log could not be written or persisted (counted: stepprof_error_count)"; break;
    case Status::kWarnErrors: why = "errors were counted (stepprof_error_count)"; break;
    case Status::kErrArgument: why = "invalid argument"; break;
    case Status::kErrState: why = "no recorder is open"; break;
    case Status::kErrNoMemory: why = "out of memory"; break;
    default: break;
  }
  return set_error(status(s), {call, ": ", why});
}

// A handle closed already is freed: it is compared with the open one and never read (a
// stale handle passed after stepprof_close, e.g. by a Python call that a signal handler
// closing the recorder interrupted, or one in use on another thread while stepprof_close
// frees it, must not read freed memory).
bool valid(const stepprof_recorder* rec) { return rec && rec == g_open_handle.load(std::memory_order_acquire); }

// Parses options_json into `o`; returns "" or what is wrong.
std::string parse_options(const char* text, stepprof::Options& o) {
  if (!text || !*text) return {};
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "options_json is not valid JSON";
  if (!j.is_object()) return "options_json must be a JSON object";
  for (auto& item : j.items()) {
    // (Named variables, not a structured binding: clang 14 cannot capture those.)
    const std::string& k = item.key();
    const nlohmann::json& v = item.value();
    auto bad = [&](const char* what) { return "options_json: \"" + k + "\" must be " + what; };
    if (k == "run_id") {
      if (!v.is_string()) return bad("a string");
      o.run_id = v.get<std::string>();
    } else if (k == "device_timing") {
      if (v == "auto") o.device_timing = stepprof::DeviceTiming::kAuto;
      else if (v == "off") o.device_timing = stepprof::DeviceTiming::kOff;
      else return bad("\"auto\" or \"off\"");
    } else if (k == "sync_at_update") {
      if (!v.is_boolean()) return bad("true or false");
      o.sync_at_update = v.get<bool>();
    } else if (k == "append" || k == "print_warnings") {
      if (!v.is_boolean()) return bad("true or false");
      (k == "append" ? o.append : o.print_warnings) = v.get<bool>();
    } else if (k == "cuda_stream") {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
        return bad("a non-negative integer (a CUstream address)");
      o.cuda_stream = reinterpret_cast<void*>(static_cast<std::uintptr_t>(v.get<std::uint64_t>()));
    } else if (k == "cuda_device") {
      if (!v.is_number_integer() || v.get<std::int64_t>() < -1 || v.get<std::int64_t>() > 1 << 16)
        return bad("an integer >= -1");
      o.cuda_device = v.get<int>();
    } else if (k == "max_update_data_bytes") {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
        return bad("a non-negative integer (0: no limit)");
      o.max_update_data_bytes = static_cast<std::size_t>(v.get<std::uint64_t>());
    } else if (k == "device_events_per_thread" || k == "device_threads") {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (1 << 20))
        return bad("an integer in [1, 1048576]");
      (k == "device_threads" ? o.device_threads : o.device_events_per_thread) = v.get<std::uint32_t>();
    } else {
      return "options_json: unknown option \"" + k +
             "\" (expected run_id, device_timing, sync_at_update, cuda_stream, cuda_device, "
             "device_events_per_thread, device_threads, append, print_warnings, max_update_data_bytes)";
    }
  }
  return {};
}

static_assert(STEPPROF_OK == static_cast<int>(Status::kOk) && STEPPROF_WARN_IO == static_cast<int>(Status::kWarnIo) &&
              STEPPROF_WARN_ERRORS == static_cast<int>(Status::kWarnErrors) &&
              STEPPROF_WARN_MISMATCH == static_cast<int>(Status::kWarnMismatch) &&
              STEPPROF_ERR_ARGUMENT == static_cast<int>(Status::kErrArgument) &&
              STEPPROF_ERR_STATE == static_cast<int>(Status::kErrState) &&
              STEPPROF_ERR_NO_MEMORY == static_cast<int>(Status::kErrNoMemory),
              "C status codes and stepprof::Status agree");

template <typename F>
auto guarded(F&& f) noexcept -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return set_error(STEPPROF_ERR_NO_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return set_error(STEPPROF_ERR_ARGUMENT, e.what());
  } catch (...) {
    return set_error(STEPPROF_ERR_ARGUMENT, "unexpected error");
  }
}

}  // namespace

extern "C" {

int stepprof_open(const char* path_template, int64_t rank, int64_t world_size, const char* config_json,
                  const char* options_json, stepprof_recorder** out) {
  return guarded([&] {
    // A failed open clears *out, unless it holds the open recorder's handle (a retry or a
    // second open through the same variable must not lose it).
    if (out && *out != g_open_handle.load(std::memory_order_acquire)) *out = nullptr;
    if (!out) return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_open: out is NULL");
    stepprof::Options o;
    if (path_template) o.path = path_template;
    o.rank = rank;
    o.world_size = world_size;
    if (config_json) {
      // region_alternatives / region_roles may come in the config; they are written as given.
      o.config_json = config_json;
    }
    if (std::string err = parse_options(options_json, o); !err.empty()) {
      // Said on stderr as stepprof::open() says a rejected config (print_warnings as far as
      // the options were read): `"device_timing": "of"` had lost the run without a word.
      if (o.print_warnings)
        std::fprintf(stderr, "stepprof: open() failed, this process records nothing: %s\n",
                     stepprof::printable(err).c_str());
      return set_error(STEPPROF_ERR_ARGUMENT, err);
    }
    auto* rec = new stepprof_recorder{};
    std::string message;
    const Status s = stepprof::open(o, &message);
    if (static_cast<int>(s) < 0) {
      delete rec;
      return set_error(status(s), message);
    }
    g_open_handle.store(rec, std::memory_order_release);
    *out = rec;
    if (s != Status::kOk) return set_error(status(s), message);
    t_last_error = message;  // (on OK: empty, or the note that a log of this run was truncated)
    return STEPPROF_OK;
  });
}

int stepprof_end_update(stepprof_recorder* rec, int64_t step) {
  if (!valid(rec)) return set_error(STEPPROF_ERR_STATE, "stepprof_end_update: not an open recorder");
  const Status s = stepprof::end_update(step);
  if (s == Status::kWarnIo) return set_error(status(s), "the update record could not be written (counted)");
  if (s == Status::kErrArgument)
    return set_error(status(s), "stepprof_end_update: a step below 0; nothing was written and the update goes on "
                                "(counted as bad_argument)");
  return checked(s, "stepprof_end_update");
}

int stepprof_begin_update(stepprof_recorder* rec) {
  if (!valid(rec)) return set_error(STEPPROF_ERR_STATE, "stepprof_begin_update: not an open recorder");
  return checked(stepprof::begin_update(), "stepprof_begin_update");
}

int stepprof_flush(stepprof_recorder* rec) {
  if (!valid(rec)) return set_error(STEPPROF_ERR_STATE, "stepprof_flush: not an open recorder");
  return checked(stepprof::flush(), "stepprof_flush");
}

int stepprof_close(stepprof_recorder* rec) {
  return guarded([&] {
    // The handle is taken from the open slot first, so that of two threads closing it at
    // once only one closes the recorder and frees the handle (the other gets ERR_STATE).
    stepprof_recorder* expected = rec;
    if (!rec || !g_open_handle.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel))
      return set_error(STEPPROF_ERR_STATE, "stepprof_close: not an open recorder");
    std::string message;
    const Status s = stepprof::close(&message);
    delete rec;
    if (s != Status::kOk) return set_error(status(s), message);
    return STEPPROF_OK;
  });
}

int64_t stepprof_error_count(stepprof_recorder* rec, const char* kind) {
  return guarded([&]() -> int64_t {
    // (NULL: the open or last closed session's, as error_counts(); a stale handle is not read.)
    if (rec && !valid(rec)) return set_error(STEPPROF_ERR_STATE, "stepprof_error_count: not an open recorder");
    if (kind) {
      bool known = false;
      std::string kinds;
      for (std::size_t k = 0; k < static_cast<std::size_t>(stepprof::detail::ErrorKind::kCount); ++k) {
        const std::string_view name = stepprof::detail::error_name(static_cast<stepprof::detail::ErrorKind>(k));
        known = known || name == kind;
        kinds += (k ? ", " : "") + std::string(name);
      }
      if (!known)
        return set_error(STEPPROF_ERR_ARGUMENT,
                         "stepprof_error_count: unknown error kind \"" + std::string(kind) + "\" (the kinds: " + kinds + ")");
    }
    std::vector<std::pair<std::string, std::int64_t>> counts;
    if (Status s = stepprof::error_counts(counts); s != Status::kOk) return checked(s, "stepprof_error_count");
    int64_t n = 0;
    for (const auto& [k, c] : counts)
      if (!kind || k == kind) n += c;
    return n;
  });
}

int stepprof_info_json(stepprof_recorder* rec, char* buf, size_t cap, size_t* needed) {
  return guarded([&] {
    if (!valid(rec)) return set_error(STEPPROF_ERR_STATE, "stepprof_info_json: not an open recorder");
    stepprof::RecorderInfo info;
    std::vector<std::pair<std::string, std::int64_t>> counts;
    if (Status s = stepprof::info(info); s != Status::kOk) return checked(s, "stepprof_info_json");
    if (Status s = stepprof::error_counts(counts); s != Status::kOk) return checked(s, "stepprof_info_json");
    nlohmann::ordered_json j{{"path", info.path},   {"run_id", info.run_id},
                             {"clock", info.clock}, {"device_timing", info.device_timing},
                             {"records_written", info.records_written}};
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    for (const auto& [k, c] : counts) e[k] = c;
    j["errors"] = std::move(e);
    const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (needed) *needed = text.size();
    if (!buf && cap > 0)  // ("buffer too small" said nothing of the real mistake)
      return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_info_json: buf is NULL but cap is " + std::to_string(cap) +
                                                  " (give a buffer of at least " + std::to_string(text.size() + 1) +
                                                  " bytes, or cap 0 to get the length in *needed)");
    if (!buf || cap < text.size() + 1) {
      if (buf && cap > 0) buf[0] = '\0';  // (an empty string, never stale bytes)
      return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_info_json: buffer too small (need " +
                                                  std::to_string(text.size() + 1) + " bytes)");
    }
    std::memcpy(buf, text.c_str(), text.size() + 1);
    return STEPPROF_OK;
  });
}

int stepprof_region_register(const char* name, stepprof_region_id* out) {
  if (!name || !out) return reject("stepprof_region_register: NULL argument");
  *out = stepprof::region_id(name);
  if (*out == stepprof::detail::kOverflowRegion)  // (counted by region_id)
    return set_error(STEPPROF_ERR_ARGUMENT,
                     stepprof::detail::names().region_count.load(std::memory_order_relaxed) >= stepprof::detail::kMaxRegions
                         ? "stepprof_region_register: 1024 region names registered already; this one records nothing"
                         : "stepprof_region_register: the name is empty or over 1024 bytes as written; it records nothing");
  return STEPPROF_OK;
}

int stepprof_region_enter(stepprof_region_id id) {
  if (id >= stepprof::detail::names().region_count.load(std::memory_order_relaxed) &&
      id != stepprof::detail::kOverflowRegion)
    return reject("stepprof_region_enter: unknown region id");
  stepprof::region_enter(id);
  return STEPPROF_OK;
}

int stepprof_region_exit(stepprof_region_id id) {
  if (id >= stepprof::detail::names().region_count.load(std::memory_order_relaxed) &&
      id != stepprof::detail::kOverflowRegion)
    return reject("stepprof_region_exit: unknown region id");
  if (stepprof::region_exit(id) == Status::kWarnMismatch)
    return set_error(
        STEPPROF_WARN_MISMATCH,
        "stepprof_region_exit: not the innermost open region of this thread (counted as mismatched_exit)");
  return STEPPROF_OK;
}

int stepprof_counter_register(const char* name, stepprof_counter_id* out) {
  if (!name || !out) return reject("stepprof_counter_register: NULL argument");
  *out = stepprof::counter_id(name);
  if (*out == stepprof::detail::kMaxCounters)  // (counted by counter_id)
    return set_error(STEPPROF_ERR_ARGUMENT,
                     stepprof::detail::names().counter_count.load(std::memory_order_relaxed) >= stepprof::detail::kMaxCounters
                         ? "stepprof_counter_register: 1024 counter names registered already; this one records nothing"
                         : "stepprof_counter_register: the name is empty or over 1024 bytes as written; it records nothing");
  return STEPPROF_OK;
}

int stepprof_counter_add(stepprof_counter_id id, int64_t n) {
  if (id >= stepprof::detail::names().counter_count.load(std::memory_order_relaxed) &&
      id != stepprof::detail::kMaxCounters)
    return reject("stepprof_counter_add: unknown counter id");
  stepprof::count(id, n);  // (a negative n or one above 2^53 is ignored and counted as bad_argument)
  if (n < 0) return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_counter_add: negative count (counts are >= 0)");
  if (!stepprof::detail::count_ok(n))
    return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_counter_add: a count above 2^53 (not exact in a record); ignored");
  return STEPPROF_OK;
}

int stepprof_frame_histogram_add(int64_t frames, int64_t samples) {
  // (Counts a bad_argument, update_data_full or out_of_memory itself.)
  const auto added = stepprof::detail::add_frames(frames, samples);
  if (added == stepprof::detail::DataAdded::kNotStored) return not_stored("stepprof_frame_histogram_add");
  if (!stepprof::detail::count_ok(frames) || !stepprof::detail::count_ok(samples))
    return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_frame_histogram_add: frames and samples must be 0 to 2^53");
  if (samples > stepprof::schema::kMaxBatchCount)
    return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_frame_histogram_add: samples above 2^32 in one update");
  if (added == stepprof::detail::DataAdded::kBadArgument)
    return set_error(STEPPROF_ERR_ARGUMENT,
                     "stepprof_frame_histogram_add: the update's samples of this frame count would pass 2^32; not added");
  return STEPPROF_OK;
}

int stepprof_input_shape(const int64_t* dims, size_t ndims) {
  // (Counts a bad_argument for no or a negative dimension, update_data_full or out_of_memory itself.)
  if (stepprof::detail::add_input_shape(dims ? std::span<const std::int64_t>(dims, ndims)
                                             : std::span<const std::int64_t>()) == stepprof::detail::DataAdded::kNotStored)
    return not_stored("stepprof_input_shape");
  if (!dims || ndims == 0) return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_input_shape: no dimensions");
  for (size_t i = 0; i < ndims; ++i)
    if (!stepprof::detail::count_ok(dims[i]))
      return set_error(STEPPROF_ERR_ARGUMENT, "stepprof_input_shape: a dimension is negative or above 2^53");
  return STEPPROF_OK;
}

int stepprof_sample_indices(const int64_t* indices, size_t n) {
  if (!indices && n) return reject("stepprof_sample_indices: indices is NULL");
  // (Counts a bad_argument, update_data_full or out_of_memory itself.)
  if (n && stepprof::detail::add_sample_indices(std::span<const std::int64_t>(indices, n)) ==
               stepprof::detail::DataAdded::kNotStored)
    return not_stored("stepprof_sample_indices");
  for (size_t i = 0; i < n; ++i)
    if (!stepprof::detail::count_ok(indices[i]))
      return set_error(STEPPROF_ERR_ARGUMENT,
                       "stepprof_sample_indices: an index is negative or above 2^53; none of them was recorded");
  return STEPPROF_OK;
}

int stepprof_set_padding_fraction(double fraction) {
  const Status s = stepprof::set_padding_fraction(fraction);
  if (s != Status::kOk) return set_error(status(s), "stepprof_set_padding_fraction: expected a number in [0, 1]");
  return STEPPROF_OK;
}

int stepprof_microbatch(const int64_t* frames, const int64_t* tokens, size_t samples, const char* path,
                        int64_t padded_length) {
  if (samples > 0 && !frames && !tokens) {  // (the micro-batch was written as {}: its samples lost)
    stepprof::detail::count_global_error(stepprof::detail::ErrorKind::kBadArgument);
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, samples).ptr;
    return set_error(STEPPROF_ERR_ARGUMENT, {"stepprof_microbatch: samples is ", std::string_view(digits, end - digits),
                                             " but frames and tokens are both NULL: give the counts of one"});
  }
  const std::size_t nf = frames ? samples : 0, nt = tokens ? samples : 0;
  const Status s = stepprof::microbatch(std::span<const std::int64_t>(frames, nf),
                                        std::span<const std::int64_t>(tokens, nt), path ? path : "", padded_length);
  if (s == Status::kErrNoMemory)
    // (Short: out of memory, a message longer than the thread's last one is not written.)
    return set_error(status(s), "stepprof_microbatch: out of memory or past max_update_data_bytes: not recorded (counted)");
  if (s == Status::kWarnErrors)
    return set_error(status(s), "stepprof_microbatch: the path cannot be a region name (over 1024 bytes, or past the "
                                "1024 region names; counted): the micro-batch is recorded without it");
  if (s != Status::kOk)
    return set_error(status(s), "stepprof_microbatch: counts must be 0 to 2^53 and padded_length >= every sample's tokens");
  return STEPPROF_OK;
}

int stepprof_set_device_stream(void* cu_stream) {
  const Status s = stepprof::set_device_stream(cu_stream);
  if (s != Status::kOk)
    return set_error(status(s), "stepprof_set_device_stream: no open recorder with device timing, or no device event "
                                "range left (device_threads)");
  return STEPPROF_OK;
}

const char* stepprof_last_error(void) { return t_last_error.c_str(); }

const char* stepprof_status_name(int s) {
  switch (s) {
    case STEPPROF_OK: return "ok";
    case STEPPROF_WARN_IO: return "warn-io";
    case STEPPROF_WARN_ERRORS: return "warn-errors";
    case STEPPROF_WARN_MISMATCH: return "warn-mismatch";
    case STEPPROF_ERR_ARGUMENT: return "error-argument";
    case STEPPROF_ERR_STATE: return "error-state";
    case STEPPROF_ERR_NO_MEMORY: return "error-no-memory";
    default: return "unknown";
  }
}

const char* stepprof_clock_name(void) { return stepprof::detail::g_use_tsc ? "tsc" : "steady_clock"; }

}  // extern "C"
