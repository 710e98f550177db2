#include "tool.h"

namespace neural::toolhost {

QString statusName(ToolOutcome::Status status) {
    switch (status) {
        case ToolOutcome::Status::ok:
            return QStringLiteral("ok");
        case ToolOutcome::Status::toolError:
            return QStringLiteral("tool_error");
        case ToolOutcome::Status::failed:
            return QStringLiteral("failed");
        case ToolOutcome::Status::timedOut:
            return QStringLiteral("timed_out");
        case ToolOutcome::Status::cancelled:
            return QStringLiteral("cancelled");
        case ToolOutcome::Status::denied:
            return QStringLiteral("denied");
    }
    return QStringLiteral("failed");
}

void setResultText(ToolOutcome& outcome, const QString& text, qint64 maxBytes) {
    const QByteArray utf8 = text.toUtf8();
    outcome.fullBytes = utf8.size();
    if (maxBytes < 0 || utf8.size() <= maxBytes) {
        outcome.text = text;
        outcome.truncated = false;
        return;
    }
    qsizetype cut = static_cast<qsizetype>(maxBytes);
    // Back up to the first byte of a character (continuation bytes are 10xxxxxx).
    while (cut > 0 && (static_cast<unsigned char>(utf8[cut]) & 0xC0) == 0x80) --cut;
    outcome.text =
        QString::fromUtf8(utf8.left(cut)) +
        QStringLiteral(
            "\n[... %1 of %2 bytes left out: the result was longer than the %3-byte limit]")
            .arg(utf8.size() - cut)
            .arg(utf8.size())
            .arg(maxBytes);
    outcome.truncated = true;
}

}  // namespace neural::toolhost
