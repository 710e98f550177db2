// Profiles: built-ins, JSON round trip (atomic save), bad files, clamping, LoadOptions, and the
// dialog showing unsupported knobs disabled.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include "settings/profile.h"
#include "settings/profiledialog.h"

namespace neural::gui {
namespace {

TEST(Profiles, BuiltInsDifferWhereDesignSaysSo)
{
    const Profile s = Profile::stock(), o = Profile::optimized();
    // The fast path is the default of both (it reads the checkpoint's experts without a store).
    EXPECT_EQ(s.value(QStringLiteral("kernel")).toString(), QStringLiteral("auto"));
    EXPECT_EQ(o.value(QStringLiteral("kernel")).toString(), QStringLiteral("auto"));
    EXPECT_FALSE(s.value(QStringLiteral("kernel-persistent")).toBool());
    EXPECT_TRUE(o.value(QStringLiteral("kernel-persistent")).toBool());
    EXPECT_TRUE(o.value(QStringLiteral("grouped-gemm")).toBool());
    EXPECT_DOUBLE_EQ(o.value(QStringLiteral("pool")).toDouble(), 6.05);
    EXPECT_EQ(o.value(QStringLiteral("kv-ring")).toInt(), -1);  // auto: DESIGN's 256 is below the minimum
    EXPECT_EQ(s.value(QStringLiteral("kv-ring")).toInt(), 0);
    EXPECT_EQ(o.value(QStringLiteral("scratch")).toInt(), 6);
    EXPECT_EQ(s.value(QStringLiteral("scratch")).toInt(), 4);
    for (const KnobDef &k : knobDefs())
        EXPECT_FALSE(k.help.isEmpty()) << k.key.toStdString();
}

TEST(Profiles, SaveAndLoadRoundTrip)
{
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
    const Profile &m = b.active();
    EXPECT_EQ(m.modelDir, mine.modelDir);
    EXPECT_EQ(m.store, mine.store);
    EXPECT_EQ(m.toJson(), mine.toJson());
    EXPECT_EQ(b.find(QStringLiteral("Stock"))->value(QStringLiteral("refresh-m")).toInt(), 9);

    int threads = -1;
    const LoadOptions o = m.toLoadOptions(&threads);
    EXPECT_EQ(threads, 6);
    EXPECT_EQ(o.kernel, "avx2");
    EXPECT_TRUE(o.kernel_persistent);
    EXPECT_EQ(o.store.string(), "/models/experts.nstore");
    // Without a store the fused kernels read the checkpoint's experts: the kernel stays.
    Profile noStore = m;
    noStore.store.clear();
    EXPECT_EQ(noStore.toLoadOptions().kernel, "avx2");
}

TEST(Profiles, MissingFileGivesBuiltInsAndBadFilesSayWhy)
{
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

TEST(Profiles, HandEditedValuesAreClampedAndUnknownKeysDropped)
{
    const QJsonObject o = QJsonDocument::fromJson(R"({"name": "Odd", "knobs": {
        "threads": -5, "pool": 1e9, "kernel": "quantum", "refresh-m": 3.6, "bogus": 1}})").object();
    const Profile p = Profile::fromJson(o);
    EXPECT_EQ(p.value(QStringLiteral("threads")).toInt(), 0);
    EXPECT_DOUBLE_EQ(p.value(QStringLiteral("pool")).toDouble(), 1024.0);
    EXPECT_EQ(p.value(QStringLiteral("kernel")).toString(), QStringLiteral("auto"));  // stock
    EXPECT_EQ(p.value(QStringLiteral("refresh-m")).toInt(), 4);
    EXPECT_FALSE(p.values.contains(QStringLiteral("bogus")));
}

// The prompt and memory knobs reach the engine's options where the build has the GPU backend.
TEST(Profiles, ScratchKvRingAndReleaseResidentReachTheEngine)
{
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
    p.store.clear();  // the RAM levers act on a store: without one they are not passed on
    EXPECT_FALSE(p.toLoadOptions().release_resident);
    EXPECT_EQ(p.toLoadOptions().warmup_ram_seconds, 0.0);
    EXPECT_EQ(p.toLoadOptions().lock_ram_bytes, 0u);
    EXPECT_EQ(Profile::stock().toLoadOptions().gpu.kv_ring, 0);
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
    // Streamed misses: off in both built-ins (pays only with a PCIe 5.0 x16 link).
    EXPECT_TRUE(unsupportedReason(QStringLiteral("stream-misses")).isEmpty());
    EXPECT_EQ(Profile::stock().toLoadOptions().gpu.stream_misses, 0);
    EXPECT_EQ(Profile::optimized().toLoadOptions().gpu.stream_misses, 0);
    p.values.insert(QStringLiteral("stream-misses"), true);
    EXPECT_EQ(p.toLoadOptions().gpu.stream_misses, 1);
    // A hand-edited value that is not a choice falls back to auto.
    const Profile edited = Profile::fromJson(QJsonObject{
        {QStringLiteral("name"), QStringLiteral("E")},
        {QStringLiteral("knobs"), QJsonObject{{QStringLiteral("pin-store"), QStringLiteral("yes")}}}});
    EXPECT_EQ(edited.value(QStringLiteral("pin-store")).toString(), QStringLiteral("auto"));
}

TEST(Profiles, UnsupportedKnobsAreDisabledWithTheirReason)
{
    QTemporaryDir dir;
    ProfileStore store;
    ProfileDialog dialog(&store, dir.filePath(QStringLiteral("p.json")));
    int disabled = 0;
    for (const KnobDef &k : knobDefs()) {
        QWidget *ed = dialog.editor(k.key);
        ASSERT_NE(ed, nullptr) << k.key.toStdString();
        const QString why = unsupportedReason(k.key);
        EXPECT_EQ(ed->isEnabled(), why.isEmpty()) << k.key.toStdString();
        if (!why.isEmpty()) {
            ++disabled;
            EXPECT_NE(ed->toolTip().indexOf(why), -1) << k.key.toStdString();
        }
    }
#ifndef _WIN32
    EXPECT_GE(disabled, 1);  // at least ws-min (Windows only)
#endif
    EXPECT_TRUE(unsupportedReason(QStringLiteral("threads")).isEmpty());
    EXPECT_TRUE(unsupportedReason(QStringLiteral("kernel")).isEmpty());
}

TEST(Profiles, TheDialogAppliesEditsSavesAndReportsTheActiveProfile)
{
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("p.json"));
    ProfileStore store;
    store.setActive(QStringLiteral("Optimized"));
    ProfileDialog dialog(&store, path);
    auto *threads = qobject_cast<QSpinBox *>(dialog.editor(QStringLiteral("threads")));
    auto *persistent = qobject_cast<QCheckBox *>(dialog.editor(QStringLiteral("kernel-persistent")));
    ASSERT_NE(threads, nullptr);
    ASSERT_NE(persistent, nullptr);
    EXPECT_TRUE(persistent->isChecked());  // shows the Optimized values
    threads->setValue(3);
    persistent->setChecked(false);
    QSignalSpy applied(&dialog, &ProfileDialog::applied);
    QPushButton *apply = nullptr;
    for (QPushButton *b : dialog.findChildren<QPushButton *>())
        if (b->text() == QStringLiteral("Apply and reload"))
            apply = b;
    ASSERT_NE(apply, nullptr);
    apply->click();
    ASSERT_EQ(applied.count(), 1);
    const Profile p = applied.at(0).at(0).value<Profile>();
    EXPECT_EQ(p.name, QStringLiteral("Optimized"));
    EXPECT_EQ(p.value(QStringLiteral("threads")).toInt(), 3);
    EXPECT_FALSE(p.value(QStringLiteral("kernel-persistent")).toBool());
    ProfileStore reread;
    ASSERT_TRUE(reread.load(path));
    EXPECT_EQ(reread.activeName(), QStringLiteral("Optimized"));
    EXPECT_EQ(reread.active().value(QStringLiteral("threads")).toInt(), 3);
}

}  // namespace
}  // namespace neural::gui
