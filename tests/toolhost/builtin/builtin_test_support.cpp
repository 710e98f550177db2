#include "builtin_test_support.h"

#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QFile>
#include <QPointer>
#include <QTcpSocket>
#include <QTimer>

#ifdef Q_OS_WIN
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#endif

namespace neural::toolhost::test {

void ensureApp() {
    static int argc = 1;
    static char name[] = "neural_builtin_tools_tests";
    static char* argv[] = {name, nullptr};
    if (!QCoreApplication::instance()) new QCoreApplication(argc, argv);
}

bool spinUntil(const std::function<bool()>& done, int timeoutMs) {
    QElapsedTimer timer;
    timer.start();
    while (!done() && timer.elapsed() < timeoutMs)
        QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    return done();
}

void spinFor(int ms) {
    QElapsedTimer timer;
    timer.start();
    while (timer.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
}

ToolOutcome runCall(ToolProvider& provider, const QString& tool, const QString& arguments,
                    const CallLimits& limits, const std::function<void(ToolCall*)>& during,
                    qint64* elapsedMs) {
    QElapsedTimer timer;
    timer.start();
    ToolCall* call = provider.call(tool, arguments, limits);
    bool done = false;
    int finishedCount = 0;
    ToolOutcome outcome;
    QObject::connect(call, &ToolCall::finished, call, [&](const ToolOutcome& o) {
        outcome = o;
        done = true;
        ++finishedCount;
    });
    if (during) during(call);
    if (!spinUntil([&] { return done; }, 120'000)) {
        outcome.status = ToolOutcome::Status::failed;
        outcome.text = QStringLiteral("TEST: the call never finished");
    }
    if (elapsedMs) *elapsedMs = timer.elapsed();
    spinFor(20);  // a second finished() would show here
    EXPECT_LE(finishedCount, 1) << "finished was emitted more than once";
    delete call;
    return outcome;
}

bool underWine() {
#ifdef Q_OS_WIN
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    return ntdll != nullptr && GetProcAddress(ntdll, "wine_get_version") != nullptr;
#else
    return false;
#endif
}

HttpServer::HttpServer() {
    m_server.listen(QHostAddress::LocalHost, 0);
    QObject::connect(&m_server, &QTcpServer::newConnection, &m_server, [this] {
        while (QTcpSocket* socket = m_server.nextPendingConnection()) {
            auto buffer = std::make_shared<QByteArray>();
            QObject::connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
            QObject::connect(socket, &QTcpSocket::readyRead, socket, [this, socket, buffer] {
                *buffer += socket->readAll();
                const qsizetype end = buffer->indexOf("\r\n\r\n");
                if (end < 0) return;
                const QByteArray requestLine = buffer->left(buffer->indexOf("\r\n"));
                m_lastRequest = buffer->left(end);
                buffer->clear();
                ++m_requests;
                const QList<QByteArray> parts = requestLine.split(' ');
                const QByteArray target = parts.value(1);
                const QByteArray path =
                    target.left(target.indexOf('?') < 0 ? target.size() : target.indexOf('?'));
                HttpAnswer answer;
                if (const auto it = m_routes.constFind(path); it != m_routes.constEnd()) {
                    answer = (*it)(target);
                } else {
                    answer.status = 404;
                    answer.reason = "Not Found";
                    answer.body = "<html><body><h1>Not Found</h1></body></html>";
                }
                QByteArray response =
                    "HTTP/1.1 " + QByteArray::number(answer.status) + ' ' + answer.reason + "\r\n";
                if (!answer.contentType.isEmpty())
                    response += "Content-Type: " + answer.contentType + "\r\n";
                if (!answer.location.isEmpty()) response += "Location: " + answer.location + "\r\n";
                response += "Content-Length: " + QByteArray::number(answer.body.size()) +
                            "\r\nConnection: close\r\n\r\n" + answer.body;
                QPointer<QTcpSocket> guard(socket);
                QTimer::singleShot(answer.delayMs, socket, [guard, response] {
                    if (!guard) return;
                    guard->write(response);
                    guard->disconnectFromHost();
                });
            });
        }
    });
}

HttpServer::~HttpServer() = default;

void HttpServer::route(const QByteArray& path, Handler handler) {
    m_routes.insert(path, std::move(handler));
}

QString HttpServer::url(const QString& path) const {
    return QStringLiteral("http://127.0.0.1:%1%2").arg(port()).arg(path);
}

QByteArray fixturePage(const QString& name) {
    QFile file(QStringLiteral(":/pages/pages/") + name);
    if (!file.open(QIODevice::ReadOnly)) return {};
    return file.readAll();
}

}  // namespace neural::toolhost::test
