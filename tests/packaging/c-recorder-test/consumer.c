/* Records three optimizer updates through the C API and checks the calls' statuses. */
#include <stdio.h>
#include <stepprof/stepprof.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  stepprof_recorder* rec = NULL;
  if (stepprof_open(argv[1], 0, 1, "{\"micro_batch\": 4}", "{\"device_timing\": \"off\"}", &rec) != STEPPROF_OK) {
    fprintf(stderr, "open: %s\n", stepprof_last_error());
    return 1;
  }
  stepprof_region_id fwd;
  stepprof_counter_id samples;
  if (stepprof_region_register("forward", &fwd) != STEPPROF_OK) return 1;
  if (stepprof_counter_register("samples", &samples) != STEPPROF_OK) return 1;
  for (int step = 0; step < 3; ++step) {
    stepprof_region_enter(fwd);
    stepprof_region_exit(fwd);
    stepprof_counter_add(samples, 4);
    if (stepprof_end_update(rec, step) != STEPPROF_OK) return 1;
  }
  return stepprof_close(rec) == STEPPROF_OK ? 0 : 1;
}
