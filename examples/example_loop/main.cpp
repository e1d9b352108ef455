// stepprof-example-loop: a CPU-only training loop shaped like the real run in
// examples/qwen-vggt (a VLM with a geometry encoder), instrumented with the recorder.
//
//   stepprof-example-loop --out DIR --updates N    -> DIR/rank0.jsonl
//   stepprof report DIR/rank0.jsonl                 (nesting from the recorded parents)
//
// Per optimizer update: a data-fetch region, then `accumulation` micro-batches, each with
// a forward region holding a geometry encoder that takes the batched path when every
// sample of the micro-batch has the same number of frames and the per-sample fallback
// otherwise (as in the real run), a backward-like region, and at the last micro-batch
// the optimizer step. The work is real arithmetic on float arrays, sized by the data:
// frames for the encoders, padded token slots for the language part.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "stepprof/stepprof.hpp"

namespace {

constexpr int kDim = 128;           // feature width of a frame
constexpr int kLayers = 4;          // encoder layers applied to every frame
constexpr int kMaxFrames = 9;       // frames per sample: 1..9, as in the real run
constexpr std::size_t kParams = 1 << 20;  // "model" parameters the optimizer updates

struct Sample {
  std::int64_t index;   // dataset index
  int frames;           // 1..kMaxFrames
  int tokens;           // valid (non-padding) tokens
  int supervised;       // tokens in the loss
};

// The synthetic dataset: most samples have 9 frames (the real log: 13 of 16).
class Dataset {
 public:
  explicit Dataset(std::uint64_t seed) : rng_(seed) {}
  Sample next() {
    std::uniform_real_distribution<double> u(0, 1);
    Sample s{};
    s.index = std::uniform_int_distribution<std::int64_t>(0, 2'300'000)(rng_);
    s.frames = u(rng_) < 0.8 ? kMaxFrames : std::uniform_int_distribution<int>(1, kMaxFrames - 1)(rng_);
    s.tokens = 300 + 100 * s.frames + std::uniform_int_distribution<int>(0, 400)(rng_);
    s.supervised = std::uniform_int_distribution<int>(2, 8)(rng_);
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

// Pseudo-weights and activations: real memory traffic and arithmetic.
struct Model {
  std::vector<float> w_geometry = std::vector<float>(kDim * kDim);
  std::vector<float> w_vision = std::vector<float>(kDim * kDim);
  std::vector<float> params = std::vector<float>(kParams, 0.01f);
  std::vector<float> grads = std::vector<float>(kParams, 0.0f);
  Model() {
    for (int i = 0; i < kDim * kDim; ++i) {
      w_geometry[static_cast<std::size_t>(i)] = std::sin(0.001f * static_cast<float>(i));
      w_vision[static_cast<std::size_t>(i)] = std::cos(0.002f * static_cast<float>(i));
    }
  }
};

// y = tanh(W x) for `n` frames of width kDim, 4 frames at a time (reusing each row of W).
void encode_blocked(const std::vector<float>& w, std::vector<float>& x, int n) {
  std::vector<float> y(x.size());
  for (int f0 = 0; f0 < n; f0 += 4) {
    const int nb = std::min(4, n - f0);
    for (int r = 0; r < kDim; ++r) {
      const float* row = &w[static_cast<std::size_t>(r) * kDim];
      float acc[4] = {0, 0, 0, 0};
      for (int b = 0; b < nb; ++b) {
        const float* xf = &x[static_cast<std::size_t>(f0 + b) * kDim];
        for (int c = 0; c < kDim; ++c) acc[b] += row[c] * xf[c];
      }
      for (int b = 0; b < nb; ++b) y[static_cast<std::size_t>(f0 + b) * kDim + static_cast<std::size_t>(r)] = std::tanh(acc[b]);
    }
  }
  x.swap(y);
}

// The per-sample fallback's fixed cost: preparing the encoder for one call
// (normalizing a copy of the weights), which the batched path pays once per micro-batch.
std::vector<float> prepare_encoder(const std::vector<float>& w) {
  std::vector<float> p(w);
  for (int r = 0; r < kDim; ++r) {
    float norm = 0;
    for (int c = 0; c < kDim; ++c) norm += p[static_cast<std::size_t>(r * kDim + c)] * p[static_cast<std::size_t>(r * kDim + c)];
    norm = 1.0f / std::sqrt(norm + 1e-6f);
    for (int c = 0; c < kDim; ++c) p[static_cast<std::size_t>(r * kDim + c)] *= norm;
  }
  return p;
}

std::vector<float> frames_of(const Sample& s) {
  std::vector<float> x(static_cast<std::size_t>(s.frames) * kDim);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((s.index + static_cast<std::int64_t>(i)) % 17) / 17.0f;
  return x;
}

// A language-model-like pass over the padded token tensor: work per token slot.
float token_pass(int slots, int repeats) {
  float h = 0.5f;
  for (int r = 0; r < repeats; ++r)
    for (int t = 0; t < slots; ++t) h = h * 0.999f + 0.001f * std::sin(static_cast<float>(t) * 0.01f + h);
  return h;
}

struct Args {
  std::string out;
  int updates = 20;
  int micro_batch = 4;
  int accumulation = 2;
  std::uint64_t seed = 42;
  std::int64_t first_step = 1;
  bool progress = false;
  bool append = false;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"A CPU training loop shaped like a VLM run, recorded with stepprof (writes DIR/rank0.jsonl)"};
  app.add_option("--out", a.out, "output directory (created if missing)")->required();
  app.add_option("--updates", a.updates, "optimizer updates to run")->check(CLI::Range(1, 1000000));
  app.add_option("--micro-batch", a.micro_batch, "samples per micro-batch")->check(CLI::Range(1, 256));
  app.add_option("--accumulation", a.accumulation, "micro-batches per update")->check(CLI::Range(1, 64));
  app.add_option("--seed", a.seed, "data seed");
  app.add_option("--first-step", a.first_step, "index of the first update");
  app.add_flag("--append", a.append,
               "append to DIR/rank0.jsonl instead of truncating it, as a job resumed from a checkpoint does (with "
               "--first-step at the step after the checkpoint)");
  app.add_flag("--progress", a.progress, "print \"step N\" on stdout (flushed) after each update's record is written");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its own codes (105 for a value that is not a number, ...)
    // become 2, as for the stepprof command: a bad command line.
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) {
    std::fprintf(stderr, "stepprof-example-loop: cannot create %s: %s\n", a.out.c_str(), ec.message().c_str());
    return 2;
  }

  stepprof::Options o;
  o.path = (std::filesystem::path(a.out) / "rank{rank}.jsonl").string();
  o.rank = 0;
  o.world_size = 1;
  o.append = a.append;
  o.config_json = "{\"micro_batch\": " + std::to_string(a.micro_batch) +
                  ", \"accumulation\": " + std::to_string(a.accumulation) +
                  ", \"global_batch\": " + std::to_string(a.micro_batch * a.accumulation) +
                  ", \"seed\": " + std::to_string(a.seed) + ", \"max_steps\": " + std::to_string(a.updates) +
                  ", \"first_step\": " + std::to_string(a.first_step) +
                  ", \"last_step\": " + std::to_string(a.first_step + a.updates - 1) +
                  ", \"model\": \"stepprof-example-loop (CPU)\", \"note\": \"CPU-only example: host times only; "
                  "nested regions overlap.\"}";
  o.region_alternatives = {{"vggt_batched", "geometry"}, {"vggt_single", "geometry"}};
  o.region_roles = {{"batch_fetch_and_count", "data"},
                    {"backward_and_communication", "communication"},
                    {"deepspeed_step", "optimizer"}};
  std::string message;
  if (stepprof::open(o, &message) < stepprof::Status::kOk) {
    std::fprintf(stderr, "stepprof-example-loop: %s\n", message.c_str());
    return 2;
  }

  Dataset data(a.seed);
  Model model;
  float sink = 0;
  for (std::int64_t step = a.first_step; step < a.first_step + a.updates; ++step) {
    std::vector<std::vector<Sample>> micro(static_cast<std::size_t>(a.accumulation));
    {
      STEPPROF_REGION("batch_fetch_and_count");
      std::vector<std::int64_t> indices;
      for (auto& mb : micro) {
        for (int i = 0; i < a.micro_batch; ++i) {
          const Sample s = data.next();
          mb.push_back(s);
          indices.push_back(s.index);
          STEPPROF_FRAME_HISTOGRAM(s.frames, 1);
          STEPPROF_COUNT("frames", s.frames);
          STEPPROF_COUNT("valid_tokens", s.tokens);
          STEPPROF_COUNT("supervised_tokens", s.supervised);
          const auto decoded = frames_of(s);  // "decode" the sample's frames
          sink += std::accumulate(decoded.begin(), decoded.end(), 0.0f);
        }
      }
      STEPPROF_COUNT("samples", a.micro_batch * a.accumulation);
      stepprof::sample_indices(indices);
    }

    for (std::size_t m = 0; m < micro.size(); ++m) {
      const auto& mb = micro[m];
      STEPPROF_REGION("micro_step_total");
      STEPPROF_COUNT("micro_steps", 1);
      int padded = 0;
      {
        STEPPROF_REGION("forward_and_loss");
        {
          STEPPROF_REGION("prepare_inputs");
          for (const auto& s : mb) padded = std::max(padded, s.tokens);
          std::vector<std::int32_t> tokens(static_cast<std::size_t>(padded) * mb.size(), 0);
          for (std::size_t b = 0; b < mb.size(); ++b)
            std::fill_n(tokens.begin() + static_cast<std::ptrdiff_t>(b * static_cast<std::size_t>(padded)), mb[b].tokens, 1);
          sink += static_cast<float>(std::accumulate(tokens.begin(), tokens.end(), 0));
          STEPPROF_INPUT_SHAPE(static_cast<std::int64_t>(mb.size()), padded);
          STEPPROF_COUNT("token_slots", static_cast<std::int64_t>(mb.size()) * padded);
        }
        {
          STEPPROF_REGION("vision_forward");
          for (const auto& s : mb) {
            auto x = frames_of(s);
            encode_blocked(model.w_vision, x, 1);  // one image summary per sample
            sink += x[0];
          }
        }
        {
          STEPPROF_REGION("geometry_total");
          STEPPROF_COUNT("geometry_microbatches", 1);
          const bool same_frames =
              std::all_of(mb.begin(), mb.end(), [&](const Sample& s) { return s.frames == mb.front().frames; });
          int frames = 0;
          for (const auto& s : mb) frames += s.frames;
          if (same_frames) {  // one call for the whole micro-batch
            STEPPROF_REGION("vggt_batched");
            STEPPROF_COUNT("vggt_batched_microbatches", 1);
            STEPPROF_COUNT("vggt_batched_samples", static_cast<std::int64_t>(mb.size()));
            STEPPROF_COUNT("vggt_batched_frames", frames);
            const auto w = prepare_encoder(model.w_geometry);
            std::vector<float> x;
            for (const auto& s : mb) {
              const auto f = frames_of(s);
              x.insert(x.end(), f.begin(), f.end());
            }
            for (int l = 0; l < kLayers; ++l) encode_blocked(w, x, frames);
            sink += x[0];
          } else {  // the fallback: one call per sample
            STEPPROF_COUNT("vggt_single_microbatches", 1);
            for (const auto& s : mb) {
              STEPPROF_REGION("vggt_single");
              STEPPROF_COUNT("vggt_single_samples", 1);
              STEPPROF_COUNT("vggt_single_frames", s.frames);
              const auto w = prepare_encoder(model.w_geometry);
              auto x = frames_of(s);
              for (int f = 0; f < s.frames; ++f) {  // frame by frame, no reuse of W's rows
                std::vector<float> one(x.begin() + f * kDim, x.begin() + (f + 1) * kDim);
                for (int l = 0; l < kLayers; ++l) encode_blocked(w, one, 1);
                sink += one[0];
              }
            }
          }
        }
        {
          STEPPROF_REGION("language_forward");
          sink += token_pass(static_cast<int>(mb.size()) * padded, 4);
        }
      }
      {
        STEPPROF_REGION("backward_and_engine_step");
        {
          STEPPROF_REGION("backward_and_communication");
          sink += token_pass(static_cast<int>(mb.size()) * padded, 8);  // backward ~ 2x forward
          for (std::size_t i = 0; i < kParams; i += 64) model.grads[i] += 1e-3f;
        }
        if (m + 1 == micro.size()) {  // the accumulation boundary
          STEPPROF_REGION("deepspeed_step");
          double norm = 0;
          {
            STEPPROF_REGION("gradient_clipping");
            for (float g : model.grads) norm += static_cast<double>(g) * g;
            norm = std::sqrt(norm);
          }
          {
            STEPPROF_REGION("optimizer");
            const float scale = norm > 1.0 ? static_cast<float>(1.0 / norm) : 1.0f;
            for (std::size_t i = 0; i < kParams; ++i) {
              model.params[i] -= 1e-4f * scale * model.grads[i];
              model.grads[i] = 0;
            }
          }
        }
      }
    }
    stepprof::end_update(step);
    if (a.progress) {
      std::printf("step %lld\n", static_cast<long long>(step));
      std::fflush(stdout);
    }
  }

  std::string close_message;
  const auto st = stepprof::close(&close_message);
  std::printf("stepprof-example-loop: %d updates written to %s (checksum %.3f)\n", a.updates,
              (std::filesystem::path(a.out) / "rank0.jsonl").string().c_str(), static_cast<double>(sink));
  return st == stepprof::Status::kOk ? 0 : 1;
}
