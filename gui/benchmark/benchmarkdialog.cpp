#include "benchmark/benchmarkdialog.h"

#include <QBarCategoryAxis>
#include <QBoxPlotSeries>
#include <QBoxSet>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QMetaObject>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QSettings>
#include <QThread>
#include <QTimer>
#include <QValueAxis>
#include <QVBoxLayout>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/wheelguard.h"
#include "common/paths.h"
#include "conversation/enginehost.h"
#include "neural/error.h"
#include "platform/atomic_file.h"
#include "settings/profile.h"

namespace neural::gui {

namespace {

QString defaultReplayDir() { return QStringLiteral(NEURAL_SOURCE_DIR "/bench/workloads"); }

QString ratioText(const bench::Json& v) {
    return v.is_number() ? QString::number(v.get<double>(), 'f', 4) : QStringLiteral("-");
}

QString numberText(const bench::Json& v, int decimals) {
    return v.is_number() ? QString::number(v.get<double>(), 'f', decimals) : QStringLiteral("-");
}

// "prompt_3000" -> "prompt 3000"; "decode", "replay" as they are.
QString workloadLabel(const std::string& name) {
    return QString::fromStdString(name).replace(QLatin1Char('_'), QLatin1Char(' '));
}

// The profile's knobs as the report's "flags" (what the user chose, for the record).
bench::Json flagsOf(const Profile& p) {
    const QByteArray bytes = QJsonDocument(p.toJson()).toJson(QJsonDocument::Compact);
    return bench::Json::parse(bytes.toStdString());
}

}  // namespace

bool benchOptionsFor(const BenchmarkRequest& r, ProfileStore& profiles,
                     const QString& modelOverride, bench::BenchOptions* options, QString* error,
                     const QString& fallbackModel) {
    auto bad = [&](const QString& why) {
        if (error) *error = why;
        return false;
    };
    const Profile* a = profiles.find(r.profileA);
    const Profile* b = profiles.find(r.profileB);
    if (!a || !b) return bad(QObject::tr("Choose two existing profiles (A and B)."));
    if (r.workloads.isEmpty()) return bad(QObject::tr("Choose at least one workload."));
    if (r.workloads.contains(QStringLiteral("prompt")) && r.promptSizes.isEmpty())
        return bad(QObject::tr("The prompt workload needs at least one prompt size."));
    // A profile without a model of its own compares on the other's (or the chat's) model.
    const QString shared = !a->modelDir.isEmpty()     ? a->modelDir
                           : !b->modelDir.isEmpty()   ? b->modelDir
                           : !fallbackModel.isEmpty() ? fallbackModel
                                                      : demoModelDir();
    auto modelOf = [&](const Profile& p) {
        if (!modelOverride.isEmpty()) return modelOverride;
        return p.modelDir.isEmpty() ? shared : p.modelDir;
    };
    const QString model = modelOf(*a);
    if (QDir::cleanPath(model) != QDir::cleanPath(modelOf(*b)))
        return bad(QObject::tr("Profiles %1 and %2 use different models (%3, %4); an A/B compares "
                               "engine settings on one model.")
                       .arg(a->name, b->name, model, modelOf(*b)));
    const bool gguf =
        model.endsWith(QStringLiteral(".gguf"), Qt::CaseInsensitive) && QFileInfo(model).isFile();
    if (!gguf && !QFileInfo::exists(model + QStringLiteral("/config.json")))
        return bad(QObject::tr("No model in %1: set one up first.").arg(model));

    bench::BenchOptions o;
    o.model = model.toStdString();
    o.workloads.clear();
    for (const QString& w : r.workloads) o.workloads.push_back(w.toStdString());
    o.decode_tokens = std::max(1, r.decodeTokens);
    o.prompt_sizes.clear();
    for (int s : r.promptSizes) o.prompt_sizes.push_back(s);
    o.workload_dir = (r.replayDir.isEmpty() ? defaultReplayDir() : r.replayDir).toStdString();
    o.max_tokens = r.maxTokens;
    o.repeat = std::max(1, r.pairs);
    o.ab = true;
    o.probes = r.probes;
    o.one_model_at_a_time = true;  // the RAM (and VRAM) of one model at a time
    for (const Profile* p : {a, b}) {
        bench::Profile bp;
        bp.name = p->name.toStdString();
        bp.flags = flagsOf(*p);
        try {
            bp.load = p->toLoadOptions();
        } catch (const std::exception& e) {
            return bad(QObject::tr("Profile %1: %2").arg(p->name, QString::fromUtf8(e.what())));
        }
        if (!modelOverride.isEmpty() && p->modelDir != modelOverride) {
            bp.load.store.clear();  // the profile's store belongs to its own model
        }
        o.profiles.push_back(std::move(bp));
    }
    *options = std::move(o);
    return true;
}

BenchmarkDialog::BenchmarkDialog(ProfileStore* profiles, EngineHost* engine, QWidget* parent)
    : QDialog(parent), m_profiles(profiles), m_engine(engine) {
    installWheelGuard();
    setWindowTitle(tr("Benchmark"));
    setAccessibleName(tr("Benchmark"));
    buildUi();
    fillProfiles();
    restoreForm();
    setRunning(false);
    resize(900, 720);
}

BenchmarkDialog::~BenchmarkDialog() {
    saveForm();
    if (m_thread) {
        // Closing the app mid-run: stop at the next check (a token or an answer) and wait.
        m_cancelFlag->store(true);
        m_thread->wait();
        delete m_thread;
        m_thread = nullptr;
    }
}

void BenchmarkDialog::buildUi() {
    auto* v = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    m_a = new QComboBox(this);
    m_a->setAccessibleName(tr("Profile A"));
    m_b = new QComboBox(this);
    m_b->setAccessibleName(tr("Profile B"));
    form->addRow(tr("Profile &A (baseline):"), m_a);
    form->addRow(tr("Profile &B (compared):"), m_b);

    auto* workloads = new QWidget(this);
    auto* wl = new QHBoxLayout(workloads);
    wl->setContentsMargins(0, 0, 0, 0);
    m_decode = new QCheckBox(tr("decode"), workloads);
    m_decode->setToolTip(tr("A fixed chat prompt and N greedy tokens: decode tok/s."));
    m_prompt = new QCheckBox(tr("prompt"), workloads);
    m_prompt->setToolTip(
        tr("A fresh prompt of about S tokens answered with one token: prompt "
           "time and time to first token."));
    m_replay = new QCheckBox(tr("replay"), workloads);
    m_replay->setToolTip(
        tr("Saved API requests through one session: a long context, then "
           "follow-ups from the prompt cache."));
    for (QCheckBox* c : {m_decode, m_prompt, m_replay}) wl->addWidget(c);
    wl->addStretch(1);
    form->addRow(tr("Workloads:"), workloads);

    m_tokens = new QSpinBox(this);
    m_tokens->setRange(2, 8192);
    m_tokens->setAccessibleName(tr("Decode tokens"));
    form->addRow(tr("Decode tokens:"), m_tokens);
    m_sizes = new QLineEdit(this);
    m_sizes->setAccessibleName(tr("Prompt sizes"));
    m_sizes->setPlaceholderText(tr("3000,13000"));
    form->addRow(tr("Prompt sizes (tokens):"), m_sizes);
    m_replayDir = new QLineEdit(this);
    m_replayDir->setAccessibleName(tr("Replay folder"));
    m_replayDir->setPlaceholderText(defaultReplayDir());
    form->addRow(tr("Replay folder:"), m_replayDir);
    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setRange(0, 65536);
    m_maxTokens->setSpecialValueText(tr("as requested"));
    m_maxTokens->setAccessibleName(tr("Replay answer cap"));
    form->addRow(tr("Replay answer cap:"), m_maxTokens);
    m_pairs = new QSpinBox(this);
    m_pairs->setRange(1, 1000);
    m_pairs->setAccessibleName(tr("Pairs"));
    m_pairs->setToolTip(
        tr("Number of A/B pairs, run in mirrored order A B, B A, A B, ... so a "
           "drift of the machine hits both profiles alike."));
    form->addRow(tr("Pairs (repeat):"), m_pairs);
    m_probes = new QCheckBox(tr("Measure RAM read bandwidth first (512 MiB)"), this);
    form->addRow(QString(), m_probes);
    v->addLayout(form);

    auto* buttons = new QHBoxLayout;
    m_start = new QPushButton(tr("&Run"), this);
    m_cancel = new QPushButton(tr("&Cancel run"), this);
    m_export = new QPushButton(tr("&Export JSON..."), this);
    auto* close = new QPushButton(tr("Close"), this);
    m_bar = new QProgressBar(this);
    m_bar->setRange(0, 1000);
    m_bar->setAccessibleName(tr("Benchmark progress"));
    buttons->addWidget(m_start);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_bar, 1);
    buttons->addWidget(m_export);
    buttons->addWidget(close);
    v->addLayout(buttons);
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_status->setAccessibleName(tr("Benchmark status"));
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    v->addWidget(m_status);
    m_summary = new QLabel(this);
    m_summary->setWordWrap(true);
    m_summary->setAccessibleName(tr("Benchmark summary"));
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    v->addWidget(m_summary);

    auto* split = new QSplitter(Qt::Vertical, this);
    m_table = new QTableWidget(0, 9, split);
    m_table->setAccessibleName(tr("Per-pair ratios"));
    m_table->setHorizontalHeaderLabels(
        {tr("Pair"), tr("Order"), tr("Workload"), tr("Decode tok/s B/A"), tr("Prompt time B/A"),
         tr("A tok/s"), tr("B tok/s"), tr("A prompt s"), tr("B prompt s")});
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_chart = new QChart;
    m_chart->setTitle(tr("B / A per workload: median, quartiles, range"));
    m_chart->legend()->setAlignment(Qt::AlignBottom);
    m_chartView = new QChartView(m_chart, split);
    m_chartView->setRenderHint(QPainter::Antialiasing);
    m_chartView->setAccessibleName(tr("Ratio chart"));
    m_chartView->setMinimumHeight(220);
    split->addWidget(m_table);
    split->addWidget(m_chartView);
    v->addWidget(split, 1);

    // Defaults: small enough to finish in a minute on the demo model.
    BenchmarkRequest defaults;
    setRequest(defaults);

    // Between the harness's reports (after each load and answer) the bar follows the tokens of
    // a decode answer, so it moves during a run instead of sitting at one value.
    m_tick = new QTimer(this);
    m_tick->setInterval(100);
    connect(m_tick, &QTimer::timeout, this, [this] {
        if (!m_thread || !m_polls || m_answerTokens <= 0) return;
        const double within = std::min(0.95, static_cast<double>(m_polls->load()) / m_answerTokens);
        const double f = std::min(1.0, m_fraction + within * m_answerShare);
        m_bar->setValue(std::max(m_bar->value(), static_cast<int>(f * 1000.0 + 0.5)));
    });

    connect(m_start, &QPushButton::clicked, this, [this] { start(); });
    connect(m_cancel, &QPushButton::clicked, this, &BenchmarkDialog::cancel);
    connect(close, &QPushButton::clicked, this, &BenchmarkDialog::reject);
    connect(m_export, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Export benchmark report"), QStringLiteral("bench.json"), tr("JSON (*.json)"));
        if (path.isEmpty()) return;
        QString error;
        if (!exportReport(path, &error))
            QMessageBox::warning(this, tr("Export"), error);
        else
            m_status->setText(tr("Report written to %1").arg(path));
    });
}

void BenchmarkDialog::fillProfiles() {
    m_a->clear();
    m_b->clear();
    for (const Profile& p : m_profiles->profiles()) {
        m_a->addItem(p.name);
        m_b->addItem(p.name);
    }
    const QString active = m_profiles->activeName();
    m_a->setCurrentText(active);
    // B: the first other profile (Stock vs Optimized out of the box).
    for (const Profile& p : m_profiles->profiles()) {
        if (p.name != active) {
            m_b->setCurrentText(p.name);
            break;
        }
    }
}

BenchmarkRequest BenchmarkDialog::request() const {
    BenchmarkRequest r;
    r.profileA = m_a->currentText();
    r.profileB = m_b->currentText();
    r.workloads.clear();
    if (m_decode->isChecked()) r.workloads << QStringLiteral("decode");
    if (m_prompt->isChecked()) r.workloads << QStringLiteral("prompt");
    if (m_replay->isChecked()) r.workloads << QStringLiteral("replay");
    r.decodeTokens = m_tokens->value();
    r.promptSizes.clear();
    for (const QString& part : m_sizes->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const int n = part.trimmed().toInt(&ok);
        if (ok && n > 0) r.promptSizes << n;
    }
    r.replayDir = m_replayDir->text().trimmed();
    r.maxTokens = m_maxTokens->value();
    r.pairs = m_pairs->value();
    r.probes = m_probes->isChecked();
    return r;
}

void BenchmarkDialog::setRequest(const BenchmarkRequest& r) {
    if (!r.profileA.isEmpty()) m_a->setCurrentText(r.profileA);
    if (!r.profileB.isEmpty()) m_b->setCurrentText(r.profileB);
    m_decode->setChecked(r.workloads.contains(QStringLiteral("decode")));
    m_prompt->setChecked(r.workloads.contains(QStringLiteral("prompt")));
    m_replay->setChecked(r.workloads.contains(QStringLiteral("replay")));
    m_tokens->setValue(r.decodeTokens);
    QStringList sizes;
    for (int s : r.promptSizes) sizes << QString::number(s);
    m_sizes->setText(sizes.join(QLatin1Char(',')));
    m_replayDir->setText(r.replayDir);
    m_maxTokens->setValue(r.maxTokens);
    m_pairs->setValue(r.pairs);
    m_probes->setChecked(r.probes);
}

void BenchmarkDialog::saveForm() const {
    const BenchmarkRequest r = request();
    auto s = appSettings();
    s->beginGroup(QStringLiteral("benchmark"));
    s->setValue(QStringLiteral("profileA"), r.profileA);
    s->setValue(QStringLiteral("profileB"), r.profileB);
    s->setValue(QStringLiteral("workloads"), r.workloads);
    s->setValue(QStringLiteral("decodeTokens"), r.decodeTokens);
    s->setValue(QStringLiteral("promptSizes"), m_sizes->text());
    s->setValue(QStringLiteral("replayDir"), r.replayDir);
    s->setValue(QStringLiteral("maxTokens"), r.maxTokens);
    s->setValue(QStringLiteral("pairs"), r.pairs);
    s->setValue(QStringLiteral("probes"), r.probes);
    s->endGroup();
}

void BenchmarkDialog::restoreForm() {
    auto s = appSettings();
    s->beginGroup(QStringLiteral("benchmark"));
    if (!s->contains(QStringLiteral("workloads")))
        return;  // never run: the defaults and the profiles' preselection
    BenchmarkRequest r = request();
    // A profile deleted since then keeps the preselection.
    for (auto [key, field] : {std::pair{QStringLiteral("profileA"), &r.profileA},
                              std::pair{QStringLiteral("profileB"), &r.profileB}}) {
        const QString name = s->value(key).toString();
        if (m_profiles->find(name)) *field = name;
    }
    r.workloads = s->value(QStringLiteral("workloads")).toStringList();
    r.decodeTokens = s->value(QStringLiteral("decodeTokens"), r.decodeTokens).toInt();
    r.promptSizes.clear();
    for (const QString& part : s->value(QStringLiteral("promptSizes"))
                                   .toString()
                                   .split(QLatin1Char(','), Qt::SkipEmptyParts))
        if (const int n = part.trimmed().toInt(); n > 0) r.promptSizes << n;
    r.replayDir = s->value(QStringLiteral("replayDir")).toString();
    r.maxTokens = s->value(QStringLiteral("maxTokens"), 0).toInt();
    r.pairs = s->value(QStringLiteral("pairs"), r.pairs).toInt();
    r.probes = s->value(QStringLiteral("probes"), false).toBool();
    s->endGroup();
    setRequest(r);
}

void BenchmarkDialog::setRunning(bool running) {
    for (QWidget* w :
         std::initializer_list<QWidget*>{m_a, m_b, m_decode, m_prompt, m_replay, m_tokens, m_sizes,
                                         m_replayDir, m_maxTokens, m_pairs, m_probes, m_start})
        w->setEnabled(!running);
    m_cancel->setEnabled(running);
    m_export->setEnabled(!running && !m_report.is_null());
}

bool BenchmarkDialog::start() {
    if (m_thread) {
        m_error = tr("A benchmark is already running.");
        m_status->setText(m_error);
        return false;
    }
    auto refuse = [this](const QString& why) {
        m_error = why;
        m_status->setText(tr("<b>Not started:</b> %1").arg(why.toHtmlEscaped()));
        return false;
    };
    if (m_engine && m_engine->busy())
        return refuse(
            tr("A reply is being generated. Stop it (Esc) or wait until it is complete, "
               "then run the benchmark."));
    if (m_engine && m_engine->state() == EngineHost::State::loading)
        return refuse(tr("A model is loading. Run the benchmark when it is ready."));
    bench::BenchOptions options;
    QString error;
    const QString chatModel = m_engine && !m_engine->isDemo() ? m_engine->modelDir() : QString();
    if (!benchOptionsFor(request(), *m_profiles, m_modelOverride, &options, &error, chatModel))
        return refuse(error);
    saveForm();

    // The chat engine lets go of its model (RAM, VRAM) for the duration.
    if (m_engine && m_engine->state() != EngineHost::State::empty && !m_engine->unloadModel())
        return refuse(tr("The chat engine could not be paused."));

    m_error.clear();
    m_report = bench::Json();
    m_table->setRowCount(0);
    m_chart->removeAllSeries();
    for (QAbstractAxis* axis : m_chart->axes()) m_chart->removeAxis(axis);
    m_summary->clear();
    m_bar->setValue(0);
    m_status->setText(tr("Running %1 pairs of %2 vs %3 ...")
                          .arg(options.repeat)
                          .arg(QString::fromStdString(options.profiles[0].name),
                               QString::fromStdString(options.profiles[1].name)));
    m_cancelFlag = std::make_shared<std::atomic<bool>>(false);
    m_polls = std::make_shared<std::atomic<int>>(0);
    const auto flag = m_cancelFlag;
    const auto polls = m_polls;
    options.cancel = [flag, polls] {
        polls->fetch_add(1);
        return flag->load();
    };
    // The forward pass watches the flag too: Cancel stops a prompt pass in flight.
    options.cancel_flag = flag.get();
    {
        // One answer's share of the whole run and the tokens of a decode answer (the bar's
        // movement between reports; prompt and replay answers move it when they end).
        std::size_t answers = 0;
        for (const std::string& w : options.workloads)
            answers += w == "decode" ? 1 : w == "prompt" ? options.prompt_sizes.size() : 1;
        const int runs = options.repeat * static_cast<int>(options.profiles.size());
        m_answerShare =
            1.0 / static_cast<double>(std::max<std::size_t>(answers, 1) * std::max(runs, 1));
        m_answerTokens = !options.workloads.empty() && options.workloads.front() == "decode"
                             ? options.decode_tokens
                             : 0;
        m_fraction = 0;
    }
    options.on_progress = [this, polls](double fraction, const std::string& what) {
        polls->store(0);
        // Worker thread: queued to the GUI thread (dropped if the dialog is gone).
        const QString text = QString::fromStdString(what);
        QMetaObject::invokeMethod(
            this,
            [this, fraction, text] {
                m_fraction = fraction;
                m_bar->setValue(static_cast<int>(fraction * 1000.0 + 0.5));
                if (m_thread && !m_cancelFlag->load()) m_status->setText(text);
                emit progressed(fraction);
            },
            Qt::QueuedConnection);
    };

    struct Outcome {
        bench::Json report;
        QString error;
        bool cancelled = false;
    };
    auto outcome = std::make_shared<Outcome>();
    m_thread = QThread::create([options = std::move(options), outcome] {
        try {
            outcome->report = bench::run_bench(options);
        } catch (const bench::Cancelled&) {
            outcome->cancelled = true;
        } catch (const std::exception& e) {
            outcome->error = QString::fromUtf8(e.what());
        }
    });
    m_thread->setObjectName(QStringLiteral("neural-bench"));
    connect(m_thread, &QThread::finished, this, [this, outcome] {
        m_thread->deleteLater();
        m_thread = nullptr;
        if (outcome->cancelled) {
            onDone(false, true, tr("Cancelled; no report."));
        } else if (!outcome->error.isEmpty()) {
            spdlog::error("benchmark failed: {}", outcome->error.toStdString());
            onDone(false, false, outcome->error);
        } else {
            m_report = std::move(outcome->report);
            showReport();
            onDone(true, false, m_summary->text());
        }
    });
    setRunning(true);
    spdlog::info("benchmark started");
    m_tick->start();
    m_thread->start();
    emit started();
    return true;
}

void BenchmarkDialog::cancel() {
    if (!m_thread) return;
    m_cancelFlag->store(true);
    m_status->setText(tr("Cancelling ..."));
    m_cancel->setEnabled(false);
}

void BenchmarkDialog::onDone(bool ok, bool cancelled, const QString& message) {
    m_tick->stop();
    setRunning(false);
    const QString again = m_reload ? tr(" The chat model is loading again.") : QString();
    if (cancelled)
        m_status->setText(tr("Cancelled.") + again);
    else if (!ok)
        m_status->setText(tr("<b>Failed:</b> %1").arg(message.toHtmlEscaped()) + again);
    else
        m_status->setText(tr("Done.") + again);
    spdlog::info("benchmark {}", ok ? "done" : cancelled ? "cancelled" : "failed");
    if (m_reload) m_reload();
    emit finished(ok, cancelled, message);
    if (m_closeWhenDone) {
        m_closeWhenDone = false;
        QDialog::reject();
    }
}

void BenchmarkDialog::reject() {
    if (m_thread) {
        m_closeWhenDone = true;
        cancel();
        return;
    }
    QDialog::reject();
}

void BenchmarkDialog::showReport() {
    const bench::Json& pairs = m_report.value("pairs", bench::Json::array());
    const bench::Json& runs = m_report.value("runs", bench::Json::array());
    // The run of pair p by profile 0 (A) or 1 (B): the figures beside the ratios.
    auto figures = [&](int pair, int profile, const std::string& workload) -> bench::Json {
        for (const auto& run : runs)
            if (run.value("pair", -1) == pair && run.value("profile_index", -1) == profile &&
                run["workloads"].contains(workload))
                return run["workloads"][workload];
        return bench::Json::object();
    };
    for (const auto& pr : pairs) {
        for (const auto& [name, r] : pr["ratios"].items()) {
            const int row = m_table->rowCount();
            m_table->insertRow(row);
            const int pair = pr["pair"].get<int>();
            const bench::Json fa = figures(pair, 0, name), fb = figures(pair, 1, name);
            const QStringList cells = {QString::number(pair),
                                       QString::fromStdString(pr["order"].get<std::string>()),
                                       workloadLabel(name),
                                       ratioText(r["decode_tok_s_b_over_a"]),
                                       ratioText(r["prompt_seconds_b_over_a"]),
                                       numberText(fa.value("decode_tok_s", bench::Json()), 2),
                                       numberText(fb.value("decode_tok_s", bench::Json()), 2),
                                       numberText(fa.value("prompt_seconds", bench::Json()), 3),
                                       numberText(fb.value("prompt_seconds", bench::Json()), 3)};
            for (int c = 0; c < cells.size(); ++c)
                m_table->setItem(row, c, new QTableWidgetItem(cells[c]));
        }
    }

    // The box plot: per workload a box for each ratio that has numbers, the decode rates on
    // the left axis and the prompt times on the right one (on one axis a decode ratio of 96
    // flattened a prompt ratio of 0.044 into a line).
    auto* rates = new QBoxPlotSeries;
    rates->setName(tr("decode tok/s B/A"));
    auto* times = new QBoxPlotSeries;
    times->setName(tr("prompt time B/A"));
    QStringList lines;
    const bench::Json& summary = m_report.value("ratio_summary", bench::Json::object());
    const bench::Json& perProfile = m_report.value("summary", bench::Json::object());
    const bench::Json& profs = m_report.value("profiles", bench::Json::array());
    const std::string nameA =
        profs.size() > 0 ? profs[0].value("name", std::string()) : std::string();
    const std::string nameB =
        profs.size() > 1 ? profs[1].value("name", std::string()) : std::string();
    auto overall = [&](const std::string& profile, const std::string& workload, const char* key) {
        if (!perProfile.contains(profile) || !perProfile[profile].contains(workload))
            return bench::Json();
        return perProfile[profile][workload].value(key, bench::Json());
    };
    auto has = [](const bench::Json& w, const char* key) {
        return w.contains(key) && w[key]["n"].get<int>() > 0;
    };
    // A box sits at its index in its series: the workloads with a decode rate (which all have
    // their prompt time too) come first, so both series' boxes line up under their workload's
    // category.
    std::vector<std::string> order;
    for (const bool withRate : {true, false})
        for (const auto& [name, w] : summary.items())
            if (has(w, "decode_tok_s_b_over_a") == withRate) order.push_back(name);
    QStringList categories;
    double range[2][2] = {{1.0, 1.0}, {1.0, 1.0}};  // [rate/time][lo/hi]
    for (const std::string& name : order) {
        const bench::Json& w = summary[name];
        if (!has(w, "decode_tok_s_b_over_a") && !has(w, "prompt_seconds_b_over_a")) continue;
        categories << workloadLabel(name);
        // "decode: tok/s", "prompt 3000: time": the workload's name once, then the measure.
        const bool promptWorkload = name.rfind("prompt", 0) == 0;
        const std::pair<const char*, QString> metrics[] = {
            {"decode_tok_s_b_over_a", tr("tok/s")},
            {"prompt_seconds_b_over_a", promptWorkload ? tr("time") : tr("prompt time")}};
        for (const auto& [key, label] : metrics) {
            if (!has(w, key)) continue;
            // A prompt-only workload has no decode rate; a decode workload's prompt time is
            // shown too (the fixed chat prompt).
            const bench::Json& st = w[key];
            const bool rate = std::string(key) == "decode_tok_s_b_over_a";
            auto* set = new QBoxSet(QStringLiteral("%1, %2").arg(workloadLabel(name), label));
            set->setValue(QBoxSet::LowerExtreme, st["min"].get<double>());
            set->setValue(QBoxSet::LowerQuartile, st["q1"].get<double>());
            set->setValue(QBoxSet::Median, st["median"].get<double>());
            set->setValue(QBoxSet::UpperQuartile, st["q3"].get<double>());
            set->setValue(QBoxSet::UpperExtreme, st["max"].get<double>());
            (rate ? rates : times)->append(set);
            double* r = range[rate ? 0 : 1];
            r[0] = std::min(r[0], st["min"].get<double>());
            r[1] = std::max(r[1], st["max"].get<double>());
            const char* figure = rate ? "decode_tok_s" : "prompt_seconds_mean";
            const QString unit = rate ? tr("tok/s") : tr("s");
            const QString both =
                tr(" - A %1 %3, B %2 %3")
                    .arg(numberText(overall(nameA, name, figure), rate ? 2 : 3),
                         numberText(overall(nameB, name, figure), rate ? 2 : 3), unit);
            lines << tr("%1, %2 B/A: median %3 (IQR %4-%5, range %6-%7, %8 pairs)%9")
                         .arg(workloadLabel(name), label)
                         .arg(st["median"].get<double>(), 0, 'f', 3)
                         .arg(st["q1"].get<double>(), 0, 'f', 3)
                         .arg(st["q3"].get<double>(), 0, 'f', 3)
                         .arg(st["min"].get<double>(), 0, 'f', 3)
                         .arg(st["max"].get<double>(), 0, 'f', 3)
                         .arg(st["n"].get<int>())
                         .arg(both);
        }
    }
    auto* x = new QBarCategoryAxis;
    x->append(categories);
    m_chart->addAxis(x, Qt::AlignBottom);
    for (QBoxPlotSeries* series : {rates, times}) {
        if (series->count() == 0) {
            delete series;
            continue;
        }
        const bool rate = series == rates;
        const double lo = range[rate ? 0 : 1][0], hi = range[rate ? 0 : 1][1];
        auto* y = new QValueAxis;
        const double pad = std::max(0.02, (hi - lo) * 0.1);
        y->setRange(std::max(0.0, lo - pad), hi + pad);
        y->setTitleText(rate ? tr("decode tok/s B / A") : tr("prompt time B / A"));
        m_chart->addSeries(series);
        m_chart->addAxis(y, rate ? Qt::AlignLeft : Qt::AlignRight);
        series->attachAxis(x);
        series->attachAxis(y);
    }
    lines << tr(
        "Decode tok/s B/A above 1: B is faster; prompt time B/A below 1: B is faster. "
        "Ratios from one machine state; repeat on a quiet machine before drawing "
        "conclusions.");
    m_summary->setText(lines.join(QLatin1Char('\n')));
}

bool BenchmarkDialog::exportReport(const QString& path, QString* error) const {
    if (m_report.is_null()) {
        if (error) *error = tr("No report yet: run the benchmark first.");
        return false;
    }
    try {
        write_file_atomic(path.toStdString(), m_report.dump(2) + "\n");
    } catch (const std::exception& e) {
        if (error) *error = tr("Cannot write %1: %2").arg(path, QString::fromUtf8(e.what()));
        return false;
    }
    return true;
}

}  // namespace neural::gui
