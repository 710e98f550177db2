// Logging of the desktop app: everything goes through spdlog (the engine logs there too) into a
// rotating file in the app data folder (5 MiB x 3) and into LogHub, whose `line` signal feeds the
// logs panel on the GUI thread. Qt's own messages (qDebug/qWarning, the server's categories)
// are routed into spdlog as well.
#pragma once

#include <QObject>
#include <QString>

namespace neural::gui {

class LogHub : public QObject {
    Q_OBJECT
public:
    static LogHub& instance();
    // Called by the spdlog sink from any thread; the signal is delivered queued.
    void post(const QString& line);

signals:
    void line(const QString& text);
};

// Installs the sinks on spdlog's default logger; `logFile` empty: no file. Returns the file path
// used (or "" when it could not be opened: the app then logs to the panel only).
QString installLogging(const QString& logFile);

}  // namespace neural::gui
