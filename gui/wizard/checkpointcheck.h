// The setup wizard's work, without widgets (so tests drive it directly):
//  - checkCheckpoint(): validates a checkpoint folder or a gpt-oss GGUF file with Model::load
//    (config, every tensor, tokenizer) and reports its shape, sizes, store size estimates and
//    whether it fits in RAM;
//  - StoreJob: repack (or verify) on a worker QThread with throttled progress, rate, ETA and a
//    cancel flag; store::repack writes to a temporary file and renames it only when complete,
//    so a cancelled or failed repack leaves no store behind.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>

#include <atomic>
#include <cstdint>

namespace neural::gui {

struct CheckpointReport {
    bool ok = false;
    QString error;                       // why the folder is not usable (Model::load's message)
    QString shape;                       // "24 layers, 32 experts (top-4), hidden 2880, ..."
    std::uint64_t checkpointBytes = 0;   // safetensors or GGUF files
    std::uint64_t rawStoreBytes = 0;     // estimated store sizes
    std::uint64_t packedStoreBytes = 0;  // (lower bound: escaped rows add a little)
    std::uint64_t ramBytes = 0;          // physical RAM of this PC (0: unknown)
    bool fitsRam = false;
    QString fitText;  // RAM / VRAM verdict, one line each
};

// `dir`: a checkpoint folder, or a .gguf file (any part of a split one).
CheckpointReport checkCheckpoint(const QString& dir);
std::uint64_t physicalRamBytes();
QString formatBytes(std::uint64_t bytes);  // "12.8 GiB"

struct StoreProgress {
    double fraction = 0;  // 0..1
    double bytesPerSecond = 0;
    double etaSeconds = 0;
    QString text;  // "3.1 / 12.8 GiB, 410 MiB/s, 24 s left"
};

class StoreJob : public QObject {
    Q_OBJECT
public:
    explicit StoreJob(QObject* parent = nullptr);
    ~StoreJob() override;  // cancels and waits

    // kind: "raw" / "packed". Async: progress... then finished.
    void startRepack(const QString& checkpoint, const QString& out, const QString& kind);
    // Checks every record (and, with `checkpoint`, that the experts equal the checkpoint's).
    void startVerify(const QString& store, const QString& checkpoint);
    void cancel() { m_cancel.store(true); }
    // Test hook: the next repack cancels itself once `records` experts are written (a tiny
    // model repacks faster than a test can press Cancel). 0: off.
    void setCancelAfterRecords(int records) { m_cancelAfter = records; }
    bool running() const { return m_thread != nullptr; }
    void wait();  // blocks until the job ended (tests, shutdown)

signals:
    void progress(const neural::gui::StoreProgress& p);
    // ok: done; cancelled: stopped by cancel(); message: summary or error.
    void finished(bool ok, bool cancelled, const QString& message);

private:
    void run(std::function<QString()> work);

    QThread* m_thread = nullptr;
    std::atomic<bool> m_cancel{false};
    int m_cancelAfter = 0;
};

}  // namespace neural::gui

Q_DECLARE_METATYPE(neural::gui::StoreProgress)
