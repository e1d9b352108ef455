// A program outside stepprof that records with stepprof::recorder and, when built with
// the analyzer (STEPPROF_CONSUMER_READS), reads its log back with stepprof::stepprof.
// Usage: consumer LOG_PATH. Exit 0 when the log holds what was recorded.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <stepprof/stepprof.h>
#include <stepprof/stepprof.hpp>
#ifdef STEPPROF_CONSUMER_READS
#include <stepprof/reader.hpp>
#endif

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  stepprof::Options o;
  o.path = argv[1];
  o.run_id = "consumer";
  o.device_timing = stepprof::DeviceTiming::kOff;
  if (stepprof::open(o) != stepprof::Status::kOk) return 1;
  { STEPPROF_REGION("consumer_region"); }
  stepprof_counter_id c = 0;
  stepprof_counter_register("samples", &c);
  stepprof_counter_add(c, 3);
  if (stepprof::end_update(1) != stepprof::Status::kOk || stepprof::close() != stepprof::Status::kOk) return 1;

  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find(R"("calls":{"consumer_region":1})") == std::string::npos ||
      text.str().find(R"("counts":{"samples":3})") == std::string::npos) {
    std::fprintf(stderr, "unexpected log:\n%s", text.str().c_str());
    return 1;
  }
#ifdef STEPPROF_CONSUMER_READS
  stepprof::Diagnostics diag;
  const auto data = stepprof::read_logs({argv[1]}, {}, diag);
  if (diag.total() != 0 || data.update_count() != 1) return 1;
#endif
  std::printf("consumer: ok\n");
  return 0;
}
