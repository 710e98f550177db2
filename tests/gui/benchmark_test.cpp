// The Benchmark panel on the tiny fixture (CPU backend): an A/B of two profiles runs on a worker
// thread with the chat engine paused and brings it back, shows per-pair ratios, their median
// and spread as a box plot, exports the report as valid JSON; Cancel mid-run leaves the app
// usable; it refuses to start while a reply is generated or when the profiles use different
// models. Also through the main window's Tools menu.
#include <gtest/gtest.h>

#include <QAction>
#include <QBoxPlotSeries>
#include <QBoxSet>
#include <QChart>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QValueAxis>

#include "app/mainwindow.h"
#include "benchmark/benchmarkdialog.h"
#include "conversation/enginehost.h"
#include "fixture_window.h"
#include "gui_test_support.h"
#include "settings/profile.h"
#include "support/fixtures.h"

namespace neural::gui {
namespace {

using test::fixtureDir;
using test::showUntilReady;
using test::spinUntil;
using test::windowOptions;

// Two CPU profiles on the fixture: A (1 thread) and B (2 threads).
ProfileStore twoProfiles() {
    ProfileStore store;
    Profile a = Profile::stock();
    a.name = QStringLiteral("A");
    a.modelDir = fixtureDir();
    a.values.insert(QStringLiteral("threads"), 1);
    Profile b = a;
    b.name = QStringLiteral("B");
    b.values.insert(QStringLiteral("threads"), 2);
    store.upsert(a);
    store.upsert(b);
    store.setActive(QStringLiteral("A"));
    return store;
}

BenchmarkRequest smallRequest(int pairs = 2) {
    BenchmarkRequest r;
    r.profileA = QStringLiteral("A");
    r.profileB = QStringLiteral("B");
    r.workloads = {QStringLiteral("decode"), QStringLiteral("prompt")};
    r.decodeTokens = 6;
    r.promptSizes = {40};
    r.pairs = pairs;
    return r;
}

class BenchmarkPanel : public ::testing::Test {
protected:
    static LoadOptions oneThread() {
        LoadOptions o;
        o.threads = 1;
        return o;
    }
    void SetUp() override {
        m_profiles = twoProfiles();
        loadEngine();
    }
    void loadEngine() {
        ++m_loads;
        m_engine.load(fixtureDir(), oneThread());
        ASSERT_TRUE(spinUntil([&] { return m_engine.state() == EngineHost::State::ready; }));
    }
    std::unique_ptr<BenchmarkDialog> dialog() {
        auto d = std::make_unique<BenchmarkDialog>(&m_profiles, &m_engine);
        d->setReloadEngine([this] {
            ++m_reloads;
            m_engine.load(fixtureDir(), oneThread());
        });
        return d;
    }

    ProfileStore m_profiles;
    EngineHost m_engine;
    int m_loads = 0;
    int m_reloads = 0;
};

TEST_F(BenchmarkPanel, RunsTwoProfilesMirroredAndShowsRatios) {
    auto d = dialog();
    d->show();
    QSignalSpy finished(d.get(), &BenchmarkDialog::finished);
    QSignalSpy progressed(d.get(), &BenchmarkDialog::progressed);
    d->setRequest(smallRequest(2));
    EXPECT_FALSE(d->exportButton()->isEnabled());  // nothing to export yet
    ASSERT_TRUE(d->start()) << d->lastError().toStdString();
    // The chat engine let go of its model while the benchmark runs.
    EXPECT_EQ(m_engine.state(), EngineHost::State::empty);
    EXPECT_TRUE(d->running());
    EXPECT_FALSE(d->startButton()->isEnabled());
    EXPECT_TRUE(d->cancelButton()->isEnabled());
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }, 120000));
    ASSERT_TRUE(finished.at(0).at(0).toBool()) << finished.at(0).at(2).toString().toStdString();
    EXPECT_FALSE(finished.at(0).at(1).toBool());
    EXPECT_EQ(d->progressBar()->value(), d->progressBar()->maximum());
    EXPECT_GE(progressed.count(), 4);  // 2 loads + 4 answers at least (one model at a time)

    // The harness's report: mirrored order A B B A, ratios per pair, a summary.
    const bench::Json& r = d->report();
    std::vector<std::string> order;
    for (const auto& run : r["runs"]) order.push_back(run["profile"]);
    EXPECT_EQ(order, (std::vector<std::string>{"A", "B", "B", "A"}));
    EXPECT_TRUE(r["options"]["one_model_at_a_time"].get<bool>());
    ASSERT_EQ(r["pairs"].size(), 2u);
    EXPECT_EQ(r["ratio_summary"]["prompt_40"]["prompt_seconds_b_over_a"]["n"], 2);

    // Table: pair x workload rows, ratios as numbers.
    ASSERT_EQ(d->pairTable()->rowCount(), 4);
    bool ok = false;
    const double first = d->pairTable()->item(0, 4)->text().toDouble(&ok);
    EXPECT_TRUE(ok) << d->pairTable()->item(0, 4)->text().toStdString();
    EXPECT_NEAR(first, r["pairs"][0]["ratios"]["decode"]["prompt_seconds_b_over_a"].get<double>(),
                1e-4);
    EXPECT_EQ(d->pairTable()->item(2, 1)->text(), QStringLiteral("BA"));
    // Beside the ratios, both profiles' own figures: A and B tok/s, A and B prompt seconds.
    for (int row = 0; row < d->pairTable()->rowCount(); ++row) {
        if (d->pairTable()->item(row, 2)->text() != QStringLiteral("decode")) continue;
        const double aTps = d->pairTable()->item(row, 5)->text().toDouble(&ok);
        EXPECT_TRUE(ok && aTps > 0) << d->pairTable()->item(row, 5)->text().toStdString();
        const double bTps = d->pairTable()->item(row, 6)->text().toDouble(&ok);
        EXPECT_TRUE(ok && bTps > 0);
        EXPECT_NEAR(d->pairTable()->item(row, 3)->text().toDouble(), bTps / aTps,
                    0.02 * bTps / aTps);
    }
    EXPECT_EQ(d->pairTable()->item(2, 2)->text().indexOf(QStringLiteral("_")), -1);  // "prompt 40"
    // Labels name the workload once: "decode, tok/s", never "decode decode tok/s".
    EXPECT_EQ(d->summaryLabel()->text().indexOf(QStringLiteral("decode decode")), -1);
    EXPECT_EQ(d->summaryLabel()->text().indexOf(QStringLiteral("prompt 40 prompt")), -1);
    EXPECT_NE(d->summaryLabel()->text().indexOf(QStringLiteral("tok/s, B")), -1)
        << d->summaryLabel()->text().toStdString();
    // Chart: one box per workload and ratio with numbers, median inside the range; the decode
    // rates and the prompt times each on an axis of their own (on one axis a ratio of 96 made
    // one of 0.044 invisible), each axis spanning its boxes.
    ASSERT_EQ(d->chart()->series().size(), 2);
    QList<QAbstractAxis*> valueAxes;
    for (QAbstractSeries* s : d->chart()->series()) {
        auto* box = qobject_cast<QBoxPlotSeries*>(s);
        ASSERT_NE(box, nullptr);
        EXPECT_GE(box->count(), 1);
        QValueAxis* y = nullptr;
        for (QAbstractAxis* a : box->attachedAxes())
            if (auto* v = qobject_cast<QValueAxis*>(a)) y = v;
        ASSERT_NE(y, nullptr);
        EXPECT_FALSE(valueAxes.contains(y));
        valueAxes << y;
        double hi = 0;
        for (QBoxSet* set : box->boxSets()) {
            EXPECT_LE(set->at(QBoxSet::LowerExtreme), set->at(QBoxSet::Median));
            EXPECT_LE(set->at(QBoxSet::Median), set->at(QBoxSet::UpperExtreme));
            EXPECT_GE(set->at(QBoxSet::LowerExtreme), y->min());
            EXPECT_LE(set->at(QBoxSet::UpperExtreme), y->max());
            hi = std::max(hi, set->at(QBoxSet::UpperExtreme));
        }
        EXPECT_LE(y->max(), std::max(hi, 1.0) * 1.5 + 0.05) << box->name().toStdString();
    }
    EXPECT_NE(d->summaryLabel()->text().indexOf(QStringLiteral("median")), -1);

    // The chat engine is back.
    EXPECT_EQ(m_reloads, 1);
    ASSERT_TRUE(spinUntil([&] { return m_engine.state() == EngineHost::State::ready; }));

    // Export: valid JSON, the same report.
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("ab.json"));
    EXPECT_TRUE(d->exportButton()->isEnabled());
    QString error;
    ASSERT_TRUE(d->exportReport(path, &error)) << error.toStdString();
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &pe);
    ASSERT_EQ(pe.error, QJsonParseError::NoError) << pe.errorString().toStdString();
    EXPECT_EQ(doc.object().value(QStringLiteral("schema")).toString(),
              QStringLiteral("neural-bench"));
    EXPECT_EQ(doc.object().value(QStringLiteral("pairs")).toArray().size(), 2);
    EXPECT_EQ(QDir(dir.path()).entryList(QDir::Files).size(), 1);  // no temporary left behind
    // An unwritable path is an error, not a crash.
    EXPECT_FALSE(d->exportReport(dir.filePath(QStringLiteral("missing/dir/ab.json")), &error));
    EXPECT_FALSE(error.isEmpty());
}

TEST_F(BenchmarkPanel, CancelMidRunLeavesTheAppUsable) {
    auto d = dialog();
    d->show();
    QSignalSpy finished(d.get(), &BenchmarkDialog::finished);
    BenchmarkRequest big = smallRequest(200);  // minutes of work: Cancel is pressed long before
    big.decodeTokens = 64;
    d->setRequest(big);
    ASSERT_TRUE(d->start()) << d->lastError().toStdString();
    // Cancel once the first answer is done (mid-run, between runs or inside an answer).
    ASSERT_TRUE(spinUntil([&] { return d->progressBar()->value() > 0; }, 60000));
    d->cancelButton()->click();
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }, 60000));
    EXPECT_FALSE(finished.at(0).at(0).toBool());
    EXPECT_TRUE(finished.at(0).at(1).toBool());  // cancelled, not failed
    EXPECT_LT(d->progressBar()->value(), d->progressBar()->maximum());
    EXPECT_FALSE(d->running());
    EXPECT_TRUE(d->report().is_null());
    EXPECT_FALSE(d->exportReport(QDir::temp().filePath(QStringLiteral("never.json"))));
    EXPECT_TRUE(d->startButton()->isEnabled());
    EXPECT_FALSE(d->cancelButton()->isEnabled());

    // The chat engine is back and answers.
    EXPECT_EQ(m_reloads, 1);
    ASSERT_TRUE(spinUntil([&] { return m_engine.state() == EngineHost::State::ready; }));
    QSignalSpy turn(&m_engine, &EngineHost::turnFinished);
    TurnRequest t;
    t.history = {{QStringLiteral("user"), QStringLiteral("Hello")}};
    t.maxTokens = 4;
    ASSERT_TRUE(m_engine.send(t));
    ASSERT_TRUE(spinUntil([&] { return turn.count() == 1; }));
    EXPECT_NE(turn.at(0).at(0).value<TurnReport>().finish, QStringLiteral("error"));

    // And the panel runs again.
    d->setRequest(smallRequest(1));
    ASSERT_TRUE(d->start()) << d->lastError().toStdString();
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 2; }, 120000));
    EXPECT_TRUE(finished.at(1).at(0).toBool()) << finished.at(1).at(2).toString().toStdString();
}

// The bar moves during the first answer (it sat at 0 until the first answer was complete).
TEST_F(BenchmarkPanel, TheProgressBarMovesWithinAnAnswer) {
    auto d = dialog();
    d->show();
    QSignalSpy finished(d.get(), &BenchmarkDialog::finished);
    double reported = 0;
    QObject::connect(d.get(), &BenchmarkDialog::progressed, d.get(),
                     [&](double f) { reported = f; });
    BenchmarkRequest r = smallRequest(1);
    r.workloads = {QStringLiteral("decode")};
    r.decodeTokens = 1000;
    d->setRequest(r);
    ASSERT_TRUE(d->start()) << d->lastError().toStdString();
    EXPECT_TRUE(spinUntil([&] { return d->progressBar()->value() > 0 && reported == 0.0; }, 60000))
        << "bar " << d->progressBar()->value() << ", harness " << reported;
    d->cancel();
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }, 60000));
    EXPECT_TRUE(finished.at(0).at(1).toBool());
}

// The panel remembers its form when it is opened again.
TEST_F(BenchmarkPanel, TheFormIsRememberedWhenReopened) {
    BenchmarkRequest r = smallRequest(3);
    r.profileA = QStringLiteral("B");
    r.profileB = QStringLiteral("A");
    r.workloads = {QStringLiteral("prompt")};
    r.decodeTokens = 77;
    r.promptSizes = {123, 456};
    r.maxTokens = 9;
    {
        auto d = dialog();
        d->setRequest(r);
    }
    auto again = dialog();
    const BenchmarkRequest back = again->request();
    EXPECT_EQ(back.profileA, r.profileA);
    EXPECT_EQ(back.profileB, r.profileB);
    EXPECT_EQ(back.workloads, r.workloads);
    EXPECT_EQ(back.decodeTokens, 77);
    EXPECT_EQ(back.promptSizes, (QList<int>{123, 456}));
    EXPECT_EQ(back.maxTokens, 9);
    EXPECT_EQ(back.pairs, 3);
}

// Out of the box (Stock vs Optimized, no model of their own) it runs on the model the chat uses;
// it failed with "different models" / a demo folder that did not exist.
TEST(BenchmarkOptions, BuiltInProfilesRunOnTheChatModel) {
    QTemporaryDir dir;
    ProfileStore store;
    ASSERT_TRUE(store.load(dir.filePath(QStringLiteral("none.json"))));  // the built-ins
    ASSERT_NE(store.find(QStringLiteral("Stock")), nullptr);
    ASSERT_NE(store.find(QStringLiteral("Optimized")), nullptr);
    BenchmarkRequest r = smallRequest();
    r.profileA = QStringLiteral("Stock");
    r.profileB = QStringLiteral("Optimized");
    bench::BenchOptions o;
    QString error;
    ASSERT_TRUE(benchOptionsFor(r, store, {}, &o, &error, fixtureDir())) << error.toStdString();
    EXPECT_EQ(QDir::cleanPath(QString::fromStdString(o.model.string())),
              QDir::cleanPath(fixtureDir()));
    // A set-up profile with a model and a built-in one: the built-in runs on that model.
    Profile mine = Profile::stock();
    mine.name = QStringLiteral("Mine");
    mine.modelDir = fixtureDir();
    store.upsert(mine);
    r.profileA = QStringLiteral("Mine");
    ASSERT_TRUE(benchOptionsFor(r, store, {}, &o, &error)) << error.toStdString();
    EXPECT_EQ(QDir::cleanPath(QString::fromStdString(o.model.string())),
              QDir::cleanPath(fixtureDir()));
}

TEST_F(BenchmarkPanel, RefusesWhileAReplyIsGenerated) {
    auto d = dialog();
    QSignalSpy turn(&m_engine, &EngineHost::turnFinished);
    TurnRequest t;
    t.history = {{QStringLiteral("user"), QStringLiteral("Tell me a long story")}};
    t.maxTokens = 4000;
    ASSERT_TRUE(m_engine.send(t));
    ASSERT_TRUE(m_engine.busy());
    d->setRequest(smallRequest(1));
    EXPECT_FALSE(d->start());
    EXPECT_NE(d->lastError().indexOf(QStringLiteral("being generated")), -1)
        << d->lastError().toStdString();
    EXPECT_NE(d->statusLabel()->text().indexOf(QStringLiteral("being generated")), -1);
    EXPECT_FALSE(d->running());
    EXPECT_EQ(m_engine.state(), EngineHost::State::ready);  // the chat engine untouched
    EXPECT_TRUE(m_engine.busy());
    m_engine.stop();
    ASSERT_TRUE(spinUntil([&] { return turn.count() == 1; }));
    EXPECT_EQ(m_reloads, 0);
}

TEST(BenchmarkOptions, ProfilesBecomeTheHarnessOptions) {
    ProfileStore store = twoProfiles();
    bench::BenchOptions o;
    QString error;
    ASSERT_TRUE(benchOptionsFor(smallRequest(3), store, {}, &o, &error)) << error.toStdString();
    EXPECT_TRUE(o.ab);
    EXPECT_EQ(o.repeat, 3);
    EXPECT_TRUE(o.one_model_at_a_time);
    ASSERT_EQ(o.profiles.size(), 2u);
    EXPECT_EQ(o.profiles[0].name, "A");
    EXPECT_EQ(o.profiles[0].load.threads, 1);
    EXPECT_EQ(o.profiles[1].load.threads, 2);
    EXPECT_EQ(o.workloads, (std::vector<std::string>{"decode", "prompt"}));
    EXPECT_EQ(o.prompt_sizes, (std::vector<int>{40}));
    EXPECT_EQ(o.model, fixtureDir().toStdString());

    // Different models: refused with the reason.
    store.find(QStringLiteral("B"))->modelDir = QStringLiteral("/somewhere/else");
    EXPECT_FALSE(benchOptionsFor(smallRequest(), store, {}, &o, &error));
    EXPECT_NE(error.indexOf(QStringLiteral("different models")), -1) << error.toStdString();
    // ... unless the app runs with --model, which replaces both (their stores dropped).
    EXPECT_TRUE(benchOptionsFor(smallRequest(), store, fixtureDir(), &o, &error));
    // No workload, unknown profile.
    BenchmarkRequest none = smallRequest();
    none.workloads.clear();
    EXPECT_FALSE(benchOptionsFor(none, store, fixtureDir(), &o, &error));
    BenchmarkRequest missing = smallRequest();
    missing.profileB = QStringLiteral("nope");
    EXPECT_FALSE(benchOptionsFor(missing, store, fixtureDir(), &o, &error));
}

// Tools > Benchmark in the main window: the panel pauses the window's engine and the active
// profile's model comes back afterwards.
TEST(BenchmarkWindow, ToolsMenuOpensThePanelAndTheEngineComesBack) {
    QTemporaryDir dir;
    {
        ProfileStore store = twoProfiles();
        ASSERT_TRUE(store.save(dir.filePath(QStringLiteral("profiles.json"))));
    }
    MainWindow w(windowOptions(dir));
    ASSERT_TRUE(showUntilReady(w));
    QAction* action = nullptr;
    for (QAction* menu : w.menuBar()->actions())
        if (menu->menu())
            for (QAction* a : menu->menu()->actions())
                if (a->text().contains(QStringLiteral("Benchmark"))) action = a;
    ASSERT_NE(action, nullptr);
    action->trigger();
    BenchmarkDialog* d = w.benchmark();
    ASSERT_NE(d, nullptr);
    QSignalSpy finished(d, &BenchmarkDialog::finished);
    d->setRequest(smallRequest(1));
    ASSERT_TRUE(d->start()) << d->lastError().toStdString();
    EXPECT_EQ(w.engine()->state(), EngineHost::State::empty);
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }, 120000));
    EXPECT_TRUE(finished.at(0).at(0).toBool()) << finished.at(0).at(2).toString().toStdString();
    ASSERT_TRUE(spinUntil([&] { return w.engine()->state() == EngineHost::State::ready; }));
    EXPECT_EQ(w.engine()->modelDir(), fixtureDir());
    d->close();
    ASSERT_TRUE(spinUntil([&] { return w.benchmark() == nullptr; }, 5000));
}

// The demo model picked in the switcher was replaced by the active profile's model after a
// benchmark: the model the user picked comes back.
TEST(BenchmarkWindow, TheModelTheUserPickedComesBackAfterARun) {
    qputenv(
        "NEURAL_DEMO_TOKENIZER",
        QByteArray::fromStdString((neural::test::tiny_model_dir() / "tokenizer.json").string()));
    QTemporaryDir dir;
    {
        ProfileStore store = twoProfiles();
        ASSERT_TRUE(store.save(dir.filePath(QStringLiteral("profiles.json"))));
    }
    MainWindow w(windowOptions(dir));
    ASSERT_TRUE(showUntilReady(w));
    ASSERT_FALSE(w.engine()->isDemo());
    QComboBox* models = w.modelSwitcher();
    int demo = -1;
    for (int i = 0; i < models->count(); ++i)
        if (models->itemData(i, MainWindow::kSwitchKindRole).toString() == QStringLiteral("demo"))
            demo = i;
    ASSERT_GE(demo, 0);
    models->setCurrentIndex(demo);
    emit models->activated(demo);
    ASSERT_TRUE(spinUntil(
        [&] { return w.engine()->state() == EngineHost::State::ready && w.engine()->isDemo(); },
        120000))
        << w.engine()->lastError().toStdString();

    w.openBenchmark();
    BenchmarkDialog* d = w.benchmark();
    ASSERT_NE(d, nullptr);
    QSignalSpy finished(d, &BenchmarkDialog::finished);
    d->setRequest(smallRequest(1));
    ASSERT_TRUE(d->start()) << d->lastError().toStdString();
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }, 120000));
    ASSERT_TRUE(spinUntil([&] { return w.engine()->state() == EngineHost::State::ready; }));
    EXPECT_TRUE(w.engine()->isDemo()) << w.engine()->modelDir().toStdString();
    EXPECT_EQ(models->itemData(models->currentIndex(), MainWindow::kSwitchKindRole).toString(),
              QStringLiteral("demo"));
    d->close();
    ASSERT_TRUE(spinUntil([&] { return w.benchmark() == nullptr; }, 5000));
}

}  // namespace
}  // namespace neural::gui
