// json_kind.h — the name of a Boost.JSON value's kind as an error message says it ("a string",
// "an array", ...), for every parser that answers "'x' must be a string, got a number".
//
// Why here: the native API's request parser (src/server/request.cc) and the Envoy /json
// parser (src/rls/rls_json.cc) both quote the kind they got; one wording for both.
// Header-only, not installed (src/common is on the include path of every target through
// ratelimit_warnings); includers link Boost::json themselves. Pure; thread-safe.
#pragma once

#include <boost/json/kind.hpp>

namespace ratelimit {

// "null", "a boolean", "a number", "a string", "an array" or "an object".
inline const char* json_kind_name(boost::json::kind k) {
  switch (k) {
    case boost::json::kind::null: return "null";
    case boost::json::kind::bool_: return "a boolean";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::double_: return "a number";
    case boost::json::kind::string: return "a string";
    case boost::json::kind::array: return "an array";
    case boost::json::kind::object: return "an object";
  }
  return "a value";
}

}  // namespace ratelimit
