#include "mcpstdiotransport.h"

#include <QFileInfo>
#include <QProcessEnvironment>
#include <QStandardPaths>

namespace neural::toolhost {

McpStdioTransport::McpStdioTransport(const McpServerConfig& config, QObject* parent)
    : McpTransport(parent), config_(config) {}

McpStdioTransport::~McpStdioTransport() { close(); }

void McpStdioTransport::open() {
    process_ = new QProcess(this);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (auto it = config_.env.cbegin(); it != config_.env.cend(); ++it)
        env.insert(it.key(), it.value());
    process_->setProcessEnvironment(env);
    if (!config_.workingDirectory.isEmpty())
        process_->setWorkingDirectory(config_.workingDirectory);
    QString program = config_.command;
    QStringList args = config_.args;
#ifdef Q_OS_WIN
    // npx, npm and many launchers are batch files, which CreateProcess cannot start: run them
    // through cmd.exe as Claude Desktop's documentation tells users to do by hand.
    const QString found = QStandardPaths::findExecutable(program);
    const QString suffix = QFileInfo(found).suffix().toLower();
    if (!found.isEmpty() && (suffix == QLatin1String("cmd") || suffix == QLatin1String("bat"))) {
        args.prepend(found);
        args.prepend(QStringLiteral("/c"));
        args.prepend(QStringLiteral("/d"));
        program = qEnvironmentVariable("COMSPEC", QStringLiteral("cmd.exe"));
    }
#endif
    connect(process_, &QProcess::started, this, &McpTransport::opened);
    connect(process_, &QProcess::readyReadStandardOutput, this, &McpStdioTransport::readStdout);
    connect(process_, &QProcess::readyReadStandardError, this, &McpStdioTransport::readStderr);
    connect(process_, &QProcess::finished, this, &McpStdioTransport::onFinished);
    connect(process_, &QProcess::errorOccurred, this, &McpStdioTransport::onError);
    process_->start(program, args, QIODevice::ReadWrite);
}

void McpStdioTransport::send(const QByteArray& message, qint64 requestId) {
    if (process_ == nullptr || closed_ || process_->state() != QProcess::Running) {
        if (requestId >= 0)
            emit requestFailed(requestId, QStringLiteral("the server is not running"));
        return;
    }
    // One message per line: the JSON text has no raw newlines (dump escapes them).
    QByteArray line = message;
    line.append('\n');
    process_->write(line);
}

void McpStdioTransport::readStdout() {
    if (closed_ || process_ == nullptr) return;
    stdout_.append(process_->readAllStandardOutput());
    qsizetype start = 0;
    for (;;) {
        const qsizetype nl = stdout_.indexOf('\n', start);
        if (nl < 0) break;
        QByteArray line = stdout_.mid(start, nl - start);
        start = nl + 1;
        if (line.endsWith('\r')) line.chop(1);
        if (line.trimmed().isEmpty()) continue;
        emit messageReceived(line);
        if (closed_) return;  // a receiver closed us
    }
    stdout_.remove(0, start);
    if (stdout_.size() > kMaxMessageBytes) {
        closeWith(QStringLiteral("the server sent a message longer than %1 MiB")
                      .arg(kMaxMessageBytes / (1024 * 1024)));
    }
}

void McpStdioTransport::keepLine(const QString& line) {
    recent_ << (line.size() > 500 ? line.left(500) + QStringLiteral("...") : line);
    while (recent_.size() > kStderrLines) recent_.removeFirst();
}

void McpStdioTransport::readStderr() {
    if (process_ == nullptr) return;
    stderr_.append(process_->readAllStandardError());
    qsizetype start = 0;
    for (;;) {
        const qsizetype nl = stderr_.indexOf('\n', start);
        if (nl < 0) break;
        const QString line = QString::fromUtf8(stderr_.mid(start, nl - start)).trimmed();
        start = nl + 1;
        if (!line.isEmpty()) keepLine(line);
    }
    stderr_.remove(0, start);
    if (stderr_.size() > 64 * 1024) {  // a log line without end: keep its tail
        keepLine(QString::fromUtf8(stderr_.right(500)));
        stderr_.clear();
    }
}

QString McpStdioTransport::diagnostics() const {
    QStringList lines = recent_;
    const QString partial = QString::fromUtf8(stderr_).trimmed();
    if (!partial.isEmpty()) lines << partial.right(500);
    return lines.join(QLatin1Char('\n'));
}

void McpStdioTransport::onFinished(int exitCode, QProcess::ExitStatus status) {
    if (closed_) return;
    readStderr();
    readStdout();  // answers written just before exiting still count
    if (closed_) return;
    closed_ = true;
    const QString problem = status == QProcess::CrashExit
                                ? QStringLiteral("the server crashed")
                                : QStringLiteral("the server exited with code %1").arg(exitCode);
    emit closed(problem, diagnostics());
}

void McpStdioTransport::onError(QProcess::ProcessError error) {
    if (closed_ || error != QProcess::FailedToStart) return;  // others end in finished()
    closed_ = true;
    emit closed(
        QStringLiteral("could not start \"%1\": %2").arg(config_.command, process_->errorString()),
        diagnostics());
}

void McpStdioTransport::closeWith(const QString& problem) {
    const QString detail = diagnostics();
    close();
    emit closed(problem, detail);
}

void McpStdioTransport::close() {
    closed_ = true;
    if (process_ == nullptr) return;
    QProcess* p = process_;
    process_ = nullptr;
    p->disconnect(this);
    if (p->state() != QProcess::NotRunning) {
        // The protocol's shutdown: close stdin and give the server a moment, then kill it.
        p->closeWriteChannel();
        if (!p->waitForFinished(1000)) {
            p->kill();
            p->waitForFinished(2000);
        }
    }
    p->deleteLater();
}

}  // namespace neural::toolhost
