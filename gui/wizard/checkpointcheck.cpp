#include "wizard/checkpointcheck.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <QMetaObject>

#include <filesystem>

#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif

#include "model/gguf.h"
#include "neural/error.h"
#include "runtime/model.h"
#include "store/format.h"
#include "store/repack.h"
#include "store/verify.h"

namespace neural::gui {

std::uint64_t physicalRamBytes() {
#ifdef _WIN32
    MEMORYSTATUSEX s{};
    s.dwLength = sizeof(s);
    return GlobalMemoryStatusEx(&s) ? s.ullTotalPhys : 0;
#else
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0
               ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(size)
               : 0;
#endif
}

QString formatBytes(std::uint64_t bytes) {
    const double b = static_cast<double>(bytes);
    if (b >= 1024.0 * 1024 * 1024)
        return QStringLiteral("%1 GiB").arg(b / (1024.0 * 1024 * 1024), 0, 'f', 1);
    if (b >= 1024.0 * 1024) return QStringLiteral("%1 MiB").arg(b / (1024.0 * 1024), 0, 'f', 1);
    if (b >= 1024.0) return QStringLiteral("%1 KiB").arg(b / 1024.0, 0, 'f', 1);
    return QStringLiteral("%1 B").arg(bytes);
}

CheckpointReport checkCheckpoint(const QString& dir) {
    CheckpointReport r;
    if (dir.trimmed().isEmpty()) {
        r.error = QObject::tr("choose a checkpoint folder or a GGUF file");
        return r;
    }
    const bool gguf = is_gguf_path(dir.toStdString());
    if (gguf && !QFileInfo(dir).isFile()) {
        r.error = QObject::tr("%1 does not exist").arg(dir);
        return r;
    }
    if (!gguf && !QFileInfo(dir).isDir()) {
        r.error = QObject::tr("%1 is not a folder or a .gguf file").arg(dir);
        return r;
    }
    try {
        LoadOptions check;
        check.routing_stats = "off";  // a check, not use: nothing to learn
        const auto model = Model::load(dir.toStdString(), check);
        const ModelConfig& c = model->config();
        r.shape = QObject::tr(
                      "%1 layers, %2 experts (top-%3), hidden %4, expert width %5, "
                      "%6 heads / %7 KV heads, vocab %8, context %9")
                      .arg(c.num_layers)
                      .arg(c.num_experts)
                      .arg(c.experts_per_token)
                      .arg(c.hidden_size)
                      .arg(c.intermediate_size)
                      .arg(c.num_heads)
                      .arg(c.num_kv_heads)
                      .arg(c.vocab_size)
                      .arg(c.max_position_embeddings);
        for (const std::filesystem::path& f : model->checkpoint().file_paths())
            r.checkpointBytes += std::filesystem::file_size(f);
        const auto records =
            static_cast<std::uint64_t>(c.num_layers) * static_cast<std::uint64_t>(c.num_experts);
        const std::uint64_t index = store::kHeaderBytes + records * store::kIndexEntryBytes;
        for (const auto kind : {store::StoreKind::kRaw, store::StoreKind::kPacked}) {
            const auto layout = store::RecordLayout::make(kind, c.hidden_size, c.intermediate_size);
            const std::uint64_t bytes =
                store::align_up(index, store::kRecordAlignment) +
                records * store::align_up(layout.fixed_bytes, store::kRecordAlignment);
            (kind == store::StoreKind::kRaw ? r.rawStoreBytes : r.packedStoreBytes) = bytes;
        }
    } catch (const std::exception& e) {
        r.error = QString::fromUtf8(e.what());
        return r;
    }
    r.ramBytes = physicalRamBytes();
    // The CPU backend maps the weights; what does not fit in RAM is re-read from disk for every
    // token. Keep ~10% of RAM for the OS and the KV cache.
    r.fitsRam = r.ramBytes > 0 && r.checkpointBytes <= r.ramBytes / 10 * 9;
    // The figures say what they are: the checkpoint's size on disk against the PC's RAM (the
    // next page says how much RAM the model will use as planned).
    r.fitText = (r.fitsRam ? QObject::tr("RAM: the checkpoint (%1 on disk) fits in this PC's %2 "
                                         "of RAM.")
                           : QObject::tr("RAM: the checkpoint (%1 on disk) does not fit in this "
                                         "PC's %2 of RAM: experts will be read from disk during "
                                         "generation (slow)."))
                    .arg(formatBytes(r.checkpointBytes), formatBytes(r.ramBytes));
#ifdef NEURAL_GUI_HAVE_CUDA
    r.fitText += QObject::tr(
        "\nVRAM: set the expert pool in the profile (the GPU backend "
        "places what fits).");
#else
    r.fitText += QObject::tr("\nVRAM: not used (this build has no CUDA backend).");
#endif
    r.ok = true;
    return r;
}

StoreJob::StoreJob(QObject* parent) : QObject(parent) {
    qRegisterMetaType<neural::gui::StoreProgress>();
}

StoreJob::~StoreJob() {
    cancel();
    wait();
}

void StoreJob::wait() {
    if (m_thread) {
        m_thread->wait();
        // finished() was queued to this object; deliver nothing more, just clean up.
        delete m_thread;
        m_thread = nullptr;
    }
}

void StoreJob::run(std::function<QString()> work) {
    if (m_thread) return;
    m_cancel.store(false);
    m_thread = QThread::create([this, work = std::move(work)] {
        bool ok = false, cancelled = false;
        QString message;
        try {
            message = work();
            ok = true;
        } catch (const Cancelled&) {
            cancelled = true;
            message = tr("cancelled; nothing was written");
        } catch (const std::exception& e) {
            message = QString::fromUtf8(e.what());
        }
        QMetaObject::invokeMethod(
            this,
            [this, ok, cancelled, message] {
                if (m_thread) {
                    m_thread->wait();
                    m_thread->deleteLater();
                    m_thread = nullptr;
                }
                emit finished(ok, cancelled, message);
            },
            Qt::QueuedConnection);
    });
    m_thread->setObjectName(QStringLiteral("neural-store-job"));
    m_thread->start();
}

void StoreJob::startRepack(const QString& checkpoint, const QString& out, const QString& kind) {
    store::RepackOptions o;
    o.checkpoint = checkpoint.toStdString();
    o.out = out.toStdString();
    o.kind = store::parse_kind(kind.toStdString()).value_or(store::StoreKind::kRaw);
    o.cancel = &m_cancel;
    o.created_by = "neural-desktop";
    auto last = std::make_shared<QElapsedTimer>();
    const int cancelAfter = std::exchange(m_cancelAfter, 0);
    o.on_progress = [this, last, cancelAfter](const store::RepackProgress& p) {
        if (cancelAfter > 0 && p.records_done >= cancelAfter) m_cancel.store(true);
        // Repack calls back once per record; the bar needs ~10 updates a second.
        if (last->isValid() && last->elapsed() < 100 && p.records_done != p.records_total) return;
        last->start();
        StoreProgress sp;
        sp.fraction = p.bytes_total
                          ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total)
                          : 0;
        sp.bytesPerSecond = p.bytes_per_second;
        sp.etaSeconds = p.eta_seconds;
        sp.text = tr("%1 / %2, %3/s, %4 s left (%5 of %6 experts)")
                      .arg(formatBytes(p.bytes_done), formatBytes(p.bytes_total),
                           formatBytes(static_cast<std::uint64_t>(p.bytes_per_second)))
                      .arg(p.eta_seconds, 0, 'f', 0)
                      .arg(p.records_done)
                      .arg(p.records_total);
        QMetaObject::invokeMethod(
            this, [this, sp] { emit progress(sp); }, Qt::QueuedConnection);
    };
    run([o] {
        const store::RepackResult r = store::repack(o);
        return tr("%1 store written: %2, %3 experts in %4 s")
            .arg(QString::fromLatin1(store::kind_name(r.kind)), formatBytes(r.bytes))
            .arg(r.records)
            .arg(r.seconds, 0, 'f', 1);
    });
}

void StoreJob::startVerify(const QString& storePath, const QString& checkpoint) {
    store::VerifyOptions o;
    o.checkpoint = checkpoint.toStdString();
    o.cancel = &m_cancel;
    o.on_progress = [this](const store::VerifyProgress& p) {
        StoreProgress sp;
        sp.fraction = p.records_total ? static_cast<double>(p.records_done) /
                                            static_cast<double>(p.records_total)
                                      : 0;
        sp.text = tr("%1 of %2 experts checked").arg(p.records_done).arg(p.records_total);
        QMetaObject::invokeMethod(
            this, [this, sp] { emit progress(sp); }, Qt::QueuedConnection);
    };
    const std::string path = storePath.toStdString();
    run([o, path] {
        const store::VerifyReport r = store::verify_store(path, o);
        if (!r.ok()) {
            QStringList problems;
            for (const auto& p : r.problems) problems << QString::fromStdString(p);
            fail("{} problem(s): {}", r.problem_count,
                 problems.join(QStringLiteral("; ")).toStdString());
        }
        return tr("verified: %1 experts%2, no problems")
            .arg(r.records)
            .arg(r.checkpoint_checked ? tr(" match the checkpoint") : QString());
    });
}

}  // namespace neural::gui
