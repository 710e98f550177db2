// The setup wizard's checks and store jobs on the tiny fixture: a bad folder is refused with its
// reason, the fixture validates with shape and sizes, a repack writes a store that verifies, and
// a cancelled repack leaves no file behind.
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QDir>
#include <QSignalSpy>
#include <QTemporaryDir>

#include "gui_test_support.h"
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
