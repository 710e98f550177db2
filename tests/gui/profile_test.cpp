// Profiles: built-ins, JSON round trip (atomic save), bad files, clamping, LoadOptions, and the
// dialog showing unsupported knobs disabled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "settings/profile.h"
#include "settings/profiledialog.h"
#include "support/fixtures.h"

#include "runtime/fit.h"
#include "synth/synth.h"
#include "runtime/options.h"
#include "runtime/routing_stats.h"

namespace neural::gui {
namespace {

// A knob's QVariant as the schema's text.
std::string knobText(const QVariant& v) {
    if (v.typeId() == QMetaType::Bool) return v.toBool() ? "1" : "0";
    if (v.typeId() == QMetaType::Double)
        return v.toDouble() == -1 ? "auto" : options::format_real(v.toDouble());
    if (v.typeId() == QMetaType::Int) return v.toInt() == -1 ? "auto" : std::to_string(v.toInt());
    return v.toString().toStdString();
}

TEST(Profiles, BuiltInsDifferWhereDesignSaysSo) {
    const Profile s = Profile::stock(), o = Profile::optimized();
    // The fast path is the default of both (it reads the checkpoint's experts without a store).
    EXPECT_EQ(s.value(QStringLiteral("kernel")).toString(), QStringLiteral("auto"));
    EXPECT_EQ(o.value(QStringLiteral("kernel")).toString(), QStringLiteral("auto"));
    EXPECT_EQ(s.value(QStringLiteral("kernel-persistent")).toString(), QStringLiteral("auto"));
    EXPECT_EQ(o.value(QStringLiteral("kernel-persistent")).toString(), QStringLiteral("1"));
    EXPECT_TRUE(o.value(QStringLiteral("grouped-gemm")).toBool());
    // No fixed pool: without a fit plan, what the budget leaves (auto); with one, the plan's slots.
    EXPECT_DOUBLE_EQ(o.value(QStringLiteral("pool")).toDouble(), -1);
    EXPECT_EQ(o.value(QStringLiteral("kv-ring")).toInt(),
              -1);  // auto: DESIGN's 256 is below the minimum
    EXPECT_EQ(s.value(QStringLiteral("kv-ring")).toInt(), -1);  // Stock: the engine's defaults
    EXPECT_EQ(o.value(QStringLiteral("scratch")).toInt(), 6);
    EXPECT_EQ(s.value(QStringLiteral("scratch")).toInt(), 4);
    for (const KnobDef& k : knobDefs()) EXPECT_FALSE(k.help.isEmpty()) << k.key.toStdString();
}

TEST(Profiles, SaveAndLoadRoundTrip) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("profiles.json"));
    ProfileStore a;
    Profile mine = Profile::optimized();
    mine.name = QStringLiteral("Mine");
    mine.modelDir = QStringLiteral("/models/gpt-oss-20b");
    mine.store = QStringLiteral("/models/experts.nstore");
    mine.values.insert(QStringLiteral("threads"), 6);
    mine.values.insert(QStringLiteral("kernel"), QStringLiteral("avx2"));
    a.upsert(mine);
    a.find(QStringLiteral("Stock"))->values.insert(QStringLiteral("refresh-m"), 9);
    a.setActive(QStringLiteral("Mine"));
    QString error;
    ASSERT_TRUE(a.save(path, &error)) << error.toStdString();

    ProfileStore b;
    ASSERT_TRUE(b.load(path, &error)) << error.toStdString();
    EXPECT_EQ(b.activeName(), QStringLiteral("Mine"));
    ASSERT_EQ(b.profiles().size(), 3);
    const Profile& m = b.active();
    EXPECT_EQ(m.modelDir, mine.modelDir);
    EXPECT_EQ(m.store, mine.store);
    EXPECT_EQ(m.toJson(), mine.toJson());
    EXPECT_EQ(b.find(QStringLiteral("Stock"))->value(QStringLiteral("refresh-m")).toInt(), 9);

    const LoadOptions o = m.toLoadOptions();
    EXPECT_EQ(o.threads, 6);
    EXPECT_EQ(o.kernel, "avx2");
    EXPECT_EQ(o.kernel_persistent, std::optional<bool>(true));
    EXPECT_EQ(o.store.string(), "/models/experts.nstore");
    // Without a store the fused kernels read the checkpoint's experts: the kernel stays.
    Profile noStore = m;
    noStore.store.clear();
    EXPECT_EQ(noStore.toLoadOptions().kernel, "avx2");
}

TEST(Profiles, MissingFileGivesBuiltInsAndBadFilesSayWhy) {
    QTemporaryDir dir;
    ProfileStore s;
    EXPECT_TRUE(s.load(dir.filePath(QStringLiteral("none.json"))));
    EXPECT_EQ(s.profiles().size(), 2);
    EXPECT_EQ(s.activeName(), QStringLiteral("Stock"));

    const QString bad = dir.filePath(QStringLiteral("bad.json"));
    QFile f(bad);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{\"profiles\": [ {\"name\": \"x\"");
    f.close();
    QString error;
    EXPECT_FALSE(s.load(bad, &error));
    EXPECT_NE(error.indexOf(QStringLiteral("not valid JSON")), -1) << error.toStdString();
    EXPECT_EQ(s.profiles().size(), 2);  // built-ins kept
}

TEST(Profiles, HandEditedValuesAreClampedAndUnknownKeysDropped) {
    const QJsonObject o = QJsonDocument::fromJson(R"({"name": "Odd", "knobs": {
        "threads": -5, "pool": 1e9, "kernel": "quantum", "refresh-m": 3.6, "bogus": 1}})")
                              .object();
    const Profile p = Profile::fromJson(o);
    EXPECT_EQ(p.value(QStringLiteral("threads")).toInt(), 0);
    EXPECT_DOUBLE_EQ(p.value(QStringLiteral("pool")).toDouble(), options::find("pool")->max);
    EXPECT_EQ(p.value(QStringLiteral("kernel")).toString(), QStringLiteral("auto"));  // stock
    EXPECT_EQ(p.value(QStringLiteral("refresh-m")).toInt(), 4);
    EXPECT_FALSE(p.values.contains(QStringLiteral("bogus")));
}

// The prompt and memory knobs reach the engine's options where the build has the GPU backend.
TEST(Profiles, ScratchKvRingAndReleaseResidentReachTheEngine) {
    Profile p = Profile::optimized();
    p.store = QStringLiteral("/models/experts.nstore");
    p.values.insert(QStringLiteral("scratch"), 5);
    p.values.insert(QStringLiteral("kv-ring"), 3000);
    p.values.insert(QStringLiteral("release-resident"), true);
    const LoadOptions o = p.toLoadOptions();
    if (!unsupportedReason(QStringLiteral("backend")).isEmpty())
        GTEST_SKIP() << "GPU knobs not applied in this build: "
                     << unsupportedReason(QStringLiteral("backend")).toStdString();
    EXPECT_EQ(o.gpu.scratch_slots, 5);
    EXPECT_EQ(o.gpu.kv_ring, 3000);
    EXPECT_TRUE(o.release_resident);
    p.values.insert(QStringLiteral("warmup-ram"), 20.0);
    p.values.insert(QStringLiteral("lock-ram"), 2.0);
    const LoadOptions levers = p.toLoadOptions();
    EXPECT_DOUBLE_EQ(levers.warmup_ram_seconds, 20.0);
    EXPECT_EQ(levers.lock_ram_bytes, std::uint64_t{2} << 30);
    // The RAM levers act on a store: without one the engine's rule refuses them, naming the flags.
    Profile noStore = p;
    noStore.store.clear();
    EXPECT_THAT(test::error_of([&] { noStore.toLoadOptions(); }),
                ::testing::HasSubstr("need --store FILE"));
    EXPECT_EQ(Profile::stock().toLoadOptions().gpu.kv_ring, -1);
    EXPECT_EQ(Profile::optimized().toLoadOptions().gpu.kv_ring, -1);
    // K/V checkpoints: off in Stock, 1 GiB in Optimized (switching conversations keeps their K/V).
    EXPECT_EQ(Profile::stock().toLoadOptions().gpu.kv_checkpoint_gib, 0.0);
    EXPECT_EQ(Profile::optimized().toLoadOptions().gpu.kv_checkpoint_gib, 1.0);
    p.values.insert(QStringLiteral("kv-checkpoints"), 2.5);
    EXPECT_EQ(p.toLoadOptions().gpu.kv_checkpoint_gib, 2.5);
    EXPECT_TRUE(unsupportedReason(QStringLiteral("kv-checkpoints")).isEmpty());
    EXPECT_TRUE(unsupportedReason(QStringLiteral("kv-ring")).isEmpty());
    EXPECT_TRUE(unsupportedReason(QStringLiteral("grouped-gemm")).isEmpty());
    EXPECT_FALSE(Profile::stock().toLoadOptions().gpu.grouped_gemm);
    EXPECT_TRUE(Profile::optimized().toLoadOptions().gpu.grouped_gemm);
    // fp16 prompt experts: off in both built-ins (the engine's default: less exact).
    EXPECT_TRUE(unsupportedReason(QStringLiteral("prefill-fp16")).isEmpty());
    EXPECT_FALSE(Profile::stock().toLoadOptions().gpu.prefill_fp16);
    EXPECT_FALSE(Profile::optimized().toLoadOptions().gpu.prefill_fp16);
    p.values.insert(QStringLiteral("prefill-fp16"), true);
    EXPECT_TRUE(p.toLoadOptions().gpu.prefill_fp16);
    // Pin store: auto in both built-ins (the engine decides from the store's and the RAM's size).
    EXPECT_TRUE(unsupportedReason(QStringLiteral("pin-store")).isEmpty());
    EXPECT_EQ(Profile::stock().toLoadOptions().gpu.pin_store, "auto");
    EXPECT_EQ(Profile::optimized().toLoadOptions().gpu.pin_store, "auto");
    p.values.insert(QStringLiteral("pin-store"), QStringLiteral("0"));
    EXPECT_EQ(p.toLoadOptions().gpu.pin_store, "0");
    // Streamed misses: auto in both built-ins (the engine measures whether and how much it pays);
    // a boolean in a saved profile reads as 1 / 0.
    EXPECT_TRUE(unsupportedReason(QStringLiteral("stream-misses")).isEmpty());
    EXPECT_EQ(Profile::stock().toLoadOptions().gpu.stream_misses, -1);
    EXPECT_EQ(p.toLoadOptions().gpu.stream_misses, -1);
    EXPECT_EQ(Profile::optimized().toLoadOptions().gpu.stream_misses, -1);
    p.values.insert(QStringLiteral("stream-misses"), QStringLiteral("1"));
    EXPECT_EQ(p.toLoadOptions().gpu.stream_misses, 1);
    p.values.insert(QStringLiteral("stream-misses"), QStringLiteral("0"));
    EXPECT_EQ(p.toLoadOptions().gpu.stream_misses, 0);
    p.values.insert(QStringLiteral("stream-share"), 0.3);
    EXPECT_DOUBLE_EQ(p.toLoadOptions().gpu.stream_share, 0.3);
    // A hand-edited value that is not a choice falls back to auto.
    const Profile edited = Profile::fromJson(
        QJsonObject{{QStringLiteral("name"), QStringLiteral("E")},
                    {QStringLiteral("knobs"),
                     QJsonObject{{QStringLiteral("pin-store"), QStringLiteral("yes")}}}});
    EXPECT_EQ(edited.value(QStringLiteral("pin-store")).toString(), QStringLiteral("auto"));
}

// Settings that cannot apply here sit under one line, hidden until asked for; labels are words,
// the flags are in the tooltips.
TEST(Profiles, SettingsThatCannotApplyAreGroupedAwayUnderOneLine) {
    QTemporaryDir dir;
    ProfileStore store;
    ProfileDialog dialog(&store, dir.filePath(QStringLiteral("p.json")));
    dialog.show();
    int unsupported = 0;
    for (const KnobDef& k : knobDefs()) {
        QWidget* ed = dialog.editor(k.key);
        ASSERT_NE(ed, nullptr);
        const bool applies = unsupportedReason(k.key).isEmpty();
        unsupported += applies ? 0 : 1;
        EXPECT_EQ(ed->isVisible(), applies) << k.key.toStdString();
        EXPECT_NE(ed->toolTip().indexOf(QStringLiteral("--") + k.key), -1) << k.key.toStdString();
    }
    for (QLabel* label : dialog.findChildren<QLabel*>()) {
        if (label->buddy()) {  // a row's label
            EXPECT_EQ(label->text().indexOf(QStringLiteral("--")), -1)
                << label->text().toStdString();
        }
    }
    if (unsupported == 0) {
        EXPECT_EQ(dialog.notApplicableLine(), nullptr);
        return;
    }
    ASSERT_NE(dialog.notApplicableLine(), nullptr);
    EXPECT_TRUE(dialog.notApplicableLine()->isVisible());
    EXPECT_NE(dialog.notApplicableLine()->text().indexOf(QString::number(unsupported)), -1)
        << dialog.notApplicableLine()->text().toStdString();
    QPushButton* show = nullptr;
    for (QPushButton* b : dialog.findChildren<QPushButton*>())
        if (b->accessibleName() == QStringLiteral("Show the settings that do not apply")) show = b;
    ASSERT_NE(show, nullptr);
    show->click();
    for (const KnobDef& k : knobDefs())
        EXPECT_TRUE(dialog.editor(k.key)->isVisible()) << k.key.toStdString();
}

TEST(Profiles, UnsupportedKnobsAreDisabledWithTheirReason) {
    QTemporaryDir dir;
    ProfileStore store;
    ProfileDialog dialog(&store, dir.filePath(QStringLiteral("p.json")));
    int disabled = 0;
    auto* backend = qobject_cast<QComboBox*>(dialog.editor(QStringLiteral("backend")));
    ASSERT_NE(backend, nullptr);
    for (const KnobDef& k : knobDefs()) {
        QWidget* ed = dialog.editor(k.key);
        ASSERT_NE(ed, nullptr) << k.key.toStdString();
        const QString why = unsupportedReason(k.key, backend->currentText());
        EXPECT_EQ(ed->isEnabled(), why.isEmpty()) << k.key.toStdString();
        if (!why.isEmpty()) {
            ++disabled;
            EXPECT_NE(ed->toolTip().indexOf(why), -1) << k.key.toStdString();
        }
    }
    EXPECT_GE(disabled, 1);  // Stock's backend is cpu: the CUDA-only knobs
    EXPECT_TRUE(unsupportedReason(QStringLiteral("threads")).isEmpty());
    EXPECT_TRUE(unsupportedReason(QStringLiteral("kernel")).isEmpty());
}

TEST(Profiles, TheDialogAppliesEditsSavesAndReportsTheActiveProfile) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("p.json"));
    ProfileStore store;
    store.setActive(QStringLiteral("Optimized"));
    ProfileDialog dialog(&store, path);
    auto* threads = qobject_cast<QSpinBox*>(dialog.editor(QStringLiteral("threads")));
    auto* persistent = qobject_cast<QComboBox*>(dialog.editor(QStringLiteral("kernel-persistent")));
    ASSERT_NE(threads, nullptr);
    ASSERT_NE(persistent, nullptr);
    EXPECT_EQ(persistent->currentText(), QStringLiteral("1"));  // shows the Optimized values
    EXPECT_EQ(persistent->toolTip().left(20), QStringLiteral("--kernel-persistent:"));
    threads->setValue(3);
    persistent->setCurrentText(QStringLiteral("0"));
    QSignalSpy applied(&dialog, &ProfileDialog::applied);
    QPushButton* apply = nullptr;
    for (QPushButton* b : dialog.findChildren<QPushButton*>())
        if (b->text() == QStringLiteral("Apply and reload")) apply = b;
    ASSERT_NE(apply, nullptr);
    apply->click();
    ASSERT_EQ(applied.count(), 1);
    const Profile p = applied.at(0).at(0).value<Profile>();
    EXPECT_EQ(p.name, QStringLiteral("Optimized"));
    EXPECT_EQ(p.value(QStringLiteral("threads")).toInt(), 3);
    EXPECT_EQ(p.value(QStringLiteral("kernel-persistent")).toString(), QStringLiteral("0"));
    EXPECT_FALSE(options::persistent_team(p.toLoadOptions(), true));
    ProfileStore reread;
    ASSERT_TRUE(reread.load(path));
    EXPECT_EQ(reread.activeName(), QStringLiteral("Optimized"));
    EXPECT_EQ(reread.active().value(QStringLiteral("threads")).toInt(), 3);
}

// --- The knobs are the settings schema's rows (runtime/options.h) ---------------------------

// A knob value for `text` as the dialog would hold it.
QVariant knobFromText(const KnobDef& k, const std::string& text) {
    const options::Setting& s = *options::find(k.key.toStdString());
    const options::Value v = options::parse(s, text);
    switch (k.type) {
        case KnobDef::Type::boolean:
            return std::get<bool>(v);
        case KnobDef::Type::integer:
            return static_cast<int>(std::get<std::int64_t>(v));
        case KnobDef::Type::real:
            return std::get<double>(v);
        default:
            return QString::fromStdString(text);
    }
}

// Settings (as `neural` reads them from flags) -> a desktop profile.
Profile profileFrom(const options::Settings& settings) {
    Profile p = Profile::stock();
    for (const auto& [key, text] : settings) {
        if (key == "store") {
            p.store = QString::fromStdString(text);
            continue;
        }
        const KnobDef* k = findKnob(QString::fromStdString(options::find(key)->flag.substr(2)));
        EXPECT_NE(k, nullptr) << key;
        if (k) p.values.insert(k->key, knobFromText(*k, text));
    }
    return p;
}

TEST(ProfileKnobs, EveryRowIsAKnobWithItsLabelHelpLimitsAndDefault) {
    for (const options::Setting& s : options::settings()) {
        SCOPED_TRACE(s.flag);
        const KnobDef* k = findKnob(QString::fromStdString(s.flag.substr(2)));
        if (s.key == "store") {
            EXPECT_EQ(k, nullptr);  // Profile::store
            continue;
        }
        ASSERT_NE(k, nullptr);
        EXPECT_EQ(k->flag.toStdString(), s.flag);
        EXPECT_EQ(k->label.toStdString(), s.label);
        EXPECT_TRUE(k->help.startsWith(QString::fromStdString(s.help)));
        EXPECT_EQ(knobText(k->stock), s.default_value());
        if (k->type == KnobDef::Type::integer || k->type == KnobDef::Type::real) {
            EXPECT_EQ(k->max, s.max);
            EXPECT_EQ(k->min, s.auto_value ? *s.auto_value : s.min);
        }
        EXPECT_EQ(k->cudaOnly, s.applies == options::Applies::cuda);
    }
}

// Every row: a knob value gives the LoadOptions the same flag gives `neural` (where this build
// applies the knob; elsewhere it is reported and not applied).
TEST(ProfileKnobs, EveryKnobReachesLoadOptionsAsItsFlagDoes) {
    const bool cuda = unsupportedReason(QStringLiteral("backend")).isEmpty();
    for (const options::Setting& s : options::settings()) {
        if (s.key == "store" || s.key == "backend") continue;
        SCOPED_TRACE(s.flag);
        options::Settings flags = {{"store", "/models/experts.nstore"}, {"kernel", "auto"}};
        if (cuda) flags["backend"] = "auto";
        if (s.key == "warmup_sync" || s.key == "ranking")
            flags["warmup_ram"] = "2";  // what they need (the ranking orders the warm-up)
        const std::string text = s.type == options::Type::boolean  ? "1"
                                 : s.type == options::Type::choice ? s.choices.back()
                                 : s.type == options::Type::path   ? "/x/" + s.key
                                 : s.type == options::Type::real
                                     ? options::format_real(s.max / 4)
                                     : std::to_string(static_cast<std::int64_t>(s.max) - 1);
        flags[s.key] = text;
        const Profile p = profileFrom(flags);
        if (!unsupportedReason(QString::fromStdString(s.flag.substr(2)),
                               p.value(QStringLiteral("backend")).toString())
                 .isEmpty() ||
            (s.applies == options::Applies::cuda && !cuda)) {
            EXPECT_EQ(p.settings().count(s.key), 0u);  // kept in the profile, not applied
            continue;
        }
        EXPECT_EQ(options::to_settings(p.toLoadOptions(), true),
                  options::to_settings(options::apply(flags), true));
    }
}

TEST(ProfileKnobs, OutOfRangeValuesAreRefusedWithTheFlagsMessage) {
    Profile p = Profile::stock();
    p.values.insert(QStringLiteral("threads"), 5000);  // past the limit (fromJson would clamp)
    EXPECT_EQ(test::error_of([&] { p.toLoadOptions(); }),
              "--threads: expected an integer in [0, 4096], got \"5000\"");
    p = Profile::stock();
    p.values.insert(QStringLiteral("prefetch"), QStringLiteral("some"));
    EXPECT_EQ(test::error_of([&] { p.toLoadOptions(); }),
              "--prefetch: expected none, dense or all, got \"some\"");
}

// A CUDA-only knob on a cpu-backend profile is not applied, and says why with the message `neural`
// and neural-server give for the flag.
TEST(ProfileKnobs, ACudaKnobOnTheCpuBackendIsRefusedWithTheFlagsMessage) {
    Profile p = Profile::stock();  // backend cpu
    p.values.insert(QStringLiteral("pool"), 2.0);
    EXPECT_EQ(unsupportedReason(QStringLiteral("pool"), QStringLiteral("cpu")).toStdString(),
              options::backend_refusal(*options::find("pool"), "cpu"));
    EXPECT_EQ(p.settings().count("pool"), 0u);
    EXPECT_DOUBLE_EQ(p.toLoadOptions().gpu.pool_gib, -1.0);
    EXPECT_TRUE(unsupportedReason(QStringLiteral("threads"), QStringLiteral("cpu")).isEmpty());
    // The dialog disables it with that reason while the backend is cpu.
    QTemporaryDir dir;
    ProfileStore store;
    ProfileDialog dialog(&store, dir.filePath(QStringLiteral("p.json")));
    QWidget* pool = dialog.editor(QStringLiteral("pool"));
    ASSERT_NE(pool, nullptr);
    EXPECT_FALSE(pool->isEnabled());
    EXPECT_NE(pool->toolTip().indexOf(QStringLiteral("--pool needs --backend cuda (or auto)")), -1)
        << pool->toolTip().toStdString();
}

// "Persistent CPU team" off reaches the CUDA backend's CPU team (a boolean in a saved profile
// reads as 0), so the Benchmark panel's on/off A/B compares two different teams on either backend.
TEST(ProfileKnobs, PersistentTeamOffReachesTheCudaBackend) {
    Profile p = Profile::optimized();
    p.store = QStringLiteral("/models/experts.nstore");
    p.values.insert(QStringLiteral("kernel-persistent"), false);
    EXPECT_FALSE(options::persistent_team(p.toLoadOptions(), true));
    const Profile saved = Profile::fromJson(p.toJson());
    EXPECT_EQ(saved.value(QStringLiteral("kernel-persistent")).toString(), QStringLiteral("0"));
    EXPECT_FALSE(options::persistent_team(saved.toLoadOptions(), true));
    p.values.insert(QStringLiteral("kernel-persistent"), true);
    EXPECT_TRUE(options::persistent_team(p.toLoadOptions(), false));
}

// The flags `neural fit` plans for this machine, as a desktop profile: the same LoadOptions.
TEST(ProfileKnobs, FitFlagsAreADesktopProfile) {
    FitRequest req;
    req.config = ModelConfig::load(test::tiny_model_dir() / "config.json");
    req.store_kind = "raw";
    FitPlan plan = plan_fit(req, detect_machine());
    plan.store = "/models/experts.nstore";
    std::vector<std::string> flags = plan.flags();
    const options::Settings settings = options::take_flags(flags);
    EXPECT_TRUE(flags.empty());
    const Profile p = profileFrom(settings);
    EXPECT_EQ(options::to_settings(p.toLoadOptions(), true),
              options::to_settings(options::apply(settings), true));
}

// No built-in profile turns a lossy setting on (options::Arithmetic): Stock, Optimized, and
// Optimized following the fit of a GPU PC, a CPU-only PC and a two-core one.
TEST(Profiles, BuiltInsNeverTurnALossySettingOn) {
    FitRequest req;
    synth::Options shape;
    shape.shape = synth::shape_named("gpt-oss-20b");
    req.config = ModelConfig::from_json(nlohmann::json::parse(synth::make_plan(shape).config_json),
                                        "gpt-oss-20b");
    req.store_kind = "raw";
    MachineInfo gpu;
    gpu.ram_total = 64'000'000'000;
    gpu.ram_available = gpu.ram_total / 2;
    gpu.cpus = 16;
    gpu.avx2 = gpu.avx512 = true;
    gpu.gpu = MachineInfo::Gpu{"test GPU", 12ull << 30, 11ull << 30};
    MachineInfo cpu = gpu;
    cpu.gpu.reset();
    MachineInfo small = cpu;
    small.cpus = 2;
    small.avx512 = false;
    std::vector<Profile> profiles = {Profile::stock(), Profile::optimized()};
    for (const MachineInfo& m : {gpu, cpu, small}) {
        const FitPlan plan = plan_fit(req, m);
        profiles.push_back(Profile::optimized(&plan));
    }
    for (Profile& p : profiles) {
        p.store = QStringLiteral("/models/experts.nstore");  // the kernel applies with a store
        EXPECT_TRUE(options::lossy_settings(p.settings()).empty())
            << p.name.toStdString() << ": " << options::lossy_settings(p.settings()).front();
        // Every knob the profile holds, applied or not.
        options::Settings all;
        for (auto it = p.values.begin(); it != p.values.end(); ++it) {
            const QVariant& v = it.value();
            all[it.key().toStdString()] = v.typeId() == QMetaType::Bool
                                              ? (v.toBool() ? "1" : "0")
                                              : v.toString().toStdString();
        }
        EXPECT_TRUE(options::lossy_settings(all).empty()) << p.name.toStdString();
    }
}

// The built-in Optimized takes its VRAM plan from runtime/fit for this PC's VRAM (the plan
// `neural fit` prints), not a fixed pool: a 12 GiB and a 24 GiB card give different slots, each
// the plan's; the ProfileStore's Optimized follows a new fit until the user edits it.
TEST(Profiles, OptimizedFollowsTheFitForTheVram) {
    if (!unsupportedReason(QStringLiteral("backend")).isEmpty())
        GTEST_SKIP() << "GPU knobs not applied in this build: "
                     << unsupportedReason(QStringLiteral("backend")).toStdString();
    FitRequest req;
    synth::Options shape;
    shape.shape = synth::shape_named("gpt-oss-20b");
    req.config = ModelConfig::from_json(nlohmann::json::parse(synth::make_plan(shape).config_json),
                                        "gpt-oss-20b");
    auto machine = [](double vram_gib) {
        MachineInfo m;
        m.ram_total = 64'000'000'000;
        m.ram_available = m.ram_total / 2;
        m.cpus = 8;
        m.avx2 = true;
        m.gpu = MachineInfo::Gpu{"test GPU", static_cast<std::uint64_t>(vram_gib * 1073741824.0),
                                 static_cast<std::uint64_t>((vram_gib - 0.4) * 1073741824.0)};
        return m;
    };
    const FitPlan small = plan_fit(req, machine(8)), big = plan_fit(req, machine(24));
    ASSERT_EQ(small.backend, "cuda");
    ASSERT_EQ(big.backend, "cuda");
    ASSERT_LT(small.pool_slots, big.pool_slots);
    for (const FitPlan* plan : {&small, &big}) {
        const Profile o = Profile::optimized(plan);
        EXPECT_EQ(o.name, QStringLiteral("Optimized"));
        const LoadOptions lo = o.toLoadOptions();
        const LoadOptions want = plan->load_options();
        EXPECT_EQ(lo.gpu.pool_slots, want.gpu.pool_slots);
        EXPECT_DOUBLE_EQ(lo.gpu.vram_budget_gib, want.gpu.vram_budget_gib);
        EXPECT_EQ(lo.gpu.context, want.gpu.context);
        EXPECT_EQ(lo.threads, want.threads);
        EXPECT_EQ(lo.backend, "cuda");
        // Its own choices stay.
        EXPECT_EQ(o.value(QStringLiteral("scratch")).toInt(), 6);
        EXPECT_TRUE(o.value(QStringLiteral("grouped-gemm")).toBool());
    }
    // The store's Optimized follows each new fit; once edited it is the user's and stays.
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("profiles.json"));
    ProfileStore store;
    EXPECT_TRUE(store.followFit(small));
    EXPECT_EQ(store.find(QStringLiteral("Optimized"))->toLoadOptions().gpu.pool_slots,
              small.pool_slots);
    ASSERT_TRUE(store.save(path));
    ProfileStore reread;
    ASSERT_TRUE(reread.load(path));
    EXPECT_TRUE(reread.followFit(big));  // still the built-in after a reload
    EXPECT_EQ(reread.find(QStringLiteral("Optimized"))->toLoadOptions().gpu.pool_slots,
              big.pool_slots);
    reread.find(QStringLiteral("Optimized"))->values.insert(QStringLiteral("scratch"), 8);
    EXPECT_FALSE(reread.optimizedFollowsFit());
    EXPECT_FALSE(reread.followFit(small));
    EXPECT_EQ(reread.find(QStringLiteral("Optimized"))->toLoadOptions().gpu.pool_slots,
              big.pool_slots);
    ASSERT_TRUE(reread.save(path));
    ProfileStore edited;
    ASSERT_TRUE(edited.load(path));
    EXPECT_FALSE(edited.followFit(small));
}

// The profile page shows what the engine learned about the shown model's experts (tokens, date)
// and resets it: the file goes, the next load starts without, and the page says so.
TEST(Profiles, TheDialogShowsTheLearnedExpertStatisticsAndResetsThem) {
    QTemporaryDir dir;
    const std::filesystem::path model = test::tiny_model_dir();
    // "auto": where the engine keeps this model's statistics (the tests' own folder).
    const std::filesystem::path file = routing_stats_path("auto", model, {});
    ASSERT_FALSE(file.empty());
    RoutingStatsData d;
    d.model = "0123456789abcdef-2x4";
    d.layers = {{1, 2}, {3, 4}};
    d.tokens = 777;
    d.updated = 1796154191;
    save_routing_stats(file, d);
    ProfileStore store;
    Profile p = Profile::stock();
    p.name = QStringLiteral("Tiny");
    p.modelDir = QString::fromStdString(model.string());
    store.upsert(p);
    store.setActive(QStringLiteral("Tiny"));
    ProfileDialog dialog(&store, dir.filePath(QStringLiteral("p.json")));
    dialog.show();
    ASSERT_NE(dialog.statsLine(), nullptr);
    ASSERT_NE(dialog.statsResetButton(), nullptr);
    EXPECT_EQ(dialog.statsFile().toStdString(), file.string());
    const QString shown = dialog.statsLine()->text();
    EXPECT_NE(shown.indexOf(QStringLiteral("777 tokens")), -1) << shown.toStdString();
    EXPECT_NE(shown.indexOf(QStringLiteral("2026-12-01 19:43 UTC")), -1) << shown.toStdString();
    ASSERT_TRUE(dialog.statsResetButton()->isEnabled());
    dialog.statsResetButton()->click();
    EXPECT_FALSE(std::filesystem::exists(file));
    EXPECT_NE(dialog.statsLine()->text().indexOf(QStringLiteral("next load")), -1)
        << dialog.statsLine()->text().toStdString();
    EXPECT_FALSE(dialog.statsResetButton()->isEnabled());
    // The setting's own knob: a file of its own, or off.
    auto* setting = qobject_cast<QLineEdit*>(dialog.editor(QStringLiteral("routing-stats")));
    ASSERT_NE(setting, nullptr);
    EXPECT_EQ(setting->text(), QStringLiteral("auto"));
    const QString mine = dir.filePath(QStringLiteral("mine.json"));
    setting->setText(mine);
    EXPECT_EQ(dialog.statsFile(), mine);
    EXPECT_NE(dialog.statsLine()->text().indexOf(QStringLiteral("Nothing learned yet")), -1);
    EXPECT_FALSE(dialog.statsResetButton()->isEnabled());
    QFile bad(mine);
    ASSERT_TRUE(bad.open(QIODevice::WriteOnly));
    bad.write("{ not json");
    bad.close();
    setting->setText(mine + QStringLiteral(" "));  // shown again (trimmed: the same file)
    EXPECT_NE(dialog.statsLine()->text().indexOf(QStringLiteral("Unreadable")), -1);
    EXPECT_TRUE(dialog.statsResetButton()->isEnabled());  // a bad file can be reset too
    setting->setText(QStringLiteral("off"));
    EXPECT_TRUE(dialog.statsFile().isEmpty());
    EXPECT_NE(dialog.statsLine()->text().indexOf(QStringLiteral("Off")), -1);
    EXPECT_FALSE(dialog.statsResetButton()->isEnabled());
}

// The learned expert statistics were written into the checkpoint's folder when there was no
// store (a folder LM Studio, Ollama or the Hugging Face cache owns): the app keeps them in its
// data folder, beside a store only when there is one (a store is Neural's own file).
TEST(RoutingStatsPlace, NeverInTheCheckpointsFolder) {
    const QByteArray saved = qgetenv("NEURAL_ROUTING_STATS_DIR");
    qunsetenv("NEURAL_ROUTING_STATS_DIR");
    QTemporaryDir dir;
    const QString model = dir.filePath(QStringLiteral("gpt-oss-20b"));
    QDir().mkpath(model);
    const std::filesystem::path own = desktopRoutingStatsPath(QStringLiteral("auto"), model, {});
    EXPECT_EQ(QString::fromStdString(own.parent_path().string()),
              appDataDir() + QStringLiteral("/routing-stats"));
    EXPECT_EQ(desktopRoutingStatsPath(QString(), model, {}), own);
    const QString store = dir.filePath(QStringLiteral("experts.nstore"));
    EXPECT_EQ(QString::fromStdString(
                  desktopRoutingStatsPath(QStringLiteral("auto"), model, store).string()),
              store + QStringLiteral(".routing-stats.json"));
    EXPECT_TRUE(desktopRoutingStatsPath(QStringLiteral("off"), model, {}).empty());
    qputenv("NEURAL_ROUTING_STATS_DIR", saved);
}

}  // namespace
}  // namespace neural::gui