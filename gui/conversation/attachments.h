// Text files attached to a message (the message box's Attach button, or files dropped on the
// window): plain text, Markdown, code, read as UTF-8, and the text layer of PDF files (Qt PDF,
// page by page, in builds that have it: canReadPdf). Binary files (a NUL byte), text that is
// not UTF-8, text over kMaxBytes and PDFs without text (encrypted, damaged, scanned) are
// refused with a sentence that says why. An attachment is
// inlined into the message under its name (composeMessage), so the model reads it and the
// context meter counts it; the message's stats remember the typed text's length and the files'
// names, so the bubble shows the text and one chip per file.
#pragma once

#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

namespace neural::gui {

struct Attachment {
    QString name;  // the file's name (no folder)
    QString text;
    qint64 bytes = 0;
};

namespace attachments {

// The most text one file may add (a text file's size; a PDF's extracted text, as UTF-8).
constexpr qint64 kMaxBytes = 1024 * 1024;
// The largest PDF file opened for its text (its images and fonts make it much larger).
constexpr qint64 kMaxPdfBytes = 64 * 1024 * 1024;

// Whether this build reads PDF text (built with Qt PDF: NEURAL_PDF, docs/DESKTOP.md).
bool canReadPdf();

// What the Attach button offers: its tooltip and its file dialog's filters. Both name PDF
// where this build reads PDF text; a build without Qt PDF (the Windows cross build) says that
// PDF text needs the Qt PDF module and how to attach such a text anyway.
QString buttonToolTip();
QString fileDialogFilter();

// Reads `path` into `out`; false with a sentence for the user in `error`. A PDF (by its name or
// its first bytes) gives its text with a line "--- Page N of M ---" before each page's.
bool read(const QString& path, Attachment* out, QString* error);

// The message the model reads: the typed text, then each file under its name in a fenced
// block (a fence longer than any backtick run in the file).
QString composeMessage(const QString& text, const QList<Attachment>& files);

// The stats stored with a message of yours that has attachments ({} without): the typed text's
// length and each file's name and size.
QJsonObject stats(const QString& text, const QList<Attachment>& files);

// What a bubble shows of a stored message: the typed text and the names of its files (the
// whole content and no names for a message without attachments).
struct Shown {
    QString text;
    QStringList names;
};
Shown shown(const QString& content, const QJsonObject& stats);

// An edit of a stored message of yours: `text` replaces its typed text and its files stay
// (inlined after it as before); `newStats` gets the stats to store with it.
QString editMessage(const QString& content, const QJsonObject& stats, const QString& text,
                    QJsonObject* newStats);

// "12.3 KB" for a chip.
QString sizeText(qint64 bytes);

}  // namespace attachments
}  // namespace neural::gui
