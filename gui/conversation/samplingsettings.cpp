#include "conversation/samplingsettings.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>

#include "common/paths.h"
#include "common/settingskeys.h"

namespace neural::gui {

namespace {

double number(const QJsonObject& o, const char* key, double fallback, double lo, double hi) {
    const QJsonValue v = o.value(QLatin1String(key));
    if (!v.isDouble() || !std::isfinite(v.toDouble())) return fallback;
    return std::clamp(v.toDouble(), lo, hi);
}

int integer(const QJsonObject& o, const char* key, int fallback, int lo, int hi) {
    const QJsonValue v = o.value(QLatin1String(key));
    if (!v.isDouble() || !std::isfinite(v.toDouble())) return fallback;
    return static_cast<int>(
        std::clamp(std::round(v.toDouble()), static_cast<double>(lo), static_cast<double>(hi)));
}

QList<SamplingPreset> userPresets() {
    const QByteArray raw = appSettings()->value(settingsKey::samplingPresets).toString().toUtf8();
    QList<SamplingPreset> out;
    const QJsonDocument doc = QJsonDocument::fromJson(raw);
    for (const QJsonValue& v : doc.array()) {
        const QJsonObject o = v.toObject();
        const QString name = o.value(QStringLiteral("name")).toString().trimmed();
        if (name.isEmpty()) continue;
        out.push_back({name, SamplingSettings::fromJson(o), false});
    }
    return out;
}

void writeUserPresets(const QList<SamplingPreset>& presets) {
    QJsonArray a;
    for (const SamplingPreset& p : presets) {
        QJsonObject o = p.settings.toJson();
        o.insert(QStringLiteral("name"), p.name);
        a.append(o);
    }
    appSettings()->setValue(settingsKey::samplingPresets,
                            QString::fromUtf8(QJsonDocument(a).toJson(QJsonDocument::Compact)));
}

}  // namespace

QJsonObject SamplingSettings::toJson() const {
    QJsonObject o{{QStringLiteral("temperature"), temperature},
                  {QStringLiteral("top_p"), topP},
                  {QStringLiteral("top_k"), topK},
                  {QStringLiteral("min_p"), minP},
                  {QStringLiteral("max_tokens"), maxTokens}};
    if (fixedSeed) o.insert(QStringLiteral("seed"), seed);
    return o;
}

SamplingSettings SamplingSettings::fromJson(const QJsonObject& o) {
    SamplingSettings s;
    s.temperature = number(o, "temperature", s.temperature, 0.0, kMaxTemperature);
    // top_p 0 is no distribution at all (the API refuses it): the smallest step instead.
    s.topP = number(o, "top_p", s.topP, 0.01, 1.0);
    s.topK = integer(o, "top_k", s.topK, 0, kMaxTopK);
    s.minP = number(o, "min_p", s.minP, 0.0, 1.0);
    s.maxTokens = integer(o, "max_tokens", s.maxTokens, 0, kMaxTokens);
    s.fixedSeed = o.value(QStringLiteral("seed")).isDouble();
    s.seed = integer(o, "seed", s.seed, 1, kMaxSeed);
    return s;
}

bool SamplingSettings::operator==(const SamplingSettings& b) const {
    auto same = [](double x, double y) { return std::abs(x - y) < 1e-9; };
    return same(temperature, b.temperature) && same(topP, b.topP) && topK == b.topK &&
           same(minP, b.minP) && fixedSeed == b.fixedSeed && (!fixedSeed || seed == b.seed) &&
           maxTokens == b.maxTokens;
}

const QList<SamplingPreset>& builtInSamplingPresets() {
    static const QList<SamplingPreset> presets = [] {
        QList<SamplingPreset> p;
        SamplingSettings balanced;  // gpt-oss's recommended sampling: temperature 1, top-p 1
        p.push_back({QObject::tr("Balanced"), balanced, true});
        SamplingSettings precise;
        precise.temperature = 0.3;
        precise.topP = 0.9;
        p.push_back({QObject::tr("Precise"), precise, true});
        SamplingSettings creative;
        creative.temperature = 1.2;
        creative.minP = 0.05;  // keeps the tail of unlikely tokens out at the higher temperature
        p.push_back({QObject::tr("Creative"), creative, true});
        return p;
    }();
    return presets;
}

QList<SamplingPreset> samplingPresets() { return builtInSamplingPresets() + userPresets(); }

bool saveSamplingPreset(const QString& name, const SamplingSettings& settings) {
    const QString n = name.trimmed();
    if (n.isEmpty()) return false;
    for (const SamplingPreset& p : builtInSamplingPresets())
        if (p.name.compare(n, Qt::CaseInsensitive) == 0) return false;
    QList<SamplingPreset> presets = userPresets();
    auto it = std::find_if(presets.begin(), presets.end(),
                           [&](const SamplingPreset& p) { return p.name == n; });
    if (it != presets.end())
        it->settings = settings;
    else
        presets.push_back({n, settings, false});
    writeUserPresets(presets);
    return true;
}

bool removeSamplingPreset(const QString& name) {
    QList<SamplingPreset> presets = userPresets();
    const auto removed = presets.removeIf([&](const SamplingPreset& p) { return p.name == name; });
    if (removed == 0) return false;
    writeUserPresets(presets);
    return true;
}

QString presetMatching(const SamplingSettings& s) {
    for (const SamplingPreset& p : samplingPresets())
        if (p.settings == s) return p.name;
    return {};
}

}  // namespace neural::gui
