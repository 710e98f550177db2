#include "settings/profile.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include <cmath>

#include "common/outputpath.h"

namespace neural::gui {

namespace {

using T = KnobDef::Type;

#ifdef NEURAL_GUI_HAVE_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

// The Optimized profile's values where they differ from the engine's defaults.
QVariantMap optimizedValues() {
    return {{QStringLiteral("backend"), QStringLiteral("auto")},
            {QStringLiteral("scratch"), 6},
            {QStringLiteral("kv-checkpoints"), 1.0},
            {QStringLiteral("kernel"), QStringLiteral("auto")},
            {QStringLiteral("kernel-persistent"), QStringLiteral("1")},
            {QStringLiteral("grouped-gemm"), true}};
}

// A schema value as the knob holds it (int, double, bool, string).
QVariant knobValue(const options::Setting& s, const options::Value& v) {
    switch (s.type) {
        case options::Type::integer:
            return static_cast<int>(std::get<std::int64_t>(v));
        case options::Type::real:
            return std::get<double>(v);
        case options::Type::boolean:
            return std::get<bool>(v);
        case options::Type::choice:
        case options::Type::path:
            return QString::fromStdString(std::get<std::string>(v));
    }
    return {};
}

// A knob's value as the schema's text (what the command line would say).
std::string knobText(const options::Setting& s, const QVariant& v) {
    switch (v.typeId()) {
        case QMetaType::Bool:
            return v.toBool() ? "1" : "0";
        case QMetaType::Double:
        case QMetaType::Float: {
            const double d = v.toDouble();
            if (s.type == options::Type::integer && d == std::round(d))
                return std::to_string(static_cast<long long>(d));
            return options::format_real(d);
        }
        default:
            return v.toString().toStdString();
    }
}

QList<KnobDef> makeKnobs() {
    const QVariantMap optimized = optimizedValues();
    QList<KnobDef> defs;
    for (const options::Setting& s : options::settings()) {
        if (s.key == "store") continue;  // Profile::store
        KnobDef k;
        k.flag = QString::fromStdString(s.flag);
        k.key = k.flag.mid(2);
        k.label = QString::fromStdString(s.label);
        k.help = QString::fromStdString(s.help);
        if (!s.default_text.empty())
            k.help += QStringLiteral(" (default %1)").arg(QString::fromStdString(s.default_text));
        k.type = s.type == options::Type::boolean   ? T::boolean
                 : s.type == options::Type::integer ? T::integer
                 : s.type == options::Type::real    ? T::real
                 : s.type == options::Type::choice  ? T::choice
                                                    : T::text;
        k.stock = knobValue(s, s.get(LoadOptions{}));
        k.optimized = optimized.value(k.key, k.stock);
        k.hasAuto = s.auto_value.has_value();
        k.min = k.hasAuto ? *s.auto_value : s.min;
        k.max = s.max;
        for (const std::string& c : s.choices) k.choices.push_back(QString::fromStdString(c));
        k.unit = s.unit == "GiB"       ? QStringLiteral("GiB")
                 : s.unit == "seconds" ? QStringLiteral("s")
                                       : QString();
        k.cudaOnly = s.applies == options::Applies::cuda;
        defs.push_back(k);
    }
    return defs;
}

}  // namespace

const QList<KnobDef>& knobDefs() {
    static const QList<KnobDef> defs = makeKnobs();
    return defs;
}

const KnobDef* findKnob(const QString& key) {
    for (const KnobDef& k : knobDefs())
        if (k.key == key) return &k;
    return nullptr;
}

QString unsupportedReason(const QString& key, const QString& backend) {
    const KnobDef* k = findKnob(key);
    if (k && k->cudaOnly && backend == QLatin1String("cpu"))
        return QString::fromStdString(
            options::backend_refusal(*options::find(key.toStdString()), "cpu"));
    if ((key == QLatin1String("backend") || (k && k->cudaOnly)) && !kCudaBuild)
        return QObject::tr("needs the CUDA build");
    return {};
}

QVariant Profile::value(const QString& key) const {
    if (values.contains(key)) return values.value(key);
    const KnobDef* k = findKnob(key);
    return k ? k->stock : QVariant();
}

options::Settings Profile::settings() const {
    options::Settings out;
    const QString backend = unsupportedReason(QStringLiteral("backend")).isEmpty()
                                ? value(QStringLiteral("backend")).toString()
                                : QStringLiteral("cpu");
    if (!store.isEmpty()) out["store"] = store.toStdString();
    for (const KnobDef& k : knobDefs()) {
        if (!unsupportedReason(k.key, backend).isEmpty())
            continue;  // kept in the profile, not applied
        const options::Setting& s = *options::find(k.key.toStdString());
        const std::string text = knobText(s, value(k.key));
        // Compared as the engine reads them, so 6 and 6.0 (or true and "1") are one value.
        if (options::format(s, options::parse(s, text)) != s.default_value()) out[s.key] = text;
    }
    return out;
}

LoadOptions Profile::toLoadOptions() const { return options::apply(settings()); }

QJsonObject Profile::toJson() const {
    QJsonObject knobs;
    for (const KnobDef& k : knobDefs()) knobs.insert(k.key, QJsonValue::fromVariant(value(k.key)));
    return {{QStringLiteral("name"), name},
            {QStringLiteral("model"), modelDir},
            {QStringLiteral("store"), store},
            {QStringLiteral("knobs"), knobs}};
}

Profile Profile::fromJson(const QJsonObject& o) {
    Profile p;
    p.name = o.value(QStringLiteral("name")).toString();
    p.modelDir = o.value(QStringLiteral("model")).toString();
    p.store = o.value(QStringLiteral("store")).toString();
    const QJsonObject knobs = o.value(QStringLiteral("knobs")).toObject();
    for (const KnobDef& k : knobDefs()) {
        const QJsonValue v = knobs.value(k.key);
        if (v.isUndefined() || v.isNull()) continue;
        switch (k.type) {
            case T::boolean:
                p.values.insert(k.key, v.toBool());
                break;
            case T::integer:
                p.values.insert(
                    k.key, static_cast<int>(std::clamp(std::round(v.toDouble()), k.min, k.max)));
                break;
            case T::real: {
                const double d = v.toDouble();
                p.values.insert(
                    k.key, std::isfinite(d) ? std::clamp(d, k.min, k.max) : k.stock.toDouble());
                break;
            }
            case T::choice: {
                const QString c = v.isBool()
                                      ? (v.toBool() ? QStringLiteral("1") : QStringLiteral("0"))
                                  : v.isDouble() ? QString::number(v.toDouble())
                                                 : v.toString();
                p.values.insert(k.key, k.choices.contains(c) ? c : k.stock);
                break;
            }
            case T::text:
                p.values.insert(k.key, v.toString());
                break;
        }
    }
    return p;
}

Profile Profile::stock() {
    Profile p;
    p.name = QStringLiteral("Stock");
    for (const KnobDef& k : knobDefs()) p.values.insert(k.key, k.stock);
    return p;
}

Profile Profile::optimized(const FitPlan* plan) {
    Profile p;
    p.name = QStringLiteral("Optimized");
    for (const KnobDef& k : knobDefs()) p.values.insert(k.key, k.optimized);
    if (plan != nullptr) {
        // The plan's knobs as `neural fit` prints them (FitPlan::load_options); the Optimized
        // profile's own choices (kernel auto, scratch, grouped GEMM) stay.
        const LoadOptions o = plan->load_options();
        p.values.insert(QStringLiteral("backend"), QString::fromStdString(plan->backend));
        p.values.insert(QStringLiteral("threads"), o.threads);
        if (plan->backend == "cuda") {
            p.values.insert(QStringLiteral("vram-budget"), o.gpu.vram_budget_gib);
            p.values.insert(QStringLiteral("pool-slots"), o.gpu.pool_slots);
            p.values.insert(QStringLiteral("context"), static_cast<int>(o.gpu.context));
            p.values.insert(QStringLiteral("kv-checkpoints"), o.gpu.kv_checkpoint_gib);
        }
    }
    return p;
}

bool ProfileStore::load(const QString& path, QString* error) {
    m_profiles = {Profile::stock(), Profile::optimized()};
    m_builtinOptimized = Profile::optimized();
    m_active = QStringLiteral("Stock");
    QFile f(path);
    if (!f.exists()) return true;
    auto bad = [&](const QString& why) {
        if (error) *error = QObject::tr("%1: %2 (using the built-in profiles)").arg(path, why);
        return false;
    };
    if (!f.open(QIODevice::ReadOnly)) return bad(f.errorString());
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &pe);
    if (pe.error != QJsonParseError::NoError)
        return bad(
            QObject::tr("not valid JSON at offset %1: %2").arg(pe.offset).arg(pe.errorString()));
    if (!doc.isObject() || !doc.object().value(QStringLiteral("profiles")).isArray())
        return bad(QObject::tr("expected {\"active\": ..., \"profiles\": [...]}"));
    for (const QJsonValue& v : doc.object().value(QStringLiteral("profiles")).toArray()) {
        const Profile p = Profile::fromJson(v.toObject());
        if (!p.name.trimmed().isEmpty()) upsert(p);
    }
    // A saved Optimized that was the built-in (unedited) keeps following the fit.
    if (doc.object().value(QStringLiteral("optimized_follows_fit")).toBool()) {
        if (const Profile* o = find(QStringLiteral("Optimized"))) m_builtinOptimized = *o;
    }
    const QString active = doc.object().value(QStringLiteral("active")).toString();
    if (find(active)) m_active = active;
    return true;
}

bool ProfileStore::save(const QString& path, QString* error) const {
    QJsonArray list;
    for (const Profile& p : m_profiles) list.push_back(p.toJson());
    const QJsonObject root{{QStringLiteral("version"), 1},
                           {QStringLiteral("active"), m_active},
                           {QStringLiteral("profiles"), list},
                           {QStringLiteral("optimized_follows_fit"), optimizedFollowsFit()}};
    QString refused;
    const QString target = neural::gui::checkedOutputPath(path, &refused);
    if (target.isEmpty()) {
        if (error) *error = refused;
        return false;
    }
    QSaveFile f(target);
    if (!f.open(QIODevice::WriteOnly) ||
        f.write(QJsonDocument(root).toJson(QJsonDocument::Indented)) < 0 || !f.commit()) {
        if (error) *error = QObject::tr("cannot save %1: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

Profile* ProfileStore::find(const QString& name) {
    for (Profile& p : m_profiles)
        if (p.name == name) return &p;
    return nullptr;
}

Profile& ProfileStore::active() {
    if (Profile* p = find(m_active)) return *p;
    return m_profiles.front();
}

bool ProfileStore::optimizedFollowsFit() const {
    for (const Profile& p : m_profiles)
        if (p.name == QLatin1String("Optimized")) return p.values == m_builtinOptimized.values;
    return true;
}

bool ProfileStore::followFit(const FitPlan& plan) {
    Profile* current = find(QStringLiteral("Optimized"));
    const Profile next = Profile::optimized(&plan);
    if (!optimizedFollowsFit()) return false;
    if (current != nullptr) {
        current->values = next.values;
    } else {
        m_profiles.push_back(next);
    }
    m_builtinOptimized = next;
    return true;
}

void ProfileStore::upsert(const Profile& p) {
    if (Profile* old = find(p.name))
        *old = p;
    else
        m_profiles.push_back(p);
}

}  // namespace neural::gui
