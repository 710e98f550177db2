#include "conversation/settingspanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>

#include "common/dialogs.h"
#include "conversation/assistants.h"

namespace neural::gui {

namespace {

QDoubleSpinBox* realBox(QWidget* parent, double lo, double hi, double step) {
    auto* b = new QDoubleSpinBox(parent);
    b->setRange(lo, hi);
    b->setDecimals(2);
    b->setSingleStep(step);
    b->setKeyboardTracking(false);
    return b;
}

// The tooltip: what the value does, then the API field it travels as.
QString tip(const QString& what, const char* field) {
    return QObject::tr("%1\nAPI field: %2").arg(what, QLatin1String(field));
}

}  // namespace

SettingsPanel::SettingsPanel(QWidget* parent) : QWidget(parent) {
    setAccessibleName(tr("Conversation settings"));
    auto* v = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);

    m_assistant = new QComboBox(this);
    m_assistant->setAccessibleName(tr("Assistant"));
    m_assistant->setToolTip(
        tr("A saved assistant: its system prompt, reasoning effort and "
           "sampling settings fill the fields below."));
    form->addRow(tr("&Assistant:"), m_assistant);
    auto* assistantButtons = new QHBoxLayout;
    m_saveAssistant = new QPushButton(tr("Save as assistant..."), this);
    m_saveAssistant->setAccessibleName(tr("Save these settings as an assistant"));
    m_deleteAssistant = new QPushButton(tr("Delete assistant"), this);
    m_deleteAssistant->setAccessibleName(tr("Delete the chosen assistant"));
    assistantButtons->addWidget(m_saveAssistant);
    assistantButtons->addWidget(m_deleteAssistant);
    form->addRow(QString(), assistantButtons);

    m_preset = new QComboBox(this);
    m_preset->setAccessibleName(tr("Sampling preset"));
    m_preset->setToolTip(
        tr("Fills temperature, top-p, top-k, min-p, seed and token limit. Balanced is the "
           "model's own recommendation."));
    form->addRow(tr("&Preset:"), m_preset);
    auto* presetButtons = new QHBoxLayout;
    m_savePreset = new QPushButton(tr("Save as preset..."), this);
    m_savePreset->setAccessibleName(tr("Save the sampling settings as a preset"));
    m_deletePreset = new QPushButton(tr("Delete preset"), this);
    m_deletePreset->setAccessibleName(tr("Delete the chosen preset"));
    presetButtons->addWidget(m_savePreset);
    presetButtons->addWidget(m_deletePreset);
    form->addRow(QString(), presetButtons);

    m_temperature = realBox(this, 0.0, SamplingSettings::kMaxTemperature, 0.05);
    m_temperature->setAccessibleName(tr("Temperature"));
    m_temperature->setToolTip(
        tip(tr("Randomness of each token: 0 always takes the likeliest one, 1 samples the "
               "model's distribution as it is, above 1 flattens it."),
            "temperature"));
    form->addRow(tr("&Temperature:"), m_temperature);

    m_topP = realBox(this, 0.01, 1.0, 0.05);
    m_topP->setAccessibleName(tr("Top-p"));
    m_topP->setToolTip(
        tip(tr("Samples only from the likeliest tokens that together make up this share of "
               "the probability; 1 is off."),
            "top_p"));
    form->addRow(tr("Top-&p:"), m_topP);

    m_topK = new QSpinBox(this);
    m_topK->setRange(0, SamplingSettings::kMaxTopK);
    m_topK->setSpecialValueText(tr("off"));
    m_topK->setKeyboardTracking(false);
    m_topK->setAccessibleName(tr("Top-k"));
    m_topK->setToolTip(tip(tr("Samples only from this many likeliest tokens; off: all."), "top_k"));
    form->addRow(tr("Top-&k:"), m_topK);

    m_minP = realBox(this, 0.0, 1.0, 0.01);
    m_minP->setSpecialValueText(tr("off"));
    m_minP->setAccessibleName(tr("Min-p"));
    m_minP->setToolTip(
        tip(tr("Leaves out tokens less likely than this share of the likeliest token's "
               "probability; off: none."),
            "min_p"));
    form->addRow(tr("&Min-p:"), m_minP);

    auto* seedRow = new QHBoxLayout;
    m_fixedSeed = new QCheckBox(tr("Fixed"), this);
    m_fixedSeed->setAccessibleName(tr("Fixed seed"));
    m_fixedSeed->setToolTip(
        tip(tr("A fixed seed gives the same reply to the same conversation and settings; "
               "unchecked, every reply gets a fresh random seed."),
            "seed"));
    m_seed = new QSpinBox(this);
    m_seed->setRange(1, SamplingSettings::kMaxSeed);
    m_seed->setKeyboardTracking(false);
    m_seed->setAccessibleName(tr("Seed"));
    m_seed->setToolTip(m_fixedSeed->toolTip());
    seedRow->addWidget(m_fixedSeed);
    seedRow->addWidget(m_seed, 1);
    auto* seedLabel = new QLabel(tr("&Seed:"), this);
    seedLabel->setBuddy(m_fixedSeed);  // a row of two widgets: the label names the first
    form->addRow(seedLabel, seedRow);

    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setRange(0, SamplingSettings::kMaxTokens);
    m_maxTokens->setSingleStep(256);
    m_maxTokens->setKeyboardTracking(false);
    m_maxTokens->setAccessibleName(tr("Reply token limit"));
    m_maxTokens->setToolTip(
        tip(tr("Most tokens in one reply, reasoning included; the app setting is the Settings "
               "page's reply length limit."),
            "max_completion_tokens"));
    setDefaultMaxTokens(2048);
    form->addRow(tr("Token &limit:"), m_maxTokens);

    m_effort = new QComboBox(this);
    m_effort->addItem(tr("Low"), QStringLiteral("low"));
    m_effort->addItem(tr("Medium"), QStringLiteral("medium"));
    m_effort->addItem(tr("High"), QStringLiteral("high"));
    m_effort->setCurrentIndex(1);
    m_effort->setAccessibleName(tr("Reasoning effort"));
    m_effort->setToolTip(
        tip(tr("How long the model reasons before it answers."), "reasoning_effort"));
    form->addRow(tr("&Reasoning:"), m_effort);
    v->addLayout(form);

    auto* promptLabel =
        new QLabel(tr("S&ystem prompt (instructions for this conversation):"), this);
    promptLabel->setWordWrap(true);
    m_systemPrompt = new QPlainTextEdit(this);
    m_systemPrompt->setAccessibleName(tr("System prompt"));
    m_systemPrompt->setPlaceholderText(tr("none"));
    m_systemPrompt->setTabChangesFocus(true);
    m_systemPrompt->setToolTip(
        tip(tr("Instructions the model follows in this conversation (the developer "
               "message)."),
            "messages[role=system]"));
    promptLabel->setBuddy(m_systemPrompt);
    v->addWidget(promptLabel);
    v->addWidget(m_systemPrompt, 1);

    m_promptTimer = new QTimer(this);
    m_promptTimer->setSingleShot(true);
    m_promptTimer->setInterval(500);
    connect(m_promptTimer, &QTimer::timeout, this, &SettingsPanel::settingsChanged);

    fillPresets();
    fillAssistants();
    setSettings({});  // the defaults (Balanced) until a conversation is shown

    for (QDoubleSpinBox* b : {m_temperature, m_topP, m_minP})
        connect(b, &QDoubleSpinBox::valueChanged, this, &SettingsPanel::edited);
    for (QSpinBox* b : {m_topK, m_seed, m_maxTokens})
        connect(b, &QSpinBox::valueChanged, this, &SettingsPanel::edited);
    connect(m_fixedSeed, &QCheckBox::toggled, this, [this](bool on) {
        m_seed->setEnabled(on);
        edited();
    });
    connect(m_effort, &QComboBox::currentIndexChanged, this, [this] {
        if (!m_filling) emit settingsChanged();
    });
    connect(m_systemPrompt, &QPlainTextEdit::textChanged, this, [this] {
        if (!m_filling) m_promptTimer->start();
    });
    connect(m_preset, &QComboBox::activated, this, [this](int index) {
        const QString name = m_preset->itemData(index).toString();
        if (!name.isEmpty() && applyPreset(name)) emit settingsChanged();
        showMatchingPreset();
    });
    connect(m_assistant, &QComboBox::activated, this, [this](int index) {
        const QString name = m_assistant->itemData(index).toString();
        if (!name.isEmpty() && applyAssistant(name)) emit settingsChanged();
    });
    connect(m_saveAssistant, &QPushButton::clicked, this, [this] { saveAsAssistant(); });
    connect(m_deleteAssistant, &QPushButton::clicked, this, [this] {
        if (removeAssistant(m_assistant->currentData().toString())) fillAssistants();
    });
    // Any change of a field: the assistant shown is the one the fields still match.
    connect(this, &SettingsPanel::settingsChanged, this, &SettingsPanel::showMatchingAssistant);
    connect(m_savePreset, &QPushButton::clicked, this, [this] { saveAsPreset(); });
    connect(m_deletePreset, &QPushButton::clicked, this, [this] {
        const QString name = m_preset->currentData().toString();
        if (removeSamplingPreset(name)) {
            fillPresets();
            showMatchingPreset();
        }
    });
}

void SettingsPanel::fillPresets() {
    const QSignalBlocker block(m_preset);
    m_preset->clear();
    for (const SamplingPreset& p : samplingPresets())
        m_preset->addItem(p.builtIn ? p.name : tr("%1 (yours)").arg(p.name), p.name);
    // Shown while the fields match no preset.
    m_preset->setPlaceholderText(tr("Custom"));
}

void SettingsPanel::showMatchingPreset() {
    const QSignalBlocker block(m_preset);
    // The preset chosen (or saved) last while the fields still hold its values: a preset of
    // yours with a built-in one's values is itself, to be shown, chosen and deleted. Otherwise
    // the first preset with these values, or none ("Custom").
    const SamplingSettings now = sampling();
    QString name;
    for (const SamplingPreset& p : samplingPresets())
        if (p.name == m_presetName && p.settings == now) name = p.name;
    if (name.isEmpty()) name = presetMatching(now);
    m_presetName = name;
    m_preset->setCurrentIndex(name.isEmpty() ? -1 : m_preset->findData(name));
    bool user = false;
    for (const SamplingPreset& p : samplingPresets())
        if (p.name == name) user = !p.builtIn;
    m_deletePreset->setEnabled(user);
}

void SettingsPanel::edited() {
    if (m_filling) return;
    showMatchingPreset();
    emit settingsChanged();
}

void SettingsPanel::setDefaultMaxTokens(int n) {
    m_maxTokens->setSpecialValueText(n > 0 ? tr("app setting (%1)").arg(n)
                                           : tr("app setting (rest of the context)"));
}

void SettingsPanel::setSettings(const ConversationSettings& s) {
    m_filling = true;
    m_promptTimer->stop();
    const SamplingSettings& x = s.sampling;
    m_temperature->setValue(x.temperature);
    m_topP->setValue(x.topP);
    m_topK->setValue(x.topK);
    m_minP->setValue(x.minP);
    m_fixedSeed->setChecked(x.fixedSeed);
    m_seed->setEnabled(x.fixedSeed);
    m_seed->setValue(x.seed);
    m_maxTokens->setValue(x.maxTokens);
    m_effort->setCurrentIndex(std::max(0, m_effort->findData(s.reasoningEffort)));
    if (m_systemPrompt->toPlainText() != s.systemPrompt)
        m_systemPrompt->setPlainText(s.systemPrompt);
    m_filling = false;
    showMatchingPreset();
    showMatchingAssistant();
}

SamplingSettings SettingsPanel::sampling() const {
    SamplingSettings s;
    s.temperature = m_temperature->value();
    s.topP = m_topP->value();
    s.topK = m_topK->value();
    s.minP = m_minP->value();
    s.fixedSeed = m_fixedSeed->isChecked();
    s.seed = m_seed->value();
    s.maxTokens = m_maxTokens->value();
    return s;
}

ConversationSettings SettingsPanel::settings() const {
    ConversationSettings c;
    c.systemPrompt = m_systemPrompt->toPlainText();
    c.reasoningEffort = m_effort->currentData().toString();
    c.sampling = sampling();
    return c;
}

bool SettingsPanel::applyPreset(const QString& name) {
    for (const SamplingPreset& p : samplingPresets()) {
        if (p.name != name) continue;
        ConversationSettings c = settings();
        c.sampling = p.settings;
        m_presetName = p.name;
        setSettings(c);
        return true;
    }
    return false;
}

bool SettingsPanel::saveAsPreset(const QString& given) {
    QString name = given.trimmed();
    const bool ask = name.isEmpty();
    if (ask) {
        bool ok = false;
        name = QInputDialog::getText(this, tr("Save preset"), tr("Name of the preset:"),
                                     QLineEdit::Normal, QString(), &ok)
                   .trimmed();
        if (!ok || name.isEmpty()) return false;
    }
    if (!saveSamplingPreset(name, sampling())) {
        if (ask)
            showInformation(this, tr("Save preset"),
                            tr("\"%1\" is a built-in preset; choose another name.").arg(name));
        return false;
    }
    m_presetName = name;
    fillPresets();
    showMatchingPreset();
    return true;
}

void SettingsPanel::fillAssistants() {
    {
        const QSignalBlocker block(m_assistant);
        m_assistant->clear();
        for (const Assistant& a : assistants()) m_assistant->addItem(a.name, a.name);
        m_assistant->setPlaceholderText(tr("None"));
    }
    showMatchingAssistant();
}

void SettingsPanel::showMatchingAssistant() {
    const QSignalBlocker block(m_assistant);
    const ConversationSettings now = settings();
    int index = -1;
    for (int i = 0; i < m_assistant->count() && index < 0; ++i) {
        const std::optional<Assistant> a = assistantNamed(m_assistant->itemData(i).toString());
        if (a && a->settings == now) index = i;
    }
    m_assistant->setCurrentIndex(index);
    m_deleteAssistant->setEnabled(index >= 0);
}

bool SettingsPanel::applyAssistant(const QString& name) {
    const std::optional<Assistant> a = assistantNamed(name);
    if (!a) return false;
    setSettings(a->settings);
    return true;
}

bool SettingsPanel::saveAsAssistant(const QString& given) {
    QString name = given.trimmed();
    if (name.isEmpty()) {
        bool ok = false;
        name = QInputDialog::getText(this, tr("Save assistant"),
                                     tr("Name of the assistant (its system prompt, reasoning "
                                        "effort and sampling settings are saved):"),
                                     QLineEdit::Normal, m_assistant->currentData().toString(), &ok)
                   .trimmed();
        if (!ok || name.isEmpty()) return false;
    }
    flush();
    if (!saveAssistant({name, settings()})) return false;
    fillAssistants();
    return true;
}

void SettingsPanel::flush() {
    if (m_promptTimer->isActive()) {
        m_promptTimer->stop();
        emit settingsChanged();
    }
}

}  // namespace neural::gui
