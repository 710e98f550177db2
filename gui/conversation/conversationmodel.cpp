#include "conversation/conversationmodel.h"

#include <QDateTime>

namespace neural::gui {

int ConversationModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_items.size());
}

QVariant ConversationModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_items.size())
        return {};
    const ConversationInfo &c = m_items.at(index.row());
    switch (role) {
    case Qt::DisplayRole: return c.title;
    case Qt::ToolTipRole:
        return tr("%1\nlast message %2")
            .arg(c.title, QDateTime::fromMSecsSinceEpoch(c.updatedMs).toString(Qt::TextDate));
    case Qt::AccessibleTextRole: return tr("Conversation %1").arg(c.title);
    case IdRole: return c.id;
    default: return {};
    }
}

void ConversationModel::setConversations(const QList<ConversationInfo> &list)
{
    beginResetModel();
    m_items = list;
    endResetModel();
}

int ConversationModel::rowOf(qint64 id) const
{
    for (int i = 0; i < m_items.size(); ++i)
        if (m_items[i].id == id)
            return i;
    return -1;
}

}  // namespace neural::gui
