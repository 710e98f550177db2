#include "conversation/conversationstore.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSqlError>
#include <QSqlQuery>
#include <QVariant>

#include <atomic>
#include <utility>

namespace neural::gui {

namespace {

std::atomic<int> g_connections{0};

qint64 nowMs() { return QDateTime::currentMSecsSinceEpoch(); }

// Migration N takes the schema from version N-1 to N. Append only: a released step never
// changes, so every older file reaches the current schema through the same statements.
const QList<QStringList>& migrations() {
    static const QList<QStringList> steps = {
        // 1: conversations and messages.
        {QStringLiteral("CREATE TABLE conversations ("
                        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                        " title TEXT NOT NULL,"
                        " created_ms INTEGER NOT NULL,"
                        " updated_ms INTEGER NOT NULL)"),
         QStringLiteral("CREATE TABLE messages ("
                        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                        " conversation_id INTEGER NOT NULL"
                        "   REFERENCES conversations(id) ON DELETE CASCADE,"
                        " position INTEGER NOT NULL,"
                        " role TEXT NOT NULL,"
                        " content TEXT NOT NULL,"
                        " reasoning TEXT NOT NULL DEFAULT '',"
                        " created_ms INTEGER NOT NULL,"
                        " UNIQUE (conversation_id, position))")},
        // 2: per-conversation settings and per-message stats.
        {QStringLiteral("ALTER TABLE conversations ADD COLUMN system_prompt TEXT NOT NULL "
                        "DEFAULT ''"),
         QStringLiteral("ALTER TABLE conversations ADD COLUMN reasoning_effort TEXT NOT NULL "
                        "DEFAULT 'medium'"),
         QStringLiteral("ALTER TABLE messages ADD COLUMN stats TEXT NOT NULL DEFAULT '{}'"),
         QStringLiteral("CREATE INDEX messages_by_conversation ON messages(conversation_id, "
                        "position)")},
        // 3: the versions of regenerated replies (JSON array) and the one shown.
        {QStringLiteral("ALTER TABLE messages ADD COLUMN versions TEXT NOT NULL DEFAULT '[]'"),
         QStringLiteral("ALTER TABLE messages ADD COLUMN version INTEGER NOT NULL DEFAULT 0")},
        // 4: the conversation's sampling settings (SamplingSettings::toJson; '{}': defaults).
        {QStringLiteral("ALTER TABLE conversations ADD COLUMN sampling TEXT NOT NULL DEFAULT "
                        "'{}'")},
        // 5: the conversation's tools (tools/conversationtools.h: which are on, the calls
        // always allowed; '{}': the defaults).
        {QStringLiteral("ALTER TABLE conversations ADD COLUMN tools TEXT NOT NULL DEFAULT "
                        "'{}'")},
        // 6: messages of yours have versions too (an edit keeps the earlier text), and each
        // version in messages.versions may carry the messages that followed it ("following").
        // The tables are unchanged and every v5 row reads the same; the number is what makes an
        // older app, which would drop the "following" lists when it flips a version, refuse
        // the file.
        {},
    };
    return steps;
}

QString compact(const QJsonValue& v) {
    return QString::fromUtf8(v.isArray()
                                 ? QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact)
                                 : QJsonDocument(v.toObject()).toJson(QJsonDocument::Compact));
}

// messages.versions: [{"content", "reasoning", "stats", "following"?}, ...].
QJsonArray versionsToJson(const QList<MessageVersion>& versions) {
    QJsonArray list;
    for (const MessageVersion& v : versions) {
        QJsonObject o{{QStringLiteral("content"), v.content},
                      {QStringLiteral("reasoning"), v.reasoning},
                      {QStringLiteral("stats"), v.stats}};
        if (!v.following.isEmpty()) o.insert(QStringLiteral("following"), v.following);
        list.push_back(o);
    }
    return list;
}

QList<MessageVersion> versionsFromJson(const QJsonArray& list) {
    QList<MessageVersion> out;
    for (const QJsonValue& v : list) {
        const QJsonObject o = v.toObject();
        out.push_back({o.value(QStringLiteral("content")).toString(),
                       o.value(QStringLiteral("reasoning")).toString(),
                       o.value(QStringLiteral("stats")).toObject(),
                       o.value(QStringLiteral("following")).toArray()});
    }
    return out;
}

// A message kept in a version's "following" list, as it was stored.
QJsonObject messageToJson(const StoredMessage& m) {
    QJsonObject o{{QStringLiteral("id"), m.id},
                  {QStringLiteral("role"), m.role},
                  {QStringLiteral("content"), m.content},
                  {QStringLiteral("reasoning"), m.reasoning},
                  {QStringLiteral("created_ms"), m.createdMs},
                  {QStringLiteral("stats"), m.stats}};
    if (m.versions.size() > 1) {
        o.insert(QStringLiteral("versions"), versionsToJson(m.versions));
        o.insert(QStringLiteral("version"), m.version);
    }
    return o;
}

StoredMessage messageFromJson(const QJsonObject& o) {
    StoredMessage m;
    m.id = o.value(QStringLiteral("id")).toInteger();
    m.role = o.value(QStringLiteral("role")).toString();
    m.content = o.value(QStringLiteral("content")).toString();
    m.reasoning = o.value(QStringLiteral("reasoning")).toString();
    m.createdMs = o.value(QStringLiteral("created_ms")).toInteger();
    m.stats = o.value(QStringLiteral("stats")).toObject();
    m.versions = versionsFromJson(o.value(QStringLiteral("versions")).toArray());
    m.version = o.value(QStringLiteral("version")).toInt();
    if (m.versions.size() < 2 || m.version < 0 || m.version >= m.versions.size()) {
        m.versions.clear();
        m.version = 0;
    }
    return m;
}

// The versions column's value: '[]' for a message with one version.
QString versionsColumn(const QList<MessageVersion>& versions) {
    return versions.size() > 1 ? compact(versionsToJson(versions)) : QStringLiteral("[]");
}

}  // namespace

ConversationStore::ConversationStore()
    : m_connection(QStringLiteral("neural-conversations-%1").arg(g_connections.fetch_add(1))) {}

ConversationStore::~ConversationStore() { close(); }

bool ConversationStore::fail(const QString& what, const QString& detail) {
    m_error = detail.isEmpty() ? what : QStringLiteral("%1: %2").arg(what, detail);
    return false;
}

bool ConversationStore::exec(const QString& sql) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    if (!q.exec(sql))
        return fail(QStringLiteral("database statement failed (%1)").arg(sql.left(60)),
                    q.lastError().text());
    return true;
}

bool ConversationStore::open(const QString& path) {
    close();
    if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QSQLITE")))
        return fail(QStringLiteral("the Qt SQLite driver is missing (libqt6sql6-sqlite)"), {});
    QString openError;
    {
        // Scoped: removeDatabase() below must not see a live handle.
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), m_connection);
        db.setDatabaseName(path);
        if (!db.open()) openError = db.lastError().text();
    }
    if (!openError.isEmpty()) {
        QSqlDatabase::removeDatabase(m_connection);
        return fail(QStringLiteral("cannot open %1").arg(path), openError);
    }
    // WAL + FULL: a committed transaction survives a killed process and a power cut.
    if (!exec(QStringLiteral("PRAGMA journal_mode=WAL")) ||
        !exec(QStringLiteral("PRAGMA synchronous=FULL")) ||
        !exec(QStringLiteral("PRAGMA foreign_keys=ON")) || !migrate()) {
        const QString err = m_error;
        close();
        m_error = QStringLiteral("%1: %2").arg(path, err);
        return false;
    }
    m_error.clear();
    return true;
}

void ConversationStore::close() {
    if (QSqlDatabase::contains(m_connection)) {
        {
            QSqlDatabase db = QSqlDatabase::database(m_connection, false);
            db.close();
        }
        QSqlDatabase::removeDatabase(m_connection);
    }
}

bool ConversationStore::isOpen() const {
    return QSqlDatabase::contains(m_connection) &&
           QSqlDatabase::database(m_connection, false).isOpen();
}

int ConversationStore::schemaVersion() {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    if (!q.exec(QStringLiteral("SELECT version FROM schema_version")) || !q.next()) return 0;
    return q.value(0).toInt();
}

bool ConversationStore::migrate() {
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    // "file is not a database" shows up at the first statement.
    if (!exec(QStringLiteral("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER "
                             "NOT NULL)")))
        return false;
    int version = 0;
    {
        QSqlQuery q(db);
        if (!q.exec(QStringLiteral("SELECT version FROM schema_version")))
            return fail(QStringLiteral("cannot read the schema version"), q.lastError().text());
        if (q.next())
            version = q.value(0).toInt();
        else if (!exec(QStringLiteral("INSERT INTO schema_version (version) VALUES (0)")))
            return false;
    }
    if (version > kSchemaVersion)
        return fail(QStringLiteral("the conversations file has schema version %1, newer than "
                                   "this app's %2; update the app (the file was not changed)")
                        .arg(version)
                        .arg(kSchemaVersion),
                    {});
    for (int v = version; v < kSchemaVersion; ++v) {
        if (!db.transaction())
            return fail(QStringLiteral("cannot begin a transaction"), db.lastError().text());
        bool ok = true;
        for (const QString& sql : migrations()[v]) ok = ok && exec(sql);
        ok = ok && exec(QStringLiteral("UPDATE schema_version SET version = %1").arg(v + 1));
        if (!ok) {
            const QString err = m_error;
            db.rollback();
            return fail(QStringLiteral("migration to schema version %1 failed").arg(v + 1), err);
        }
        if (!db.commit())
            return fail(QStringLiteral("cannot commit migration %1").arg(v + 1),
                        db.lastError().text());
    }
    return true;
}

QList<ConversationInfo> ConversationStore::conversations(const QString& filter) {
    QList<ConversationInfo> out;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    QString sql = QStringLiteral(
        "SELECT id, title, created_ms, updated_ms, system_prompt, reasoning_effort, sampling, "
        "tools FROM conversations c");
    if (!filter.isEmpty())
        sql += QStringLiteral(
            " WHERE instr(lower(title), lower(:f)) > 0 OR EXISTS (SELECT 1 "
            "FROM messages m WHERE m.conversation_id = c.id AND "
            "instr(lower(m.content), lower(:f)) > 0)");
    sql += QStringLiteral(" ORDER BY updated_ms DESC, id DESC");
    q.prepare(sql);
    if (!filter.isEmpty()) q.bindValue(QStringLiteral(":f"), filter);
    if (!q.exec()) {
        fail(QStringLiteral("cannot list conversations"), q.lastError().text());
        return out;
    }
    while (q.next()) {
        ConversationInfo c;
        c.id = q.value(0).toLongLong();
        c.title = q.value(1).toString();
        c.createdMs = q.value(2).toLongLong();
        c.updatedMs = q.value(3).toLongLong();
        c.systemPrompt = q.value(4).toString();
        c.reasoningEffort = q.value(5).toString();
        // Not an object (a damaged or hand-edited row): the defaults.
        c.sampling = SamplingSettings::fromJson(
            QJsonDocument::fromJson(q.value(6).toString().toUtf8()).object());
        c.tools = QJsonDocument::fromJson(q.value(7).toString().toUtf8()).object();
        out.push_back(c);
    }
    return out;
}

std::optional<ConversationInfo> ConversationStore::conversation(qint64 id) {
    for (const ConversationInfo& c : conversations())
        if (c.id == id) return c;
    return std::nullopt;
}

qint64 ConversationStore::createConversation(const QString& title) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        QStringLiteral("INSERT INTO conversations (title, created_ms, updated_ms) "
                       "VALUES (COALESCE(?, ''), ?, ?)"));
    const qint64 now = nowMs();
    q.addBindValue(title);
    q.addBindValue(now);
    q.addBindValue(now);
    if (!q.exec()) {
        fail(QStringLiteral("cannot create a conversation"), q.lastError().text());
        return 0;
    }
    return q.lastInsertId().toLongLong();
}

qint64 ConversationStore::branchConversation(qint64 id, int throughPosition, const QString& title) {
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    if (!db.transaction()) {
        fail(QStringLiteral("cannot begin a transaction"), db.lastError().text());
        return 0;
    }
    QSqlQuery q(db);
    auto rollback = [&](const QString& what) {
        const QString err = q.lastError().text();
        db.rollback();
        fail(what, err);
        return qint64{0};
    };
    q.prepare(
        QStringLiteral("SELECT COUNT(*) FROM messages WHERE conversation_id = ? AND "
                       "position = ?"));
    q.addBindValue(id);
    q.addBindValue(throughPosition);
    if (!q.exec() || !q.next() || q.value(0).toInt() != 1)
        return rollback(
            QStringLiteral("conversation %1 has no message %2").arg(id).arg(throughPosition + 1));
    const qint64 now = nowMs();
    q.prepare(
        QStringLiteral("INSERT INTO conversations (title, created_ms, updated_ms, system_prompt, "
                       "reasoning_effort, sampling, tools) SELECT COALESCE(?, ''), ?, ?, "
                       "system_prompt, reasoning_effort, sampling, tools FROM conversations WHERE "
                       "id = ?"));
    q.addBindValue(title);
    q.addBindValue(now);
    q.addBindValue(now);
    q.addBindValue(id);
    if (!q.exec() || q.numRowsAffected() != 1)
        return rollback(QStringLiteral("cannot branch conversation %1").arg(id));
    const qint64 branch = q.lastInsertId().toLongLong();
    q.prepare(QStringLiteral(
        "INSERT INTO messages (conversation_id, position, role, content, reasoning, created_ms, "
        "stats, versions, version) SELECT ?, position, role, content, reasoning, created_ms, "
        "stats, versions, version FROM messages WHERE conversation_id = ? AND position <= ? "
        "ORDER BY position"));
    q.addBindValue(branch);
    q.addBindValue(id);
    q.addBindValue(throughPosition);
    if (!q.exec()) return rollback(QStringLiteral("cannot copy the messages of the branch"));
    if (!db.commit()) return rollback(QStringLiteral("cannot commit the branch"));
    return branch;
}

bool ConversationStore::renameConversation(qint64 id, const QString& title) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("UPDATE conversations SET title = COALESCE(?, '') WHERE id = ?"));
    q.addBindValue(title);
    q.addBindValue(id);
    if (!q.exec())
        return fail(QStringLiteral("cannot rename conversation %1").arg(id), q.lastError().text());
    return q.numRowsAffected() == 1 || fail(QStringLiteral("no conversation %1").arg(id), {});
}

bool ConversationStore::setConversationSettings(qint64 id, const QString& systemPrompt,
                                                const QString& reasoningEffort) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        QStringLiteral("UPDATE conversations SET system_prompt = COALESCE(?, ''), reasoning_effort "
                       "= COALESCE(?, 'medium') WHERE id = ?"));
    q.addBindValue(systemPrompt);
    q.addBindValue(reasoningEffort);
    q.addBindValue(id);
    if (!q.exec())
        return fail(QStringLiteral("cannot save the settings of conversation %1").arg(id),
                    q.lastError().text());
    return true;
}

bool ConversationStore::deleteConversation(qint64 id) {
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    if (!db.transaction())
        return fail(QStringLiteral("cannot begin a transaction"), db.lastError().text());
    QSqlQuery q(db);
    q.prepare(QStringLiteral("DELETE FROM messages WHERE conversation_id = ?"));
    q.addBindValue(id);
    bool ok = q.exec();
    if (ok) {
        q.prepare(QStringLiteral("DELETE FROM conversations WHERE id = ?"));
        q.addBindValue(id);
        ok = q.exec();
    }
    if (!ok) {
        const QString err = q.lastError().text();
        db.rollback();
        return fail(QStringLiteral("cannot delete conversation %1").arg(id), err);
    }
    return db.commit() || fail(QStringLiteral("commit failed"), db.lastError().text());
}

QList<StoredMessage> ConversationStore::messages(qint64 conversationId) {
    QList<StoredMessage> out;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        QStringLiteral("SELECT id, position, role, content, reasoning, created_ms, stats, "
                       "versions, version FROM messages WHERE conversation_id = ? "
                       "ORDER BY position"));
    q.addBindValue(conversationId);
    if (!q.exec()) {
        fail(QStringLiteral("cannot read messages"), q.lastError().text());
        return out;
    }
    while (q.next()) {
        StoredMessage m;
        m.id = q.value(0).toLongLong();
        m.conversationId = conversationId;
        m.position = q.value(1).toInt();
        m.role = q.value(2).toString();
        m.content = q.value(3).toString();
        m.reasoning = q.value(4).toString();
        m.createdMs = q.value(5).toLongLong();
        m.stats = QJsonDocument::fromJson(q.value(6).toByteArray()).object();
        // A damaged versions column shows the message as it is, with one version.
        m.versions = versionsFromJson(QJsonDocument::fromJson(q.value(7).toByteArray()).array());
        m.version = q.value(8).toInt();
        if (m.versions.size() < 2 || m.version < 0 || m.version >= m.versions.size()) {
            m.versions.clear();
            m.version = 0;
        }
        out.push_back(m);
    }
    return out;
}

StoredMessage ConversationStore::appendMessage(qint64 conversationId, const QString& role,
                                               const QString& content, const QString& reasoning,
                                               const QJsonObject& stats) {
    StoredMessage m;
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    if (!db.transaction()) {
        fail(QStringLiteral("cannot begin a transaction"), db.lastError().text());
        return m;
    }
    QSqlQuery q(db);
    q.prepare(QStringLiteral(
        "SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE conversation_id = ?"));
    q.addBindValue(conversationId);
    bool ok = q.exec() && q.next();
    const int position = ok ? q.value(0).toInt() : 0;
    const qint64 now = nowMs();
    if (ok) {
        q.prepare(
            QStringLiteral("INSERT INTO messages (conversation_id, position, role, "
                           "content, reasoning, created_ms, stats) "
                           "VALUES (?, ?, ?, COALESCE(?, ''), COALESCE(?, ''), ?, ?)"));
        q.addBindValue(conversationId);
        q.addBindValue(position);
        q.addBindValue(role);
        q.addBindValue(content);
        q.addBindValue(reasoning);
        q.addBindValue(now);
        q.addBindValue(QString::fromUtf8(QJsonDocument(stats).toJson(QJsonDocument::Compact)));
        ok = q.exec();
    }
    const qint64 id = ok ? q.lastInsertId().toLongLong() : 0;
    if (ok) {
        q.prepare(QStringLiteral("UPDATE conversations SET updated_ms = ? WHERE id = ?"));
        q.addBindValue(now);
        q.addBindValue(conversationId);
        ok = q.exec() && q.numRowsAffected() == 1;
    }
    if (!ok) {
        const QString err = q.lastError().text();
        db.rollback();
        fail(QStringLiteral("cannot save the message in conversation %1").arg(conversationId),
             err.isEmpty() ? QStringLiteral("no such conversation") : err);
        return m;
    }
    if (!db.commit()) {
        fail(QStringLiteral("commit failed"), db.lastError().text());
        return m;
    }
    m.id = id;
    m.conversationId = conversationId;
    m.position = position;
    m.role = role;
    m.content = content;
    m.reasoning = reasoning;
    m.createdMs = now;
    m.stats = stats;
    return m;
}

bool ConversationStore::truncate(qint64 conversationId, int fromPosition) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("DELETE FROM messages WHERE conversation_id = ? AND position >= ?"));
    q.addBindValue(conversationId);
    q.addBindValue(fromPosition);
    if (!q.exec()) return fail(QStringLiteral("cannot remove messages"), q.lastError().text());
    return true;
}

bool ConversationStore::deleteMessage(qint64 conversationId, int position) {
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    if (!db.transaction())
        return fail(QStringLiteral("cannot begin a transaction"), db.lastError().text());
    QSqlQuery q(db);
    q.prepare(QStringLiteral("DELETE FROM messages WHERE conversation_id = ? AND position = ?"));
    q.addBindValue(conversationId);
    q.addBindValue(position);
    bool ok = q.exec();
    const bool found = ok && q.numRowsAffected() == 1;
    // Two steps through negative positions: UNIQUE (conversation_id, position) is checked per
    // row, so shifting in place could collide midway.
    if (found) {
        q.prepare(
            QStringLiteral("UPDATE messages SET position = -position WHERE "
                           "conversation_id = ? AND position > ?"));
        q.addBindValue(conversationId);
        q.addBindValue(position);
        ok = q.exec();
    }
    if (found && ok) {
        q.prepare(
            QStringLiteral("UPDATE messages SET position = -position - 1 WHERE "
                           "conversation_id = ? AND position < 0"));
        q.addBindValue(conversationId);
        ok = q.exec();
    }
    if (!ok || !found) {
        const QString err = ok ? QStringLiteral("no such message") : q.lastError().text();
        db.rollback();
        return fail(QStringLiteral("cannot delete message %1 of conversation %2")
                        .arg(position)
                        .arg(conversationId),
                    err);
    }
    return db.commit() || fail(QStringLiteral("commit failed"), db.lastError().text());
}

bool ConversationStore::insertMessage(const StoredMessage& m) {
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    if (!db.transaction())
        return fail(QStringLiteral("cannot begin a transaction"), db.lastError().text());
    QSqlQuery q(db);
    auto rollback = [&](const QString& detail) {
        db.rollback();
        return fail(QStringLiteral("cannot put message %1 back into conversation %2")
                        .arg(m.position + 1)
                        .arg(m.conversationId),
                    detail);
    };
    q.prepare(
        QStringLiteral("SELECT (SELECT COUNT(*) FROM conversations WHERE id = ?), "
                       "(SELECT COUNT(*) FROM messages WHERE conversation_id = ?)"));
    q.addBindValue(m.conversationId);
    q.addBindValue(m.conversationId);
    if (!q.exec() || !q.next()) return rollback(q.lastError().text());
    if (q.value(0).toInt() != 1) return rollback(QStringLiteral("no such conversation"));
    if (m.position < 0 || m.position > q.value(1).toInt())
        return rollback(QStringLiteral("the position is past the end"));
    // Two steps through negative positions, as in deleteMessage.
    q.prepare(
        QStringLiteral("UPDATE messages SET position = -position - 1 WHERE "
                       "conversation_id = ? AND position >= ?"));
    q.addBindValue(m.conversationId);
    q.addBindValue(m.position);
    if (!q.exec()) return rollback(q.lastError().text());
    q.prepare(
        QStringLiteral("UPDATE messages SET position = -position WHERE "
                       "conversation_id = ? AND position < 0"));
    q.addBindValue(m.conversationId);
    if (!q.exec()) return rollback(q.lastError().text());
    q.prepare(QStringLiteral(
        "INSERT INTO messages (id, conversation_id, position, role, content, reasoning, "
        "created_ms, stats, versions, version) VALUES (?, ?, ?, ?, COALESCE(?, ''), "
        "COALESCE(?, ''), ?, ?, ?, ?)"));
    q.addBindValue(m.id);
    q.addBindValue(m.conversationId);
    q.addBindValue(m.position);
    q.addBindValue(m.role);
    q.addBindValue(m.content);
    q.addBindValue(m.reasoning);
    q.addBindValue(m.createdMs);
    q.addBindValue(QString::fromUtf8(QJsonDocument(m.stats).toJson(QJsonDocument::Compact)));
    q.addBindValue(versionsColumn(m.versions));
    q.addBindValue(m.versions.size() > 1 ? m.version : 0);
    if (!q.exec()) return rollback(q.lastError().text());
    return db.commit() || fail(QStringLiteral("commit failed"), db.lastError().text());
}

bool ConversationStore::setMessageVersions(qint64 messageId, const QList<MessageVersion>& versions,
                                           int selected) {
    if (selected < 0 || selected >= versions.size())
        return fail(QStringLiteral("version %1 of %2 does not exist")
                        .arg(selected + 1)
                        .arg(versions.size()),
                    {});
    const MessageVersion& shown = versions.at(selected);
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        QStringLiteral("UPDATE messages SET content = COALESCE(?, ''), reasoning = "
                       "COALESCE(?, ''), stats = ?, versions = ?, version = ? WHERE id = ?"));
    q.addBindValue(shown.content);
    q.addBindValue(shown.reasoning);
    q.addBindValue(QString::fromUtf8(QJsonDocument(shown.stats).toJson(QJsonDocument::Compact)));
    q.addBindValue(versionsColumn(versions));
    q.addBindValue(versions.size() > 1 ? selected : 0);
    q.addBindValue(messageId);
    if (!q.exec())
        return fail(QStringLiteral("cannot save the versions of message %1").arg(messageId),
                    q.lastError().text());
    return q.numRowsAffected() == 1 || fail(QStringLiteral("no message %1").arg(messageId), {});
}

bool ConversationStore::takeFollowing(qint64 conversationId, int position, QJsonArray* out) {
    const QList<StoredMessage> all = messages(conversationId);
    for (const StoredMessage& m : all)
        if (m.position > position) out->push_back(messageToJson(m));
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("DELETE FROM messages WHERE conversation_id = ? AND position > ?"));
    q.addBindValue(conversationId);
    q.addBindValue(position);
    if (!q.exec()) return fail(QStringLiteral("cannot set messages aside"), q.lastError().text());
    return true;
}

bool ConversationStore::putFollowing(qint64 conversationId, int position,
                                     const QJsonArray& following) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    for (int i = 0; i < following.size(); ++i) {
        const StoredMessage m = messageFromJson(following.at(i).toObject());
        // Its own id unless another message has it (a branched copy of the conversation).
        q.prepare(QStringLiteral("SELECT COUNT(*) FROM messages WHERE id = ?"));
        q.addBindValue(m.id);
        if (!q.exec() || !q.next())
            return fail(QStringLiteral("cannot put messages back"), q.lastError().text());
        const bool keepId = m.id > 0 && q.value(0).toInt() == 0;
        q.prepare(QStringLiteral("INSERT INTO messages (%1conversation_id, position, role, "
                                 "content, reasoning, created_ms, stats, versions, version) "
                                 "VALUES (%2?, ?, COALESCE(?, 'user'), COALESCE(?, ''), "
                                 "COALESCE(?, ''), ?, ?, ?, ?)")
                      .arg(keepId ? QStringLiteral("id, ") : QString(),
                           keepId ? QStringLiteral("?, ") : QString()));
        if (keepId) q.addBindValue(m.id);
        q.addBindValue(conversationId);
        q.addBindValue(position + 1 + i);
        q.addBindValue(m.role);
        q.addBindValue(m.content);
        q.addBindValue(m.reasoning);
        q.addBindValue(m.createdMs);
        q.addBindValue(compact(m.stats));
        q.addBindValue(versionsColumn(m.versions));
        q.addBindValue(m.versions.size() > 1 ? m.version : 0);
        if (!q.exec())
            return fail(QStringLiteral("cannot put messages back"), q.lastError().text());
    }
    return true;
}

StoredMessage ConversationStore::editUserMessage(qint64 conversationId, int position,
                                                 const QString& content, const QJsonObject& stats) {
    return addVersion(conversationId, position, QStringLiteral("user"), {content, {}, stats, {}},
                      QStringLiteral("cannot edit message %1 of conversation %2"),
                      QStringLiteral("no such message of yours"));
}

StoredMessage ConversationStore::addReplyVersion(qint64 conversationId, int position,
                                                 const MessageVersion& v) {
    return addVersion(conversationId, position, QStringLiteral("assistant"), v,
                      QStringLiteral("cannot add a version to reply %1 of conversation %2"),
                      QStringLiteral("no such reply"));
}

StoredMessage ConversationStore::addVersion(qint64 conversationId, int position,
                                            const QString& role, const MessageVersion& v,
                                            const QString& what, const QString& notFound) {
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    if (!db.transaction()) {
        fail(QStringLiteral("cannot begin a transaction"), db.lastError().text());
        return {};
    }
    auto rollback = [&](const QString& detail) {
        db.rollback();
        fail(what.arg(position + 1).arg(conversationId), detail);
        return StoredMessage{};
    };
    const QList<StoredMessage> all = messages(conversationId);
    if (position < 0 || position >= all.size() || all.at(position).role != role)
        return rollback(notFound);
    const StoredMessage old = all.at(position);
    QJsonArray following;
    if (!takeFollowing(conversationId, position, &following)) return rollback(m_error);
    QList<MessageVersion> versions = old.versions;
    if (versions.isEmpty()) versions.push_back({old.content, old.reasoning, old.stats, {}});
    versions[old.versions.isEmpty() ? 0 : old.version].following = following;
    versions.push_back({v.content, v.reasoning, v.stats, {}});
    const int shown = static_cast<int>(versions.size()) - 1;
    QSqlQuery q(db);
    q.prepare(
        QStringLiteral("UPDATE messages SET content = COALESCE(?, ''), reasoning = "
                       "COALESCE(?, ''), stats = ?, versions = ?, version = ? WHERE id = ?"));
    q.addBindValue(v.content);
    q.addBindValue(v.reasoning);
    q.addBindValue(compact(v.stats));
    q.addBindValue(versionsColumn(versions));
    q.addBindValue(shown);
    q.addBindValue(old.id);
    if (!q.exec() || q.numRowsAffected() != 1) return rollback(q.lastError().text());
    q.prepare(QStringLiteral("UPDATE conversations SET updated_ms = ? WHERE id = ?"));
    q.addBindValue(nowMs());
    q.addBindValue(conversationId);
    if (!q.exec()) return rollback(q.lastError().text());
    if (!db.commit()) return rollback(db.lastError().text());
    StoredMessage m = old;
    m.content = v.content;
    m.reasoning = v.reasoning;
    m.stats = v.stats;
    m.versions = versions;
    m.version = shown;
    return m;
}

bool ConversationStore::showVersion(qint64 conversationId, int position, int index) {
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    if (!db.transaction())
        return fail(QStringLiteral("cannot begin a transaction"), db.lastError().text());
    auto rollback = [&](const QString& detail) {
        db.rollback();
        return fail(
            QStringLiteral("cannot show version %1 of message %2").arg(index + 1).arg(position + 1),
            detail);
    };
    const QList<StoredMessage> all = messages(conversationId);
    if (position < 0 || position >= all.size()) return rollback(QStringLiteral("no such message"));
    const StoredMessage m = all.at(position);
    if (index < 0 || index >= m.versions.size())
        return rollback(QStringLiteral("the message has %1 versions").arg(m.versions.size()));
    if (index == m.version) return rollback(QStringLiteral("that version is shown"));
    QList<MessageVersion> versions = m.versions;
    QJsonArray following;
    if (!takeFollowing(conversationId, position, &following)) return rollback(m_error);
    versions[m.version].following = following;
    const QJsonArray back = std::exchange(versions[index].following, {});
    if (!putFollowing(conversationId, position, back)) return rollback(m_error);
    const MessageVersion& shown = versions.at(index);
    QSqlQuery q(db);
    q.prepare(
        QStringLiteral("UPDATE messages SET content = COALESCE(?, ''), reasoning = "
                       "COALESCE(?, ''), stats = ?, versions = ?, version = ? WHERE id = ?"));
    q.addBindValue(shown.content);
    q.addBindValue(shown.reasoning);
    q.addBindValue(compact(shown.stats));
    q.addBindValue(versionsColumn(versions));
    q.addBindValue(index);
    q.addBindValue(m.id);
    if (!q.exec() || q.numRowsAffected() != 1) return rollback(q.lastError().text());
    return db.commit() || rollback(db.lastError().text());
}

QString ConversationStore::exportMarkdown(qint64 conversationId) {
    const auto info = conversation(conversationId);
    if (!info) return {};
    QString md = QStringLiteral("# %1\n\n").arg(info->title);
    if (!info->systemPrompt.isEmpty())
        md += QStringLiteral("> System prompt: %1\n\n").arg(info->systemPrompt);
    for (const StoredMessage& m : messages(conversationId)) {
        const bool tool = m.role == QLatin1String("tool");
        const QJsonObject call = m.stats.value(QStringLiteral("tool")).toObject();
        md += QStringLiteral("## %1\n\n")
                  .arg(m.role == QLatin1String("user") ? QStringLiteral("User")
                       : tool                          ? QStringLiteral("Tool call: %1 (%2)")
                                    .arg(call.value(QStringLiteral("recipient")).toString(),
                                         call.value(QStringLiteral("status")).toString())
                              : QStringLiteral("Assistant"));
        if (!m.reasoning.isEmpty()) {
            md += QStringLiteral("<details><summary>Reasoning</summary>\n\n%1\n\n</details>\n\n")
                      .arg(m.reasoning);
        }
        if (tool) {
            // The call's arguments and the result the model read, verbatim.
            md += QStringLiteral("```\n%1\n```\n\n```\n%2\n```\n\n")
                      .arg(call.value(QStringLiteral("arguments")).toString(), m.content);
            continue;
        }
        md += m.content + QStringLiteral("\n\n");
    }
    return md;
}

bool ConversationStore::setConversationTools(qint64 id, const QJsonObject& tools) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("UPDATE conversations SET tools = ? WHERE id = ?"));
    q.addBindValue(QString::fromUtf8(QJsonDocument(tools).toJson(QJsonDocument::Compact)));
    q.addBindValue(id);
    if (!q.exec())
        return fail(QStringLiteral("cannot save the tools of conversation %1").arg(id),
                    q.lastError().text());
    return q.numRowsAffected() == 1 || fail(QStringLiteral("no conversation %1").arg(id), {});
}

bool ConversationStore::setConversationSampling(qint64 id, const SamplingSettings& sampling) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("UPDATE conversations SET sampling = ? WHERE id = ?"));
    q.addBindValue(
        QString::fromUtf8(QJsonDocument(sampling.toJson()).toJson(QJsonDocument::Compact)));
    q.addBindValue(id);
    if (!q.exec())
        return fail(QStringLiteral("cannot save the sampling settings of conversation %1").arg(id),
                    q.lastError().text());
    return true;
}

QByteArray ConversationStore::exportJson(qint64 conversationId) {
    const auto info = conversation(conversationId);
    if (!info) return {};
    QJsonArray list;
    for (const StoredMessage& m : messages(conversationId)) {
        QJsonObject o{
            {QStringLiteral("role"), m.role},
            {QStringLiteral("content"), m.content},
            {QStringLiteral("created"),
             QDateTime::fromMSecsSinceEpoch(m.createdMs, Qt::UTC).toString(Qt::ISODateWithMs)}};
        if (!m.reasoning.isEmpty()) o.insert(QStringLiteral("reasoning"), m.reasoning);
        if (!m.stats.isEmpty()) o.insert(QStringLiteral("stats"), m.stats);
        list.push_back(o);
    }
    const QJsonObject root{{QStringLiteral("title"), info->title},
                           {QStringLiteral("system_prompt"), info->systemPrompt},
                           {QStringLiteral("reasoning_effort"), info->reasoningEffort},
                           {QStringLiteral("sampling"), info->sampling.toJson()},
                           {QStringLiteral("messages"), list}};
    return QJsonDocument(root).toJson(QJsonDocument::Indented);
}

bool ConversationStore::integrityOk() {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    return q.exec(QStringLiteral("PRAGMA integrity_check")) && q.next() &&
           q.value(0).toString() == QLatin1String("ok");
}

}  // namespace neural::gui
