#include "app/discovery.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QObject>
#include <QRegularExpression>

#include <cmath>

#include "wizard/checkpointcheck.h"

namespace neural::gui {

namespace {

bool namesGptOss(const QString& s) {
    return s.contains(QLatin1String("gpt-oss"), Qt::CaseInsensitive) ||
           s.contains(QLatin1String("gpt_oss"), Qt::CaseInsensitive) ||
           s.contains(QLatin1String("gptoss"), Qt::CaseInsensitive);
}

// A JSON object from a small file; empty when missing, too big or not an object.
QJsonObject readJson(const QString& path, bool* ok = nullptr) {
    if (ok) *ok = false;
    QFile f(path);
    if (f.size() > (1 << 20) || !f.open(QIODevice::ReadOnly)) return {};
    QJsonParseError err;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &err);
    if (err.error != QJsonParseError::NoError || !doc.isObject()) return {};
    if (ok) *ok = true;
    return doc.object();
}

std::uint64_t folderBytes(const QString& dir) {
    std::uint64_t sum = 0;
    QDirIterator it(dir, QDir::Files | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        it.next();
        sum += static_cast<std::uint64_t>(std::max<qint64>(0, it.fileInfo().size()));
    }
    return sum;
}

// A split GGUF is listed once, by its first part, with the size of all parts.
bool isLaterSplitPart(const QString& name) {
    static const QRegularExpression part(QStringLiteral(R"(-(\d{5})-of-\d{5}\.gguf$)"),
                                         QRegularExpression::CaseInsensitiveOption);
    const auto m = part.match(name);
    return m.hasMatch() && m.captured(1) != QLatin1String("00001");
}

std::uint64_t ggufBytes(const QFileInfo& f) {
    static const QRegularExpression part(QStringLiteral(R"(-\d{5}-of-(\d{5})\.gguf$)"),
                                         QRegularExpression::CaseInsensitiveOption);
    const auto m = part.match(f.fileName());
    if (!m.hasMatch()) return static_cast<std::uint64_t>(f.size());
    std::uint64_t sum = 0;
    const QString stem = f.fileName().left(m.capturedStart());
    for (const QFileInfo& p : f.absoluteDir().entryInfoList(
             {stem + QStringLiteral("-*-of-") + m.captured(1) + QStringLiteral(".gguf")},
             QDir::Files))
        sum += static_cast<std::uint64_t>(p.size());
    return sum;
}

void scanLmStudio(const QString& root, QList<FoundModel>& out) {
    // PUBLISHER/REPO/FILE.gguf (two levels); a GGUF right in the root or one level down too.
    QDirIterator it(root, {QStringLiteral("*.gguf"), QStringLiteral("*.GGUF")}, QDir::Files,
                    QDirIterator::Subdirectories);
    while (it.hasNext()) {
        it.next();
        const QFileInfo f = it.fileInfo();
        const QString rel = QDir(root).relativeFilePath(f.absoluteFilePath());
        if (rel.count(QLatin1Char('/')) > 2 || !namesGptOss(rel) || isLaterSplitPart(f.fileName()))
            continue;
        FoundModel m;
        m.source = QStringLiteral("LM Studio");
        m.name = f.completeBaseName();
        m.path = f.absoluteFilePath();
        m.format = QStringLiteral("GGUF");
        m.bytes = ggufBytes(f);
        out << m;
    }
}

void scanHfCache(const QString& root, QList<FoundModel>& out) {
    const QDir hub(root);
    for (const QFileInfo& repo :
         hub.entryInfoList({QStringLiteral("models--*")}, QDir::Dirs | QDir::NoDotAndDotDot)) {
        const QString name = repo.fileName().section(QStringLiteral("--"), -1);
        const QDir snapshots(repo.absoluteFilePath() + QStringLiteral("/snapshots"));
        for (const QFileInfo& snap :
             snapshots.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Time)) {
            const QString dir = snap.absoluteFilePath();
            const QString config = dir + QStringLiteral("/config.json");
            bool ok = false;
            const QJsonObject c = readJson(config, &ok);
            const bool gptOss =
                c.value(QStringLiteral("model_type")).toString() == QLatin1String("gpt_oss") ||
                namesGptOss(repo.fileName());
            if (!gptOss) continue;
            FoundModel m;
            m.source = QStringLiteral("Hugging Face cache");
            m.name = name;
            m.format = QStringLiteral("safetensors");
            m.bytes = folderBytes(dir);  // the snapshot's links resolve to the blobs
            if (!QFileInfo::exists(config))
                m.problem = QObject::tr("no config.json in the snapshot (an incomplete download)");
            else if (!ok)
                m.problem = QObject::tr("its config.json is not valid JSON");
            else if (QDir(dir).entryList({QStringLiteral("*.safetensors")}, QDir::Files).isEmpty())
                m.problem = QObject::tr("no weights (.safetensors) in the snapshot yet");
            else
                m.path = dir;
            out << m;
            break;  // the newest snapshot of a repository
        }
    }
}

void scanOllama(const QString& root, QList<FoundModel>& out) {
    const QString manifests = root + QStringLiteral("/manifests");
    QDirIterator it(manifests, QDir::Files, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        it.next();
        // manifests/REGISTRY/NAMESPACE/MODEL/TAG
        const QStringList parts =
            QDir(manifests).relativeFilePath(it.filePath()).split(QLatin1Char('/'));
        if (parts.size() < 2) continue;
        const QString model = parts[parts.size() - 2], tag = parts.last();
        if (!namesGptOss(model)) continue;
        FoundModel m;
        m.source = QStringLiteral("Ollama");
        m.name = model + QLatin1Char(':') + tag;
        m.format = QStringLiteral("GGUF");
        bool ok = false;
        const QJsonObject manifest = readJson(it.filePath(), &ok);
        QString digest;
        for (const QJsonValue& layer : manifest.value(QStringLiteral("layers")).toArray())
            if (layer.toObject().value(QStringLiteral("mediaType")).toString() ==
                QLatin1String("application/vnd.ollama.image.model"))
                digest = layer.toObject().value(QStringLiteral("digest")).toString();
        static const QRegularExpression hex(QStringLiteral("^sha256:[0-9a-f]{64}$"));
        if (!ok) {
            m.problem = QObject::tr("its manifest is not valid JSON");
        } else if (!hex.match(digest).hasMatch()) {
            m.problem = QObject::tr("its manifest names no model file");
        } else {
            const QFileInfo blob(root + QStringLiteral("/blobs/") +
                                 QString(digest).replace(QLatin1Char(':'), QLatin1Char('-')));
            if (!blob.isFile()) {
                m.problem = QObject::tr("the model file %1 is missing (an incomplete pull)")
                                .arg(blob.fileName());
            } else {
                m.path = blob.absoluteFilePath();
                m.bytes = static_cast<std::uint64_t>(blob.size());
            }
        }
        out << m;
    }
}

QString home() {
    const QString h = qEnvironmentVariable("USERPROFILE");
    return !h.isEmpty() && !qEnvironmentVariableIsSet("HOME") ? h : QDir::homePath();
}

}  // namespace

double FoundModel::repackSeconds() const {
    return static_cast<double>(storeBytes()) / kRepackBytesPerSecond;
}

QString FoundModel::description() const {
    if (!usable()) return QObject::tr("%1 (%2): cannot be used: %3").arg(name, source, problem);
    const double s = repackSeconds();
    const QString time = s < 90 ? QObject::tr("about %1 s").arg(std::max(1.0, std::round(s)))
                                : QObject::tr("about %1 min").arg(std::round(s / 60));
    return QObject::tr("%1 (%2, %3, %4; used where it is; a store needs %5 and %6)")
        .arg(name, source, format, formatBytes(bytes), formatBytes(storeBytes()), time);
}

DiscoveryRoots DiscoveryRoots::defaults() {
    DiscoveryRoots r;
    const QString h = home();
    r.lmStudio << h + QStringLiteral("/.lmstudio/models")
               << h + QStringLiteral("/.cache/lm-studio/models");
    const QJsonObject lm = readJson(h + QStringLiteral("/.lmstudio/settings.json"));
    const QString named = lm.value(QStringLiteral("downloadsFolder")).toString();
    if (!named.isEmpty()) r.lmStudio.prepend(named);
    if (const QString c = qEnvironmentVariable("HF_HUB_CACHE"); !c.isEmpty())
        r.hfCache << c;
    else if (const QString hf = qEnvironmentVariable("HF_HOME"); !hf.isEmpty())
        r.hfCache << hf + QStringLiteral("/hub");
    else
        r.hfCache << h + QStringLiteral("/.cache/huggingface/hub");
    const QString ollama = qEnvironmentVariable("OLLAMA_MODELS");
    r.ollama << (ollama.isEmpty() ? h + QStringLiteral("/.ollama/models") : ollama);
    return r;
}

QList<FoundModel> discoverModels(const DiscoveryRoots& roots) {
    QList<FoundModel> out;
    QStringList seen;
    auto once = [&](const QString& dir) {
        const QString abs = QFileInfo(dir).absoluteFilePath();
        if (!QFileInfo(abs).isDir() || seen.contains(abs)) return false;
        seen << abs;
        return true;
    };
    for (const QString& d : roots.lmStudio)
        if (once(d)) scanLmStudio(d, out);
    for (const QString& d : roots.hfCache)
        if (once(d)) scanHfCache(d, out);
    for (const QString& d : roots.ollama)
        if (once(d)) scanOllama(d, out);
    return out;
}

}  // namespace neural::gui
