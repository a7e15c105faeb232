// Types and collection definitions. A document is stored against field ids,
// not names, so `alter collection` renames and drops fields without rewriting
// documents: a dropped field's id is never reused and its values are skipped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "index/params.h"
#include "status.h"
#include "value.h"

namespace kitfox {

enum class TypeKind : uint8_t { Bool = 1, Int, Float, Text, Bytes, Timestamp, Json, List, Vector };

struct Type {
  TypeKind kind = TypeKind::Json;
  TypeKind elem = TypeKind::Json;  // List: the element type (a scalar type or json)
  uint32_t dim = 0;                // Vector: the dimension
  bool f16 = false;                // Vector: stored as half floats
};

std::string type_name(const Type& t);

struct Field {
  uint32_t id = 0;
  std::string name;
  Type type;
  bool required = false;
  IndexSpec index;
};

std::string index_name(const IndexSpec& s);

// A @hash, @unique or @sorted index on a field, or on a path inside a json field.
struct SecondaryDef {
  uint32_t field_id = 0;
  std::vector<std::string> subpath;  // keys below the field (json fields only)
  IndexKind kind = IndexKind::Hash;
  bool operator==(const SecondaryDef&) const = default;
};

const char* secondary_name(IndexKind k);

struct CollectionDef {
  uint32_t id = 0;
  std::string name;
  std::vector<Field> fields;
  uint32_t next_field_id = 1;
  std::vector<SecondaryDef> secondary;

  const Field* field(std::string_view name) const;
  const Field* field_by_id(uint32_t id) const;
};

// Makes `in` a value of type `t` (int widens to float, ISO-8601 text becomes a
// timestamp, base64 text becomes bytes, a number list becomes a vector) or
// fails naming `what` (the field path) and the expected type.
Status coerce(const Value& in, const Type& t, const std::string& what, Value* out);

}  // namespace kitfox
