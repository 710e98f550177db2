// The conversation state of recent /v1/responses answers, for follow-ups that name one in
// previous_response_id: bounded (the oldest goes first), on the server's thread. A follow-up's
// conversation starts with the stored history, so the engine's prompt cache reuses its K/V.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <string>

#include "chat/responses.h"

namespace neural::server {

class ResponseStore {
public:
    explicit ResponseStore(std::size_t capacity) : m_capacity(capacity) {}

    void put(const std::string& id, openai::ConversationState state) {
        if (m_capacity == 0) return;
        if (m_states.insert_or_assign(id, std::move(state)).second) m_order.push_back(id);
        while (m_order.size() > m_capacity) {
            m_states.erase(m_order.front());
            m_order.pop_front();
        }
    }
    // Null when the id is unknown or was dropped.
    const openai::ConversationState* find(const std::string& id) const {
        auto it = m_states.find(id);
        return it == m_states.end() ? nullptr : &it->second;
    }
    std::size_t size() const { return m_states.size(); }
    std::size_t capacity() const { return m_capacity; }

private:
    std::size_t m_capacity;
    std::map<std::string, openai::ConversationState> m_states;
    std::deque<std::string> m_order;  // oldest first
};

}  // namespace neural::server
