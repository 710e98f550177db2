// The conversation list (title, date of the last message), filled from ConversationStore, and
// the delegate that draws one row: the title on one line, elided at the right, and the date
// below it. GUI thread only.
#pragma once

#include <QAbstractListModel>
#include <QDateTime>
#include <QStyledItemDelegate>

#include "conversation/conversationstore.h"

namespace neural::gui {

class ConversationModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Roles { IdRole = Qt::UserRole + 1, DateRole };
    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;

    // Replaces the rows (sorted as given: most recent first).
    void setConversations(const QList<ConversationInfo>& list);
    // Updates the row of c.id in place (title, dates) without moving any row, so the list does
    // not shift under the mouse while a reply is sent; false when it is not listed.
    bool updateInPlace(const ConversationInfo& c);
    const ConversationInfo& at(int row) const { return m_items.at(row); }
    int rowOf(qint64 id) const;  // -1 if absent

    // A title from the first message: plain text (Markdown markup, code fences, links and
    // images reduced to their words), on one line, at most 60 characters; "" when no words.
    static QString titleFromMessage(const QString& markdown);
    // "14:05" today, "Yesterday", "Mon" this week, "Dec 1" this year, else "2025-12-01".
    static QString shortDate(const QDateTime& when, const QDateTime& now);

private:
    QList<ConversationInfo> m_items;
};

class ConversationDelegate : public QStyledItemDelegate {
    Q_OBJECT
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* painter, const QStyleOptionViewItem& option,
               const QModelIndex& index) const override;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

}  // namespace neural::gui
