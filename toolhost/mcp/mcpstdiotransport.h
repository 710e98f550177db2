// MCP over stdio: the server is a child process; each message is one line of JSON on its
// stdin / stdout; stderr is its log, kept as a ring of recent lines for error messages.
#pragma once

#include <QProcess>
#include <QStringList>

#include "mcpserverconfig.h"
#include "mcptransport.h"

namespace neural::toolhost {

class McpStdioTransport : public McpTransport {
    Q_OBJECT
public:
    // A line longer than this ends the connection (a server stuck writing without newlines).
    static constexpr qint64 kMaxMessageBytes = 64ll * 1024 * 1024;
    static constexpr int kStderrLines = 40;

    explicit McpStdioTransport(const McpServerConfig& config, QObject* parent = nullptr);
    ~McpStdioTransport() override;

    void open() override;
    void send(const QByteArray& message, qint64 requestId) override;
    void close() override;
    QString diagnostics() const override;

    // The process, for tests that kill it.
    QProcess* process() const { return process_; }

private:
    void readStdout();
    void readStderr();
    void keepLine(const QString& line);
    void onFinished(int exitCode, QProcess::ExitStatus status);
    void onError(QProcess::ProcessError error);
    void closeWith(const QString& problem);

    McpServerConfig config_;
    QProcess* process_ = nullptr;
    QByteArray stdout_;
    QByteArray stderr_;
    QStringList recent_;  // the last kStderrLines lines of stderr (and skipped stdout)
    bool closed_ = false;
};

}  // namespace neural::toolhost
