// The setup wizard's checks and store jobs on the tiny fixture: a bad folder is refused with its
// reason, the fixture (folder or GGUF file) validates with shape and sizes, a repack writes a
// store that verifies, and a cancelled repack leaves no file behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <QAbstractButton>
#include <QCheckBox>
#include <QFile>
#include <QFileInfo>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QDir>
#include <QSignalSpy>
#include <QTemporaryDir>

#include "common/paths.h"
#include "gui_test_support.h"
#include "runtime/model.h"
#include "runtime/options.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "wizard/checkpointcheck.h"
#include "wizard/setupwizard.h"

namespace neural::gui {
namespace {

using test::spinUntil;

QString fixtureDir() { return QString::fromStdString(neural::test::tiny_model_dir().string()); }

TEST(CheckpointCheck, RefusesBadFoldersWithTheReason) {
    QTemporaryDir empty;
    const CheckpointReport a = checkCheckpoint(empty.path());
    EXPECT_FALSE(a.ok);
    EXPECT_NE(a.error.indexOf(QStringLiteral("config.json")), -1) << a.error.toStdString();
    const CheckpointReport b = checkCheckpoint(empty.filePath(QStringLiteral("missing")));
    EXPECT_FALSE(b.ok);
    EXPECT_NE(b.error.indexOf(QStringLiteral("not a folder")), -1) << b.error.toStdString();
    EXPECT_FALSE(checkCheckpoint(QString()).ok);
}

TEST(CheckpointCheck, ReportsShapeSizesAndFit) {
    const CheckpointReport r = checkCheckpoint(fixtureDir());
    ASSERT_TRUE(r.ok) << r.error.toStdString();
    EXPECT_NE(r.shape.indexOf(QStringLiteral("layers")), -1);
    EXPECT_GT(r.checkpointBytes, 0u);
    EXPECT_GT(r.rawStoreBytes, 0u);
    EXPECT_GT(r.packedStoreBytes, 0u);
    EXPECT_LE(r.packedStoreBytes, r.rawStoreBytes);
    EXPECT_GT(r.ramBytes, 0u);
    EXPECT_TRUE(r.fitsRam);  // a few MB
    EXPECT_NE(r.fitText.indexOf(QStringLiteral("RAM")), -1);
}

QString ggufFile() {
    return QString::fromStdString(
        (neural::test::shared_dir() / "fixtures" / "tiny-gptoss-a-gguf" / "model.gguf").string());
}

TEST(CheckpointCheck, AcceptsAGgufFileAndRefusesADamagedOneWithTheReason) {
    const CheckpointReport r = checkCheckpoint(ggufFile());
    ASSERT_TRUE(r.ok) << r.error.toStdString();
    EXPECT_NE(r.shape.indexOf(QStringLiteral("4 layers, 8 experts (top-4)")), -1)
        << r.shape.toStdString();
    EXPECT_EQ(r.checkpointBytes, QFileInfo(ggufFile()).size());
    EXPECT_EQ(r.rawStoreBytes, checkCheckpoint(fixtureDir()).rawStoreBytes);

    QTemporaryDir tmp;
    const QString cut = tmp.filePath(QStringLiteral("cut.gguf"));
    QFile in(ggufFile());
    ASSERT_TRUE(in.open(QIODevice::ReadOnly));
    QFile out(cut);
    ASSERT_TRUE(out.open(QIODevice::WriteOnly));
    out.write(in.read(1000000));  // inside the token list
    out.close();
    const CheckpointReport bad = checkCheckpoint(cut);
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.error.indexOf(QStringLiteral("truncated")), -1) << bad.error.toStdString();
    EXPECT_NE(bad.error.indexOf(cut), -1) << bad.error.toStdString();
    const CheckpointReport missing = checkCheckpoint(tmp.filePath(QStringLiteral("absent.gguf")));
    EXPECT_FALSE(missing.ok);
    EXPECT_NE(missing.error.indexOf(QStringLiteral("does not exist")), -1)
        << missing.error.toStdString();
}

// A user who has the model as a GGUF (LM Studio, Ollama, llama.cpp) goes through the wizard with
// the file: it validates, the store is repacked from it (records equal to the safetensors
// checkpoint's) and verified against it, and the profile loads.
TEST(SetupWizard, AcceptsAGgufFileAndRepacksIt) {
    QTemporaryDir out;
    SetupWizard w;
    w.show();
    w.setCheckpointFolder(ggufFile());
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000))
        << w.report().error.toStdString();
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::FitPage);
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::StorePage);
    for (QAbstractButton* b : w.currentPage()->findChildren<QAbstractButton*>())
        if (b->text().startsWith(QStringLiteral("Create a raw store"))) b->click();
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DestinationPage);
    QLineEdit* dest = nullptr;
    for (QLineEdit* e : w.currentPage()->findChildren<QLineEdit*>())
        if (e->accessibleName() == QStringLiteral("Store file")) dest = e;
    ASSERT_NE(dest, nullptr);
    // Proposed in the app's models folder, named after the model (not into the folder the GGUF
    // was downloaded to, which belongs to another app, nor "model").
    EXPECT_EQ(QFileInfo(dest->text()).absolutePath(),
              QDir(modelsDir()).filePath(QStringLiteral("tiny-gptoss-a-gguf")))
        << dest->text().toStdString();
    const QString storeFile = out.filePath(QStringLiteral("gguf.nstore"));
    dest->setText(storeFile);
    ASSERT_TRUE(w.currentPage()->isComplete());
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::RepackPage);
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }));
    ASSERT_TRUE(QFileInfo(storeFile).isFile());
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::VerifyPage);
    for (QCheckBox* c : w.currentPage()->findChildren<QCheckBox*>())
        c->setChecked(true);  // compare every expert with the GGUF too
    for (QPushButton* b : w.currentPage()->findChildren<QPushButton*>())
        if (b->text() == QStringLiteral("Verify now")) b->click();
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }));
    bool verified = false;
    for (QLabel* l : w.currentPage()->findChildren<QLabel*>())
        verified = verified || l->text().contains(QStringLiteral("match the checkpoint"));
    EXPECT_TRUE(verified);
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DonePage);
    const Profile p = w.profile();
    EXPECT_EQ(p.modelDir, ggufFile());
    EXPECT_EQ(p.store, storeFile);
    EXPECT_NO_THROW(Model::load(p.modelDir.toStdString(), p.toLoadOptions()));

    // The records are those a repack of the safetensors checkpoint writes.
    const QString hfStore = out.filePath(QStringLiteral("hf.nstore"));
    StoreJob job;
    QSignalSpy done(&job, &StoreJob::finished);
    job.startRepack(fixtureDir(), hfStore, QStringLiteral("raw"));
    ASSERT_TRUE(spinUntil([&] { return done.count() == 1; }));
    ASSERT_TRUE(done.at(0).at(0).toBool()) << done.at(0).at(2).toString().toStdString();
    const auto a = store::ExpertStore::open(storeFile.toStdString());
    const auto b = store::ExpertStore::open(hfStore.toStdString());
    for (int l = 0; l < a.num_layers(); ++l)
        for (int e = 0; e < a.num_experts(); ++e) {
            const auto ra = a.record(l, e), rb = b.record(l, e);
            ASSERT_EQ(ra.size(), rb.size());
            EXPECT_EQ(std::memcmp(ra.data(), rb.data(), ra.size()), 0) << l << " " << e;
        }
}

TEST(SetupWizard, ValidatesTheFolderItIsGiven) {
    QTemporaryDir empty;
    SetupWizard w;
    w.show();  // the wizard picks its first page when shown
    QSignalSpy validated(&w, &SetupWizard::validated);
    w.setCheckpointFolder(empty.path());
    ASSERT_TRUE(spinUntil([&] { return validated.count() >= 1; }, 10000));
    EXPECT_FALSE(w.report().ok);
    EXPECT_FALSE(w.currentPage()->isComplete());  // Next stays disabled

    w.setCheckpointFolder(fixtureDir());
    ASSERT_TRUE(spinUntil([&] { return w.report().ok; }, 20000));
    EXPECT_TRUE(w.currentPage()->isComplete());
}

// The whole wizard, page by page, as a user would: fixture -> packed store in a temporary
// folder -> verify -> a profile that points at both.
TEST(SetupWizard, CreatesAStoreAndAProfileFromTheFixture) {
    QTemporaryDir out;
    SetupWizard w;
    w.show();
    w.setCheckpointFolder(fixtureDir());
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::FitPage);
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));  // planned
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::StorePage);
    auto* packed = [&]() -> QAbstractButton* {
        for (QAbstractButton* b : w.currentPage()->findChildren<QAbstractButton*>())
            if (b->text().startsWith(QStringLiteral("Create a packed store"))) return b;
        return nullptr;
    }();
    ASSERT_NE(packed, nullptr);
    packed->click();
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DestinationPage);
    QLineEdit* dest = nullptr;
    for (QLineEdit* e : w.currentPage()->findChildren<QLineEdit*>())
        if (e->accessibleName() == QStringLiteral("Store file")) dest = e;
    ASSERT_NE(dest, nullptr);
    const QString storeFile = out.filePath(QStringLiteral("tiny.nstore"));
    dest->setText(storeFile);
    ASSERT_TRUE(w.currentPage()->isComplete());  // the temp folder has room for a few MB
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::RepackPage);
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }));
    EXPECT_TRUE(QFileInfo(storeFile).isFile());
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::VerifyPage);
    QPushButton* verify = nullptr;
    for (QPushButton* b : w.currentPage()->findChildren<QPushButton*>())
        if (b->text() == QStringLiteral("Verify now")) verify = b;
    ASSERT_NE(verify, nullptr);
    verify->click();
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }));
    bool verified = false;
    for (QLabel* l : w.currentPage()->findChildren<QLabel*>())
        verified = verified || l->text().startsWith(QStringLiteral("verified"));
    EXPECT_TRUE(verified);
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DonePage);
    ASSERT_TRUE(w.currentPage()->isComplete());
    const Profile p = w.profile();
    EXPECT_EQ(p.modelDir, fixtureDir());
    EXPECT_EQ(p.store, storeFile);
    // Optimized knobs with the fit plan's kernel (the widest SIMD of this CPU).
    EXPECT_EQ(p.value(QStringLiteral("kernel")).toString(),
              QString::fromStdString(w.plan().kernel));
    EXPECT_TRUE(p.value(QStringLiteral("grouped-gemm")).toBool());
    // The profile loads.
    EXPECT_NO_THROW(Model::load(p.modelDir.toStdString(), p.toLoadOptions()));
}

// On a fresh Debian 12 (a chroot) the destination page stayed incomplete because the free space
// could not be read: unknown free space is a warning, not a block. The store defaults into the
// app's models folder (not the model's download folder), a missing folder is created, and the
// profile is named after the model.
TEST(SetupWizard, DestinationDefaultsToTheModelsFolderAndUnknownFreeSpaceOnlyWarns) {
    QTemporaryDir out;
    SetupWizard::setDiskSpaceForTesting([](const QString&) { return DiskSpace{}; });
    SetupWizard w;
    w.show();
    w.setCheckpointFolder(fixtureDir());
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    w.next();
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::StorePage);
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DestinationPage);
    QLineEdit* dest = nullptr;
    QLabel* space = nullptr;
    for (QLineEdit* e : w.currentPage()->findChildren<QLineEdit*>())
        if (e->accessibleName() == QStringLiteral("Store file")) dest = e;
    for (QLabel* l : w.currentPage()->findChildren<QLabel*>())
        if (l->accessibleName() == QStringLiteral("Free space")) space = l;
    ASSERT_NE(dest, nullptr);
    ASSERT_NE(space, nullptr);
    const QString model = QFileInfo(fixtureDir()).fileName();
    EXPECT_TRUE(dest->text().startsWith(QDir(modelsDir()).filePath(model) + QLatin1Char('/')))
        << dest->text().toStdString();
    EXPECT_TRUE(w.currentPage()->isComplete());  // unknown free space: a warning only
    EXPECT_NE(space->text().indexOf(QStringLiteral("could not be read")), -1)
        << space->text().toStdString();
    const QString storeFile = out.filePath(QStringLiteral("new/folder/tiny.nstore"));
    dest->setText(storeFile);
    EXPECT_TRUE(w.currentPage()->isComplete());
    EXPECT_NE(space->text().indexOf(QStringLiteral("created")), -1) << space->text().toStdString();
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::RepackPage);
    EXPECT_TRUE(QFileInfo(out.filePath(QStringLiteral("new/folder"))).isDir());
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }));
    SetupWizard::setDiskSpaceForTesting(nullptr);
    w.next();
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DonePage);
    EXPECT_EQ(w.profile().name, model);

    // Known free space that is too small blocks, and says so.
    SetupWizard::setDiskSpaceForTesting([](const QString&) {
        DiskSpace d;
        d.known = true;
        d.available = 1024;
        d.root = QStringLiteral("/small");
        return d;
    });
    w.back();
    w.back();
    w.back();
    ASSERT_EQ(w.currentId(), SetupWizard::DestinationPage);
    dest->setText(out.filePath(QStringLiteral("again.nstore")));
    EXPECT_FALSE(w.currentPage()->isComplete());
    EXPECT_NE(space->text().indexOf(QStringLiteral("Not enough space")), -1);
    SetupWizard::setDiskSpaceForTesting(nullptr);
}

TEST(ModelName, FromAFolderAGgufAndAHuggingFaceSnapshot) {
    EXPECT_EQ(modelName(QStringLiteral("/m/gpt-oss-20b")), QStringLiteral("gpt-oss-20b"));
    QTemporaryDir dir;
    QDir(dir.path())
        .mkpath(QStringLiteral(
            "hub/models--openai--gpt-oss-20b/snapshots/0123456789abcdef0123456789abcdef01234567"));
    EXPECT_EQ(modelName(dir.filePath(QStringLiteral("hub/models--openai--gpt-oss-20b/snapshots/"
                                                    "0123456789abcdef0123456789abcdef01234567"))),
              QStringLiteral("gpt-oss-20b"));
    QFile f(dir.filePath(QStringLiteral("gpt-oss-120b-MXFP4-00001-of-00002.gguf")));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.close();
    EXPECT_EQ(modelName(f.fileName()), QStringLiteral("gpt-oss-120b-MXFP4"));
    EXPECT_EQ(modelName(ggufFile()), QStringLiteral("tiny-gptoss-a-gguf"));
}

template <typename W>
W* named(QWidget* page, const QString& name) {
    for (W* w : page->findChildren<W*>())
        if (w->accessibleName() == name) return w;
    return nullptr;
}

bool kernelVisible(QWidget* page) {
    for (QComboBox* c : page->findChildren<QComboBox*>())
        if (c->accessibleName() == QStringLiteral("Expert kernel")) return c->isVisibleTo(page);
    return false;
}

// A made-up gaming PC: 8 cores with AVX2, 32 GiB RAM, a 12 GiB GPU with 11 GiB free.
MachineInfo gamingPc() {
    MachineInfo m;
    m.cpus = 16;
    m.avx2 = true;
    m.ram_total = std::uint64_t{32} << 30;
    m.ram_available = std::uint64_t{28} << 30;
    m.gpu = MachineInfo::Gpu{"Test GPU 12GB", std::uint64_t{12} << 30, std::uint64_t{11} << 30};
    return m;
}

// The fit step: the plan's values with their reasons, editable; what the user leaves there
// becomes the profile (and stays editable: it is saved like any profile).
TEST(SetupWizard, FitPageTurnsThePlanIntoTheProfile) {
    SetupWizard w;
    w.setMachineForTesting(gamingPc());
    w.show();
    w.setCheckpointFolder(fixtureDir());
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::FitPage);
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    const FitPlan plan = w.plan();
    ASSERT_EQ(plan.backend, "cuda");  // the tiny model fits an 11 GiB GPU many times over
    EXPECT_TRUE(plan.fits);
    EXPECT_EQ(plan.threads, 8);
    EXPECT_EQ(plan.kernel, "avx2");
    QWidget* page = w.currentPage();
    auto* backend = named<QComboBox>(page, QStringLiteral("Backend"));
    auto* vram = named<QDoubleSpinBox>(page, QStringLiteral("VRAM budget"));
    auto* slotsBox = named<QSpinBox>(page, QStringLiteral("Expert slots"));
    auto* context = named<QSpinBox>(page, QStringLiteral("GPU context"));
    auto* threads = named<QSpinBox>(page, QStringLiteral("CPU threads"));
    ASSERT_TRUE(backend && vram && slotsBox && context && threads);
    EXPECT_EQ(backend->currentText(), QStringLiteral("cuda"));
    EXPECT_NEAR(vram->value(), plan.vram_budget_gib, 0.005);
    EXPECT_EQ(slotsBox->value(), plan.pool_slots);
    EXPECT_EQ(context->value(), plan.context);
    EXPECT_EQ(threads->value(), 8);
    // Every value shows its reason; the machine is described.
    auto* slotsWhy = named<QLabel>(page, QStringLiteral("Reason: Expert slots"));
    ASSERT_NE(slotsWhy, nullptr);
    EXPECT_NE(slotsWhy->text().indexOf(QStringLiteral("expert slots")), -1)
        << slotsWhy->text().toStdString();
    EXPECT_NE(named<QLabel>(page, QStringLiteral("Reason: CPU threads"))
                  ->text()
                  .indexOf(QStringLiteral("16 logical CPUs")),
              -1);
    EXPECT_NE(named<QLabel>(page, QStringLiteral("This PC"))
                  ->text()
                  .indexOf(QStringLiteral("Test GPU 12GB")),
              -1);
    EXPECT_NE(
        named<QLabel>(page, QStringLiteral("Fit warnings"))->text().indexOf(QStringLiteral("fits")),
        -1);

    // The user edits one value; the rest stay the plan's.
    threads->setValue(6);
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::StorePage);
    for (QAbstractButton* b : w.currentPage()->findChildren<QAbstractButton*>())
        if (b->text().startsWith(QStringLiteral("No store"))) b->click();
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DonePage);
    const Profile p = w.profile();
    EXPECT_EQ(p.value(QStringLiteral("backend")).toString(), QStringLiteral("cuda"));
    EXPECT_NEAR(p.value(QStringLiteral("vram-budget")).toDouble(), plan.vram_budget_gib, 0.005);
    EXPECT_EQ(p.value(QStringLiteral("pool-slots")).toInt(), plan.pool_slots);
    EXPECT_NEAR(p.value(QStringLiteral("pool")).toDouble(), plan.pool_gib, 0.01);
    EXPECT_EQ(p.value(QStringLiteral("context")).toInt(), plan.context);
    EXPECT_EQ(p.value(QStringLiteral("threads")).toInt(), 6);
    EXPECT_TRUE(p.value(QStringLiteral("kernel-persistent")).toBool());
    // The wizard never turns a lossy setting on (options::Arithmetic).
    EXPECT_TRUE(options::lossy_settings(p.settings()).empty());
    // No store: the planned kernel all the same (the fast kernels read the checkpoint).
    EXPECT_EQ(p.value(QStringLiteral("kernel")).toString(), QString::fromStdString(plan.kernel));
    // K/V checkpoints as the plan sized them (the tiny model leaves a 32 GiB PC room for 1 GiB).
    EXPECT_EQ(plan.kv_checkpoints_gib, 1.0);
    EXPECT_DOUBLE_EQ(p.value(QStringLiteral("kv-checkpoints")).toDouble(), plan.kv_checkpoints_gib);

    // Saved and read back like any profile: every value still there to edit.
    QTemporaryDir dir;
    ProfileStore store;
    store.upsert(p);
    store.setActive(p.name);
    ASSERT_TRUE(store.save(dir.filePath(QStringLiteral("profiles.json"))));
    ProfileStore back;
    ASSERT_TRUE(back.load(dir.filePath(QStringLiteral("profiles.json"))));
    ASSERT_NE(back.find(p.name), nullptr);
    EXPECT_EQ(back.activeName(), p.name);
    EXPECT_EQ(back.find(p.name)->value(QStringLiteral("pool-slots")).toInt(), plan.pool_slots);
    EXPECT_EQ(back.find(p.name)->value(QStringLiteral("context")).toInt(), plan.context);
#ifdef NEURAL_HAVE_CUDA
    const LoadOptions lo = back.find(p.name)->toLoadOptions();
    EXPECT_EQ(lo.backend, "cuda");
    EXPECT_EQ(lo.gpu.pool_slots, plan.pool_slots);
    EXPECT_EQ(lo.gpu.context, plan.context);
#endif
}

// Emulating a smaller PC: a RAM cap the model does not fit in is a clear warning; a VRAM cap
// below the dense core moves the plan to the CPU backend.
TEST(SetupWizard, FitPageWarnsWhenTheModelDoesNotFit) {
    SetupWizard w;
    w.setMachineForTesting(gamingPc());
    w.show();
    w.setCheckpointFolder(fixtureDir());
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    w.next();
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    QWidget* page = w.currentPage();
    auto* ramCap = named<QDoubleSpinBox>(page, QStringLiteral("Plan for at most this RAM"));
    auto* vramCap = named<QDoubleSpinBox>(page, QStringLiteral("Plan for at most this VRAM"));
    auto* warnings = named<QLabel>(page, QStringLiteral("Fit warnings"));
    ASSERT_TRUE(ramCap && vramCap && warnings);
    ramCap->setValue(1.0);  // below the planner's 4 GB for the system alone
    EXPECT_FALSE(w.plan().fits);
    EXPECT_NE(warnings->text().indexOf(QStringLiteral("does not fit")), -1)
        << warnings->text().toStdString();
    EXPECT_NE(warnings->text().indexOf(QStringLiteral("more RAM")), -1);
    EXPECT_TRUE(
        w.currentPage()->isComplete());  // a warning, not a dead end: the values stay editable

    ramCap->setValue(0);  // detected again
    EXPECT_TRUE(w.plan().fits);
    vramCap->setValue(0.05);  // 51 MiB: less than the backend's 64 MiB reserve alone
    EXPECT_EQ(w.plan().backend, "cpu");
    EXPECT_EQ(named<QComboBox>(page, QStringLiteral("Backend"))->currentText(),
              QStringLiteral("cpu"));
    EXPECT_NE(named<QLabel>(page, QStringLiteral("Reason: Backend"))
                  ->text()
                  .indexOf(QStringLiteral("CPU backend")),
              -1);
}

// The fit and store pages in one unit family: the RAM the model needs comes from the model's
// size (a 25 MiB model read "needs about 4.0 GB of RAM": the planner's headroom for the system),
// every size in GiB / MiB, the kernels only those this CPU runs, and the packed/raw comparison
// only where the sizes differ.
TEST(SetupWizard, FitAndStorePagesSpeakOfThisModelInBinaryUnits) {
    SetupWizard w;
    MachineInfo pc = gamingPc();  // AVX2, no AVX-512
    pc.gpu.reset();
    pc.gpu_why = "no GPU in this test";
    w.setMachineForTesting(pc);
    w.show();
    w.setCheckpointFolder(fixtureDir());
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::FitPage);
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    QWidget* page = w.currentPage();
    const QString fits = named<QLabel>(page, QStringLiteral("Fit warnings"))->text();
    EXPECT_NE(fits.indexOf(QStringLiteral("fits")), -1) << fits.toStdString();
    EXPECT_EQ(fits.indexOf(QStringLiteral(" GB")), -1) << fits.toStdString();
    EXPECT_EQ(fits.indexOf(QStringLiteral("4.0")), -1) << fits.toStdString();  // not the headroom
    // The tiny model's own need is MiB (or KiB), not GiB.
    EXPECT_TRUE(fits.indexOf(QStringLiteral("MiB of RAM")) != -1 ||
                fits.indexOf(QStringLiteral("KiB of RAM")) != -1)
        << fits.toStdString();
    // One plain sentence leads, with the same RAM figure as the details, which stay folded
    // until asked for.
    const QString headline = named<QLabel>(page, QStringLiteral("Fit summary"))->text();
    EXPECT_NE(headline.indexOf(QStringLiteral("fits this PC")), -1) << headline.toStdString();
    const QRegularExpression ram(QStringLiteral(R"(about ([\d.]+ [KMG]iB) of RAM)"));
    ASSERT_TRUE(ram.match(headline).hasMatch()) << headline.toStdString();
    EXPECT_EQ(ram.match(headline).captured(1), ram.match(fits).captured(1));
    EXPECT_EQ(headline.indexOf(QStringLiteral("kernel")), -1);  // no engine jargon up front
    auto* details = named<QPushButton>(page, QStringLiteral("Show the plan's details"));
    ASSERT_NE(details, nullptr);
    EXPECT_FALSE(kernelVisible(page));
    details->click();
    EXPECT_TRUE(kernelVisible(page));
    const QString other = named<QLabel>(page, QStringLiteral("Other plan notes"))->text();
    EXPECT_FALSE(other.isEmpty());
    EXPECT_EQ(other.indexOf(QStringLiteral(" GB")), -1) << other.toStdString();
    auto* kernel = named<QComboBox>(page, QStringLiteral("Expert kernel"));
    ASSERT_NE(kernel, nullptr);
    EXPECT_EQ(kernel->findText(QStringLiteral("avx512")), -1);
    EXPECT_NE(kernel->findText(QStringLiteral("avx2")), -1);
    EXPECT_EQ(kernel->currentText(), QStringLiteral("avx2"));

    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::StorePage);
    // The comparison sits in the page (a long subtitle was cut off by the wizard's header).
    const QString sub = named<QLabel>(w.currentPage(), QStringLiteral("Raw or packed"))->text();
    EXPECT_EQ(sub.indexOf(QStringLiteral("half the space")), -1) << sub.toStdString();
    const std::uint64_t raw = w.report().rawStoreBytes, packed = w.report().packedStoreBytes;
    const bool differ = std::abs(static_cast<double>(raw) - static_cast<double>(packed)) >=
                        0.01 * static_cast<double>(std::max(raw, packed));
    EXPECT_EQ(sub.indexOf(QStringLiteral("instead of")) != -1, differ) << sub.toStdString();
}

TEST(StoreJob, RepackWritesAStoreThatVerifies) {
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("experts.nstore"));
    StoreJob job;
    QSignalSpy finished(&job, &StoreJob::finished);
    QSignalSpy progress(&job, &StoreJob::progress);
    job.startRepack(fixtureDir(), out, QStringLiteral("packed"));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }));
    ASSERT_TRUE(finished.at(0).at(0).toBool()) << finished.at(0).at(2).toString().toStdString();
    EXPECT_GE(progress.count(), 1);
    EXPECT_TRUE(QFileInfo(out).isFile());
    EXPECT_NO_THROW(store::ExpertStore::open(out.toStdString()));

    job.startVerify(out, fixtureDir());
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 2; }));
    EXPECT_TRUE(finished.at(1).at(0).toBool()) << finished.at(1).at(2).toString().toStdString();
    EXPECT_NE(finished.at(1).at(2).toString().indexOf(QStringLiteral("match the checkpoint")), -1);
}

TEST(StoreJob, CancelledRepackLeavesNoStore) {
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("experts.nstore"));
    StoreJob job;
    QSignalSpy finished(&job, &StoreJob::finished);
    job.setCancelAfterRecords(1);
    job.startRepack(fixtureDir(), out, QStringLiteral("raw"));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }));
    EXPECT_FALSE(finished.at(0).at(0).toBool());
    EXPECT_TRUE(finished.at(0).at(1).toBool());  // cancelled, not failed
    EXPECT_FALSE(QFileInfo::exists(out));
    EXPECT_TRUE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).isEmpty())
        << QDir(dir.path())
               .entryList(QDir::Files | QDir::Hidden)
               .join(QLatin1Char(' '))
               .toStdString();
}

TEST(StoreJob, VerifyReportsADamagedStore) {
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("experts.nstore"));
    StoreJob job;
    QSignalSpy finished(&job, &StoreJob::finished);
    job.startRepack(fixtureDir(), out, QStringLiteral("raw"));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }));
    ASSERT_TRUE(finished.at(0).at(0).toBool());
    qint64 at = 0;
    {
        const auto s = store::ExpertStore::open(out.toStdString());
        at = static_cast<qint64>(s.entry(0, 0).offset) + 10;  // inside the first record
    }
    {
        QFile f(out);
        ASSERT_TRUE(f.open(QIODevice::ReadWrite));
        f.seek(at);
        char c = 0;
        f.getChar(&c);
        f.seek(at);
        f.putChar(static_cast<char>(c ^ 0x5a));
    }
    job.startVerify(out, QString());
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 2; }));
    EXPECT_FALSE(finished.at(1).at(0).toBool());
    EXPECT_FALSE(finished.at(1).at(2).toString().isEmpty());
}

}  // namespace
}  // namespace neural::gui
