// Fuzz target: the server's raw-connection guard (server/connectionguard.cpp), which frames and
// validates request heads (request line, header lines, Content-Length, chunked, pipelining,
// size limits) before Qt's HTTP parser sees a byte. The guard reads a QTcpSocket; here a
// QTcpSocket subclass serves the fuzz input from memory (readData / bytesAvailable) in pieces,
// and the guard's readyRead slot runs once per piece as it would for network reads.
// Input: byte 0 = number of pieces - 1 (mod 8), then the bytes that arrive on the connection.
// Whatever the guard writes back must be a well-formed HTTP response (status line, the JSON
// error), and it must write at most one.
#include <QCoreApplication>
#include <QTcpSocket>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "connectionguard.h"

namespace {

class MemorySocket : public QTcpSocket {
public:
    MemorySocket() { QIODevice::open(QIODevice::ReadWrite | QIODevice::Unbuffered); }

    void arrive(const QByteArray& bytes) { m_in += bytes; }
    const QByteArray& written() const { return m_out; }
    qint64 bytesAvailable() const override { return m_in.size(); }

protected:
    qint64 readData(char* data, qint64 maxlen) override {
        const qint64 n = std::min<qint64>(maxlen, m_in.size());
        std::memcpy(data, m_in.constData(), static_cast<size_t>(n));
        m_in.remove(0, static_cast<qsizetype>(n));
        return n;
    }
    qint64 writeData(const char* data, qint64 len) override {
        m_out.append(data, static_cast<qsizetype>(len));
        return len;
    }

private:
    QByteArray m_in;
    QByteArray m_out;
};

[[noreturn]] void bad(const char* what, const QByteArray& out) {
    std::fprintf(stderr, "%s; the guard wrote:\n%s\n", what, out.left(400).constData());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
    // The guard's timers need an application object (never started; no event loop runs).
    static QCoreApplication app(*argc, *argv);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace neural::server;
    if (size < 1) return 0;
    if (QCoreApplication::instance() == nullptr) {
        static int argc = 1;
        static char arg0[] = "fuzz_server_head";
        static char* argv[] = {arg0, nullptr};
        char** pargv = argv;
        LLVMFuzzerInitialize(&argc, &pargv);
    }
    const int pieces = (data[0] & 7) + 1;
    const QByteArray input(reinterpret_cast<const char*>(data) + 1,
                           static_cast<qsizetype>(size - 1));
    ConnectionLimits limits;
    limits.maxHeaderBytes = 1024;  // small, so the fuzzer reaches the size limits
    limits.maxBodyBytes = 4096;
    MemorySocket socket;
    // A child of the socket; without a server, the requests it frames go nowhere (on Qt < 6.8
    // it reads them itself and hands them to the server's handler).
    new ConnectionGuard(&socket, limits, nullptr);
    const qsizetype step = input.size() / pieces + 1;
    for (qsizetype at = 0; at < input.size(); at += step) {
        socket.arrive(input.mid(at, step));
        emit socket.readyRead();
        // Qt >= 6.8: what Qt's parser would consume after the guard's slot (the guard only
        // peeks there).
        socket.readAll();
    }
    const QByteArray& out = socket.written();
    if (std::getenv("NEURAL_FUZZ_DEBUG") != nullptr)
        std::fprintf(stderr, "guard wrote %lld bytes: %s\n", static_cast<long long>(out.size()),
                     out.left(out.indexOf('\r')).constData());
    if (!out.isEmpty()) {
        // Interim 100 Continue answers (one per accepted request that asked) may precede the
        // one final response.
        QByteArray rest = out;
        while (rest.startsWith("HTTP/1.1 100 Continue\r\n\r\n")) rest.remove(0, 25);
        if (rest.isEmpty()) return 0;
        if (!rest.startsWith("HTTP/1.1 4") && !rest.startsWith("HTTP/1.1 5"))
            bad("the guard's response is not an HTTP error status line", out);
        if (rest.count("HTTP/1.1 ") != 1) bad("the guard wrote more than one response", out);
        const qsizetype body = rest.indexOf("\r\n\r\n");
        if (body < 0 || !rest.mid(body + 4).startsWith("{\"error\":"))
            bad("the guard's response has no JSON error body", out);
    }
    return 0;
}
