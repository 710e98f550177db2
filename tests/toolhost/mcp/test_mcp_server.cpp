// A small MCP server over stdio for the MCP client's tests (tests/toolhost/mcp): standard C++ and
// nlohmann JSON only, so it builds for Linux and Windows (mingw-w64) alike and the stdio tests
// also run under Wine, where there is no node for the npm servers.
//
// Tools: echo {text}, add {a, b}, fail (isError), slow {steps, ms} (progress notifications;
// stops on notifications/cancelled), crash (exits with code 3 mid-call), garbage (non-JSON lines,
// then a malformed result), big {bytes}, image (non-text content), add_tool (a new tool and
// notifications/tools/list_changed), ping_client (a ping and an unknown request to the client).
// tools/list is paged (--page-size, default 2). Options that break the handshake:
//   --protocol V        answer initialize with revision V
//   --many-tools N      N more tools (t0, t1, ...); --deep-schema: a tool nesting 40 levels
// And for the browser tool's MCP search provider (docs/TOOLS.md "browser"):
//   --search-tools URL  two search tools whose results link to pages under URL: web_search
//                       {query, count} answers with "Title: / Description: / URL:" text blocks
//                       as many search servers do, json_search {q, max_results} with JSON text
//   --garbage-at-start  print non-JSON lines and never answer properly
//   --exit-at-start N   print to stderr and exit with code N at once
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

using json = nlohmann::ordered_json;

namespace {

std::mutex mutex;
std::condition_variable ready;
std::deque<std::string> inbox;
bool input_closed = false;

bool closed() {
    std::lock_guard<std::mutex> lock(mutex);
    return input_closed && inbox.empty();
}

void reader() {
    std::string line;
    while (std::getline(std::cin, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::lock_guard<std::mutex> lock(mutex);
        inbox.push_back(line);
        ready.notify_one();
    }
    std::lock_guard<std::mutex> lock(mutex);
    input_closed = true;
    ready.notify_one();
}

// The next line, or nullopt at end of input or after `wait`.
std::optional<std::string> next_line(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!ready.wait_for(lock, wait, [] { return !inbox.empty() || input_closed; }))
        return std::nullopt;
    if (inbox.empty()) return std::nullopt;
    std::string line = std::move(inbox.front());
    inbox.pop_front();
    return line;
}

void write_line(const std::string& text) { std::cout << text << '\n' << std::flush; }

void send(const json& message) { write_line(message.dump()); }

void log(const std::string& text) { std::cerr << text << std::endl; }

json result(const json& id, json r) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(r)}};
}

json error(const json& id, int code, const std::string& message) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

json text_result(const std::string& text, bool is_error = false) {
    json r = {{"content", json::array({{{"type", "text"}, {"text", text}}})}};
    if (is_error) r["isError"] = true;
    return r;
}

json schema(json properties, std::vector<std::string> required) {
    json s = {{"type", "object"}, {"properties", std::move(properties)}};
    if (!required.empty()) s["required"] = required;
    return s;
}

int many_tools = 0;        // --many-tools N: N more tools t0, t1, ...
bool deep_schema = false;  // --deep-schema: a tool whose schema nests 40 levels
std::string search_base;   // --search-tools URL

std::vector<json> tools() {
    std::vector<json> t = {
        {{"name", "echo"},
         {"description", "Echoes the text back."},
         {"inputSchema",
          schema({{"text", {{"type", "string"}, {"description", "What to echo"}}}}, {"text"})}},
        {{"name", "add"},
         {"description", "Adds two numbers."},
         {"inputSchema",
          schema({{"b", {{"type", "number"}}}, {"a", {{"type", "number"}}}}, {"b", "a"})}},
        {{"name", "fail"},
         {"description", "Always reports an error."},
         {"inputSchema", schema(json::object(), {})}},
        {{"name", "slow"},
         {"description", "Sleeps in steps, reporting progress."},
         {"inputSchema",
          schema({{"steps", {{"type", "integer"}}}, {"ms", {{"type", "integer"}}}}, {})}},
        {{"name", "crash"},
         {"description", "Exits in the middle of the call."},
         {"inputSchema", schema(json::object(), {})}},
        {{"name", "garbage"},
         {"description", "Answers with garbage."},
         {"inputSchema", schema(json::object(), {})}},
        {{"name", "big"},
         {"description", "Returns a long text."},
         {"inputSchema", schema({{"bytes", {{"type", "integer"}}}}, {"bytes"})}},
        {{"name", "image"},
         {"description", "Returns an image and a resource link."},
         {"inputSchema", schema(json::object(), {})}},
        {{"name", "add_tool"},
         {"description", "Adds the tool \"extra\"."},
         {"inputSchema", schema(json::object(), {})}},
        {{"name", "ping_client"},
         {"description", "Pings the client."},
         {"inputSchema", schema(json::object(), {})}},
    };
    for (int i = 0; i < many_tools; ++i)
        t.push_back(
            {{"name", "t" + std::to_string(i)}, {"inputSchema", schema(json::object(), {})}});
    if (!search_base.empty()) {
        t.push_back({{"name", "web_search"},
                     {"description", "Searches the web."},
                     {"inputSchema",
                      schema({{"query", {{"type", "string"}}}, {"count", {{"type", "integer"}}}},
                             {"query"})}});
        t.push_back({{"name", "json_search"},
                     {"description", "Searches the web, answering JSON."},
                     {"inputSchema",
                      schema({{"q", {{"type", "string"}}}, {"max_results", {{"type", "integer"}}}},
                             {"q"})}});
    }
    if (deep_schema) {
        json deep = {{"type", "string"}};
        for (int i = 0; i < 40; ++i) deep = schema({{"x", deep}}, {});
        t.push_back({{"name", "deep"}, {"description", "Deeply nested."}, {"inputSchema", deep}});
    }
    return t;
}

bool extra_tool = false;
std::vector<json> deferred;  // messages read while a tool waited for something else

json call_tool(const json& id, const json& params) {
    const std::string name = params.value("name", "");
    const json args = params.contains("arguments") ? params["arguments"] : json::object();
    if (name == "echo") return text_result(args.value("text", ""));
    if (name == "add") {
        if (!args.contains("a") || !args["a"].is_number() || !args.contains("b") ||
            !args["b"].is_number())
            return text_result("add needs numbers a and b", true);
        const double sum = args["a"].get<double>() + args["b"].get<double>();
        return text_result(json(sum).dump());
    }
    if (name == "fail") return text_result("the tool failed on purpose", true);
    if (!search_base.empty() && (name == "web_search" || name == "json_search")) {
        const bool text = name == "web_search";
        const json query = args.value(text ? "query" : "q", json());
        if (!query.is_string() || query.get<std::string>().empty())
            return text_result("a query is required", true);
        if (query == "fail") return text_result("the search engine is down", true);
        const int count = args.value(text ? "count" : "max_results", 10);
        const std::vector<std::vector<std::string>> results = {
            {"Moons of Jupiter", search_base + "/moons/article.html",
             "About " + query.get<std::string>() + ": Jupiter has 95 known moons."},
            {"Europa", "https://en.example.org/wiki/Europa", "An icy moon."},
            {"Io", "https://en.example.org/wiki/Io", "A volcanic moon."},
        };
        std::string blocks;
        json list = json::array();
        for (int i = 0; i < count && i < int(results.size()); ++i) {
            const auto& r = results[i];
            blocks += (i ? "\n\n" : "") + std::string("Title: ") + r[0] + "\nDescription: " + r[2] +
                      "\nURL: " + r[1];
            list.push_back({{"title", r[0]}, {"url", r[1]}, {"snippet", r[2]}});
        }
        return text_result(text ? blocks : json({{"results", list}}).dump());
    }
    if (name == "big") return text_result(std::string(args.value("bytes", 0), 'x'));
    if (name == "image") {
        return {
            {"content",
             json::array(
                 {{{"type", "text"}, {"text", "an image follows"}},
                  {{"type", "image"}, {"data", "iVBORw0KGgo="}, {"mimeType", "image/png"}},
                  {{"type", "resource_link"}, {"uri", "file:///tmp/a.txt"}, {"name", "a.txt"}}})}};
    }
    if (name == "extra" && extra_tool) return text_result("extra was called");
    if (name == "add_tool") {
        extra_tool = true;
        send({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
        return text_result("added");
    }
    if (name == "crash") {
        log("crash: exiting in the middle of a call");
        std::fflush(stdout);
        std::_Exit(3);
    }
    if (name == "garbage") {
        write_line("this line is not JSON");
        write_line("{\"hello\": \"world\"}");
        return json("nonsense");  // a result that is not a CallToolResult
    }
    if (name == "slow") {
        const int steps = args.value("steps", 5);
        const int ms = args.value("ms", 200);
        json token;
        if (params.contains("_meta") && params["_meta"].contains("progressToken"))
            token = params["_meta"]["progressToken"];
        for (int i = 1; i <= steps; ++i) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
            while (std::chrono::steady_clock::now() < until) {
                auto line = next_line(std::chrono::milliseconds(10));
                if (!line) {
                    if (closed()) std::_Exit(0);
                    continue;
                }
                const json m = json::parse(*line, nullptr, false);
                if (!m.is_discarded() && m.value("method", "") == "notifications/cancelled" &&
                    m.contains("params") && m["params"].value("requestId", json()) == id) {
                    log("slow: cancelled request " + id.dump() + " (" +
                        m["params"].value("reason", "") + ")");
                    return nullptr;  // a cancelled request gets no answer
                }
                if (!m.is_discarded() && m.value("method", "") == "tools/call" &&
                    m.contains("params") && m["params"].value("name", "") == "crash")
                    call_tool(m["id"], m["params"]);  // crashes while this call still runs
                deferred.push_back(m);
            }
            if (!token.is_null())
                send({{"jsonrpc", "2.0"},
                      {"method", "notifications/progress"},
                      {"params",
                       {{"progressToken", token},
                        {"progress", i},
                        {"total", steps},
                        {"message", "step " + std::to_string(i)}}}});
        }
        return text_result("slept " + std::to_string(steps) + " steps");
    }
    if (name == "ping_client") {
        send({{"jsonrpc", "2.0"}, {"id", "srv-ping"}, {"method", "ping"}});
        send({{"jsonrpc", "2.0"}, {"id", "srv-roots"}, {"method", "roots/list"}});
        json answers = json::object();
        while (answers.size() < 2) {
            auto line = next_line(std::chrono::seconds(10));
            if (!line) return text_result("the client did not answer", true);
            const json m = json::parse(*line, nullptr, false);
            if (!m.is_discarded() && m.contains("id") && m["id"].is_string() &&
                !m.contains("method"))
                answers[m["id"].get<std::string>()] = m;
            else
                deferred.push_back(m);
        }
        return text_result(answers.dump());
    }
    return text_result("unknown tool " + name, true);
}

void handle(const json& m, const std::string& protocol, std::size_t page_size) {
    if (m.is_discarded() || !m.is_object() || !m.contains("method")) return;
    const std::string method = m.value("method", "");
    if (!m.contains("id")) {
        log("notification: " + method);
        return;
    }
    const json id = m["id"];
    const json params = m.contains("params") ? m["params"] : json::object();
    if (method == "initialize") {
        std::string version = protocol;
        if (version.empty()) {
            const std::string asked = params.value("protocolVersion", "");
            version = asked == "2025-06-18" || asked == "2025-03-26" ? asked : "2025-06-18";
        }
        send(result(id, {{"protocolVersion", version},
                         {"capabilities",
                          {{"tools", {{"listChanged", true}}}, {"logging", json::object()}}},
                         {"serverInfo", {{"name", "neural-mcp-test-server"}, {"version", "1.0"}}},
                         {"instructions", "A test server."}}));
    } else if (method == "ping") {
        send(result(id, json::object()));
    } else if (method == "tools/list") {
        std::vector<json> all = tools();
        if (extra_tool)
            all.push_back({{"name", "extra"},
                           {"description", "Added later."},
                           {"inputSchema", schema(json::object(), {})}});
        std::size_t start = 0;
        if (params.contains("cursor")) start = std::stoul(params["cursor"].get<std::string>());
        json page = json::array();
        for (std::size_t i = start; i < all.size() && i < start + page_size; ++i)
            page.push_back(all[i]);
        json r = {{"tools", page}};
        if (start + page_size < all.size()) r["nextCursor"] = std::to_string(start + page_size);
        send(result(id, r));
    } else if (method == "tools/call") {
        json r = call_tool(id, params);
        if (!r.is_null()) send(result(id, r));
    } else {
        send(error(id, -32601, "Method not found"));
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string protocol;
    std::size_t page_size = 2;
    bool garbage = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--protocol" && i + 1 < argc) {
            protocol = argv[++i];
        } else if (a == "--page-size" && i + 1 < argc) {
            page_size = std::stoul(argv[++i]);
        } else if (a == "--exit-at-start" && i + 1 < argc) {
            log("fatal: the test server was told to exit at start");
            return std::atoi(argv[++i]);
        } else if (a == "--search-tools" && i + 1 < argc) {
            search_base = argv[++i];
        } else if (a == "--many-tools" && i + 1 < argc) {
            many_tools = std::atoi(argv[++i]);
        } else if (a == "--deep-schema") {
            deep_schema = true;
        } else if (a == "--garbage-at-start") {
            write_line("Starting server... (this is not JSON-RPC)");
            write_line("[1, 2, 3]");
            garbage = true;
        }
    }
    std::thread(reader).detach();
    for (;;) {
        while (!deferred.empty()) {
            const json m = deferred.front();
            deferred.erase(deferred.begin());
            handle(m, protocol, page_size);
        }
        auto line = next_line(std::chrono::milliseconds(200));
        if (!line) {
            if (closed()) break;
            continue;
        }
        if (garbage) {  // never a valid answer
            write_line("garbage instead of an answer");
            continue;
        }
        handle(json::parse(*line, nullptr, false), protocol, page_size);
    }
    std::fflush(stdout);
    std::_Exit(0);  // the reader thread is detached and blocked in getline
}
