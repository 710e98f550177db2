// Profiles: a model (checkpoint folder + optional expert store) and the engine knobs
// (docs/DESKTOP.md "Profiles"), each with a one-line explanation. Two built-ins, Stock (the plain
// reference path) and Optimized (fused kernel on the persistent team DLL, grouped GEMM guard,
// --pool 6.05 --kv-ring -1 (auto: the smallest ring this engine allows, window + prompt block - 1)
// --scratch 6), both editable, plus any the user adds. Saved per user as JSON, written atomically
// (QSaveFile: a crash leaves the old file or the new one, never half).
//
// A knob this build cannot apply (no field in LoadOptions yet, or it needs the CUDA build or
// another OS) is kept in the profile but reported by unsupportedReason() and shown disabled.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QVariant>
#include <QVariantMap>

#include "runtime/model.h"

namespace neural::gui {

struct KnobDef {
    enum class Type { boolean, integer, real, choice };
    QString key;          // JSON key and the CLI flag without "--" ("pool", "kv-ring", ...)
    QString label;
    QString help;         // one line: what it does and when to change it
    Type type = Type::integer;
    QVariant stock;       // value in the Stock profile
    QVariant optimized;   // value in the Optimized profile
    double min = 0;
    double max = 0;
    QStringList choices;  // Type::choice
    QString unit;         // "GiB", "tokens", ...
};

// Every knob, in display order.
const QList<KnobDef> &knobDefs();
const KnobDef *findKnob(const QString &key);
// Why this build cannot apply the knob ("" when it can).
QString unsupportedReason(const QString &key);

struct Profile {
    QString name;
    QString modelDir;   // checkpoint folder; empty: the demo model
    QString store;      // expert store file; empty: experts from the checkpoint
    QVariantMap values;  // knob key -> value (missing keys: the Stock value)

    QVariant value(const QString &key) const;
    // LoadOptions from the supported knobs; `threads` receives the CPU thread count (0: all).
    LoadOptions toLoadOptions(int *threads = nullptr) const;
    QJsonObject toJson() const;
    // Unknown keys are dropped, values out of range clamped, so a hand-edited file cannot make
    // the engine fail in odd ways.
    static Profile fromJson(const QJsonObject &o);
    static Profile stock();
    static Profile optimized();
};

class ProfileStore {
public:
    // Reads `path`; a missing file gives the two built-ins. False with `error` for an unreadable
    // or malformed file (the built-ins are used then and the file is left alone).
    bool load(const QString &path, QString *error = nullptr);
    bool save(const QString &path, QString *error = nullptr) const;

    QList<Profile> &profiles() { return m_profiles; }
    const QList<Profile> &profiles() const { return m_profiles; }
    Profile *find(const QString &name);
    Profile &active();
    QString activeName() const { return m_active; }
    void setActive(const QString &name) { m_active = name; }
    // Adds or replaces (by name).
    void upsert(const Profile &p);

private:
    QList<Profile> m_profiles{Profile::stock(), Profile::optimized()};
    QString m_active = QStringLiteral("Stock");
};

}  // namespace neural::gui

Q_DECLARE_METATYPE(neural::gui::Profile)
