// Errors are values: a Status carries a code, a message and, for statement
// errors, the byte position in the statement text. Result<T> is a value or a
// Status. The core compiles with -fno-exceptions.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <cstdlib>

namespace kitfox {

enum class Code : uint8_t {
  Ok = 0,
  Syntax,       // the statement text does not parse
  Type,         // a value does not fit the field's type
  NotFound,     // a collection or field that does not exist
  Exists,       // a collection, field or id that already exists
  Constraint,   // required field missing, unique violation
  Limit,        // a size or depth limit was exceeded
  Json,         // malformed JSON input
  Io,           // the file layer failed
  Corrupt,      // damage inside the file
  Locked,       // another process holds the database
  Failed,       // the database refuses writes after a failed flush
  Invalid,      // a bad argument or option
};

const char* code_name(Code c);

// A Status is one pointer: null when ok, so the ok path every call takes
// (returned, checked, dropped) costs what a pointer does; an error holds
// its code, message and position on the heap.
class Status {
 public:
  Status() = default;
  // Out of line: errors are rare, and every place that makes one stays small.
  Status(Code c, std::string msg, int64_t pos = -1);
  Status(const Status& o) : rep_(o.rep_ ? copy(o.rep_) : nullptr) {}
  Status(Status&& o) noexcept : rep_(o.rep_) { o.rep_ = nullptr; }
  Status& operator=(const Status& o) {
    if (this != &o) {
      Rep* r = o.rep_ ? copy(o.rep_) : nullptr;
      drop();
      rep_ = r;
    }
    return *this;
  }
  Status& operator=(Status&& o) noexcept {
    std::swap(rep_, o.rep_);
    return *this;
  }
  ~Status() {
    if (rep_) drop();
  }
  static Status ok() { return Status(); }
  bool is_ok() const { return rep_ == nullptr; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return rep_ ? rep_->code : Code::Ok; }
  const std::string& message() const;
  int64_t position() const { return rep_ ? rep_->pos : -1; }
  // "syntax error at 12: expected ..." style text for users.
  std::string to_string() const;

 private:
  struct Rep {
    Code code;
    int64_t pos;
    std::string msg;
  };
  static Rep* copy(const Rep* r);
  void drop();
  Rep* rep_ = nullptr;
};

template <typename T>
class Result {
 public:
  Result(T v) : value_(std::move(v)) {}
  Result(Status s) : status_(std::move(s)) {
    if (status_.is_ok()) std::abort();  // a Result from a Status must be an error
  }
  bool is_ok() const { return status_.is_ok(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T& operator*() { return value_; }
  T* operator->() { return &value_; }

 private:
  T value_{};
  Status status_;
};

#define KF_TRY(expr)                       \
  do {                                     \
    ::kitfox::Status _s = (expr);          \
    if (!_s.is_ok()) return _s;            \
  } while (0)

#define KF_CONCAT2(a, b) a##b
#define KF_CONCAT(a, b) KF_CONCAT2(a, b)
#define KF_ASSIGN_IMPL(tmp, lhs, expr)     \
  auto tmp = (expr);                       \
  if (!tmp.is_ok()) return tmp.status();   \
  lhs = std::move(tmp.value())
#define KF_ASSIGN(lhs, expr) KF_ASSIGN_IMPL(KF_CONCAT(_r_, __LINE__), lhs, expr)

}  // namespace kitfox
