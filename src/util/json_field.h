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

/// `object[key]`, or a null value when it is not there (or `object` is no object).
template <typename J> const J& json_member(const J& object, const char* key) {
  static const J null_value;
  auto it = object.find(key); // end() for anything but an object
  return it == object.end() ? null_value : *it;
}

/// `object[key]` when it is an array, else an empty one: a loop over it needs no check.
template <typename J> const J& json_array(const J& object, const char* key) {
  static const J empty = J::array();
  const J& value = json_member(object, key);
  return value.is_array() ? value : empty;
}

} // namespace kiln
