// The conversation list (title, last change), filled from ConversationStore. GUI thread only.
#pragma once

#include <QAbstractListModel>

#include "conversation/conversationstore.h"

namespace neural::gui {

class ConversationModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Roles { IdRole = Qt::UserRole + 1 };
    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role) const override;

    void setConversations(const QList<ConversationInfo> &list);
    const ConversationInfo &at(int row) const { return m_items.at(row); }
    int rowOf(qint64 id) const;  // -1 if absent

private:
    QList<ConversationInfo> m_items;
};

}  // namespace neural::gui
