// The messages of the open conversation, plus the reply being generated (the last row while
// streaming). GUI thread only: the engine's deltas reach it through EngineHost's queued signals.
#pragma once

#include <QAbstractListModel>
#include <QElapsedTimer>
#include <QJsonObject>
#include <QList>

#include "conversation/conversationstore.h"

namespace neural::gui {

struct ChatMessage {
    qint64 id = 0;  // 0 while streaming (not stored yet)
    QString role;
    QString content;
    QString reasoning;
    QJsonObject stats;  // while streaming: tokens, tokens_per_second, ttft_s so far
    bool streaming = false;
    QList<MessageVersion> versions;  // of a regenerated reply / an edited message; empty: one
    int version = 0;                 // the one shown, an index into `versions`
    // While streaming: since the request, and the time of the first text (ms, -1: none yet).
    QElapsedTimer clock;
    qint64 firstTokenMs = -1;
    // While streaming: the engine jobs (API requests) this reply waits behind; 0 once it runs.
    int queuedAhead = 0;
};

class MessageModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Roles {
        RoleRole = Qt::UserRole + 1,
        ContentRole,
        ReasoningRole,
        StatsRole,
        StreamingRole
    };

    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    void setMessages(const QList<StoredMessage>& messages);
    void append(const StoredMessage& message);
    const ChatMessage& at(int row) const { return m_items.at(row); }
    const QList<ChatMessage>& items() const { return m_items; }

    // The reply being generated; a continued reply starts with its text so far.
    void beginStreaming(const QString& reasoning = {}, const QString& content = {});
    // `pieces`: the text pieces (about one per token) in this delta, for the live tok/s.
    void appendDelta(const QString& reasoning, const QString& content, int pieces = 0);
    // Replaces the streaming row by the stored reply (or drops it when `stored` is null).
    void endStreaming(const StoredMessage* stored);
    // The jobs the streaming reply waits behind (EngineHost::jobsAhead).
    void setQueuedAhead(int jobs);
    bool isStreaming() const { return !m_items.isEmpty() && m_items.last().streaming; }
    void truncate(int fromRow);
    void removeAt(int row);
    // Replaces a row by its stored state (another version shown, edited settings).
    void replace(int row, const StoredMessage& message);

private:
    QList<ChatMessage> m_items;
};

}  // namespace neural::gui
