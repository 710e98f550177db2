#include "tools/conversationtools.h"

#include <QJsonArray>

namespace neural::gui {

namespace {
QStringList strings(const QJsonValue& v) {
    QStringList out;
    for (const QJsonValue& e : v.toArray())
        if (e.isString() && !e.toString().isEmpty() && !out.contains(e.toString()))
            out.push_back(e.toString());
    return out;
}
}  // namespace

void ConversationTools::setEnabled(const QString& ns, bool on) {
    QStringList& list = isBuiltin(ns) ? builtinsOn : serversOff;
    const bool listed = isBuiltin(ns) ? on : !on;
    list.removeAll(ns);
    if (listed) list.push_back(ns);
}

ConversationTools ConversationTools::fromJson(const QJsonObject& o) {
    ConversationTools t;
    t.serversOff = strings(o.value(QStringLiteral("servers_off")));
    for (const QString& ns : strings(o.value(QStringLiteral("builtins_on"))))
        if (isBuiltin(ns)) t.builtinsOn.push_back(ns);
    t.alwaysAllow = strings(o.value(QStringLiteral("always_allow")));
    return t;
}

QJsonObject ConversationTools::toJson() const {
    return QJsonObject{{QStringLiteral("servers_off"), QJsonArray::fromStringList(serversOff)},
                       {QStringLiteral("builtins_on"), QJsonArray::fromStringList(builtinsOn)},
                       {QStringLiteral("always_allow"), QJsonArray::fromStringList(alwaysAllow)}};
}

ToolAddress splitRecipient(const QString& recipient) {
    const qsizetype dot = recipient.indexOf(QLatin1Char('.'));
    if (dot < 0) return {recipient, {}};
    return {recipient.left(dot), recipient.mid(dot + 1)};
}

}  // namespace neural::gui
