// Telemetry dock: charts fed by polling the engine's lock-free telemetry rings on a QTimer
// (Ring::since from the last index read; the engine thread is never waited for). Decode tok/s
// over time, VRAM hit rate, the per-token phase breakdown (CPU kernel, GPU wait, graph
// submission, admission, other) averaged over the last 64 tokens, process RAM (and the GPU's used
// VRAM while a GPU backend runs; the line is hidden on the CPU backend), page faults per token, the last request's summary; CSV export of the
// token records seen.
#pragma once

#include <QDockWidget>
#include <QList>

#include <memory>
#include <vector>

#include "telemetry/telemetry.h"

class QLabel;
class QTabWidget;
class QTimer;
class QChart;
class QLineSeries;
class QValueAxis;
class QBarSet;

namespace neural {
class Model;
}

namespace neural::gui {

class TelemetryDock : public QDockWidget {
    Q_OBJECT
public:
    explicit TelemetryDock(QWidget* parent = nullptr);

    void setModel(std::shared_ptr<const Model> model);
    // One poll now (the timer calls it every 250 ms while the dock is visible).
    void poll();
    const std::vector<telemetry::TokenRecord>& tokens() const { return m_tokens; }
    QString lastRequestSummary() const;
    QTabWidget* tabs() const { return m_tabs; }
    bool showsVram() const;  // the VRAM line is visible (a GPU backend runs)
    // Writes the collected token records; false with `error`.
    bool exportCsv(const QString& path, QString* error = nullptr) const;

    // Appends (px, py), keeping the last `keep` points; the x axis spans them and the value
    // axis follows the highest point in view of the lines it carries (niceAxisMax).
    static void addPoint(QLineSeries* series, QValueAxis* x, QValueAxis* y, double px, double py,
                         int keep);
    QValueAxis* speedAxis() const { return m_tpsY; }
    QLabel* summaryLabel() const { return m_summary; }

protected:
    void changeEvent(QEvent* event) override;

private:
    void applyChartTheme();  // dark charts under a dark palette

    std::shared_ptr<const Model> m_model;
    QTimer* m_timer;
    std::uint64_t m_nextToken = 0;
    std::uint64_t m_nextRequest = 0;
    std::vector<telemetry::TokenRecord> m_tokens;  // up to 65,536 most recent
    std::vector<telemetry::RequestRecord> m_requests;
    double m_elapsed = 0;  // seconds of polling (chart x axis for RAM)
    qint64 m_tokenCount = 0;

    QLineSeries* m_tps;
    QValueAxis *m_tpsX, *m_tpsY;
    QLineSeries* m_hit;
    QValueAxis *m_hitX, *m_hitY;
    QLineSeries* m_ram;
    QLineSeries* m_vram;
    QValueAxis *m_memX, *m_memY;
    QLineSeries* m_faults;
    QValueAxis *m_faultX, *m_faultY;
    QList<QBarSet*> m_phases;
    QValueAxis* m_phaseY;
    QLabel* m_summary;
    QTabWidget* m_tabs;
    QList<QChart*> m_charts;
    bool m_gpuBackend = false;
    unsigned m_vramPolls = 0;
};

// A round axis maximum at least 10 % above `peak` (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power
// of ten); 1 for no peak.
double niceAxisMax(double peak);

// Resident set size of this process in bytes (the working set on Windows; 0 where unknown):
// platform/process_stats.h.
std::uint64_t processRssBytes();

}  // namespace neural::gui
