#include "status.h"

namespace kitfox {

const char* code_name(Code c) {
  switch (c) {
    case Code::Ok: return "ok";
    case Code::Syntax: return "syntax";
    case Code::Type: return "type";
    case Code::NotFound: return "not_found";
    case Code::Exists: return "exists";
    case Code::Constraint: return "constraint";
    case Code::Limit: return "limit";
    case Code::Json: return "json";
    case Code::Io: return "io";
    case Code::Corrupt: return "corrupt";
    case Code::Locked: return "locked";
    case Code::Failed: return "failed";
    case Code::Invalid: return "invalid";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string s = code_name(code_);
  s += " error";
  if (pos_ >= 0) {
    s += " at ";
    s += std::to_string(pos_);
  }
  s += ": ";
  s += msg_;
  return s;
}

}  // namespace kitfox
