#include "html_elements.h"

#include <regex>
#include <sstream>

namespace kiln::testing {

std::string HtmlElement::attribute(const std::string& name) const {
  auto found = attributes.find(name);
  return found == attributes.end() ? std::string() : found->second;
}

bool HtmlElement::has_class(const std::string& name) const {
  std::istringstream words(attribute("class"));
  for (std::string word; words >> word;) {
    if (word == name) {
      return true;
    }
  }
  return false;
}

std::string html_unescape(const std::string& text) {
  static const std::pair<const char*, const char*> k_entities[] = {
      {"&lt;", "<"},   {"&gt;", ">"},   {"&quot;", "\""}, {"&#39;", "'"},
      {"&#x27;", "'"}, {"&nbsp;", " "}, {"&amp;", "&"}};
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool replaced = false;
    if (text[i] == '&') {
      for (const auto& [entity, character] : k_entities) {
        if (text.compare(i, std::char_traits<char>::length(entity), entity) == 0) {
          out += character;
          i += std::char_traits<char>::length(entity);
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) {
      out += text[i++];
    }
  }
  return out;
}

std::vector<HtmlElement> html_elements(const std::string& html, const std::string& tag,
                                       const std::string& css_class) {
  static const std::regex k_attribute(R"re(([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*"([^"]*)")re");
  std::vector<HtmlElement> elements;
  std::string open = "<" + tag;
  for (size_t at = html.find(open); at != std::string::npos; at = html.find(open, at + 1)) {
    size_t after = at + open.size();
    if (after >= html.size() ||
        (html[after] != ' ' && html[after] != '>' && html[after] != '/' && html[after] != '\n')) {
      continue; // `<rectangle`, not `<rect`
    }
    size_t end = html.find('>', after);
    if (end == std::string::npos) {
      break;
    }
    HtmlElement element;
    element.tag = tag;
    element.offset = at;
    std::string inside = html.substr(after, end - after);
    for (std::sregex_iterator it(inside.begin(), inside.end(), k_attribute), last; it != last;
         ++it) {
      element.attributes[(*it)[1].str()] = html_unescape((*it)[2].str());
    }
    if (css_class.empty() || element.has_class(css_class)) {
      elements.push_back(std::move(element));
    }
  }
  return elements;
}

std::vector<std::pair<double, double>> points_of(const HtmlElement& polyline) {
  std::vector<std::pair<double, double>> points;
  std::istringstream in(polyline.attribute("points"));
  for (std::string pair; in >> pair;) {
    size_t comma = pair.find(',');
    points.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return points;
}

std::vector<std::string> labels_running_into_bars(const std::string& html) {
  std::vector<HtmlElement> bars = html_elements(html, "rect", "bar");
  for (auto& publish : html_elements(html, "rect", "publish-bar")) {
    bars.push_back(std::move(publish));
  }
  std::vector<std::string> found;
  for (const auto& label : html_elements(html, "text", "bar-label")) {
    if (label.has_class("inside")) {
      continue;
    }
    size_t begin = html.find('>', label.offset) + 1;
    std::string text = html_unescape(html.substr(begin, html.find("</text>", begin) - begin));
    double x = std::stod(label.attribute("x"));
    double right = x + 7.0 * static_cast<double>(text.size());
    double y = std::stod(label.attribute("y"));
    for (const auto& bar : bars) {
      double top = std::stod(bar.attribute("y"));
      double left = std::stod(bar.attribute("x"));
      bool same_row = y >= top && y <= top + std::stod(bar.attribute("height"));
      if (same_row && x < left + std::stod(bar.attribute("width")) && right > left) {
        found.push_back("'" + text + "' runs into a bar at x=" + std::to_string(left));
      }
    }
  }
  return found;
}

} // namespace kiln::testing
