// A real neural-server on the tiny fixture, on 127.0.0.1 only, driven over raw sockets
// (docs/RELIABILITY.md): connections that never send a byte, the connection cap (idle ones make
// room, busy ones get 503 with Retry-After), the connection guard's own answers in /metrics and
// the log, keep-alive and pipelining (answered in order), HTTP/1.0 connection semantics and the
// overflow FIFO of a full queue. Every wait is bounded; no timing is asserted beyond liveness.
// POSIX only (fork/exec, poll).

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "runtime/fit.h"
#include "runtime/options.h"
#include "store/repack.h"
#include "support/damaged_store.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

const std::string kModel = "tiny-gptoss-a";

int ms_left(Clock::time_point deadline) {
    return static_cast<int>(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
}

// neural-server with stdout and stderr in a log file; stopped (SIGTERM, then SIGKILL) at the end.
class ServerProcess {
public:
    explicit ServerProcess(const std::vector<std::string>& extra) {
        log_path_ = dir_ / "server.log";
        std::vector<std::string> args = {NEURAL_SERVER_BIN,
                                         "--model",
                                         test::tiny_model_dir().string(),
                                         "--host",
                                         "127.0.0.1",
                                         "--port",
                                         "0",
                                         "--threads",
                                         "1"};
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        // Created before the fork, so that the log can be read at once.
        const int log_fd =
            ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        pid_ = ::fork();
        if (pid_ == 0) {
            const int null = ::open("/dev/null", O_RDONLY);
            ::dup2(null, 0);
            ::dup2(log_fd, 1);
            ::dup2(log_fd, 2);
            ::unsetenv("NEURAL_API_KEY");
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        ::close(log_fd);
        const std::regex serving(R"(serving '[^']*' on http://127\.0\.0\.1:(\d+)/v1)");
        const auto deadline = Clock::now() + std::chrono::seconds(60);
        while (Clock::now() < deadline) {
            std::smatch m;
            const std::string text = log();
            if (std::regex_search(text, m, serving)) {
                port_ = std::stoi(m[1]);
                return;
            }
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        ADD_FAILURE() << "neural-server did not start:\n" << log();
    }

    ~ServerProcess() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        int status = 0;
        while (::waitpid(pid_, &status, WNOHANG) == 0) {
            if (Clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }

    bool ok() const { return port_ > 0; }
    int port() const { return port_; }
    void signal(int sig) const {
        if (pid_ > 0) ::kill(pid_, sig);
    }
    // The exit status once the process ended within `ms` (-1: killed by a signal), else nullopt.
    std::optional<int> wait_exit(int ms) {
        const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
        while (pid_ > 0) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            }
            if (Clock::now() >= deadline) return std::nullopt;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return std::nullopt;
    }
    std::string log() const { return test::read_file(log_path_); }

private:
    test::TempDir dir_;
    std::filesystem::path log_path_;
    pid_t pid_ = -1;
    int port_ = 0;
};

struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;  // names in lower case
    std::string body;                            // de-chunked
    std::string header(const std::string& name) const {
        auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    }
};

// One client connection (blocking connect, reads with poll and a deadline).
class Conn {
public:
    // `receive_buffer` > 0: SO_RCVBUF before the connect (a client that reads little).
    explicit Conn(int port, int receive_buffer = 0) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (receive_buffer > 0)
            ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<std::uint16_t>(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            ADD_FAILURE() << "connect: " << std::strerror(errno);
            ::close(fd_);
            fd_ = -1;
        }
    }
    ~Conn() { close(); }
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;

    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    // Half-close: the request is sent, nothing more will come (shutdown(SHUT_WR)).
    void finish_sending() {
        if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
    }

    void send(const std::string& bytes) {
        std::size_t done = 0;
        while (fd_ >= 0 && done < bytes.size()) {
            const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
            if (n <= 0) return;
            done += static_cast<std::size_t>(n);
        }
    }

    // Reads what arrives within `ms`; false once the peer closed (or reset) the connection.
    bool fill(int ms) {
        if (fd_ < 0 || eof_) return false;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, ms) <= 0) return true;
        char buf[65536];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) {
            eof_ = true;
            return false;
        }
        buf_.append(buf, static_cast<std::size_t>(n));
        return true;
    }

    // True when the server closes the connection within `ms` (bytes before that are kept).
    bool closed_within(int ms) {
        const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
        while (!eof_ && Clock::now() < deadline) fill(std::max(1, ms_left(deadline)));
        return eof_;
    }

    // True when something (bytes or the close) arrives within `ms`.
    bool readable_within(int ms) {
        if (!buf_.empty() || eof_) return true;
        pollfd p{fd_, POLLIN, 0};
        return ::poll(&p, 1, ms) > 0;
    }

    // The head of the next response once it arrived (not consumed), within `ms`.
    std::optional<Response> head(int ms) {
        const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
        while (buf_.find("\r\n\r\n") == std::string::npos) {
            if (Clock::now() >= deadline || !fill(ms_left(deadline))) {
                if (buf_.find("\r\n\r\n") == std::string::npos) return std::nullopt;
            }
        }
        return parse_head(buf_.substr(0, buf_.find("\r\n\r\n") + 4));
    }

    // The next whole response within `ms` (Content-Length, chunked, or up to the close).
    std::optional<Response> response(int ms) {
        const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
        while (true) {
            const std::size_t end = buf_.find("\r\n\r\n");
            if (end != std::string::npos) {
                Response r = parse_head(buf_.substr(0, end + 4));
                const std::string rest = buf_.substr(end + 4);
                if (!r.header("content-length").empty()) {
                    const std::size_t len = std::stoul(r.header("content-length"));
                    if (rest.size() >= len) {
                        r.body = rest.substr(0, len);
                        buf_ = rest.substr(len);
                        return r;
                    }
                } else if (r.header("transfer-encoding") == "chunked") {
                    std::size_t at = 0;
                    std::string body;
                    bool complete = false;
                    while (true) {
                        const std::size_t nl = rest.find("\r\n", at);
                        if (nl == std::string::npos) break;
                        const std::size_t size = std::stoul(rest.substr(at, nl - at), nullptr, 16);
                        if (rest.size() < nl + 2 + size + 2) break;
                        body += rest.substr(nl + 2, size);
                        at = nl + 2 + size + 2;
                        if (size == 0) {
                            complete = true;
                            break;
                        }
                    }
                    if (complete) {
                        r.body = body;
                        buf_ = rest.substr(at);
                        return r;
                    }
                } else if (eof_) {
                    r.body = rest;
                    buf_.clear();
                    return r;
                }
            }
            if (eof_ || Clock::now() >= deadline) return std::nullopt;
            fill(ms_left(deadline));
        }
    }

private:
    static Response parse_head(const std::string& head) {
        Response r;
        std::sscanf(head.c_str(), "HTTP/1.%*d %d", &r.status);
        std::size_t at = head.find("\r\n") + 2;
        while (at < head.size()) {
            const std::size_t nl = head.find("\r\n", at);
            const std::string line = head.substr(at, nl - at);
            at = nl + 2;
            const std::size_t colon = line.find(':');
            if (colon == std::string::npos) continue;
            std::string name = line.substr(0, colon);
            for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            std::string value = line.substr(colon + 1);
            while (!value.empty() && value.front() == ' ') value.erase(0, 1);
            r.headers[name] = value;
        }
        return r;
    }

    int fd_ = -1;
    std::string buf_;
    bool eof_ = false;
};

std::string get(const std::string& path) {
    return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
}

std::string chat(const std::string& body) {
    return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
           "application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string chat_body(int max_tokens, bool stream) {
    return R"({"model": ")" + kModel + R"(", "messages": [{"role": "user", "content": "hi"}], )" +
           R"("max_tokens": )" + std::to_string(max_tokens) +
           (stream ? R"(, "stream": true})" : "}");
}

// GET PATH on a fresh connection, retried (a connection may be refused while the server is at
// its cap) for up to 10 s.
Response fetch(int port, const std::string& path) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (true) {
        Conn c(port);
        c.send(get(path));
        if (auto r = c.response(5000); r && r->status == 200) return *r;
        if (Clock::now() >= deadline) {
            ADD_FAILURE() << "GET " << path << " did not answer 200";
            return {};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

// The value of one series of /metrics ("name{labels}"); -1 when it is absent.
double metric(int port, const std::string& series) {
    const std::string text = fetch(port, "/metrics").body;
    const std::string key = "\n" + series + " ";
    const std::size_t at = text.find(key);
    return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}

TEST(ServerConnections, ASilentConnectionIsClosedAfterTheReadTimeoutFromTheAccept) {
    ServerProcess server({"--read-timeout", "1"});
    ASSERT_TRUE(server.ok());
    Conn silent(server.port());
    // 1 s from the accept (not from a first byte that never comes); 15 s is only a liveness
    // bound, far below the 120 s idle timeout of a keep-alive connection.
    EXPECT_TRUE(silent.closed_within(15000)) << "a connection that sent nothing stayed open";
    EXPECT_EQ(metric(server.port(), R"(neural_connections_dropped_total{reason="no_request"})"), 1);
    EXPECT_THAT(server.log(), HasSubstr("connection closed (no_request)"));
}

TEST(ServerConnections, IdleConnectionsMakeRoomAtTheConnectionCap) {
    // One address (loopback) may take every place here: the global cap is what is tested.
    ServerProcess server({"--max-connections", "8", "--max-connections-per-address", "8"});
    ASSERT_TRUE(server.ok());
    std::vector<std::unique_ptr<Conn>> silent;
    for (int i = 0; i < 8; ++i) silent.push_back(std::make_unique<Conn>(server.port()));
    // Every further client is still served: each new connection closes the oldest idle one.
    std::vector<std::unique_ptr<Conn>> clients;
    for (int i = 0; i < 6; ++i) {
        clients.push_back(std::make_unique<Conn>(server.port()));
        clients.back()->send(get("/health"));
        const auto r = clients.back()->response(10000);
        ASSERT_TRUE(r) << "client " << i << " got no answer";
        EXPECT_EQ(r->status, 200) << "client " << i << ": " << r->body;
        EXPECT_THAT(r->body, HasSubstr(R"("status":"ok")"));
    }
    for (int i = 0; i < 6; ++i)
        EXPECT_TRUE(silent[i]->closed_within(5000))
            << "silent connection " << i << " (oldest first)";
    for (int i = 6; i < 8; ++i)
        EXPECT_FALSE(silent[i]->closed_within(200)) << "silent connection " << i << " (newer)";
    EXPECT_GE(metric(server.port(), R"(neural_connections_dropped_total{reason="evicted"})"), 6);
    EXPECT_THAT(server.log(), HasSubstr("connection closed (evicted)"));
}

TEST(ServerConnections, BusyConnectionsAtTheCapLeaveA503WithRetryAfter) {
    ServerProcess server({"--max-connections", "4", "--max-connections-per-address", "5"});
    ASSERT_TRUE(server.ok());
    // Requests in progress (heads not finished): these connections are not idle.
    std::vector<std::unique_ptr<Conn>> busy;
    for (int i = 0; i < 4; ++i) {
        busy.push_back(std::make_unique<Conn>(server.port()));
        busy.back()->send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the server read them
    Conn late(server.port());
    late.send(get("/health"));
    const auto r = late.response(10000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_EQ(r->header("retry-after"), "1");
    EXPECT_THAT(r->body, HasSubstr(R"("type":"server_error")"));
    EXPECT_THAT(r->body, HasSubstr(R"("code":"server_overloaded")"));
    busy.clear();
    // At least this one; /metrics itself may get a 503 (and retry) until the server has seen
    // the busy connections close.
    EXPECT_GE(metric(server.port(), R"(neural_connection_errors_total{status="503"})"), 1);
    EXPECT_THAT(server.log(), HasSubstr(" 503 too many open connections"));
}

TEST(ServerConnections, TheGuardsOwnAnswersAreCountedAndLogged) {
    ServerProcess server({"--read-timeout", "1", "--max-body", "2048"});
    ASSERT_TRUE(server.ok());
    const std::vector<std::pair<int, std::string>> cases = {
        {413, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n\r\n"},
        {411,
         "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"},
        {431, "GET /health HTTP/1.1\r\nX-Big: " + std::string(40000, 'a') + "\r\n\r\n"},
        {408, "GET /health HTTP/1.1\r\nHost: x\r\n"},  // never finished
    };
    for (const auto& [status, request] : cases) {
        Conn c(server.port());
        c.send(request);
        const auto r = c.response(15000);
        ASSERT_TRUE(r) << status;
        EXPECT_EQ(r->status, status);
    }
    const std::string log = server.log();
    for (const auto& [status, request] : cases) {
        EXPECT_EQ(metric(server.port(), "neural_connection_errors_total{status=\"" +
                                            std::to_string(status) + "\"}"),
                  1)
            << status;
        EXPECT_THAT(log, HasSubstr(" - - " + std::to_string(status) + " ")) << status;
    }
}

TEST(ServerKeepAlive, RequestsPipelinedInOnePacketAreAnsweredInOrder) {
    ServerProcess server({});
    ASSERT_TRUE(server.ok());
    Conn c(server.port());
    c.send(get("/health") + get("/v1/models") + get("/v1/models/no-such-model") + get("/health"));
    const auto a = c.response(10000), b = c.response(10000), d = c.response(10000),
               e = c.response(10000);
    ASSERT_TRUE(a && b && d && e);
    EXPECT_EQ(a->status, 200);
    EXPECT_THAT(a->body, HasSubstr(R"("status":"ok")"));
    EXPECT_EQ(b->status, 200);
    EXPECT_THAT(b->body, HasSubstr(R"("object":"list")"));
    EXPECT_EQ(d->status, 404);
    EXPECT_THAT(d->body, HasSubstr("no-such-model"));
    EXPECT_EQ(e->status, 200);
    EXPECT_EQ(e->header("connection"), "keep-alive");
}

TEST(ServerKeepAlive, ARequestSentDuringAGenerationIsAnsweredAfterIt) {
    ServerProcess server({});
    ASSERT_TRUE(server.ok());
    Conn c(server.port());
    c.send(chat(chat_body(60, true)));
    const auto head = c.head(20000);  // the stream began: the engine took the request
    ASSERT_TRUE(head);
    ASSERT_EQ(head->status, 200);
    c.send(get("/health"));
    const auto stream = c.response(60000);
    ASSERT_TRUE(stream) << "the first response was not completed";
    EXPECT_THAT(stream->body, HasSubstr(R"("finish_reason":)"));
    EXPECT_THAT(stream->body, HasSubstr("data: [DONE]"));
    EXPECT_THAT(stream->body, ::testing::Not(HasSubstr(R"("error")")));
    const auto health = c.response(10000);
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_THAT(health->body, HasSubstr(R"("status":"ok")"));
    EXPECT_THAT(server.log(), HasSubstr("POST /v1/chat/completions 200"));
}

TEST(ServerKeepAlive, Http10ClosesUnlessTheClientAsksForKeepAlive) {
    ServerProcess server({});
    ASSERT_TRUE(server.ok());
    {
        Conn c(server.port());
        c.send("GET /health HTTP/1.0\r\n\r\n");
        const auto r = c.response(10000);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->header("connection"), "close");
        EXPECT_TRUE(c.closed_within(5000));
    }
    {
        Conn c(server.port());
        c.send("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        const auto r = c.response(10000);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->header("connection"), "keep-alive");
        c.send("GET /v1/models HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        const auto again = c.response(10000);
        ASSERT_TRUE(again) << "the kept-alive connection did not answer a second request";
        EXPECT_EQ(again->status, 200);
    }
    {
        Conn c(server.port());  // HTTP/1.1 with "Connection: close"
        c.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + get("/health"));
        const auto r = c.response(10000);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->header("connection"), "close");
        EXPECT_TRUE(c.closed_within(5000));
        EXPECT_FALSE(c.response(100)) << "a request after \"Connection: close\" was answered";
    }
}

TEST(ServerOverflow, RequestsFindingAFullQueueAreAdmittedInArrivalOrder) {
    ServerProcess server({"--queue", "0", "--overflow", "2", "--overflow-wait", "60"});
    ASSERT_TRUE(server.ok());
    Conn running(server.port());
    running.send(chat(chat_body(20000, true)));
    ASSERT_TRUE(running.head(20000));  // the engine is busy for a long while
    Conn first(server.port()), second(server.port()), third(server.port());
    first.send(chat(chat_body(40, true)));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // arrival order
    second.send(chat(chat_body(2, false)));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    third.send(chat(chat_body(2, false)));  // beyond the FIFO's two places
    const auto refused = third.response(10000);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 503);
    EXPECT_EQ(refused->header("retry-after"), "1");
    EXPECT_THAT(refused->body, HasSubstr(R"("code":"server_overloaded")"));
    EXPECT_FALSE(first.readable_within(0));
    EXPECT_FALSE(second.readable_within(0));

    running.close();  // the client goes: its generation stops, the FIFO's first is admitted
    const auto began = first.head(20000);
    ASSERT_TRUE(began);
    EXPECT_EQ(began->status, 200);
    const auto first_done = first.response(60000);
    ASSERT_TRUE(first_done);
    EXPECT_THAT(first_done->body, HasSubstr("data: [DONE]"));
    const auto second_done = second.response(60000);
    ASSERT_TRUE(second_done);
    EXPECT_EQ(second_done->status, 200);
    EXPECT_THAT(second_done->body, HasSubstr(R"("completion_tokens":)"));
    // One generation at a time, logged as each completes: the first to arrive (the stream) was
    // answered before the second.
    const std::string log = server.log();
    const std::regex answered(R"(POST /v1/chat/completions 200 [^\n]*)");
    std::vector<std::string> lines;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), answered);
         it != std::sregex_iterator(); ++it)
        lines.push_back(it->str());
    ASSERT_EQ(lines.size(), 2u) << log;
    EXPECT_THAT(lines[0], ::testing::EndsWith(" stream")) << log;
    EXPECT_THAT(lines[1], ::testing::Not(::testing::EndsWith(" stream"))) << log;
}

TEST(ServerOverflow, AWaitThatRunsOutGets503WithRetryAfter) {
    ServerProcess server({"--queue", "0", "--overflow", "1", "--overflow-wait", "1"});
    ASSERT_TRUE(server.ok());
    Conn running(server.port());
    running.send(chat(chat_body(20000, true)));
    ASSERT_TRUE(running.head(20000));
    Conn waiting(server.port());
    waiting.send(chat(chat_body(2, false)));
    const auto r = waiting.response(30000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_EQ(r->header("retry-after"), "1");
    EXPECT_THAT(r->body, HasSubstr(R"("type":"server_error")"));
    EXPECT_THAT(r->body, HasSubstr("no place in the queue within 1 s"));
}

// A chat request whose one user message is `text` (JSON-safe: letters, digits, spaces).
std::string chat_body_with(const std::string& text, int max_tokens, bool stream) {
    return R"({"model": ")" + kModel + R"(", "messages": [{"role": "user", "content": ")" + text +
           R"("}], "max_tokens": )" + std::to_string(max_tokens) +
           (stream ? R"(, "stream": true})" : "}");
}

// About `chars` characters of words: thousands of tokens for a few tens of KB.
std::string long_text(std::size_t chars) {
    std::string text;
    while (text.size() < chars) {
        text += "the quick brown fox jumps over the lazy dog ";
        text += std::to_string(text.size());
        text += ' ';
    }
    return text;
}

TEST(ServerPrompts, APromptLongerThanMaxPromptTokensGets400) {
    ServerProcess server({"--max-prompt-tokens", "200"});
    ASSERT_TRUE(server.ok());
    {
        Conn c(server.port());
        c.send(chat(chat_body_with(long_text(2000), 2, false)));
        const auto r = c.response(30000);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 400);
        EXPECT_THAT(r->body, HasSubstr(R"("type":"invalid_request_error")"));
        EXPECT_THAT(r->body, HasSubstr(R"("code":"context_length_exceeded")"));
        EXPECT_THAT(r->body, HasSubstr("this server accepts prompts of at most 200 tokens"));
    }
    {
        // Raw completions count the prompt's own tokens.
        std::string ids;
        for (int i = 0; i < 201; ++i) {
            if (i > 0) ids += ',';
            ids += std::to_string(1000 + i);
        }
        const std::string body =
            R"({"model": ")" + kModel + R"(", "prompt": [)" + ids + R"(], "max_tokens": 1})";
        Conn c(server.port());
        c.send(
            "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            "application/json\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body);
        const auto r = c.response(30000);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 400);
        EXPECT_THAT(r->body, HasSubstr(R"("code":"context_length_exceeded")"));
        EXPECT_THAT(r->body, HasSubstr("the prompt has 201 tokens"));
    }
    // Shorter prompts are served.
    Conn c(server.port());
    c.send(chat(chat_body(1, false)));
    const auto r = c.response(60000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
}

TEST(ServerPrompts, AClientThatLeavesDuringALongPromptFreesTheEngine) {
    ServerProcess server({});
    ASSERT_TRUE(server.ok());
    {
        // A prompt of over 20,000 tokens: its full-attention layers alone run for tens of
        // seconds on the tiny model. The stream's head says the engine took it.
        Conn leaving(server.port());
        leaving.send(chat(chat_body_with(long_text(100000), 4, true)));
        const auto head = leaving.head(60000);
        ASSERT_TRUE(head);
        ASSERT_EQ(head->status, 200);
        std::this_thread::sleep_for(std::chrono::seconds(5));  // well into the prompt
    }                                                          // the client goes away
    const auto sent = Clock::now();
    Conn next(server.port());
    next.send(chat(chat_body(1, false)));
    const auto r = next.response(60000);
    const double seconds = std::chrono::duration<double>(Clock::now() - sent).count();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    // Liveness: the engine stopped the abandoned prompt instead of finishing it first.
    EXPECT_LT(seconds, 5.0) << server.log();
    EXPECT_THAT(server.log(), HasSubstr("(client went away)"));
}

// A store with a zeroed record: a request that reads it gets 500 naming the record (never an
// answer computed from it), the next one too, and the server keeps serving everything else.
TEST(ServerStore, ADamagedStoreRecordGets500NamingItAndTheServerStaysUp) {
    test::TempDir dir;
    const std::filesystem::path store = dir / "zeroed.nstore";
    store::RepackOptions o;
    o.checkpoint = test::tiny_model_dir();
    o.out = store;
    o.kind = store::StoreKind::kRaw;
    o.threads = 2;
    store::repack(o);
    test::zero_store_record(store, 1, 3);
    ServerProcess server({"--store", store.string()});
    ASSERT_TRUE(server.ok()) << server.log();
    for (int i = 0; i < 2; ++i) {
        Conn c(server.port());
        c.send(chat(chat_body(2, false)));
        const auto r = c.response(60000);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 500);
        EXPECT_THAT(r->body, HasSubstr(R"("type":"server_error")"));
        // The client learns the layer and the expert; where the file is goes to the log only.
        EXPECT_THAT(r->body,
                    HasSubstr("expert store zeroed.nstore: record layer 1 expert 3 fails its "
                              "checksum"));
        EXPECT_THAT(r->body, ::testing::Not(HasSubstr(dir.path().string())));
    }
    // The model cannot answer: /health says so, with the reason (no path either).
    Conn c(server.port());
    c.send(get("/health"));
    const auto health = c.response(10000);
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 503);
    EXPECT_THAT(health->body, HasSubstr(R"("status":"degraded")"));
    EXPECT_THAT(health->body, HasSubstr("record layer 1 expert 3 fails its checksum"));
    EXPECT_THAT(health->body, ::testing::Not(HasSubstr(dir.path().string())));
    EXPECT_THAT(server.log(), HasSubstr("POST /v1/chat/completions 500"));
    EXPECT_THAT(server.log(), HasSubstr("expert store " + store.string()));
}

// --- Engine settings: the settings schema's flags (runtime/options.h), as `neural` takes them ---

struct Exit {
    int code = -1;
    std::string output;
};

// neural-server ARGS that is expected to exit by itself (a refused setting): its status and
// output. Killed after 60 s.
Exit run_server_to_exit(const std::vector<std::string>& extra) {
    test::TempDir dir;
    const std::filesystem::path log = dir / "out.log";
    std::vector<std::string> args = {NEURAL_SERVER_BIN, "--model", test::tiny_model_dir().string(),
                                     "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(fd);
    Exit e;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            ADD_FAILURE() << "neural-server did not exit";
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    e.output = test::read_file(log);
    return e;
}

std::filesystem::path make_store(const std::filesystem::path& dir) {
    store::RepackOptions o;
    o.checkpoint = test::tiny_model_dir();
    o.out = dir / "tiny.nstore";
    o.kind = store::StoreKind::kRaw;
    o.threads = 2;
    store::repack(o);
    return o.out;
}

// The settings the server lacked before the schema, a bare switch and 0|1 values: accepted.
TEST(ServerEngineSettings, TheSchemasFlagsAreAccepted) {
    test::TempDir dir;
    const std::filesystem::path store = make_store(dir.path());
    ServerProcess server({"--store",
                          store.string(),
                          "--backend",
                          "auto",
                          "--release-resident",
                          "--kernel-persistent",
                          "0",
                          "--refresh-m",
                          "100",
                          "--prefill-weight",
                          "500",
                          "--expert-streams",
                          "1",
                          "--device",
                          "0",
                          "--ws-min",
                          "0.001",
                          "--prefetch",
                          "dense",
                          "--warmup-ram",
                          "1",
                          "--warmup-sync",
                          "1",
                          "--kdll",
                          (dir / "none.so").string(),
                          "--grouped-gemm=1"});
    ASSERT_TRUE(server.ok()) << server.log();
    EXPECT_EQ(fetch(server.port(), "/health").status, 200);
}

// Out of range, a CUDA-only setting on the CPU backend, a RAM lever without a store: refused with
// the message `neural` gives (options::parse / apply), naming the flag.
TEST(ServerEngineSettings, BadSettingsAreRefusedWithTheSchemasMessage) {
    const Exit range = run_server_to_exit({"--scratch", "0"});
    EXPECT_EQ(range.code, 2);
    EXPECT_THAT(range.output,
                HasSubstr("neural-server: --scratch: expected an integer in [1, 64], got \"0\""));
    const Exit refresh = run_server_to_exit({"--refresh-m", "4097"});
    EXPECT_EQ(refresh.code, 2);
    EXPECT_THAT(refresh.output,
                HasSubstr("--refresh-m: expected an integer in [0, 4096], got \"4097\""));
    const Exit cpu = run_server_to_exit({"--pool", "2"});
    EXPECT_EQ(cpu.code, 1);
    EXPECT_THAT(cpu.output, HasSubstr(options::backend_refusal(*options::find("pool"), "cpu")));
    const Exit bare = run_server_to_exit({"--release-resident"});
    EXPECT_EQ(bare.code, 1);
    EXPECT_THAT(bare.output, HasSubstr("--release-resident needs --backend cuda (or auto)"));
    const Exit lever = run_server_to_exit({"--warmup-ram", "5"});
    EXPECT_EQ(lever.code, 1);
    EXPECT_THAT(lever.output, HasSubstr("need --store FILE"));
    const Exit help = run_server_to_exit({"--help"});
    EXPECT_EQ(help.code, 0);
    for (const options::Setting& s : options::settings())
        EXPECT_THAT(help.output, HasSubstr(s.flag + " ")) << s.flag;
    EXPECT_THAT(help.output, HasSubstr("--max-connections"));
}

// The flags `neural fit` plans for this machine start the server as they are.
TEST(ServerEngineSettings, FitFlagsAreAccepted) {
    test::TempDir dir;
    FitRequest req;
    req.config = ModelConfig::load(test::tiny_model_dir() / "config.json");
    req.store_kind = "raw";
    FitPlan plan = plan_fit(req, detect_machine());
    plan.store = make_store(dir.path());
    std::vector<std::string> flags = plan.flags();
    // ServerProcess gives --threads 1; the plan's own thread count comes later and wins.
    ServerProcess server(flags);
    ASSERT_TRUE(server.ok()) << server.log();
}

// --- Issue 44: hostile clients and a store changed under the server (docs/RELIABILITY.md) ---

// A stream whose client stops reading: the send buffer fills, the generation pauses, and after
// the write timeout the request is cancelled and the connection closed, while another client is
// served. The log line of the cancelled request shows it stopped far short of its max_tokens.
TEST(ServerBackpressure, AStreamWhoseClientStopsReadingIsCancelledAndTheQueueServed) {
    ServerProcess server({"--write-timeout", "2", "--sse-keepalive", "0"});
    ASSERT_TRUE(server.ok());
    Conn stuck(server.port(), 4096);
    stuck.send(chat(chat_body(60000, true)));
    const auto head = stuck.head(20000);
    ASSERT_TRUE(head);
    ASSERT_EQ(head->status, 200);
    // Never read again. Another client asks meanwhile: it waits for the engine, which the
    // stalled stream must give up after the write timeout.
    const auto sent = Clock::now();
    Conn next(server.port());
    next.send(chat(chat_body(2, false)));
    const auto r = next.response(90000);
    const double seconds = std::chrono::duration<double>(Clock::now() - sent).count();
    ASSERT_TRUE(r) << server.log();
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(seconds, 60.0);
    const std::string log = server.log();
    EXPECT_THAT(log, HasSubstr("the client stopped reading")) << log;
    EXPECT_THAT(log, HasSubstr("(client stopped reading)")) << log;
    EXPECT_EQ(metric(server.port(), "neural_streams_stalled_total"), 1);
    // Paused within a bounded number of tokens: far fewer than the 60,000 asked for.
    const std::regex generated(R"(POST /v1/chat/completions 499 [^\n]*generated=(\d+))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(log, m, generated)) << log;
    EXPECT_LT(std::stoi(m[1]), 30000) << log;
}

// The store rewritten in place under a running server (same inode, other bytes): the next
// request gets 503 naming the change (never an answer from the new bytes), /health says
// degraded; a store truncated in place does the same and the server stays up.
TEST(ServerStore, AStoreChangedOnDiskGets503AndNeverMixedBytes) {
    test::TempDir dir;
    const std::filesystem::path store = make_store(dir.path());
    ServerProcess server({"--store", store.string()});
    ASSERT_TRUE(server.ok()) << server.log();
    {
        Conn c(server.port());
        c.send(chat(chat_body(2, false)));
        const auto r = c.response(60000);
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200);
    }
    // Rewritten in place: the same inode, one record's bytes changed.
    test::zero_store_record(store, 2, 5);
    for (int i = 0; i < 2; ++i) {
        Conn c(server.port());
        c.send(chat(chat_body(2, false)));
        const auto r = c.response(60000);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 503);
        EXPECT_THAT(r->body, HasSubstr("the store changed on disk since it was loaded"));
        EXPECT_THAT(r->body, HasSubstr("reload"));
        EXPECT_THAT(r->body, HasSubstr(R"("code":"model_files_changed")"));
        EXPECT_THAT(r->body, ::testing::Not(HasSubstr(dir.path().string())));
    }
    Conn h(server.port());
    h.send(get("/health"));
    const auto health = h.response(10000);
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 503);
    EXPECT_THAT(health->body, HasSubstr(R"("status":"degraded")"));
    EXPECT_THAT(health->body, HasSubstr("the store changed on disk"));
    // Truncated in place: still an error, no SIGBUS.
    std::filesystem::resize_file(store, std::filesystem::file_size(store) / 2);
    Conn c(server.port());
    c.send(chat(chat_body(2, false)));
    const auto r = c.response(60000);
    ASSERT_TRUE(r) << server.log();
    EXPECT_EQ(r->status, 503);
    EXPECT_THAT(r->body, HasSubstr("its size changed"));
    EXPECT_THAT(server.log(), HasSubstr(store.string()));
    EXPECT_TRUE(server.ok());
    EXPECT_EQ(fetch(server.port(), "/v1/models").status, 200);
}

// HTTP/1.1 framing rules: one non-empty Host; an absolute-form target names this server.
TEST(ServerHttp, HostHeaderRulesAndAbsoluteFormTargets) {
    ServerProcess server({});
    ASSERT_TRUE(server.ok());
    auto status_of = [&](const std::string& request) {
        Conn c(server.port());
        c.send(request);
        const auto r = c.response(10000);
        return r ? r->status : 0;
    };
    EXPECT_EQ(status_of("GET /health HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(status_of("GET /health HTTP/1.1\r\nHost:\r\n\r\n"), 400);
    EXPECT_EQ(status_of("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n"),
              400);
    EXPECT_EQ(status_of("GET http://evil.example/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
              400);
    EXPECT_EQ(status_of("GET http://evil.example/v1/models HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
              400);
    EXPECT_EQ(status_of("GET http://127.0.0.1/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), 200);
    EXPECT_EQ(status_of("GET /health HTTP/1.0\r\n\r\n"), 200);  // HTTP/1.0 may omit Host
    EXPECT_EQ(status_of(get("/health")), 200);
}

// An id the client sent comes back in an error cut to a bounded length.
TEST(ServerHttp, EchoedIdsAreCut) {
    ServerProcess server({});
    ASSERT_TRUE(server.ok());
    const std::string id = "resp_" + std::string(100000, 'x');
    const std::string body = R"({"model": ")" + kModel +
                             R"(", "input": "hi", "max_output_tokens": 16, )" +
                             R"("previous_response_id": ")" + id + R"("})";
    Conn c(server.port());
    c.send(
        "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        "application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
    const auto r = c.response(30000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_THAT(r->body, HasSubstr("previous_response_not_found"));
    EXPECT_LT(r->body.size(), 1000u);
}

// Slow clients: one address gets at most --max-connections-per-address places (its idle ones
// make room, busy ones leave 503), so slow connections from one address cannot lock out the
// others; a request trickling in below the minimum rate after its first 4 KiB gets 408.
TEST(ServerConnections, SlowClientsAreLimitedPerAddressAndByRate) {
    ServerProcess server(
        {"--max-connections-per-address", "4", "--max-connections", "16", "--read-timeout", "60"});
    ASSERT_TRUE(server.ok());
    std::vector<std::unique_ptr<Conn>> slow;
    for (int i = 0; i < 4; ++i) {
        slow.push_back(std::make_unique<Conn>(server.port()));
        slow.back()->send(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    {
        Conn extra(server.port());
        extra.send(get("/health"));
        const auto r = extra.response(10000);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 503);
        EXPECT_THAT(r->body, HasSubstr("the limit per address is 4"));
    }
    // The minimum rate: 4 KiB at once, then a byte a second.
    slow.front()->send(std::string(8192, ' '));
    for (int i = 0; i < 8 && !slow.front()->readable_within(0); ++i) {
        slow.front()->send(" ");
        std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const auto r = slow.front()->response(10000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_THAT(r->body, HasSubstr("the request arrived too slowly"));
    const std::string log = server.log();
    EXPECT_THAT(log, HasSubstr("too many open connections from 127.0.0.1"));
    EXPECT_THAT(log, HasSubstr("arrived too slowly"));
}

// SIGTERM: the running stream gets an error event and a proper end, the queued request 503,
// each is logged, and the process exits within the shutdown timeout.
TEST(ServerShutdown, SigtermEndsStreamsWithAnErrorAndQueuedRequestsWith503) {
    ServerProcess server({"--shutdown-timeout", "5"});
    ASSERT_TRUE(server.ok());
    Conn running(server.port());
    running.send(chat(chat_body(20000, true)));
    ASSERT_TRUE(running.head(20000));
    Conn queued(server.port());
    queued.send(chat(chat_body(2, false)));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = Clock::now();
    server.signal(SIGTERM);
    const auto refused = queued.response(10000);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 503);
    EXPECT_THAT(refused->body, HasSubstr(R"("code":"server_shutting_down")"));
    const auto stream = running.response(10000);
    ASSERT_TRUE(stream) << "the stream had no proper end";
    EXPECT_THAT(stream->body, HasSubstr(R"("code":"server_shutting_down")"));
    EXPECT_THAT(stream->body, HasSubstr("data: [DONE]"));
    const auto code = server.wait_exit(10000);
    ASSERT_TRUE(code) << "the server did not exit";
    EXPECT_EQ(*code, 0);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 6.0);
    const std::string log = server.log();
    EXPECT_THAT(log, HasSubstr("shutting down: 1 running and 1 waiting"));
    EXPECT_THAT(log, HasSubstr("(server shutting down)"));
    EXPECT_THAT(log, HasSubstr("POST /v1/chat/completions 503"));
    EXPECT_THAT(log, HasSubstr("neural-server: stopped"));
}

// Built-in tools (--tools; docs/API.md "Built-in tools"): the server runs the model's python call
// itself and the turn goes on with the result. The fixture's weights are random, so the model's
// two steps are scripted (--test-script); the tool, the loop and the answer are real.
TEST(ServerTools, APythonCallIsRunAndTheTurnGoesOnWithItsResult) {
    test::TempDir dir;
    test::write_file(
        dir / "script.json",
        R"(["<|channel|>analysis<|message|>Let me compute.<|end|><|start|>assistant<|channel|>)"
        R"(analysis to=python code<|message|>print(6 * 7)<|call|>",)"
        R"( "<|channel|>final<|message|>It is 42.<|return|>"])");
    ServerProcess server({"--enable-test-options", "--test-script", (dir / "script.json").string(),
                          "--tools", "python"});
    ASSERT_TRUE(server.ok());
    Conn c(server.port());
    c.send(chat(chat_body(100, false)));
    const auto r = c.response(60000);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_THAT(r->body, HasSubstr(R"("content":"It is 42.")"));
    EXPECT_THAT(r->body, HasSubstr("Let me compute."));  // the first step's reasoning
    EXPECT_THAT(r->body, HasSubstr(R"("finish_reason":"stop")"));
    EXPECT_THAT(r->body, ::testing::Not(HasSubstr("tool_calls")));
    // "42\n": the code ran and its output went to the model.
    EXPECT_THAT(server.log(), HasSubstr("built-in tool python: ok (3 bytes to the model)"));
}

TEST(ServerTools, AStreamGoesOnAcrossTheToolCall) {
    test::TempDir dir;
    test::write_file(dir / "script.json",
                     R"(["<|channel|>analysis to=python code<|message|>print(6 * 7)<|call|>",)"
                     R"( "<|channel|>final<|message|>It is 42.<|return|>"])");
    ServerProcess server({"--enable-test-options", "--test-script", (dir / "script.json").string(),
                          "--tools", "python"});
    ASSERT_TRUE(server.ok());
    Conn c(server.port());
    c.send(chat(chat_body(100, true)));
    const auto streamed = c.response(60000);
    ASSERT_TRUE(streamed);
    ASSERT_EQ(streamed->status, 200);
    EXPECT_THAT(streamed->body, HasSubstr(R"("content":"42")"));
    EXPECT_THAT(streamed->body, HasSubstr(R"("reasoning_content":")"));  // the call
    EXPECT_THAT(streamed->body, ::testing::Not(HasSubstr("tool_calls")));
    // One role chunk, one finish, one end for the whole turn.
    auto count = [&](const std::string& what) {
        std::size_t n = 0;
        for (std::size_t at = 0; (at = streamed->body.find(what, at)) != std::string::npos; ++at)
            ++n;
        return n;
    };
    EXPECT_EQ(count(R"("role":"assistant")"), 1u);
    EXPECT_EQ(count(R"("finish_reason":"stop")"), 1u) << streamed->body;
    EXPECT_EQ(count("data: [DONE]"), 1u);
    EXPECT_THAT(server.log(), HasSubstr("built-in tool python: ok (3 bytes to the model)"));
}

// A client that leaves while a built-in tool runs cancels it (the python session is killed),
// and the server goes on serving.
TEST(ServerTools, AClientThatLeavesDuringAToolCallCancelsIt) {
    test::TempDir dir;
    test::write_file(dir / "script.json",
                     R"(["<|channel|>analysis to=python code<|message|>import time\ntime.sleep(60))"
                     R"(<|call|>", "<|channel|>final<|message|>done<|return|>"])");
    ServerProcess server({"--enable-test-options", "--test-script", (dir / "script.json").string(),
                          "--tools", "python"});
    ASSERT_TRUE(server.ok());
    {
        Conn leaving(server.port());
        leaving.send(chat(chat_body(100, true)));
        const auto head = leaving.head(20000);
        ASSERT_TRUE(head);
        ASSERT_EQ(head->status, 200);
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the code is sleeping
    }
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline &&
           server.log().find("built-in tool python: cancelled") == std::string::npos)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_THAT(server.log(), HasSubstr("built-in tool python: cancelled"));
    EXPECT_THAT(server.log(), HasSubstr("(client went away)"));
    Conn next(server.port());
    next.send(chat(chat_body(100, false)));
    const auto r = next.response(30000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_THAT(r->body, HasSubstr(R"("content":"done")"));
}

// A browser call reaches the browser tool (here without a search provider: the model is told).
TEST(ServerTools, ABrowserCallIsRun) {
    test::TempDir dir;
    test::write_file(dir / "script.json",
                     R"(["<|channel|>analysis to=browser.search code<|message|>{\"query\": \"x\"})"
                     R"(<|call|>", "<|channel|>final<|message|>none<|return|>"])");
    ServerProcess server({"--enable-test-options", "--test-script", (dir / "script.json").string(),
                          "--tools", "browser"});
    ASSERT_TRUE(server.ok());
    Conn c(server.port());
    c.send(chat(chat_body(100, false)));
    const auto r = c.response(30000);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_THAT(r->body, HasSubstr(R"("content":"none")"));
    EXPECT_THAT(server.log(), HasSubstr("built-in tool browser.search: failed"));
}

// /v1/responses runs them too: the call is no output item, the answer and the usage cover the
// whole turn; a stream has one response.created and one response.completed.
std::string responses(const std::string& body) {
    return "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
           "application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(ServerTools, TheResponsesApiRunsABuiltInCallToo) {
    test::TempDir dir;
    const std::string step1 =
        R"("<|channel|>analysis<|message|>Let me compute.<|end|><|start|>assistant<|channel|>)"
        R"(analysis to=python code<|message|>print(6 * 7)<|call|>")";
    const std::string step2 = R"("<|channel|>final<|message|>It is 42.<|return|>")";
    test::write_file(dir / "script.json",
                     "[" + step1 + ", " + step2 + ", " + step1 + ", " + step2 + "]");
    ServerProcess server({"--enable-test-options", "--test-script", (dir / "script.json").string(),
                          "--tools", "python"});
    ASSERT_TRUE(server.ok());
    const std::string body =
        R"({"model": ")" + kModel + R"(", "input": "What is 6*7?", "max_output_tokens": 100)";
    {
        Conn c(server.port());
        c.send(responses(body + "}"));
        const auto r = c.response(60000);
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
        const auto json = nlohmann::json::parse(r->body);
        EXPECT_EQ(json["status"], "completed");
        std::string types, text;
        for (const auto& item : json["output"]) {
            types += item["type"].get<std::string>() + " ";
            if (item["type"] == "message") text = item["content"][0]["text"];
        }
        EXPECT_EQ(text, "It is 42.");
        EXPECT_THAT(types, HasSubstr("reasoning"));
        EXPECT_THAT(r->body, ::testing::Not(HasSubstr("function_call")));
        EXPECT_THAT(r->body, HasSubstr("Let me compute."));
        EXPECT_GT(json["usage"]["output_tokens"].get<int>(), 10);  // both steps
    }
    EXPECT_THAT(server.log(), HasSubstr("built-in tool python: ok (3 bytes to the model)"));
    Conn c(server.port());
    c.send(responses(body + R"(, "stream": true})"));
    const auto streamed = c.response(60000);
    ASSERT_TRUE(streamed);
    ASSERT_EQ(streamed->status, 200);
    auto count = [&](const std::string& what) {
        std::size_t n = 0;
        for (std::size_t at = 0; (at = streamed->body.find(what, at)) != std::string::npos; ++at)
            ++n;
        return n;
    };
    EXPECT_EQ(count("event: response.created"), 1u) << streamed->body;
    EXPECT_EQ(count("event: response.completed"), 1u) << streamed->body;
    EXPECT_THAT(streamed->body, HasSubstr(R"("text":"It is 42.")"));
    EXPECT_THAT(streamed->body, ::testing::Not(HasSubstr("function_call")));
}

TEST(ServerTools, WithoutToolsABuiltInCallIsNotRun) {
    test::TempDir dir;
    test::write_file(dir / "script.json",
                     R"(["<|channel|>analysis to=python code<|message|>print(1)<|call|>"])");
    ServerProcess server(
        {"--enable-test-options", "--test-script", (dir / "script.json").string()});
    ASSERT_TRUE(server.ok());
    Conn c(server.port());
    c.send(chat(chat_body(100, false)));
    const auto r = c.response(60000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_THAT(server.log(), ::testing::Not(HasSubstr("built-in tool")));
}

}  // namespace
}  // namespace neural
