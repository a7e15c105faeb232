// Value: one datum of the data model. Documents are Object values whose keys
// are field names; json fields hold any of Null/Bool/Int/Float/Text/List/Object.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kitfox {

enum class Kind : uint8_t { Null, Bool, Int, Float, Text, Bytes, Timestamp, List, Object, Vector };

const char* kind_name(Kind k);

class Value {
 public:
  Value() = default;
  static Value null() { return Value(); }
  static Value boolean(bool b) { Value v; v.kind_ = Kind::Bool; v.i_ = b; return v; }
  static Value integer(int64_t i) { Value v; v.kind_ = Kind::Int; v.i_ = i; return v; }
  static Value real(double d) { Value v; v.kind_ = Kind::Float; v.f_ = d; return v; }
  static Value timestamp(int64_t ms) { Value v; v.kind_ = Kind::Timestamp; v.i_ = ms; return v; }
  static Value text(std::string s) { Value v; v.kind_ = Kind::Text; v.s_ = std::move(s); return v; }
  static Value bytes(std::string s) { Value v; v.kind_ = Kind::Bytes; v.s_ = std::move(s); return v; }
  static Value list(std::vector<Value> items = {}) { Value v; v.kind_ = Kind::List; v.items_ = std::move(items); return v; }
  static Value object() { Value v; v.kind_ = Kind::Object; return v; }
  static Value vector(std::vector<float> f) { Value v; v.kind_ = Kind::Vector; v.vec_ = std::move(f); return v; }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }
  double as_float() const { return f_; }
  double as_number() const { return kind_ == Kind::Int ? double(i_) : f_; }
  const std::string& as_string() const { return s_; }
  std::string& mutable_string() { return s_; }

  // List items, or an Object's values (parallel to keys()).
  const std::vector<Value>& items() const { return items_; }
  std::vector<Value>& mutable_items() { return items_; }
  const std::vector<std::string>& keys() const { return keys_; }
  const std::vector<float>& vec() const { return vec_; }
  std::vector<float>& mutable_vec() { return vec_; }

  // Object access. set() replaces an existing key or appends.
  const Value* get(std::string_view key) const;
  Value* get_mut(std::string_view key);
  void set(std::string_view key, Value v);
  bool erase(std::string_view key);
  void append(std::string key, Value v) { keys_.push_back(std::move(key)); items_.push_back(std::move(v)); }
  void reserve_keys(size_t n) {
    keys_.reserve(n);
    items_.reserve(n);
  }
  void push(Value v) { items_.push_back(std::move(v)); }
  size_t size() const { return kind_ == Kind::Vector ? vec_.size() : kind_ == Kind::Object || kind_ == Kind::List ? items_.size() : s_.size(); }

 private:
  Kind kind_ = Kind::Null;
  union {
    int64_t i_ = 0;
    double f_;
  };
  std::string s_;
  std::vector<Value> items_;
  std::vector<std::string> keys_;
  std::vector<float> vec_;
};

// Total order used by `order` and sorted output: null < bool < number <
// timestamp < text < bytes < list < object < vector. Ints and floats compare
// numerically.
int compare(const Value& a, const Value& b);
bool equal(const Value& a, const Value& b);

// A timestamp (ms since epoch, UTC) as ISO-8601 "YYYY-MM-DDTHH:MM:SS.sssZ",
// and back. parse accepts a date, date+time, fractional seconds, Z or +hh:mm.
std::string format_timestamp(int64_t ms);
// The double nearest to f's shortest decimal form (what reading back the
// shortest text that round-trips f would give: 0.1f -> 0.1, not
// 0.10000000149011612), without going through text where it can.
double float_as_shortest_double(float f);
bool parse_timestamp(std::string_view s, int64_t* ms);

bool valid_utf8(std::string_view s);

}  // namespace kitfox
