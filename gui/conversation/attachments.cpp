#include "conversation/attachments.h"

#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QLocale>
#include <QStringDecoder>

#include <algorithm>

#ifdef NEURAL_HAVE_QT_PDF
#include <QPdfDocument>
#include <QPdfSelection>
#endif

namespace neural::gui::attachments {

namespace {
QString tr(const char* text) { return QCoreApplication::translate("Attachments", text); }

// The longest run of backticks in `text`.
int longestBacktickRun(const QString& text) {
    int longest = 0, run = 0;
    for (const QChar c : text) {
        run = c == QLatin1Char('`') ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    return longest;
}
}  // namespace

QString sizeText(qint64 bytes) { return QLocale().formattedDataSize(bytes, 1); }

bool canReadPdf() {
#ifdef NEURAL_HAVE_QT_PDF
    return true;
#else
    return false;
#endif
}

QString buttonToolTip() {
    return canReadPdf()
               ? tr("Attach files to the message: plain text, Markdown, code, and the text of "
                    "PDF files (or drop them on the window)")
               : tr("Attach text files to the message: plain text, Markdown, code (or drop them "
                    "on the window). PDF files cannot be attached: reading their text needs the "
                    "Qt PDF module, which this build of Neural does not have; copy the text "
                    "into a text file instead.");
}

QString fileDialogFilter() {
    const QString text =
        tr("Text and code (*.txt *.md *.markdown *.rst *.csv *.tsv *.json *.jsonl *.yaml *.yml "
           "*.toml *.ini *.xml *.html *.css *.js *.ts *.py *.c *.h *.cpp *.hpp *.cc *.cs *.java "
           "*.kt *.go *.rs *.rb *.php *.sh *.ps1 *.bat *.sql *.log *.tex)");
    const QString all = tr("All files (*)");
    if (!canReadPdf()) return text + QStringLiteral(";;") + all;
    return tr("Text, code and PDF (%1 *.pdf)").arg(text.section(QLatin1Char('('), 1).chopped(1)) +
           QStringLiteral(";;") + text + QStringLiteral(";;") + tr("PDF (*.pdf)") +
           QStringLiteral(";;") + all;
}

namespace {

// A PDF by its name or its signature.
bool isPdf(const QFileInfo& info) {
    if (info.suffix().compare(QLatin1String("pdf"), Qt::CaseInsensitive) == 0) return true;
    QFile f(info.filePath());
    return f.open(QIODevice::ReadOnly) && f.read(5) == "%PDF-";
}

bool readPdf(const QFileInfo& info, Attachment* out, QString* error) {
    const QString name = info.fileName();
#ifdef NEURAL_HAVE_QT_PDF
    if (info.size() > kMaxPdfBytes) {
        *error = tr("%1 is too large to read (%2; PDF files up to %3).")
                     .arg(name, sizeText(info.size()), sizeText(kMaxPdfBytes));
        return false;
    }
    QPdfDocument doc;
    switch (doc.load(info.filePath())) {
        case QPdfDocument::Error::None:
            break;
        case QPdfDocument::Error::IncorrectPassword:
        case QPdfDocument::Error::UnsupportedSecurityScheme:
            *error = tr("%1 is encrypted (protected by a password): its text cannot be read. "
                        "Save an unprotected copy to attach it.")
                         .arg(name);
            return false;
        case QPdfDocument::Error::FileNotFound:
            *error = tr("%1 cannot be read.").arg(name);
            return false;
        default:
            *error = tr("%1 is damaged or not a PDF file: its text cannot be read.").arg(name);
            return false;
    }
    const int pages = doc.pageCount();
    QString text;
    bool anyText = false;
    for (int page = 0; page < pages; ++page) {
        const QString pageText = doc.getAllText(page).text();
        anyText = anyText || !pageText.trimmed().isEmpty();
        text += tr("--- Page %1 of %2 ---\n").arg(page + 1).arg(pages);
        text += pageText.trimmed();
        text += QLatin1Char('\n');
        if (text.size() > kMaxBytes) break;  // over the limit whatever follows
    }
    if (pages <= 0 || !anyText) {
        *error = tr("%1 has no text layer (a scanned or image-only PDF): there is no text to "
                    "attach.")
                     .arg(name);
        return false;
    }
    // The PDF's text is what the model reads: the text limit applies to it.
    const qint64 bytes = text.toUtf8().size();
    if (bytes > kMaxBytes) {
        *error =
            tr("%1 has too much text to attach (more than %2).").arg(name, sizeText(kMaxBytes));
        return false;
    }
    out->name = name;
    out->text = text;
    out->bytes = bytes;
    return true;
#else
    Q_UNUSED(out);
    *error = tr("%1 is a PDF: this build of Neural cannot read PDF text (reading it needs the Qt "
                "PDF module, which this build does not have). Copy the text into a text file to "
                "attach it.")
                 .arg(name);
    return false;
#endif
}

}  // namespace

bool read(const QString& path, Attachment* out, QString* error) {
    const QFileInfo info(path);
    const QString name = info.fileName();
    if (!info.exists() || !info.isFile()) {
        *error = tr("%1 is not a file that can be attached.").arg(name.isEmpty() ? path : name);
        return false;
    }
    if (isPdf(info)) return readPdf(info, out, error);
    if (info.size() > kMaxBytes) {
        *error = tr("%1 is too large to attach (%2; at most %3 of text).")
                     .arg(name, sizeText(info.size()), sizeText(kMaxBytes));
        return false;
    }
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        *error = tr("%1 cannot be read: %2").arg(name, f.errorString());
        return false;
    }
    // Read one byte past the limit: a file that grew since the check is still refused.
    const QByteArray data = f.read(kMaxBytes + 1);
    if (data.size() > kMaxBytes) {
        *error =
            tr("%1 is too large to attach (at most %2 of text).").arg(name, sizeText(kMaxBytes));
        return false;
    }
    if (data.contains('\0')) {
        *error = tr("%1 looks like a binary file (an image, a program or a document format): "
                    "only text files can be attached (plain text, Markdown, code).")
                     .arg(name);
        return false;
    }
    QStringDecoder decoder(QStringDecoder::Utf8);
    QString text = decoder.decode(data);
    if (decoder.hasError()) {
        *error = tr("%1 is not UTF-8 text: save it as UTF-8 to attach it.").arg(name);
        return false;
    }
    if (text.startsWith(QChar(0xFEFF))) text.remove(0, 1);  // a byte order mark
    out->name = name;
    out->text = text;
    out->bytes = data.size();
    return true;
}

QString composeMessage(const QString& text, const QList<Attachment>& files) {
    QString out = text;
    for (const Attachment& a : files) {
        const QString fence(std::max(3, longestBacktickRun(a.text) + 1), QLatin1Char('`'));
        if (!out.isEmpty()) out += QStringLiteral("\n\n");
        out += QStringLiteral("File: %1\n%2\n%3").arg(a.name, fence, a.text);
        if (!a.text.endsWith(QLatin1Char('\n'))) out += QLatin1Char('\n');
        out += fence;
    }
    return out;
}

QJsonObject stats(const QString& text, const QList<Attachment>& files) {
    if (files.isEmpty()) return {};
    QJsonArray list;
    for (const Attachment& a : files)
        list.push_back(
            QJsonObject{{QStringLiteral("name"), a.name}, {QStringLiteral("bytes"), a.bytes}});
    return {{QStringLiteral("attachments"), list},
            {QStringLiteral("text_length"), static_cast<qint64>(text.size())}};
}

Shown shown(const QString& content, const QJsonObject& stats) {
    const QJsonArray list = stats.value(QStringLiteral("attachments")).toArray();
    const qint64 length = stats.value(QStringLiteral("text_length")).toInteger(-1);
    if (list.isEmpty() || length < 0 || length > content.size()) return {content, {}};
    Shown s;
    s.text = content.left(static_cast<int>(length));
    for (const QJsonValue& v : list) {
        const QJsonObject o = v.toObject();
        s.names << QStringLiteral("%1 (%2)").arg(
            o.value(QStringLiteral("name")).toString(),
            sizeText(o.value(QStringLiteral("bytes")).toInteger()));
    }
    return s;
}

QString editMessage(const QString& content, const QJsonObject& stats, const QString& text,
                    QJsonObject* newStats) {
    const QJsonArray list = stats.value(QStringLiteral("attachments")).toArray();
    const qint64 length = stats.value(QStringLiteral("text_length")).toInteger(-1);
    *newStats = stats;
    if (list.isEmpty() || length < 0 || length > content.size()) return text;
    // composeMessage's layout: the typed text, a blank line when there is one, then the files.
    QString files = content.mid(static_cast<int>(length));
    if (length > 0 && files.startsWith(QStringLiteral("\n\n"))) files.remove(0, 2);
    newStats->insert(QStringLiteral("text_length"), static_cast<qint64>(text.size()));
    return text.isEmpty() ? files : text + QStringLiteral("\n\n") + files;
}

}  // namespace neural::gui::attachments
