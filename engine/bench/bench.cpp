#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "api/openai.h"
#include "backend/backend.h"
#include "chat/render.h"
#include "cpu/parallel.h"
#include "cpu/ram_probe.h"
#include "cpu/team/worker_team.h"
#include "neural/error.h"
#include "platform/cpu_features.h"
#include "platform/thread_affinity.h"
#include "runtime/options.h"
#include "runtime/session.h"
#include "telemetry/telemetry.h"

#ifndef NEURAL_BUILD_TYPE
#define NEURAL_BUILD_TYPE "unknown"
#endif

namespace neural::bench {

namespace fs = std::filesystem;

namespace {

#ifdef NEURAL_HAVE_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

// A fixed date keeps the rendered system message, and so every prompt token, the same on every
// day the benchmark runs.
constexpr const char* kBenchDate = "2026-01-01";

std::string read_text(const fs::path& path, const char* what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{} not found or unreadable: {}", what, path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// One workload execution: the answers' TurnStats plus the telemetry records they produced.
struct Measured {
    std::vector<TurnStats> turns;
    std::vector<telemetry::TokenRecord> tokens;
    std::vector<telemetry::RequestRecord> requests;
    std::uint64_t team_fallbacks = 0;  // MoeCounters::team_fallbacks added during the turns
    // Per answer: page faults of its prompt pass plus its decode tokens, and the tokens it
    // processed (new prompt tokens + generated tokens).
    std::vector<std::uint64_t> turn_faults;
    std::vector<std::uint64_t> turn_major_faults;  // of those, major (hard) faults
    std::vector<std::int64_t> turn_tokens;
    // GPU prefill counters added during the turns (BackendCounters deltas; zero on the CPU
    // backend and for the token-by-token path).
    BackendCounters::Snapshot prefill;
};

// after - before of the prefill counters, added to `sum`.
void add_prefill_delta(BackendCounters::Snapshot& sum, const BackendCounters::Snapshot& before,
                       const BackendCounters::Snapshot& after) {
    sum.prefill_tokens += after.prefill_tokens - before.prefill_tokens;
    sum.prefill_ns += after.prefill_ns - before.prefill_ns;
    sum.prefill_launch_ns += after.prefill_launch_ns - before.prefill_launch_ns;
    sum.prefill_route_ns += after.prefill_route_ns - before.prefill_route_ns;
    sum.prefill_staging_ns += after.prefill_staging_ns - before.prefill_staging_ns;
    sum.prefill_cpu_ns += after.prefill_cpu_ns - before.prefill_cpu_ns;
    sum.prefill_cpu_wait_ns += after.prefill_cpu_wait_ns - before.prefill_cpu_wait_ns;
    sum.prefill_staged += after.prefill_staged - before.prefill_staged;
    sum.prefill_staged_bytes += after.prefill_staged_bytes - before.prefill_staged_bytes;
    sum.prefill_resident += after.prefill_resident - before.prefill_resident;
    sum.prefill_cpu_groups += after.prefill_cpu_groups - before.prefill_cpu_groups;
    sum.prefill_early += after.prefill_early - before.prefill_early;
    sum.prefill_grouped += after.prefill_grouped - before.prefill_grouped;
}

// Raises bench::Cancelled when the caller's cancel callback says so.
void check_cancel(const BenchOptions& options) {
    if (options.cancel && options.cancel()) throw Cancelled();
}

Json summarize(const Measured& m) {
    Json j;
    std::int64_t timed_tokens = 0;
    double timed_seconds = 0, prompt_seconds = 0;
    Json requests = Json::array();
    for (const TurnStats& t : m.turns) {
        timed_tokens += std::max<std::int64_t>(t.generated_tokens - 1, 0);
        timed_seconds += t.generated_tokens > 1 ? t.decode_seconds : 0.0;
        prompt_seconds += t.prompt_seconds;
        requests.push_back({{"prompt_tokens", t.prompt_tokens},
                            {"cached_tokens", t.cached_tokens},
                            {"prompt_seconds", t.prompt_seconds},
                            {"ttft_seconds", t.first_token_seconds},
                            {"decode_tokens", t.generated_tokens},
                            {"decode_seconds", t.decode_seconds}});
    }
    j["requests"] = requests;
    j["timed_tokens"] = timed_tokens;
    j["timed_seconds"] = timed_seconds;
    j["decode_tok_s"] =
        timed_seconds > 0 ? Json(static_cast<double>(timed_tokens) / timed_seconds) : Json(nullptr);
    j["prompt_seconds"] = prompt_seconds;
    j["ttft_seconds"] = m.turns.empty() ? 0.0 : m.turns.front().first_token_seconds;

    telemetry::TokenRecord sum;
    for (const auto& r : m.tokens) {
        sum.wall_ns += r.wall_ns;
        sum.cpu_kernel_ns += r.cpu_kernel_ns;
        sum.gpu_wait_ns += r.gpu_wait_ns;
        sum.graph_submit_ns += r.graph_submit_ns;
        sum.admission_ns += r.admission_ns;
        sum.sampling_ns += r.sampling_ns;
        sum.other_ns += r.other_ns;
        sum.experts_hit += r.experts_hit;
        sum.experts_missed += r.experts_missed;
        sum.experts_streamed += r.experts_streamed;
        sum.experts_split += r.experts_split;
        sum.admissions += r.admissions;
        sum.cpu_bytes += r.cpu_bytes;
        sum.page_faults += r.page_faults;
        sum.major_page_faults += r.major_page_faults;
        sum.gpu_dense_ns += r.gpu_dense_ns;
        sum.gpu_experts_ns += r.gpu_experts_ns;
        sum.gpu_experts_alone_ns += r.gpu_experts_alone_ns;
        sum.gpu_tail_ns += r.gpu_tail_ns;
    }
    const double n = static_cast<double>(m.tokens.size());
    auto per_token_ms = [&](std::uint64_t ns) {
        return n > 0 ? static_cast<double>(ns) / 1e6 / n : 0.0;
    };
    j["token_records"] = m.tokens.size();
    j["phase_ms_per_token"] = {{"wall", per_token_ms(sum.wall_ns)},
                               {"cpu_kernel", per_token_ms(sum.cpu_kernel_ns)},
                               {"gpu_wait", per_token_ms(sum.gpu_wait_ns)},
                               {"graph_submit", per_token_ms(sum.graph_submit_ns)},
                               {"admission", per_token_ms(sum.admission_ns)},
                               {"sampling", per_token_ms(sum.sampling_ns)},
                               {"other", per_token_ms(sum.other_ns)}};
    // The GPU's own time per token (CUDA backend with timed graphs; null otherwise): the
    // dense part of the layers, the resident experts (of which: on layers that left the CPU
    // idle), the tail. decode_bounds() turns them into bounds.
    j["gpu_ms_per_token"] = sum.gpu_dense_ns + sum.gpu_tail_ns > 0
                                ? Json{{"dense", per_token_ms(sum.gpu_dense_ns)},
                                       {"experts", per_token_ms(sum.gpu_experts_ns)},
                                       {"experts_alone", per_token_ms(sum.gpu_experts_alone_ns)},
                                       {"tail", per_token_ms(sum.gpu_tail_ns)}}
                                : Json(nullptr);
    const std::uint64_t looked_up = sum.experts_hit + sum.experts_missed + sum.experts_streamed;
    j["experts_hit"] = sum.experts_hit;
    j["experts_missed"] = sum.experts_missed;
    j["experts_streamed"] = sum.experts_streamed;
    j["experts_split"] = sum.experts_split;
    j["hit_rate"] =
        looked_up > 0 ? static_cast<double>(sum.experts_hit) / static_cast<double>(looked_up) : 0.0;
    j["admissions"] = sum.admissions;
    j["cpu_bytes"] = sum.cpu_bytes;
    // bytes / ns = GB/s (1e9 bytes per second)
    j["cpu_gb_s"] = sum.cpu_kernel_ns > 0 ? static_cast<double>(sum.cpu_bytes) /
                                                static_cast<double>(sum.cpu_kernel_ns)
                                          : 0.0;
    j["page_faults"] = sum.page_faults;
    j["major_page_faults"] = sum.major_page_faults;
    // The prompt passes (their own records: a prompt pass is not a decode token).
    std::uint64_t prompt_ns = 0, prompt_bytes = 0, prompt_faults = 0, prompt_major = 0;
    for (const auto& q : m.requests) {
        prompt_ns += q.prompt_cpu_kernel_ns;
        prompt_bytes += q.prompt_cpu_bytes;
        prompt_faults += q.prompt_page_faults;
        prompt_major += q.prompt_major_page_faults;
    }
    j["prompt_cpu_kernel_seconds"] = static_cast<double>(prompt_ns) / 1e9;
    j["prompt_cpu_bytes"] = prompt_bytes;
    j["prompt_cpu_gb_s"] =
        prompt_ns > 0 ? static_cast<double>(prompt_bytes) / static_cast<double>(prompt_ns) : 0.0;
    j["prompt_page_faults"] = prompt_faults;
    j["prompt_major_page_faults"] = prompt_major;
    // The first answer (a cold prompt pass) and the follow-ups (served from the prompt cache)
    // separately: page faults and faults per processed token (new prompt + generated tokens).
    std::uint64_t first_faults = 0, follow_faults = 0, first_major = 0, follow_major = 0;
    std::int64_t first_tokens = 0, follow_tokens = 0;
    for (std::size_t i = 0; i < m.turn_faults.size(); ++i) {
        (i == 0 ? first_faults : follow_faults) += m.turn_faults[i];
        (i == 0 ? first_major : follow_major) += m.turn_major_faults[i];
        (i == 0 ? first_tokens : follow_tokens) += m.turn_tokens[i];
    }
    const std::size_t follow_ups = m.turn_faults.empty() ? 0 : m.turn_faults.size() - 1;
    j["first_answer_page_faults"] = first_faults;
    j["first_answer_page_faults_per_token"] =
        first_tokens > 0 ? static_cast<double>(first_faults) / static_cast<double>(first_tokens)
                         : 0.0;
    j["first_answer_major_page_faults"] = first_major;
    j["follow_ups"] = follow_ups;
    j["follow_up_page_faults"] = follow_faults;
    j["follow_up_page_faults_per_token"] =
        follow_tokens > 0
            ? Json(static_cast<double>(follow_faults) / static_cast<double>(follow_tokens))
            : Json(nullptr);
    j["follow_up_major_page_faults"] = follow_major;
    // Expert-kernel jobs the persistent team handed to the reference team (prompt and decode);
    // 0 unless --kernel-persistent 1 met a job or state it does not support, or did not load.
    j["team_fallbacks"] = m.team_fallbacks;
    // GPU prefill (docs/CUDA.md "A prompt (prefill)"): where the prompt time went and what was
    // staged; null when no prompt ran through the GPU prefill.
    const BackendCounters::Snapshot& pf = m.prefill;
    if (pf.prefill_tokens > 0) {
        auto sec = [](std::uint64_t ns) { return static_cast<double>(ns) / 1e9; };
        j["prefill"] = {{"tokens", pf.prefill_tokens},
                        {"seconds", sec(pf.prefill_ns)},
                        {"host_launch_seconds", sec(pf.prefill_launch_ns)},
                        {"routing_sync_seconds", sec(pf.prefill_route_ns)},
                        {"staging_wait_seconds", sec(pf.prefill_staging_ns)},
                        {"cpu_multi_token_seconds", sec(pf.prefill_cpu_ns)},
                        {"cpu_wait_seconds", sec(pf.prefill_cpu_wait_ns)},
                        {"experts_staged", pf.prefill_staged},
                        {"experts_staged_early", pf.prefill_early},
                        {"staged_bytes", pf.prefill_staged_bytes},
                        {"experts_from_slots", pf.prefill_resident},
                        {"experts_on_cpu", pf.prefill_cpu_groups},
                        {"grouped_launches", pf.prefill_grouped}};
    } else {
        j["prefill"] = nullptr;
    }
    return j;
}

class Runner {
public:
    Runner(Model& model, const BenchOptions& options, std::function<void()> answered)
        : model_(model),
          options_(options),
          tel_(model.telemetry()),
          answered_(std::move(answered)) {}

    // Runs one turn of `session` and keeps its stats and token records. The cancel callback
    // is polled before the turn and on every streamed event (stopping the answer in flight).
    void turn(ChatSession& session, const TurnOptions& turn_options) {
        check_cancel(options_);
        const std::uint64_t from = tel_.tokens().published();
        const std::uint64_t requests_from = tel_.requests().published();
        const std::uint64_t fallbacks_from = tel_.moe.snapshot().team_fallbacks;
        const BackendCounters::Snapshot backend_from = model_.backend_counters().snapshot();
        bool stopped = false;
        std::function<void(const chat::ParserEvent&)> on_event;
        if (options_.cancel) {
            on_event = [&](const chat::ParserEvent&) {
                if (!stopped && options_.cancel()) {
                    stopped = true;
                    session.cancel();
                }
            };
        }
        TurnOptions watched = turn_options;
        if (options_.cancel_flag) watched.cancel = options_.cancel_flag;
        TurnResult r = session.respond(watched, on_event);
        if (stopped || r.cancelled) throw Cancelled();
        measured_.team_fallbacks += tel_.moe.snapshot().team_fallbacks - fallbacks_from;
        add_prefill_delta(measured_.prefill, backend_from, model_.backend_counters().snapshot());
        measured_.turns.push_back(r.stats);
        auto records = tel_.tokens().since(from);
        std::uint64_t faults = 0, major = 0;
        for (const auto& rec : records) {
            faults += rec.page_faults;
            major += rec.major_page_faults;
        }
        measured_.tokens.insert(measured_.tokens.end(), records.begin(), records.end());
        auto requests = tel_.requests().since(requests_from);
        for (const auto& q : requests) {
            faults += q.prompt_page_faults;
            major += q.prompt_major_page_faults;
        }
        measured_.requests.insert(measured_.requests.end(), requests.begin(), requests.end());
        measured_.turn_faults.push_back(faults);
        measured_.turn_major_faults.push_back(major);
        measured_.turn_tokens.push_back(r.stats.prompt_tokens - r.stats.cached_tokens +
                                        r.stats.generated_tokens);
        if (answered_) answered_();
    }
    Json finish() {
        Json j = summarize(measured_);
        measured_ = {};
        return j;
    }

    Json decode() {
        ChatSession s(model_);
        s.system().conversation_start_date = kBenchDate;
        s.set_reasoning(chat::ReasoningEffort::low);
        s.add_user(options_.decode_prompt);
        TurnOptions t;
        t.max_tokens = options_.decode_tokens;
        t.sampling.temperature = options_.decode_temperature;
        const telemetry::MoeCounters& c = tel_.moe;
        const std::uint64_t tokens0 = c.screened_tokens.load(),
                            rows0 = c.screened_exact_rows.load(), full0 = c.screened_full.load();
        turn(s, t);
        Json j = finish();
        // The screened lm_head (docs/KERNELS.md "Screened lm_head"): passes it served, the rows
        // it computed exactly per such pass, and the passes where it ran the whole head.
        const std::uint64_t tokens = c.screened_tokens.load() - tokens0;
        j["lm_head_screen"] = {
            {"tokens", tokens},
            {"exact_rows_per_token",
             tokens > 0 ? Json(static_cast<double>(c.screened_exact_rows.load() - rows0) /
                               static_cast<double>(tokens))
                        : Json(nullptr)},
            {"full_head_tokens", c.screened_full.load() - full0}};
        return j;
    }

    // A fresh session and a prompt of about `size` rendered tokens of pseudo-random words (seeded
    // by size and pair, so both profiles of an A/B pair see the same prompt), answered with one
    // token: the prompt time and TTFT of an uncached prompt.
    Json prompt(int size, int pair) {
        ChatSession s(model_);
        s.system().conversation_start_date = kBenchDate;
        s.set_reasoning(chat::ReasoningEffort::low);
        const Tokenizer& tok = model_.tokenizer();
        s.add_user("");
        const auto overhead = static_cast<std::int64_t>(
            chat::render_for_completion(s.conversation()).tokens(tok).size());
        const std::int64_t want = std::max<std::int64_t>(size - overhead, 1);
        static const char* const kSyllables[] = {"ka",  "lo",  "mi",  "ne", "su", "tar",
                                                 "vel", "dor", "pin", "gu", "ro", "fe",
                                                 "zan", "qi",  "ob",  "ly"};
        std::mt19937_64 rng(static_cast<std::uint64_t>(size) * 1000003u +
                            static_cast<std::uint64_t>(pair));
        std::string text;
        std::vector<TokenId> ids;
        while (static_cast<std::int64_t>(ids.size()) < want) {
            for (std::int64_t w = 0; w < want; ++w) {
                const int parts = 1 + static_cast<int>(rng() % 3);
                for (int p = 0; p < parts; ++p) text += kSyllables[rng() % 16];
                text += (rng() % 12 == 0) ? ".\n" : " ";
            }
            ids = tok.encode(text);
        }
        ids.resize(static_cast<std::size_t>(want));
        s.reset();
        s.add_user(tok.decode(ids));
        TurnOptions t;
        t.max_tokens = 1;
        t.sampling.temperature = 0;
        turn(s, t);
        Json j = finish();
        j["target_tokens"] = size;
        return j;
    }

    // The saved request bodies in order through one session (its prompt cache reused as the
    // server does: set_conversation keeps the KV cache).
    Json replay() {
        const auto files = replay_files(options_.workload_dir);
        ChatSession s(model_);
        openai::ChatRequestOptions ro;
        ro.current_date = kBenchDate;
        Json names = Json::array();
        for (const auto& f : files) {
            openai::ChatRequest req;
            try {
                req = openai::parse_chat_request(openai::parse_body(read_text(f, "replay request")),
                                                 ro);
            } catch (const Error& e) {
                fail("replay request {}: {}", f.string(), e.what());
            }
            s.set_conversation(req.system, req.developer, req.history);
            TurnOptions t;
            t.max_tokens = req.max_tokens.value_or(512);
            if (options_.max_tokens > 0) t.max_tokens = std::min(t.max_tokens, options_.max_tokens);
            t.sampling = req.sampling;
            t.stop_sequences = req.stop;
            turn(s, t);
            names.push_back(f.filename().string());
        }
        Json j = finish();
        j["files"] = names;
        return j;
    }

private:
    Model& model_;
    const BenchOptions& options_;
    telemetry::Telemetry& tel_;
    std::function<void()> answered_;
    Measured measured_;
};

Json machine_info(const BenchOptions& options) {
    Json m;
    const CpuFeatures& f = cpu_features();
    m["cpu"] = f.brand.empty() ? f.vendor : f.brand;
    m["cpu_features"] = f.summary();
    m["logical_cpus"] = available_cpus();
    m["build_type"] = NEURAL_BUILD_TYPE;
    // The GPUs as the backends see them (backend/backend.h; none in a build without CUDA).
    Json gpus = Json::array();
    std::string why;
    for (const GpuDevice& d : gpu_devices(&why)) {
        gpus.push_back({{"name", d.name},
                        {"compute", fmt::format("{}.{}", d.compute_major, d.compute_minor)},
                        {"total_bytes", d.total_bytes},
                        {"free_bytes", d.free_bytes}});
    }
    m["cuda_build"] = kCudaBuild;
    m["gpus"] = gpus;
    // The GPU backend's VRAM budget (--vram-budget; 0 = the device's free memory minus 0.5 GiB).
    m["gpu_budget_gib"] =
        options.profiles.empty() ? 0.0 : options.profiles.front().load.gpu.vram_budget_gib;
    return m;
}

Json probes(const BenchOptions& options, const LoadOptions& load) {
    Json p;
    if (!options.probes) return {{"skipped", "--no-probes"}};
    cpu::ReferenceTeam team(load.threads);
    const ReadBandwidth bw = measure_read_bandwidth(team, options.probe_bytes, 3);
    p["ram_read"] = {
        {"gb_s", bw.gb_per_s}, {"threads", bw.threads}, {"bytes", bw.bytes}, {"passes", bw.passes}};
    // Host-to-device copies to the first GPU, pinned and pageable (backend/backend.h's
    // copy_bandwidth, as `neural fit` measures them).
    std::string why;
    const std::vector<GpuDevice> gpus = gpu_devices(&why);
    if (!gpus.empty()) {
        constexpr std::size_t kBytes = std::size_t{256} << 20;
        const CopyBandwidth c = copy_bandwidth(gpus.front().index, kBytes, 5);
        p["pinned_h2d"] = c.pinned_gb_s > 0 ? Json{{"gb_s", c.pinned_gb_s}, {"bytes", kBytes}}
                                            : Json{{"skipped", c.why}};
        if (c.pageable_gb_s > 0) p["pageable_h2d"] = {{"gb_s", c.pageable_gb_s}, {"bytes", kBytes}};
    } else {
        p["pinned_h2d"] = {{"skipped", kCudaBuild ? why : std::string("built without CUDA")}};
    }
    return p;
}

Json load_json(const LoadOptions& o) {
    return {{"store", o.store.string()},
            {"kernel", o.kernel},
            {"kernel_persistent", o.kernel_persistent ? Json(*o.kernel_persistent) : Json("auto")},
            {"kdll", o.kdll.string()},
            {"threads", o.threads},
            {"backend", o.backend},
            {"vram_budget_gib", o.gpu.vram_budget_gib},
            {"pool_gib", o.gpu.pool_gib},
            {"pool_slots", o.gpu.pool_slots},
            {"static_fraction", o.gpu.static_fraction},
            {"ranking", o.gpu.ranking.string()},
            {"refresh_every", o.gpu.refresh_every},
            {"refresh_m", o.gpu.refresh_m},
            {"prefill_weight", o.gpu.prefill_weight},
            {"context", o.gpu.context},
            {"prefill_order", o.gpu.prefill_order},
            {"prefill_block", o.gpu.prefill_block},
            {"prompt_rows", o.gpu.prompt_rows},
            {"scratch", o.gpu.scratch_slots},
            {"staging_threads", o.gpu.staging_threads},
            {"prefill_cpu_tokens", o.gpu.prefill_cpu_tokens},
            {"prefill_early", o.gpu.prefill_early},
            {"grouped_gemm", o.gpu.grouped_gemm},
            {"prefill_fp16", o.gpu.prefill_fp16},
            {"pin_store", o.gpu.pin_store},
            {"stream_misses", o.gpu.stream_misses < 0    ? Json("auto")
                              : o.gpu.stream_misses == 0 ? Json(false)
                                                         : Json(true)},
            {"stream_share", o.gpu.stream_share},
            {"prompt_admit", o.gpu.prompt_admit},
            {"kv_ring", o.gpu.kv_ring},
            {"kv_checkpoints_gib", o.gpu.kv_checkpoint_gib},
            {"warmup_ram",
             o.warmup_ram_seconds == kWarmupRamAuto ? Json("auto") : Json(o.warmup_ram_seconds)},
            {"lock_ram_gib", static_cast<double>(o.lock_ram_bytes) / 1073741824.0},
            {"release_resident", o.release_resident}};
}

const std::vector<std::string> kWorkloads = {"decode", "prompt", "replay"};

}  // namespace

LoadOptions apply_profile_flags(const Json& flags, const LoadOptions& base,
                                const std::string& what) {
    if (!flags.is_object()) fail("{}: a profile must be a JSON object of engine flags", what);
    // The keys and values are the settings schema's (runtime/options.h); JSON numbers, booleans
    // and strings become the text the command line would give.
    options::Settings values;
    for (const auto& [key, value] : flags.items()) {
        const options::Setting* s = options::find(key);
        if (s == nullptr || s->key != key) {
            std::string keys;
            for (const options::Setting& row : options::settings())
                keys += (keys.empty() ? "" : ", ") + row.key;
            fail("{}: unknown profile key \"{}\" ({})", what, key, keys);
        }
        if (value.is_string()) {
            values[key] = value.get<std::string>();
        } else if (value.is_boolean()) {
            values[key] = value.get<bool>() ? "1" : "0";
        } else if (value.is_number_integer()) {
            values[key] = value.dump();
        } else if (value.is_number()) {
            values[key] = options::format_real(value.get<double>());
        } else {
            fail("{}: {}: expected {}, got {}", what, s->flag, s->allowed(), value.dump());
        }
    }
    try {
        return options::apply(values, base);
    } catch (const Error& e) {
        fail("{}: {}", what, e.what());
    }
}

Profile load_profile(const fs::path& path, const LoadOptions& base) {
    const std::string text = read_text(path, "profile");
    Profile p;
    p.name = path.stem().string();
    try {
        p.flags = Json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
        fail("profile {}: invalid JSON: {}", path.string(), e.what());
    }
    p.load = apply_profile_flags(p.flags, base, "profile " + path.string());
    return p;
}

bool one_model_at_a_time(const BenchOptions& options) {
    if (options.one_model_at_a_time) return true;
    return std::any_of(options.profiles.begin(), options.profiles.end(),
                       [](const Profile& p) { return p.load.backend != "cpu"; });
}

std::vector<std::pair<int, int>> run_order(int repeat, bool ab) {
    std::vector<std::pair<int, int>> order;
    for (int p = 0; p < repeat; ++p) {
        if (!ab) {
            order.emplace_back(p, 0);
        } else if (p % 2 == 0) {
            order.emplace_back(p, 0);
            order.emplace_back(p, 1);
        } else {
            order.emplace_back(p, 1);
            order.emplace_back(p, 0);
        }
    }
    return order;
}

std::vector<fs::path> replay_files(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        fail(
            "replay workload folder not found: {} (scripts/make_replay_workload.py writes it; "
            "--workload-dir DIR chooses another)",
            dir.string());
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) fail("replay workload folder {} has no *.json request bodies", dir.string());
    return files;
}

Json decode_bounds(const Json& w, double ram_gb_s) {
    const Json& g = w.value("gpu_ms_per_token", Json(nullptr));
    const std::uint64_t tokens = w.value("token_records", std::uint64_t{0});
    if (!g.is_object() || tokens == 0 || !(ram_gb_s > 0)) return nullptr;
    const double wall = w["phase_ms_per_token"]["wall"].get<double>();
    // bytes / (GB/s) = ns; / 1e6 = ms
    const double cpu = static_cast<double>(w["cpu_bytes"].get<std::uint64_t>()) /
                       static_cast<double>(tokens) / ram_gb_s / 1e6;
    const double dense = g["dense"].get<double>(), experts = g["experts"].get<double>(),
                 alone = g["experts_alone"].get<double>(), tail = g["tail"].get<double>();
    const double gpu = dense + experts + tail;
    const double overlap = std::max(cpu, gpu);
    const double chain = dense + tail + alone + std::max(cpu, experts - alone);
    return {{"cpu_ms", cpu},
            {"gpu_ms", gpu},
            {"overlap_ms", overlap},
            {"chain_ms", chain},
            {"wall_over_overlap", overlap > 0 ? Json(wall / overlap) : Json(nullptr)},
            {"wall_over_chain", chain > 0 ? Json(wall / chain) : Json(nullptr)}};
}

Json run_bench(const BenchOptions& options,
               const std::function<void(const std::string&)>& progress) {
    for (const auto& w : options.workloads) {
        if (std::find(kWorkloads.begin(), kWorkloads.end(), w) == kWorkloads.end()) {
            fail("unknown workload \"{}\" (decode, prompt, replay)", w);
        }
    }
    if (options.repeat < 1) fail("--repeat must be at least 1");
    if (options.ab && options.profiles.size() != 2) fail("--ab needs two profiles");
    std::vector<Profile> profiles = options.profiles;
    if (profiles.empty()) profiles.push_back(Profile{"default", Json::object(), LoadOptions{}});
    const bool replaying = std::find(options.workloads.begin(), options.workloads.end(),
                                     "replay") != options.workloads.end();
    // Fail before any loading; the replay files are also answers for the progress fraction.
    const std::size_t replay_count = replaying ? replay_files(options.workload_dir).size() : 0;
    const bool exclusive = one_model_at_a_time(options);
    check_cancel(options);

    Json report;
    report["schema"] = "neural-bench";
    report["version"] = 1;
    report["machine"] = machine_info(options);
    report["options"] = {{"model", options.model.string()},
                         {"workloads", options.workloads},
                         {"decode_tokens", options.decode_tokens},
                         {"decode_temperature", options.decode_temperature},
                         {"prompt_sizes", options.prompt_sizes},
                         {"workload_dir", options.workload_dir.string()},
                         {"max_tokens", options.max_tokens},
                         {"repeat", options.repeat},
                         {"ab", options.ab},
                         {"telemetry", options.telemetry},
                         {"one_model_at_a_time", exclusive}};
    Json profs = Json::array();
    for (const auto& p : profiles) {
        profs.push_back({{"name", p.name}, {"flags", p.flags}, {"engine", load_json(p.load)}});
    }
    report["profiles"] = profs;
    report["probes"] = probes(options, profiles[0].load);

    // Released on every way out (a cancel or an error throws through here).
    std::vector<std::unique_ptr<Model>> models(profiles.size());
    Json runs = Json::array();
    const auto order = run_order(options.repeat, options.ab);
    std::size_t answers_per_run = 0;
    for (const auto& w : options.workloads) {
        answers_per_run += w == "decode"   ? 1
                           : w == "prompt" ? options.prompt_sizes.size()
                                           : replay_count;
    }
    const double total_answers =
        static_cast<double>(std::max<std::size_t>(answers_per_run * order.size(), 1));
    std::size_t answers_done = 0;
    auto report_progress = [&](const std::string& what) {
        if (options.on_progress)
            options.on_progress(std::min(1.0, static_cast<double>(answers_done) / total_answers),
                                what);
    };
    for (std::size_t r = 0; r < order.size(); ++r) {
        check_cancel(options);
        const auto [pair, pi] = order[r];
        const Profile& prof = profiles[static_cast<std::size_t>(pi)];
        bool loaded_now = false;
        double load_seconds = 0;
        if (!models[static_cast<std::size_t>(pi)]) {
            if (exclusive) {
                // VRAM safety: the other profile's model goes before this one loads.
                for (auto& m : models) m.reset();
            }
            const auto t0 = std::chrono::steady_clock::now();
            LoadOptions load = prof.load;
            load.gpu.time_gpu = true;
            // Measurements neither learn nor read the learned expert statistics (they would
            // move the static slots between runs) unless a flag or the profile names them.
            if (!prof.flags.contains("routing_stats") && load.routing_stats == "auto") {
                load.routing_stats = "off";
            }  // the GPU's own time per token: the decode bounds
            models[static_cast<std::size_t>(pi)] = Model::load(options.model, load);
            load_seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            loaded_now = true;
            if (options.after_load) options.after_load(*models[static_cast<std::size_t>(pi)]);
            report_progress(
                fmt::format("run {}/{}: loaded profile {}", r + 1, order.size(), prof.name));
        }
        Model& model = *models[static_cast<std::size_t>(pi)];
        model.telemetry().set_enabled(options.telemetry);
        std::string current;
        Runner runner(model, options, [&] {
            ++answers_done;
            report_progress(
                fmt::format("run {}/{}: profile {}, {}", r + 1, order.size(), prof.name, current));
        });
        Json results = Json::object();
        for (const auto& w : options.workloads) {
            check_cancel(options);
            current = w;
            if (w == "decode") {
                results["decode"] = runner.decode();
            } else if (w == "prompt") {
                for (int size : options.prompt_sizes) {
                    results[fmt::format("prompt_{}", size)] = runner.prompt(size, pair);
                }
            } else {
                results["replay"] = runner.replay();
            }
        }
        if (results.contains("decode") && report["probes"].contains("ram_read")) {
            results["decode"]["bounds"] = decode_bounds(
                results["decode"], report["probes"]["ram_read"]["gb_s"].get<double>());
        }
        Json run = {{"run", r},
                    {"pair", pair},
                    {"profile", prof.name},
                    {"profile_index", pi},
                    {"model_loaded", loaded_now},
                    {"load_seconds", load_seconds},
                    {"workloads", results}};
        run["experts"] = model.describe_experts();
        run["backend"] = model.describe_backend();
        // --pin-store: whether the GPU backend registered the store, and the registration's time
        // (part of load_seconds).
        const StorePin pin = model.store_pin();
        run["store_pinned"] = pin.pinned;
        run["store_pin_s"] = pin.seconds;
        if (progress)
            progress(fmt::format("run {}/{}: profile {} (pair {}) done", r + 1, order.size(),
                                 prof.name, pair));
        runs.push_back(run);
    }
    report["runs"] = runs;

    // Per profile and workload: weighted over all runs.
    Json summary = Json::object();
    for (std::size_t pi = 0; pi < profiles.size(); ++pi) {
        Json per = Json::object();
        for (const auto& run : runs) {
            if (run["profile_index"] != pi) continue;
            for (const auto& [name, w] : run["workloads"].items()) {
                Json& s = per[name];
                if (s.is_null())
                    s = {{"runs", 0},
                         {"timed_tokens", 0},
                         {"timed_seconds", 0.0},
                         {"prompt_seconds", 0.0},
                         {"ttft_seconds", 0.0},
                         {"first_answer_page_faults", 0},
                         {"follow_up_page_faults", 0},
                         {"first_answer_major_page_faults", 0},
                         {"follow_up_major_page_faults", 0}};
                s["runs"] = s["runs"].get<int>() + 1;
                s["timed_tokens"] =
                    s["timed_tokens"].get<std::int64_t>() + w["timed_tokens"].get<std::int64_t>();
                s["timed_seconds"] =
                    s["timed_seconds"].get<double>() + w["timed_seconds"].get<double>();
                s["prompt_seconds"] =
                    s["prompt_seconds"].get<double>() + w["prompt_seconds"].get<double>();
                s["ttft_seconds"] =
                    s["ttft_seconds"].get<double>() + w["ttft_seconds"].get<double>();
                for (const char* key :
                     {"first_answer_page_faults", "follow_up_page_faults",
                      "first_answer_major_page_faults", "follow_up_major_page_faults"})
                    s[key] = s[key].get<std::uint64_t>() + w[key].get<std::uint64_t>();
            }
        }
        for (auto& [name, s] : per.items()) {
            const double runs_n = s["runs"].get<double>();
            const double ts = s["timed_seconds"].get<double>();
            s["decode_tok_s"] = ts > 0 ? Json(s["timed_tokens"].get<double>() / ts) : Json(nullptr);
            s["prompt_seconds_mean"] = s["prompt_seconds"].get<double>() / runs_n;
            s["ttft_seconds_mean"] = s["ttft_seconds"].get<double>() / runs_n;
        }
        summary[profiles[pi].name.empty() ? fmt::format("profile{}", pi) : profiles[pi].name] = per;
    }
    report["summary"] = summary;

    if (options.ab) {
        // Per pair: B / A decode rate and B / A prompt time, workload by workload.
        Json pairs = Json::array();
        for (int p = 0; p < options.repeat; ++p) {
            const Json* a = nullptr;
            const Json* b = nullptr;
            for (const auto& run : runs) {
                if (run["pair"] != p) continue;
                (run["profile_index"] == 0 ? a : b) = &run;
            }
            Json ratios = Json::object();
            for (const auto& [name, wa] : (*a)["workloads"].items()) {
                const Json& wb = (*b)["workloads"][name];
                Json r;
                r["decode_tok_s_b_over_a"] =
                    wa["decode_tok_s"].is_number() && wb["decode_tok_s"].is_number() &&
                            wa["decode_tok_s"].get<double>() > 0
                        ? Json(wb["decode_tok_s"].get<double>() / wa["decode_tok_s"].get<double>())
                        : Json(nullptr);
                r["prompt_seconds_b_over_a"] = wa["prompt_seconds"].get<double>() > 0
                                                   ? Json(wb["prompt_seconds"].get<double>() /
                                                          wa["prompt_seconds"].get<double>())
                                                   : Json(nullptr);
                ratios[name] = r;
            }
            pairs.push_back({{"pair", p}, {"order", p % 2 == 0 ? "AB" : "BA"}, {"ratios", ratios}});
        }
        report["pairs"] = pairs;
        report["ratio_summary"] = ratio_summary(pairs);
    }
    report_progress("done");
    return report;
}

Json ratio_stats(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    if (values.empty()) return {{"n", 0}};
    // Linear interpolation between closest ranks (numpy's default, "type 7").
    auto quantile = [&](double q) {
        const double pos = q * static_cast<double>(values.size() - 1);
        const auto lo = static_cast<std::size_t>(pos);
        const std::size_t hi = std::min(lo + 1, values.size() - 1);
        return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
    };
    return {{"n", values.size()},   {"median", quantile(0.5)}, {"q1", quantile(0.25)},
            {"q3", quantile(0.75)}, {"min", values.front()},   {"max", values.back()}};
}

Json ratio_summary(const Json& pairs) {
    std::map<std::string, std::map<std::string, std::vector<double>>> values;
    std::vector<std::string> order;  // workloads in first-seen order
    for (const auto& pr : pairs) {
        for (const auto& [name, r] : pr["ratios"].items()) {
            if (values.find(name) == values.end()) order.push_back(name);
            auto& per = values[name];
            for (const auto& [key, v] : r.items()) {
                auto& list = per[key];
                if (v.is_number()) list.push_back(v.get<double>());
            }
        }
    }
    Json out = Json::object();
    for (const auto& name : order) {
        Json w = Json::object();
        for (const auto& [key, list] : values[name]) w[key] = ratio_stats(list);
        out[name] = w;
    }
    return out;
}

std::string format_report(const Json& report) {
    std::string out;
    const Json& m = report["machine"];
    out += fmt::format("machine: {} ({} logical CPUs), build {}, GPUs: {}\n",
                       m["cpu"].get<std::string>(), m["logical_cpus"].get<int>(),
                       m["build_type"].get<std::string>(), m["gpus"].size());
    const Json& p = report["probes"];
    if (p.contains("ram_read")) {
        out += fmt::format("probe: RAM read {:.2f} GB/s ({} threads, {} MiB)\n",
                           p["ram_read"]["gb_s"].get<double>(), p["ram_read"]["threads"].get<int>(),
                           p["ram_read"]["bytes"].get<std::uint64_t>() >> 20);
    }
    if (p.contains("pinned_h2d")) {
        out += p["pinned_h2d"].contains("gb_s")
                   ? fmt::format("probe: pinned host->device {:.2f} GB/s\n",
                                 p["pinned_h2d"]["gb_s"].get<double>())
                   : fmt::format("probe: pinned host->device skipped ({})\n",
                                 p["pinned_h2d"]["skipped"].get<std::string>());
    }
    out +=
        fmt::format("\n{:<4} {:<10} {:<13} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7} {:>8} {:>7}\n",
                    "run", "profile", "workload", "tok/s", "prompt s", "TTFT s", "ms/tok", "cpu ms",
                    "other ms", "GB/s", "faults", "hit");
    for (const auto& run : report["runs"]) {
        for (const auto& [name, w] : run["workloads"].items()) {
            const Json& ph = w["phase_ms_per_token"];
            out += fmt::format(
                "{:<4} {:<10} {:<13} {:>8} {:>9.3f} {:>9.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>7.2f} "
                "{:>8} {:>7.3f}\n",
                run["run"].get<int>(), run["profile"].get<std::string>(), name,
                w["decode_tok_s"].is_number()
                    ? fmt::format("{:.2f}", w["decode_tok_s"].get<double>())
                    : std::string("-"),
                w["prompt_seconds"].get<double>(), w["ttft_seconds"].get<double>(),
                ph["wall"].get<double>(), ph["cpu_kernel"].get<double>(), ph["other"].get<double>(),
                // decode rows: decode tokens; prompt-only rows: the prompt pass
                w["token_records"].get<std::uint64_t>() > 0 ? w["cpu_gb_s"].get<double>()
                                                            : w["prompt_cpu_gb_s"].get<double>(),
                w["page_faults"].get<std::uint64_t>() +
                    w["prompt_page_faults"].get<std::uint64_t>(),
                w["hit_rate"].get<double>());
        }
    }
    // GPU prefill split per prompt row, with the PCIe bound (staged bytes / pinned probe).
    const double h2d = p.contains("pinned_h2d") && p["pinned_h2d"].contains("gb_s")
                           ? p["pinned_h2d"]["gb_s"].get<double>()
                           : 0.0;
    bool prefill_header = false;
    for (const auto& run : report["runs"]) {
        for (const auto& [name, w] : run["workloads"].items()) {
            if (!w.contains("prefill") || !w["prefill"].is_object()) continue;
            const Json& f = w["prefill"];
            if (!prefill_header) {
                out +=
                    "\nGPU prefill (seconds: total = host launch + routing sync + staging wait + "
                    "GPU/CPU "
                    "overlap; PCIe bound = staged bytes / pinned probe)\n";
                prefill_header = true;
            }
            const double staged_gb =
                static_cast<double>(f["staged_bytes"].get<std::uint64_t>()) / 1e9;
            out += fmt::format(
                "{:<4} {:<10} {:<13} {} tokens {:.3f} s ({:.0f} tok/s): launch {:.3f}, routing "
                "sync {:.3f}, "
                "staging wait {:.3f}, CPU multi-token {:.3f}; staged {} ({:.2f} GB, {} early), "
                "slots {}, CPU {}{}\n",
                run["run"].get<int>(), run["profile"].get<std::string>(), name,
                f["tokens"].get<std::uint64_t>(), f["seconds"].get<double>(),
                f["seconds"].get<double>() > 0
                    ? static_cast<double>(f["tokens"].get<std::uint64_t>()) /
                          f["seconds"].get<double>()
                    : 0.0,
                f["host_launch_seconds"].get<double>(), f["routing_sync_seconds"].get<double>(),
                f["staging_wait_seconds"].get<double>(), f["cpu_multi_token_seconds"].get<double>(),
                f["experts_staged"].get<std::uint64_t>(), staged_gb,
                f["experts_staged_early"].get<std::uint64_t>(),
                f["experts_from_slots"].get<std::uint64_t>(),
                f["experts_on_cpu"].get<std::uint64_t>(),
                h2d > 0 && staged_gb > 0
                    ? fmt::format("; PCIe bound {:.3f} s = {:.2f}x", staged_gb / h2d,
                                  f["seconds"].get<double>() / (staged_gb / h2d))
                    : std::string());
        }
    }
    // Decode against its bounds (decode_bounds; CUDA backend with GPU times and a RAM probe).
    bool bounds_header = false;
    for (const auto& run : report["runs"]) {
        for (const auto& [name, w] : run["workloads"].items()) {
            if (!w.contains("bounds") || !w["bounds"].is_object()) continue;
            const Json& b = w["bounds"];
            const Json& g = w["gpu_ms_per_token"];
            if (!bounds_header) {
                out +=
                    "\nDecode bounds (ms per token: CPU = CPU-miss bytes / RAM probe; GPU = dense "
                    "+ resident "
                    "experts + tail; overlap = max(CPU, GPU); chain = dense + tail + experts on "
                    "layers the "
                    "CPU left idle + max(CPU, the other experts))\n";
                bounds_header = true;
            }
            out += fmt::format(
                "{:<4} {:<10} {:<13} wall {:.3f}: CPU {:.3f}, GPU {:.3f} (dense {:.3f}, experts "
                "{:.3f} of "
                "which alone {:.3f}, tail {:.3f}); overlap {:.3f} = {:.2f}x, chain {:.3f} = "
                "{:.2f}x\n",
                run["run"].get<int>(), run["profile"].get<std::string>(), name,
                w["phase_ms_per_token"]["wall"].get<double>(), b["cpu_ms"].get<double>(),
                b["gpu_ms"].get<double>(), g["dense"].get<double>(), g["experts"].get<double>(),
                g["experts_alone"].get<double>(), g["tail"].get<double>(),
                b["overlap_ms"].get<double>(),
                b["wall_over_overlap"].is_number() ? b["wall_over_overlap"].get<double>() : 0.0,
                b["chain_ms"].get<double>(),
                b["wall_over_chain"].is_number() ? b["wall_over_chain"].get<double>() : 0.0);
        }
    }
    out += "\nsummary (weighted: timed tokens / timed seconds over all runs)\n";
    for (const auto& [prof, per] : report["summary"].items()) {
        for (const auto& [name, s] : per.items()) {
            out += fmt::format(
                "  {:<10} {:<13} {:>8} tok/s   prompt {:.3f} s   TTFT {:.3f} s   ({} runs)\n", prof,
                name,
                s["decode_tok_s"].is_number()
                    ? fmt::format("{:.2f}", s["decode_tok_s"].get<double>())
                    : std::string("-"),
                s["prompt_seconds_mean"].get<double>(), s["ttft_seconds_mean"].get<double>(),
                s["runs"].get<int>());
        }
    }
    if (report.contains("pairs")) {
        out += "\nA/B pairs (B / A)\n";
        for (const auto& pr : report["pairs"]) {
            for (const auto& [name, r] : pr["ratios"].items()) {
                auto show = [](const Json& v) {
                    return v.is_number() ? fmt::format("{:.4f}", v.get<double>())
                                         : std::string("-");
                };
                out += fmt::format("  pair {} ({}) {:<13} decode {}   prompt time {}\n",
                                   pr["pair"].get<int>(), pr["order"].get<std::string>(), name,
                                   show(r["decode_tok_s_b_over_a"]),
                                   show(r["prompt_seconds_b_over_a"]));
            }
        }
    }
    if (report.contains("ratio_summary")) {
        out += "\nA/B median over pairs [min - max]\n";
        for (const auto& [name, w] : report["ratio_summary"].items()) {
            for (const auto& [key, st] : w.items()) {
                if (st["n"].get<int>() == 0) continue;
                out += fmt::format("  {:<13} {:<24} {:.4f} [{:.4f} - {:.4f}] ({} pairs)\n", name,
                                   key, st["median"].get<double>(), st["min"].get<double>(),
                                   st["max"].get<double>(), st["n"].get<int>());
            }
        }
    }
    return out;
}

}  // namespace neural::bench
