// Conversations on disk: one SQLite file through Qt SQL. Crash safety: WAL journal with
// synchronous=FULL and one transaction per change, and a message is written only once it is
// complete (the reply being generated lives in memory), so a crash or kill loses at most the
// message being generated. The schema is versioned (table schema_version, one row) and
// migrated forward step by step inside a transaction at open(); a file from a newer app is
// refused with a clear error instead of being touched.
//
// Used from one thread (the GUI thread); every instance has its own connection.
#pragma once

#include <QJsonArray>
#include <QJsonObject>
#include <optional>
#include <QList>
#include <QSqlDatabase>
#include <QString>

#include "conversation/samplingsettings.h"

namespace neural::gui {

struct ConversationInfo {
    qint64 id = 0;
    QString title;
    qint64 createdMs = 0;  // ms since the epoch (UTC)
    qint64 updatedMs = 0;
    QString systemPrompt;                                // developer instructions; empty: none
    QString reasoningEffort = QStringLiteral("medium");  // low / medium / high
    SamplingSettings sampling;  // a conversation from before schema 4: the defaults
    // Its tools (tools/conversationtools.h ConversationTools::fromJson); {}: the defaults.
    QJsonObject tools;
};

// One version of a message: of an assistant reply (regenerate keeps the earlier ones) or of a
// message of yours (an edit keeps the earlier text); each with what followed it.
struct MessageVersion {
    QString content;
    QString reasoning;
    QJsonObject stats;
    // The messages that followed this version while another one is shown (a JSON array of
    // stored messages, their own versions included; schema v6). Empty for the version shown,
    // whose following messages are the conversation's later rows.
    QJsonArray following;
};

struct StoredMessage {
    qint64 id = 0;
    qint64 conversationId = 0;
    int position = 0;   // 0, 1, ... within the conversation
    QString role;       // "user" / "assistant"
    QString content;    // Markdown text
    QString reasoning;  // analysis channel (assistant), may be empty
    qint64 createdMs = 0;
    QJsonObject stats;  // assistant: tokens, tok/s, ttft_s, reasoning_s, finish, ...
    // Every version of a regenerated reply or an edited message of yours, in order
    // (content/reasoning/stats above are versions[version]); empty for a message with one
    // version.
    QList<MessageVersion> versions;
    int version = 0;
};

class ConversationStore {
public:
    static constexpr int kSchemaVersion = 6;

    ConversationStore();
    ~ConversationStore();
    ConversationStore(const ConversationStore&) = delete;
    ConversationStore& operator=(const ConversationStore&) = delete;

    // Opens (creating) the database and migrates it. False with lastError() on failure
    // (unreadable file, not a database, schema from a newer version, ...).
    bool open(const QString& path);
    void close();
    bool isOpen() const;
    const QString& lastError() const { return m_error; }
    int schemaVersion();

    // Conversations, most recently updated first. `filter`: case-insensitive substring of the
    // title or of any message.
    QList<ConversationInfo> conversations(const QString& filter = {});
    std::optional<ConversationInfo> conversation(qint64 id);
    qint64 createConversation(const QString& title);  // the new id, or 0 on error
    bool renameConversation(qint64 id, const QString& title);
    bool setConversationSettings(qint64 id, const QString& systemPrompt,
                                 const QString& reasoningEffort);
    bool setConversationSampling(qint64 id, const SamplingSettings& sampling);
    bool setConversationTools(qint64 id, const QJsonObject& tools);
    bool deleteConversation(qint64 id);  // with its messages
    // Branch: a new conversation titled `title` with conversation `id`'s settings and copies of
    // its messages at positions 0 ... `throughPosition` (their versions too). One transaction;
    // the new id, or 0 on error (no such conversation or message).
    qint64 branchConversation(qint64 id, int throughPosition, const QString& title);

    QList<StoredMessage> messages(qint64 conversationId);
    // Appends at the end (position = count) and touches the conversation; one transaction,
    // committed before returning. Returns the stored message (id 0 on error).
    StoredMessage appendMessage(qint64 conversationId, const QString& role, const QString& content,
                                const QString& reasoning = {}, const QJsonObject& stats = {});
    // Removes messages with position >= `fromPosition` (edit-and-resend, regenerate).
    bool truncate(qint64 conversationId, int fromPosition);
    // Removes one message; the later ones move up a position. One transaction.
    bool deleteMessage(qint64 conversationId, int position);
    // Puts a deleted message back (Undo) as it was: its id, position, text, stats and versions;
    // the later ones move down a position. One transaction; false when its position is past
    // the end or the conversation is gone.
    bool insertMessage(const StoredMessage& message);
    // Edit that keeps what it replaces: `content` (with `stats`) becomes a new version of the
    // message of yours at `position`, shown, and the messages after it are kept with the version
    // shown until now (its `following`), so the conversation ends with the edited message. One
    // transaction. The stored message (id 0 on error).
    StoredMessage editUserMessage(qint64 conversationId, int position, const QString& content,
                                  const QJsonObject& stats);
    // Regenerate that keeps what it replaces: `v` becomes a new version of the reply at
    // `position`, shown, and the messages after it are kept with the version shown until now
    // (its `following`), so the conversation ends with the new reply. One transaction. The
    // stored message (id 0 on error).
    StoredMessage addReplyVersion(qint64 conversationId, int position, const MessageVersion& v);
    // Shows version `index` of the message at `position` (a message of yours or a reply) with
    // the messages that followed it: the messages after it now go with the version shown until
    // now. A message keeps its id when it comes back (a new one only where that id is taken, as
    // in a conversation branched from this one). One transaction.
    bool showVersion(qint64 conversationId, int position, int index);
    // Stores the versions of a reply and shows versions[selected] (its content, reasoning and
    // stats become the message's). False for an empty list or an index out of range.
    bool setMessageVersions(qint64 messageId, const QList<MessageVersion>& versions, int selected);

    // The conversation as Markdown (title, then each message under its role) and as JSON
    // ({"title", "system_prompt", "reasoning_effort", "sampling", "messages": [...]}).
    QString exportMarkdown(qint64 conversationId);
    QByteArray exportJson(qint64 conversationId);

    // PRAGMA integrity_check == "ok".
    bool integrityOk();

private:
    bool migrate();
    // Within a transaction: removes the messages after `position` and returns them as JSON
    // (MessageVersion::following); puts such a list back after `position`.
    bool takeFollowing(qint64 conversationId, int position, QJsonArray* out);
    // Message `position` (of `role`) gets `v` as its newest, shown version; the shown version
    // keeps the messages after it (takeFollowing). `what` (%1 position, %2 conversation) and
    // `notFound` word the error.
    StoredMessage addVersion(qint64 conversationId, int position, const QString& role,
                             const MessageVersion& v, const QString& what, const QString& notFound);
    bool putFollowing(qint64 conversationId, int position, const QJsonArray& following);
    bool exec(const QString& sql);
    bool fail(const QString& what, const QString& detail);

    QString m_connection;
    QString m_error;
};

}  // namespace neural::gui
