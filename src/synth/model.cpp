#include "model.hpp"

#include <algorithm>
#include <array>
#include <string>

#include <nlohmann/json.hpp>

#include "stepprof/record_writer.hpp"
#include "stepprof/schema.hpp"

namespace stepprof::synth::detail {
namespace {

// Regions of the real log, with their parents (examples/qwen-vggt/hierarchy.txt).
enum Region : int {
  kFetch, kPrepare, kVision, kBatched, kSingle, kGeometry, kLanguage, kForward,
  kBwdComm, kEngine, kMicro, kDeepspeed, kClip, kOptimizer, kRegionCount
};
constexpr std::array<const char*, kRegionCount> kRegionName = {
    "batch_fetch_and_count", "prepare_inputs",   "vision_forward",   "vggt_batched",
    "vggt_single",           "geometry_total",   "language_forward", "forward_and_loss",
    "backward_and_communication", "backward_and_engine_step", "micro_step_total",
    "deepspeed_step",        "gradient_clipping", "optimizer"};
constexpr int kTop = -1;
constexpr std::array<int, kRegionCount> kParent = {kTop,     kForward,   kForward, kGeometry, kGeometry,
                                                   kForward, kForward,   kMicro,   kEngine,   kMicro,
                                                   kTop,     kEngine,    kDeepspeed, kDeepspeed};

enum CounterName : int {
  cMicroSteps, cSamples, cTokenSlots, cFrames, cBatchedSamples, cBatchedFrames, cGeometryMbs,
  cBatchedMbs, cSingleSamples, cSingleFrames, cFallbackMbs, cValidTokens, cSupervisedTokens, kCounterCount
};
constexpr std::array<const char*, kCounterCount> kCounterName = {
    "micro_steps",          "samples",              "token_slots",           "frames",
    "vggt_batched_samples", "vggt_batched_frames",  "geometry_microbatches", "vggt_batched_microbatches",
    "vggt_single_samples",  "vggt_single_frames",   "vggt_fallback_microbatches",
    "valid_tokens",         "supervised_tokens"};

// Streams of random draws (the first coordinate of every draw).
enum Stream : std::uint64_t {
  sJitter = 1, sFetch, sFrames, sShort, sLength, sIndex, sBackground, sVision, sHost, sOutside,
  sSupervised, sPrepare, sOptimizer
};

// Costs fitted to the real log (docs/synth.md derives each one) [ms].
constexpr double kFetchMs = 48.0;                 // batch_fetch_and_count per update
constexpr double kPrepareMs = 0.43;               // prepare_inputs per micro-batch (device)
constexpr double kPrepareHostRatio = 0.42;        // its host time / device time
constexpr double kVisionMs = 272.0;               // vision_forward per micro-batch
constexpr double kBatchedMsPerFrame = 24.8;       // vggt_batched per frame
constexpr double kSingleMsPerFrame = 43.0;        // vggt_single per frame ...
constexpr double kSingleMsPerCall = 20.0;         // ... plus per sample (one call per sample)
constexpr double kGeometrySelfMs = 1.0;           // geometry_total outside its children
constexpr double kLanguageMsPerSlot = 0.0548;     // language_forward per token slot
constexpr double kForwardSelfMs = 3.7;            // forward_and_loss outside its children
constexpr double kBackwardPerForward = 1.55;      // backward / (vision + language forward)
constexpr double kAllReduceMs = 550.0;            // gradient all-reduce when nobody waits
constexpr double kEngineSelfMs = 0.05;            // backward_and_engine_step outside its children
constexpr double kMicroSelfMs = 11.7;             // micro_step_total outside its children
constexpr double kDeepspeedSelfMs = 87.4;         // deepspeed_step outside its children
constexpr double kClipMs = 0.069, kOptimizerMs = 0.0204;
constexpr double kOutsideMs = 15.0;               // wall_ms outside every top-level region
constexpr double kJitter = 0.04;                  // compute speed varies uniformly by up to 4 %
constexpr std::int64_t kDatasetSize = 2'400'000;  // sample indices are drawn from [0, this)

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Device times come from CUDA events as float32 milliseconds, as in the real log.
double f32(double x) { return static_cast<double>(static_cast<float>(x)); }

std::uint64_t u64(std::int64_t v) { return static_cast<std::uint64_t>(v); }

}  // namespace

std::uint64_t hash(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  std::uint64_t h = splitmix(seed);
  for (std::uint64_t v : {a, b, c, d}) h = splitmix(h ^ v);
  return h;
}

double uniform(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  return static_cast<double>(hash(seed, a, b, c, d) >> 11) * 0x1.0p-53;
}

Model::Model(const Options& options) : opt_(options) {
  for (const auto& f : opt_.fallbacks) fallback_mbs_[key(f.rank, f.step)] = f.microbatches;
  for (const auto& s : opt_.padding_spikes) spike_length_[key(s.rank, s.step)] = spike_length(s);
  for (const char* n : kRegionName) regions_.intern(n);
  for (const char* n : kCounterName) counters_.intern(n);
}

double Model::straggler_factor(std::int64_t rank, std::int64_t step) const {
  double f = 1;
  for (const auto& s : opt_.stragglers)
    if (s.rank == rank && step >= s.first_step && step <= s.last_step) f *= s.factor;
  return f;
}

UpdatePlan Model::plan(std::int64_t rank, std::int64_t step, bool with_straggler) const {
  const std::uint64_t seed = opt_.seed, r = u64(rank), s = u64(step);
  UpdatePlan p;
  p.speed = (1.0 + kJitter * uniform(seed, sJitter, r, s)) * (with_straggler ? straggler_factor(rank, step) : 1.0);
  p.fetch_ms = kFetchMs * (0.95 + 0.13 * uniform(seed, sFetch, r, s));
  std::int64_t fallback_mbs = 0, spike = 0;
  if (auto it = fallback_mbs_.find(key(rank, step)); it != fallback_mbs_.end()) fallback_mbs = it->second;
  if (auto it = spike_length_.find(key(rank, step)); it != spike_length_.end()) spike = it->second;
  p.injected_fallback = fallback_mbs > 0;

  const std::int64_t batch = opt_.micro_batch;
  p.arrival_ms = p.fetch_ms;
  for (std::int64_t m = 0; m < opt_.accumulation; ++m) {
    const std::uint64_t mu = u64(m);
    MicroBatch mb;
    mb.mixed = m < fallback_mbs || uniform(seed, sBackground, r, s, mu) < opt_.fallback_rate;
    p.any_mixed = p.any_mixed || mb.mixed;
    mb.frames.assign(static_cast<std::size_t>(batch), kFullFrames);
    if (mb.mixed) {
      // 1 to 3 samples (at least one, at most batch - 1 when batch > 1) with 1..8 frames.
      const std::int64_t most = std::max<std::int64_t>(1, std::min<std::int64_t>(3, batch - 1));
      const auto n_short = 1 + static_cast<std::int64_t>(uniform(seed, sShort, r, s, mu) * static_cast<double>(most));
      for (std::int64_t j = 0; j < n_short; ++j)
        mb.frames[static_cast<std::size_t>(batch - 1 - j)] =
            1 + static_cast<std::int64_t>(uniform(seed, sFrames, r, s, mu * 1024 + u64(j)) * (kFullFrames - 1));
    }
    for (std::int64_t i = 0; i < batch; ++i) {
      const std::uint64_t sample = mu * 1'000'003ull + u64(i);
      std::int64_t len = kMinLength + static_cast<std::int64_t>(uniform(seed, sLength, r, s, sample) *
                                                                static_cast<double>(kMaxLength - kMinLength + 1));
      if (spike && m == 0 && i == 0) len = spike;
      mb.lengths.push_back(len);
      mb.indices.push_back(static_cast<std::int64_t>(hash(seed, sIndex, r, s, sample) % kDatasetSize));
      mb.padded = std::max(mb.padded, len);
    }

    std::int64_t frames = 0;
    for (auto f : mb.frames) frames += f;
    mb.prepare = kPrepareMs * (0.9 + 0.2 * uniform(seed, sPrepare, r, s, mu));
    mb.vision = kVisionMs * p.speed * (0.99 + 0.02 * uniform(seed, sVision, r, s, mu));
    if (mb.mixed)
      mb.geometry_path = (kSingleMsPerFrame * static_cast<double>(frames) + kSingleMsPerCall * static_cast<double>(batch)) * p.speed;
    else
      mb.geometry_path = kBatchedMsPerFrame * static_cast<double>(frames) * p.speed;
    mb.geometry_self = kGeometrySelfMs;
    mb.language = kLanguageMsPerSlot * static_cast<double>(mb.padded * batch) * p.speed;
    mb.forward_self = kForwardSelfMs;
    mb.backward = kBackwardPerForward * (mb.vision + mb.language);
    mb.engine_self = kEngineSelfMs;
    mb.micro_self = kMicroSelfMs;
    p.arrival_ms += mb.before_sync();
    p.mbs.push_back(std::move(mb));
  }
  return p;
}

UpdateRecord Model::record(const UpdatePlan& p, std::int64_t rank, std::int64_t step, double sync_ms) const {
  const std::uint64_t seed = opt_.seed, r = u64(rank), s = u64(step);
  struct Acc {
    double device = 0, host = 0;
    std::int64_t calls = 0;
    bool used = false;
  };
  std::array<Acc, kRegionCount> acc{};
  std::vector<int> order;
  std::uint64_t draw = 0;
  // Host time of a leaf: the device time within -0.1 % .. +0.3 % (launch and sync overhead).
  auto host_of = [&](double device) { return device * (0.999 + 0.004 * uniform(seed, sHost, r, s, draw++)); };
  auto add = [&](int region, double device, double host, std::int64_t calls) {
    Acc& a = acc[static_cast<std::size_t>(region)];
    if (!a.used) {
      a.used = true;
      order.push_back(region);
    }
    a.device += f32(device);
    a.host += host;
    a.calls += calls;
  };

  const double wait = std::max(0.0, sync_ms - p.arrival_ms);
  add(kFetch, p.fetch_ms, p.fetch_ms + 0.002, 1);
  double host_total = p.fetch_ms + 0.002;

  struct Cnt {
    double value = 0;
    bool used = false;
  };
  std::array<Cnt, kCounterCount> cnt{};
  std::vector<int> corder;
  auto count = [&](int c, double v) {
    Cnt& x = cnt[static_cast<std::size_t>(c)];
    if (!x.used) {
      x.used = true;
      corder.push_back(c);
    }
    x.value += v;
  };

  UpdateRecord u;
  std::vector<std::pair<std::int64_t, std::int64_t>> hist;  // frames -> samples, first-seen order
  std::int64_t valid = 0, supervised = 0;
  const std::int64_t batch = opt_.micro_batch;
  for (std::size_t m = 0; m < p.mbs.size(); ++m) {
    const MicroBatch& mb = p.mbs[m];
    const bool last = m + 1 == p.mbs.size();
    const double prep_h = mb.prepare * kPrepareHostRatio;
    const double vis_h = host_of(mb.vision);
    const double path_h = host_of(mb.geometry_path);
    const double geo_d = mb.geometry_path + mb.geometry_self, geo_h = path_h + mb.geometry_self;
    const double lang_h = host_of(mb.language);
    const double fwd_d = mb.prepare + mb.vision + geo_d + mb.language + mb.forward_self;
    const double fwd_h = prep_h + vis_h + geo_h + lang_h + mb.forward_self;
    const double bwd_d = mb.backward + (last ? kAllReduceMs + wait : 0.0);
    // (The wait is host time as much as device time: the host blocks in the all-reduce.
    // Jittering it in proportion made a 100x straggler's 20-minute waits differ by seconds
    // between the clocks, which the report read as own work.)
    const double bwd_wait = last ? wait : 0.0;
    const double bwd_h = host_of(bwd_d - bwd_wait) + bwd_wait;
    double ds_d = 0, ds_h = 0, clip = 0, opt = 0;
    if (last) {
      clip = kClipMs * (0.95 + 0.1 * uniform(seed, sOptimizer, r, s, 0));
      opt = kOptimizerMs * (0.95 + 0.1 * uniform(seed, sOptimizer, r, s, 1));
      const double self = kDeepspeedSelfMs * (0.99 + 0.02 * uniform(seed, sOptimizer, r, s, 2));
      ds_d = self + clip + opt;
      ds_h = ds_d + 1.7;  // the host also pays for launching the optimizer kernels
    }
    const double eng_d = bwd_d + ds_d + mb.engine_self, eng_h = bwd_h + ds_h + mb.engine_self;
    const double micro_d = fwd_d + eng_d + mb.micro_self, micro_h = fwd_h + eng_h + mb.micro_self;

    add(kPrepare, mb.prepare, prep_h, 1);
    add(kVision, mb.vision, vis_h, 1);
    add(mb.mixed ? kSingle : kBatched, mb.geometry_path, path_h, mb.mixed ? batch : 1);
    add(kGeometry, geo_d, geo_h, 1);
    add(kLanguage, mb.language, lang_h, 1);
    add(kForward, fwd_d, fwd_h, 1);
    add(kBwdComm, bwd_d, bwd_h, 1);
    if (last) {
      add(kDeepspeed, ds_d, ds_h, 1);
      add(kClip, clip, clip * 1.01, 1);
      add(kOptimizer, opt, opt * 1.01, 1);
    }
    add(kEngine, eng_d, eng_h, 1);
    add(kMicro, micro_d, micro_h, 1);
    host_total += micro_h;

    std::int64_t frames = 0;
    for (std::size_t i = 0; i < mb.frames.size(); ++i) {
      const std::int64_t f = mb.frames[i];
      frames += f;
      auto it = std::find_if(hist.begin(), hist.end(), [&](const auto& h) { return h.first == f; });
      if (it == hist.end()) hist.emplace_back(f, 1);
      else ++it->second;
      valid += mb.lengths[i];
      supervised += uniform(seed, sSupervised, r, s, m * 1'000'003ull + i) < 0.03 ? 3 : 4;
      u.sample_indices.push_back(mb.indices[i]);
    }
    count(cMicroSteps, 1);
    count(cSamples, static_cast<double>(batch));
    count(cTokenSlots, static_cast<double>(batch * mb.padded));
    count(cFrames, static_cast<double>(frames));
    if (mb.mixed) {
      count(cSingleSamples, static_cast<double>(batch));
      count(cSingleFrames, static_cast<double>(frames));
      count(cGeometryMbs, 1);
      count(cFallbackMbs, 1);
    } else {
      count(cBatchedSamples, static_cast<double>(batch));
      count(cBatchedFrames, static_cast<double>(frames));
      count(cGeometryMbs, 1);
      count(cBatchedMbs, 1);
    }
    const std::vector<std::int64_t> dims{batch, mb.padded};
    auto shape = std::find_if(u.input_shapes.begin(), u.input_shapes.end(),
                              [&](const InputShape& x) { return x.dims == dims; });
    if (shape == u.input_shapes.end()) u.input_shapes.push_back({dims, 1});
    else ++shape->microbatches;
  }
  count(cValidTokens, static_cast<double>(valid));
  count(cSupervisedTokens, static_cast<double>(supervised));

  u.rank = rank;
  u.step = step;
  u.wall_ms = host_total + kOutsideMs * (0.9 + 0.2 * uniform(seed, sOutside, r, s));
  u.regions.reserve(order.size());
  for (int region : order) {
    const Acc& a = acc[static_cast<std::size_t>(region)];
    RegionSample rs{static_cast<NameTable::Id>(region), std::nullopt, a.device, a.host, a.calls};
    if (opt_.parents) {
      const int parent = kParent[static_cast<std::size_t>(region)];
      rs.parent = parent == kTop ? kTopLevel : static_cast<NameTable::Id>(parent);
    }
    u.regions.push_back(rs);
  }
  for (int c : corder) u.counters.push_back({static_cast<NameTable::Id>(c), cnt[static_cast<std::size_t>(c)].value});
  // Most frequent frame count first (ties in first-seen order), as in the real log.
  std::stable_sort(hist.begin(), hist.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  u.frame_histogram = std::move(hist);
  const double slots = cnt[cTokenSlots].value;
  u.padding_fraction = 1.0 - cnt[cValidTokens].value / slots;
  return u;
}

RunConfig Model::config(std::int64_t rank) const {
  auto i = [](std::int64_t v) { return std::to_string(v); };
  const std::int64_t last = opt_.first_step + opt_.updates - 1;
  std::vector<RawField> f{
      {"rank", i(rank)},
      {"world_size", i(opt_.ranks)},
      {"micro_batch", i(opt_.micro_batch)},
      {"accumulation", i(opt_.accumulation)},
      {"global_batch", i(opt_.micro_batch * opt_.accumulation * opt_.ranks)},
      {"seed", std::to_string(opt_.seed)},
      {"max_steps", i(last)},
      {"workers", "8"},
      {"prefetch", "4"},
      {"first_step", i(opt_.first_step)},
      {"last_step", i(last)},
      {"model", json_string("/models/Qwen3.5-4B")},
      {"supervised_token_loss", "true"},
      {"NCCL_NVLS_ENABLE", json_string("0")},
      {"note", json_string("Synthetic log written by `stepprof synth` in the shape of the real qwen-vggt log. "
                           "CUDA stream elapsed times include stalls; nested regions overlap.")},
      {std::string(schema::kSchema), i(schema::kVersion)},
      {std::string(schema::kRunId), json_string("synth-" + std::to_string(opt_.seed))},
  };
  if (opt_.parents) {
    f.push_back({"region_alternatives", R"({"vggt_batched": "geometry", "vggt_single": "geometry"})"});
    f.push_back({"region_roles",
                 R"({"batch_fetch_and_count": "data", "backward_and_communication": "communication", )"
                 R"("deepspeed_step": "optimizer"})"});
  }
  return make_config(std::move(f));
}

}  // namespace stepprof::synth::detail
