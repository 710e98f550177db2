#include "conversation/conversationmodel.h"

#include <QApplication>
#include <QLocale>
#include <QPainter>
#include <QRegularExpression>

#include <algorithm>

namespace neural::gui {

namespace {
// The date line's font: a little smaller than the title's (point or pixel sized).
QFont smallFont(const QFont& base) {
    QFont f = base;
    if (base.pointSizeF() > 0)
        f.setPointSizeF(base.pointSizeF() * 0.85);
    else if (base.pixelSize() > 0)
        f.setPixelSize(std::max(1, base.pixelSize() * 85 / 100));
    return f;
}
}  // namespace

int ConversationModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_items.size());
}

QVariant ConversationModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= m_items.size()) return {};
    const ConversationInfo& c = m_items.at(index.row());
    const QDateTime when = QDateTime::fromMSecsSinceEpoch(c.updatedMs);
    switch (role) {
        case Qt::DisplayRole:
            return c.title;
        case DateRole:
            return shortDate(when, QDateTime::currentDateTime());
        case Qt::ToolTipRole:
            return tr("%1\nlast message %2")
                .arg(c.title, QLocale().toString(when, QLocale::LongFormat));
        case Qt::AccessibleTextRole:
            return tr("Conversation %1, %2")
                .arg(c.title, shortDate(when, QDateTime::currentDateTime()));
        case IdRole:
            return c.id;
        default:
            return {};
    }
}

void ConversationModel::setConversations(const QList<ConversationInfo>& list) {
    beginResetModel();
    m_items = list;
    endResetModel();
}

bool ConversationModel::updateInPlace(const ConversationInfo& c) {
    const int row = rowOf(c.id);
    if (row < 0) return false;
    m_items[row] = c;
    emit dataChanged(index(row), index(row));
    return true;
}

int ConversationModel::rowOf(qint64 id) const {
    for (int i = 0; i < m_items.size(); ++i)
        if (m_items[i].id == id) return i;
    return -1;
}

QString ConversationModel::titleFromMessage(const QString& markdown) {
    QStringList words;
    bool inFence = false;
    for (QString line : markdown.split(QLatin1Char('\n'))) {
        const QString t = line.trimmed();
        if (t.startsWith(QLatin1String("```")) || t.startsWith(QLatin1String("~~~"))) {
            // The fence line's language tag is not a word of the title; the code inside is.
            inFence = !inFence;
            continue;
        }
        if (!inFence) {
            static const QRegularExpression block(
                QStringLiteral(R"(^\s*(#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+|\|)+)"));
            line.remove(block);
            static const QRegularExpression rule(QStringLiteral(R"(^\s*([-*_=]\s*){3,}$)"));
            if (rule.match(line).hasMatch()) continue;
            static const QRegularExpression image(QStringLiteral(R"(!\[([^\]]*)\]\([^)]*\))"));
            line.replace(image, QStringLiteral("\\1"));
            static const QRegularExpression link(QStringLiteral(R"(\[([^\]]*)\]\([^)]*\))"));
            line.replace(link, QStringLiteral("\\1"));
            static const QRegularExpression autolink(QStringLiteral(R"(<(https?://[^>]+)>)"));
            line.replace(autolink, QStringLiteral("\\1"));
            // Code spans and emphasis: a pair of marks around text, the opening one not after a
            // word character and the closing one not before one. Lone marks are the user's
            // text ("6*7", "a * b", snake_case) and stay; so does "2*3*4", which reads as
            // arithmetic, not as emphasis inside a word.
            static const QRegularExpression code(QStringLiteral(R"((`+)(.+?)\1)"));
            line.replace(code, QStringLiteral("\\2"));
            static const QRegularExpression emphasis(QStringLiteral(
                R"((?<![\w*_~\\])(\*{1,3}|_{1,3}|~~)(?=\S)(.+?)(?<=[^\s\\])\1(?![\w*_~]))"));
            for (int nested = 0; nested < 3; ++nested) {
                const QString before = line;
                line.replace(emphasis, QStringLiteral("\\2"));
                if (line == before) break;
            }
            line.replace(QLatin1Char('|'), QLatin1Char(' '));
        }
        words << line;
    }
    QString t = words.join(QLatin1Char(' ')).simplified();
    constexpr int kMax = 60;
    if (t.size() > kMax) {
        t = t.left(kMax);
        const int space = t.lastIndexOf(QLatin1Char(' '));
        if (space > kMax / 2) t = t.left(space);
        t += QChar(0x2026);  // the list elides to its width; this bounds what is stored
    }
    return t;
}

QString ConversationModel::shortDate(const QDateTime& when, const QDateTime& now) {
    const QDate d = when.date(), today = now.date();
    const QLocale locale;
    if (d == today) return locale.toString(when.time(), QLocale::ShortFormat);
    if (d == today.addDays(-1)) return tr("Yesterday");
    if (d > today.addDays(-7) && d < today)
        return locale.dayName(d.dayOfWeek(), QLocale::ShortFormat);
    if (d.year() == today.year()) return locale.toString(d, QStringLiteral("MMM d"));
    return d.toString(Qt::ISODate);
}

void ConversationDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option,
                                 const QModelIndex& index) const {
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    const QString title = opt.text;
    opt.text.clear();
    QStyle* style = opt.widget ? opt.widget->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, opt.widget);

    const QRect r = opt.rect.adjusted(6, 3, -6, -3);
    const QPalette::ColorGroup group =
        opt.state & QStyle::State_Enabled ? QPalette::Normal : QPalette::Disabled;
    const QColor text = opt.palette.color(
        group, opt.state & QStyle::State_Selected ? QPalette::HighlightedText : QPalette::Text);
    painter->save();
    painter->setPen(text);
    painter->setFont(opt.font);
    const QFontMetrics fm(opt.font);
    painter->drawText(QRect(r.left(), r.top(), r.width(), fm.height()),
                      Qt::AlignLeft | Qt::AlignVCenter,
                      fm.elidedText(title, Qt::ElideRight, r.width()));
    const QFont small = smallFont(opt.font);
    painter->setFont(small);
    QColor dim = text;
    dim.setAlphaF(0.65f);
    painter->setPen(dim);
    const QFontMetrics sm(small);
    painter->drawText(QRect(r.left(), r.top() + fm.height(), r.width(), sm.height()),
                      Qt::AlignLeft | Qt::AlignVCenter,
                      sm.elidedText(index.data(ConversationModel::DateRole).toString(),
                                    Qt::ElideRight, r.width()));
    painter->restore();
}

QSize ConversationDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex&) const {
    const QFont small = smallFont(option.font);
    // Width 0: the row never asks for more than the view has, so nothing scrolls sideways.
    return {0, QFontMetrics(option.font).height() + QFontMetrics(small).height() + 6};
}

}  // namespace neural::gui
