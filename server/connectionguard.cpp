#include "connectionguard.h"

#include <QTcpSocket>

#include <algorithm>
#include <array>
#include <string_view>

#include "chat/openai.h"
#include "httpchannel.h"

namespace neural::server {

namespace {

// Methods the server answers (anything else never reaches Qt's parser).
constexpr std::array<std::string_view, 7> kMethods = {"GET",    "POST",  "PUT",    "DELETE",
                                                      "HEAD",   "PATCH", "OPTIONS"};

bool isTokenChar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool isCtl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

enum class Verdict { ok, bad, badMethod };

// Request line "METHOD SP TARGET SP HTTP/1.x"; `complete` false: only a prefix has arrived.
Verdict checkRequestLine(std::string_view line, bool complete)
{
    const size_t sp1 = line.find(' ');
    const std::string_view method = line.substr(0, sp1);
    if (!std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
        return Verdict::bad;
    const bool known = std::find(kMethods.begin(), kMethods.end(), method) != kMethods.end();
    const bool prefix = std::any_of(kMethods.begin(), kMethods.end(), [&](std::string_view m) {
        return m.substr(0, method.size()) == method;
    });
    if (sp1 == std::string_view::npos) {
        if (complete)
            return Verdict::bad;
        return prefix ? Verdict::ok : (method.size() > 10 ? Verdict::bad : Verdict::badMethod);
    }
    if (!known)
        return method.empty() ? Verdict::bad : Verdict::badMethod;
    const std::string_view rest = line.substr(sp1 + 1);
    const size_t sp2 = rest.find(' ');
    const std::string_view target = rest.substr(0, sp2);
    if (std::any_of(target.begin(), target.end(),
                    [](char c) { return isCtl(static_cast<unsigned char>(c)) || c == '\t'; }))
        return Verdict::bad;
    if (sp2 == std::string_view::npos)
        return complete ? Verdict::bad : Verdict::ok;
    if (target.empty())
        return Verdict::bad;
    const std::string_view version = rest.substr(sp2 + 1);
    if (complete)
        return version == "HTTP/1.1" || version == "HTTP/1.0" ? Verdict::ok : Verdict::bad;
    return std::string_view("HTTP/1.1").substr(0, version.size()) == version ? Verdict::ok
                                                                            : Verdict::bad;
}

// Header line "name: value" (obs-fold continuation lines are refused).
bool checkHeaderLine(std::string_view line, bool complete)
{
    if (line.empty())
        return true;
    const size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if ((colon == 0) || !std::all_of(name.begin(), name.end(), [](char c) {
            return isTokenChar(static_cast<unsigned char>(c));
        }))
        return false;
    if (colon == std::string_view::npos)
        return !complete;
    const std::string_view value = line.substr(colon + 1);
    return std::none_of(value.begin(), value.end(),
                        [](char c) { return isCtl(static_cast<unsigned char>(c)); });
}

std::string_view trimmed(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b)
{
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return (x | 0x20) == (y | 0x20);
           });
}

}  // namespace

ConnectionGuard::ConnectionGuard(QTcpSocket *socket, const ConnectionLimits &limits)
    : QObject(socket), m_socket(socket), m_limits(limits)
{
    m_timer.setSingleShot(true);
    // The timer is the guard's own: it keeps working even if Qt disconnects the socket's signals.
    connect(&m_timer, &QTimer::timeout, this, &ConnectionGuard::onTimeout);
    connect(socket, &QTcpSocket::readyRead, this, &ConnectionGuard::onReadyRead);
    m_timer.start(m_limits.idleTimeoutMs);
}

void ConnectionGuard::reject(QTcpSocket *socket, int status, const QByteArray &message,
                             const QByteArray &code)
{
    const std::string body =
        openai::error_body(message.toStdString(), "invalid_request_error", {}, code.toStdString())
            .dump();
    QByteArray out = "HTTP/1.1 " + QByteArray::number(status) + ' ' + httpReason(status) + "\r\n";
    out += "Content-Type: application/json\r\nConnection: close\r\n";
    out += "Content-Length: " + QByteArray::number(static_cast<qsizetype>(body.size()))
        + "\r\n\r\n";
    out += QByteArray::fromStdString(body);
    // Nobody reads this connection again (Qt's parser included: disconnecting during the
    // emission skips its slot), and whatever else arrives is bounded by a small read buffer.
    QObject::disconnect(socket, &QTcpSocket::readyRead, nullptr, nullptr);
    socket->setReadBufferSize(4096);
    socket->write(out);
    socket->disconnectFromHost();
}

void ConnectionGuard::onReadyRead()
{
    if (m_rejected)
        return;
    // Qt's parser reads everything after this slot; peek sees exactly the bytes it will read.
    const QByteArray data = m_socket->peek(m_socket->bytesAvailable());
    if (!consume(data))
        m_rejected = true;
}

void ConnectionGuard::restartTimer()
{
    const bool midRequest = m_inBody || !m_head.isEmpty();
    m_timer.start(midRequest ? m_limits.readTimeoutMs : m_limits.idleTimeoutMs);
}

void ConnectionGuard::onTimeout()
{
    if (m_rejected)
        return;
    if (m_socket->state() == QAbstractSocket::UnconnectedState) {
        // Only reachable if Qt dropped its own handling of this socket: clean it up here.
        m_socket->deleteLater();
        return;
    }
    if (m_socket->property(kResponseInProgressProperty).toBool()) {
        m_timer.start(m_limits.idleTimeoutMs);  // a response is being generated
        return;
    }
    if (m_inBody || !m_head.isEmpty()) {
        m_rejected = true;
        reject(m_socket, 408, "the request did not arrive in time", "request_timeout");
        return;
    }
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    m_socket->disconnectFromHost();  // idle keep-alive connection
#else
    // Qt >= 6.8 writes responses itself, so a connection waiting for a long answer cannot be
    // told from an idle one here: leave idle connections to the client.
    m_timer.start(m_limits.idleTimeoutMs);
#endif
}

int ConnectionGuard::checkHead(bool complete)
{
    // Validate every complete line once, and the partial last line as a prefix, so malformed
    // input is answered here before Qt's parser could choke on it.
    const std::string_view head(m_head.constData(), static_cast<size_t>(m_head.size()));
    size_t pos = static_cast<size_t>(m_checked);
    while (true) {
        const size_t nl = head.find('\n', pos);
        const bool whole = nl != std::string_view::npos;
        std::string_view line = head.substr(pos, whole ? nl - pos : std::string_view::npos);
        if (!whole && line.empty())
            break;
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        else if (!whole && !line.empty() && line.find('\r') != std::string_view::npos)
            return 400;
        const bool requestLine = pos == 0;
        if (requestLine) {
            const Verdict v = checkRequestLine(line, whole || complete);
            if (v == Verdict::badMethod)
                return 405;
            if (v == Verdict::bad)
                return 400;
        } else if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
            return 400;  // obs-fold
        } else if (!checkHeaderLine(line, whole)) {
            return 400;
        }
        if (!whole)
            break;
        pos = nl + 1;
        m_checked = static_cast<qsizetype>(pos);
    }
    return 0;
}

bool ConnectionGuard::finishHead()
{
    const std::string_view head(m_head.constData(), static_cast<size_t>(m_head.size()));
    size_t pos = head.find('\n') + 1;
    int lengths = 0;
    qint64 length = 0;
    bool expectContinue = false;
    while (pos < head.size()) {
        const size_t nl = head.find('\n', pos);
        std::string_view line = head.substr(pos, nl - pos);
        pos = nl == std::string_view::npos ? head.size() : nl + 1;
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos)
            continue;
        const std::string_view name = line.substr(0, colon);
        const std::string_view value = trimmed(line.substr(colon + 1));
        if (equalsIgnoreCase(name, "transfer-encoding")) {
            reject(m_socket, 411, "chunked request bodies are not supported; send Content-Length",
                   "length_required");
            return false;
        }
        if (equalsIgnoreCase(name, "expect") && equalsIgnoreCase(value, "100-continue"))
            expectContinue = true;
        if (equalsIgnoreCase(name, "content-length")) {
            if (++lengths > 1 || value.empty() || value.size() > 15
                || !std::all_of(value.begin(), value.end(),
                                [](char c) { return c >= '0' && c <= '9'; })) {
                reject(m_socket, 400, "invalid Content-Length", "invalid_request");
                return false;
            }
            length = std::stoll(std::string(value));
        }
    }
    if (length > m_limits.maxBodyBytes) {
        reject(m_socket, 413,
               "the request body is larger than " + QByteArray::number(m_limits.maxBodyBytes)
                   + " bytes",
               "request_too_large");
        return false;
    }
    m_bodyLeft = length;
    m_inBody = length > 0;
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    // Qt 6.4 ignores "Expect: 100-continue", and curl then waits a second before sending a body.
    if (expectContinue && m_inBody)
        m_socket->write("HTTP/1.1 100 Continue\r\n\r\n");
#else
    Q_UNUSED(expectContinue);
#endif
    return true;
}

bool ConnectionGuard::consume(const QByteArray &data)
{
    QByteArray rest = data;
    bool completedOne = false;
    while (!rest.isEmpty()) {
        if (m_inBody) {
            const qint64 take = std::min<qint64>(m_bodyLeft, rest.size());
            m_bodyLeft -= take;
            rest.remove(0, static_cast<qsizetype>(take));
            if (m_bodyLeft == 0) {
                m_inBody = false;
                completedOne = true;
                restartTimer();
            }
            continue;
        }
        if (m_head.isEmpty()) {
            // Empty lines before a request line are allowed (RFC 9112 2.2).
            qsizetype skip = 0;
            while (skip < rest.size() && (rest[skip] == '\r' || rest[skip] == '\n'))
                ++skip;
            rest.remove(0, skip);
            if (rest.isEmpty())
                break;
            // A new request while the previous response is still being written or (in this
            // same read) was not even dispatched yet: HTTP pipelining, which Qt 6.4 cannot
            // answer in order. Refuse it rather than interleave responses.
            if (completedOne || m_socket->property(kResponseInProgressProperty).toBool()) {
                reject(m_socket, 400, "pipelined requests are not supported", "invalid_request");
                return false;
            }
            m_head = rest;
            m_checked = 0;
            rest.clear();
            restartTimer();
        } else {
            m_head += rest;
            rest.clear();
        }
        // The head ends with an empty line (CRLF CRLF, or bare LFs, which Qt's parser accepts).
        qsizetype end = -1;
        for (qsizetype i = std::max<qsizetype>(0, m_checked - 1); i + 1 < m_head.size(); ++i) {
            if (m_head[i] != '\n')
                continue;
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
            reject(m_socket, 431, "the request headers are too large", "headers_too_large");
            return false;
        }
        if (end >= 0) {
            rest = m_head.mid(end);
            m_head.truncate(end);
        }
        if (const int status = checkHead(end >= 0); status != 0) {
            if (status == 405)
                reject(m_socket, 405, "method not allowed", "method_not_allowed");
            else
                reject(m_socket, 400, "malformed HTTP request", "invalid_request");
            return false;
        }
        if (end < 0)
            break;
        if (!finishHead())
            return false;
        m_head.clear();
        m_checked = 0;
        if (!m_inBody) {
            completedOne = true;
            restartTimer();
        }
    }
    return true;
}

GuardedTcpServer::GuardedTcpServer(const ConnectionLimits &limits, QObject *parent)
    : QTcpServer(parent), m_limits(limits)
{
}

void GuardedTcpServer::incomingConnection(qintptr socketDescriptor)
{
    auto *socket = new QTcpSocket(this);
    if (!socket->setSocketDescriptor(socketDescriptor)) {
        delete socket;
        return;
    }
    if (m_open >= m_limits.maxConnections) {
        connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
        ConnectionGuard::reject(socket, 503, "too many open connections", "server_overloaded");
        return;
    }
    ++m_open;
    connect(socket, &QObject::destroyed, this, [this] { --m_open; });
    new ConnectionGuard(socket, m_limits);
    addPendingConnection(socket);
}

}  // namespace neural::server
