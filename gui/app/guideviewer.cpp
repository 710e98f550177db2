#include "app/guideviewer.h"

#include <QDesktopServices>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QPushButton>
#include <QShortcut>
#include <QTextBrowser>
#include <QVBoxLayout>

// The guide's resources live in the static neural_gui library, whose objects the linker takes
// only when referenced: this reference keeps them (outside any namespace, as Qt requires).
static void initGuideResources() { Q_INIT_RESOURCE(guide); }

namespace neural::gui {

QUrl guideUrl(const QString& page) {
    initGuideResources();
    return QUrl(QStringLiteral("qrc:/guide/") + page);
}

GuideViewer::GuideViewer(const QString& page, QWidget* parent) : QDialog(parent) {
    initGuideResources();
    setWindowTitle(tr("Neural user guide"));
    setAccessibleName(tr("User guide"));
    resize(900, 720);
    auto* v = new QVBoxLayout(this);
    auto* nav = new QHBoxLayout;
    auto* back = new QPushButton(tr("Back"), this);
    back->setAccessibleName(tr("Back to the previous page"));
    auto* desktop = new QPushButton(tr("Desktop app"), this);
    auto* guide = new QPushButton(tr("Commands and API"), this);
    guide->setToolTip(tr("USER_GUIDE.md: the neural command, the API server, models and stores"));
    nav->addWidget(back);
    nav->addWidget(desktop);
    nav->addWidget(guide);
    nav->addStretch(1);
    v->addLayout(nav);
    m_browser = new QTextBrowser(this);
    m_browser->setAccessibleName(tr("Guide text"));
    m_browser->setOpenLinks(false);  // follow() decides: guide pages here, the web outside
    v->addWidget(m_browser, 1);
    m_note = new QLabel(this);
    m_note->setWordWrap(true);
    m_note->hide();
    v->addWidget(m_note);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    v->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(back, &QPushButton::clicked, m_browser, &QTextBrowser::backward);
    connect(m_browser, &QTextBrowser::backwardAvailable, back, &QPushButton::setEnabled);
    back->setEnabled(false);
    connect(desktop, &QPushButton::clicked, this,
            [this] { showPage(QStringLiteral("DESKTOP.md")); });
    connect(guide, &QPushButton::clicked, this,
            [this] { showPage(QStringLiteral("USER_GUIDE.md")); });
    connect(m_browser, &QTextBrowser::anchorClicked, this, &GuideViewer::follow);
    auto* backKey = new QShortcut(QKeySequence::Back, this);
    connect(backKey, &QShortcut::activated, m_browser, &QTextBrowser::backward);
    showPage(page);
}

bool GuideViewer::showPage(const QString& page) {
    const QString file = page.section(QLatin1Char('#'), 0, 0);
    const QUrl url = guideUrl(file);
    if (!QFileInfo::exists(QStringLiteral(":/guide/") + file)) {
        m_note->setText(tr("%1 is not part of the guide shipped with the app.").arg(file));
        m_note->show();
        return false;
    }
    m_note->hide();
    QUrl target = url;
    if (page.contains(QLatin1Char('#'))) target.setFragment(page.section(QLatin1Char('#'), 1));
    m_browser->setSource(target, QTextDocument::MarkdownResource);
    return true;
}

void GuideViewer::follow(const QUrl& link) {
    if (link.scheme() == QLatin1String("http") || link.scheme() == QLatin1String("https") ||
        link.scheme() == QLatin1String("mailto")) {
        QDesktopServices::openUrl(link);
        return;
    }
    // A link within the page, or to another guide page (relative, resolved against this one).
    const QUrl resolved = m_browser->source().resolved(link);
    if (resolved.scheme() == QLatin1String("qrc") &&
        resolved.path().endsWith(QLatin1String(".md"))) {
        const QString page =
            QFileInfo(resolved.path()).fileName() +
            (resolved.hasFragment() ? QStringLiteral("#") + resolved.fragment() : QString());
        showPage(page);
        return;
    }
    if (link.hasFragment() && link.path().isEmpty()) {
        m_browser->scrollToAnchor(link.fragment());
        return;
    }
    m_note->setText(tr("%1 is not part of the guide shipped with the app.").arg(link.toString()));
    m_note->show();
}

}  // namespace neural::gui
