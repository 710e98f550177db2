// Profiles: a model (checkpoint folder + optional expert store) and the engine knobs. The knobs
// are the settings schema's rows (runtime/options.h: label, help, limits, default; the tooltip
// names the flag), so a profile takes what `neural` and neural-server take, within the same
// limits. Two built-ins, Stock (the engine's defaults: the plain reference path) and Optimized
// (fused kernel on the persistent team DLL, grouped GEMM guard, --scratch 6, 1 GiB of K/V
// checkpoints, and the VRAM plan of runtime/fit for this PC: budget, expert slots, context,
// threads; without a plan the pool is what the budget leaves), both editable, plus any the user
// adds. Saved per user as JSON, written
// atomically (QSaveFile: a crash leaves the old file or the new one, never half).
//
// A knob that is not applied (a CUDA-only setting without the CUDA build, or with backend cpu)
// is kept in the profile but reported by unsupportedReason() and shown disabled.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QVariant>
#include <QVariantMap>

#include "runtime/fit.h"
#include "runtime/model.h"
#include "runtime/options.h"

namespace neural::gui {

struct KnobDef {
    enum class Type { boolean, integer, real, choice, text };
    QString key;   // JSON key: the flag without "--" ("pool", "kv-ring", ...)
    QString flag;  // "--pool"
    QString label;
    QString help;  // one line: what it does
    Type type = Type::integer;
    QVariant stock;      // value in the Stock profile: the engine's default
    QVariant optimized;  // value in the Optimized profile
    double min = 0;      // integer / real; with an auto value, min is that value
    double max = 0;
    bool hasAuto = false;  // min stands for "auto"
    QStringList choices;   // Type::choice
    QString unit;          // "GiB", "s"
    bool cudaOnly = false;
};

// Every knob, in display order.
const QList<KnobDef>& knobDefs();
const KnobDef* findKnob(const QString& key);
// Why the knob is not applied ("" when it is): this build cannot (a CUDA-only setting without
// the CUDA build), or the profile's `backend` refuses it (a CUDA-only setting with backend cpu:
// the schema's message, options::backend_refusal, as `neural` and neural-server say it).
QString unsupportedReason(const QString& key, const QString& backend = {});

struct Profile {
    QString name;
    QString modelDir;    // checkpoint folder; empty: the demo model
    QString store;       // expert store file; empty: experts from the checkpoint
    QVariantMap values;  // knob key -> value (missing keys: the Stock value)

    QVariant value(const QString& key) const;
    // The knobs this build applies, as schema settings (key -> text): those that differ from
    // the engine's default, the store, and the kernel only with a store (the fused kernels read
    // its records; without one the plain path runs).
    options::Settings settings() const;
    // LoadOptions from settings() through options::apply. Throws neural::Error naming the flag
    // for a setting that does not act on the profile's backend, or a RAM lever without a store.
    LoadOptions toLoadOptions() const;
    QJsonObject toJson() const;
    // Unknown keys are dropped, values out of range clamped, so a hand-edited file cannot make
    // the engine fail in odd ways. A boolean for a 0|1 choice reads as "1" / "0".
    static Profile fromJson(const QJsonObject& o);
    static Profile stock();
    // With a plan (plan_fit for the model on this PC, as `neural fit` prints it): its backend,
    // VRAM budget, expert slots, context, threads and K/V checkpoints over the Optimized values.
    static Profile optimized(const FitPlan* plan = nullptr);
};

class ProfileStore {
public:
    // Reads `path`; a missing file gives the two built-ins. False with `error` for an unreadable
    // or malformed file (the built-ins are used then and the file is left alone).
    bool load(const QString& path, QString* error = nullptr);
    bool save(const QString& path, QString* error = nullptr) const;

    QList<Profile>& profiles() { return m_profiles; }
    const QList<Profile>& profiles() const { return m_profiles; }
    Profile* find(const QString& name);
    Profile& active();
    QString activeName() const { return m_active; }
    void setActive(const QString& name) { m_active = name; }
    // Adds or replaces (by name).
    void upsert(const Profile& p);
    // The built-in Optimized follows `plan` (this PC's fit for the model): replaced by
    // Profile::optimized(&plan) unless the user edited it (it differs from the built-in it was).
    // Returns whether it was replaced.
    bool followFit(const FitPlan& plan);
    // Whether Optimized is still the built-in (saved with the file, so it follows after a reload).
    bool optimizedFollowsFit() const;

private:
    QList<Profile> m_profiles{Profile::stock(), Profile::optimized()};
    QString m_active = QStringLiteral("Stock");
    Profile m_builtinOptimized = Profile::optimized();  // what Optimized was made as
};

}  // namespace neural::gui

Q_DECLARE_METATYPE(neural::gui::Profile)
