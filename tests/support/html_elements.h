#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln::testing {

/// One start tag of an HTML (or inline SVG) document, its attributes unescaped.
struct HtmlElement {
  std::string tag;
  std::map<std::string, std::string> attributes;
  size_t offset = 0; // where its `<` is in the document

  std::string attribute(const std::string& name) const;
  /// Its `class` attribute holds `name` as one of its words.
  bool has_class(const std::string& name) const;
};

/// Every start tag `<tag ...>` in `html`, in document order, whose class holds `css_class`
/// (any element when ""). Good for markup as kiln writes it and as a browser serializes it
/// (`--dump-dom`): attributes quoted with `"`, no `>` inside a value.
std::vector<HtmlElement> html_elements(const std::string& html, const std::string& tag,
                                       const std::string& css_class = "");

/// The coordinate pairs of a polyline's `points`.
std::vector<std::pair<double, double>> points_of(const HtmlElement& polyline);

/// The labels of a report's chart (`text.bar-label` placed after their bar, 7 px a character as
/// the report reckons) that run into a bar of their row (`rect.bar` or `rect.publish-bar`), each
/// as "'<label>' runs into a bar at x=<x>". Empty when every label keeps clear.
std::vector<std::string> labels_running_into_bars(const std::string& html);

/// `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&#39;` and `&nbsp;` back to their characters.
std::string html_unescape(const std::string& text);

} // namespace kiln::testing
