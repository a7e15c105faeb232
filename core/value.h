// Value: one datum of the data model. Documents are Object values whose keys
// are field names; json fields hold any of Null/Bool/Int/Float/Text/List/Object.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace kitfox {

enum class Kind : uint8_t { Null, Bool, Int, Float, Text, Bytes, Timestamp, List, Object, Vector };

const char* kind_name(Kind k);

class Value {
 public:
  Value() noexcept : i_(0) {}
  ~Value() { destroy(); }
  Value(const Value& o) { copy_from(o); }
  Value(Value&& o) noexcept { move_from(std::move(o)); }
  // Through a temporary: the source may live inside this value.
  Value& operator=(const Value& o) {
    if (this != &o) {
      Value t(o);
      destroy();
      move_from(std::move(t));
    }
    return *this;
  }
  Value& operator=(Value&& o) noexcept {
    if (this != &o) {
      if (!owns_member()) {  // nothing to free, so the source is not inside it
        move_from(std::move(o));
        return *this;
      }
      Value t(std::move(o));
      destroy();
      move_from(std::move(t));
    }
    return *this;
  }

  static Value null() { return Value(); }
  static Value boolean(bool b) { return scalar(Kind::Bool, b); }
  static Value integer(int64_t i) { return scalar(Kind::Int, i); }
  static Value real(double d) {
    Value v;
    v.kind_ = Kind::Float;
    v.f_ = d;
    return v;
  }
  static Value timestamp(int64_t ms) { return scalar(Kind::Timestamp, ms); }
  static Value text(std::string s) { return string_of(Kind::Text, std::move(s)); }
  static Value bytes(std::string s) { return string_of(Kind::Bytes, std::move(s)); }
  static Value list(std::vector<Value> items = {}) {
    Value v;
    v.kind_ = Kind::List;
    new (&v.m_) Members{std::move(items), {}};
    return v;
  }
  static Value object() {
    Value v;
    v.kind_ = Kind::Object;
    new (&v.m_) Members{};
    return v;
  }
  static Value vector(std::vector<float> f) {
    Value v;
    v.kind_ = Kind::Vector;
    new (&v.vec_) std::vector<float>(std::move(f));
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  // Scalars; 0 (false) for a value of another kind.
  bool as_bool() const { return is_scalar() && i_ != 0; }
  int64_t as_int() const { return is_scalar() ? i_ : 0; }
  double as_float() const { return is_scalar() ? f_ : 0.0; }
  double as_number() const { return kind_ == Kind::Int ? double(i_) : kind_ == Kind::Float ? f_ : 0.0; }
  // Text and bytes; empty for a value of another kind.
  const std::string& as_string() const { return is_string() ? s_ : kEmptyString; }
  // The mutable accessors make the value of their kind first when it is not
  // (text, a list, a vector), so they never reach a member it does not hold.
  std::string& mutable_string() {
    if (!is_string()) become(Kind::Text);
    return s_;
  }

  // List items, or an Object's values (parallel to keys()).
  const std::vector<Value>& items() const { return has_members() ? m_.items : kNoItems; }
  std::vector<Value>& mutable_items() {
    if (!has_members()) become(Kind::List);
    return m_.items;
  }
  const std::vector<std::string>& keys() const { return has_members() ? m_.keys : kNoKeys; }
  const std::vector<float>& vec() const { return kind_ == Kind::Vector ? vec_ : kNoFloats; }
  std::vector<float>& mutable_vec() {
    if (kind_ != Kind::Vector) become(Kind::Vector);
    return vec_;
  }

  // Object access (a value that is not a list or an object becomes an
  // object first). set() replaces an existing key or appends.
  const Value* get(std::string_view key) const;
  // The value at a path of keys (an empty path: this one); a null (one
  // shared) where the path leads past an object or to a missing key.
  const Value& at_path(const std::vector<std::string>& path) const;
  Value* get_mut(std::string_view key);
  void set(std::string_view key, Value v);
  bool erase(std::string_view key);
  void append(std::string key, Value v) {
    Members& m = members();
    m.keys.push_back(std::move(key));
    m.items.push_back(std::move(v));
  }
  void reserve_keys(size_t n) {
    Members& m = members();
    m.keys.reserve(n);
    m.items.reserve(n);
  }
  void push(Value v) { mutable_items().push_back(std::move(v)); }
  // A scalar (bool, int, timestamp) written over this value: no temporary
  // made and moved in, the common case of a row read again and again.
  void assign_scalar(Kind k, int64_t i) {
    if (owns_member()) destroy();
    kind_ = k;
    i_ = i;
  }
  // A float written over this value, as assign_scalar.
  void assign_real(double d) {
    if (owns_member()) destroy();
    kind_ = Kind::Float;
    f_ = d;
  }
  // Text or bytes written over this value, into the storage of the string it
  // holds when it holds one (`s` must not lie inside this value).
  void assign_string(Kind k, std::string_view s) {
    if (kind_ == Kind::Text || kind_ == Kind::Bytes) {
      kind_ = k;
      s_.clear();  // then an append into the storage it has: no overlap to check, unlike assign
      s_.append(s.data(), s.size());
      return;
    }
    destroy();
    kind_ = k;
    new (&s_) std::string(s);
  }
  // An object written over the one this value holds, keeping its storage
  // (what a read made again and again reuses: a prepared point read's row):
  // member(i, key) is the i-th member, its key set to `key` and its old value
  // left for the caller to write over (appended past the end), and
  // keep_members(n) drops those from the n-th on. A value that is not an
  // object becomes an empty one first.
  [[gnu::always_inline]] Value& member(size_t i, std::string_view key) {
    if (kind_ != Kind::Object) become(Kind::Object);
    if (i < m_.keys.size()) {
      if (!same_key(m_.keys[i], key)) m_.keys[i].assign(key.data(), key.size());
      return m_.items[i];
    }
    m_.keys.emplace_back(key);
    return m_.items.emplace_back();
  }
  void keep_members(size_t n) {
    if (!has_members() || n >= m_.items.size()) return;
    m_.items.resize(n);
    if (n < m_.keys.size()) m_.keys.resize(n);
  }
  size_t size() const {
    return kind_ == Kind::Vector ? vec_.size() : has_members() ? m_.items.size() : is_string() ? s_.size() : 0;
  }

 private:
  // A list's items (no keys) or an object's keys and values.
  struct Members {
    std::vector<Value> items;
    std::vector<std::string> keys;
  };
  static const std::string kEmptyString;
  static const std::vector<Value> kNoItems;
  static const std::vector<std::string> kNoKeys;
  static const std::vector<float> kNoFloats;

  // Keys are mostly short: compared here with no call, up to 16 bytes as
  // two words that may overlap (every load inside both keys).
  static bool same_key(std::string_view a, std::string_view b) {
    const size_t n = a.size();
    if (n != b.size()) return false;
    const char *x = a.data(), *y = b.data();
    if (n >= 8) {
      if (n > 16) return a == b;
      return load_word<uint64_t>(x) == load_word<uint64_t>(y) &&
             load_word<uint64_t>(x + n - 8) == load_word<uint64_t>(y + n - 8);
    }
    if (n >= 4)
      return load_word<uint32_t>(x) == load_word<uint32_t>(y) &&
             load_word<uint32_t>(x + n - 4) == load_word<uint32_t>(y + n - 4);
    if (n == 0) return true;
    return x[0] == y[0] && x[n / 2] == y[n / 2] && x[n - 1] == y[n - 1];
  }
  template <typename W>
  static W load_word(const char* p) {
    W w;
    std::memcpy(&w, p, sizeof w);
    return w;
  }
  static Value scalar(Kind k, int64_t i) {
    Value v;
    v.kind_ = k;
    v.i_ = i;
    return v;
  }
  static Value string_of(Kind k, std::string s) {
    Value v;
    v.kind_ = k;
    new (&v.s_) std::string(std::move(s));
    return v;
  }
  bool is_scalar() const { return kind_ <= Kind::Float || kind_ == Kind::Timestamp; }
  bool is_string() const { return kind_ == Kind::Text || kind_ == Kind::Bytes; }
  bool has_members() const { return kind_ == Kind::List || kind_ == Kind::Object; }
  bool owns_member() const { return kind_ >= Kind::Text && kind_ != Kind::Timestamp; }
  Members& members() {
    if (!has_members()) become(Kind::Object);
    return m_;
  }
  void destroy() noexcept {
    switch (kind_) {
      case Kind::Text: case Kind::Bytes: s_.~basic_string(); break;
      case Kind::List: case Kind::Object: m_.~Members(); break;
      case Kind::Vector: vec_.~vector(); break;
      default: break;
    }
  }
  // The value becomes an empty one of kind k (text, list, object, vector).
  void become(Kind k);
  void copy_from(const Value& o);
  // The source keeps its kind, its member emptied by the move.
  void move_from(Value&& o) noexcept {
    kind_ = o.kind_;
    switch (kind_) {
      case Kind::Text: case Kind::Bytes: new (&s_) std::string(std::move(o.s_)); break;
      case Kind::List: case Kind::Object: new (&m_) Members{std::move(o.m_.items), std::move(o.m_.keys)}; break;
      case Kind::Vector: new (&vec_) std::vector<float>(std::move(o.vec_)); break;
      default: i_ = o.i_; break;
    }
  }

  Kind kind_ = Kind::Null;
  union {
    int64_t i_;
    double f_;
    std::string s_;     // Text, Bytes
    Members m_;         // List, Object
    std::vector<float> vec_;  // Vector
  };
};

// Total order used by `order` and sorted output: null < bool < number <
// timestamp < text < bytes < list < object < vector. Ints and floats compare
// numerically.
int compare(const Value& a, const Value& b);
// Two numbers (int or float) in compare's order: numerically, exactly (an
// int beyond 2^53 and the float it rounds to differ), NaN after every other.
inline int compare_numbers(const Value& a, const Value& b) {
  if (a.kind() == Kind::Int && b.kind() == Kind::Int) return (a.as_int() > b.as_int()) - (a.as_int() < b.as_int());
  double x = a.as_number(), y = b.as_number();
  if (std::isnan(x) || std::isnan(y)) return (int)std::isnan(x) - (int)std::isnan(y);
  if (x != y) return x < y ? -1 : 1;
  // Equal as doubles: an int beyond 2^53 may still differ from the float
  // (a whole number then), exactly: 2^63 is above every int. So the order
  // is exact, and equality transitive.
  if (a.kind() == Kind::Int && b.kind() == Kind::Float)
    return y >= 0x1p63 ? -1 : (a.as_int() > (int64_t)y) - (a.as_int() < (int64_t)y);
  if (a.kind() == Kind::Float && b.kind() == Kind::Int)
    return x >= 0x1p63 ? 1 : ((int64_t)x > b.as_int()) - ((int64_t)x < b.as_int());
  return 0;
}
bool equal(const Value& a, const Value& b);
// 64 bits that order as compare() orders, where they differ: sort_prefix(a)
// < sort_prefix(b) means compare(a, b) < 0; equal prefixes say nothing (the
// kind's rank, then the first 7 bytes of a text, 56 bits of a number).
uint64_t sort_prefix(const Value& v);
// Bytes that are the same for values compare() finds equal (an integral
// float as the int it equals, so also -0.0 as 0; every NaN one; a vector's
// -0.0 as 0), and different for any others: a key by which a hash map
// holds what compares equal together (a @hash index, a query's groups).
void key_bytes(std::string& out, const Value& v);

// A timestamp (ms since epoch, UTC) as ISO-8601 "YYYY-MM-DDTHH:MM:SS.sssZ"
// (outside years 0000-9999 "+YYYYYY-..." or "-YYYYYY-...", as JavaScript
// writes them), and back. parse accepts a date, date+time, fractional
// seconds, Z or +hh:mm, and both forms of the year.
std::string format_timestamp(int64_t ms);
// The double nearest to f's shortest decimal form (what reading back the
// shortest text that round-trips f would give: 0.1f -> 0.1, not
// 0.10000000149011612), without going through text where it can.
double float_as_shortest_double(float f);
bool parse_timestamp(std::string_view s, int64_t* ms);
// Base64 (standard or URL alphabet, padding optional) into bytes; false for
// text that is none (json.cpp).
bool base64_decode(std::string_view in, std::string* out);

bool valid_utf8(std::string_view s);
// Decodes the UTF-8 sequence starting at s[i]: stores the code point in *cp and
// returns its length in bytes (>= 1). A malformed or truncated sequence counts
// as one byte decoding to U+FFFD.
size_t utf8_decode(std::string_view s, size_t i, uint32_t* cp);

}  // namespace kitfox
