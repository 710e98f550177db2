#include "app/applog.h"

#include <QMetaObject>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>

namespace neural::gui {

namespace {

class HubSink : public spdlog::sinks::base_sink<std::mutex> {
protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        spdlog::memory_buf_t buf;
        formatter_->format(msg, buf);
        QString text = QString::fromUtf8(buf.data(), static_cast<qsizetype>(buf.size()));
        while (text.endsWith(QLatin1Char('\n')) || text.endsWith(QLatin1Char('\r'))) text.chop(1);
        LogHub::instance().post(text);
    }
    void flush_() override {}
};

// Qt's text shaper warns once per font and script it has no OpenType tables for ("  OpenType
// support missing for "DejaVu Sans", script 11", with the leading spaces). A random-weight model's reply mixes many
// scripts, so these made up most of the log. They say that a font is missing, not that the app
// failed: one line says so, the details go to the debug level.
bool isFontFallbackNotice(const QString& msg) {
    return msg.trimmed().startsWith(QLatin1String("OpenType support missing for"));
}

void qtToSpdlog(QtMsgType type, const QMessageLogContext& ctx, const QString& msg) {
    if (isFontFallbackNotice(msg)) {
        static std::once_flag once;
        std::call_once(once, [] {
            spdlog::info(
                "some text uses scripts the installed fonts do not cover; it may show "
                "as boxes (the font notices are logged at debug level)");
        });
        spdlog::debug(msg.toStdString());
        return;
    }
    const std::string text =
        (ctx.category && qstrcmp(ctx.category, "default") != 0
             ? QStringLiteral("[%1] %2").arg(QString::fromLatin1(ctx.category), msg)
             : msg)
            .toStdString();
    switch (type) {
        case QtDebugMsg:
            spdlog::debug(text);
            break;
        case QtInfoMsg:
            spdlog::info(text);
            break;
        case QtWarningMsg:
            spdlog::warn(text);
            break;
        case QtCriticalMsg:
        case QtFatalMsg:
            spdlog::error(text);
            break;
    }
}

}  // namespace

LogHub& LogHub::instance() {
    static LogHub hub;
    return hub;
}

void LogHub::post(const QString& text) {
    QMetaObject::invokeMethod(
        this, [this, text] { emit line(text); }, Qt::QueuedConnection);
}

QString installLogging(const QString& logFile) {
    std::vector<spdlog::sink_ptr> sinks;
    sinks.push_back(std::make_shared<HubSink>());
    QString used;
    if (!logFile.isEmpty()) {
        try {
            sinks.push_back(std::make_shared<spdlog::sinks::rotating_file_sink_mt>(
                logFile.toStdString(), 5 * 1024 * 1024, 3));
            used = logFile;
        } catch (const spdlog::spdlog_ex& e) {
            // No file (read-only folder, ...): keep the panel; say why in it.
            LogHub::instance().post(QStringLiteral("log file %1 not opened: %2")
                                        .arg(logFile, QString::fromUtf8(e.what())));
        }
    }
    auto logger = std::make_shared<spdlog::logger>("neural", sinks.begin(), sinks.end());
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
    logger->set_level(spdlog::level::info);
    // Every line reaches the file as it is written: a crash (or a kill) keeps the log up to its
    // last line, which is when it is needed most. The app logs a few lines a minute.
    logger->flush_on(spdlog::level::trace);
    spdlog::set_default_logger(logger);
    qInstallMessageHandler(qtToSpdlog);
    return used;
}

}  // namespace neural::gui
