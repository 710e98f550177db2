#include "connectionguard.h"

#include <QMetaObject>
#include <QTcpSocket>

#include <algorithm>
#include <array>
#include <string_view>

#include "api/openai.h"
#include "httpchannel.h"

namespace neural::server {

namespace {

// Methods the server answers (anything else never reaches Qt's parser).
constexpr std::array<std::string_view, 7> kMethods = {"GET",  "POST",  "PUT",    "DELETE",
                                                      "HEAD", "PATCH", "OPTIONS"};

bool isTokenChar(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool isCtl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

enum class Verdict { ok, bad, badMethod };

// Request line "METHOD SP TARGET SP HTTP/1.x"; `complete` false: only a prefix has arrived.
Verdict checkRequestLine(std::string_view line, bool complete) {
    const size_t sp1 = line.find(' ');
    const std::string_view method = line.substr(0, sp1);
    if (!std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
        return Verdict::bad;
    const bool known = std::find(kMethods.begin(), kMethods.end(), method) != kMethods.end();
    const bool prefix = std::any_of(kMethods.begin(), kMethods.end(), [&](std::string_view m) {
        return m.substr(0, method.size()) == method;
    });
    if (sp1 == std::string_view::npos) {
        if (complete) return Verdict::bad;
        return prefix ? Verdict::ok : (method.size() > 10 ? Verdict::bad : Verdict::badMethod);
    }
    if (!known) return method.empty() ? Verdict::bad : Verdict::badMethod;
    const std::string_view rest = line.substr(sp1 + 1);
    const size_t sp2 = rest.find(' ');
    const std::string_view target = rest.substr(0, sp2);
    if (std::any_of(target.begin(), target.end(),
                    [](char c) { return isCtl(static_cast<unsigned char>(c)) || c == '\t'; }))
        return Verdict::bad;
    if (sp2 == std::string_view::npos) return complete ? Verdict::bad : Verdict::ok;
    if (target.empty()) return Verdict::bad;
    const std::string_view version = rest.substr(sp2 + 1);
    if (complete)
        return version == "HTTP/1.1" || version == "HTTP/1.0" ? Verdict::ok : Verdict::bad;
    return std::string_view("HTTP/1.1").substr(0, version.size()) == version ? Verdict::ok
                                                                             : Verdict::bad;
}

// Header line "name: value" (obs-fold continuation lines are refused).
bool checkHeaderLine(std::string_view line, bool complete) {
    if (line.empty()) return true;
    const size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if ((colon == 0) || !std::all_of(name.begin(), name.end(), [](char c) {
            return isTokenChar(static_cast<unsigned char>(c));
        }))
        return false;
    if (colon == std::string_view::npos) return !complete;
    const std::string_view value = line.substr(colon + 1);
    return std::none_of(value.begin(), value.end(),
                        [](char c) { return isCtl(static_cast<unsigned char>(c)); });
}

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return (x | 0x20) == (y | 0x20);
           });
}

// A comma-separated header value (Connection) holds `token`, case-insensitively.
bool hasToken(std::string_view value, std::string_view token) {
    while (!value.empty()) {
        const size_t comma = value.find(',');
        if (equalsIgnoreCase(trimmed(value.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

QByteArray toBytes(std::string_view s) {
    return QByteArray(s.data(), static_cast<qsizetype>(s.size()));
}

// Bytes read from the socket at a time: with the socket's read buffer of the same size, a
// connection whose next request waits for its turn holds at most this much in memory.
constexpr qint64 kReadChunk = 64 * 1024;

}  // namespace

QByteArray GuardedRequest::value(const QByteArray& name) const {
    for (const auto& [key, value] : headers) {
        if (key == name) return value;
    }
    return {};
}

ConnectionGuard::ConnectionGuard(QTcpSocket* socket, const ConnectionLimits& limits,
                                 GuardedTcpServer* server)
    : QObject(socket),
      m_socket(socket),
      m_limits(limits),
      m_server(server),
      m_remote(socket->peerAddress().toString()) {
    m_timer.setSingleShot(true);
    // The timer is the guard's own: it keeps working even if Qt disconnects the socket's signals.
    connect(&m_timer, &QTimer::timeout, this, &ConnectionGuard::onTimeout);
    connect(socket, &QTcpSocket::readyRead, this, &ConnectionGuard::onReadyRead);
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    // Bytes of a request that waits for its turn stay in the socket (and the kernel) instead of
    // piling up in memory.
    socket->setReadBufferSize(kReadChunk);
#endif
    // The read timeout runs from the accept: a connection that never sends a byte is closed
    // after it, like one that sends too slowly.
    m_timer.start(m_limits.readTimeoutMs);
    m_readTimer = true;
    m_rateTimer.setInterval(1000);
    connect(&m_rateTimer, &QTimer::timeout, this, &ConnectionGuard::checkRate);
}

void ConnectionGuard::countBytes(qint64 n) {
    const bool within = m_requestBytes < kRateGraceBytes;
    m_requestBytes += n;
    if (within && m_requestBytes >= kRateGraceBytes) m_sinceGrace.start();
}

void ConnectionGuard::checkRate() {
    if (m_rejected || !midRequest() || m_limits.minBytesPerSecond <= 0) {
        m_rateTimer.stop();
        return;
    }
    if (!m_sinceGrace.isValid()) return;  // still within the first kRateGraceBytes
    // One second of slack: the check runs once a second, and the first one may come early.
    const qint64 ms = m_sinceGrace.elapsed();
    if (ms < 2000) return;
    const qint64 received = m_requestBytes - kRateGraceBytes;
    if (received * 1000 >= m_limits.minBytesPerSecond * (ms - 1000)) return;
    rejectNow(408,
              "the request arrived too slowly (" + QByteArray::number(received * 1000 / ms) +
                  " bytes/s; the minimum is " + QByteArray::number(m_limits.minBytesPerSecond) +
                  " bytes/s after the first " + QByteArray::number(kRateGraceBytes) + " bytes)",
              "request_timeout");
}

void ConnectionGuard::reject(QTcpSocket* socket, int status, const QByteArray& message,
                             const QByteArray& code) {
    const char* type = status >= 500 ? "server_error" : "invalid_request_error";
    const std::string body =
        openai::error_body(message.toStdString(), type, {}, code.toStdString()).dump();
    QByteArray out = "HTTP/1.1 " + QByteArray::number(status) + ' ' + httpReason(status) + "\r\n";
    out += "Content-Type: application/json\r\nConnection: close\r\n";
    if (status == 503) out += "Retry-After: 1\r\n";
    out +=
        "Content-Length: " + QByteArray::number(static_cast<qsizetype>(body.size())) + "\r\n\r\n";
    out += QByteArray::fromStdString(body);
    // Nobody reads this connection again (Qt's parser included: disconnecting during the
    // emission skips its slot), and whatever else arrives is bounded by a small read buffer.
    QObject::disconnect(socket, &QTcpSocket::readyRead, nullptr, nullptr);
    socket->setReadBufferSize(4096);
    socket->write(out);
    socket->disconnectFromHost();
}

void ConnectionGuard::rejectNow(int status, const QByteArray& message, const QByteArray& code) {
    m_rejected = true;
    m_timer.stop();
    m_rateTimer.stop();
    m_ready.clear();
    reject(m_socket, status, message, code);
    if (m_server) emit m_server->connectionRejected(m_remote, status, message);
}

void ConnectionGuard::fail(int status, const QByteArray& message, const QByteArray& code) {
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    if (m_inFlight || !m_ready.empty()) {
        // Responses are still owed on this connection: the error follows them, in order.
        m_ready.push_back(Pending{{}, status, message, code});
        m_stopReading = true;
        m_head.clear();
        m_inBody = false;
        return;
    }
#endif
    rejectNow(status, message, code);
}

bool ConnectionGuard::responding() const {
    return m_inFlight || !m_ready.empty() ||
           m_socket->property(kResponseInProgressProperty).toBool();
}

bool ConnectionGuard::isIdle() const {
    if (m_rejected || midRequest() || responding() ||
        m_socket->state() != QAbstractSocket::ConnectedState || m_socket->bytesAvailable() > 0)
        return false;
#if QT_VERSION >= QT_VERSION_CHECK(6, 8, 0)
    // Qt writes the responses: after a request, a connection waiting for its answer cannot be
    // told from an idle one.
    return !m_served;
#else
    return true;
#endif
}

void ConnectionGuard::drop() {
    m_rejected = true;
    m_timer.stop();
    m_rateTimer.stop();
    m_socket->disconnectFromHost();
}

QString ConnectionGuard::remote() const { return m_remote; }

qint64 ConnectionGuard::bytesToWrite() const {
    return m_socket->state() == QAbstractSocket::ConnectedState ? m_socket->bytesToWrite() : 0;
}

void ConnectionGuard::onReadyRead() {
    if (m_rejected) return;
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    if (!m_detached && m_server && m_server->qtServer()) {
        // Qt's parser is connected after this guard (when the server takes the connection), so
        // it is cut off at the first bytes; disconnecting during the emission skips its slot.
        QObject::disconnect(m_socket, &QTcpSocket::readyRead, m_server->qtServer(), nullptr);
        m_detached = true;
    }
    readAvailable();
#else
    // Qt's parser reads everything after this slot; peek sees exactly the bytes it will read.
    consume(m_socket->peek(m_socket->bytesAvailable()));
#endif
}

void ConnectionGuard::readAvailable() {
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    // One request at a time: while one is waiting or being answered, the next stays unread.
    while (!m_rejected && !m_stopReading && !m_inFlight && m_ready.empty() &&
           m_socket->bytesAvailable() > 0) {
        if (!consume(m_socket->read(kReadChunk))) break;
    }
    pump();
#endif
}

void ConnectionGuard::pump() {
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    if (m_rejected || m_inFlight || m_ready.empty()) return;
    Pending next = std::move(m_ready.front());
    m_ready.pop_front();
    if (next.status != 0) {
        rejectNow(next.status, next.message, next.code);
        return;
    }
    if (m_socket->state() != QAbstractSocket::ConnectedState || !m_server || !m_server->handler())
        return;
    m_inFlight = true;
    restartTimer();
    // The handler may answer at once (responseFinished() then runs inside this call).
    m_server->handler()(m_socket, std::move(next.request));
#endif
}

void ConnectionGuard::responseFinished() {
    m_inFlight = false;
    if (m_rejected) return;
    restartTimer();
    // Queued: this runs inside the response's write, and the next request may be answered at
    // once too.
    QMetaObject::invokeMethod(
        this,
        [this] {
            if (!m_rejected && !m_inFlight) readAvailable();
        },
        Qt::QueuedConnection);
}

void ConnectionGuard::restartTimer() {
    if (midRequest()) {
        // From the first byte of a request (or, for the first request, from the accept): a
        // request trickling in does not get a new timeout with every byte.
        if (!m_readTimer) {
            m_timer.start(m_limits.readTimeoutMs);
            m_readTimer = true;
        }
        return;
    }
    m_readTimer = false;
    m_timer.start(m_limits.idleTimeoutMs);
}

void ConnectionGuard::onTimeout() {
    if (m_rejected) return;
    if (m_socket->state() == QAbstractSocket::UnconnectedState) {
        // Only reachable if Qt dropped its own handling of this socket: clean it up here.
        m_socket->deleteLater();
        return;
    }
    if (responding()) {
        m_readTimer = false;
        m_timer.start(m_limits.idleTimeoutMs);  // a response is being generated
        return;
    }
    if (midRequest()) {
        rejectNow(408, "the request did not arrive in time", "request_timeout");
        return;
    }
    if (!m_served) {
        // Accepted, but not a byte of a request within the read timeout.
        drop();
        if (m_server) {
            emit m_server->connectionDropped(
                m_remote, "no_request",
                "no request within " + QByteArray::number(m_limits.readTimeoutMs / 1000.0) +
                    " s of the accept");
        }
        return;
    }
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    drop();  // idle keep-alive connection
    if (m_server) {
        emit m_server->connectionDropped(
            m_remote, "idle_timeout",
            "idle for " + QByteArray::number(m_limits.idleTimeoutMs / 1000.0) + " s");
    }
#else
    // Qt >= 6.8 writes responses itself, so a connection waiting for a long answer cannot be
    // told from an idle one here: leave idle connections to the client.
    m_timer.start(m_limits.idleTimeoutMs);
#endif
}
int ConnectionGuard::checkHead(bool complete) {
    // Validate every complete line once, and the partial last line as a prefix, so malformed
    // input is answered here before Qt's parser could choke on it.
    const std::string_view head(m_head.constData(), static_cast<size_t>(m_head.size()));
    size_t pos = static_cast<size_t>(m_checked);
    while (true) {
        const size_t nl = head.find('\n', pos);
        const bool whole = nl != std::string_view::npos;
        std::string_view line = head.substr(pos, whole ? nl - pos : std::string_view::npos);
        if (!whole && line.empty()) break;
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        else if (!whole && !line.empty() && line.find('\r') != std::string_view::npos)
            return 400;
        const bool requestLine = pos == 0;
        if (requestLine) {
            const Verdict v = checkRequestLine(line, whole || complete);
            if (v == Verdict::badMethod) return 405;
            if (v == Verdict::bad) return 400;
        } else if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
            return 400;  // obs-fold
        } else if (!checkHeaderLine(line, whole)) {
            return 400;
        }
        if (!whole) break;
        pos = nl + 1;
        m_checked = static_cast<qsizetype>(pos);
    }
    return 0;
}

bool ConnectionGuard::finishHead() {
    const std::string_view head(m_head.constData(), static_cast<size_t>(m_head.size()));
    size_t pos = head.find('\n') + 1;
    int lengths = 0;
    qint64 length = 0;
    bool expectContinue = false;
    // The request line was validated by checkHead: METHOD SP TARGET SP HTTP/1.x.
    std::string_view requestLine = head.substr(0, pos - 1);
    if (!requestLine.empty() && requestLine.back() == '\r') requestLine.remove_suffix(1);
    const size_t sp1 = requestLine.find(' ');
    const size_t sp2 = requestLine.find(' ', sp1 + 1);
    const std::string_view target = requestLine.substr(sp1 + 1, sp2 - sp1 - 1);
    const bool http10 = requestLine.substr(sp2 + 1) == "HTTP/1.0";
    int hosts = 0;
    std::string_view host;
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    m_current = {};
    m_current.method = toBytes(requestLine.substr(0, sp1));
    m_current.target = toBytes(target);
    bool close = false, keepAlive = false;
#endif
    while (pos < head.size()) {
        const size_t nl = head.find('\n', pos);
        std::string_view line = head.substr(pos, nl - pos);
        pos = nl == std::string_view::npos ? head.size() : nl + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view name = line.substr(0, colon);
        const std::string_view value = trimmed(line.substr(colon + 1));
        if (equalsIgnoreCase(name, "transfer-encoding")) {
            fail(411, "chunked request bodies are not supported; send Content-Length",
                 "length_required");
            return false;
        }
        if (equalsIgnoreCase(name, "host")) {
            ++hosts;
            host = value;
        }
        if (equalsIgnoreCase(name, "expect") && equalsIgnoreCase(value, "100-continue"))
            expectContinue = true;
        if (equalsIgnoreCase(name, "content-length")) {
            if (++lengths > 1 || value.empty() || value.size() > 15 ||
                !std::all_of(value.begin(), value.end(),
                             [](char c) { return c >= '0' && c <= '9'; })) {
                fail(400, "invalid Content-Length", "invalid_request");
                return false;
            }
            length = std::stoll(std::string(value));
        }
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
        if (equalsIgnoreCase(name, "connection")) {
            close = close || hasToken(value, "close");
            keepAlive = keepAlive || hasToken(value, "keep-alive");
        }
        m_current.headers.append({toBytes(name).toLower(), toBytes(value)});
#endif
    }
    // RFC 9112 3.2: an HTTP/1.1 request carries exactly one Host header, and a non-empty one
    // for an "http" target; more than one is refused in any version. An absolute-form target
    // names the server itself: its authority must be the Host header's.
    if (hosts > 1) {
        fail(400, "more than one Host header", "invalid_request");
        return false;
    }
    if (!http10 && (hosts == 0 || host.empty())) {
        fail(400,
             hosts == 0 ? "the request has no Host header (required since HTTP 1.1)"
                        : "the Host header is empty",
             "invalid_request");
        return false;
    }
    if (target.front() != '/' && target != "*") {
        const size_t scheme = target.find("://");
        const std::string_view rest =
            scheme == std::string_view::npos ? std::string_view() : target.substr(scheme + 3);
        const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
        if (scheme == std::string_view::npos ||
            !(equalsIgnoreCase(target.substr(0, scheme), "http") ||
              equalsIgnoreCase(target.substr(0, scheme), "https")) ||
            authority.empty() || !equalsIgnoreCase(authority, host)) {
            fail(400, "the request target names another host than the Host header",
                 "invalid_request");
            return false;
        }
    }
    if (length > m_limits.maxBodyBytes) {
        fail(413,
             "the request body is larger than " + QByteArray::number(m_limits.maxBodyBytes) +
                 " bytes",
             "request_too_large");
        return false;
    }
    m_bodyLeft = length;
    m_inBody = length > 0;
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    // HTTP/1.0 closes after each response unless the client asks to keep the connection.
    m_current.keepAlive = !close && (!http10 || keepAlive);
    m_current.body.reserve(static_cast<qsizetype>(length));
    // Qt 6.4 ignores "Expect: 100-continue", and curl then waits a second before sending a body.
    // Not while responses are owed on the connection: "100 Continue" would land inside them.
    if (expectContinue && m_inBody && !m_inFlight && m_ready.empty())
        m_socket->write("HTTP/1.1 100 Continue\r\n\r\n");
#else
    Q_UNUSED(expectContinue);
#endif
    return true;
}

void ConnectionGuard::completeRequest() {
    m_served = true;
    m_requestBytes = 0;
    m_sinceGrace.invalidate();
    m_rateTimer.stop();
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    const bool keepAlive = m_current.keepAlive;
    m_ready.push_back(Pending{std::move(m_current), 0, {}, {}});
    m_current = {};
    // The connection closes after this response: whatever follows is not read.
    if (!keepAlive) m_stopReading = true;
#endif
    restartTimer();
}

bool ConnectionGuard::consume(const QByteArray& data) {
    QByteArray rest = data;
#if QT_VERSION >= QT_VERSION_CHECK(6, 8, 0)
    bool completedOne = false;
#endif
    while (!rest.isEmpty() && !m_stopReading) {
        if (m_inBody) {
            const qint64 take = std::min<qint64>(m_bodyLeft, rest.size());
            countBytes(take);
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
            m_current.body += rest.left(static_cast<qsizetype>(take));
#endif
            m_bodyLeft -= take;
            rest.remove(0, static_cast<qsizetype>(take));
            if (m_bodyLeft == 0) {
                m_inBody = false;
#if QT_VERSION >= QT_VERSION_CHECK(6, 8, 0)
                completedOne = true;
#endif
                completeRequest();
            }
            continue;
        }
        if (m_head.isEmpty()) {
            // Empty lines before a request line are allowed (RFC 9112 2.2).
            qsizetype skip = 0;
            while (skip < rest.size() && (rest[skip] == '\r' || rest[skip] == '\n')) ++skip;
            rest.remove(0, skip);
            if (rest.isEmpty()) break;
#if QT_VERSION >= QT_VERSION_CHECK(6, 8, 0)
            // A second request in the same read as the first: Qt's parser would see both at
            // once. Refuse it rather than risk interleaved responses.
            if (completedOne) {
                rejectNow(400, "pipelined requests are not supported", "invalid_request");
                return false;
            }
#endif
            m_head = rest;
            m_checked = 0;
            m_requestBytes = 0;
            m_sinceGrace.invalidate();
            if (m_limits.minBytesPerSecond > 0) m_rateTimer.start();
            countBytes(rest.size());
            rest.clear();
            restartTimer();
        } else {
            countBytes(rest.size());
            m_head += rest;
            rest.clear();
        }
        // The head ends with an empty line (CRLF CRLF, or bare LFs, which Qt's parser accepts).
        qsizetype end = -1;
        for (qsizetype i = std::max<qsizetype>(0, m_checked - 1); i + 1 < m_head.size(); ++i) {
            if (m_head[i] != '\n') continue;
            if (m_head[i + 1] == '\n') {
                end = i + 2;
                break;
            }
            if (m_head[i + 1] == '\r' && i + 2 < m_head.size() && m_head[i + 2] == '\n') {
                end = i + 3;
                break;
            }
        }
        const qsizetype headBytes = end < 0 ? m_head.size() : end;
        if (headBytes > m_limits.maxHeaderBytes) {
            fail(431, "the request headers are too large", "headers_too_large");
            return false;
        }
        if (end >= 0) {
            rest = m_head.mid(end);
            m_head.truncate(end);
            m_requestBytes -= rest.size();  // counted again as the body or the next request
        }
        if (const int status = checkHead(end >= 0); status != 0) {
            if (status == 405)
                fail(405, "method not allowed", "method_not_allowed");
            else
                fail(400, "malformed HTTP request", "invalid_request");
            return false;
        }
        if (end < 0) break;
        if (!finishHead()) return false;
        m_head.clear();
        m_checked = 0;
        if (!m_inBody) {
#if QT_VERSION >= QT_VERSION_CHECK(6, 8, 0)
            completedOne = true;
#endif
            completeRequest();
        }
    }
    return true;
}

GuardedTcpServer::GuardedTcpServer(const ConnectionLimits& limits, QObject* parent)
    : QTcpServer(parent), m_limits(limits) {}

qint64 GuardedTcpServer::bytesToWrite() const {
    qint64 n = 0;
    for (const ConnectionGuard* g : m_guards) n += g->bytesToWrite();
    return n;
}

void GuardedTcpServer::setRequestHandler(QObject* qtServer, GuardedRequestHandler handler) {
    m_qtServer = qtServer;
    m_handler = std::move(handler);
}

void GuardedTcpServer::incomingConnection(qintptr socketDescriptor) {
    auto* socket = new QTcpSocket(this);
    if (!socket->setSocketDescriptor(socketDescriptor)) {
        delete socket;
        return;
    }
    const QString address = socket->peerAddress().toString();
    const auto sameAddress = [&](const ConnectionGuard* g) { return g->remote() == address; };
    if (std::count_if(m_guards.begin(), m_guards.end(), sameAddress) >=
        m_limits.perAddressLimit()) {
        // One address holds its share of places: its own longest idle connection makes room,
        // else the newcomer is refused (the other addresses keep theirs).
        const auto victim = std::find_if(m_guards.begin(), m_guards.end(),
                                         [&](auto* g) { return sameAddress(g) && g->isIdle(); });
        if (victim == m_guards.end()) {
            const QByteArray message = "too many open connections from " + address.toUtf8() +
                                       " (the limit per address is " +
                                       QByteArray::number(m_limits.perAddressLimit()) +
                                       "); retry later";
            connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
            ConnectionGuard::reject(socket, 503, message, "too_many_connections");
            emit connectionRejected(address, 503, message);
            return;
        }
        ConnectionGuard* idle = *victim;
        m_guards.erase(victim);
        idle->drop();
        emit connectionDropped(address, "evicted",
                               "idle, closed to make room at the per-address limit (" +
                                   QByteArray::number(m_limits.perAddressLimit()) + ")");
    }
    if (m_guards.size() >= m_limits.maxConnections) {
        // Room for the newcomer: the connection idle the longest goes (oldest first), so that
        // silent or forgotten keep-alive connections cannot lock clients out.
        const auto victim = std::find_if(m_guards.begin(), m_guards.end(),
                                         [](const ConnectionGuard* g) { return g->isIdle(); });
        if (victim == m_guards.end()) {
            const QByteArray message = "too many open connections (the limit is " +
                                       QByteArray::number(m_limits.maxConnections) +
                                       "); retry later";
            const QString remote = socket->peerAddress().toString();
            connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
            ConnectionGuard::reject(socket, 503, message, "server_overloaded");
            emit connectionRejected(remote, 503, message);
            return;
        }
        ConnectionGuard* idle = *victim;
        m_guards.erase(victim);
        const QString remote = idle->remote();
        idle->drop();
        emit connectionDropped(remote, "evicted",
                               "idle, closed to make room at the connection limit (" +
                                   QByteArray::number(m_limits.maxConnections) + ")");
    }
    auto* guard = new ConnectionGuard(socket, m_limits, this);
    m_guards.append(guard);
    connect(guard, &QObject::destroyed, this, [this, guard] { m_guards.removeOne(guard); });
    addPendingConnection(socket);
}

}  // namespace neural::server
