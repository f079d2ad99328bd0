// status.h — errors as values: Status (a code and a message) and Result<T>.
//
// Why: the library never throws across its API. Over-the-limit is not an error (it is a
// Decision); errors are for bad input (kInvalidArgument), a store that cannot be reached
// (kUnavailable: a retry may help), or a deadline that passed (kDeadlineExceeded).
// Invariant: a Result holds exactly one of a value or a non-OK Status.
// Thread-safety: Status and Result are plain values (no shared state): concurrent const
// access is safe, a mutation needs the caller's own synchronisation, as for any value.
// status_code_name returns a static string and may be called from any thread.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace ratelimit {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // fix the input; retrying the same call fails the same way
  kNotFound,           // e.g. an unknown policy name
  kResourceExhausted,  // a configured bound (key length, sliding-log size) was hit
  kUnavailable,        // the store cannot be reached right now; a retry may help
  kDeadlineExceeded,   // the store did not answer in time
  kInternal,           // a bug or an unexpected reply; report it
};

// Returns the lower-case snake name of `code` ("invalid_argument"), stable for logs and JSON.
const char* status_code_name(StatusCode code);

// [[nodiscard]]: a Status returned and dropped is an error nobody saw; the compiler refuses it
// (cast to void, with a comment why, where dropping is right).
class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status deadline_exceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  [[nodiscard]] bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: limit must be >= 1" (or "ok").
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or an error. Construct from a T (success) or from a non-OK Status (failure).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).is_ok() && "Result built from an OK status has no value");
  }

  [[nodiscard]] bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // Precondition: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // OK when ok(), else the error.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // A Result holding make()'s value (make: a callable returning T), built where it stays: the
  // value make() returns is written once, in place, never copied. For a value written field by
  // field, a whole-object copy right after is a store-forwarding stall (the MemoryStore hot path).
  template <typename F>
  static Result from_call(F&& make) {
    return Result(Call<F>{make});
  }

 private:
  template <typename F>
  struct Call {
    F& make;
    operator T() { return make(); }  // NOLINT(google-explicit-constructor): the in-place build
  };
  template <typename F>
  explicit Result(Call<F> call) : v_(std::in_place_index<0>, call) {}

  std::variant<T, Status> v_;
};

}  // namespace ratelimit
