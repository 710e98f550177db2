// Saved assistants: a name with a system prompt, a reasoning effort and sampling settings (the
// conversation settings panel's fields), kept in appSettings() (settingsKey::assistants, a JSON
// array). Choosing one in the panel fills the open conversation's settings; the default one
// (Settings page, settingsKey::defaultAssistant) fills every New conversation's.
#pragma once

#include <QJsonObject>
#include <QList>
#include <QString>

#include <optional>

#include "conversation/settingspanel.h"

namespace neural::gui {

struct Assistant {
    QString name;
    ConversationSettings settings;

    QJsonObject toJson() const;
    // nullopt for an entry without a name; damaged values read as the defaults (clamped into
    // the API's limits, as SamplingSettings::fromJson does).
    static std::optional<Assistant> fromJson(const QJsonObject& o);
};

// The assistants saved, in the order they were first saved (a damaged list reads as empty).
QList<Assistant> assistants();
std::optional<Assistant> assistantNamed(const QString& name);
// Saves `a` (replacing the one with its name); false with `error` for an empty name.
bool saveAssistant(const Assistant& a, QString* error = nullptr);
// Removes the one named `name` (and the default choice when it was the default).
bool removeAssistant(const QString& name);
// The assistant a New conversation starts with; "" (none) when unset or deleted.
QString defaultAssistant();
void setDefaultAssistant(const QString& name);

}  // namespace neural::gui
