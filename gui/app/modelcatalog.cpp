#include "app/modelcatalog.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

#include "common/paths.h"
#include "settings/appsettingsdialog.h"

namespace neural::gui {

namespace {

bool isCheckpointFolder(const QString& dir) {
    return QFileInfo::exists(QDir(dir).filePath(QStringLiteral("config.json")));
}

bool isGguf(const QFileInfo& f) {
    return f.isFile() && f.suffix().compare(QLatin1String("gguf"), Qt::CaseInsensitive) == 0;
}

void addWithStores(QList<ModelEntry>& out, const QString& model) {
    const QString m = QFileInfo(model).absoluteFilePath();
    out.push_back({m, {}});
    for (const QString& store : storesOf(m)) out.push_back({m, store});
}

}  // namespace

QString ModelEntry::label() const {
    const QString name = QFileInfo(model).fileName();
    return store.isEmpty() ? name
                           : QStringLiteral("%1 + %2").arg(name, QFileInfo(store).fileName());
}

bool ModelEntry::operator==(const ModelEntry& o) const {
    return QFileInfo(model).absoluteFilePath() == QFileInfo(o.model).absoluteFilePath() &&
           (store.isEmpty()
                ? o.store.isEmpty()
                : QFileInfo(store).absoluteFilePath() == QFileInfo(o.store).absoluteFilePath());
}

QStringList modelFolders() {
    QStringList folders{modelsDir()};
    for (const QString& f : appSettings()->value(settingsKey::modelFolders).toStringList()) {
        const QString abs = QFileInfo(f).absoluteFilePath();
        if (!f.trimmed().isEmpty() && QFileInfo(abs).isDir() && !folders.contains(abs))
            folders << abs;
    }
    return folders;
}

QStringList storesOf(const QString& model) {
    const QFileInfo info(model);
    const QDir dir = info.isDir() ? QDir(info.absoluteFilePath()) : info.absoluteDir();
    QStringList out;
    for (const QFileInfo& f :
         dir.entryInfoList({QStringLiteral("*.nstore")}, QDir::Files | QDir::Readable, QDir::Name))
        out << f.absoluteFilePath();
    return out;
}

QList<ModelEntry> findModels(const QStringList& folders) {
    QList<ModelEntry> out;
    for (const QString& folder : folders) {
        if (!QFileInfo(folder).isDir()) continue;
        if (isCheckpointFolder(folder)) addWithStores(out, folder);
        const QDir dir(folder);
        for (const QFileInfo& f : dir.entryInfoList(
                 QDir::Dirs | QDir::Files | QDir::NoDotAndDotDot | QDir::Readable, QDir::Name)) {
            if ((f.isDir() && isCheckpointFolder(f.absoluteFilePath())) || isGguf(f))
                addWithStores(out, f.absoluteFilePath());
        }
    }
    // One row per model and store, also when folders overlap.
    QList<ModelEntry> unique;
    for (const ModelEntry& e : out)
        if (!unique.contains(e)) unique.push_back(e);
    std::stable_sort(unique.begin(), unique.end(), [](const ModelEntry& a, const ModelEntry& b) {
        return a.label().compare(b.label(), Qt::CaseInsensitive) < 0;
    });
    return unique;
}

QList<ModelEntry> recentModels() {
    QList<ModelEntry> out;
    const QJsonArray a =
        QJsonDocument::fromJson(appSettings()->value(settingsKey::recentModels).toString().toUtf8())
            .array();
    for (const QJsonValue& v : a) {
        const QJsonObject o = v.toObject();
        ModelEntry e{o.value(QStringLiteral("model")).toString(),
                     o.value(QStringLiteral("store")).toString()};
        if (e.model.isEmpty() || !QFileInfo::exists(e.model) ||
            (!e.store.isEmpty() && !QFileInfo::exists(e.store)) || out.contains(e))
            continue;
        out.push_back(e);
        if (out.size() == kMaxRecentModels) break;
    }
    return out;
}

void noteRecentModel(const ModelEntry& entry) {
    if (entry.model.isEmpty()) return;
    QList<ModelEntry> list = recentModels();
    list.removeAll(entry);
    list.prepend({QFileInfo(entry.model).absoluteFilePath(),
                  entry.store.isEmpty() ? QString() : QFileInfo(entry.store).absoluteFilePath()});
    while (list.size() > kMaxRecentModels) list.removeLast();
    QJsonArray a;
    for (const ModelEntry& e : list)
        a.append(
            QJsonObject{{QStringLiteral("model"), e.model}, {QStringLiteral("store"), e.store}});
    appSettings()->setValue(settingsKey::recentModels,
                            QString::fromUtf8(QJsonDocument(a).toJson(QJsonDocument::Compact)));
}

}  // namespace neural::gui
