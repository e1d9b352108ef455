/* The C ABI, from C: open, regions, counters, per-update data, errors, close; the
 * written record is checked as text against hand-written expectations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stepprof/stepprof.h"

static int failures = 0;

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

#define CHECK_CONTAINS(text, needle)                                                 \
  do {                                                                               \
    if (!strstr((text), (needle))) {                                                 \
      fprintf(stderr, "%s:%d: expected to find %s in:\n%s\n", __FILE__, __LINE__, (needle), (text)); \
      ++failures;                                                                    \
    }                                                                                \
  } while (0)

static char* read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

int main(void) {
  char path[256], tmpl[256];
  const char* dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  snprintf(tmpl, sizeof tmpl, "%s/stepprof-c-%ld-rank{rank}.jsonl", dir, (long)getpid());
  snprintf(path, sizeof path, "%s/stepprof-c-%ld-rank0.jsonl", dir, (long)getpid());

  stepprof_recorder* rec = (stepprof_recorder*)1;
  /* Bad input: an error code, no handle, a message. */
  CHECK(stepprof_open(tmpl, 0, 1, "[1]", NULL, &rec) == STEPPROF_ERR_ARGUMENT);
  CHECK(rec == NULL);
  CHECK(strlen(stepprof_last_error()) > 0);
  CHECK(stepprof_open(tmpl, 0, 1, NULL, "{\"device_timing\": \"sometimes\"}", &rec) == STEPPROF_ERR_ARGUMENT);
  CHECK_CONTAINS(stepprof_last_error(), "device_timing");
  CHECK(stepprof_open(tmpl, 2, 2, NULL, NULL, &rec) == STEPPROF_ERR_ARGUMENT);
  CHECK(stepprof_open(tmpl, 0, 1, NULL, NULL, NULL) == STEPPROF_ERR_ARGUMENT);
  CHECK(stepprof_end_update(NULL, 0) == STEPPROF_ERR_STATE);
  CHECK(stepprof_error_count(NULL, NULL) == STEPPROF_ERR_STATE); /* never opened */

  CHECK(stepprof_open(tmpl, 0, 1, "{\"micro_batch\": 2, \"region_roles\": {\"c_outer\": \"data\"}}",
                      "{\"device_timing\": \"off\", \"run_id\": \"c-test\"}", &rec) == STEPPROF_OK);
  CHECK(rec != NULL);
  stepprof_recorder* second = NULL;
  CHECK(stepprof_open(tmpl, 0, 1, NULL, NULL, &second) == STEPPROF_ERR_STATE);
  CHECK(second == NULL);
  /* A second open through the variable that holds the open handle leaves it there. */
  stepprof_recorder* same = rec;
  CHECK(stepprof_open(tmpl, 0, 1, NULL, NULL, &same) == STEPPROF_ERR_STATE);
  CHECK(same == rec);
  CHECK(stepprof_open(tmpl, 0, 1, "[1]", NULL, &same) < 0);
  CHECK(same == rec);

  stepprof_region_id outer = 0, inner = 0;
  stepprof_counter_id samples = 0;
  CHECK(stepprof_region_register("c_outer", &outer) == STEPPROF_OK);
  CHECK(stepprof_region_register("c_inner", &inner) == STEPPROF_OK);
  CHECK(outer != inner);
  CHECK(stepprof_counter_register("samples", &samples) == STEPPROF_OK);
  /* Unknown ids and a NULL array are rejected and counted as bad_argument, as every
   * rejected call is (they were rejected uncounted). */
  CHECK(stepprof_region_enter(999999u) == STEPPROF_ERR_ARGUMENT);
  CHECK(stepprof_region_exit(999999u) == STEPPROF_ERR_ARGUMENT);
  CHECK(stepprof_counter_add(999999u, 1) == STEPPROF_ERR_ARGUMENT);
  CHECK(stepprof_sample_indices(NULL, 3) == STEPPROF_ERR_ARGUMENT);
  { /* so are NULL names and outputs of the register calls (they were not counted) */
    stepprof_region_id unused_region;
    stepprof_counter_id unused_counter;
    CHECK(stepprof_region_register(NULL, &unused_region) == STEPPROF_ERR_ARGUMENT);
    CHECK(stepprof_counter_register("x", NULL) == STEPPROF_ERR_ARGUMENT);
    CHECK(stepprof_counter_register(NULL, &unused_counter) == STEPPROF_ERR_ARGUMENT);
  }

  /* Update 7: c_outer once holding c_inner twice. */
  CHECK(stepprof_region_enter(outer) == STEPPROF_OK);
  CHECK(stepprof_region_enter(inner) == STEPPROF_OK);
  CHECK(stepprof_region_exit(inner) == STEPPROF_OK);
  CHECK(stepprof_region_enter(inner) == STEPPROF_OK);
  CHECK(stepprof_region_exit(inner) == STEPPROF_OK);
  CHECK(stepprof_region_exit(outer) == STEPPROF_OK);
  CHECK(stepprof_counter_add(samples, 8) == STEPPROF_OK);
  CHECK(stepprof_frame_histogram_add(3, 2) == STEPPROF_OK);
  CHECK(stepprof_frame_histogram_add(-1, 2) == STEPPROF_ERR_ARGUMENT);
  const int64_t shape[2] = {2, 128};
  CHECK(stepprof_input_shape(shape, 2) == STEPPROF_OK);
  CHECK(stepprof_input_shape(shape, 0) == STEPPROF_ERR_ARGUMENT);
  const int64_t idx[2] = {5, 6};
  CHECK(stepprof_sample_indices(idx, 2) == STEPPROF_OK);
  /* Values a record cannot hold exactly (over 2^53) or at all (negative): not recorded. */
  const int64_t bad_idx[2] = {7, -1}, huge_shape[2] = {INT64_MAX, 3};
  CHECK(stepprof_sample_indices(bad_idx, 2) == STEPPROF_ERR_ARGUMENT);
  CHECK_CONTAINS(stepprof_last_error(), "stepprof_sample_indices");
  CHECK(stepprof_input_shape(huge_shape, 2) == STEPPROF_ERR_ARGUMENT);
  CHECK(stepprof_frame_histogram_add((int64_t)1 << 60, 1) == STEPPROF_ERR_ARGUMENT);
  stepprof_region_id empty = 0;
  stepprof_counter_id huge = 0;
  CHECK(stepprof_counter_register("huge", &huge) == STEPPROF_OK);
  CHECK(stepprof_counter_add(huge, (int64_t)1 << 60) == STEPPROF_ERR_ARGUMENT); /* ignored: not exact in a record */
  CHECK_CONTAINS(stepprof_last_error(), "a count above 2^53 (not exact in a record); ignored");
  CHECK(stepprof_region_register("", &empty) == STEPPROF_ERR_ARGUMENT);
  CHECK_CONTAINS(stepprof_last_error(), "empty or over 1024 bytes");
  CHECK(stepprof_region_enter(empty) == STEPPROF_OK); /* an id that records nothing */
  CHECK(stepprof_region_exit(empty) == STEPPROF_OK);
  CHECK(stepprof_set_padding_fraction(0.25) == STEPPROF_OK);
  CHECK(stepprof_set_padding_fraction(2.0) == STEPPROF_ERR_ARGUMENT);
  CHECK(stepprof_set_device_stream(NULL) == STEPPROF_ERR_STATE); /* device timing is off */
  CHECK(stepprof_end_update(rec, 7) == STEPPROF_OK);

  /* A mismatched exit is counted, not fatal, and says so (it returned STEPPROF_OK). */
  CHECK(stepprof_region_enter(outer) == STEPPROF_OK);
  CHECK(stepprof_region_exit(inner) == STEPPROF_WARN_MISMATCH);
  CHECK_CONTAINS(stepprof_last_error(), "not the innermost open region");
  CHECK(stepprof_region_exit(outer) == STEPPROF_OK);
  CHECK(stepprof_error_count(rec, "mismatched_exit") == 1);
  /* + bad_argument 15: the three unknown ids, the NULL array, the three NULL register
   * arguments, the negative frames, the shape without dimensions, the bad index, the huge
   * dimension and frame count, the empty name, the padding fraction 2.0, the counter add
   * above 2^53 */
  CHECK(stepprof_error_count(rec, "bad_argument") == 15);
  CHECK(stepprof_error_count(rec, NULL) == 16);
  /* A kind that does not exist (a typo) was a count of 0, indistinguishable from none. */
  CHECK(stepprof_error_count(rec, "write_fail") == STEPPROF_ERR_ARGUMENT);
  CHECK_CONTAINS(stepprof_last_error(), "unknown error kind \"write_fail\"");
  CHECK_CONTAINS(stepprof_last_error(), "write_failed");
  CHECK(stepprof_error_count(rec, "log_deleted") == 0); /* a kind not counted yet */
  /* Per-micro-batch detail: two micro-batches written, one rejected (40 tokens > 30). */
  const int64_t mb_frames[2] = {9, 3}, mb_tokens[2] = {40, 20};
  CHECK(stepprof_microbatch(mb_frames, mb_tokens, 2, "c_inner", 48) == STEPPROF_OK);
  CHECK(stepprof_microbatch(mb_frames, NULL, 2, NULL, -1) == STEPPROF_OK);
  CHECK(stepprof_microbatch(mb_frames, mb_tokens, 2, NULL, 30) == STEPPROF_ERR_ARGUMENT);
  CHECK_CONTAINS(stepprof_last_error(), "padded_length");
  /* Samples without their frames or tokens: it wrote {} (the sample count lost). */
  CHECK(stepprof_microbatch(NULL, NULL, 3, NULL, -1) == STEPPROF_ERR_ARGUMENT);
  CHECK_CONTAINS(stepprof_last_error(), "samples is 3 but frames and tokens are both NULL");
  /* A path that cannot be a region name (over 1024 bytes): recorded without it, and said
   * (it returned STEPPROF_OK with the path gone). */
  {
    char long_path[1100];
    memset(long_path, 'p', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    CHECK(stepprof_microbatch(NULL, mb_tokens, 2, long_path, -1) == STEPPROF_WARN_ERRORS);
    CHECK_CONTAINS(stepprof_last_error(), "recorded without it");
  }
  CHECK(stepprof_end_update(rec, 8) == STEPPROF_OK);

  char info[512];
  size_t needed = 0;
  memcpy(info, "stale", 6);
  CHECK(stepprof_info_json(rec, info, 4, &needed) == STEPPROF_ERR_ARGUMENT);
  CHECK(needed > 4);
  CHECK(info[0] == '\0'); /* too small: an empty string, not what was there before */
  /* A NULL buffer with a size: said as such (it was "buffer too small"). */
  CHECK(stepprof_info_json(rec, NULL, 100, &needed) == STEPPROF_ERR_ARGUMENT);
  CHECK_CONTAINS(stepprof_last_error(), "buf is NULL but cap is 100");
  CHECK(stepprof_info_json(rec, info, sizeof info, &needed) == STEPPROF_OK);
  CHECK_CONTAINS(info, "\"device_timing\":\"off: disabled by the recorder options\"");
  CHECK_CONTAINS(info, "\"records_written\":3");
  CHECK(strcmp(stepprof_clock_name(), "tsc") == 0 || strcmp(stepprof_clock_name(), "steady_clock") == 0);
  CHECK(strcmp(stepprof_status_name(STEPPROF_WARN_IO), "warn-io") == 0);
  CHECK(strcmp(stepprof_status_name(STEPPROF_WARN_MISMATCH), "warn-mismatch") == 0);

  CHECK(stepprof_close(rec) == STEPPROF_WARN_ERRORS);
  CHECK_CONTAINS(stepprof_last_error(), "mismatched_exit 1");
  /* The closed session's counts, by NULL (the handle is freed): ERR_STATE before, where
   * C++ error_counts() gave them. */
  CHECK(stepprof_error_count(NULL, "mismatched_exit") == 1);
  CHECK(stepprof_error_count(NULL, NULL) >= 16);
  CHECK(stepprof_error_count(NULL, "write_fail") == STEPPROF_ERR_ARGUMENT);

  const char* text = read_file(path);
  CHECK(text != NULL);
  if (text) {
    CHECK_CONTAINS(text, "{\"type\":\"config\",\"schema\":1,\"run_id\":\"c-test\",\"rank\":0,\"world_size\":1,");
    CHECK_CONTAINS(text, "\"micro_batch\":2,\"region_roles\":{\"c_outer\":\"data\"}}\n");
    CHECK_CONTAINS(text, "\"step\":7,");
    CHECK_CONTAINS(text, "\"calls\":{\"c_outer\":1,\"c_inner\":2},\"parents\":{\"c_outer\":null,\"c_inner\":\"c_outer\"}");
    CHECK_CONTAINS(text, "\"counts\":{\"samples\":8},\"frame_histogram\":{\"3\":2},\"input_shapes\":{\"(2, 128)\":1},"
                         "\"sample_indices\":[5,6],\"padding_fraction\":0.25,\"recorder_errors\":{\"bad_argument\":15}}\n");
    CHECK_CONTAINS(text, "\"step\":8,");
    CHECK_CONTAINS(text, "\"calls\":{\"c_outer\":1},\"parents\":{\"c_outer\":null},\"microbatches\":[{\"path\":\"c_inner\","
                         "\"frames\":[9,3],\"tokens\":[40,20],\"padded_length\":48},{\"frames\":[9,3]},"
                         "{\"tokens\":[40,20]}],\"recorder_errors\":{\"mismatched_exit\":1,\"bad_argument\":3}}\n");
  }
  remove(path);

  /* Every status other than ok leaves its own message: a status passed on bare (here
   * stepprof_flush on a recorder whose log could not be made, since procfs lets no file
   * be made) left the previous failed call's message in place. */
  stepprof_recorder* nolog = NULL;
  CHECK(stepprof_open("/proc/stepprof-c-test.jsonl", 0, 1, NULL, "{\"print_warnings\": false}", &nolog) ==
        STEPPROF_WARN_IO);
  CHECK(nolog != NULL);
  CHECK(stepprof_sample_indices(NULL, 2) == STEPPROF_ERR_ARGUMENT);
  CHECK_CONTAINS(stepprof_last_error(), "stepprof_sample_indices");
  CHECK(stepprof_flush(nolog) == STEPPROF_WARN_IO);
  CHECK_CONTAINS(stepprof_last_error(), "stepprof_flush: the log could not be written or persisted");
  stepprof_close(nolog);

  /* Data past max_update_data_bytes: three calls returned STEPPROF_OK with their data
   * dropped (counted as update_data_full), so a C caller could not tell (found by a
   * helper); they return STEPPROF_ERR_NO_MEMORY with a message, as stepprof_microbatch. */
  {
    stepprof_recorder* small = NULL;
    CHECK(stepprof_open(path, 0, 1, NULL, "{\"max_update_data_bytes\": 200, \"print_warnings\": false}", &small) ==
          STEPPROF_OK);
    int64_t many[20];
    for (int i = 0; i < 20; ++i) many[i] = i;
    const int64_t dims[2] = {4, 128};
    CHECK(stepprof_sample_indices(many, 20) == STEPPROF_OK); /* 160 bytes of 200 */
    CHECK(stepprof_sample_indices(many, 20) == STEPPROF_ERR_NO_MEMORY);
    CHECK_CONTAINS(stepprof_last_error(), "stepprof_sample_indices: out of memory or past max_update_data_bytes");
    CHECK(stepprof_frame_histogram_add(3, 1) == STEPPROF_ERR_NO_MEMORY);
    CHECK_CONTAINS(stepprof_last_error(), "stepprof_frame_histogram_add: out of memory or past max_update_data_bytes");
    CHECK(stepprof_input_shape(dims, 2) == STEPPROF_ERR_NO_MEMORY);
    CHECK_CONTAINS(stepprof_last_error(), "stepprof_input_shape: out of memory or past max_update_data_bytes");
    CHECK(stepprof_frame_histogram_add(3, 0) == STEPPROF_OK); /* nothing to store */
    /* A bad value is a bad argument, whatever room is left (it was update_data_full here). */
    CHECK(stepprof_frame_histogram_add(3, 8589934592LL) == STEPPROF_ERR_ARGUMENT);
    CHECK(stepprof_error_count(small, "bad_argument") == 1);
    CHECK(stepprof_error_count(small, "update_data_full") == 3);
    /* A histogram add that takes its bucket past 2^32 samples: refused, and said so. */
    CHECK(stepprof_end_update(small, 0) == STEPPROF_OK);
    CHECK(stepprof_frame_histogram_add(5, 4294967296LL) == STEPPROF_OK);
    CHECK(stepprof_frame_histogram_add(5, 1) == STEPPROF_ERR_ARGUMENT);
    CHECK_CONTAINS(stepprof_last_error(), "would pass 2^32");
    CHECK(stepprof_close(small) == STEPPROF_WARN_ERRORS);
    remove(path);
  }

  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("all C ABI checks passed\n");
  return failures ? 1 : 0;
}
