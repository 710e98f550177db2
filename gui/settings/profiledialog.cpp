#include "settings/profiledialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>

#include <filesystem>

#include "common/dialogs.h"
#include "common/wheelguard.h"
#include "common/paths.h"
#include "neural/error.h"
#include "runtime/routing_stats.h"

namespace neural::gui {

ProfileDialog::ProfileDialog(ProfileStore* store, QString path, QWidget* parent)
    : QDialog(parent), m_store(store), m_path(std::move(path)) {
    installWheelGuard();
    setWindowTitle(tr("Profiles"));
    setAccessibleName(tr("Profiles"));
    resize(680, 640);
    auto* v = new QVBoxLayout(this);

    auto* top = new QHBoxLayout;
    m_profiles = new QComboBox(this);
    m_profiles->setAccessibleName(tr("Profile"));
    for (const Profile& p : m_store->profiles()) m_profiles->addItem(p.name);
    auto* add = new QPushButton(tr("New profile..."), this);
    auto* reset = new QPushButton(tr("Reset knobs"), this);
    reset->setToolTip(tr("Stock values (Optimized values for the Optimized profile)"));
    top->addWidget(new QLabel(tr("Profile:"), this));
    top->addWidget(m_profiles, 1);
    top->addWidget(add);
    top->addWidget(reset);
    v->addLayout(top);

    auto* area = new QScrollArea(this);
    area->setWidgetResizable(true);
    auto* inner = new QWidget(area);
    auto* form = new QFormLayout(inner);
    m_model = new QLineEdit(inner);
    m_model->setPlaceholderText(tr("empty: the demo model"));
    m_model->setAccessibleName(tr("Model folder"));
    m_storeFile = new QLineEdit(inner);
    m_storeFile->setPlaceholderText(tr("empty: experts from the checkpoint"));
    m_storeFile->setAccessibleName(tr("Expert store file"));
    auto browseRow = [&](QLineEdit* edit, bool folder) {
        auto* row = new QWidget(inner);
        auto* h = new QHBoxLayout(row);
        h->setContentsMargins(0, 0, 0, 0);
        auto* b = new QPushButton(tr("Browse..."), row);
        h->addWidget(edit, 1);
        h->addWidget(b);
        connect(b, &QPushButton::clicked, this, [this, edit, folder] {
            const QString p =
                folder
                    ? QFileDialog::getExistingDirectory(this, tr("Checkpoint folder"), edit->text())
                    : QFileDialog::getOpenFileName(this, tr("Expert store"), edit->text());
            if (!p.isEmpty()) edit->setText(p);
        });
        return row;
    };
    form->addRow(tr("Model folder"), browseRow(m_model, true));
    form->addRow(tr("Expert store"), browseRow(m_storeFile, false));
    {
        auto* row = new QWidget(inner);
        auto* h = new QHBoxLayout(row);
        h->setContentsMargins(0, 0, 0, 0);
        m_statsLine = new QLabel(row);
        m_statsLine->setWordWrap(true);
        m_statsLine->setAccessibleName(tr("Learned expert statistics"));
        m_statsReset = new QPushButton(tr("Reset"), row);
        m_statsReset->setAccessibleName(tr("Reset the learned expert statistics"));
        m_statsReset->setToolTip(
            tr("Deletes what the engine learned about this model's experts; the next load "
               "starts without it"));
        h->addWidget(m_statsLine, 1);
        h->addWidget(m_statsReset);
        form->addRow(tr("Learned experts"), row);
        connect(m_statsReset, &QPushButton::clicked, this, [this] {
            std::error_code ec;
            const std::filesystem::path file = m_statsFile.toStdString();
            if (m_statsFile.isEmpty() || !std::filesystem::remove(file, ec)) {
                updateStats();
                if (ec)
                    m_statsLine->setText(
                        tr("Could not reset: %1").arg(QString::fromStdString(ec.message())));
                return;
            }
            m_statsLine->setText(
                tr("Reset: the next load starts without learned statistics (a model loaded "
                   "now starts learning afresh)."));
            m_statsReset->setEnabled(false);
        });
        connect(m_model, &QLineEdit::textChanged, this, &ProfileDialog::updateStats);
        connect(m_storeFile, &QLineEdit::textChanged, this, &ProfileDialog::updateStats);
    }

    // Settings this build or PC cannot apply (the GPU knobs on a CPU build, ws-min off Windows)
    // go under one line at the end instead of a screen of disabled rows; a button shows them.
    auto* naBox = new QWidget(inner);
    auto* naForm = new QFormLayout(naBox);
    naForm->setContentsMargins(0, 0, 0, 0);
    int notApplicable = 0;
    QStringList reasons;

    for (const KnobDef& k : knobDefs()) {
        QWidget* ed = nullptr;
        switch (k.type) {
            case KnobDef::Type::boolean:
                ed = new QCheckBox(inner);
                break;
            case KnobDef::Type::integer: {
                auto* s = new QSpinBox(inner);
                s->setRange(static_cast<int>(k.min), static_cast<int>(k.max));
                if (k.hasAuto) s->setSpecialValueText(tr("auto"));
                if (!k.unit.isEmpty()) s->setSuffix(QLatin1Char(' ') + k.unit);
                ed = s;
                break;
            }
            case KnobDef::Type::real: {
                auto* s = new QDoubleSpinBox(inner);
                s->setRange(k.min, k.max);
                s->setDecimals(2);
                if (k.hasAuto) s->setSpecialValueText(tr("auto"));
                if (!k.unit.isEmpty()) s->setSuffix(QLatin1Char(' ') + k.unit);
                ed = s;
                break;
            }
            case KnobDef::Type::choice: {
                auto* c = new QComboBox(inner);
                c->addItems(k.choices);
                ed = c;
                break;
            }
            case KnobDef::Type::text:
                ed = new QLineEdit(inner);
                break;
        }
        ed->setAccessibleName(k.label);
        ed->setAccessibleDescription(k.help);
        // Grouped by what this build or PC cannot apply (fixed); the backend-dependent state and
        // the tooltips follow the backend choice (updateEnabled).
        const QString why = unsupportedReason(k.key);
        if (!why.isEmpty() && !reasons.contains(why)) reasons << why;
        auto* cell = new QWidget(inner);
        auto* cv = new QVBoxLayout(cell);
        cv->setContentsMargins(0, 0, 0, 4);
        auto* help = new QLabel(k.help, cell);
        m_helps.insert(k.key, help);
        help->setWordWrap(true);
        help->setForegroundRole(QPalette::PlaceholderText);
        cv->addWidget(ed);
        cv->addWidget(help);
        auto* label = new QLabel(k.label, inner);
        label->setToolTip(tr("Flag: %1").arg(k.flag));
        label->setBuddy(ed);
        (why.isEmpty() ? form : naForm)->addRow(label, cell);
        notApplicable += why.isEmpty() ? 0 : 1;
        m_editors.insert(k.key, ed);
    }
    if (notApplicable > 0) {
        auto* line = new QWidget(inner);
        auto* h = new QHBoxLayout(line);
        h->setContentsMargins(0, 8, 0, 0);
        const QString why = reasons.join(QStringLiteral("; "));
        m_notApplicable =
            new QLabel(notApplicable == 1
                           ? tr("1 setting does not apply here (%1).").arg(why)
                           : tr("%1 settings do not apply here (%2).").arg(notApplicable).arg(why),
                       line);
        m_notApplicable->setWordWrap(true);
        m_notApplicable->setAccessibleName(tr("Settings that do not apply"));
        auto* show = new QPushButton(tr("Show them"), line);
        show->setCheckable(true);
        show->setAccessibleName(tr("Show the settings that do not apply"));
        h->addWidget(m_notApplicable, 1);
        h->addWidget(show);
        form->addRow(line);
        form->addRow(naBox);
        naBox->setVisible(false);
        connect(show, &QPushButton::toggled, this, [naBox, show](bool on) {
            naBox->setVisible(on);
            show->setText(on ? tr("Hide them") : tr("Show them"));
        });
    } else {
        delete naBox;
    }
    if (auto* setting = qobject_cast<QLineEdit*>(m_editors.value(QStringLiteral("routing-stats"))))
        connect(setting, &QLineEdit::textChanged, this, &ProfileDialog::updateStats);
    // CUDA-only knobs are disabled, with the reason, while the backend is cpu.
    if (auto* backend = qobject_cast<QComboBox*>(m_editors.value(QStringLiteral("backend"))))
        connect(backend, &QComboBox::currentTextChanged, this, &ProfileDialog::updateEnabled);
    updateEnabled();
    area->setWidget(inner);
    v->addWidget(area, 1);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Apply | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Apply)->setText(tr("Apply and reload"));
    v->addWidget(buttons);

    connect(buttons->button(QDialogButtonBox::Apply), &QPushButton::clicked, this,
            &ProfileDialog::apply);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_profiles, &QComboBox::currentTextChanged, this, [this](const QString& name) {
        collect();
        showProfile(name);
    });
    connect(add, &QPushButton::clicked, this, [this] {
        bool ok = false;
        const QString name =
            QInputDialog::getText(this, tr("New profile"), tr("Name:"), QLineEdit::Normal, {}, &ok)
                .trimmed();
        if (!ok || name.isEmpty()) return;
        if (m_store->find(name)) {
            showWarning(this, tr("New profile"), tr("A profile named %1 exists.").arg(name));
            return;
        }
        collect();
        Profile p = m_store->find(m_shown) ? *m_store->find(m_shown) : Profile::stock();
        p.name = name;
        m_store->upsert(p);
        m_profiles->addItem(name);
        m_profiles->setCurrentText(name);
    });
    connect(reset, &QPushButton::clicked, this, [this] {
        Profile* p = m_store->find(m_shown);
        if (!p) return;
        const Profile base =
            m_shown == QLatin1String("Optimized") ? Profile::optimized() : Profile::stock();
        p->values = base.values;
        showProfile(m_shown);
    });
    m_profiles->setCurrentText(m_store->activeName());
    showProfile(m_store->activeName());
}

void ProfileDialog::updateEnabled() {
    auto* backend = qobject_cast<QComboBox*>(m_editors.value(QStringLiteral("backend")));
    for (const KnobDef& k : knobDefs()) {
        QWidget* ed = m_editors.value(k.key);
        const QString why = unsupportedReason(k.key, backend ? backend->currentText() : QString());
        QString helpText = k.help;
        if (!why.isEmpty())
            helpText +=
                QStringLiteral(" <b>%1</b>").arg(tr("Disabled: %1.").arg(why.toHtmlEscaped()));
        ed->setEnabled(why.isEmpty());
        ed->setToolTip(QStringLiteral("%1: %2").arg(k.flag, helpText));
        m_helps.value(k.key)->setText(helpText);
    }
}

void ProfileDialog::showProfile(const QString& name) {
    Profile* p = m_store->find(name);
    if (!p) return;
    m_shown = name;
    m_model->setText(p->modelDir);
    m_storeFile->setText(p->store);
    for (const KnobDef& k : knobDefs()) {
        QWidget* ed = m_editors.value(k.key);
        const QVariant v = p->value(k.key);
        if (auto* c = qobject_cast<QCheckBox*>(ed))
            c->setChecked(v.toBool());
        else if (auto* s = qobject_cast<QSpinBox*>(ed))
            s->setValue(v.toInt());
        else if (auto* d = qobject_cast<QDoubleSpinBox*>(ed))
            d->setValue(v.toDouble());
        else if (auto* cb = qobject_cast<QComboBox*>(ed))
            cb->setCurrentText(v.toString());
        else if (auto* t = qobject_cast<QLineEdit*>(ed))
            t->setText(v.toString());
    }
    updateStats();
}

void ProfileDialog::updateStats() {
    if (m_statsLine == nullptr) return;
    const QString dir = m_model->text().trimmed();
    const QString model = dir.isEmpty() ? demoModelDir() : dir;
    QString setting = QStringLiteral("auto");
    if (auto* t = qobject_cast<QLineEdit*>(m_editors.value(QStringLiteral("routing-stats"))))
        if (!t->text().trimmed().isEmpty()) setting = t->text().trimmed();
    const std::filesystem::path file =
        desktopRoutingStatsPath(setting, model, m_storeFile->text().trimmed());
    m_statsFile = QString::fromStdString(file.string());
    m_statsReset->setEnabled(false);
    if (file.empty()) {
        m_statsLine->setText(tr("Off: this profile learns nothing about the model's experts."));
        return;
    }
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        m_statsLine->setText(tr("Nothing learned yet (%1).").arg(m_statsFile));
        return;
    }
    m_statsReset->setEnabled(true);
    try {
        const RoutingStatsData d = load_routing_stats(file);
        m_statsLine->setText(tr("Learned from %1 tokens, last updated %2 (%3).")
                                 .arg(QLocale().toString(static_cast<qlonglong>(d.tokens)),
                                      QString::fromStdString(format_utc(d.updated)), m_statsFile));
    } catch (const std::exception& e) {
        m_statsLine->setText(tr("Unreadable, ignored at load (new statistics replace it): %1")
                                 .arg(QString::fromStdString(e.what())));
    }
}

void ProfileDialog::collect() {
    Profile* p = m_store->find(m_shown);
    if (!p) return;
    p->modelDir = m_model->text().trimmed();
    p->store = m_storeFile->text().trimmed();
    for (const KnobDef& k : knobDefs()) {
        QWidget* ed = m_editors.value(k.key);
        if (auto* c = qobject_cast<QCheckBox*>(ed))
            p->values.insert(k.key, c->isChecked());
        else if (auto* s = qobject_cast<QSpinBox*>(ed))
            p->values.insert(k.key, s->value());
        else if (auto* d = qobject_cast<QDoubleSpinBox*>(ed))
            p->values.insert(k.key, d->value());
        else if (auto* cb = qobject_cast<QComboBox*>(ed))
            p->values.insert(k.key, cb->currentText());
        else if (auto* t = qobject_cast<QLineEdit*>(ed))
            p->values.insert(k.key, t->text().trimmed());
    }
}

void ProfileDialog::apply() {
    collect();
    m_store->setActive(m_shown);
    QString error;
    if (!m_store->save(m_path, &error)) {
        showWarning(this, tr("Profiles"), error);
        return;
    }
    emit applied(m_store->active());
    accept();
}

}  // namespace neural::gui
