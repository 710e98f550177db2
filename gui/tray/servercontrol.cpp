#include "tray/servercontrol.h"

#include <spdlog/spdlog.h>

#include "apiserver.h"
#include "common/paths.h"
#include "common/settingskeys.h"
#include "conversation/enginehost.h"

namespace neural::gui {

ServerControl::ServerControl(EngineHost* engine, QObject* parent)
    : QObject(parent), m_engine(engine) {
    connect(engine, &EngineHost::modelUnloading, this, [this] {
        m_restartOnReady = isRunning();
        stop();
    });
    connect(engine, &EngineHost::ready, this, [this] {
        if (std::exchange(m_restartOnReady, false)) start(m_wantedPort);
    });
}

ServerControl::~ServerControl() { stop(); }

bool ServerControl::start(quint16 port) {
    if (m_server) return true;
    m_wantedPort = port;
    if (!m_engine->model() || !m_engine->queue()) {
        m_error = tr("no model is loaded yet");
        emit failed(m_error);
        return false;
    }
    server::ServerConfig config;
    config.port = port;
    const auto settings = appSettings();
    if (settings->value(settingsKey::lan, false).toBool())
        config.host = QHostAddress(QHostAddress::Any);
    config.apiKey = settings->value(settingsKey::apiKey).toString().trimmed().toUtf8();
    for (const QString& origin :
         settings->value(settingsKey::cors).toString().split(QLatin1Char(','), Qt::SkipEmptyParts))
        if (!origin.trimmed().isEmpty()) config.corsOrigins << origin.trimmed().toUtf8();
    // modelId empty: clients see the model folder's name, as with neural-server.
    auto srv = std::make_unique<server::ApiServer>(m_engine->model(), m_engine->queue(), config);
    QString error;
    if (!srv->start(&error)) {
        m_error = tr("cannot start the API server on port %1: %2").arg(port).arg(error);
        spdlog::error("{}", m_error.toStdString());
        emit failed(m_error);
        return false;
    }
    // Each request is logged once: ApiServer writes it to its Qt category (neural.server),
    // which installLogging() routes into spdlog and so into the Logs dock.
    m_server = std::move(srv);
    m_error.clear();
    spdlog::info("API server listening at {}", url().toStdString());
    emit runningChanged(true, url());
    return true;
}

void ServerControl::stop() {
    if (!m_server) return;
    m_server.reset();
    spdlog::info("API server stopped");
    emit runningChanged(false, {});
}

quint16 ServerControl::port() const { return m_server ? m_server->serverPort() : 0; }

QString ServerControl::url() const {
    return m_server ? QStringLiteral("http://127.0.0.1:%1/v1").arg(m_server->serverPort())
                    : QString();
}

}  // namespace neural::gui
