#include "monitor/telemetrydock.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QFile>
#include <QFileDialog>
#include <QGraphicsLayout>
#include <QHBoxLayout>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLineSeries>
#include <QMessageBox>
#include <QPushButton>
#include <QSaveFile>
#include <QTabBar>
#include <QTabWidget>
#include <QTextStream>
#include <QTimer>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/dialogs.h"
#include "common/outputpath.h"
#include "backend/backend.h"
#include "platform/process_stats.h"
#include "runtime/model.h"

namespace neural::gui {

namespace {
constexpr int kPoints = 300;            // points kept per line chart
constexpr std::size_t kKeep = 1 << 16;  // token records kept for CSV export
constexpr int kPhaseWindow = 64;        // tokens averaged in the phase chart

QChartView* makeView(QChart* chart, const QString& name, QWidget* parent) {
    chart->legend()->setAlignment(Qt::AlignBottom);
    // A chart of one line needs no legend (its title says what it is): the room goes to the
    // plot and the axis labels, which were elided ("...") in the docked default size.
    chart->legend()->setVisible(chart->series().size() > 1);
    chart->setMargins(QMargins(2, 2, 2, 2));
    chart->layout()->setContentsMargins(0, 0, 0, 0);
    auto* view = new QChartView(chart, parent);
    view->setRenderHint(QPainter::Antialiasing);
    view->setAccessibleName(name);
    view->setMinimumHeight(160);
    return view;
}

QChart* lineChart(const QString& title, std::initializer_list<QLineSeries*> series, QValueAxis*& x,
                  QValueAxis*& y, const QString& xTitle, const QString& yTitle) {
    auto* chart = new QChart;
    chart->setTitle(title);
    x = new QValueAxis;
    y = new QValueAxis;
    x->setTitleText(xTitle);
    y->setTitleText(yTitle);
    x->setLabelFormat(QStringLiteral("%.0f"));
    // Few, short labels: they stay whole in a narrow dock.
    x->setTickCount(3);
    y->setTickCount(4);
    y->setLabelFormat(QStringLiteral("%.0f"));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    for (QLineSeries* s : series) {
        chart->addSeries(s);
        s->attachAxis(x);
        s->attachAxis(y);
    }
    y->setRange(0, 1);
    return chart;
}
}  // namespace

std::uint64_t processRssBytes() { return neural::process_resident_bytes(); }

TelemetryDock::TelemetryDock(QWidget* parent) : QDockWidget(tr("Telemetry"), parent) {
    setObjectName(QStringLiteral("telemetryDock"));
    setAccessibleName(tr("Telemetry"));
    auto* box = new QWidget(this);
    auto* v = new QVBoxLayout(box);
    auto* tabs = new QTabWidget(box);
    m_tabs = tabs;
    // Five short tab names: all of them readable (scroll arrows only when the dock is narrower).
    tabs->setUsesScrollButtons(true);
    tabs->setElideMode(Qt::ElideNone);

    m_tps = new QLineSeries;
    m_tps->setName(tr("tok/s, 8-token average"));
    tabs->addTab(
        makeView(lineChart(tr("Decode speed"), {m_tps}, m_tpsX, m_tpsY, tr("token"), tr("tok/s")),
                 tr("Decode speed chart"), tabs),
        tr("Speed"));
    m_hit = new QLineSeries;
    m_hit->setName(tr("hit rate"));
    tabs->addTab(makeView(lineChart(tr("Experts computed from VRAM"), {m_hit}, m_hitX, m_hitY,
                                    tr("token"), tr("%")),
                          tr("VRAM hit rate chart"), tabs),
                 tr("Hit rate"));
    m_hitY->setRange(0, 100);
    m_hitY->setProperty("fixedRange", true);

    auto* phaseChart = new QChart;
    phaseChart->setTitle(tr("Per-token phases, last %1 tokens (ms)").arg(kPhaseWindow));
    auto* bars = new QHorizontalStackedBarSeries;
    for (const QString& n : {tr("CPU kernel"), tr("GPU wait"), tr("graph submission"),
                             tr("admission"), tr("sampling"), tr("other")}) {
        auto* set = new QBarSet(n);
        *set << 0;
        bars->append(set);
        m_phases.push_back(set);
    }
    phaseChart->addSeries(bars);
    auto* cat = new QBarCategoryAxis;
    cat->append(tr("token"));
    phaseChart->addAxis(cat, Qt::AlignLeft);
    bars->attachAxis(cat);
    m_phaseY = new QValueAxis;
    m_phaseY->setRange(0, 1);
    phaseChart->addAxis(m_phaseY, Qt::AlignBottom);
    bars->attachAxis(m_phaseY);
    tabs->addTab(makeView(phaseChart, tr("Phase breakdown chart"), tabs), tr("Phases"));

    m_ram = new QLineSeries;
    m_ram->setName(tr("RAM (resident set)"));
    m_vram = new QLineSeries;
    m_vram->setName(tr("VRAM used"));
    m_vram->setVisible(false);  // shown once a GPU backend runs (setModel)
    tabs->addTab(
        makeView(lineChart(tr("Memory"), {m_ram, m_vram}, m_memX, m_memY, tr("s"), tr("GiB")),
                 tr("Memory chart"), tabs),
        tr("Memory"));
    m_faults = new QLineSeries;
    m_faults->setName(tr("page faults per token"));
    tabs->addTab(makeView(lineChart(tr("Page faults"), {m_faults}, m_faultX, m_faultY, tr("token"),
                                    tr("faults")),
                          tr("Page faults chart"), tabs),
                 tr("Faults"));
    v->addWidget(tabs, 1);
    // Never narrower than the tab names (they were cut off in a narrow dock).
    box->setMinimumWidth(tabs->tabBar()->sizeHint().width() + 2 * v->contentsMargins().left());
    for (QChartView* view : tabs->findChildren<QChartView*>()) m_charts << view->chart();
    applyChartTheme();

    m_summary = new QLabel(tr("No request yet."), box);
    m_summary->setWordWrap(true);
    // A long summary wraps inside the dock's width instead of widening the dock (which took
    // the room from the chat after the first reply).
    m_summary->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_summary->setMinimumWidth(0);
    m_summary->setAccessibleName(tr("Last request summary"));
    auto* row = new QHBoxLayout;
    auto* csv = new QPushButton(tr("Export CSV..."), box);
    csv->setAccessibleName(tr("Export telemetry as CSV"));
    row->addWidget(m_summary, 1);
    row->addWidget(csv);
    v->addLayout(row);
    setWidget(box);

    connect(csv, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Export telemetry"), QStringLiteral("telemetry.csv"), tr("CSV (*.csv)"));
        QString error;
        if (!path.isEmpty() && !exportCsv(path, &error))
            showWarning(this, tr("Export telemetry"), error);
    });
    m_timer = new QTimer(this);
    m_timer->setInterval(250);
    connect(m_timer, &QTimer::timeout, this, &TelemetryDock::poll);
    connect(this, &QDockWidget::visibilityChanged, this, [this](bool visible) {
        if (visible)
            m_timer->start();
        else
            m_timer->stop();
    });
}

void TelemetryDock::applyChartTheme() {
    const bool dark = palette().color(QPalette::Window).lightness() < 128;
    for (QChart* c : m_charts) {
        // setTheme resets series colours and fonts; only switch when it changes.
        const auto theme = dark ? QChart::ChartThemeDark : QChart::ChartThemeLight;
        if (c->theme() != theme) c->setTheme(theme);
    }
}

void TelemetryDock::changeEvent(QEvent* event) {
    QDockWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) applyChartTheme();
}

void TelemetryDock::setModel(std::shared_ptr<const Model> model) {
    m_model = std::move(model);
    // VRAM: the GPU's used memory (total - free, as the driver reports it) while a GPU backend
    // runs; the CPU backend uses none, so the line is hidden instead of staying empty.
    m_gpuBackend = m_model && std::string(m_model->backend_name()) == "cuda";
    m_vram->setVisible(m_gpuBackend);
    m_vram->clear();
    // A new model has new rings: start reading them from the beginning.
    m_nextToken = m_nextRequest = 0;
}

double niceAxisMax(double peak) {
    if (!(peak > 0)) return 1;
    // A round step times a power of ten, at least 10 % above the peak.
    const double want = peak * 1.1;
    // The power of ten as an exact integer, divided for a negative exponent (one correctly
    // rounded division: 5 / 100 is the double nearest 0.05 on every C library; pow is not).
    const int exponent = static_cast<int>(std::floor(std::log10(want)));
    double ten_to = 1;
    for (int i = 0; i < std::abs(exponent) && i < 300; ++i) ten_to *= 10;
    const auto scaled = [&](double step) { return exponent >= 0 ? step * ten_to : step / ten_to; };
    for (double step : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
        if (scaled(step) >= want) return scaled(step);
    return scaled(10);
}

void TelemetryDock::addPoint(QLineSeries* series, QValueAxis* x, QValueAxis* y, double px,
                             double py, int keep) {
    series->append(px, py);
    if (series->count() > keep) series->removePoints(0, series->count() - keep);
    x->setRange(series->at(0).x(), std::max(px, series->at(0).x() + 1));
    // The value axis follows the points in view (an old peak scrolled out no longer flattens
    // the line), over every line the axis carries; a fixed range (the hit rate's 0-100 %)
    // stays.
    if (y->property("fixedRange").toBool()) return;
    double peak = 0;
    const QList<QAbstractSeries*> lines =
        series->chart() ? series->chart()->series() : QList<QAbstractSeries*>{series};
    for (QAbstractSeries* a : lines)
        if (auto* line = qobject_cast<QLineSeries*>(a);
            line && line->isVisible() && line->attachedAxes().contains(y))
            for (const QPointF& p : line->points()) peak = std::max(peak, p.y());
    const double top = niceAxisMax(peak);
    // Only on a change: a new range or label format lays the chart out again.
    if (y->min() != 0 || y->max() != top) y->setRange(0, top);
    // Whole numbers from 10 up, one decimal below, two below 1: short labels either way.
    const QString format = top >= 10  ? QStringLiteral("%.0f")
                           : top >= 1 ? QStringLiteral("%.1f")
                                      : QStringLiteral("%.2f");
    if (y->labelFormat() != format) y->setLabelFormat(format);
}

void TelemetryDock::poll() {
    m_elapsed += m_timer->interval() / 1000.0;
    const double ramGib = static_cast<double>(processRssBytes()) / (1u << 30);
    addPoint(m_ram, m_memX, m_memY, m_elapsed, ramGib, kPoints);
    if (m_gpuBackend && m_vramPolls++ % 4 == 0) {  // once a second: the driver is asked
        std::string why;
        const std::vector<GpuDevice> gpus = gpu_devices(&why);
        if (!gpus.empty() && gpus.front().total_bytes >= gpus.front().free_bytes)
            addPoint(m_vram, m_memX, m_memY, m_elapsed,
                     static_cast<double>(gpus.front().total_bytes - gpus.front().free_bytes) /
                         (1u << 30),
                     kPoints);
    }
    if (!m_model) return;
    const telemetry::Telemetry& t = m_model->telemetry();
    const std::vector<telemetry::TokenRecord> fresh = t.tokens().since(m_nextToken, &m_nextToken);
    for (const telemetry::TokenRecord& r : fresh) {
        ++m_tokenCount;
        m_tokens.push_back(r);
        const std::uint64_t experts = r.experts_hit + r.experts_missed + r.experts_streamed;
        addPoint(m_hit, m_hitX, m_hitY, static_cast<double>(m_tokenCount),
                 experts ? 100.0 * static_cast<double>(r.experts_hit) / static_cast<double>(experts)
                         : 0.0,
                 kPoints);
        addPoint(m_faults, m_faultX, m_faultY, static_cast<double>(m_tokenCount),
                 static_cast<double>(r.page_faults), kPoints);
        // Decode speed: the average over the last 8 tokens (single tokens are noisy).
        const std::size_t n = std::min<std::size_t>(8, m_tokens.size());
        std::uint64_t ns = 0;
        for (std::size_t i = m_tokens.size() - n; i < m_tokens.size(); ++i)
            ns += m_tokens[i].wall_ns;
        if (ns > 0)
            addPoint(m_tps, m_tpsX, m_tpsY, static_cast<double>(m_tokenCount),
                     1e9 * static_cast<double>(n) / static_cast<double>(ns), kPoints);
    }
    if (m_tokens.size() > kKeep)
        m_tokens.erase(m_tokens.begin(),
                       m_tokens.begin() + static_cast<std::ptrdiff_t>(m_tokens.size() - kKeep));
    if (!fresh.empty()) {
        const std::size_t n = std::min<std::size_t>(kPhaseWindow, m_tokens.size());
        double sums[6] = {0, 0, 0, 0, 0, 0};
        for (std::size_t i = m_tokens.size() - n; i < m_tokens.size(); ++i) {
            const auto& r = m_tokens[i];
            sums[0] += static_cast<double>(r.cpu_kernel_ns);
            sums[1] += static_cast<double>(r.gpu_wait_ns);
            sums[2] += static_cast<double>(r.graph_submit_ns);
            sums[3] += static_cast<double>(r.admission_ns);
            sums[4] += static_cast<double>(r.sampling_ns);
            sums[5] += static_cast<double>(r.other_ns);
        }
        double total = 0;
        for (int i = 0; i < 6; ++i) {
            const double ms = sums[i] / static_cast<double>(n) / 1e6;
            m_phases[i]->replace(0, ms);
            total += ms;
        }
        m_phaseY->setRange(0, std::max(0.001, total * 1.1));
    }
    for (const telemetry::RequestRecord& r : t.requests().since(m_nextRequest, &m_nextRequest))
        m_requests.push_back(r);
    if (!m_requests.empty()) m_summary->setText(lastRequestSummary());
}

bool TelemetryDock::showsVram() const { return m_vram->isVisible(); }

QString TelemetryDock::lastRequestSummary() const {
    if (m_requests.empty()) return tr("No request yet.");
    const telemetry::RequestRecord& r = m_requests.back();
    const double tps = r.decode_seconds > 0 && r.decode_tokens > 1
                           ? static_cast<double>(r.decode_tokens - 1) / r.decode_seconds
                           : 0.0;
    return tr("Last request #%1: prompt %2 tokens (%3 cached) in %4 s, first token after %5 s, "
              "%6 tokens at %7 tok/s%8")
        .arg(r.id)
        .arg(r.prompt_tokens)
        .arg(r.cached_tokens)
        .arg(r.prompt_seconds, 0, 'f', 2)
        .arg(r.ttft_seconds, 0, 'f', 2)
        .arg(r.decode_tokens)
        .arg(tps, 0, 'f', 1)
        .arg(r.cancelled ? tr(" (stopped)") : QString());
}

bool TelemetryDock::exportCsv(const QString& path, QString* error) const {
    QString refused;
    const QString target = neural::gui::checkedOutputPath(path, &refused);
    if (target.isEmpty()) {
        if (error) *error = refused;
        return false;
    }
    QSaveFile f(target);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Text)) {
        if (error) *error = tr("cannot write %1: %2").arg(path, f.errorString());
        return false;
    }
    QTextStream out(&f);
    out << "request,index,wall_ns,cpu_kernel_ns,gpu_wait_ns,graph_submit_ns,admission_ns,"
           "other_ns,experts_hit,experts_missed,admissions,cpu_bytes,page_faults,major_page_faults,"
           "experts_streamed,sampling_ns\n";
    for (const auto& r : m_tokens) {
        out << r.request << ',' << r.index << ',' << r.wall_ns << ',' << r.cpu_kernel_ns << ','
            << r.gpu_wait_ns << ',' << r.graph_submit_ns << ',' << r.admission_ns << ','
            << r.other_ns << ',' << r.experts_hit << ',' << r.experts_missed << ',' << r.admissions
            << ',' << r.cpu_bytes << ',' << r.page_faults << ',' << r.major_page_faults << ','
            << r.experts_streamed << ',' << r.sampling_ns << '\n';
    }
    out.flush();
    if (!f.commit()) {
        if (error) *error = tr("cannot write %1: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

}  // namespace neural::gui
