// Help > User guide (F1): the project's Markdown guides rendered in the app (QTextBrowser's
// Markdown reader), from copies compiled into the executable (the ":/guide" resources that
// gui/CMakeLists.txt generates from docs/). Nothing depends on a program registered for .md
// files, so it opens on Windows and Linux alike, installed or run from the build tree. Links
// between the guides open in the viewer; web links in the browser.
#pragma once

#include <QDialog>
#include <QUrl>

class QTextBrowser;
class QLabel;

namespace neural::gui {

class GuideViewer : public QDialog {
    Q_OBJECT
public:
    // Opens `page` (a file name under docs/, e.g. "DESKTOP.md").
    explicit GuideViewer(const QString& page = QStringLiteral("DESKTOP.md"),
                         QWidget* parent = nullptr);
    // Shows docs/`page` (with an optional "#anchor"); false when the guide has no such page.
    bool showPage(const QString& page);
    QTextBrowser* browser() const { return m_browser; }

private:
    void follow(const QUrl& link);

    QTextBrowser* m_browser;
    QLabel* m_note;
};

// The resource URL of docs/`page` ("qrc:/guide/DESKTOP.md"), whether or not it exists.
QUrl guideUrl(const QString& page);

}  // namespace neural::gui
