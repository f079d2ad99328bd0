// char_class.h — the byte classes more than one of our parsers and encoders test: RFC 9110's
// token characters (a field name) and the bytes a JSON string carries as themselves.
//
// Why one home: each class had two or three copies (the field-name check and the HTTP/1.1 fast
// parse's table; the JSON encoder's table and the plain-body reader), and a reader and a writer
// that disagree by one byte disagree on the wire. Hot loops may build a table from these; the
// table is then derived, not a second definition.
// Invariants: pure constexpr functions of one byte.
#pragma once

namespace ratelimit::text {

// A token character (RFC 9110 §5.6.2): ALPHA, DIGIT and !#$%&'*+-.^_`|~.
constexpr bool is_tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~': return true;
    default: return false;
  }
}

// A byte a JSON string holds as itself, as we write and fast-read them: printable ASCII
// (0x20-0x7e) but '"' and '\'. (JSON allows more unescaped; this is our plain subset.)
constexpr bool is_json_plain(unsigned char c) {
  return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\';
}

}  // namespace ratelimit::text
