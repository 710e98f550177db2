// The settings schema (runtime/options.h): every row parses its default and its limits and
// refuses what is past them with the flag and the range in the message; apply / to_flags /
// take_flags round-trip every row; the rules between settings (CUDA-only settings on the CPU
// backend, store-only settings without a store); the persistent team reaching the CUDA backend
// when it is turned off; the flags `neural fit` prints reading back as its plan; and every flag
// in docs/USER_GUIDE.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "runtime/fit.h"
#include "platform/thread_affinity.h"
#include "runtime/options.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using ::testing::HasSubstr;

using test::error_of;

// A value inside the row's limits that is not its default (for the round trips).
std::string other_value(const options::Setting& s) {
    std::vector<std::string> candidates;
    switch (s.type) {
        case options::Type::integer:
            candidates = {std::to_string(static_cast<std::int64_t>(s.max) - 1),
                          std::to_string(static_cast<std::int64_t>(s.max)),
                          std::to_string(static_cast<std::int64_t>(s.min))};
            break;
        case options::Type::real:
            candidates = {options::format_real(s.max / 2), options::format_real(s.max),
                          options::format_real(s.min)};
            break;
        case options::Type::boolean:
            candidates = {"1", "0"};  // on by default: 0
            break;
        case options::Type::choice:
            candidates = s.choices;
            break;
        case options::Type::path:
            candidates = {"/some/" + s.key + ".file"};
            break;
    }
    for (const std::string& c : candidates) {
        if (options::format(s, options::parse(s, c)) != s.default_value()) return c;
    }
    ADD_FAILURE() << s.flag << ": no value besides the default";
    return s.default_value();
}

// The backend and store a row needs to be accepted.
options::Settings context_for(const options::Setting& s) {
    options::Settings v;
    if (s.applies == options::Applies::cuda) v["backend"] = "cuda";
    v["store"] = "/models/experts.nstore";
    if (s.key == "warmup_sync" || s.key == "ranking") v["warmup_ram"] = "5";
    if (s.key == "kernel_persistent" || s.key == "kdll") v["kernel"] = "auto";
    return v;
}

TEST(SettingsSchema, EveryRowIsWellFormedAndItsDefaultParses) {
    std::set<std::string> keys, flags;
    for (const options::Setting& s : options::settings()) {
        SCOPED_TRACE(s.flag);
        EXPECT_TRUE(keys.insert(s.key).second);
        EXPECT_TRUE(flags.insert(s.flag).second);
        EXPECT_EQ(s.flag.substr(0, 2), "--");
        EXPECT_FALSE(s.help.empty());
        EXPECT_FALSE(s.label.empty());
        EXPECT_FALSE(s.metavar.empty());
        EXPECT_EQ(options::find(s.key), &s);
        EXPECT_EQ(options::find(s.flag), &s);
        EXPECT_EQ(options::find(s.flag.substr(2)), &s);
        // The default is LoadOptions{}'s and reads back as itself.
        const std::string d = s.default_value();
        EXPECT_EQ(options::format(s, options::parse(s, d)), d);
        if (s.type == options::Type::integer || s.type == options::Type::real) {
            EXPECT_LT(s.min, s.max);
        }
        if (s.type == options::Type::choice) {
            EXPECT_GE(s.choices.size(), 2u);
        }
    }
    EXPECT_EQ(options::find("no-such-setting"), nullptr);
    // The defaults are the option structs' (one source).
    EXPECT_EQ(options::find("refresh_m")->default_value(), std::to_string(GpuOptions{}.refresh_m));
    EXPECT_EQ(options::find("scratch")->default_value(),
              std::to_string(GpuOptions{}.scratch_slots));
    EXPECT_EQ(options::find("pin_store")->default_value(), GpuOptions{}.pin_store);
    EXPECT_EQ(options::find("kv_ring")->default_value(), "auto");
}

TEST(SettingsSchema, ValuesPastTheLimitsAreRefusedNamingTheFlagAndTheRange) {
    for (const options::Setting& s : options::settings()) {
        SCOPED_TRACE(s.flag);
        std::vector<std::string> bad;
        switch (s.type) {
            case options::Type::integer:
                bad = {options::format_real(s.max + 1), "x", "", "1.5"};
                if (!s.auto_value || *s.auto_value != s.min - 1)
                    bad.push_back(options::format_real(s.min - 1));
                break;
            case options::Type::real:
                bad = {options::format_real(s.max * 2 + 1), "nan", "inf", "1e999", "two"};
                if (!s.auto_value) bad.push_back(options::format_real(s.min - 1));
                break;
            case options::Type::boolean:
                bad = {"2", "yes", "on", ""};
                break;
            case options::Type::choice:
                bad = {"sideways", ""};
                break;
            case options::Type::path:
                continue;  // any text is a path
        }
        for (const std::string& v : bad) {
            const std::string e = error_of([&] { options::parse(s, v); });
            EXPECT_EQ(e, s.flag + ": expected " + s.allowed() + ", got \"" + v + "\"") << v;
        }
        // The limits themselves are accepted.
        if (s.type == options::Type::integer || s.type == options::Type::real) {
            EXPECT_NO_THROW(options::parse(s, options::format_real(s.min)));
            EXPECT_NO_THROW(options::parse(s, options::format_real(s.max)));
            if (s.auto_value) {
                EXPECT_EQ(options::format(s, options::parse(s, "auto")), "auto");
            }
        }
    }
    EXPECT_EQ(options::find("scratch")->allowed(), "an integer in [1, 64]");
    EXPECT_EQ(options::find("pool")->allowed(), "GiB in [0, 4096] or auto");
    EXPECT_EQ(options::find("pin_store")->allowed(), "auto, 0 or 1");
    EXPECT_EQ(options::find("grouped_gemm")->allowed(), "0 or 1");
}

// Every row: a non-default value through apply -> to_flags -> take_flags -> apply is the same.
TEST(SettingsSchema, EveryRowRoundTripsThroughFlags) {
    for (const options::Setting& s : options::settings()) {
        SCOPED_TRACE(s.flag);
        options::Settings in = context_for(s);
        in[s.key] = other_value(s);
        const LoadOptions a = options::apply(in);
        EXPECT_EQ(options::format(s, s.get(a)), options::format(s, options::parse(s, in[s.key])));
        EXPECT_NE(options::format(s, s.get(a)), s.default_value());
        std::vector<std::string> args = options::to_flags(a);
        args.push_back("positional");
        const options::Settings back = options::take_flags(args);
        EXPECT_EQ(args, std::vector<std::string>{"positional"});
        const LoadOptions b = options::apply(back);
        EXPECT_EQ(options::to_settings(a, true), options::to_settings(b, true));
    }
}

TEST(SettingsSchema, TakeFlagsReadsValuesInlineAndBareSwitches) {
    std::vector<std::string> args = {
        "--model",        "m", "--pool=3.5",          "--release-resident",  "--backend", "cuda",
        "--grouped-gemm", "0", "--kernel-persistent", "--prefill-fp16=true", "--other",   "x"};
    const options::Settings v = options::take_flags(args);
    EXPECT_EQ(args, (std::vector<std::string>{"--model", "m", "--other", "x"}));
    EXPECT_EQ(v.at("pool"), "3.5");
    EXPECT_EQ(v.at("release_resident"), "1");  // bare: 1
    EXPECT_EQ(v.at("grouped_gemm"), "0");
    EXPECT_EQ(v.at("kernel_persistent"), "1");
    EXPECT_EQ(v.at("prefill_fp16"), "true");
    // A bare switch does not take the next flag; the next word it does take (and checks).
    std::vector<std::string> word = {"--pin-store", "yes"};
    EXPECT_EQ(error_of([&] { options::take_flags(word); }),
              "--pin-store: expected auto, 0 or 1, got \"yes\"");
    std::vector<std::string> end = {"--model", "m", "--release-resident"};
    EXPECT_EQ(options::take_flags(end).at("release_resident"), "1");
    // A valued flag at the end is an error.
    std::vector<std::string> more = {"--warmup-sync", "--model", "m"};
    EXPECT_EQ(options::take_flags(more).at("warmup_sync"), "1");
    EXPECT_EQ(more, (std::vector<std::string>{"--model", "m"}));
    std::vector<std::string> last = {"--pool-slots"};
    EXPECT_THAT(error_of([&] { options::take_flags(last); }),
                HasSubstr("--pool-slots needs a value"));
    std::vector<std::string> bad = {"--scratch", "99"};
    EXPECT_EQ(error_of([&] { options::take_flags(bad); }),
              "--scratch: expected an integer in [1, 64], got \"99\"");
}

TEST(SettingsSchema, ACudaSettingIsRefusedOnTheCpuBackendWithOneMessage) {
    for (const options::Setting& s : options::settings()) {
        if (s.applies != options::Applies::cuda) continue;
        SCOPED_TRACE(s.flag);
        options::Settings v = context_for(s);
        v.erase("backend");
        v[s.key] = other_value(s);
        const std::string e = error_of([&] { options::apply(v); });
        EXPECT_EQ(e, options::backend_refusal(s, "cpu"));
        EXPECT_THAT(e, HasSubstr(s.flag + " needs --backend cuda (or auto)"));
        v["backend"] = "auto";  // auto may pick the GPU: accepted
        EXPECT_NO_THROW(options::apply(v));
    }
    // Given at all, even at its default value, it is refused: the backend would ignore it.
    EXPECT_THAT(error_of([&] {
                    options::apply({{"scratch", "4"}, {"backend", "cpu"}});
                }),
                HasSubstr("--scratch needs --backend cuda"));
}

TEST(SettingsSchema, RulesBetweenSettings) {
    EXPECT_NO_THROW(
        options::apply({{"kernel", "avx2"}}));  // the fused kernels read the checkpoint too
    EXPECT_THAT(error_of([&] {
                    options::apply({{"warmup_ram", "3"}});
                }),
                HasSubstr("need --store FILE"));
    // The default warm-up (auto) acts on a store: with one it is what --warmup-sync waits for.
    EXPECT_NO_THROW(options::apply({{"store", "s"}, {"warmup_sync", "1"}}));
    EXPECT_EQ(options::apply({}).warmup_ram_seconds, kWarmupRamAuto);
    EXPECT_NO_THROW(options::apply({{"warmup_ram", "auto"}}));  // no store: nothing to warm
    EXPECT_THAT(error_of([&] {
                    options::apply({{"store", "s"}, {"warmup_ram", "0"}, {"warmup_sync", "1"}});
                }),
                HasSubstr("--warmup-sync needs a warm-up"));
    EXPECT_THAT(error_of([&] {
                    options::apply({{"warmup_sync", "1"}});
                }),
                HasSubstr("--warmup-sync needs a warm-up"));
    EXPECT_THAT(error_of([&] {
                    options::apply({{"ranking", "r.json"}});
                }),
                HasSubstr("--ranking needs --backend cuda"));
    EXPECT_NO_THROW(options::apply({{"ranking", "r.json"}, {"store", "s"}, {"warmup_ram", "2"}}));
    EXPECT_THAT(error_of([&] {
                    options::apply({{"bogus", "1"}});
                }),
                HasSubstr("unknown setting \"bogus\""));
    // The fast kernels are the default, with or without a store; an explicit reference stays.
    EXPECT_EQ(options::apply({{"store", "s"}}).kernel, "auto");
    EXPECT_EQ(options::apply({{"store", "s"}, {"kernel", "reference"}}).kernel, "reference");
    EXPECT_EQ(options::apply({}).kernel, "auto");
    // GiB settings are bytes in LoadOptions.
    EXPECT_EQ(options::apply({{"store", "s"}, {"lock_ram", "1.5"}}).lock_ram_bytes,
              std::uint64_t{3} << 29);
    EXPECT_EQ(options::apply({{"ws_min", "2"}}).ws_min_bytes, std::uint64_t{2} << 30);
}

// An explicit --kernel-persistent 0 (the desktop's "Persistent CPU team" off) decides for the CUDA
// backend's CPU team too; only an unset value lets each backend pick its default.
TEST(SettingsSchema, PersistentTeamOffReachesTheCudaBackend) {
    const LoadOptions off = options::apply({{"backend", "cuda"}, {"kernel_persistent", "0"}});
    EXPECT_FALSE(options::persistent_team(off, true));
    EXPECT_FALSE(options::persistent_team(off, false));
    const LoadOptions on = options::apply({{"kernel_persistent", "1"}});
    EXPECT_TRUE(options::persistent_team(on, true));
    EXPECT_TRUE(options::persistent_team(on, false));
    // Not given: the backend's default (persistent on CUDA, OpenMP on the CPU backend).
    EXPECT_TRUE(options::persistent_team(LoadOptions{}, true));
    // Unset on the CPU backend: the persistent team from kPersistentTeamMinCpus CPUs on.
    EXPECT_EQ(options::persistent_team(LoadOptions{}, false),
              available_cpus() >= options::kPersistentTeamMinCpus);
}

TEST(SettingsSchema, FitFlagsReadBackAsThePlan) {
    FitPlan p;
    p.backend = "cuda";
    p.vram_budget_gib = 11.503;
    p.pool_slots = 412;
    p.static_fraction = 0.5;
    p.context = 8192;
    p.threads = 8;
    p.kernel = "avx2";
    p.kernel_persistent = true;
    p.release_resident = true;
    p.kv_checkpoints_gib = 1;
    p.store = "/models/experts.nstore";
    std::vector<std::string> flags = p.flags();
    EXPECT_EQ(flags[0], "--backend");
    EXPECT_EQ(flags[1], "cuda");
    const LoadOptions o = options::apply(options::take_flags(flags));
    EXPECT_TRUE(flags.empty());
    EXPECT_EQ(options::to_settings(o, true), options::to_settings(p.load_options(), true));
    EXPECT_EQ(o.gpu.pool_slots, 412);
    EXPECT_DOUBLE_EQ(o.gpu.vram_budget_gib, 11.5);
    EXPECT_EQ(o.kernel, "avx2");
    // A CPU plan without a store: its kernel (the fused kernels read the checkpoint), no CUDA flag.
    FitPlan c;
    c.backend = "cpu";
    c.threads = 4;
    c.kernel = "avx512";
    c.kernel_persistent = false;
    std::vector<std::string> cf = c.flags();
    EXPECT_EQ(cf, (std::vector<std::string>{"--backend", "cpu", "--kernel", "avx512",
                                            "--kernel-persistent", "0", "--threads", "4"}));
    EXPECT_NO_THROW(options::apply(options::take_flags(cf)));
}

TEST(SettingsSchema, HelpListsEveryFlagAndItsDefault) {
    const std::string help = options::help_text();
    for (const options::Setting& s : options::settings()) {
        EXPECT_THAT(help, ::testing::AnyOf(HasSubstr("  " + s.flag + " " + s.metavar + " "),
                                           HasSubstr("  " + s.flag + " " + s.metavar + "\n")))
            << s.flag;
    }
    EXPECT_THAT(help, HasSubstr("(default 4)"));
    std::istringstream lines(help);
    for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
}

// docs/USER_GUIDE.md names every engine setting (the option list is checked against the schema).
TEST(SettingsSchema, TheUserGuideNamesEveryFlag) {
    std::ifstream f(std::string(NEURAL_DOCS_DIR) + "/USER_GUIDE.md");
    ASSERT_TRUE(f) << "docs/USER_GUIDE.md not found";
    std::stringstream text;
    text << f.rdbuf();
    for (const options::Setting& s : options::settings()) {
        EXPECT_THAT(text.str(), HasSubstr("`" + s.flag))
            << s.flag << " is not in docs/USER_GUIDE.md";
    }
}

// Every setting has an arithmetic class; the lossy ones name their lossy values, say LOSSY in
// their help, and none is lossy by default (docs/USER_GUIDE.md "What each setting does to the
// answers").
TEST(SettingsSchema, LossyValuesAreOptInAndLabelled) {
    int lossy = 0;
    for (const options::Setting& s : options::settings()) {
        EXPECT_FALSE(s.arithmetic_note.empty()) << s.flag;
        EXPECT_FALSE(s.is_lossy(s.default_value())) << s.flag << " is lossy by default";
        EXPECT_EQ(s.arithmetic == options::Arithmetic::lossy, !s.lossy_values.empty()) << s.flag;
        if (s.lossy_values.empty()) continue;
        ++lossy;
        EXPECT_THAT(s.help, HasSubstr("LOSSY")) << s.flag;
        for (const std::string& v : s.lossy_values) {
            EXPECT_NO_THROW(options::parse(s, v)) << s.flag << " " << v;
            EXPECT_TRUE(s.is_lossy(v)) << s.flag << " " << v;
        }
    }
    EXPECT_GE(lossy, 4);  // dense, prompt-kernel, prefill-fp16, plain-rope
    // Values as any surface spells them.
    EXPECT_TRUE(options::find("prefill-fp16")->is_lossy("true"));
    EXPECT_FALSE(options::find("prefill-fp16")->is_lossy("0"));
    EXPECT_FALSE(options::find("dense")->is_lossy("bf16"));
    EXPECT_FALSE(options::find("dense")->is_lossy("not-a-value"));
    EXPECT_THAT(options::lossy_settings({{"dense", "int8-head"}, {"threads", "4"}}),
                ::testing::ElementsAre("--dense int8-head"));
    EXPECT_TRUE(options::lossy_settings(options::to_settings(LoadOptions{}, true)).empty());
}

// docs/USER_GUIDE.md carries the arithmetic table exactly as the schema generates it.
TEST(SettingsSchema, TheUserGuideCarriesTheArithmeticTable) {
    std::ifstream f(std::string(NEURAL_DOCS_DIR) + "/USER_GUIDE.md");
    ASSERT_TRUE(f) << "docs/USER_GUIDE.md not found";
    std::stringstream text;
    text << f.rdbuf();
    const std::string table = options::arithmetic_table();
    EXPECT_THAT(text.str(), HasSubstr(table))
        << "docs/USER_GUIDE.md \"What each setting does to the answers\" is stale; the table "
           "the schema generates:\n"
        << table;
}

}  // namespace
}  // namespace neural
