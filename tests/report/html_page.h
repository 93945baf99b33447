// Reading the data back out of an HTML report page (src/report/html_report.h), for the unit
// and end-to-end tests of the page.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace grademl::testing {

// The JSON inside <script type="application/json" id="grademl-data">, or null (with a test
// failure) when the element is missing.
inline nlohmann::json HtmlPageData(const std::string& page) {
  const std::string open = "id=\"grademl-data\">";
  size_t a = page.find(open);
  if (a == std::string::npos) {
    ADD_FAILURE() << "no grademl-data element in the page";
    return nullptr;
  }
  a += open.size();
  size_t b = page.find("</script>", a);
  if (b == std::string::npos) {
    ADD_FAILURE() << "the grademl-data element is not closed";
    return nullptr;
  }
  return nlohmann::json::parse(page.substr(a, b - a));
}

}  // namespace grademl::testing
