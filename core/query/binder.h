// The bind stage: a parsed statement checked against the catalog once, so
// that running it again (a prepared statement, or the same text from the
// statement cache) does not look its names up again. See prepared.h.
#pragma once
#include <string>
#include <vector>

#include "../schema.h"
#include "../status.h"
#include "ast.h"

namespace kitfox {

class Engine;

// Checks that the collections a statement reads or writes exist and that
// every field path it names (where, select, order, group, set, lookup) is a
// field of its collection (json keys only under json fields). Definitions
// (create, alter, drop, indexes) are checked when they run. Call under the
// engine's lock; the answer holds until the catalog changes.
Status bind(const Engine& eng, const ParsedStatement& st);
// The keys of the documents a put or insert writes in its text: each `id`
// or a field of its collection. Asked when a statement is prepared to run
// later (bind_now: prepare, and a write queued in a transaction), so that
// an unknown field is reported at once; a statement run at once finds it as
// it types its documents (after any error of a document before it).
Status check_document_keys(const Engine& eng, const ParsedStatement& st);

Status no_collection(const std::string& name, int64_t pos);
Status not_found_field(const std::string& name, const CollectionDef& def, int64_t pos);
Status check_path(const CollectionDef& def, const std::vector<std::string>& path, int64_t pos);
Status check_expr(const CollectionDef& def, const Expr& e);

}  // namespace kitfox
