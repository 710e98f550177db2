// neural repack --checkpoint DIR|FILE.gguf --out STORE --format raw|packed [--threads N]
// neural verify-store STORE [--checkpoint DIR] [--threads N]
#include <atomic>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "neural/error.h"
#include "platform/cancel_signals.h"
#include "platform/output_file.h"
#include "store/repack.h"
#include "store/verify.h"
#include "neural/version.h"

namespace neural::cli {

namespace {

constexpr const char* kRepackHelp =
    R"(usage: neural repack --checkpoint DIR|FILE.gguf --out STORE --format raw|packed [--threads N]

Repacks a checkpoint's MXFP4 experts into an expert store: one contiguous, 4 KiB-aligned record
per (layer, expert), memory-mapped by the engine (--store FILE of generate, chat and logits).
  --checkpoint DIR   checkpoint folder (config.json + model.safetensors or shards + index), or
                     a gpt-oss GGUF file (LM Studio, Ollama, llama.cpp; of a split GGUF any
                     part): its MXFP4 experts become the same records
  --out STORE        store file to write; an existing one is replaced only when the new one
                     is complete (written to STORE.tmp-N beside it, synced, renamed)
  --format KIND      raw: the checkpoint's bytes (13,219,200 B per expert at 20b/120b)
                     packed: scales as a base byte + 4-bit offsets (12,839,040 B per expert);
                     decodes to exactly the same values
  --threads N        record builders (default 8; they mostly wait for the disk)
Ctrl+C, SIGTERM and SIGHUP cancel and remove the partial file (exit status 128 + signal). A
temporary file left by a repack that was killed outright is removed by the next repack to the
same STORE, which says so.
)";

constexpr const char* kVerifyHelp =
    R"(usage: neural verify-store STORE [--checkpoint DIR|FILE.gguf] [--threads N]

Checks an expert store: the header, every record checksum and packed escape, and with
--checkpoint that every expert decodes to exactly the checkpoint's bytes (raw) or values
(packed) and that the checkpoint's expert hash is the one recorded at repack time.
Exit status 0 when everything matches, 1 when anything is wrong (each problem names the layer
and expert).
  --checkpoint DIR   the checkpoint the store was made from (folder or GGUF: either one of
                     the same model matches)
  --threads N        worker threads (default: all cores)
)";

// Set by CancelOnSignals (Ctrl+C, SIGTERM, SIGHUP); the repack and verify loops poll it.
std::atomic<bool> g_cancel{false};

std::string gb(double n) { return fmt::format("{:.2f} GB", n / 1e9); }

// Progress on stderr about once a second: rewritten in place on a terminal, a line each in a log.
class ProgressLine {
public:
    explicit ProgressLine(const char* what) : what_(what), tty_(stderr_is_terminal()) {}
    void show(const std::string& text, bool final) {
        const auto now = std::chrono::steady_clock::now();
        if (!final && shown_ && now - last_ < std::chrono::seconds(1)) return;
        if (final && !shown_) return;  // quick jobs print only their summary
        if (!final && !shown_ && now - start_ < std::chrono::seconds(1)) return;
        last_ = now;
        shown_ = true;
        if (tty_) {
            fmt::print(stderr, "\r{}: {:<70}", what_, text);
            if (final) fmt::print(stderr, "\n");
        } else {
            fmt::print(stderr, "{}: {}\n", what_, text);
        }
        std::fflush(stderr);
    }
    void abandon() {
        if (shown_ && tty_) fmt::print(stderr, "\n");
    }

private:
    const char* what_;
    bool tty_;
    bool shown_ = false;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point last_;
};

}  // namespace

int cmd_repack(int argc, char** argv) {
    Args args(argc, argv, {"--checkpoint", "--out", "--format", "--threads"}, {"--help"});
    if (args.has("--help")) {
        fmt::print("{}", kRepackHelp);
        return 0;
    }
    if (!args.positional().empty()) fail("unexpected argument \"{}\"", args.positional()[0]);
    store::RepackOptions opt;
    auto ckpt = args.get("--checkpoint");
    auto out = args.get("--out");
    auto format = args.get("--format");
    if (!ckpt || !out || !format)
        fail("--checkpoint, --out and --format are required\n{}", kRepackHelp);
    auto kind = store::parse_kind(*format);
    if (!kind) fail("--format must be raw or packed, not \"{}\"", *format);
    opt.checkpoint = *ckpt;
    opt.out = *out;
    opt.kind = *kind;
    opt.threads = static_cast<int>(args.get_int("--threads", 0, 0, 256));
    opt.created_by = fmt::format("neural {}", NEURAL_VERSION);
    opt.cancel = &g_cancel;
    ProgressLine line("repack");
    opt.on_progress = [&](const store::RepackProgress& p) {
        line.show(fmt::format("{} / {} ({:.0f}%), {:.0f} MB/s, ETA {:.0f} s", gb(p.bytes_done),
                              gb(p.bytes_total), 100.0 * p.bytes_done / p.bytes_total,
                              p.bytes_per_second / 1e6, p.eta_seconds),
                  p.records_done == p.records_total);
    };

    opt.on_stale_removed = [](const std::filesystem::path& p) {
        fmt::print("removed {}, left behind by an interrupted repack\n", p.string());
        std::fflush(stdout);
    };

    store::RepackResult r;
    {
        CancelOnSignals signals(g_cancel);
        try {
            r = store::repack(opt);
        } catch (const Cancelled&) {
            line.abandon();
            fmt::print(stderr, "neural repack: cancelled; {} was not changed\n", *out);
            return signals.exit_status();
        } catch (...) {
            line.abandon();
            throw;
        }
    }
    fmt::print(
        "wrote {} store {}: {} records, {} bytes ({}), {} escaped rows, {:.1f} s, {:.0f} MB/s\n",
        store::kind_name(r.kind), r.path.string(), r.records, r.bytes,
        gb(static_cast<double>(r.bytes)), r.escaped_rows, r.seconds,
        r.seconds > 0 ? r.bytes / r.seconds / 1e6 : 0.0);
    return 0;
}

int cmd_verify_store(int argc, char** argv) {
    Args args(argc, argv, {"--checkpoint", "--threads"}, {"--help"});
    if (args.has("--help")) {
        fmt::print("{}", kVerifyHelp);
        return 0;
    }
    if (args.positional().size() != 1) fail("expected exactly one STORE argument\n{}", kVerifyHelp);
    store::VerifyOptions opt;
    if (auto c = args.get("--checkpoint")) opt.checkpoint = *c;
    opt.threads = static_cast<int>(args.get_int("--threads", 0, 0, 4096));
    opt.cancel = &g_cancel;
    ProgressLine line("verify-store");
    opt.on_progress = [&](const store::VerifyProgress& p) {
        line.show(
            fmt::format("{} / {} records, {:.0f} s", p.records_done, p.records_total, p.seconds),
            p.records_done == p.records_total);
    };
    store::VerifyReport r;
    {
        CancelOnSignals signals(g_cancel);
        try {
            r = store::verify_store(args.positional()[0], opt);
        } catch (const Cancelled&) {
            line.abandon();
            fmt::print(stderr, "neural verify-store: cancelled\n");
            return signals.exit_status();
        } catch (...) {
            line.abandon();
            throw;
        }
    }
    const std::string& path = args.positional()[0];
    fmt::print("{}: {}\n", path, r.description);
    fmt::print("  {} records, {} payload bytes, {} file bytes, {} escaped rows, {:.1f} s\n",
               r.records, r.payload_bytes, r.file_bytes, r.escaped_rows, r.seconds);
    if (!r.ok()) {
        for (const auto& p : r.problems) fmt::print(stderr, "  FAIL {}\n", p);
        if (r.problem_count > static_cast<std::int64_t>(r.problems.size())) {
            fmt::print(stderr, "  ... and {} more\n",
                       r.problem_count - static_cast<std::int64_t>(r.problems.size()));
        }
        fmt::print(stderr, "neural verify-store: error: {} problem(s) in {}\n", r.problem_count,
                   path);
        return 1;
    }
    fmt::print(
        "  OK: header and every record checksum{}\n",
        r.checkpoint_checked ? "; every expert equals the checkpoint's, expert hash matches" : "");
    return 0;
}

}  // namespace neural::cli
