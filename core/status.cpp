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

Status::Status(Code c, std::string msg, int64_t pos) : rep_(c == Code::Ok ? nullptr : new Rep{c, pos, std::move(msg)}) {}
Status::Rep* Status::copy(const Rep* r) { return new Rep(*r); }
void Status::drop() {
  delete rep_;
  rep_ = nullptr;
}

const std::string& Status::message() const {
  static const std::string none;
  return rep_ ? rep_->msg : none;
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string s = code_name(rep_->code);
  s += " error";
  if (rep_->pos >= 0) {
    s += " at ";
    s += std::to_string(rep_->pos);
  }
  s += ": ";
  s += rep_->msg;
  return s;
}

}  // namespace kitfox
