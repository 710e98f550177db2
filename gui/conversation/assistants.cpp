#include "conversation/assistants.h"

#include <QCoreApplication>
#include <QJsonArray>
#include <QJsonDocument>

#include "common/paths.h"
#include "common/settingskeys.h"

namespace neural::gui {

namespace {
const QStringList kEfforts{QStringLiteral("low"), QStringLiteral("medium"), QStringLiteral("high")};

void write(const QList<Assistant>& list) {
    QJsonArray a;
    for (const Assistant& x : list) a.push_back(x.toJson());
    appSettings()->setValue(settingsKey::assistants,
                            QString::fromUtf8(QJsonDocument(a).toJson(QJsonDocument::Compact)));
    appSettings()->sync();
}
}  // namespace

QJsonObject Assistant::toJson() const {
    return {{QStringLiteral("name"), name},
            {QStringLiteral("system_prompt"), settings.systemPrompt},
            {QStringLiteral("reasoning_effort"), settings.reasoningEffort},
            {QStringLiteral("sampling"), settings.sampling.toJson()}};
}

std::optional<Assistant> Assistant::fromJson(const QJsonObject& o) {
    Assistant a;
    a.name = o.value(QStringLiteral("name")).toString().trimmed();
    if (a.name.isEmpty()) return std::nullopt;
    a.settings.systemPrompt = o.value(QStringLiteral("system_prompt")).toString();
    const QString effort = o.value(QStringLiteral("reasoning_effort")).toString();
    a.settings.reasoningEffort = kEfforts.contains(effort) ? effort : QStringLiteral("medium");
    a.settings.sampling =
        SamplingSettings::fromJson(o.value(QStringLiteral("sampling")).toObject());
    return a;
}

QList<Assistant> assistants() {
    QList<Assistant> out;
    const QJsonDocument doc =
        QJsonDocument::fromJson(appSettings()->value(settingsKey::assistants).toString().toUtf8());
    for (const QJsonValue& v : doc.array()) {
        const std::optional<Assistant> a = Assistant::fromJson(v.toObject());
        bool seen = false;
        for (const Assistant& x : out) seen = seen || (a && x.name == a->name);
        if (a && !seen) out.push_back(*a);
    }
    return out;
}

std::optional<Assistant> assistantNamed(const QString& name) {
    for (const Assistant& a : assistants())
        if (a.name == name) return a;
    return std::nullopt;
}

bool saveAssistant(const Assistant& a, QString* error) {
    Assistant named = a;
    named.name = a.name.trimmed();
    if (named.name.isEmpty()) {
        if (error) *error = QCoreApplication::translate("Assistants", "An assistant needs a name.");
        return false;
    }
    QList<Assistant> list = assistants();
    bool replaced = false;
    for (Assistant& x : list) {
        if (x.name == named.name) {
            x = named;
            replaced = true;
        }
    }
    if (!replaced) list.push_back(named);
    write(list);
    return true;
}

bool removeAssistant(const QString& name) {
    QList<Assistant> list = assistants();
    const qsizetype before = list.size();
    list.removeIf([&](const Assistant& a) { return a.name == name; });
    if (list.size() == before) return false;
    write(list);
    if (defaultAssistant() == name) setDefaultAssistant({});
    return true;
}

QString defaultAssistant() {
    const QString name = appSettings()->value(settingsKey::defaultAssistant).toString();
    return assistantNamed(name) ? name : QString();
}

void setDefaultAssistant(const QString& name) {
    appSettings()->setValue(settingsKey::defaultAssistant, name);
    appSettings()->sync();
}

}  // namespace neural::gui
