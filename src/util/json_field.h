#pragma once

#include <string>
#include <type_traits>

namespace kiln {

/// `object[key]` when it is there with the type of `fallback`, else `fallback`: a record an older
/// kiln, or a hand, wrote may lack a field or hold another type. A non-object has no fields.
template <typename T, typename J> T json_field(const J& object, const char* key, T fallback) {
  auto it = object.find(key); // end() for anything but an object
  if (it == object.end()) {
    return fallback;
  }
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->template get<bool>() : fallback;
  } else {
    return it->is_number() ? it->template get<T>() : fallback;
  }
}

} // namespace kiln
