// The file layer of the WebAssembly build: every call goes to a JS host
// object (js/hosts/*.js), chosen by the JS wrapper when a database opens:
// Node's fs on a real file, memory, or (later) an OPFS sync access handle.
// The host registers itself in the module's host table; `host_id` names it.
#pragma once
#include <memory>

#include "file.h"

namespace kitfox {

// `atomic_replace` says whether the host's replace() is an atomic rename
// (Node, memory) or a copy (OPFS: the engine's recovery finishes a copy).
std::unique_ptr<FileSystem> make_host_file_system(int host_id, bool atomic_replace, uint64_t read_chunk);

}  // namespace kitfox
