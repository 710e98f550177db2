// The gpt-oss models the user already has from other apps, found where those apps keep them:
//  - LM Studio: ~/.lmstudio/models (and the older ~/.cache/lm-studio/models), plus the folder
//    its settings name ("downloadsFolder" in ~/.lmstudio/settings.json); GGUF files
//    PUBLISHER/REPO/FILE.gguf;
//  - the Hugging Face cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub;
//    checkpoints models--ORG--NAME/snapshots/COMMIT/ with a config.json;
//  - Ollama: $OLLAMA_MODELS, else ~/.ollama/models; manifests/REGISTRY/NAMESPACE/MODEL/TAG (JSON)
//    name the model layer (mediaType application/vnd.ollama.image.model) by digest, the GGUF
//    file blobs/sha256-HEX.
// On Windows "~" is %USERPROFILE% (where these apps keep the same layouts). Only gpt-oss models
// are listed (the name says gpt-oss, or the config's model_type is gpt_oss). Discovery reads
// folder listings and small JSON files, never writes: the models are used where they lie (a
// store the user asks for goes to the app's models folder) and nothing is copied or changed
// without the user's click. A broken manifest or a missing blob is listed with its problem.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>

#include <cstdint>

namespace neural::gui {

struct FoundModel {
    QString source;           // "LM Studio", "Hugging Face cache", "Ollama"
    QString name;             // "gpt-oss-20b", "gpt-oss:20b"
    QString path;             // the checkpoint folder or .gguf file to load ("" with a problem)
    QString format;           // "GGUF" or "safetensors"
    std::uint64_t bytes = 0;  // on disk
    QString problem;          // why it cannot be used ("" when it can)
    bool usable() const { return problem.isEmpty() && !path.isEmpty(); }
    // What setting it up takes: a store of about this size in the app's models folder, written
    // in about this many seconds (at kRepackBytesPerSecond).
    std::uint64_t storeBytes() const { return bytes; }
    double repackSeconds() const;
    // "gpt-oss-20b (LM Studio, GGUF, 12.1 GiB; a store needs 12.1 GiB and about 1 min)".
    QString description() const;
};

// A repack reads the checkpoint and writes the store about this fast on an SSD (a rough figure
// for the estimate the user sees; the wizard shows the real rate).
inline constexpr double kRepackBytesPerSecond = 400.0 * 1024 * 1024;

// Where to look. defaults() reads the environment (HOME or USERPROFILE, HF_HOME, HF_HUB_CACHE,
// OLLAMA_MODELS) and LM Studio's settings; tests build their own.
struct DiscoveryRoots {
    QStringList lmStudio;  // folders of PUBLISHER/REPO/*.gguf
    QStringList hfCache;   // hub folders of models--ORG--NAME
    QStringList ollama;    // folders with manifests/ and blobs/
    static DiscoveryRoots defaults();
};

QList<FoundModel> discoverModels(const DiscoveryRoots& roots = DiscoveryRoots::defaults());

}  // namespace neural::gui
