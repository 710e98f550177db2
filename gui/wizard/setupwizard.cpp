#include "wizard/setupwizard.h"

#include <QButtonGroup>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QScrollArea>
#include <QSpinBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QRegularExpression>
#include <QStorageInfo>
#include <QTimer>
#include <QVBoxLayout>
#include <QWizardPage>

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/paths.h"
#include "common/wheelguard.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/weights.h"

namespace neural::gui {

namespace {
QWidget* pathRow(QWidget* parent, QLineEdit* edit, std::function<void()> browse) {
    auto* row = new QWidget(parent);
    auto* h = new QHBoxLayout(row);
    h->setContentsMargins(0, 0, 0, 0);
    auto* b = new QPushButton(QObject::tr("Browse..."), row);
    b->setAccessibleName(QObject::tr("Browse for %1").arg(edit->accessibleName()));
    h->addWidget(edit, 1);
    h->addWidget(b);
    QObject::connect(b, &QPushButton::clicked, row, std::move(browse));
    return row;
}

// A word-wrapped label a screen reader names (none when `accessibleName` is empty);
// `selectable`: its text can be selected and copied (validation results, warnings).
QLabel* wrappedLabel(QWidget* parent, const QString& accessibleName, bool selectable = false,
                     const QString& text = {}) {
    auto* label = new QLabel(text, parent);
    label->setWordWrap(true);
    if (!accessibleName.isEmpty()) label->setAccessibleName(accessibleName);
    if (selectable) label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return label;
}

// A size in GiB as the fit page edits it (0 to 64 TiB, two decimals).
QDoubleSpinBox* gibBox(QWidget* parent) {
    auto* box = new QDoubleSpinBox(parent);
    box->setRange(0, 65536);
    box->setDecimals(2);
    box->setSuffix(QObject::tr(" GiB"));
    return box;
}

// The planner's lines count in GB (1e9); the wizard speaks GiB / MiB throughout (formatBytes),
// so every "12.3 GB" in them is rewritten in those units.
QString inBinaryUnits(const QString& line) {
    static const QRegularExpression gb(QStringLiteral(R"((\d+(?:\.\d+)?) GB\b)"));
    QString out;
    qsizetype last = 0;
    for (auto it = gb.globalMatch(line); it.hasNext();) {
        const QRegularExpressionMatch m = it.next();
        out += line.mid(last, m.capturedStart() - last);
        out += formatBytes(static_cast<std::uint64_t>(m.captured(1).toDouble() * 1e9));
        last = m.capturedEnd();
    }
    return out + line.mid(last);
}

// Sizes that differ by less than 1% read as the same on the page.
bool aboutTheSame(std::uint64_t a, std::uint64_t b) {
    const double hi = static_cast<double>(std::max(a, b));
    return hi == 0 || std::abs(static_cast<double>(a) - static_cast<double>(b)) / hi < 0.01;
}
}  // namespace

QString modelName(const QString& checkpoint) {
    const QFileInfo info(checkpoint);
    if (info.isFile()) {
        // "gpt-oss-20b-MXFP4.gguf", "gpt-oss-120b-MXFP4-00001-of-00002.gguf": the name before
        // the split's part number.
        static const QRegularExpression part(QStringLiteral(R"(-\d{5}-of-\d{5}$)"));
        QString base = info.completeBaseName();
        base.remove(part);
        // A generic file name ("model.gguf", an Ollama blob "sha256-...") says nothing: the
        // folder it lies in does.
        if (base.isEmpty() || base.compare(QLatin1String("model"), Qt::CaseInsensitive) == 0 ||
            base.startsWith(QLatin1String("sha256")))
            return info.absoluteDir().dirName();
        return base;
    }
    // A Hugging Face cache snapshot (models--openai--gpt-oss-20b/snapshots/<commit>): the
    // repository's name.
    QDir dir(info.absoluteFilePath());
    static const QRegularExpression commit(QStringLiteral("^[0-9a-f]{40}$"));
    if (commit.match(dir.dirName()).hasMatch()) {
        QDir up = dir;
        if (up.cdUp() && up.dirName() == QLatin1String("snapshots") && up.cdUp() &&
            up.dirName().startsWith(QLatin1String("models--")))
            return up.dirName().section(QStringLiteral("--"), -1);
    }
    const QString name = dir.dirName();
    return name.isEmpty() ? QStringLiteral("model") : name;
}

namespace {
std::function<DiskSpace(const QString&)>& diskSpaceOverride() {
    static std::function<DiskSpace(const QString&)> f;
    return f;
}
}  // namespace

DiskSpace SetupWizard::diskSpace(const QString& folder) {
    if (diskSpaceOverride()) return diskSpaceOverride()(folder);
    DiskSpace d;
    const QStorageInfo disk(folder);
    d.root = disk.rootPath();
    d.readOnly = disk.isValid() && disk.isReadOnly();
    // Unknown where the system does not say (a chroot without mount entries, some network
    // drives): QStorageInfo is then invalid or reports no size at all.
    const qint64 avail = disk.bytesAvailable();
    d.known = disk.isValid() && disk.isReady() && avail >= 0 && disk.bytesTotal() > 0;
    d.available = d.known ? static_cast<std::uint64_t>(avail) : 0;
    return d;
}

void SetupWizard::setDiskSpaceForTesting(std::function<DiskSpace(const QString&)> f) {
    diskSpaceOverride() = std::move(f);
}

// ---- the page builder -------------------------------------------------------------------

// What every page shares: its title and subtitle, a column of widgets (kept at the top by a
// stretch, or filling the page), the wizard whose state it reads and writes, and for the repack
// and verify pages the progress of the wizard's StoreJob. A page adds only its own widgets.
class WizardPage : public QWizardPage {
protected:
    enum class Column { top, fill };
    WizardPage(SetupWizard* w, const QString& title, const QString& subTitle,
               Column column = Column::top)
        : m_w(w), m_column(new QVBoxLayout(this)) {
        setTitle(title);
        setSubTitle(subTitle);
        if (column == Column::top) m_column->addStretch(1);
    }
    // Adds a widget (or a layout) at the end of the column, above the stretch.
    template <typename Widget>
    Widget* add(Widget* widget, int stretch = 0) {
        m_column->insertWidget(insertAt(), widget, stretch);
        return widget;
    }
    void addLayout(QLayout* layout) { m_column->insertLayout(insertAt(), layout); }
    QLabel* addNote(const QString& accessibleName, bool selectable = false) {
        return add(wrappedLabel(this, accessibleName, selectable));
    }
    // A path field (named `accessibleName` for screen readers) with its "Browse..." button.
    QLineEdit* addPath(const QString& accessibleName, std::function<void()> browse) {
        auto* edit = new QLineEdit(this);
        edit->setAccessibleName(accessibleName);
        add(pathRow(this, edit, std::move(browse)));
        return edit;
    }
    // The StoreJob's progress bar and status line; they follow the job while this page's run
    // of it is active (startJob), and jobFinished() answers its end.
    void addJobProgress(const QString& bar, const QString& status) {
        m_bar = add(new QProgressBar(this));
        m_bar->setRange(0, 1000);
        m_bar->setAccessibleName(bar);
        m_status = addNote(status);
        connect(m_w->m_job, &StoreJob::progress, this, [this](const StoreProgress& p) {
            if (!m_jobActive) return;
            m_bar->setValue(static_cast<int>(p.fraction * 1000));
            m_status->setText(p.text);
        });
        connect(m_w->m_job, &StoreJob::finished, this,
                [this](bool ok, bool cancelled, const QString& message) {
                    if (!m_jobActive) return;
                    m_jobActive = false;
                    jobFinished(ok, cancelled, message);
                    emit completeChanged();
                });
    }
    virtual void jobFinished(bool, bool, const QString&) {}

    SetupWizard* m_w;
    QProgressBar* m_bar = nullptr;
    QLabel* m_status = nullptr;
    bool m_jobActive = false;

private:
    // Before the stretch of a Column::top page, else at the end.
    int insertAt() const {
        const int n = m_column->count();
        return n > 0 && m_column->itemAt(n - 1)->spacerItem() ? n - 1 : n;
    }
    QVBoxLayout* m_column;
};

// ---- 1: checkpoint folder + validation ----------------------------------------------------

class FolderPageWidget : public WizardPage {
public:
    explicit FolderPageWidget(SetupWizard* w)
        : WizardPage(w, tr("Checkpoint folder"),
                     tr("The folder of a gpt-oss checkpoint from Hugging Face (config.json, "
                        "*.safetensors, tokenizer.json), or a gpt-oss GGUF file as LM Studio, "
                        "Ollama and llama.cpp store it (of a split GGUF, any part).")) {
        m_edit = addPath(tr("Checkpoint folder"), [this] {
            const QString d =
                QFileDialog::getExistingDirectory(this, tr("Checkpoint folder"), m_edit->text());
            if (!d.isEmpty()) m_edit->setText(d);
        });
        QWidget* row = m_edit->parentWidget();
        auto* gguf = new QPushButton(tr("GGUF file..."), row);
        gguf->setAccessibleName(tr("Browse for a GGUF file"));
        row->layout()->addWidget(gguf);
        connect(gguf, &QPushButton::clicked, this, [this] {
            const QString f = QFileDialog::getOpenFileName(this, tr("GGUF file"), m_edit->text(),
                                                           tr("GGUF models (*.gguf)"));
            if (!f.isEmpty()) m_edit->setText(f);
        });
        m_status = addNote(tr("Validation result"), true);
        m_debounce.setSingleShot(true);
        m_debounce.setInterval(300);
        connect(&m_debounce, &QTimer::timeout, m_w, &SetupWizard::validate);
        connect(m_edit, &QLineEdit::textChanged, this, [this] {
            m_status->setText(tr("Checking ..."));
            m_debounce.start();
            emit completeChanged();
        });
        connect(m_w, &SetupWizard::validated, this, [this](const CheckpointReport& r) {
            if (!r.ok) {
                m_status->setText(tr("<b>Not usable:</b> %1").arg(r.error.toHtmlEscaped()));
            } else {
                m_status->setText(tr("<b>Valid checkpoint.</b><br>%1<br>Files: %2<br>%3")
                                      .arg(r.shape.toHtmlEscaped(), formatBytes(r.checkpointBytes),
                                           r.fitText.toHtmlEscaped().replace(
                                               QLatin1Char('\n'), QStringLiteral("<br>"))));
            }
            emit completeChanged();
        });
    }
    QString folder() const { return m_edit->text().trimmed(); }
    void setFolder(const QString& d) { m_edit->setText(d); }
    bool isComplete() const override { return m_w->m_report.ok && m_w->m_validatedDir == folder(); }

private:
    QLineEdit* m_edit;
    QTimer m_debounce;
};

// ---- 2: fit plan --------------------------------------------------------------------------

namespace {
// The plan's reason line for a value (reasons start with the value's name).
QString reasonFor(const FitPlan& plan, const QStringList& prefixes, const QString& contains = {}) {
    for (const std::string& r : plan.reasons) {
        const QString line = QString::fromStdString(r);
        for (const QString& p : prefixes)
            if (line.startsWith(p) && (contains.isEmpty() || line.contains(contains))) return line;
    }
    return {};
}
}  // namespace

class FitPageWidget : public WizardPage {
public:
    explicit FitPageWidget(SetupWizard* w)
        : WizardPage(w, tr("Fit to this PC"),
                     tr("How this model will run here. The settings behind it are under "
                        "\"Show details\"."),
                     Column::fill) {
        // One plain sentence first (where it runs, the memory it takes); the planner's values
        // and reasons, all editable, behind "Show details".
        m_headline =
            add(wrappedLabel(this, tr("Fit summary"), false, tr("Looking at this PC ...")));
        QFont big = m_headline->font();
        big.setPointSizeF(big.pointSizeF() * 1.15);
        m_headline->setFont(big);
        m_detailsButton = new QPushButton(tr("Show details"), this);
        m_detailsButton->setCheckable(true);
        m_detailsButton->setAccessibleName(tr("Show the plan's details"));
        auto* detailsRow = new QHBoxLayout;
        detailsRow->addWidget(m_detailsButton);
        detailsRow->addStretch(1);
        addLayout(detailsRow);
        auto* scroll = new QScrollArea(this);
        scroll->setWidgetResizable(true);
        scroll->setFrameShape(QFrame::NoFrame);
        auto* inner = new QWidget(scroll);
        auto* v = new QVBoxLayout(inner);
        m_machineLabel = wrappedLabel(inner, tr("This PC"), false, tr("Detecting this PC ..."));
        v->addWidget(m_machineLabel);

        auto* caps = new QHBoxLayout;
        m_vramCap = gibBox(inner);
        m_vramCap->setAccessibleName(tr("Plan for at most this VRAM"));
        m_ramCap = gibBox(inner);
        m_ramCap->setAccessibleName(tr("Plan for at most this RAM"));
        for (QDoubleSpinBox* cap : {m_vramCap, m_ramCap}) cap->setSpecialValueText(tr("detected"));
        caps->addWidget(new QLabel(tr("Emulate a smaller PC: VRAM"), inner));
        caps->addWidget(m_vramCap);
        caps->addWidget(new QLabel(tr("RAM"), inner));
        caps->addWidget(m_ramCap);
        caps->addStretch(1);
        v->addLayout(caps);

        m_warnings = wrappedLabel(inner, tr("Fit warnings"), true);
        v->addWidget(m_warnings);

        auto* form = new QFormLayout;
        auto row = [&](const QString& label, QWidget* editor, QLabel*& reason) {
            editor->setAccessibleName(label);
            auto* box = new QWidget(inner);
            auto* bv = new QVBoxLayout(box);
            bv->setContentsMargins(0, 0, 0, 0);
            bv->setSpacing(1);
            bv->addWidget(editor);
            reason = wrappedLabel(box, tr("Reason: %1").arg(label));
            QFont f = reason->font();
            f.setPointSizeF(f.pointSizeF() * 0.9);
            reason->setFont(f);
            bv->addWidget(reason);
            form->addRow(label + QLatin1Char(':'), box);
        };
        m_backend = new QComboBox(inner);
        m_backend->addItems(
            {QStringLiteral("cpu"), QStringLiteral("cuda"), QStringLiteral("auto")});
        row(tr("Backend"), m_backend, m_backendWhy);
        m_vram = gibBox(inner);
        row(tr("VRAM budget"), m_vram, m_vramWhy);
        m_slots = new QSpinBox(inner);
        m_slots->setRange(-1, 1 << 24);
        row(tr("Expert slots"), m_slots, m_slotsWhy);
        m_context = new QSpinBox(inner);
        m_context->setRange(0, 1 << 24);
        m_context->setSuffix(tr(" tokens"));
        row(tr("GPU context"), m_context, m_contextWhy);
        m_threads = new QSpinBox(inner);
        m_threads->setRange(0, 4096);
        row(tr("CPU threads"), m_threads, m_threadsWhy);
        m_kernel = new QComboBox(inner);
        m_kernel->addItems({QStringLiteral("auto"), QStringLiteral("avx512"),
                            QStringLiteral("avx2"), QStringLiteral("scalar"),
                            QStringLiteral("reference")});
        row(tr("Expert kernel"), m_kernel, m_kernelWhy);
        m_persistent = new QCheckBox(tr("Persistent CPU team"), inner);
        row(tr("CPU team"), m_persistent, m_persistentWhy);
        v->addLayout(form);
        m_other = wrappedLabel(inner, tr("Other plan notes"), true);
        v->addWidget(m_other);
        v->addStretch(1);
        scroll->setWidget(inner);
        add(scroll, 1);
        m_details = scroll;
        m_details->hide();
        connect(m_detailsButton, &QPushButton::toggled, this, [this](bool on) {
            m_details->setVisible(on);
            m_detailsButton->setText(on ? tr("Hide details") : tr("Show details"));
        });

        connect(m_slots, qOverload<int>(&QSpinBox::valueChanged), this, [this] { showSlotsGib(); });
        for (QDoubleSpinBox* cap : {m_vramCap, m_ramCap})
            connect(cap, qOverload<double>(&QDoubleSpinBox::valueChanged), this,
                    [this] { replan(); });
    }
    ~FitPageWidget() override {
        if (m_detector) {
            m_detector->wait();
            delete m_detector;
        }
    }

    void initializePage() override {
        m_config.reset();
        try {
            const std::string path = m_w->m_validatedDir.toStdString();
            m_config = is_gguf_path(path) ? checkpoint_config(Checkpoint::open(path))
                                          : ModelConfig::load(path + "/config.json");
        } catch (const std::exception& e) {
            m_warnings->setText(
                tr("<b>Cannot plan:</b> %1").arg(QString::fromUtf8(e.what()).toHtmlEscaped()));
        }
        if (m_w->m_haveMachine) {
            replan();
            return;
        }
        if (m_detector) return;  // still detecting; replan() follows
        // GPU detection initialises the CUDA driver (can take a second): off the GUI thread.
        auto result = std::make_shared<MachineInfo>();
        // With the bandwidth probes (about half a second): threads, pinning and streaming.
        m_detector = QThread::create([result] {
            *result = detect_machine();
            probe_bandwidth(*result);
        });
        connect(m_detector, &QThread::finished, this, [this, result] {
            m_detector->deleteLater();
            m_detector = nullptr;
            if (!m_w->m_haveMachine) {  // a test may have set one meanwhile
                m_w->m_machine = *result;
                m_w->m_haveMachine = true;
            }
            replan();
        });
        m_detector->start();
    }
    bool isComplete() const override { return m_w->m_havePlan; }
    bool validatePage() override {
        SetupWizard::FitChoice& c = m_w->m_fit;
        c.backend = m_backend->currentText();
        c.vramBudgetGib = m_vram->value();
        c.poolSlots = m_slots->value();
        c.poolGib = slotsGib();
        c.context = m_context->value();
        c.threads = m_threads->value();
        c.kernel = m_kernel->currentText();
        c.kernelPersistent = m_persistent->isChecked();
        c.kvCheckpointsGib = m_w->m_plan.kv_checkpoints_gib;
        return true;
    }

    void replan() {
        if (!m_config || !m_w->m_haveMachine) return;
        const MachineInfo& m = m_w->m_machine;
        auto gib = [](std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024 * 1024); };
        m_machineLabel->setText(
            tr("This PC: %1 logical CPUs (%2), RAM %3 GiB total / %4 GiB available, GPU: %5")
                .arg(m.cpus)
                .arg(m.avx512 ? QStringLiteral("AVX-512")
                     : m.avx2 ? QStringLiteral("AVX2")
                              : tr("no AVX2"))
                .arg(gib(m.ram_total), 0, 'f', 1)
                .arg(gib(m.ram_available), 0, 'f', 1)
                .arg(m.gpu ? tr("%1 (%2 GiB free of %3)")
                                 .arg(QString::fromStdString(m.gpu->name))
                                 .arg(gib(m.gpu->free_bytes), 0, 'f', 1)
                                 .arg(gib(m.gpu->total_bytes), 0, 'f', 1)
                           : tr("none (%1)").arg(QString::fromStdString(m.gpu_why))));
        FitRequest req;
        req.config = *m_config;
        req.vram_budget_gib = m_vramCap->value();
        req.ram_budget_gib = m_ramCap->value();
        const FitPlan plan = plan_fit(req, m);
        m_w->m_plan = plan;
        m_w->m_havePlan = true;
        m_slotBytes = expert_slot_bytes(*m_config);

        m_backend->setCurrentText(QString::fromStdString(plan.backend));
        m_vram->setValue(plan.vram_budget_gib);
        m_slots->setValue(plan.backend == "cuda" ? static_cast<int>(plan.pool_slots) : -1);
        m_context->setValue(plan.backend == "cuda" ? static_cast<int>(plan.context) : 0);
        m_threads->setValue(plan.threads);
        // Only the kernels this CPU runs (the planner picks the widest of them).
        QStringList kernels{QStringLiteral("auto")};
        if (m.avx512) kernels << QStringLiteral("avx512");
        if (m.avx2) kernels << QStringLiteral("avx2");
        kernels << QStringLiteral("scalar") << QStringLiteral("reference");
        m_kernel->clear();
        m_kernel->addItems(kernels);
        m_kernel->setCurrentText(QString::fromStdString(plan.kernel));
        m_persistent->setChecked(plan.kernel_persistent);
        showSlotsGib();

        const QString gpuWhy = reasonFor(plan, {QStringLiteral("backend")});
        m_backendWhy->setText(gpuWhy.isEmpty() && !plan.warnings.empty()
                                  ? QString::fromStdString(plan.warnings.front())
                                  : gpuWhy);
        m_vramWhy->setText(plan.backend == "cuda" ? gpuWhy : tr("not used by the CPU backend"));
        m_slotsWhy->setText(plan.backend == "cuda"
                                ? reasonFor(plan, {QString()}, QStringLiteral(" expert slots = "))
                                : tr("not used by the CPU backend (-1: from the pool size)"));
        m_contextWhy->setText(plan.backend == "cuda"
                                  ? reasonFor(plan, {QStringLiteral("context")})
                                  : tr("not used by the CPU backend (0: the default)"));
        m_threadsWhy->setText(reasonFor(plan, {QStringLiteral("threads")}));
        m_kernelWhy->setText(
            reasonFor(plan, {QStringLiteral("kernel")}) +
            tr(" (used with an expert store; without one the reference path runs)"));
        const QString persistent = reasonFor(plan, {QStringLiteral("persistent")});
        m_persistentWhy->setText(persistent.isEmpty() ? tr("off: the CPU backend's OpenMP team")
                                                      : persistent);
        QStringList other;
        for (const std::string& r : plan.reasons) {
            const QString line = QString::fromStdString(r);
            if (line.startsWith(QLatin1String("dense core")) ||
                line.startsWith(QLatin1String("static")) ||
                line.startsWith(QLatin1String("store")) || line.startsWith(QLatin1String("RAM")) ||
                line.startsWith(QLatin1String("streams")) ||
                line.startsWith(QLatin1String("misses")))
                other << QStringLiteral("- ") + inBinaryUnits(line);
        }
        m_other->setText(other.join(QLatin1Char('\n')));

        QStringList warn;
        for (const std::string& w : plan.warnings)
            warn << inBinaryUnits(QString::fromStdString(w)).toHtmlEscaped();
        if (!plan.fits)
            m_warnings->setText(tr("<p style='color:#c0392b'><b>The model does not fit this PC as "
                                   "planned.</b><br>%1</p>")
                                    .arg(warn.join(QStringLiteral("<br>"))));
        else if (!warn.isEmpty())
            m_warnings->setText(tr("<p style='color:#b9770e'><b>Warnings:</b><br>%1</p>")
                                    .arg(warn.join(QStringLiteral("<br>"))));
        // The planner's figure keeps room for the OS and the desktop; the model's own need is
        // what depends on the checkpoint (the one RAM figure the wizard names for the plan).
        const double modelBytes = std::max(0.0, plan.ram_needed_gb - kFitRamHeadroomGB) * 1e9;
        const QString ram = formatBytes(static_cast<std::uint64_t>(modelBytes));
        const QString where =
            plan.backend == "cuda"
                ? tr("It runs on your graphics card (%1 of its memory) together with the "
                     "processor, and uses about %2 of RAM.")
                      .arg(formatBytes(static_cast<std::uint64_t>(plan.vram_budget_gib * 1024.0 *
                                                                  1024 * 1024)),
                           ram)
                : tr("It runs on the processor (%1 threads) and uses about %2 of RAM.")
                      .arg(plan.threads)
                      .arg(ram);
        m_headline->setText(
            !plan.fits ? tr("<b>This model is too big for this PC as it is.</b> %1 "
                            "\"Show details\" says what falls short and lets you change it.")
                             .arg(where)
            : warn.isEmpty() ? tr("<b>This model fits this PC.</b> %1").arg(where)
                             : tr("<b>This model fits this PC, with a warning</b> (under "
                                  "\"Show details\"). %1")
                                   .arg(where));
        if (plan.fits && warn.isEmpty()) {
            m_warnings->setText(
                tr("<p style='color:#1e8449'><b>The plan fits this PC.</b> The "
                   "model needs about %1 of RAM, besides the %2 kept free for the "
                   "system.</p>")
                    .arg(formatBytes(static_cast<std::uint64_t>(modelBytes)),
                         formatBytes(static_cast<std::uint64_t>(kFitRamHeadroomGB * 1e9))));
        }
        emit completeChanged();
    }

private:
    double slotsGib() const {
        return m_slots->value() < 0 ? -1.0
                                    : static_cast<double>(m_slots->value()) *
                                          static_cast<double>(m_slotBytes) / (1024.0 * 1024 * 1024);
    }
    void showSlotsGib() {
        m_slots->setSuffix(m_slots->value() < 0 ? QString()
                                                : tr(" slots = %1 GiB").arg(slotsGib(), 0, 'f', 2));
    }

    std::optional<ModelConfig> m_config;
    std::uint64_t m_slotBytes = 0;
    QThread* m_detector = nullptr;
    QLabel *m_machineLabel, *m_warnings, *m_other;
    QLabel* m_headline;
    QPushButton* m_detailsButton;
    QWidget* m_details;
    QDoubleSpinBox *m_vramCap, *m_ramCap, *m_vram;
    QComboBox *m_backend, *m_kernel;
    QSpinBox *m_slots, *m_context, *m_threads;
    QCheckBox* m_persistent;
    QLabel *m_backendWhy, *m_vramWhy, *m_slotsWhy, *m_contextWhy, *m_threadsWhy, *m_kernelWhy,
        *m_persistentWhy;
};

// ---- 3: store choice -------------------------------------------------------------------------

class StorePageWidget : public WizardPage {
public:
    explicit StorePageWidget(SetupWizard* w)
        : WizardPage(w, tr("Expert store"),
                     tr("A store holds the experts in one file laid out for fast reading; the "
                        "fast kernels can also read them straight from the checkpoint.")) {
        m_none = new QRadioButton(tr("No store: read the experts from the checkpoint"), this);
        m_raw = new QRadioButton(this);
        m_packed = new QRadioButton(this);
        m_existing = new QRadioButton(tr("Use an existing store"), this);
        auto* group = new QButtonGroup(this);
        for (QRadioButton* b : {m_none, m_raw, m_packed, m_existing}) {
            group->addButton(b);
            add(b);
        }
        m_path = addPath(tr("Existing store file"), [this] {
            const QString f =
                QFileDialog::getOpenFileName(this, tr("Expert store"), m_path->text());
            if (!f.isEmpty()) {
                m_path->setText(f);
                m_existing->setChecked(true);
            }
        });
        m_compare = addNote(tr("Raw or packed"));
        m_raw->setChecked(true);
        connect(group, &QButtonGroup::buttonToggled, this, [this] { emit completeChanged(); });
        connect(m_path, &QLineEdit::textChanged, this, [this] { emit completeChanged(); });
    }
    void initializePage() override {
        if (!m_w->m_storePreselected && m_w->m_havePlan) {
            // The plan's store format (raw when it fits in RAM), once; the user's choice stays.
            m_w->m_storePreselected = true;
            (m_w->m_plan.store_format == "packed" ? m_packed : m_raw)->setChecked(true);
        }
        const std::uint64_t raw = m_w->m_report.rawStoreBytes,
                            packed = m_w->m_report.packedStoreBytes;
        m_raw->setText(tr("Create a raw store (about %1)").arg(formatBytes(raw)));
        m_packed->setText(tr("Create a packed store (about %1)").arg(formatBytes(packed)));
        // A short subtitle (a long one was cut off mid-sentence by the wizard's header); the
        // comparison in the page, only where the sizes differ (they round to the same for tiny
        // models).
        setSubTitle(
            tr("A store holds the experts in one file laid out for fast reading; the "
               "optimized kernels need one."));
        m_compare->setText(
            aboutTheSame(raw, packed)
                ? tr("Raw keeps the scales as the GPU uses them; packed packs them tighter, "
                     "which saves no space worth counting for this model.")
                : tr("Raw keeps the scales as the GPU uses them; packed takes %1 instead of %2.")
                      .arg(formatBytes(packed), formatBytes(raw)));
    }
    bool isComplete() const override {
        return !m_existing->isChecked() || QFileInfo(m_path->text().trimmed()).isFile();
    }
    bool validatePage() override {
        m_w->m_kind = m_none->isChecked()     ? QStringLiteral("none")
                      : m_raw->isChecked()    ? QStringLiteral("raw")
                      : m_packed->isChecked() ? QStringLiteral("packed")
                                              : QStringLiteral("existing");
        m_w->m_existingStore = m_path->text().trimmed();
        return true;
    }
    int nextId() const override {
        if (m_none->isChecked()) return SetupWizard::DonePage;
        if (m_existing->isChecked()) return SetupWizard::VerifyPage;
        return SetupWizard::DestinationPage;
    }

private:
    QRadioButton *m_none, *m_raw, *m_packed, *m_existing;
    QLineEdit* m_path;
    QLabel* m_compare;
};

// ---- 3: destination + free space -----------------------------------------------------------

class DestinationPageWidget : public WizardPage {
public:
    explicit DestinationPageWidget(SetupWizard* w)
        : WizardPage(w, tr("Destination"),
                     tr("Where the store file goes: the app's models folder unless you choose "
                        "another. A fast SSD makes generation faster.")) {
        m_edit = addPath(tr("Store file"), [this] {
            const QString f = QFileDialog::getSaveFileName(this, tr("Store file"), m_edit->text());
            if (!f.isEmpty()) m_edit->setText(f);
        });
        m_space = addNote(tr("Free space"));
        connect(m_edit, &QLineEdit::textChanged, this, [this] {
            updateSpace();
            emit completeChanged();
        });
    }
    void initializePage() override {
        // The app's models folder (common/paths.h), in a folder named after the model: never the
        // folder the model was downloaded to, which may belong to another app.
        m_edit->setText(QDir(modelsDir())
                            .filePath(QStringLiteral("%1/experts-%2.nstore")
                                          .arg(modelName(m_w->m_validatedDir), m_w->m_kind)));
        updateSpace();
    }
    std::uint64_t needed() const {
        return m_w->m_kind == QLatin1String("packed") ? m_w->m_report.packedStoreBytes
                                                      : m_w->m_report.rawStoreBytes;
    }
    void updateSpace() {
        m_ok = false;
        const QString text = m_edit->text().trimmed();
        if (text.isEmpty()) {
            m_space->setText(tr("Choose where the store file goes."));
            return;
        }
        const QFileInfo fi(text);
        // A folder that does not exist yet is made when the page is left; the free space is
        // that of the nearest folder that does exist (the same drive).
        QDir existing = fi.absoluteDir();
        while (!existing.exists() && existing.cdUp()) {
        }
        const bool missing = !fi.absoluteDir().exists();
        const QString create =
            missing ? tr(" The folder %1 does not exist yet: it is created when you continue.")
                          .arg(QDir::toNativeSeparators(fi.absolutePath()))
                    : QString();
        const DiskSpace disk = SetupWizard::diskSpace(existing.absolutePath());
        if (!disk.known) {
            // Not a dead end: the repack stops with a clear error if the disk fills up.
            m_ok = true;
            m_space->setText(tr("<b>The free space on this drive could not be read.</b> The "
                                "store needs about %1; make sure that much is free.")
                                 .arg(formatBytes(needed())) +
                             create);
            return;
        }
        // A store being replaced frees its space when the new one is renamed over it, but both
        // exist until then: count only the real free space.
        m_ok = !disk.readOnly && disk.available >= needed() + (64ull << 20);
        m_space->setText(
            (m_ok ? tr("Needs about %1; %2 free on %3.")
                        .arg(formatBytes(needed()), formatBytes(disk.available), disk.root)
                  : tr("<b>Not enough space:</b> needs about %1, %2 free on %3%4.")
                        .arg(formatBytes(needed()), formatBytes(disk.available), disk.root,
                             disk.readOnly ? tr(" (read-only)") : QString())) +
            create);
    }
    bool isComplete() const override { return m_ok; }
    bool validatePage() override {
        const QFileInfo fi(m_edit->text().trimmed());
        if (!fi.absoluteDir().exists() && !QDir().mkpath(fi.absolutePath())) {
            m_space->setText(tr("<b>The folder %1 could not be created.</b> Choose another.")
                                 .arg(QDir::toNativeSeparators(fi.absolutePath())));
            return false;
        }
        m_w->m_destination = fi.absoluteFilePath();
        return true;
    }

private:
    QLineEdit* m_edit;
    QLabel* m_space;
    bool m_ok = false;
};

// ---- 4: repack -----------------------------------------------------------------------------

class RepackPageWidget : public WizardPage {
public:
    explicit RepackPageWidget(SetupWizard* w)
        : WizardPage(w, tr("Writing the store"),
                     tr("Cancel leaves no partial store behind (it is written to a temporary "
                        "file and renamed when complete).")) {
        addJobProgress(tr("Repack progress"), tr("Repack status"));
        auto* row = new QHBoxLayout;
        m_cancel = new QPushButton(tr("Cancel repack"), this);
        m_retry = new QPushButton(tr("Start again"), this);
        row->addWidget(m_cancel);
        row->addWidget(m_retry);
        row->addStretch(1);
        addLayout(row);
        connect(m_cancel, &QPushButton::clicked, this, [this] { m_w->m_job->cancel(); });
        connect(m_retry, &QPushButton::clicked, this, [this] { start(); });
    }
    void initializePage() override { start(); }
    void cleanupPage() override { m_w->m_job->cancel(); }
    void start() {
        m_w->m_storeWritten = false;
        m_jobActive = true;
        m_bar->setValue(0);
        m_status->setText(tr("Starting ..."));
        m_cancel->setEnabled(true);
        m_retry->setVisible(false);
        m_w->m_job->startRepack(m_w->m_validatedDir, m_w->m_destination, m_w->m_kind);
        emit completeChanged();
    }
    bool isComplete() const override { return m_w->m_storeWritten; }

private:
    void jobFinished(bool ok, bool cancelled, const QString& message) override {
        m_w->m_storeWritten = ok;
        m_bar->setValue(ok ? 1000 : 0);
        m_status->setText(ok ? message
                             : (cancelled ? tr("Cancelled: no store was written.")
                                          : tr("<b>Failed:</b> %1").arg(message.toHtmlEscaped())));
        m_cancel->setEnabled(false);
        m_retry->setVisible(!ok);
    }

    QPushButton *m_cancel, *m_retry;
};

// ---- 5: optional verify --------------------------------------------------------------------

class VerifyPageWidget : public WizardPage {
public:
    explicit VerifyPageWidget(SetupWizard* w)
        : WizardPage(w, tr("Verify (optional)"),
                     tr("Checks every record's checksum and, optionally, that every expert "
                        "equals the checkpoint's. You can skip this.")) {
        m_full =
            add(new QCheckBox(tr("Compare with the checkpoint too (reads it once more)"), this));
        m_full->setChecked(true);
        m_run = add(new QPushButton(tr("Verify now"), this));
        addJobProgress(tr("Verify progress"), tr("Verify result"));
        connect(m_run, &QPushButton::clicked, this, [this] {
            m_jobActive = true;
            m_run->setEnabled(false);
            m_status->setText(tr("Verifying ..."));
            m_w->m_job->startVerify(m_w->storePath(),
                                    m_full->isChecked() ? m_w->m_validatedDir : QString());
            emit completeChanged();
        });
    }
    void cleanupPage() override { m_w->m_job->cancel(); }
    bool isComplete() const override { return !m_jobActive; }
    int nextId() const override { return SetupWizard::DonePage; }

private:
    void jobFinished(bool ok, bool, const QString& message) override {
        m_run->setEnabled(true);
        m_status->setText(ok ? message : tr("<b>Problems:</b> %1").arg(message.toHtmlEscaped()));
    }

    QCheckBox* m_full;
    QPushButton* m_run;
};

// ---- 6: profile ----------------------------------------------------------------------------

class DonePageWidget : public WizardPage {
public:
    explicit DonePageWidget(SetupWizard* w)
        : WizardPage(w, tr("Done"),
                     tr("A profile is created for this model and the model loads when you "
                        "press Finish.")) {
        m_name = new QLineEdit(this);
        m_name->setAccessibleName(tr("Profile name"));
        add(new QLabel(tr("Profile name:"), this));
        add(m_name);
        m_summary = addNote({});
        connect(m_name, &QLineEdit::textChanged, this, [this](const QString& t) {
            m_w->m_profileName = t.trimmed();
            emit completeChanged();
        });
    }
    void initializePage() override {
        m_name->setText(modelName(m_w->m_validatedDir));
        const QString store = m_w->storePath();
        m_summary->setText(
            store.isEmpty()
                ? tr("Model: %1\nExperts from the checkpoint (Stock knobs).")
                      .arg(m_w->m_validatedDir)
                : tr("Model: %1\nStore: %2 (Optimized knobs).").arg(m_w->m_validatedDir, store));
    }
    bool isComplete() const override { return !m_name->text().trimmed().isEmpty(); }

private:
    QLineEdit* m_name;
    QLabel* m_summary;
};

// ---- the wizard ----------------------------------------------------------------------------

SetupWizard::SetupWizard(QWidget* parent) : QWizard(parent), m_job(new StoreJob(this)) {
    qRegisterMetaType<neural::gui::CheckpointReport>();
    installWheelGuard();
    setWindowTitle(tr("Set up a model"));
    setAccessibleName(tr("Set up a model"));
    setPage(FolderPage, new FolderPageWidget(this));
    setPage(FitPage, new FitPageWidget(this));
    setPage(StorePage, new StorePageWidget(this));
    setPage(DestinationPage, new DestinationPageWidget(this));
    setPage(RepackPage, new RepackPageWidget(this));
    setPage(VerifyPage, new VerifyPageWidget(this));
    setPage(DonePage, new DonePageWidget(this));
    setStartId(FolderPage);
    resize(720, 480);
    connect(this, &QWizard::rejected, m_job, &StoreJob::cancel);
}

SetupWizard::~SetupWizard() {
    m_job->cancel();
    if (m_checker) {
        m_checker->wait();
        delete m_checker;
    }
}

void SetupWizard::setCheckpointFolder(const QString& dir) {
    static_cast<FolderPageWidget*>(page(FolderPage))->setFolder(dir);
}

void SetupWizard::validate() {
    auto* folderPage = static_cast<FolderPageWidget*>(page(FolderPage));
    if (m_checker) {
        // One check at a time; the newest folder is checked when this one ends.
        QTimer::singleShot(100, this, &SetupWizard::validate);
        return;
    }
    const QString dir = folderPage->folder();
    auto result = std::make_shared<CheckpointReport>();
    m_checker = QThread::create([dir, result] { *result = checkCheckpoint(dir); });
    connect(m_checker, &QThread::finished, this, [this, dir, result] {
        m_checker->deleteLater();
        m_checker = nullptr;
        auto* folderPage = static_cast<FolderPageWidget*>(page(FolderPage));
        if (folderPage->folder() != dir)
            return;  // changed meanwhile; the debounce timer checks the new one
        m_report = *result;
        m_validatedDir = dir;
        emit validated(m_report);
    });
    m_checker->start();
}

QString SetupWizard::storeKind() const { return m_kind; }

QString SetupWizard::storePath() const {
    if (m_kind == QLatin1String("existing")) return m_existingStore;
    if (m_kind == QLatin1String("raw") || m_kind == QLatin1String("packed")) return m_destination;
    return {};
}

void SetupWizard::setMachineForTesting(const MachineInfo& m) {
    m_machine = m;
    m_haveMachine = true;
    if (currentId() == FitPage) static_cast<FitPageWidget*>(page(FitPage))->replan();
}

Profile SetupWizard::profile() const {
    Profile p = storePath().isEmpty() ? Profile::stock()
                                      : Profile::optimized(m_havePlan ? &m_plan : nullptr);
    p.name = m_profileName.isEmpty() ? modelName(m_validatedDir) : m_profileName;
    p.modelDir = m_validatedDir;
    p.store = storePath();
    if (m_havePlan) {
        // The fit step's values (the plan's unless edited) on top of Stock / Optimized.
        p.values.insert(QStringLiteral("backend"), m_fit.backend);
        p.values.insert(QStringLiteral("vram-budget"), m_fit.vramBudgetGib);
        p.values.insert(QStringLiteral("pool-slots"), m_fit.poolSlots);
        p.values.insert(QStringLiteral("pool"), m_fit.poolGib);
        p.values.insert(QStringLiteral("context"), static_cast<int>(m_fit.context));
        p.values.insert(QStringLiteral("threads"), m_fit.threads);
        p.values.insert(QStringLiteral("kernel-persistent"),
                        m_fit.kernelPersistent ? QStringLiteral("1") : QStringLiteral("0"));
        p.values.insert(QStringLiteral("kernel"), m_fit.kernel);  // store or checkpoint experts
        // Experts that live in VRAM for good need no RAM: measured to cost nothing and save RAM
        // (docs/BENCHMARKS.md "RAM residency on a 64 GB PC").
        if (!p.store.isEmpty() && m_fit.backend == QLatin1String("cuda"))
            p.values.insert(QStringLiteral("release-resident"), true);
        // K/V checkpoints as the plan sized them against RAM (0 where RAM has no room).
        if (m_fit.backend == QLatin1String("cuda"))
            p.values.insert(QStringLiteral("kv-checkpoints"), m_fit.kvCheckpointsGib);
    }
    return p;
}

}  // namespace neural::gui
