// The embedded OpenAI endpoint: an ApiServer on the app's engine (EngineHost's model and its
// GenerationQueue, so API requests and the GUI's chat take turns on one engine). Started and
// stopped from the tray menu, or from the main window when there is no system tray. Follows
// model reloads: it stops before the model goes and restarts on the new one if it was running.
#pragma once

#include <QObject>
#include <QString>

#include <memory>

namespace neural::server {
class ApiServer;
}

namespace neural::gui {

class EngineHost;

class ServerControl : public QObject {
    Q_OBJECT
public:
    explicit ServerControl(EngineHost* engine, QObject* parent = nullptr);
    ~ServerControl() override;

    // Listens on `port` (0: any free port) with the Settings page's API key, LAN access (every
    // interface instead of 127.0.0.1) and browser origins (appsettingsdialog.h). False with
    // lastError() when there is no model yet or the port cannot be bound.
    bool start(quint16 port);
    void stop();
    bool isRunning() const { return m_server != nullptr; }
    quint16 port() const;
    // "http://127.0.0.1:PORT/v1" while running (this PC's address also with LAN access), else "".
    QString url() const;
    QString lastError() const { return m_error; }

signals:
    void runningChanged(bool running, const QString& url);
    void failed(const QString& error);

private:
    EngineHost* m_engine;
    std::unique_ptr<server::ApiServer> m_server;
    quint16 m_wantedPort = 0;
    bool m_restartOnReady = false;
    QString m_error;
};

}  // namespace neural::gui
