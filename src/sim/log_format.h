// log_format.h — access-log formats for ratelimit-sim: an nginx `log_format` string or an
// Apache `LogFormat` string compiled once into literals and named fields, then matched
// against each line.
//
// Why compiled: a production log runs to millions of lines; matching is a left-to-right scan
// (each field ends where the literal after it begins), no regular expression, no allocation.
// Field names are nginx's variable names, whatever the syntax the format was written in, so
// `--key` and the time rules speak one vocabulary: Apache's %h and %a are `remote_addr`,
// %u `remote_user`, %t `time_local`, %r `request`, %>s `status`, %U `uri`, %q `query_string`,
// %m `request_method`, %v `server_name`, %{Name}i `http_name` (lower case, '-' as '_'),
// %{Name}C `cookie_Name`; the time forms without an nginx twin keep Apache names:
// %{sec}t `apache_sec`, %{msec}t `apache_msec`, %{usec}t `apache_usec`, %{msec_frac}t
// `apache_msec_frac`, %{usec_frac}t `apache_usec_frac`; durations %D `apache_duration_us`,
// %T `apache_duration_s`, %{ms}T, %{us}T, %{s}T likewise.
// Invariants:
//   - Two fields are always separated by a literal (compile refuses "$a$b": no line could
//     tell where one ends).
//   - A field between double quotes ("$request") ends at the first '"' not escaped by a
//     backslash (nginx writes a quote inside a value as \x22, Apache as \").
//   - The predefined formats (nginx combined and main; Apache common, combined and
//     vhost_combined) also accept a line that stops after the status and size (the common
//     log format) or carries extra fields after the last one (nginx's main adds
//     "$http_x_forwarded_for"); a format the user writes must match the whole line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::sim {

class AccessLogFormat {
 public:
  // nginx syntax ("$remote_addr - [$time_local] ..."), Apache syntax ("%h %l %u %t ...") or the
  // name of a predefined format: combined (nginx; the same layout as Apache's), main (nginx's
  // default nginx.conf), common, vhost_combined (Apache). The syntax is told apart by the
  // first '$' or '%'. A predefined name followed by more ("combined $msec") is that layout
  // with the rest appended. A spec pasted from a config file ("log_format main '...' '...';" or the
  // quoted Apache string with \") is unwrapped. Error names the offending directive.
  static Result<AccessLogFormat> compile(std::string_view spec);
  static Result<AccessLogFormat> nginx(std::string_view spec);
  static Result<AccessLogFormat> apache(std::string_view spec);
  static AccessLogFormat combined();  // the format auto-detection tries

  // Splits `line` into one value per field (values[i] belongs to field_names()[i]; a field
  // the line stops before is empty). The views point into `line`. Error: which literal was
  // expected where, quoting a little of the line.
  Status match(std::string_view line, std::vector<std::string_view>& values) const;

  const std::vector<std::string>& field_names() const { return names_; }
  // Index of `name` in field_names(), or -1.
  int field_index(std::string_view name) const;
  // The format as written (or the predefined name and its expansion), for messages.
  const std::string& description() const { return description_; }

 private:
  struct Element {
    std::string literal;  // when field < 0
    int field = -1;
    bool quoted = false;  // the field sits between '"' literals
  };
  void add_literal(std::string_view text);
  Status add_field(std::string name);
  void finish();

  std::vector<Element> elements_;
  std::vector<std::string> names_;
  size_t required_ = 0;         // elements a line must reach (all, unless predefined)
  bool allow_trailing_ = false;  // text after the last element is ignored
  std::string description_;
};

}  // namespace ratelimit::sim
