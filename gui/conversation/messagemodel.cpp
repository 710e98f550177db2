#include "conversation/messagemodel.h"

#include <algorithm>

namespace neural::gui {

namespace {
ChatMessage fromStored(const StoredMessage& m) {
    ChatMessage c;
    c.id = m.id;
    c.role = m.role;
    c.content = m.content;
    c.reasoning = m.reasoning;
    c.stats = m.stats;
    c.versions = m.versions;
    c.version = m.version;
    return c;
}
}  // namespace

int MessageModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_items.size());
}

QVariant MessageModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= m_items.size()) return {};
    const ChatMessage& m = m_items.at(index.row());
    switch (role) {
        case Qt::DisplayRole:
        case ContentRole:
            return m.content;
        case RoleRole:
            return m.role;
        case ReasoningRole:
            return m.reasoning;
        case StatsRole:
            return m.stats;
        case StreamingRole:
            return m.streaming;
        default:
            return {};
    }
}

QHash<int, QByteArray> MessageModel::roleNames() const {
    return {{RoleRole, "role"},
            {ContentRole, "content"},
            {ReasoningRole, "reasoning"},
            {StatsRole, "stats"},
            {StreamingRole, "streaming"}};
}

void MessageModel::setMessages(const QList<StoredMessage>& messages) {
    beginResetModel();
    m_items.clear();
    for (const StoredMessage& m : messages) m_items.push_back(fromStored(m));
    endResetModel();
}

void MessageModel::append(const StoredMessage& message) {
    const int row = static_cast<int>(m_items.size());
    beginInsertRows({}, row, row);
    m_items.push_back(fromStored(message));
    endInsertRows();
}

void MessageModel::beginStreaming(const QString& reasoning, const QString& content) {
    const int row = static_cast<int>(m_items.size());
    beginInsertRows({}, row, row);
    ChatMessage m;
    m.role = QStringLiteral("assistant");
    m.reasoning = reasoning;
    m.content = content;
    m.streaming = true;
    m.clock.start();
    m_items.push_back(m);
    endInsertRows();
}

void MessageModel::appendDelta(const QString& reasoning, const QString& content, int pieces) {
    if (!isStreaming()) return;
    ChatMessage& m = m_items.last();
    m.reasoning += reasoning;
    m.content += content;
    // Live stats, in the keys of the stored ones (statsLine shows both).
    const qint64 now = m.clock.elapsed();
    if (m.firstTokenMs < 0 && (!reasoning.isEmpty() || !content.isEmpty())) m.firstTokenMs = now;
    const int tokens = m.stats.value(QStringLiteral("tokens")).toInt() + std::max(pieces, 0);
    m.stats.insert(QStringLiteral("tokens"), tokens);
    if (m.firstTokenMs >= 0) {
        m.stats.insert(QStringLiteral("ttft_s"), m.firstTokenMs / 1000.0);
        const double decode = (now - m.firstTokenMs) / 1000.0;
        if (decode > 0.05 && tokens > 1)
            m.stats.insert(QStringLiteral("tokens_per_second"), (tokens - 1) / decode);
    }
    const QModelIndex i = index(static_cast<int>(m_items.size()) - 1);
    emit dataChanged(i, i);
}

void MessageModel::setQueuedAhead(int jobs) {
    if (!isStreaming() || m_items.last().queuedAhead == jobs) return;
    ChatMessage& m = m_items.last();
    m.queuedAhead = jobs;
    // The time to the first token counts from when the reply's turn came.
    if (jobs == 0 && m.firstTokenMs < 0) m.clock.restart();
    const QModelIndex i = index(static_cast<int>(m_items.size()) - 1);
    emit dataChanged(i, i);
}

void MessageModel::endStreaming(const StoredMessage* stored) {
    if (!isStreaming()) return;
    const int row = static_cast<int>(m_items.size()) - 1;
    if (stored) {
        m_items[row] = fromStored(*stored);
        emit dataChanged(index(row), index(row));
    } else {
        beginRemoveRows({}, row, row);
        m_items.removeLast();
        endRemoveRows();
    }
}

void MessageModel::removeAt(int row) {
    if (row < 0 || row >= m_items.size()) return;
    beginRemoveRows({}, row, row);
    m_items.removeAt(row);
    endRemoveRows();
}

void MessageModel::replace(int row, const StoredMessage& message) {
    if (row < 0 || row >= m_items.size()) return;
    m_items[row] = fromStored(message);
    emit dataChanged(index(row), index(row));
}

void MessageModel::truncate(int fromRow) {
    if (fromRow >= m_items.size()) return;
    beginRemoveRows({}, fromRow, static_cast<int>(m_items.size()) - 1);
    m_items.resize(fromRow);
    endRemoveRows();
}

}  // namespace neural::gui
