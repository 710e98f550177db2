// ChatSession: KV prefix reuse, edits, save/restore, cancellation (on the tiny fixture model).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "neural/error.h"
#include "runtime/session.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using ::testing::HasSubstr;

class SessionTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { model_ = Model::load(test::tiny_model_dir()).release(); }
    static void TearDownTestSuite() { delete model_; }
    static TurnOptions greedy(int n) {
        TurnOptions o;
        o.max_tokens = n;
        o.sampling.temperature = 0;
        return o;
    }
    static Model* model_;
};
Model* SessionTest::model_ = nullptr;

// Keeps the first `n` messages of the history, as a front end sends a conversation back to
// regenerate or continue a reply (set_conversation keeps the K/V cache).
void keep_history(ChatSession& s, std::size_t n) {
    std::vector<chat::Message> history = s.history();
    history.resize(n);
    s.set_conversation(s.system(), s.developer(), std::move(history));
}

std::string transcript(const ChatSession& s) {
    std::string out;
    for (const auto& m : s.history())
        out += std::string(chat::role_name(m.role)) + ":" + m.text() + "\n";
    return out;
}

TEST_F(SessionTest, NextTurnReusesTheCachedPrefix) {
    ChatSession s(*model_);
    s.system().conversation_start_date = "2026-11-30";
    s.add_user("Hello!");
    TurnResult first = s.respond(greedy(6));
    EXPECT_EQ(first.stats.cached_tokens, 0);
    EXPECT_EQ(first.stats.generated_tokens, 6);
    s.add_user("And again?");
    TurnResult second = s.respond(greedy(6));
    // Everything up to the previous reply is reused; only the re-rendered reply and the new
    // user message are processed.
    EXPECT_GT(second.stats.cached_tokens, first.stats.prompt_tokens - 2);
    EXPECT_LT(second.stats.cached_tokens, second.stats.prompt_tokens);
}

TEST_F(SessionTest, CachedAndUncachedTurnsGiveIdenticalReplies) {
    test::TempDir dir;
    ChatSession a(*model_);
    a.system().conversation_start_date = "2026-11-30";
    a.add_user("Tell me about the sea.");
    a.respond(greedy(5));
    a.add_user("More, please.");
    a.save(dir / "conv.json");  // without KV: a restored copy starts cold
    TurnResult warm = a.respond(greedy(8));
    EXPECT_GT(warm.stats.cached_tokens, 0);

    ChatSession b(*model_);
    b.load(dir / "conv.json");
    EXPECT_EQ(b.cached_tokens(), 0);
    TurnResult cold = b.respond(greedy(8));
    EXPECT_EQ(cold.stats.cached_tokens, 0);
    EXPECT_EQ(cold.content, warm.content);
    EXPECT_EQ(cold.reasoning, warm.reasoning);
    EXPECT_EQ(transcript(a), transcript(b));
}

TEST_F(SessionTest, EditingAnEarlierTurnReprocessesFromTheChange) {
    ChatSession s(*model_);
    s.add_user("first question");
    s.respond(greedy(4));
    s.add_user("second question");
    s.respond(greedy(4));
    const std::int64_t before = s.cached_tokens();
    s.edit(0, "first question, edited");
    EXPECT_EQ(s.history().size(), 1u);
    TurnResult r = s.respond(greedy(4));
    // The system/developer prefix and "<|start|>user<|message|>first question" survive.
    EXPECT_GT(r.stats.cached_tokens, 10);
    EXPECT_LT(r.stats.cached_tokens, before);
    EXPECT_THROW(s.edit(99, "x"), Error);
}

TEST_F(SessionTest, SaveAndRestoreWithKvContinuesWithoutReprocessing) {
    test::TempDir dir;
    ChatSession a(*model_);
    a.set_instructions("Answer briefly.");
    a.set_reasoning(chat::ReasoningEffort::low);
    a.add_user("What is 2+2?");
    a.respond(greedy(5));
    a.add_user("And 3+3?");
    a.save(dir / "c.json", true);
    ASSERT_TRUE(std::filesystem::exists(dir / "c.json.kv"));
    TurnResult original = a.respond(greedy(6));

    ChatSession b(*model_);
    b.load(dir / "c.json");
    EXPECT_GT(b.cached_tokens(), 0);
    ASSERT_TRUE(b.developer().instructions.has_value());
    EXPECT_EQ(*b.developer().instructions, "Answer briefly.");
    TurnResult restored = b.respond(greedy(6));
    EXPECT_EQ(restored.stats.cached_tokens, original.stats.cached_tokens);
    EXPECT_EQ(restored.content, original.content);
    EXPECT_EQ(restored.reasoning, original.reasoning);
}

TEST_F(SessionTest, DamagedKvStateIsIgnoredAndRecomputed) {
    test::TempDir dir;
    ChatSession a(*model_);
    a.add_user("Hi");
    a.respond(greedy(3));
    a.add_user("Again");
    a.save(dir / "c.json", true);
    TurnResult original = a.respond(greedy(5));
    std::string kv = test::read_file(dir / "c.json.kv");
    kv[kv.size() / 2] ^= 0x55;  // flip bits in the middle: the checksum catches it
    test::write_file(dir / "c.json.kv", kv);
    ChatSession b(*model_);
    b.load(dir / "c.json");
    EXPECT_EQ(b.cached_tokens(), 0);
    TurnResult again = b.respond(greedy(5));
    EXPECT_EQ(again.content, original.content);
}

// The pair PATH + PATH.kv: the JSON names its KV file by checksum and is written last. A kill
// between the two renames leaves the old JSON beside the new KV file; that KV state must not be
// loaded for the old messages (it would claim the cache holds tokens it does not).
TEST_F(SessionTest, InterruptedSaveLeavesAPairTheReaderRecognizesAsMismatched) {
    test::TempDir dir;
    ChatSession a(*model_);
    a.add_user("Hi");
    a.respond(greedy(3));
    a.save(dir / "c.json", true);
    const std::string old_json = test::read_file(dir / "c.json");
    EXPECT_THAT(old_json, HasSubstr("\"checksum\""));
    a.add_user("Again");
    a.respond(greedy(4));
    a.save(dir / "c.json", true);
    // What a kill after the KV rename and before the JSON rename leaves: new KV, old JSON.
    test::write_file(dir / "c.json", old_json);

    ChatSession b(*model_);
    b.load(dir / "c.json");             // the conversation itself is complete and loads
    EXPECT_EQ(b.history().size(), 2u);  // "Hi" and its answer
    EXPECT_EQ(b.cached_tokens(), 0) << "a KV file of another save was loaded";
    EXPECT_THAT(b.kv_restore_note(), HasSubstr("does not belong to"));
    EXPECT_THAT(b.kv_restore_note(), HasSubstr("interrupted"));

    // The matching pair restores the cache, with no note.
    a.save(dir / "d.json", true);
    ChatSession c(*model_);
    c.load(dir / "d.json");
    EXPECT_GT(c.cached_tokens(), 0);
    EXPECT_EQ(c.kv_restore_note(), "");
}

TEST_F(SessionTest, SaveWithoutKvRemovesTheOldKvFileAndAStaleOneIsNotLoaded) {
    test::TempDir dir;
    ChatSession a(*model_);
    a.add_user("Hi");
    a.respond(greedy(3));
    a.save(dir / "c.json", true);
    ASSERT_TRUE(std::filesystem::exists(dir / "c.json.kv"));
    const std::string kv = test::read_file(dir / "c.json.kv");
    a.save(dir / "c.json", false);
    EXPECT_FALSE(std::filesystem::exists(dir / "c.json.kv"));
    // A kill before that removal: the JSON names no KV file, so the stale one is ignored.
    test::write_file(dir / "c.json.kv", kv);
    ChatSession b(*model_);
    b.load(dir / "c.json");
    EXPECT_EQ(b.cached_tokens(), 0);
    EXPECT_THAT(b.kv_restore_note(), HasSubstr("stale"));
    // The JSON names a KV file that is gone: the conversation loads, the cache is recomputed.
    a.save(dir / "e.json", true);
    std::filesystem::remove(dir / "e.json.kv");
    ChatSession c(*model_);
    c.load(dir / "e.json");
    EXPECT_EQ(c.history().size(), a.history().size());
    EXPECT_EQ(c.cached_tokens(), 0);
    EXPECT_THAT(c.kv_restore_note(), HasSubstr("missing"));
}

TEST_F(SessionTest, BadConversationFilesAreClearErrorsAndChangeNothing) {
    test::TempDir dir;
    ChatSession s(*model_);
    s.add_user("keep me");
    auto expect_error = [&](const std::string& body, const std::string& what) {
        test::write_file(dir / "bad.json", body);
        try {
            s.load(dir / "bad.json");
            ADD_FAILURE() << "no error for " << body;
        } catch (const Error& e) {
            EXPECT_THAT(e.what(), HasSubstr(what)) << body;
        }
        ASSERT_EQ(s.history().size(), 1u);
        EXPECT_EQ(s.history()[0].text(), "keep me");
    };
    expect_error("{not json", "invalid JSON");
    expect_error(R"({"format":"neural-conversation","version":1e999})",
                 "invalid JSON");  // out_of_range
    expect_error(R"({"format":"something-else","version":1})", "not a Neural conversation file");
    expect_error(R"({"format":"neural-conversation","version":99,"messages":[]})",
                 "newer than this Neural supports");
    expect_error(R"({"format":"neural-conversation","version":1})", "missing \"messages\"");
    expect_error(
        R"({"format":"neural-conversation","version":1,"messages":[{"role":"wizard","content":"x"}]})",
        "invalid message role");
    expect_error(
        R"({"format":"neural-conversation","version":1,"messages":[{"role":"user","content":5}]})",
        "must be a string");
    EXPECT_THROW(s.load(dir / "missing.json"), Error);
}

TEST_F(SessionTest, CancelFromAnotherThreadStopsPromptlyAndKeepsTheSessionUsable) {
    ChatSession s(*model_);
    s.add_user("Write a very long story.");
    TurnOptions long_turn = greedy(100000);
    std::atomic<int> events{0};
    std::thread canceller([&] {
        while (events.load() < 20) std::this_thread::yield();
        s.cancel();
    });
    TurnResult r = s.respond(long_turn, [&](const chat::ParserEvent&) { events.fetch_add(1); });
    canceller.join();
    EXPECT_TRUE(r.cancelled);
    EXPECT_LT(r.stats.generated_tokens, 1000);
    EXPECT_EQ(s.history().back().role, chat::Role::assistant);  // the partial reply is kept
    s.add_user("Shorter, please.");
    TurnResult next = s.respond(greedy(3));
    EXPECT_FALSE(next.cancelled);
    EXPECT_EQ(next.stats.generated_tokens, 3);
    EXPECT_GT(next.stats.cached_tokens, 0);
}

// A cancel during a long prompt (thousands of tokens: seconds on the tiny model) returns
// promptly with the turn cancelled, and the session's next turn is what a fresh session answers.
TEST_F(SessionTest, CancelDuringALongPromptReturnsPromptlyAndTheNextTurnIsUnchanged) {
    using Clock = std::chrono::steady_clock;
    std::string text;
    while (text.size() < 100000)
        text += "the quick brown fox jumps over the lazy dog " + std::to_string(text.size()) + " ";
    ChatSession s(*model_);
    s.system().conversation_start_date = "2026-11-30";
    s.add_user(text);
    std::atomic<bool> cancel{false};
    TurnOptions o = greedy(4);
    o.cancel = &cancel;
    Clock::time_point cancelled_at{};
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        cancelled_at = Clock::now();
        cancel.store(true);
    });
    const TurnResult r = s.respond(o);
    const auto returned = Clock::now();
    canceller.join();
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.stats.generated_tokens, 0);
    EXPECT_GT(r.stats.prompt_tokens, 10000);
    EXPECT_LT(std::chrono::duration<double>(returned - cancelled_at).count(), 2.0);

    std::vector<chat::Message> history = {chat::Message::user("Hello!")};
    s.set_conversation(s.system(), s.developer(), history);
    const TurnResult again = s.respond(greedy(6));
    ChatSession fresh(*model_);
    fresh.set_conversation(s.system(), s.developer(), history);
    const TurnResult expected = fresh.respond(greedy(6));
    EXPECT_FALSE(again.cancelled);
    EXPECT_EQ(again.stats.generated_tokens, 6);
    EXPECT_EQ(again.content, expected.content);
    EXPECT_EQ(again.reasoning, expected.reasoning);
    EXPECT_EQ(transcript(s), transcript(fresh));
}

TEST_F(SessionTest, SameSeedSameReply) {
    TurnOptions o;
    o.max_tokens = 12;
    o.sampling.temperature = 1.0f;
    o.sampling.seed = 42;
    ChatSession a(*model_), b(*model_);
    a.add_user("Roll the dice");
    b.add_user("Roll the dice");
    EXPECT_EQ(a.respond(o).content, b.respond(o).content);
}

// A sampled reply (temperature 1, a fixed seed) depends only on the conversation and the
// settings, not on what the cache holds: regenerated from the cache (the prompt's K/V reused, its
// last token run alone), and in a fresh session from a saved conversation (the whole prompt as one
// batch), it is the same text. The desktop's regenerate and a restarted app rely on it; a prompt
// path whose bits differ from decode's (the int8 prompt kernel) breaks it.
TEST_F(SessionTest, ASampledReplyIsTheSameWhateverTheCacheHolds) {
    TurnOptions o;
    o.max_tokens = 16;
    o.sampling.temperature = 1.0f;
    o.sampling.seed = 7;
    test::TempDir dir;
    ChatSession a(*model_);
    a.system().conversation_start_date = "2026-11-30";
    a.add_user("Tell me something about the sea.");
    a.save(dir / "conv.json");
    const std::size_t before = a.history().size();
    const TurnResult first = a.respond(o);
    EXPECT_EQ(first.stats.cached_tokens, 0);
    ASSERT_FALSE((first.content + first.reasoning).empty());

    keep_history(a, before);  // regenerate: drop the reply
    const TurnResult again = a.respond(o);
    EXPECT_GT(again.stats.cached_tokens, 0);
    EXPECT_EQ(again.content, first.content);
    EXPECT_EQ(again.reasoning, first.reasoning);

    ChatSession b(*model_);
    b.load(dir / "conv.json");
    const TurnResult cold = b.respond(o);
    EXPECT_EQ(cold.stats.cached_tokens, 0);
    EXPECT_EQ(cold.content, first.content);
    EXPECT_EQ(cold.reasoning, first.reasoning);
}

// Issue 49, "Reproducible by seed": a conversation of several turns, each reply sampled at
// temperature 1 with one seed, gets the same replies (text and every logprob bit) turn by turn
// from the session's cache, from a fresh load of the conversation and from a load with its saved
// K/V -- on the default settings and on the single-rounded bf16 prompt path, whose prompt bits
// differ most from decode's (a cached decoded token reused as a prompt token would show).
TEST_F(SessionTest, AMultiTurnConversationGivesTheSameRepliesWithTheCacheAndFromAFreshLoad) {
    LoadOptions single;
    single.prompt_kernel = "bf16";
    std::unique_ptr<Model> bf16 = Model::load(test::tiny_model_dir(), single);
    for (Model* m : {model_, bf16.get()}) {
        SCOPED_TRACE(m->describe_backend());
        TurnOptions o;
        o.max_tokens = 12;
        o.sampling.temperature = 1.0f;
        o.sampling.seed = 11;
        o.logprobs = 2;
        // Straight into the answer, so that every sampled token has a logprob to compare.
        o.forced_tokens = m->tokenizer().encode("<|channel|>final<|message|>", true);
        o.max_tokens += static_cast<int>(o.forced_tokens.size());
        test::TempDir dir;
        ChatSession a(*m);
        a.system().conversation_start_date = "2026-11-30";
        auto same = [](const TurnResult& x, const TurnResult& y) {
            EXPECT_EQ(x.content, y.content);
            EXPECT_EQ(x.reasoning, y.reasoning);
            ASSERT_EQ(x.logprobs.size(), y.logprobs.size());
            for (std::size_t i = 0; i < x.logprobs.size(); ++i)
                EXPECT_EQ(x.logprobs[i].logprob, y.logprobs[i].logprob) << i;
        };
        const char* users[] = {"Tell me about the sea.", "And the mountains?", "Which is older?"};
        for (int turn = 0; turn < 3; ++turn) {
            SCOPED_TRACE(turn);
            a.add_user(users[turn]);
            a.save(dir / "plain.json");
            a.save(dir / "kv.json", true);
            const TurnResult warm = a.respond(o);
            ASSERT_FALSE(warm.content.empty());
            ASSERT_FALSE(warm.logprobs.empty());
            if (turn > 0) {
                EXPECT_GT(warm.stats.cached_tokens, 0);
            }
            ChatSession cold(*m);
            cold.load(dir / "plain.json");
            const TurnResult fresh = cold.respond(o);
            EXPECT_EQ(fresh.stats.cached_tokens, 0);
            same(warm, fresh);
            ChatSession restored(*m);
            restored.load(dir / "kv.json");
            if (turn > 0) {
                EXPECT_GT(restored.cached_tokens(), 0);
            }
            same(warm, restored.respond(o));
            if (!m->prompt_matches_decode()) {  // the reply's decoded tokens are not reused
                EXPECT_LT(a.reusable_cached_tokens(), a.cached_tokens());
            } else {
                EXPECT_EQ(a.reusable_cached_tokens(), a.cached_tokens());
            }
        }
    }
}

// Continue (TurnOptions::prefill_tokens): a reply cut by the token limit, continued from its
// text, is the reply that was not cut (greedy), and the cut part's K/V come from the cache.
TEST_F(SessionTest, AContinuedReplyIsTheReplyThatWasNotCut) {
    const Tokenizer& tok = model_->tokenizer();
    const std::string start =
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>"
        "Hello there";
    TurnOptions whole = greedy(0);
    whole.forced_tokens = tok.encode(start, true);
    whole.max_tokens = static_cast<int>(whole.forced_tokens.size()) + 10;
    ChatSession a(*model_);
    a.system().conversation_start_date = "2026-11-30";
    a.add_user("Hi");
    const TurnResult uncut = a.respond(whole);

    ChatSession b(*model_);
    b.system().conversation_start_date = "2026-11-30";
    b.add_user("Hi");
    TurnOptions cut = whole;
    cut.max_tokens = static_cast<int>(whole.forced_tokens.size());
    const TurnResult first = b.respond(cut);
    EXPECT_EQ(first.finish, chat::FinishReason::length);
    EXPECT_EQ(first.content, "Hello there");
    EXPECT_EQ(first.reasoning, "Think.");

    keep_history(b, 1);  // the history ends with the user's message again
    TurnOptions more = greedy(10);
    more.prefill_tokens = chat::render_reply_start(first.reasoning, first.content).tokens(tok);
    EXPECT_EQ(more.prefill_tokens, whole.forced_tokens);
    std::string streamed;
    const TurnResult continued = b.respond(more, [&](const chat::ParserEvent& e) {
        if (e.type == chat::EventType::content) streamed += e.text;
    });
    EXPECT_EQ(continued.content, uncut.content);
    EXPECT_EQ(continued.reasoning, uncut.reasoning);
    EXPECT_EQ(continued.stats.generated_tokens, 10);
    // Only the new text streams. Where prompt and decode give the same bits, the cut part was not
    // computed again (its last token, never fed to the model when the turn ended, is the one
    // prompt token processed); else (the CPU's bf16 prompt path) the cut part's K/V came from
    // decode steps and are recomputed by the prompt pass, as a fresh load would.
    EXPECT_EQ("Hello there" + streamed, continued.content);
    EXPECT_EQ(continued.stats.cached_tokens, model_->prompt_matches_decode()
                                                 ? continued.stats.prompt_tokens - 1
                                                 : first.stats.prompt_tokens);

    // Cut while thinking: the reasoning is continued, the answer follows in a final message.
    const chat::Prompt thinking = chat::render_reply_start("Think", "");
    EXPECT_EQ(thinking.text(), "<|channel|>analysis<|message|>Think");
    EXPECT_TRUE(chat::render_reply_start("", "").segments().empty());
    EXPECT_EQ(chat::render_reply_start("", "Hi").text(), "<|channel|>final<|message|>Hi");
}

// logprobs: one entry per answer token (none for the header or reasoning), delivered with the
// events that carry the token's text; greedy picks the top entry; penalties do not change them
// (they are the model's distribution).
TEST_F(SessionTest, LogprobsOfTheAnswerTokens) {
    const Tokenizer& tok = model_->tokenizer();
    TurnOptions o = greedy(40);
    o.logprobs = 3;
    o.forced_tokens = tok.encode(
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>"
        "Hello there",
        true);
    ChatSession a(*model_);
    a.add_user("Hi");
    std::vector<chat::TokenLogprob> streamed;
    TurnResult r = a.respond(o, [&](const chat::ParserEvent& e) {
        if (e.type != chat::EventType::content) {
            EXPECT_TRUE(e.logprobs.empty());
        }
        streamed.insert(streamed.end(), e.logprobs.begin(), e.logprobs.end());
    });
    ASSERT_GE(r.logprobs.size(), 2u);
    std::string bytes;
    for (const auto& t : r.logprobs) bytes += t.bytes;
    EXPECT_EQ(bytes.substr(0, 11), "Hello there");
    if (r.content.find("\xef\xbf\xbd") == std::string::npos) {
        EXPECT_EQ(bytes, r.content);
    }
    ASSERT_EQ(streamed.size(), r.logprobs.size());
    const std::size_t forced_answer = tok.encode("Hello there").size();
    for (std::size_t i = 0; i < r.logprobs.size(); ++i) {
        const auto& t = r.logprobs[i];
        EXPECT_EQ(t.bytes, streamed[i].bytes);
        EXPECT_LE(t.logprob, 0.0);
        ASSERT_EQ(t.top.size(), 3u);
        EXPECT_GE(t.top[0].logprob, t.top[1].logprob);
        EXPECT_GE(t.top[1].logprob, t.top[2].logprob);
        if (i >= forced_answer) {  // greedy: the likeliest token
            EXPECT_EQ(t.top[0].bytes, t.bytes) << i;
            EXPECT_DOUBLE_EQ(t.top[0].logprob, t.logprob) << i;
        }
    }
    // The same forced text under penalties: the same log-probabilities.
    TurnOptions p = o;
    p.max_tokens = static_cast<int>(o.forced_tokens.size());
    p.sampling.presence_penalty = 2.0f;
    p.sampling.frequency_penalty = 1.0f;
    ChatSession b(*model_);
    b.add_user("Hi");
    TurnResult q = b.respond(p);
    ASSERT_EQ(q.logprobs.size(), forced_answer);
    for (std::size_t i = 0; i < forced_answer; ++i) {
        EXPECT_EQ(q.logprobs[i].bytes, r.logprobs[i].bytes);
        EXPECT_DOUBLE_EQ(q.logprobs[i].logprob, r.logprobs[i].logprob);
    }
    // Off by default.
    ChatSession c(*model_);
    c.add_user("Hi");
    EXPECT_TRUE(c.respond(greedy(4)).logprobs.empty());
}

}  // namespace
}  // namespace neural
