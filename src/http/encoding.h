// encoding.h — the two string encodings of encoding.cc (sf-string, JSON string) in the form the
// wire writer takes (wire_writer.h): a bound, a writer through a pointer, and the Measure/Writer
// pair that adds them as the members sf() and json(). Internal to src/http: render.cc writes
// whole field values and bodies with these; append_sf_string / append_json_string are the
// public forms (include/ratelimit/http.h), with the same bytes.
// Invariants: write_*_string(p, s) writes at most *_string_bound(s.size()) bytes; the bytes are
// those the rules in http.h give (see encoding.cc).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "wire_writer.h"

namespace ratelimit::http {

// An sf-string: quotes, and at most 2 bytes per input byte ('\' before '"' or '\').
constexpr size_t sf_string_bound(size_t n) { return 2 * n + 2; }
// A JSON string: quotes, and at most 6 bytes per input byte ("\u00XX" for a control byte;
// U+FFFD for an ill-formed byte takes 3).
constexpr size_t json_string_bound(size_t n) { return 6 * n + 2; }

char* write_sf_string(char* p, std::string_view s);
char* write_json_string(char* p, std::string_view s);

struct Measure : wire::Measure {
  void sf(std::string_view s) { n += sf_string_bound(s.size()); }
  void json(std::string_view s) { n += json_string_bound(s.size()); }
};

struct Writer : wire::Writer {
  using wire::Writer::Writer;
  void sf(std::string_view s) { p = write_sf_string(p, s); }
  void json(std::string_view s) { p = write_json_string(p, s); }
};

// Appends what `emit` writes (a generic lambda over Measure, then Writer) to `out`.
template <class Emit>
void append(std::string& out, Emit&& emit) {
  wire::append_with<Measure, Writer>(out, emit);
}

}  // namespace ratelimit::http
