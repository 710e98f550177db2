// Counters behind GET /metrics (Prometheus text format 0.0.4). Server thread only.
#pragma once

#include <QByteArray>
#include <QMap>
#include <QPair>
#include <QString>

#include "queuewait.h"
#include "telemetry/telemetry.h"

namespace neural::server {

class ServerMetrics {
public:
    void countRequest(const QByteArray& route, int status) { ++m_requests[{route, status}]; }
    void countRejected() { ++m_rejected; }
    void countCancelled() { ++m_cancelled; }
    // A stream cancelled because its client stopped reading (ServerConfig::writeTimeoutMs).
    void countStalled() { ++m_stalled; }
    // A request the connection guard answered itself (before any route), by status.
    void countConnectionError(int status) { ++m_connectionErrors[status]; }
    // A connection closed without a request in progress ("evicted", "idle_timeout", ...).
    void countConnectionDropped(const QByteArray& reason) { ++m_connectionsDropped[reason]; }
    void countGeneration(qint64 promptTokens, qint64 cachedTokens, qint64 generatedTokens,
                         double promptSeconds, double decodeSeconds);

    // `queueLength`, `busy` and `connections` are sampled by the caller.
    // `telemetry` (optional): the engine's lock-free token ring, read here on the server thread
    // while the engine thread writes it; its recent tokens become per-token gauges.
    // `queueWait` (optional): the queue's wait times, a summary with quantiles 0.5 and 0.99.
    QByteArray prometheusText(int queueLength, int queueCapacity, bool busy, int connections,
                              const telemetry::Telemetry* telemetry = nullptr,
                              const host::QueueWaitStats* queueWait = nullptr) const;

private:
    QMap<QPair<QByteArray, int>, qint64> m_requests;  // (route, status) -> count
    qint64 m_rejected = 0;
    QMap<int, qint64> m_connectionErrors;           // status -> count
    QMap<QByteArray, qint64> m_connectionsDropped;  // reason -> count
    qint64 m_stalled = 0;
    qint64 m_cancelled = 0;
    qint64 m_generations = 0;
    qint64 m_promptTokens = 0;
    qint64 m_cachedTokens = 0;
    qint64 m_cacheHits = 0;  // generations that reused at least one cached prompt token
    qint64 m_generatedTokens = 0;
    double m_promptSeconds = 0;
    double m_decodeSeconds = 0;
    double m_lastDecodeTokensPerSecond = 0;
};

}  // namespace neural::server
