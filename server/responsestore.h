// The conversation state of recent /v1/responses answers, for follow-ups that name one in
// previous_response_id: bounded (the oldest goes first), on the server's thread. A follow-up's
// conversation starts with the stored history, so the engine's prompt cache reuses its K/V.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <map>
#include <string>

#include "api/responses.h"

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
    // DELETE /v1/responses/{id}: false when the id is unknown.
    bool remove(const std::string& id) {
        if (m_states.erase(id) == 0) return false;
        m_order.erase(std::find(m_order.begin(), m_order.end(), id));
        return true;
    }
    // An output or input item of a kept response, by id (item_reference); null when unknown.
    // The newest response that has it wins.
    const openai::Json* findItem(const std::string& id) const {
        for (auto r = m_order.rbegin(); r != m_order.rend(); ++r) {
            const openai::ConversationState& s = m_states.at(*r);
            for (const openai::Json* list : {&s.response["output"], &s.input_items}) {
                if (!list->is_array()) continue;
                for (const openai::Json& item : *list) {
                    if (item.is_object() && item.value("id", openai::Json()) == id) return &item;
                }
            }
        }
        return nullptr;
    }
    std::size_t size() const { return m_states.size(); }
    std::size_t capacity() const { return m_capacity; }

private:
    std::size_t m_capacity;
    std::map<std::string, openai::ConversationState> m_states;
    std::deque<std::string> m_order;  // oldest first
};

}  // namespace neural::server
