#include "conversation/messagemodel.h"

namespace neural::gui {

namespace {
ChatMessage fromStored(const StoredMessage &m)
{
    return {m.id, m.role, m.content, m.reasoning, m.stats, false};
}
}  // namespace

int MessageModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_items.size());
}

QVariant MessageModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_items.size())
        return {};
    const ChatMessage &m = m_items.at(index.row());
    switch (role) {
    case Qt::DisplayRole:
    case ContentRole: return m.content;
    case RoleRole: return m.role;
    case ReasoningRole: return m.reasoning;
    case StatsRole: return m.stats;
    case StreamingRole: return m.streaming;
    default: return {};
    }
}

QHash<int, QByteArray> MessageModel::roleNames() const
{
    return {{RoleRole, "role"},
            {ContentRole, "content"},
            {ReasoningRole, "reasoning"},
            {StatsRole, "stats"},
            {StreamingRole, "streaming"}};
}

void MessageModel::setMessages(const QList<StoredMessage> &messages)
{
    beginResetModel();
    m_items.clear();
    for (const StoredMessage &m : messages)
        m_items.push_back(fromStored(m));
    endResetModel();
}

void MessageModel::append(const StoredMessage &message)
{
    const int row = static_cast<int>(m_items.size());
    beginInsertRows({}, row, row);
    m_items.push_back(fromStored(message));
    endInsertRows();
}

void MessageModel::beginStreaming()
{
    const int row = static_cast<int>(m_items.size());
    beginInsertRows({}, row, row);
    ChatMessage m;
    m.role = QStringLiteral("assistant");
    m.streaming = true;
    m_items.push_back(m);
    endInsertRows();
}

void MessageModel::appendDelta(const QString &reasoning, const QString &content)
{
    if (!isStreaming())
        return;
    ChatMessage &m = m_items.last();
    m.reasoning += reasoning;
    m.content += content;
    const QModelIndex i = index(static_cast<int>(m_items.size()) - 1);
    emit dataChanged(i, i);
}

void MessageModel::endStreaming(const StoredMessage *stored)
{
    if (!isStreaming())
        return;
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

void MessageModel::truncate(int fromRow)
{
    if (fromRow >= m_items.size())
        return;
    beginRemoveRows({}, fromRow, static_cast<int>(m_items.size()) - 1);
    m_items.resize(fromRow);
    endRemoveRows();
}

}  // namespace neural::gui
