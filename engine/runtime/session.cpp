#include "runtime/session.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "neural/error.h"
#include "platform/atomic_file.h"
#include "platform/process_stats.h"

namespace neural {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

namespace {

constexpr const char* kFormat = "neural-conversation";
constexpr int kVersion = 1;
constexpr char kKvMagic[8] = {'N', 'E', 'U', 'R', 'A', 'L', 'K', 'V'};
constexpr std::uint32_t kKvVersion = 1;

// Constrained sampling: draws checked before the whole vocabulary is masked. A model that knows
// JSON mostly draws a valid token first; a draw that fails usually means the valid tokens are
// few (a structural position), where more draws rarely help.
constexpr int kConstrainedTries = 3;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

// Identifies the model a KV state belongs to: shape plus a sample of the weights, so a state
// saved with another checkpoint of the same shape is not reused.
std::uint64_t model_fingerprint(const Model& m) {
    const ModelConfig& c = m.config();
    const std::int64_t shape[] = {
        c.hidden_size, c.intermediate_size, c.num_layers, c.num_experts, c.experts_per_token,
        c.num_heads,   c.num_kv_heads,      c.head_dim,   c.vocab_size,  c.sliding_window};
    std::uint64_t h = fnv1a(shape, sizeof shape);
    const std::uint64_t total = m.checkpoint().total_bytes();
    h = fnv1a(&total, sizeof total, h);
    for (const char* name : {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"}) {
        if (const TensorInfo* t = m.checkpoint().find(name)) {
            h = fnv1a(t->data, std::min<std::uint64_t>(t->nbytes(), 4096), h);
        }
    }
    return h;
}

ordered_json message_to_json(const chat::Message& m) {
    ordered_json j;
    j["role"] = std::string(chat::role_name(m.role));
    if (m.name) j["name"] = *m.name;
    if (m.recipient) j["recipient"] = *m.recipient;
    if (m.channel) j["channel"] = *m.channel;
    if (m.content_type) j["content_type"] = *m.content_type;
    j["content"] = m.has_text() ? m.text() : std::string();
    return j;
}

std::optional<std::string> opt_string(const ordered_json& j, const char* key,
                                      const std::string& src) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) fail("{}: field \"{}\" must be a string", src, key);
    return it->get<std::string>();
}

chat::Message message_from_json(const ordered_json& j, const std::string& src) {
    if (!j.is_object()) fail("{}: every message must be an object", src);
    chat::Message m;
    auto role_text = opt_string(j, "role", src);
    if (!role_text) fail("{}: a message has no role", src);
    auto role = chat::role_from_name(*role_text);
    if (!role || *role == chat::Role::system || *role == chat::Role::developer) {
        fail("{}: invalid message role \"{}\"", src, *role_text);
    }
    m.role = *role;
    m.name = opt_string(j, "name", src);
    m.recipient = opt_string(j, "recipient", src);
    m.channel = opt_string(j, "channel", src);
    m.content_type = opt_string(j, "content_type", src);
    m.content = opt_string(j, "content", src).value_or("");
    return m;
}

}  // namespace

std::string today_iso_date() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
#ifdef _WIN32
    localtime_s(&tm, &now);
#else
    localtime_r(&now, &tm);
#endif
    char buf[16];
    std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
    return buf;
}

ChatSession::ChatSession(Model& model) : model_(model), cache_(model.config()) {
    system_.conversation_start_date = today_iso_date();
}

chat::Conversation turn_conversation(const chat::SystemContent& system,
                                     const chat::DeveloperContent& developer,
                                     const std::vector<chat::Message>& history) {
    chat::Conversation c;
    c.messages.push_back(chat::Message::system(system));
    if (developer.instructions || !developer.tools.empty() || developer.response_format) {
        c.messages.push_back(chat::Message::developer(developer));
    }
    c.messages.insert(c.messages.end(), history.begin(), history.end());
    return c;
}

chat::Conversation ChatSession::conversation() const {
    return turn_conversation(system_, developer_, history_);
}

void ChatSession::add_user(std::string text) {
    history_.push_back(chat::Message::user(std::move(text)));
}

void ChatSession::edit(std::size_t index, std::string text) {
    if (index >= history_.size())
        fail("no message {} to edit (the conversation has {})", index, history_.size());
    if (!history_[index].has_text()) fail("message {} has no text to edit", index);
    history_[index].content = std::move(text);
    history_.resize(index + 1);
}

void ChatSession::reset() {
    history_.clear();
    cache_.clear();
    cached_.clear();
    prompt_cached_ = 0;
}

std::size_t ChatSession::reusable_tokens() const {
    return model_.prompt_matches_decode() ? cached_.size()
                                          : std::min(prompt_cached_, cached_.size());
}

void ChatSession::set_conversation(chat::SystemContent system, chat::DeveloperContent developer,
                                   std::vector<chat::Message> history) {
    system_ = std::move(system);
    developer_ = std::move(developer);
    history_ = std::move(history);
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (auto& s : stops) {
        if (!s.empty()) stops_.push_back(std::move(s));
    }
}

std::size_t StopMatcher::find(std::string_view text) const {
    std::size_t best = std::string_view::npos;
    for (const auto& s : stops_) best = std::min(best, text.find(s));
    return best;
}

std::string StopMatcher::push(std::string_view text) {
    if (stopped_) return {};
    held_ += text;
    if (const std::size_t at = find(held_); at != std::string::npos) {
        std::string out = held_.substr(0, at);
        held_.clear();
        stopped_ = true;
        return out;
    }
    // Keep the longest tail that is a proper prefix of a stop sequence; release the rest. Stop
    // sequences are valid UTF-8, so such a tail starts on a character boundary.
    std::size_t keep = 0;
    for (const auto& s : stops_) {
        for (std::size_t k = std::min(held_.size(), s.size() - 1); k > keep; --k) {
            const std::string_view tail = std::string_view(held_).substr(held_.size() - k);
            if (tail == std::string_view(s).substr(0, k)) {
                keep = k;
                break;
            }
        }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() {
    std::string out = std::move(held_);
    held_.clear();
    return out;
}

TurnResult ChatSession::respond(const TurnOptions& options,
                                const std::function<void(const chat::ParserEvent&)>& on_event) {
    if (options.max_tokens < 1) fail("max_tokens must be at least 1, got {}", options.max_tokens);
    const std::size_t vocab = model_.sampleable_vocab();
    for (TokenId t : options.forced_tokens) {
        if (t < 0 || static_cast<std::size_t>(t) >= vocab) {
            fail("forced token {} is not a token id", t);
        }
    }
    cancel_.store(false);
    const std::atomic<bool>& cancel = options.cancel != nullptr ? *options.cancel : cancel_;
    auto cancelled = [&] { return cancel_.load() || cancel.load(); };
    const auto t0 = Clock::now();
    const Tokenizer& tok = model_.tokenizer();
    std::vector<TokenId> prompt = chat::render_for_completion(conversation()).tokens(tok);
    for (TokenId t : options.prefill_tokens) {
        if (t < 0 || static_cast<std::size_t>(t) >= vocab)
            fail("prefill token {} is not a token id", t);
    }
    prompt.insert(prompt.end(), options.prefill_tokens.begin(), options.prefill_tokens.end());

    // Reuse the longest cached prefix; at least one token must run to produce logits. Where the
    // prompt path's bits differ from decode's, only the prefix prompt passes computed, and the
    // rest runs as a prompt pass (ForwardOptions::prompt, one token too), so every prompt token
    // gets the bits a fresh load gives it.
    const std::size_t reusable = reusable_tokens();
    std::size_t common = 0;
    while (common < reusable && common < prompt.size() && cached_[common] == prompt[common])
        ++common;
    // The context prompt path computes a position by its side of the context's end
    // (ForwardOptions::context_end). A conversation that goes on keeps its end; where it moved
    // (the cache holds tokens without an assistant header), only the positions before both ends
    // are the bits this prompt gives them.
    const std::int64_t context = chat::context_end(prompt, tok);
    if (context != context_end_)
        common = std::min(common, static_cast<std::size_t>(std::min(context, context_end_)));
    context_end_ = context;
    if (common == prompt.size()) --common;
    cache_.truncate(static_cast<std::int64_t>(common));
    cached_.resize(common);
    prompt_cached_ = std::min(prompt_cached_, common);

    TurnResult result;
    result.stats.prompt_tokens = static_cast<std::int64_t>(prompt.size());
    result.stats.cached_tokens = static_cast<std::int64_t>(common);
    const std::vector<TokenId> stops = model_.stop_tokens();
    chat::StreamParser parser(tok);
    chat::Completion completion;
    std::vector<chat::ParserEvent> events;
    StopMatcher stop_text(options.stop_sequences);
    chat::EventType held_type = chat::EventType::content;  // of the text stop_text holds back
    // logprobs: tokens of visible text not delivered yet (held by the parser or a stop
    // sequence); they go with the next visible event.
    std::vector<chat::TokenLogprob> pending_logprobs;
    auto deliver = [&](chat::ParserEvent& e) {
        const bool shown =
            e.type == chat::EventType::content || e.type == chat::EventType::preamble;
        if (shown && !pending_logprobs.empty()) {
            e.logprobs.insert(e.logprobs.begin(), pending_logprobs.begin(), pending_logprobs.end());
            pending_logprobs.clear();
        }
        if (shown)
            result.logprobs.insert(result.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        completion.add(e);
        if (on_event) on_event(e);
    };
    auto release_held = [&] {
        chat::ParserEvent e;
        e.type = held_type;
        e.text = stop_text.flush();
        if (!e.text.empty()) deliver(e);
    };
    auto visible = [](const chat::ParserEvent& e) {
        return e.type == chat::EventType::content || e.type == chat::EventType::preamble;
    };
    auto emit = [&] {
        for (auto& e : events) {
            if (stop_text.stopped()) break;
            if (!stop_text.active()) {
                deliver(e);
            } else if (visible(e)) {
                held_type = e.type;
                e.text = stop_text.push(e.text);
                if (!e.text.empty()) {
                    deliver(e);
                } else {
                    pending_logprobs.insert(pending_logprobs.end(), e.logprobs.begin(),
                                            e.logprobs.end());
                }
            } else {
                // A stop sequence does not span messages: release what was held for this one.
                release_held();
                deliver(e);
            }
        }
        events.clear();
    };

    ForwardOptions fo;
    fo.cancel = &cancel;
    fo.context_end = context;
    Clock::time_point first_token_at{};
    // Telemetry (engine/telemetry): one record per decode step, one per request. Only reads
    // clocks and counters; nothing here changes what is computed.
    telemetry::Telemetry& tel = model_.telemetry();
    const bool recording = tel.enabled();
    telemetry::RequestRecord request;
    if (recording) request.id = tel.next_request_id();
    telemetry::MoeCounters::Snapshot moe0 = tel.moe.snapshot();
    BackendCounters::Snapshot gpu0 = model_.backend_counters().snapshot();
    telemetry::FaultCounts faults0 =
        recording ? telemetry::fault_counts() : telemetry::FaultCounts{};
    Clock::time_point step_t0{};
    Sampler sampler(options.sampling);
    TokenPenalties penalties(options.sampling);
    const OutputConstraint* constraint = options.constraint.get();
    const bool constrained_turn = constraint && !constraint->empty();
    // What step `step`'s sampler reads of the logits the next pass gives (ForwardOptions::
    // screen): an unconstrained draw without logprobs may leave the tokens it cannot pick at
    // -infinity (the CPU backend's screened lm_head, the same token bit for bit); a forced
    // token reads nothing. Constrained steps and logprobs read every logit.
    std::optional<LogitsScreen> screen;
    auto screen_for = [&](std::size_t step, bool constrained) -> const LogitsScreen* {
        screen.reset();
        if (options.logprobs >= 0 || constrained) return nullptr;
        if (step < options.forced_tokens.size()) {
            screen.emplace();
            screen->valid = vocab;
        } else {
            screen = logits_screen_for(options.sampling, vocab, &penalties);
        }
        return screen ? &*screen : nullptr;
    };
    try {
        std::span<const TokenId> fresh(prompt.data() + common, prompt.size() - common);
        fo.screen = screen_for(0, constrained_turn);
        fo.prompt = true;
        std::vector<float> logits = model_.forward(fresh, cache_, fo);
        fo.prompt = false;
        cached_.insert(cached_.end(), fresh.begin(), fresh.end());
        prompt_cached_ = cached_.size();
        result.stats.prompt_seconds = seconds_since(t0);
        if (recording) {
            const auto moe1 = tel.moe.snapshot();
            const telemetry::FaultCounts faults1 = telemetry::fault_counts();
            request.prompt_cpu_kernel_ns = moe1.ns - moe0.ns;
            request.prompt_cpu_bytes = moe1.bytes - moe0.bytes;
            request.prompt_page_faults = faults1.total - faults0.total;
            request.prompt_major_page_faults = faults1.major - faults0.major;
        }
        // The reply's beginning (prefill_tokens) goes through the parser silently: the reply
        // continues inside the message it left open.
        for (TokenId t : options.prefill_tokens) {
            parser.feed(t, events);
            for (const auto& e : events) completion.add(e);
            events.clear();
        }
        // Structured output: `active` is the constrained message in progress (its recogniser and
        // terminator), `closing` the shortest completion once the token budget runs short.
        if (constraint && !constraint->empty() && !vocab_)
            vocab_ = std::make_shared<TokenVocabulary>(tok, vocab);
        std::optional<ActiveConstraint> active;
        // The reply's framing under a constraint (headers, reasoning budget): see TurnOptions.
        std::optional<ReplyFraming> framing;
        if (constraint && !constraint->empty()) {
            framing.emplace(tok, constraint->functions, constraint->text_functions);
            std::size_t answer = 1;  // the end token, after the shortest valid answer
            if (constraint->final_answer) {
                const chat::JsonRecognizer fresh(*constraint->final_answer);
                answer += tok.encode(fresh.shortest_completion()).size();
            }
            const std::int64_t room =
                static_cast<std::int64_t>(options.max_tokens) -
                static_cast<std::int64_t>(framing->worst_case_to_final() + answer);
            std::int64_t from = std::min<std::int64_t>(room, options.max_tokens * 3 / 4);
            if (options.reasoning_budget >= 0) from = std::min(from, options.reasoning_budget);
            framing->set_final_from(from);
        }
        std::vector<TokenId> closing;
        std::size_t closing_at = 0;
        std::vector<std::uint8_t> mask_scratch;
        const std::optional<TokenId> return_id = tok.special_id("<|return|>");
        const std::optional<TokenId> call_id = tok.special_id("<|call|>");
        bool in_reasoning = false;
        std::int64_t header_tokens = 0;  // tokens of the header being read
        auto constrained_next = [&](int i) -> TokenId {
            ++result.stats.constraint.steps;
            if (closing_at < closing.size()) return closing[closing_at++];
            const std::string rest = active->recognizer().shortest_completion();
            const auto left = static_cast<std::size_t>(options.max_tokens - i);
            if (closing.empty() && left <= rest.size() + 1) {
                // Every byte is a token, so the completion and the terminator fit in `left`.
                std::vector<TokenId> tokens = tok.encode(rest);
                tokens.push_back(active->terminator());
                ActiveConstraint probe = *active;
                const bool fits = std::all_of(tokens.begin(), tokens.end(),
                                              [&](TokenId t) { return probe.accept(*vocab_, t); });
                if (fits && tokens.size() <= left) {
                    closing = std::move(tokens);
                    ++result.stats.constraint.completions;
                    return closing[closing_at++];
                }
            }
            bool masked = false;
            const TokenId t = sampler.sample_constrained(
                logits, vocab, [&](TokenId id) { return active->allows(*vocab_, id); },
                [&](std::vector<float>& l) { active->mask_logits(*vocab_, l, mask_scratch); },
                constraint->full_mask ? 0 : kConstrainedTries, &masked);
            if (masked) ++result.stats.constraint.full_masks;
            return t;
        };
        std::vector<float> raw_logits;
        std::vector<std::pair<TokenId, double>> top_ids;
        std::vector<chat::TokenLogprob> token_logprob;  // this step's token, when requested
        for (int i = 0; i < options.max_tokens; ++i) {
            const auto step = static_cast<std::size_t>(i);
            const auto sample_t0 = Clock::now();
            TokenId next;
            // logprobs are of the model's own distribution: the logits before the penalties.
            if (options.logprobs >= 0 && penalties.active()) raw_logits = logits;
            if (penalties.active()) penalties.apply(logits);
            if (step < options.forced_tokens.size()) {
                next = options.forced_tokens[step];
            } else if (active) {
                next = constrained_next(i);
            } else if (framing) {
                ++result.stats.constraint.steps;
                if (const std::optional<TokenId> f = framing->forced(i)) {
                    next = *f;
                    ++result.stats.constraint.forced;
                } else {
                    bool masked = false;
                    next = sampler.sample_constrained(
                        logits, vocab, [&](TokenId id) { return framing->allows(*vocab_, id); },
                        [&](std::vector<float>& l) { framing->mask_logits(*vocab_, l); },
                        constraint->full_mask ? 0 : kConstrainedTries, &masked);
                    if (masked) ++result.stats.constraint.full_masks;
                }
            } else {
                next = sampler.sample(logits, vocab);
            }
            // A forced token outside the grammar ends the constraint (forced output wins).
            if (active && !active->accept(*vocab_, next)) active.reset();
            if (framing && !framing->accept(*vocab_, next)) framing.reset();
            penalties.add(next);
            if (recording && i > 0) {
                // Token i + 1: the forward pass of token i and this sampling step.
                const auto now = Clock::now();
                const auto moe1 = tel.moe.snapshot();
                telemetry::TokenRecord r;
                r.request = request.id;
                r.sampling_ns = static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(now - sample_t0).count());
                r.index = static_cast<std::uint64_t>(i) + 1;
                r.wall_ns = static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(now - step_t0).count());
                r.cpu_kernel_ns = moe1.ns - moe0.ns;
                r.experts_missed = moe1.experts - moe0.experts;  // CPU backend: all computed on CPU
                r.cpu_bytes = moe1.bytes - moe0.bytes;
                r.team_fallbacks = moe1.team_fallbacks - moe0.team_fallbacks;
                const auto gpu1 = model_.backend_counters().snapshot();
                r.gpu_wait_ns = gpu1.gpu_wait_ns - gpu0.gpu_wait_ns;
                r.graph_submit_ns = gpu1.graph_submit_ns - gpu0.graph_submit_ns;
                r.admission_ns = gpu1.admission_ns - gpu0.admission_ns;
                r.experts_hit = gpu1.experts_hit - gpu0.experts_hit;
                r.experts_streamed = gpu1.experts_streamed - gpu0.experts_streamed;
                r.experts_split = gpu1.experts_split - gpu0.experts_split;
                r.gpu_dense_ns = gpu1.gpu_dense_ns - gpu0.gpu_dense_ns;
                r.gpu_experts_ns = gpu1.gpu_experts_ns - gpu0.gpu_experts_ns;
                r.gpu_experts_alone_ns = gpu1.gpu_experts_alone_ns - gpu0.gpu_experts_alone_ns;
                r.gpu_tail_ns = gpu1.gpu_tail_ns - gpu0.gpu_tail_ns;
                r.admissions = gpu1.admissions - gpu0.admissions;
                const telemetry::FaultCounts f = telemetry::fault_counts();
                r.page_faults = f.total - faults0.total;
                r.major_page_faults = f.major - faults0.major;
                telemetry::finish_phases(r);
                tel.tokens().push(r);
            }
            if (i == 0) {
                first_token_at = Clock::now();
                result.stats.first_token_seconds = seconds_since(t0);
            }
            ++result.stats.generated_tokens;
            token_logprob.clear();
            if (options.logprobs >= 0) {
                chat::TokenLogprob lp;
                lp.bytes = tok.token_bytes(next);
                lp.logprob = token_logprobs(penalties.active() ? raw_logits : logits, vocab, next,
                                            options.logprobs, top_ids);
                for (const auto& [id, l] : top_ids) lp.top.push_back({tok.token_bytes(id), l});
                token_logprob.push_back(std::move(lp));
            }
            const bool was_open = parser.current_message().has_value();
            const bool in_text = was_open && !parser.current_message()->is_tool_call() &&
                                 parser.current_message()->channel != "analysis";
            parser.feed(next, events);
            if (!token_logprob.empty()) {
                // The token goes with the visible text it produced (or, held back as part of a
                // UTF-8 sequence, with the next).
                auto shown = std::find_if(events.begin(), events.end(), [](const auto& e) {
                    return e.type == chat::EventType::content ||
                           e.type == chat::EventType::preamble;
                });
                if (shown != events.end()) {
                    shown->logprobs = std::move(token_logprob);
                } else if (in_text && events.empty()) {
                    pending_logprobs.push_back(std::move(token_logprob.front()));
                }
            }
            if (in_reasoning)
                ++result.stats.reasoning_tokens;
            else if (!was_open)
                ++header_tokens;
            for (const auto& e : events) {
                if (e.type == chat::EventType::message_end) {
                    in_reasoning = false;
                    active.reset();
                    closing.clear();
                    closing_at = 0;
                    header_tokens = 0;
                } else if (e.type == chat::EventType::message_start) {
                    const chat::Message& m = e.message;
                    in_reasoning = m.channel == "analysis" && !m.is_tool_call();
                    if (in_reasoning) result.stats.reasoning_tokens += header_tokens;
                    header_tokens = 0;
                    if (constraint && constraint->final_answer && return_id &&
                        m.role == chat::Role::assistant && !m.is_tool_call() &&
                        (m.channel == "final" || !m.channel)) {
                        active.emplace(constraint->final_answer, *return_id);
                    }
                } else if (e.type == chat::EventType::tool_call_start && constraint && call_id) {
                    // Functions by name; tools of other namespaces by "namespace.name".
                    auto it = constraint->function_arguments.find(
                        e.function_name.empty() ? e.recipient : e.function_name);
                    if (it != constraint->function_arguments.end())
                        active.emplace(it->second, *call_id);
                }
            }
            emit();
            if (stop_text.stopped()) break;
            if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
            if (cancelled()) {
                result.cancelled = true;
                break;
            }
            if (i + 1 == options.max_tokens) break;
            if (recording) {
                step_t0 = Clock::now();
                moe0 = tel.moe.snapshot();
                gpu0 = model_.backend_counters().snapshot();
                faults0 = telemetry::fault_counts();
            }
            fo.screen = screen_for(step + 1, active.has_value() || framing.has_value());
            logits = model_.forward(std::span<const TokenId>(&next, 1), cache_, fo);
            cached_.push_back(next);
        }
    } catch (const Cancelled&) {
        result.cancelled = true;
    }
    if (result.stats.generated_tokens > 0)
        result.stats.decode_seconds = seconds_since(first_token_at);
    if (recording) {
        request.prompt_tokens = result.stats.prompt_tokens;
        request.cached_tokens = result.stats.cached_tokens;
        request.prompt_seconds = result.stats.prompt_seconds;
        request.ttft_seconds = result.stats.first_token_seconds;
        request.decode_tokens = result.stats.generated_tokens;
        request.decode_seconds = result.stats.decode_seconds;
        request.cancelled = result.cancelled;
        tel.requests().push(request);
    }
    if (stop_text.stopped()) {
        // Close the open message without releasing anything after the match.
        parser.end_of_stream(events, chat::FinishReason::stop);
        for (auto& e : events) {
            if (!visible(e)) deliver(e);
        }
        events.clear();
    } else {
        parser.end_of_stream(events, chat::FinishReason::length);
        emit();
        release_held();
    }
    for (const auto& m : parser.messages()) history_.push_back(m);
    if (stop_text.stopped() && !history_.empty() && history_.back().has_text()) {
        // The history keeps what the caller saw: the last message up to the stop sequence.
        auto& text = std::get<std::string>(history_.back().content);
        if (const std::size_t at = stop_text.find(text); at != std::string::npos) text.resize(at);
    }
    result.reasoning = std::move(completion.reasoning);
    result.content = std::move(completion.content);
    result.tool_calls = std::move(completion.tool_calls);
    result.finish = completion.finish_reason.value_or(chat::FinishReason::length);
    if (stop_text.stopped()) result.finish = chat::FinishReason::stop;
    return result;
}

void ChatSession::save(const std::filesystem::path& path, bool with_kv) const {
    ordered_json j;
    j["format"] = kFormat;
    j["version"] = kVersion;
    j["model"] = model_.dir().filename().string();
    ordered_json sys;
    if (system_.model_identity) sys["model_identity"] = *system_.model_identity;
    if (system_.reasoning_effort)
        sys["reasoning_effort"] =
            std::string(chat::reasoning_effort_name(*system_.reasoning_effort));
    if (system_.knowledge_cutoff) sys["knowledge_cutoff"] = *system_.knowledge_cutoff;
    if (system_.conversation_start_date)
        sys["conversation_start_date"] = *system_.conversation_start_date;
    j["system"] = sys;
    ordered_json dev = ordered_json::object();
    if (developer_.instructions) dev["instructions"] = *developer_.instructions;
    ordered_json tools = ordered_json::array();
    for (const auto& ns : developer_.tools) {
        if (ns.name != "functions") continue;
        for (const auto& t : ns.tools) {
            ordered_json tj{{"name", t.name}, {"description", t.description}};
            if (t.parameters) tj["parameters"] = *t.parameters;
            tools.push_back(tj);
        }
    }
    if (!tools.empty()) dev["tools"] = tools;
    j["developer"] = dev;
    j["messages"] = ordered_json::array();
    for (const auto& m : history_) j["messages"].push_back(message_to_json(m));

    std::filesystem::path kv_path = path;
    kv_path += ".kv";
    // The KV file holds the CPU backend's fp32 cache; the GPU backend keeps its cache in VRAM,
    // so its conversations are saved without one (the next turn re-processes the prompt).
    const bool host_kv = std::string_view(model_.backend_name()) == "cpu";
    if (with_kv && !host_kv)
        spdlog::info("{}: saved without K/V (the {} backend keeps it on the GPU)", path.string(),
                     model_.backend_name());
    // The reusable prefix only (reusable_tokens): a restored conversation continues with the
    // K/V a fresh load computes.
    const std::uint64_t n = reusable_tokens();
    if (with_kv && host_kv && n > 0) {
        // NEURALKV v1: magic, version, layers, kv_dim, fingerprint, n, tokens[n] i32, then per
        // layer K[n, kv_dim] and V[n, kv_dim] fp32, then an FNV-1a checksum of everything before.
        std::string b(kKvMagic, sizeof kKvMagic);
        auto put = [&b](const void* p, std::size_t n) { b.append(static_cast<const char*>(p), n); };
        const std::uint32_t version = kKvVersion,
                            layers = static_cast<std::uint32_t>(cache_.layers()),
                            kv_dim = static_cast<std::uint32_t>(cache_.kv_dim());
        const std::uint64_t fp = model_fingerprint(model_);
        put(&version, 4);
        put(&layers, 4);
        put(&kv_dim, 4);
        put(&fp, 8);
        put(&n, 8);
        put(cached_.data(), n * sizeof(TokenId));
        for (std::uint32_t l = 0; l < layers; ++l) {
            put(cache_.k(static_cast<int>(l), 0), n * kv_dim * sizeof(float));
            put(cache_.v(static_cast<int>(l), 0), n * kv_dim * sizeof(float));
        }
        const std::uint64_t sum = fnv1a(b.data(), b.size());
        put(&sum, 8);
        // The pair: PATH.kv is published first, then the JSON naming it by checksum (the commit
        // point). A kill in between leaves the old JSON and a PATH.kv it does not name: load()
        // ignores that KV file (recomputed), never pairs it with the wrong messages.
        write_file_atomic(kv_path, b);
        j["kv_tokens"] = n;  // read by Neural before the "kv" entry
        j["kv"] = ordered_json{{"file", kv_path.filename().string()},
                               {"tokens", n},
                               {"checksum", fmt::format("{:016x}", sum)}};
        write_file_atomic(path, j.dump(2));
        return;
    }
    write_file_atomic(path, j.dump(2));
    // A KV file of an earlier save no longer belongs to this conversation (load() would ignore
    // it, as this JSON names none): remove it, best effort.
    std::error_code ec;
    std::filesystem::remove(kv_path, ec);
}

void ChatSession::load(const std::filesystem::path& path) {
    const std::string src = path.string();
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open conversation file {}", src);
    std::ostringstream ss;
    ss << in.rdbuf();
    ordered_json j;
    try {
        j = ordered_json::parse(ss.str());
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
        fail("{}: not a conversation file (invalid JSON: {})", src, e.what());
    }
    if (!j.is_object() || j.value("format", "") != kFormat)
        fail("{}: not a Neural conversation file", src);
    if (!j.contains("version") || !j["version"].is_number_integer())
        fail("{}: missing format version", src);
    if (j["version"].get<int>() > kVersion) {
        fail("{}: conversation format version {} is newer than this Neural supports ({})", src,
             j["version"].get<int>(), kVersion);
    }
    // Parse everything first, then replace the session state, so a bad file changes nothing.
    chat::SystemContent sys = system_;
    if (j.contains("system")) {
        const auto& s = j["system"];
        if (!s.is_object()) fail("{}: \"system\" must be an object", src);
        sys.model_identity = opt_string(s, "model_identity", src);
        if (auto e = opt_string(s, "reasoning_effort", src)) {
            try {
                sys.reasoning_effort = chat::reasoning_effort_from_name(*e);
            } catch (const Error&) {
                fail("{}: invalid reasoning_effort \"{}\"", src, *e);
            }
        }
        sys.knowledge_cutoff = opt_string(s, "knowledge_cutoff", src);
        sys.conversation_start_date = opt_string(s, "conversation_start_date", src);
    }
    chat::DeveloperContent dev;
    if (j.contains("developer")) {
        const auto& d = j["developer"];
        if (!d.is_object()) fail("{}: \"developer\" must be an object", src);
        dev.instructions = opt_string(d, "instructions", src);
        if (d.contains("tools")) {
            std::vector<chat::ToolDescription> tools;
            for (const auto& t : d["tools"]) {
                chat::ToolDescription td;
                td.name = opt_string(t, "name", src).value_or("");
                if (td.name.empty()) fail("{}: a tool has no name", src);
                td.description = opt_string(t, "description", src).value_or("");
                if (t.contains("parameters")) td.parameters = t["parameters"];
                tools.push_back(std::move(td));
            }
            dev.tools.push_back(chat::ToolNamespace::functions(std::move(tools)));
        }
    }
    std::vector<chat::Message> history;
    if (!j.contains("messages") || !j["messages"].is_array())
        fail("{}: missing \"messages\" list", src);
    for (const auto& m : j["messages"]) history.push_back(message_from_json(m, src));

    system_ = std::move(sys);
    developer_ = std::move(dev);
    history_ = std::move(history);
    cache_.clear();
    cached_.clear();
    prompt_cached_ = 0;

    kv_note_.clear();
    std::filesystem::path kv_path = path;
    kv_path += ".kv";
    std::error_code ec;
    // The KV file this JSON was saved with: its checksum (the KV file's own trailing FNV-1a).
    std::optional<std::uint64_t> expected_sum;
    if (j.contains("kv")) {
        const auto& kv = j["kv"];
        const auto* sum = kv.is_object() && kv.contains("checksum") && kv["checksum"].is_string()
                              ? kv["checksum"].get_ptr<const std::string*>()
                              : nullptr;
        std::uint64_t v = 0;
        if (sum == nullptr || sum->size() != 16 ||
            std::from_chars(sum->data(), sum->data() + 16, v, 16).ptr != sum->data() + 16) {
            kv_note_ = fmt::format(
                "{}: invalid \"kv\" entry (no 16-digit hex checksum); {} is "
                "not loaded",
                src, kv_path.string());
            spdlog::warn("ignoring saved KV state: {}", kv_note_);
            return;
        }
        expected_sum = v;
    }
    const bool legacy = !expected_sum && j.contains("kv_tokens");  // saved before the "kv" entry
    const bool exists = std::filesystem::exists(kv_path, ec);
    if (std::string_view(model_.backend_name()) != "cpu") return;  // K/V lives on the GPU
    if (!expected_sum && !legacy) {
        if (exists) {
            kv_note_ = fmt::format("{} was not saved with {} (a stale file; it is not loaded)",
                                   kv_path.string(), src);
            spdlog::warn("ignoring saved KV state: {}", kv_note_);
        }
        return;
    }
    if (!exists) {
        if (expected_sum) {
            kv_note_ = fmt::format("{} names {}, which is missing (it will be recomputed)", src,
                                   kv_path.string());
            spdlog::warn("{}", kv_note_);
        }
        return;
    }
    try {
        std::ifstream kin(kv_path, std::ios::binary);
        std::string b((std::istreambuf_iterator<char>(kin)), std::istreambuf_iterator<char>());
        std::size_t off = 0;
        auto get = [&](void* p, std::size_t n) {
            if (b.size() - off < n) fail("{}: truncated", kv_path.string());
            std::memcpy(p, b.data() + off, n);
            off += n;
        };
        char magic[8];
        std::uint32_t version = 0, layers = 0, kv_dim = 0;
        std::uint64_t fp = 0, n = 0;
        get(magic, 8);
        if (std::memcmp(magic, kKvMagic, 8) != 0) fail("{}: not a KV state file", kv_path.string());
        get(&version, 4);
        if (version != kKvVersion)
            fail("{}: KV format version {} unsupported", kv_path.string(), version);
        get(&layers, 4);
        get(&kv_dim, 4);
        get(&fp, 8);
        get(&n, 8);
        if (layers != static_cast<std::uint32_t>(cache_.layers()) ||
            kv_dim != static_cast<std::uint32_t>(cache_.kv_dim()) ||
            fp != model_fingerprint(model_)) {
            fail("{}: saved with a different model", kv_path.string());
        }
        const std::uint64_t need = n * 4 + 2ull * layers * n * kv_dim * 4 + 8;
        if (n > (1ull << 32) || b.size() - off != need)
            fail("{}: size does not match its header", kv_path.string());
        std::uint64_t stored = 0;
        std::memcpy(&stored, b.data() + b.size() - 8, 8);
        if (stored != fnv1a(b.data(), b.size() - 8))
            fail("{}: checksum mismatch (damaged file)", kv_path.string());
        if (expected_sum && stored != *expected_sum) {
            fail(
                "{} does not belong to {}: it has checksum {:016x}, the conversation was saved "
                "with {:016x} (a save was interrupted between the two files, or one of them was "
                "replaced)",
                kv_path.string(), src, stored, *expected_sum);
        }
        std::vector<TokenId> tokens(n);
        get(tokens.data(), n * 4);
        cache_.reserve_more(static_cast<std::int64_t>(n));
        for (std::uint32_t l = 0; l < layers; ++l) {
            get(cache_.k(static_cast<int>(l), 0), n * kv_dim * 4);
            get(cache_.v(static_cast<int>(l), 0), n * kv_dim * 4);
        }
        cache_.commit(static_cast<std::int64_t>(n));
        cached_ = std::move(tokens);
        prompt_cached_ = cached_.size();  // save() writes only the reusable prefix
        context_end_ = chat::context_end(cached_, model_.tokenizer());
    } catch (const Error& e) {
        cache_.clear();
        cached_.clear();
        prompt_cached_ = 0;
        kv_note_ = e.what();
        spdlog::warn("ignoring saved KV state: {} (it will be recomputed)", e.what());
    }
}

}  // namespace neural
