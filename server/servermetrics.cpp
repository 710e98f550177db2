#include "servermetrics.h"

namespace neural::server {

void ServerMetrics::countGeneration(qint64 promptTokens, qint64 cachedTokens,
                                    qint64 generatedTokens, double promptSeconds,
                                    double decodeSeconds) {
    ++m_generations;
    m_promptTokens += promptTokens;
    m_cachedTokens += cachedTokens;
    if (cachedTokens > 0) ++m_cacheHits;
    m_generatedTokens += generatedTokens;
    m_promptSeconds += promptSeconds;
    m_decodeSeconds += decodeSeconds;
    // The first token comes out of the prompt pass; decode time covers the rest.
    if (generatedTokens > 1 && decodeSeconds > 0)
        m_lastDecodeTokensPerSecond = double(generatedTokens - 1) / decodeSeconds;
}

QByteArray ServerMetrics::prometheusText(int queueLength, int queueCapacity, bool busy,
                                         int connections, const telemetry::Telemetry* telemetry,
                                         const host::QueueWaitStats* queueWait) const {
    QByteArray out;
    auto metric = [&out](const char* name, const char* type, const char* help) {
        out += QByteArray("# HELP ") + name + ' ' + help + "\n# TYPE " + name + ' ' + type + '\n';
    };
    auto value = [&out](const QByteArray& series, double v) {
        out += series + ' ' + QByteArray::number(v, 'g', 12) + '\n';
    };

    metric("neural_requests_total", "counter", "HTTP requests answered, by route and status.");
    for (auto it = m_requests.cbegin(); it != m_requests.cend(); ++it) {
        value("neural_requests_total{route=\"" + it.key().first + "\",status=\"" +
                  QByteArray::number(it.key().second) + "\"}",
              double(it.value()));
    }
    metric("neural_requests_rejected_total", "counter",
           "Generation requests refused with 503 because the queue was full.");
    value("neural_requests_rejected_total", double(m_rejected));
    metric("neural_connection_errors_total", "counter",
           "Requests the connection guard answered itself before any route, by status: 400 "
           "malformed, 405 unknown method, 408 too slow, 411 chunked body, 413 body too large, "
           "431 headers too large, 503 over the connection limit or the per-address limit.");
    for (auto it = m_connectionErrors.cbegin(); it != m_connectionErrors.cend(); ++it)
        value("neural_connection_errors_total{status=\"" + QByteArray::number(it.key()) + "\"}",
              double(it.value()));
    metric("neural_connections_dropped_total", "counter",
           "Connections closed without a request in progress, by reason: evicted (idle, to make "
           "room at the connection or per-address limit), idle_timeout (keep-alive), no_request "
           "(silent after the accept).");
    for (auto it = m_connectionsDropped.cbegin(); it != m_connectionsDropped.cend(); ++it)
        value("neural_connections_dropped_total{reason=\"" + it.key() + "\"}", double(it.value()));
    metric("neural_streams_stalled_total", "counter",
           "Streams cancelled because the client stopped reading: the send buffer stayed full "
           "for the write timeout (the engine paused meanwhile).");
    value("neural_streams_stalled_total", double(m_stalled));
    metric("neural_requests_cancelled_total", "counter",
           "Generation requests whose client went away before the answer was complete.");
    value("neural_requests_cancelled_total", double(m_cancelled));
    metric("neural_generations_total", "counter", "Generations run by the engine.");
    value("neural_generations_total", double(m_generations));
    metric("neural_prompt_tokens_total", "counter", "Prompt tokens of all generations.");
    value("neural_prompt_tokens_total", double(m_promptTokens));
    metric("neural_prompt_cached_tokens_total", "counter",
           "Prompt tokens reused from the KV cache instead of being processed.");
    value("neural_prompt_cached_tokens_total", double(m_cachedTokens));
    metric("neural_prompt_cache_hits_total", "counter",
           "Generations that reused at least one cached prompt token.");
    value("neural_prompt_cache_hits_total", double(m_cacheHits));
    metric("neural_generated_tokens_total", "counter", "Tokens generated.");
    value("neural_generated_tokens_total", double(m_generatedTokens));
    metric("neural_prompt_seconds_total", "counter", "Seconds spent processing prompts.");
    value("neural_prompt_seconds_total", m_promptSeconds);
    metric("neural_decode_seconds_total", "counter", "Seconds spent generating tokens.");
    value("neural_decode_seconds_total", m_decodeSeconds);
    metric("neural_decode_tokens_per_second", "gauge",
           "Decode speed of the last generation (tokens after the first / decode seconds).");
    value("neural_decode_tokens_per_second", m_lastDecodeTokensPerSecond);
    metric("neural_queue_length", "gauge", "Requests waiting for the engine.");
    value("neural_queue_length", queueLength);
    metric("neural_queue_capacity", "gauge", "Requests that may wait before 503.");
    value("neural_queue_capacity", queueCapacity);
    metric("neural_generation_active", "gauge", "1 while the engine is generating.");
    value("neural_generation_active", busy ? 1 : 0);
    metric("neural_open_connections", "gauge", "Open HTTP connections.");
    value("neural_open_connections", connections);
    if (queueWait != nullptr) {
        metric("neural_queue_wait_seconds", "summary",
               "Seconds from enqueue to the engine taking the job (quantiles over the last 4096 "
               "jobs; sum and count over all).");
        value("neural_queue_wait_seconds{quantile=\"0.5\"}", queueWait->quantile(0.5));
        value("neural_queue_wait_seconds{quantile=\"0.99\"}", queueWait->quantile(0.99));
        value("neural_queue_wait_seconds_sum", queueWait->sum());
        value("neural_queue_wait_seconds_count", double(queueWait->count()));
    }
    if (telemetry != nullptr) {
        // Averages over the most recent generated tokens (up to 256) of the engine's ring.
        constexpr std::uint64_t kWindow = 256;
        const auto& ring = telemetry->tokens();
        const std::uint64_t end = ring.published();
        const std::uint64_t begin = end > kWindow ? end - kWindow : 0;
        double n = 0, wall = 0, kernel = 0, bytes = 0, faults = 0, major = 0, missed = 0;
        for (std::uint64_t i = begin; i < end; ++i) {
            const auto r = ring.read(i);
            if (!r) continue;  // overwritten meanwhile
            n += 1;
            wall += double(r->wall_ns) * 1e-6;
            kernel += double(r->cpu_kernel_ns) * 1e-6;
            bytes += double(r->cpu_bytes);
            faults += double(r->page_faults);
            major += double(r->major_page_faults);
            missed += double(r->experts_missed);
        }
        metric("neural_engine_tokens_total", "counter", "Tokens the engine recorded in telemetry.");
        value("neural_engine_tokens_total", double(end));
        const double d = n > 0 ? n : 1;
        metric("neural_token_ms", "gauge", "Mean wall ms per token over the recent tokens.");
        value("neural_token_ms", wall / d);
        metric("neural_token_cpu_kernel_ms", "gauge", "Mean CPU expert-kernel ms per token.");
        value("neural_token_cpu_kernel_ms", kernel / d);
        metric("neural_token_cpu_expert_bytes", "gauge",
               "Mean expert bytes read by the CPU per token.");
        value("neural_token_cpu_expert_bytes", bytes / d);
        metric("neural_token_experts_missed", "gauge",
               "Mean experts computed on the CPU per token.");
        value("neural_token_experts_missed", missed / d);
        metric("neural_token_page_faults", "gauge", "Mean page faults per token.");
        value("neural_token_page_faults", faults / d);
        metric("neural_token_major_page_faults", "gauge",
               "Mean major page faults (read from disk) per token; 0 where the OS does not count "
               "them.");
        value("neural_token_major_page_faults", major / d);
        metric("neural_team_fallbacks_total", "counter",
               "Expert-kernel jobs the persistent CPU team handed to the OpenMP team.");
        value("neural_team_fallbacks_total",
              double(telemetry->moe.team_fallbacks.load(std::memory_order_relaxed)));
    }
    return out;
}

}  // namespace neural::server
