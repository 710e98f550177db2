#include "settings/appsettingsdialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>

#include "common/paths.h"
#include "conversation/assistants.h"

namespace neural::gui {

AppSettingsDialog::AppSettingsDialog(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Settings"));
    setAccessibleName(tr("Settings"));
    const auto s = appSettings();
    auto* v = new QVBoxLayout(this);

    auto* api = new QGroupBox(tr("API server"), this);
    auto* af = new QFormLayout(api);
    m_port = new QSpinBox(api);
    m_port->setRange(0, 65535);
    m_port->setSpecialValueText(tr("any free port"));
    m_port->setValue(s->value(settingsKey::port, 8080).toInt());
    m_port->setAccessibleName(tr("API port"));
    af->addRow(tr("&Port:"), m_port);
    m_key = new QLineEdit(s->value(settingsKey::apiKey).toString(), api);
    m_key->setEchoMode(QLineEdit::PasswordEchoOnEdit);
    m_key->setPlaceholderText(tr("none: no key needed"));
    m_key->setAccessibleName(tr("API key"));
    m_key->setToolTip(
        tr("Clients then send \"Authorization: Bearer KEY\" (every route but "
           "/health)."));
    af->addRow(tr("API &key:"), m_key);
    m_lan = new QCheckBox(tr("Allow other computers on the network"), api);
    m_lan->setChecked(s->value(settingsKey::lan, false).toBool());
    m_lan->setAccessibleName(tr("Allow LAN access"));
    m_lan->setToolTip(tr("Listen on every network interface instead of 127.0.0.1 only."));
    af->addRow(tr("&LAN access:"), m_lan);
    m_lanWarning = new QLabel(api);
    m_lanWarning->setWordWrap(true);
    m_lanWarning->setAccessibleName(tr("LAN access warning"));
    m_lanWarning->setStyleSheet(QStringLiteral("QLabel { color: #b9770e; }"));
    af->addRow(QString(), m_lanWarning);
    m_cors = new QLineEdit(s->value(settingsKey::cors).toString(), api);
    m_cors->setPlaceholderText(tr("none (e.g. http://localhost:3000, or * for any)"));
    m_cors->setAccessibleName(tr("Allowed browser origins"));
    m_cors->setToolTip(
        tr("Web pages from these origins may call the API (CORS), comma "
           "separated."));
    af->addRow(tr("Browser &origins:"), m_cors);
    m_startAtLaunch = new QCheckBox(tr("Start the API server when the app starts"), api);
    m_startAtLaunch->setChecked(s->value(settingsKey::startAtLaunch, false).toBool());
    af->addRow(QString(), m_startAtLaunch);
    m_keepInTray = new QCheckBox(tr("Keep running in the tray while the API server runs"), api);
    m_keepInTray->setChecked(s->value(settingsKey::keepInTray, true).toBool());
    af->addRow(QString(), m_keepInTray);
    auto* note = new QLabel(tr("Port, key, LAN access and origins apply at the server's next "
                               "start."),
                            api);
    note->setWordWrap(true);
    af->addRow(QString(), note);
    v->addWidget(api);

    auto* look = new QGroupBox(tr("Appearance and chat"), this);
    auto* lf = new QFormLayout(look);
    m_theme = new QComboBox(look);
    m_theme->addItem(tr("Follow the system"), QStringLiteral("system"));
    m_theme->addItem(tr("Light"), QStringLiteral("light"));
    m_theme->addItem(tr("Dark"), QStringLiteral("dark"));
    m_theme->setCurrentIndex(
        std::max(0, m_theme->findData(s->value(settingsKey::theme, QStringLiteral("system")))));
    m_theme->setAccessibleName(tr("Theme"));
    lf->addRow(tr("&Theme:"), m_theme);
    m_maxTokens = new QSpinBox(look);
    m_maxTokens->setRange(0, 131072);
    m_maxTokens->setSpecialValueText(tr("rest of the context"));
    m_maxTokens->setSingleStep(256);
    m_maxTokens->setSuffix(tr(" tokens"));
    m_maxTokens->setValue(s->value(settingsKey::maxTokens, 2048).toInt());
    m_maxTokens->setAccessibleName(tr("Reply length limit"));
    m_maxTokens->setToolTip(
        tr("Most tokens in one reply, reasoning included (0: as many as the context has left)."));
    lf->addRow(tr("Reply length &limit:"), m_maxTokens);
    m_defaultAssistant = new QComboBox(look);
    m_defaultAssistant->addItem(tr("None (an empty system prompt)"), QString());
    for (const Assistant& a : assistants()) m_defaultAssistant->addItem(a.name, a.name);
    m_defaultAssistant->setCurrentIndex(
        std::max(0, m_defaultAssistant->findData(defaultAssistant())));
    m_defaultAssistant->setAccessibleName(tr("Default assistant"));
    m_defaultAssistant->setToolTip(
        tr("The assistant (system prompt, reasoning effort, sampling) a new conversation "
           "starts with; save assistants in the conversation settings panel."));
    lf->addRow(tr("Default &assistant:"), m_defaultAssistant);
    v->addWidget(look);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    v->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        save();
        accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_lan, &QCheckBox::toggled, this, &AppSettingsDialog::updateWarning);
    connect(m_key, &QLineEdit::textChanged, this, &AppSettingsDialog::updateWarning);
    updateWarning();
}

void AppSettingsDialog::updateWarning() {
    // Anyone who can reach this PC can then use the model (and its CPU/GPU); say so.
    m_lanWarning->setVisible(m_lan->isChecked());
    m_lanWarning->setText(
        m_key->text().trimmed().isEmpty()
            ? tr("Anyone on your network can use the model through the API, with no key. Set "
                 "an API key, and allow the port in the firewall only for networks you trust.")
            : tr("Computers on your network with the key can use the model through the API."));
}

void AppSettingsDialog::save() {
    auto s = appSettings();
    s->setValue(settingsKey::port, m_port->value());
    s->setValue(settingsKey::apiKey, m_key->text().trimmed());
    s->setValue(settingsKey::lan, m_lan->isChecked());
    s->setValue(settingsKey::cors, m_cors->text().trimmed());
    s->setValue(settingsKey::startAtLaunch, m_startAtLaunch->isChecked());
    s->setValue(settingsKey::keepInTray, m_keepInTray->isChecked());
    s->setValue(settingsKey::maxTokens, m_maxTokens->value());
    setDefaultAssistant(m_defaultAssistant->currentData().toString());
    const QString theme = m_theme->currentData().toString();
    if (s->value(settingsKey::theme, QStringLiteral("system")).toString() != theme) {
        s->setValue(settingsKey::theme, theme);
        emit themeChanged(theme);
    }
}

}  // namespace neural::gui
