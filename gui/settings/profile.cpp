#include "settings/profile.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include <cmath>

namespace neural::gui {

namespace {

using T = KnobDef::Type;

// The CUDA knobs arrive in LoadOptions with the GPU backend; detect them at compile time so this
// file builds against either state of the engine and enables the knobs as soon as they exist.
template <typename O>
concept HasGpuKnobs = requires(O o) {
    o.backend;
    o.gpu.pool_gib;
    o.gpu.vram_budget_gib;
    o.gpu.refresh_every;
    o.gpu.refresh_m;
    o.gpu.prefill_weight;
    o.gpu.pool_slots;
    o.gpu.context;
    o.gpu.scratch_slots;
    o.gpu.kv_ring;
    o.gpu.kv_checkpoint_gib;
    o.gpu.grouped_gemm;
    o.gpu.prefill_fp16;
    o.gpu.pin_store;
    o.gpu.stream_misses;
    o.release_resident;
};

constexpr bool kHasGpuKnobs = HasGpuKnobs<LoadOptions>;
#ifdef NEURAL_GUI_HAVE_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

template <typename O>
void applyGpu(O &o, const Profile &p)
{
    if constexpr (HasGpuKnobs<O>) {
        o.backend = p.value(QStringLiteral("backend")).toString().toStdString();
        o.gpu.pool_gib = p.value(QStringLiteral("pool")).toDouble();
        o.gpu.vram_budget_gib = p.value(QStringLiteral("vram-budget")).toDouble();
        o.gpu.refresh_every = p.value(QStringLiteral("refresh-every")).toInt();
        o.gpu.refresh_m = p.value(QStringLiteral("refresh-m")).toInt();
        o.gpu.prefill_weight = p.value(QStringLiteral("prefill-weight")).toDouble();
        o.gpu.pool_slots = p.value(QStringLiteral("pool-slots")).toInt();
        o.gpu.context = p.value(QStringLiteral("context")).toLongLong();
        o.gpu.scratch_slots = p.value(QStringLiteral("scratch")).toInt();
        o.gpu.kv_ring = p.value(QStringLiteral("kv-ring")).toInt();
        o.gpu.kv_checkpoint_gib = p.value(QStringLiteral("kv-checkpoints")).toDouble();
        o.gpu.grouped_gemm = p.value(QStringLiteral("grouped-gemm")).toBool();
        o.gpu.prefill_fp16 = p.value(QStringLiteral("prefill-fp16")).toBool();
        o.gpu.pin_store = p.value(QStringLiteral("pin-store")).toString().toStdString();
        o.gpu.stream_misses = p.value(QStringLiteral("stream-misses")).toBool() ? 1 : 0;
        // Acts on the expert store's records: without a store it would be a load error.
        o.release_resident = !p.store.isEmpty() && p.value(QStringLiteral("release-resident")).toBool();
    } else {
        (void)o;
        (void)p;
    }
}

}  // namespace

const QList<KnobDef> &knobDefs()
{
    static const QList<KnobDef> defs = {
        {QStringLiteral("backend"), QObject::tr("Backend"),
         QObject::tr("cpu runs everything on the CPU; cuda puts the dense part and hot experts "
                     "on the GPU; auto picks cuda when a GPU is usable."),
         T::choice, QStringLiteral("cpu"), QStringLiteral("auto"), 0, 0,
         {QStringLiteral("cpu"), QStringLiteral("cuda"), QStringLiteral("auto")}, {}},
        {QStringLiteral("pool"), QObject::tr("Expert pool"),
         QObject::tr("VRAM for resident expert slots; more slots = more hits, less RAM "
                     "traffic. -1: what the budget leaves."),
         T::real, -1.0, 6.05, -1, 1024, {}, QStringLiteral("GiB")},
        {QStringLiteral("vram-budget"), QObject::tr("VRAM budget"),
         QObject::tr("Caps all GPU memory the engine uses (emulate a smaller card); 0: free "
                     "memory minus 512 MiB."),
         T::real, 0.0, 0.0, 0, 1024, {}, QStringLiteral("GiB")},
        {QStringLiteral("pool-slots"), QObject::tr("Expert slots"),
         QObject::tr("Exact number of expert slots in VRAM (the setup wizard's fit plan sets "
                     "it); -1: as many as Expert pool allows."),
         T::integer, -1, -1, -1, 1 << 20, {}, {}},
        {QStringLiteral("context"), QObject::tr("GPU context"),
         QObject::tr("K/V positions kept on the GPU; fewer leave VRAM for expert slots. 0: the "
                     "model's maximum, at most 8,192."),
         T::integer, 0, 0, 0, 1 << 20, {}, QStringLiteral("tokens")},
        {QStringLiteral("scratch"), QObject::tr("Scratch slots"),
         QObject::tr("GPU staging slots for prompt experts that are not resident."), T::integer,
         4, 6, 1, 64, {}, {}},
        {QStringLiteral("kv-ring"), QObject::tr("KV ring"),
         QObject::tr("Positions of K/V kept for sliding-window layers (the rest of the context "
                     "is not needed there). -1: the smallest that works (window + prompt block "
                     "- 1, 2175 for gpt-oss); 0: keep the whole context."),
         T::integer, 0, -1, -1, 1 << 20, {}, QStringLiteral("tokens")},
        {QStringLiteral("kv-checkpoints"), QObject::tr("KV checkpoints"),
         QObject::tr("RAM keeping the GPU K/V of the conversations you switch away from, so "
                     "going back to one does not process it again. 0: off."),
         T::real, 0.0, 1.0, 0, 4096, {}, QStringLiteral("GiB")},
        {QStringLiteral("kernel"), QObject::tr("Expert kernel"),
         QObject::tr("auto picks the fastest fused MXFP4 expert and bf16 dense kernels this "
                     "CPU runs (from the expert store, else the checkpoint); reference is the "
                     "plain fp32 forward pass, bit-exact and slow."),
         T::choice, QStringLiteral("auto"), QStringLiteral("auto"), 0, 0,
         {QStringLiteral("reference"), QStringLiteral("auto"), QStringLiteral("scalar"),
          QStringLiteral("avx2"), QStringLiteral("avx512")},
         {}},
        {QStringLiteral("kernel-persistent"), QObject::tr("Persistent CPU team"),
         QObject::tr("Run the fused kernels on the persistent worker-team DLL (spinning "
                     "threads, lower latency per token)."),
         T::boolean, false, true, 0, 0, {}, {}},
        {QStringLiteral("grouped-gemm"), QObject::tr("Grouped GEMM guard"),
         QObject::tr("Group prompt experts in threes on the GPU (same results), only for "
                     "single-block prompts of 1,024-4,096 tokens."),
         T::boolean, false, true, 0, 0, {}, {}},
        {QStringLiteral("prefill-fp16"), QObject::tr("fp16 prompt experts"),
         QObject::tr("Prompt experts on the GPU multiply fp16 operands (11 bits of each "
                     "activation: faster, less exact) instead of two bf16 halves (~16 bits)."),
         T::boolean, false, false, 0, 0, {}, {}},
        {QStringLiteral("pin-store"), QObject::tr("Pin store"),
         QObject::tr("Raw store on the GPU backend: keep the whole store locked in RAM so prompts "
                     "copy experts to the GPU straight from it (no staging threads). auto: when "
                     "the store is at most half of the RAM; 1: always try; 0: never."),
         T::choice, QStringLiteral("auto"), QStringLiteral("auto"), 0, 0,
         {QStringLiteral("auto"), QStringLiteral("1"), QStringLiteral("0")}, {}},
        {QStringLiteral("stream-misses"), QObject::tr("Stream misses over PCIe"),
         QObject::tr("Decode with a pinned store: copy half of each layer's missed experts to the "
                     "GPU and compute them there while the CPU computes the rest. Pays with a "
                     "PCIe 5.0 x16 link; with a slower one the CPU alone is faster."),
         T::boolean, false, false, 0, 0, {}, {}},
        {QStringLiteral("refresh-every"), QObject::tr("Refresh every"),
         QObject::tr("Decode tokens between residency refreshes; 0 freezes the resident set."),
         T::integer, 8, 8, 0, 4096, {}, QStringLiteral("tokens")},
        {QStringLiteral("refresh-m"), QObject::tr("Admissions per refresh"),
         QObject::tr("Missed experts that may replace adaptive slots at each refresh."),
         T::integer, 4, 4, 0, 256, {}, {}},
        {QStringLiteral("prefill-weight"), QObject::tr("Prefill weight"),
         QObject::tr("How much a prompt token's routing counts in admission scores (decode "
                     "tokens count 1)."),
         T::real, 0.25, 0.25, 0, 10, {}, {}},
        {QStringLiteral("release-resident"), QObject::tr("Release resident RAM"),
         QObject::tr("Drop the RAM copy of experts that live in VRAM (less RAM, slower "
                     "eviction)."),
         T::boolean, false, false, 0, 0, {}, {}},
        {QStringLiteral("warmup-ram"), QObject::tr("RAM warm-up"),
         QObject::tr("After loading, read the expert store into RAM (hottest first) in the "
                     "background for at most this long: a faster first answer on a PC whose RAM "
                     "only just holds the model. Needs an expert store."),
         T::real, 0.0, 0.0, 0, 3600, {}, QStringLiteral("s")},
        {QStringLiteral("lock-ram"), QObject::tr("Lock experts in RAM"),
         QObject::tr("Keep this much of the hottest CPU-side experts locked in RAM so they are "
                     "never paged out (within the OS's lock limit). Needs an expert store."),
         T::real, 0.0, 0.0, 0, 1024, {}, QStringLiteral("GiB")},
        {QStringLiteral("ws-min"), QObject::tr("Working set minimum"),
         QObject::tr("Windows: ask the OS to keep this much of the process in RAM."), T::real,
         0.0, 0.0, 0, 1024, {}, QStringLiteral("GiB")},
        {QStringLiteral("threads"), QObject::tr("CPU threads"),
         QObject::tr("Worker threads for the CPU work; 0: all cores (kernels: min(cores, 8))."),
         T::integer, 0, 0, 0, 4096, {}, {}},
    };
    return defs;
}

const KnobDef *findKnob(const QString &key)
{
    for (const KnobDef &k : knobDefs())
        if (k.key == key)
            return &k;
    return nullptr;
}

QString unsupportedReason(const QString &key)
{
    static const QStringList gpu = {QStringLiteral("backend"), QStringLiteral("pool"),
                                    QStringLiteral("vram-budget"), QStringLiteral("refresh-every"),
                                    QStringLiteral("refresh-m"), QStringLiteral("prefill-weight"),
                                    QStringLiteral("pool-slots"), QStringLiteral("context"),
                                    QStringLiteral("scratch"), QStringLiteral("kv-ring"),
                                    QStringLiteral("kv-checkpoints"), QStringLiteral("grouped-gemm"),
                                    QStringLiteral("prefill-fp16"), QStringLiteral("pin-store"),
                                    QStringLiteral("stream-misses"), QStringLiteral("release-resident")};
    if (gpu.contains(key)) {
        if (!kHasGpuKnobs)
            return QObject::tr("not in this build yet");
        if (!kCudaBuild)
            return QObject::tr("needs the CUDA build");
        return {};
    }
    if (key == QLatin1String("ws-min")) {
#ifdef _WIN32
        return QObject::tr("not in this build yet");
#else
        return QObject::tr("Windows only");
#endif
    }
    return {};
}

QVariant Profile::value(const QString &key) const
{
    if (values.contains(key))
        return values.value(key);
    const KnobDef *k = findKnob(key);
    return k ? k->stock : QVariant();
}

LoadOptions Profile::toLoadOptions(int *threads) const
{
    LoadOptions o;
    o.store = store.toStdString();
    o.kernel = value(QStringLiteral("kernel")).toString().toStdString();
    o.kernel_persistent = value(QStringLiteral("kernel-persistent")).toBool();
    o.threads = value(QStringLiteral("threads")).toInt();
    if (!o.store.empty()) {  // the RAM levers act on the store's records
        o.warmup_ram_seconds = value(QStringLiteral("warmup-ram")).toDouble();
        o.lock_ram_bytes = static_cast<std::uint64_t>(value(QStringLiteral("lock-ram")).toDouble() * 1073741824.0);
    }
    if (threads)
        *threads = o.threads;
    if (unsupportedReason(QStringLiteral("backend")).isEmpty())
        applyGpu(o, *this);
    return o;
}

QJsonObject Profile::toJson() const
{
    QJsonObject knobs;
    for (const KnobDef &k : knobDefs())
        knobs.insert(k.key, QJsonValue::fromVariant(value(k.key)));
    return {{QStringLiteral("name"), name},
            {QStringLiteral("model"), modelDir},
            {QStringLiteral("store"), store},
            {QStringLiteral("knobs"), knobs}};
}

Profile Profile::fromJson(const QJsonObject &o)
{
    Profile p;
    p.name = o.value(QStringLiteral("name")).toString();
    p.modelDir = o.value(QStringLiteral("model")).toString();
    p.store = o.value(QStringLiteral("store")).toString();
    const QJsonObject knobs = o.value(QStringLiteral("knobs")).toObject();
    for (const KnobDef &k : knobDefs()) {
        const QJsonValue v = knobs.value(k.key);
        if (v.isUndefined() || v.isNull())
            continue;
        switch (k.type) {
        case T::boolean: p.values.insert(k.key, v.toBool()); break;
        case T::integer:
            p.values.insert(k.key, static_cast<int>(std::clamp(std::round(v.toDouble()), k.min, k.max)));
            break;
        case T::real: {
            const double d = v.toDouble();
            p.values.insert(k.key, std::isfinite(d) ? std::clamp(d, k.min, k.max) : k.stock.toDouble());
            break;
        }
        case T::choice:
            p.values.insert(k.key, k.choices.contains(v.toString()) ? v.toString() : k.stock);
            break;
        }
    }
    return p;
}

Profile Profile::stock()
{
    Profile p;
    p.name = QStringLiteral("Stock");
    for (const KnobDef &k : knobDefs())
        p.values.insert(k.key, k.stock);
    return p;
}

Profile Profile::optimized()
{
    Profile p;
    p.name = QStringLiteral("Optimized");
    for (const KnobDef &k : knobDefs())
        p.values.insert(k.key, k.optimized);
    return p;
}

bool ProfileStore::load(const QString &path, QString *error)
{
    m_profiles = {Profile::stock(), Profile::optimized()};
    m_active = QStringLiteral("Stock");
    QFile f(path);
    if (!f.exists())
        return true;
    auto bad = [&](const QString &why) {
        if (error)
            *error = QObject::tr("%1: %2 (using the built-in profiles)").arg(path, why);
        return false;
    };
    if (!f.open(QIODevice::ReadOnly))
        return bad(f.errorString());
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &pe);
    if (pe.error != QJsonParseError::NoError)
        return bad(QObject::tr("not valid JSON at offset %1: %2").arg(pe.offset).arg(pe.errorString()));
    if (!doc.isObject() || !doc.object().value(QStringLiteral("profiles")).isArray())
        return bad(QObject::tr("expected {\"active\": ..., \"profiles\": [...]}"));
    for (const QJsonValue &v : doc.object().value(QStringLiteral("profiles")).toArray()) {
        const Profile p = Profile::fromJson(v.toObject());
        if (!p.name.trimmed().isEmpty())
            upsert(p);
    }
    const QString active = doc.object().value(QStringLiteral("active")).toString();
    if (find(active))
        m_active = active;
    return true;
}

bool ProfileStore::save(const QString &path, QString *error) const
{
    QJsonArray list;
    for (const Profile &p : m_profiles)
        list.push_back(p.toJson());
    const QJsonObject root{{QStringLiteral("version"), 1},
                           {QStringLiteral("active"), m_active},
                           {QStringLiteral("profiles"), list}};
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) ||
        f.write(QJsonDocument(root).toJson(QJsonDocument::Indented)) < 0 || !f.commit()) {
        if (error)
            *error = QObject::tr("cannot save %1: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

Profile *ProfileStore::find(const QString &name)
{
    for (Profile &p : m_profiles)
        if (p.name == name)
            return &p;
    return nullptr;
}

Profile &ProfileStore::active()
{
    if (Profile *p = find(m_active))
        return *p;
    return m_profiles.front();
}

void ProfileStore::upsert(const Profile &p)
{
    if (Profile *old = find(p.name))
        *old = p;
    else
        m_profiles.push_back(p);
}

}  // namespace neural::gui
