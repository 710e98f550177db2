// The Benchmark panel (Tools > Benchmark...): an in-app A/B of two profiles with the harness of
// `neural bench --ab` (neural::bench::run_bench, engine/bench/bench.h). The user picks profiles
// A and B, the workloads (decode / prompt / replay, their sizes) and the number of pairs; the
// runs go in mirrored order (A B, B A, A B, ...) on a worker thread with a progress bar and
// Cancel (the bar also moves within a decode answer, from its streamed tokens; Cancel stops a
// prompt pass in flight). The form is remembered in appSettings(). Results: the per-pair ratios
// B / A (decode tok/s, prompt time) beside both profiles' figures in a table, their median
// with quartiles and range as a box plot (Qt Charts), and the report JSON for export (written
// atomically, engine/platform/atomic_file.h).
//
// Memory: while it runs the app's own chat engine is unloaded (EngineHost::unloadModel; the API
// server stops and restarts with it) and run_bench keeps one model at a time, so the RAM/VRAM of
// a model is never held twice; afterwards the reload callback (the main window's
// loadActiveProfile) brings the chat engine back. It refuses to start while a reply is being
// generated or a model is loading.
#pragma once

#include <QDialog>
#include <QList>
#include <QString>
#include <QStringList>

#include <atomic>
#include <functional>
#include <memory>

#include "bench/bench.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QThread;
class QTimer;

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
QT_END_NAMESPACE

namespace neural::gui {

class EngineHost;
class ProfileStore;
struct Profile;

// What the panel runs (the form's values).
struct BenchmarkRequest {
    QString profileA;
    QString profileB;
    QStringList workloads{QStringLiteral("decode")};  // decode, prompt, replay
    int decodeTokens = 128;
    QList<int> promptSizes{3000};
    QString replayDir;    // empty: the source tree's bench/workloads
    int maxTokens = 0;    // > 0 caps replay answers
    int pairs = 2;        // repeat: A/B pairs in mirrored order
    bool probes = false;  // RAM read-bandwidth probe before the runs
};

// The bench::BenchOptions of a request with the app's profiles (exposed for tests). False with
// `error` when a profile is missing or the two use different model folders. `modelOverride`
// (the app's --model) replaces both profiles' model; their stores are dropped then. A profile
// without a model of its own (the built-in Stock and Optimized) runs the other profile's model,
// else `fallbackModel` (the model the chat runs), else the demo model.
bool benchOptionsFor(const BenchmarkRequest& request, ProfileStore& profiles,
                     const QString& modelOverride, bench::BenchOptions* options, QString* error,
                     const QString& fallbackModel = {});

class BenchmarkDialog : public QDialog {
    Q_OBJECT
public:
    BenchmarkDialog(ProfileStore* profiles, EngineHost* engine, QWidget* parent = nullptr);
    ~BenchmarkDialog() override;  // cancels a running benchmark and waits for it

    void setModelOverride(const QString& dir) { m_modelOverride = dir; }
    // Called after a run (finished, failed or cancelled) to bring the chat engine back.
    void setReloadEngine(std::function<void()> reload) { m_reload = std::move(reload); }

    BenchmarkRequest request() const;  // from the form
    void setRequest(const BenchmarkRequest& r);

    // Starts the benchmark; false with lastError() (also shown in the panel) when it cannot.
    bool start();
    void cancel();
    bool running() const { return m_thread != nullptr; }
    QString lastError() const { return m_error; }
    // The last complete report ({} before the first or after a cancelled run).
    const bench::Json& report() const { return m_report; }
    // Writes report() as JSON, atomically; false with `error`.
    bool exportReport(const QString& path, QString* error = nullptr) const;

    // Test access.
    QProgressBar* progressBar() const { return m_bar; }
    QPushButton* startButton() const { return m_start; }
    QPushButton* cancelButton() const { return m_cancel; }
    QPushButton* exportButton() const { return m_export; }
    QTableWidget* pairTable() const { return m_table; }
    QChart* chart() const { return m_chart; }
    QLabel* summaryLabel() const { return m_summary; }
    QLabel* statusLabel() const { return m_status; }

signals:
    void started();
    void progressed(double fraction);
    // ok: a report is there; cancelled: stopped by Cancel; message: the summary or the error.
    void finished(bool ok, bool cancelled, const QString& message);

protected:
    void reject() override;  // while running: cancel first, close when it has stopped

private:
    void buildUi();
    void fillProfiles();
    void setRunning(bool running);
    void showReport();
    void onDone(bool ok, bool cancelled, const QString& message);
    void saveForm() const;
    void restoreForm();

    ProfileStore* m_profiles;
    EngineHost* m_engine;
    QString m_modelOverride;
    std::function<void()> m_reload;
    QString m_error;
    bench::Json m_report;
    QThread* m_thread = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancelFlag;
    // Streamed tokens since the last progress report (the cancel callback counts them), for the
    // bar's movement within a decode answer.
    std::shared_ptr<std::atomic<int>> m_polls;
    double m_fraction = 0;     // the harness's last fraction
    double m_answerShare = 0;  // one answer's share of the whole run
    int m_answerTokens = 0;    // tokens a decode answer streams (0: not a decode answer)
    QTimer* m_tick = nullptr;
    bool m_closeWhenDone = false;

    QComboBox* m_a = nullptr;
    QComboBox* m_b = nullptr;
    QCheckBox* m_decode = nullptr;
    QCheckBox* m_prompt = nullptr;
    QCheckBox* m_replay = nullptr;
    QCheckBox* m_probes = nullptr;
    QSpinBox* m_tokens = nullptr;
    QLineEdit* m_sizes = nullptr;
    QLineEdit* m_replayDir = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QSpinBox* m_pairs = nullptr;
    QPushButton* m_start = nullptr;
    QPushButton* m_cancel = nullptr;
    QPushButton* m_export = nullptr;
    QProgressBar* m_bar = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_summary = nullptr;
    QTableWidget* m_table = nullptr;
    QChart* m_chart = nullptr;
    QChartView* m_chartView = nullptr;
};

}  // namespace neural::gui
