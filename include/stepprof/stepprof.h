/* stepprof's recorder, C ABI: a thin layer over the C++ recorder (stepprof.hpp) for C
 * callers and for language bindings (ctypes, pybind11). Every function returns an int
 * status (STEPPROF_OK = 0, > 0 a warning, < 0 an error) or a plain value; no exception
 * crosses this ABI. Strings are UTF-8, NUL-terminated; the library copies what it keeps.
 *
 *   stepprof_recorder* rec = NULL;
 *   stepprof_open("logs/rank{rank}.jsonl", rank, world, "{\"micro_batch\": 8}", NULL, &rec);
 *   stepprof_region_id fwd; stepprof_region_register("forward", &fwd);   // once
 *   for (step ...) {
 *     stepprof_region_enter(fwd); ... stepprof_region_exit(fwd);
 *     stepprof_end_update(rec, step);
 *   }
 *   stepprof_close(rec);
 *
 * Region and counter ids are process-wide (like the C++ macros): the per-call functions
 * (enter/exit, counters, histogram, shapes, indices, padding, device stream) take no
 * handle, so library code and data-loading threads can call them without one; they
 * record into the open recorder (nothing is recorded while none is open).
 *
 * Compile-out: with STEPPROF_DISABLE defined, every function below is a static inline
 * no-op returning STEPPROF_OK (stepprof_open sets *out to NULL) and no library is needed.
 * The header is C99 or later (the no-op functions are `static inline`), and C++.
 * Documentation: docs/recorder.md. */
#ifndef STEPPROF_STEPPROF_H
#define STEPPROF_STEPPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (same values as stepprof::Status). */
#define STEPPROF_OK 0
#define STEPPROF_WARN_IO 1           /* the log could not be opened / a record not written (counted) */
#define STEPPROF_WARN_ERRORS 2       /* stepprof_close: the recorder counted errors during the run;
                                        stepprof_open: STEPPROF_CLOCK named no clock (counted);
                                        stepprof_microbatch: recorded without its path (counted) */
#define STEPPROF_WARN_MISMATCH 3     /* stepprof_region_exit: not the innermost open region (counted) */
#define STEPPROF_ERR_ARGUMENT (-1)   /* a bad argument: NULL pointer, bad JSON, unknown id, ... */
#define STEPPROF_ERR_STATE (-2)      /* wrong state: already open, not open, no device timing */
#define STEPPROF_ERR_NO_MEMORY (-3)

typedef struct stepprof_recorder stepprof_recorder; /* opaque: the open recorder */
typedef uint32_t stepprof_region_id;
typedef uint32_t stepprof_counter_id;

#ifndef STEPPROF_DISABLE

/* Opens the process's recorder (one at a time) and writes the config record.
 *   path_template  output file; "{rank}" is replaced by the rank (NULL: "stepprof-rank{rank}.jsonl")
 *   rank, world_size  data-parallel rank (0 <= rank < world_size) and number of ranks
 *   config_json    NULL or a JSON object of the user's config fields, written in order
 *                  (e.g. {"micro_batch": 8, "accumulation": 2}); may hold
 *                  "region_alternatives" {region: group} and "region_roles" {region: role}
 *   options_json   NULL or a JSON object of recorder options, all optional:
 *                  "run_id" (string), "device_timing" ("auto" | "off"),
 *                  "sync_at_update" (bool, default true), "cuda_stream" (integer CUstream
 *                  address, default 0 = legacy default stream), "cuda_device" (int, -1),
 *                  "device_events_per_thread" (int, 1024), "device_threads" (int, 8),
 *                  "append" (bool, false), "print_warnings" (bool, true: open and close
 *                  problems are also printed as one stderr line each),
 *                  "max_update_data_bytes" (int, 67108864 = 64 MiB; 0: no limit: the
 *                  most memory one update's histogram, shapes, sample indices and
 *                  micro-batches may take; past it a call records nothing, counted as
 *                  update_data_full; see Options::max_update_data_bytes in stepprof.hpp)
 *   out            receives the handle (also on STEPPROF_WARN_IO: the recorder runs and
 *                  counts the records it cannot write); NULL on an error, except that
 *                  the open recorder's handle is left in place (a second open through
 *                  the same variable does not lose it).
 * Returns STEPPROF_OK, STEPPROF_WARN_IO (file not writable), STEPPROF_WARN_ERRORS (the
 * STEPPROF_CLOCK environment variable named no clock: the default is used, counted),
 * STEPPROF_ERR_ARGUMENT, STEPPROF_ERR_STATE (a recorder is already open).
 * stepprof_last_error() has the reason; on STEPPROF_OK it is empty, or a note that the
 * file held records of this same run_id and was truncated (a job resumed without
 * "append": its earlier records are gone). */
int stepprof_open(const char* path_template, int64_t rank, int64_t world_size, const char* config_json,
                  const char* options_json, stepprof_recorder** out);

/* Writes the update record of optimizer update `step` (see stepprof::end_update).
 * STEPPROF_WARN_IO when it could not be written (counted, reported in the next record).
 * STEPPROF_ERR_ARGUMENT for a step below 0 (nothing written, the update goes on; counted
 * as bad_argument); a step not above every earlier one is written and counted.
 * STEPPROF_ERR_NO_MEMORY when memory ran out while the record was made: that update's
 * record is lost (counted as out_of_memory, reported in the next record). */
int stepprof_end_update(stepprof_recorder* rec, int64_t step);
/* Starts the current update over: restarts its wall clock and drops what was recorded
 * since the last end_update or open (see stepprof::begin_update). STEPPROF_ERR_STATE when
 * `rec` is not the open recorder. */
int stepprof_begin_update(stepprof_recorder* rec);
/* Asks the OS to persist the records written so far (fdatasync; may block on the disk).
 * STEPPROF_WARN_IO when the log could not be opened or the sync failed; STEPPROF_ERR_STATE
 * when `rec` is not the open recorder. */
int stepprof_flush(stepprof_recorder* rec);
/* Closes the recorder and frees `rec`. STEPPROF_WARN_ERRORS when errors were counted
 * (a line on stderr and stepprof_last_error() say which). `rec` must not be used after
 * this call: it is freed, and a later stepprof_open may return the same address. Calls
 * racing the close on other threads (a second close included) never read it: they
 * return STEPPROF_ERR_STATE, or act on the recorder before it closes.
 * In the child of fork() the recorder is closed already (see docs/recorder.md): calls
 * with the parent's handle return STEPPROF_ERR_STATE and write nothing. */
int stepprof_close(stepprof_recorder* rec);

/* Errors counted since open: of kind `kind` (e.g. "write_failed"; the kinds are listed in
 * docs/recorder.md), or all kinds when kind is NULL. Returns the count (>= 0), or a
 * negative status: STEPPROF_ERR_ARGUMENT for a kind that does not exist (a typo; the
 * message in stepprof_last_error() lists the kinds), STEPPROF_ERR_STATE when `rec` is
 * not the open recorder. With rec NULL: the open recorder's counts, or after
 * stepprof_close (until the next open) the closed session's final counts, those the close
 * counted included (unwritten_at_close, write_failed), as C++ error_counts() gives;
 * STEPPROF_ERR_STATE when no recorder was ever opened. */
int64_t stepprof_error_count(stepprof_recorder* rec, const char* kind);

/* Copies a JSON description of the open recorder into buf (cap bytes, NUL-terminated):
 * {"path": ..., "run_id": ..., "clock": "tsc"|"steady_clock", "device_timing": ...,
 *  "records_written": n, "errors": {kind: n}}. *needed (if not NULL) gets the length
 * without the NUL; STEPPROF_ERR_ARGUMENT when cap is too small (buf then holds an empty
 * string when cap > 0). */
int stepprof_info_json(stepprof_recorder* rec, char* buf, size_t cap, size_t* needed);

/* Registers region name `name` once (hashes it), giving the id for enter/exit.
 * Past 1024 names (counted as too_many_regions), and for an empty name or one over 1024
 * bytes as written (counted as bad_argument), *out gets an id that records nothing and
 * the call returns STEPPROF_ERR_ARGUMENT. The same for counter names. */
int stepprof_region_register(const char* name, stepprof_region_id* out);
/* Enter/exit region `id` on the calling thread; regions nest per thread. No hashing,
 * allocation or locking after the thread's first region (that one takes a lock and
 * allocates the thread's state, about 53 KB, kept for the process's life and reused by
 * later threads; not async-signal-safe). An exit that does not match the innermost open region is
 * counted as mismatched_exit, and returns STEPPROF_WARN_MISMATCH: regions opened inside
 * `id` are closed unrecorded and `id` is closed when it is open further out, else the
 * exit is ignored. (Past 64 open levels an exit closes the innermost level whatever its
 * id, as those levels are not recorded: STEPPROF_OK. The first mismatched exit on a
 * thread may allocate its stepprof_last_error text.) STEPPROF_ERR_ARGUMENT for an id
 * never registered. */
int stepprof_region_enter(stepprof_region_id id);
int stepprof_region_exit(stepprof_region_id id);

/* Counters: register once, then add n [count] per update (atomic, any thread).
 * Counts are 0 to 2^53: a negative n or one above 2^53 is ignored (the update's other
 * adds stay), counted as bad_argument, and returns STEPPROF_ERR_ARGUMENT; an update's sum
 * above 2^53 is left out of its record and counted. */
int stepprof_counter_register(const char* name, stepprof_counter_id* out);
int stepprof_counter_add(stepprof_counter_id id, int64_t n);
/* Counts, dimensions and indices below are 0 to 2^53 (what a record holds exactly); a
 * call with another value records nothing, counts a bad_argument and returns
 * STEPPROF_ERR_ARGUMENT. A call whose data would take the update past
 * max_update_data_bytes, or that runs out of memory, records nothing, counts
 * update_data_full or out_of_memory and returns STEPPROF_ERR_NO_MEMORY (as
 * stepprof_microbatch). */
/* Adds `samples` samples with `frames` frames each to the update's frame_histogram; an
 * add that would take the update's count for `frames` above 2^32 (the reader's bound for
 * one batch) records nothing, counts a bad_argument and returns STEPPROF_ERR_ARGUMENT.
 * Adding 0 samples writes nothing (no bucket of 0 samples). */
int stepprof_frame_histogram_add(int64_t frames, int64_t samples);
/* Counts one micro-batch whose token tensor has shape dims[0..ndims) in input_shapes:
 * {batch, padded_length}, whose padded length the padding analysis reads; a shape of
 * another number of dimensions is written, and not used for padding (the reader warns). */
int stepprof_input_shape(const int64_t* dims, size_t ndims);
/* Appends n dataset indices to the update's sample_indices. */
int stepprof_sample_indices(const int64_t* indices, size_t n);
/* Sets the update's padding_fraction in [0, 1] (else derived from valid_tokens/token_slots). */
int stepprof_set_padding_fraction(double fraction);
/* Records one micro-batch of the update's per-micro-batch detail ("microbatches"):
 *   frames, tokens  NULL or `samples` counts each: frames and valid (non-padding) tokens
 *                   of every sample of the micro-batch, in order
 *   path            NULL or the code-path region the micro-batch took (e.g. "vggt_batched")
 *   padded_length   token length the micro-batch was padded to; < 0: its longest sample
 * STEPPROF_ERR_ARGUMENT for a negative count, a padded length below a sample's tokens, or
 * samples > 0 with both frames and tokens NULL (counted as bad_argument);
 * STEPPROF_ERR_NO_MEMORY when it could not be stored (counted as out_of_memory, or as
 * update_data_full past the update's max_update_data_bytes);
 * STEPPROF_WARN_ERRORS when `path` could not be a region name (over 1024 bytes, or past the
 * 1024 region names; counted): the micro-batch is recorded without it. */
int stepprof_microbatch(const int64_t* frames, const int64_t* tokens, size_t samples, const char* path,
                        int64_t padded_length);
/* Times the calling thread's regions on CUstream `cu_stream` (NULL: legacy default stream).
 * STEPPROF_ERR_STATE when no recorder is open or it has no device timing (no GPU or
 * driver, "device_timing": "off"; its config record's device_timing says why). */
int stepprof_set_device_stream(void* cu_stream);

/* The message of the last failed or warning call on this thread ("" if none). Read it
 * right after a call that returned a status other than STEPPROF_OK: a call that succeeds
 * leaves it as it was. Valid until the next stepprof call on this thread. */
const char* stepprof_last_error(void);
/* Stable name of a status code, e.g. "ok", "warn-io", "error-argument". */
const char* stepprof_status_name(int status);
/* The host clock regions are timed with: "tsc" or "steady_clock". */
const char* stepprof_clock_name(void);

#else /* STEPPROF_DISABLE: no-op stubs */

static inline int stepprof_open(const char* p, int64_t r, int64_t w, const char* c, const char* o,
                                stepprof_recorder** out) {
  (void)p; (void)r; (void)w; (void)c; (void)o;
  if (out) *out = NULL;
  return STEPPROF_OK;
}
static inline int stepprof_end_update(stepprof_recorder* rec, int64_t step) { (void)rec; (void)step; return STEPPROF_OK; }
static inline int stepprof_begin_update(stepprof_recorder* rec) { (void)rec; return STEPPROF_OK; }
static inline int stepprof_flush(stepprof_recorder* rec) { (void)rec; return STEPPROF_OK; }
static inline int stepprof_close(stepprof_recorder* rec) { (void)rec; return STEPPROF_OK; }
static inline int64_t stepprof_error_count(stepprof_recorder* rec, const char* kind) { (void)rec; (void)kind; return 0; }
static inline int stepprof_info_json(stepprof_recorder* rec, char* buf, size_t cap, size_t* needed) {
  (void)rec;
  if (buf && cap) buf[0] = '\0';
  if (needed) *needed = 0;
  return STEPPROF_OK;
}
static inline int stepprof_region_register(const char* name, stepprof_region_id* out) { (void)name; if (out) *out = 0; return STEPPROF_OK; }
static inline int stepprof_region_enter(stepprof_region_id id) { (void)id; return STEPPROF_OK; }
static inline int stepprof_region_exit(stepprof_region_id id) { (void)id; return STEPPROF_OK; }
static inline int stepprof_counter_register(const char* name, stepprof_counter_id* out) { (void)name; if (out) *out = 0; return STEPPROF_OK; }
static inline int stepprof_counter_add(stepprof_counter_id id, int64_t n) { (void)id; (void)n; return STEPPROF_OK; }
static inline int stepprof_frame_histogram_add(int64_t frames, int64_t samples) { (void)frames; (void)samples; return STEPPROF_OK; }
static inline int stepprof_input_shape(const int64_t* dims, size_t ndims) { (void)dims; (void)ndims; return STEPPROF_OK; }
static inline int stepprof_sample_indices(const int64_t* indices, size_t n) { (void)indices; (void)n; return STEPPROF_OK; }
static inline int stepprof_set_padding_fraction(double fraction) { (void)fraction; return STEPPROF_OK; }
static inline int stepprof_microbatch(const int64_t* frames, const int64_t* tokens, size_t samples, const char* path,
                                      int64_t padded_length) {
  (void)frames; (void)tokens; (void)samples; (void)path; (void)padded_length;
  return STEPPROF_OK;
}
static inline int stepprof_set_device_stream(void* cu_stream) { (void)cu_stream; return STEPPROF_OK; }
static inline const char* stepprof_last_error(void) { return ""; }
static inline const char* stepprof_status_name(int status) { (void)status; return "ok"; }
static inline const char* stepprof_clock_name(void) { return "off"; }

#endif /* STEPPROF_DISABLE */

#ifdef __cplusplus
}
#endif

#endif /* STEPPROF_STEPPROF_H */
