#include "support/run_neural.h"

#ifndef _WIN32
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>

#include "support/fixtures.h"

namespace neural::test {

namespace {
// Single quotes for the shell ('\'' for a quote inside).
std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}
}  // namespace

Proc run_neural(const std::vector<std::string>& args, const std::filesystem::path& dir,
                int timeout_seconds) {
    static std::atomic<int> runs{0};
    const int n = runs++;
    const auto out = dir / ("out" + std::to_string(n));
    const auto err = dir / ("err" + std::to_string(n));
    Proc r;
    r.cmd = "timeout " + std::to_string(timeout_seconds) + " ";
    r.cmd += quote((bin_dir() / "neural").string());
    for (const auto& a : args) {
        r.cmd += ' ';  // (appending pieces: GCC 12 warns falsely about " " + string)
        r.cmd += quote(a);
    }
    r.cmd += " </dev/null >";
    r.cmd += quote(out.string());
    r.cmd += " 2>";
    r.cmd += quote(err.string());
    const int status = std::system(r.cmd.c_str());
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
}

}  // namespace neural::test

#else  // _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <atomic>

#include "support/fixtures.h"

namespace neural::test {

namespace {

std::wstring widen(const std::string& s) {
    if (s.empty()) return {};
    const int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
    std::wstring w(static_cast<std::size_t>(n), L'\0');
    MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), w.data(), n);
    return w;
}

// One argument quoted the way CommandLineToArgvW (and the C runtime) split it again:
// backslashes are literal except before a quote, where they and the quote are escaped.
std::wstring quote(const std::wstring& a) {
    if (!a.empty() && a.find_first_of(L" \t\"") == std::wstring::npos) return a;
    std::wstring q = L"\"";
    std::size_t backslashes = 0;
    for (wchar_t c : a) {
        if (c == L'\\') {
            ++backslashes;
            continue;
        }
        q.append(c == L'"' ? 2 * backslashes + 1 : backslashes, L'\\');
        backslashes = 0;
        q += c;
    }
    q.append(2 * backslashes, L'\\');  // before the closing quote
    return q + L"\"";
}

// Child output in text mode ends lines with CRLF; the tests expect LF as on POSIX.
std::string lf_only(std::string s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') continue;
        out += s[i];
    }
    return out;
}

HANDLE inheritable_file(const std::wstring& path, DWORD access, DWORD disposition) {
    SECURITY_ATTRIBUTES sa{sizeof sa, nullptr, TRUE};
    return CreateFileW(path.c_str(), access, FILE_SHARE_READ | FILE_SHARE_WRITE, &sa, disposition,
                       FILE_ATTRIBUTE_NORMAL, nullptr);
}

}  // namespace

Proc run_neural(const std::vector<std::string>& args, const std::filesystem::path& dir,
                int timeout_seconds) {
    static std::atomic<int> runs{0};
    const int n = runs++;
    const auto out = dir / ("out" + std::to_string(n));
    const auto err = dir / ("err" + std::to_string(n));
    Proc r;
    std::wstring cmdline = quote((bin_dir() / "neural.exe").wstring());
    r.cmd = (bin_dir() / "neural.exe").string();
    for (const auto& a : args) {
        cmdline += L' ';
        cmdline += quote(widen(a));
        r.cmd += ' ';
        r.cmd += a;
    }
    HANDLE in = inheritable_file(L"NUL", GENERIC_READ, OPEN_EXISTING);
    HANDLE o = inheritable_file(out.wstring(), GENERIC_WRITE, CREATE_ALWAYS);
    HANDLE e = inheritable_file(err.wstring(), GENERIC_WRITE, CREATE_ALWAYS);
    STARTUPINFOW si{};
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = in;
    si.hStdOutput = o;
    si.hStdError = e;
    PROCESS_INFORMATION pi{};
    const BOOL started = in != INVALID_HANDLE_VALUE && o != INVALID_HANDLE_VALUE &&
                         e != INVALID_HANDLE_VALUE &&
                         CreateProcessW(nullptr, cmdline.data(), nullptr, nullptr, TRUE, 0, nullptr,
                                        nullptr, &si, &pi);
    for (HANDLE h : {in, o, e}) {
        if (h != INVALID_HANDLE_VALUE) CloseHandle(h);
    }
    if (!started) {
        r.err = "CreateProcessW failed (error " + std::to_string(GetLastError()) + ")";
        return r;
    }
    CloseHandle(pi.hThread);
    if (WaitForSingleObject(pi.hProcess, static_cast<DWORD>(timeout_seconds) * 1000u) ==
        WAIT_TIMEOUT) {
        TerminateProcess(pi.hProcess, 124);
        WaitForSingleObject(pi.hProcess, INFINITE);
    }
    DWORD code = 0;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hProcess);
    r.code = static_cast<int>(code);
    r.out = lf_only(read_file(out));
    r.err = lf_only(read_file(err));
    return r;
}

}  // namespace neural::test
#endif
