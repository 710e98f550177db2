// The setup wizard's checks and store jobs on the tiny fixture: a bad folder is refused with its
// reason, the fixture validates with shape and sizes, a repack writes a store that verifies, and
// a cancelled repack leaves no file behind.
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QDir>
#include <QSignalSpy>
#include <QTemporaryDir>

#include "gui_test_support.h"
#include "runtime/model.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "wizard/checkpointcheck.h"
#include "wizard/setupwizard.h"

namespace neural::gui {
namespace {

using test::spinUntil;

QString fixtureDir() { return QString::fromStdString(neural::test::tiny_model_dir().string()); }

TEST(CheckpointCheck, RefusesBadFoldersWithTheReason)
{
    QTemporaryDir empty;
    const CheckpointReport a = checkCheckpoint(empty.path());
    EXPECT_FALSE(a.ok);
    EXPECT_NE(a.error.indexOf(QStringLiteral("config.json")), -1) << a.error.toStdString();
    const CheckpointReport b = checkCheckpoint(empty.filePath(QStringLiteral("missing")));
    EXPECT_FALSE(b.ok);
    EXPECT_NE(b.error.indexOf(QStringLiteral("not a folder")), -1) << b.error.toStdString();
    EXPECT_FALSE(checkCheckpoint(QString()).ok);
}

TEST(CheckpointCheck, ReportsShapeSizesAndFit)
{
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

TEST(SetupWizard, ValidatesTheFolderItIsGiven)
{
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
TEST(SetupWizard, CreatesAStoreAndAProfileFromTheFixture)
{
    QTemporaryDir out;
    SetupWizard w;
    w.show();
    w.setCheckpointFolder(fixtureDir());
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }, 20000));
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::StorePage);
    auto *packed = [&]() -> QAbstractButton * {
        for (QAbstractButton *b : w.currentPage()->findChildren<QAbstractButton *>())
            if (b->text().startsWith(QStringLiteral("Create a packed store")))
                return b;
        return nullptr;
    }();
    ASSERT_NE(packed, nullptr);
    packed->click();
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DestinationPage);
    QLineEdit *dest = nullptr;
    for (QLineEdit *e : w.currentPage()->findChildren<QLineEdit *>())
        if (e->accessibleName() == QStringLiteral("Store file"))
            dest = e;
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
    QPushButton *verify = nullptr;
    for (QPushButton *b : w.currentPage()->findChildren<QPushButton *>())
        if (b->text() == QStringLiteral("Verify now"))
            verify = b;
    ASSERT_NE(verify, nullptr);
    verify->click();
    ASSERT_TRUE(spinUntil([&] { return w.currentPage()->isComplete(); }));
    bool verified = false;
    for (QLabel *l : w.currentPage()->findChildren<QLabel *>())
        verified = verified || l->text().startsWith(QStringLiteral("verified"));
    EXPECT_TRUE(verified);
    w.next();
    ASSERT_EQ(w.currentId(), SetupWizard::DonePage);
    ASSERT_TRUE(w.currentPage()->isComplete());
    const Profile p = w.profile();
    EXPECT_EQ(p.modelDir, fixtureDir());
    EXPECT_EQ(p.store, storeFile);
    EXPECT_EQ(p.value(QStringLiteral("kernel")).toString(), QStringLiteral("auto"));  // Optimized
    // The profile loads.
    EXPECT_NO_THROW(Model::load(p.modelDir.toStdString(), p.toLoadOptions()));
}

TEST(StoreJob, RepackWritesAStoreThatVerifies)
{
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

TEST(StoreJob, CancelledRepackLeavesNoStore)
{
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
        << QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).join(QLatin1Char(' ')).toStdString();
}

TEST(StoreJob, VerifyReportsADamagedStore)
{
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
