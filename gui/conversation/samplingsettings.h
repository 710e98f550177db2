// The sampling settings of one conversation (the settings panel beside the chat): temperature,
// top-p, top-k, min-p, a random or fixed seed and the reply's token limit. Stored with the
// conversation (ConversationStore, a JSON object; missing or bad fields read as the defaults)
// and put into each turn's request, where they reach the sampler exactly as an API request's
// fields do (openai::ChatRequest::sampling, host/generationqueue.h).
//
// Presets fill these fields: three built-ins (Balanced: the model's defaults; Precise; Creative)
// and the user's own, saved in appSettings() under settingsKey::samplingPresets.
#pragma once

#include <QJsonObject>
#include <QList>
#include <QString>

namespace neural::gui {

struct SamplingSettings {
    // The limits are the API's (engine/api/openai.cpp refuses values outside them); the
    // panel's widgets enforce the same.
    static constexpr double kMaxTemperature = 2.0;
    static constexpr int kMaxTopK = 1000;
    static constexpr int kMaxSeed = 2147483647;
    static constexpr int kMaxTokens = 131072;

    double temperature = 1.0;  // 0: greedy
    double topP = 1.0;         // (0, 1]; 1: off
    int topK = 0;              // 0: off
    double minP = 0.0;         // [0, 1]; 0: off
    bool fixedSeed = false;    // false: a fresh seed per reply
    int seed = 1;              // with fixedSeed: 1 ... kMaxSeed
    int maxTokens = 0;         // 0: the app's reply length limit (Settings)

    // {"temperature", "top_p", "top_k", "min_p", "seed" (only when fixed), "max_tokens"}: the
    // API's field names.
    QJsonObject toJson() const;
    // Missing fields and fields of the wrong type are the defaults; numbers out of range are
    // clamped into it (a hand-edited file never reaches the sampler with a bad value).
    static SamplingSettings fromJson(const QJsonObject& o);
    bool operator==(const SamplingSettings& other) const;
    bool operator!=(const SamplingSettings& other) const { return !(*this == other); }
};

struct SamplingPreset {
    QString name;
    SamplingSettings settings;
    bool builtIn = false;
};

// Balanced, Precise, Creative.
const QList<SamplingPreset>& builtInSamplingPresets();
// The built-ins, then the user's presets in the order saved.
QList<SamplingPreset> samplingPresets();
// Saves (or replaces) a user preset in appSettings(); false for an empty name or the name of a
// built-in.
bool saveSamplingPreset(const QString& name, const SamplingSettings& settings);
bool removeSamplingPreset(const QString& name);  // user presets only
// The first preset whose settings equal `s` ("" when none: the fields were edited).
QString presetMatching(const SamplingSettings& s);

}  // namespace neural::gui
