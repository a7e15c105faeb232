// Writes the seed inputs of the fuzzers into DIR/{open,codec,json,import,http,put,where}/: real
// database files (an image alone, an image and a tail, after a compaction),
// encoded values, JSON texts and import input. The statement seeds are the statements of
// tests/queries/*.test (scripts/fuzz.sh extracts them).
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/stat.h>

#include "codec.h"
#include "storage/format.h"
#include "storage/record.h"
#include "fuzz_common.h"

using namespace kitfox;

static void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), (std::streamsize)bytes.size());
  if (!out) fuzz::fail("writing " + path);
}

static std::string file_of(FileSystem& fs, const std::string& name) {
  auto f = fs.open(name, {});
  if (!f.is_ok()) fuzz::fail("no file " + name);
  std::string bytes(*(*f)->size(), '\0');
  size_t got = 0;
  if (!(*f)->read(0, bytes.data(), bytes.size(), &got).is_ok()) fuzz::fail("reading " + name);
  return bytes;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: kitfox_fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  for (const char* sub : {"", "/open", "/codec", "/json", "/import", "/http", "/put", "/where"}) mkdir((dir + sub).c_str(), 0755);

  auto fs = make_memory_file_system();
  {
    auto db = fuzz::sample_db(*fs);
    db->checkpoint();
    const std::string image = file_of(*fs, "f.kfdb");
    write(dir + "/open/image.kfdb", image);
    // The same image with every record in a long frame (format.h): version 3
    // (its extents 8 bytes off the 64-byte alignment a checkpoint gives them).
    std::string long_frames = image.substr(0, format::kHeaderSize);
    RecordView r;
    for (uint64_t off = format::kHeaderSize; read_record(image, off, &r) == ScanResult::Ok; off = r.end)
      append_record(long_frames, r.kind, r.body, 0);
    set_image_version(long_frames);
    write(dir + "/open/long_frames.kfdb", long_frames);
    {
      auto lfs = make_memory_file_system();
      auto f = lfs->open("f.kfdb", OpenFlags{true, true});
      if (!f.is_ok() || !(*f)->write(0, long_frames.data(), long_frames.size()).is_ok()) fuzz::fail("memory file");
      f->reset();
      auto ldb = Database::open(*lfs, "f.kfdb", fuzz::quiet_options());
      if (!ldb.is_ok()) fuzz::fail("the long-frame seed does not open: " + ldb.status().to_string());
      auto n = (*ldb)->query("get t count");
      if (!n.is_ok() || to_json(n->rows[0]) != to_json(db->query("get t count")->rows[0]))
        fuzz::fail("the long-frame seed does not read as the image it was made of");
    }
    db->query("put t {name: \"tail\", n: 4, e: [0, 0, 0, 1]}");
    db->query("set t {meta.x: 5} where n = 1");
    db->query("del u where k = 2");
    write(dir + "/open/image_and_tail.kfdb", file_of(*fs, "f.kfdb"));
    db->compact();
    write(dir + "/open/compacted.kfdb", file_of(*fs, "f.kfdb"));
    db->close();
  }
  const char* json[] = {
      "{\"name\": \"x\", \"n\": 1, \"meta\": {\"a\": [1, 2.5, null, true]}, \"e\": [0.1, 0.2, 0.3, 0.4]}",
      "[1, -2, 3e10, 1.5e-300, \"\\u00e9\\ud834\\udd1e\", {}]",
      "{\"deep\": [[[[{\"k\": \"v\"}]]]], \"neg\": -9223372036854775808}",
      "\"text\"",
  };
  int i = 0;
  for (const char* j : json) {
    write(dir + "/json/" + std::to_string(i++) + ".json", j);
    auto v = parse_json(j);
    if (!v.is_ok()) fuzz::fail(std::string("seed JSON: ") + j);
    std::string enc;
    encode_value(enc, *v, false);
    write(dir + "/codec/" + std::to_string(i) + ".bin", enc);
  }
  // Import input: a chunk-size byte, a byte of region size, batch size and
  // writer thread (tests/fuzz/fuzz_import.cpp), then NDJSON or a JSON array.
  write(dir + "/import/ndjson", std::string("\x07\x44") + "{\"name\": \"a\", \"n\": 1}\n\n{\"meta\": {\"k\": [1, 2]}, \"e\": [1, 2, 3, 4]}\n{\"n\": \"bad\"}\n");
  write(dir + "/import/array", std::string("\x20\x13") + "\xEF\xBB\xBF [ {\"name\": \"x,]\\\"\"}, {\"n\": 2} ,{\"tags\": [\"a\"]} ]  ");
  write(dir + "/import/vectors", std::string("\x05\x56") +
                                     "{\"e\": [1, -2, 3.5, 4e1], \"h\": [0.25, -0]}\n{\"e\":[0,0,0,1],\"n\":-0}\r\n"
                                     "{\"e\": [ 1e-7 , 123456789012 , 0.1, 9007199254740993 ]}\n"
                                     "{\"e\": [1, 2, 3]}\n{\"e\": [1, 2, 3, \"x\"]}\n{\"h\": [70000, 1]}\n");
  write(dir + "/import/vector_array", std::string("\x03\x62") +
                                          "[{\"e\": [1,2,3,4], \"name\": \"\\u00e9\\ud83d\\ude00\"},\n {\"e\": [1,2,3,01]},"
                                          " {\"e\": [1,2,3,4]} {\"n\": 1}]");
  write(dir + "/import/numbers", std::string("\x40\x30") +
                                     "{\"n\": 9223372036854775807}\n{\"meta\": [9223372036854775808, 1e400, -0.0, 2.5e-400]}\n"
                                     "{\"n\": 1, \"n\": 2}\n{\"name\": \"\xff\"}\n");
  // The server's endpoints (tests/fuzz/fuzz_http.cpp): the first byte picks
  // the endpoint (its low 3 bits), the media type, the method and the token.
  write(dir + "/http/query", std::string("\x00") + "{\"query\": \"get t where n >= $1\", \"params\": [1]}");
  write(dir + "/http/query_ndjson", std::string("\x10") + "{\"query\": \"get t select name\"}");
  write(dir + "/http/batch", std::string("\x01") +
                                 "[{\"query\": \"put t {name: $1, code: $2}\", \"params\": [\"z\", \"c9\"]}, {\"query\": \"get t count\"}]");
  write(dir + "/http/docs", std::string("\x02") +
                                "[{\"name\": \"d\", \"n\": 7, \"e\": [0.25, 1e-3, 12345678.9, -0.000123456789012345]}, {\"code\": \"c1\"}]");
  write(dir + "/http/docs_ndjson", std::string("\x0a") + "{\"name\": \"d\", \"e\": [1, 2, 3, 4]}\n\n{\"tags\": [\"x\"]}\n");
  write(dir + "/http/prepare", std::string("\x03") + "{\"query\": \"get t where nope = 1\"}");
  write(dir + "/http/docs_u", std::string("\x04") + "[{\"k\": 9, \"ref\": 2}]");
  write(dir + "/http/token", std::string("\xa0") + "{\"query\": \"collections\"}");
  // A put's parameter lists (tests/fuzz/fuzz_put.cpp): [documents].
  const char* puts[] = {
      ("[[{\"b\": true, \"n\": 1, \"x\": 2, \"s\": \"t\", \"j\": {\"k\": [1]}, \"l\": [1, 2], \"v\": [1, 2], "
       "\"h\": [0.5, 3], \"u\": \"a\", \"e\": [0, 1], \"id\": 4}, {\"n\": null, \"s\": \"\u00e9\"}]]"),
      "[{\"u\": \"a\", \"x\": 1.5, \"at\": \"2024-01-02T03:04:05Z\", \"raw\": \"AAE=\"}]",
      "[[{\"u\": \"a\"}, {\"u\": \"a\"}], 5]",
      "[[{\"n\": \"x\"}, {\"e\": [1, 2, 3]}, {\"nope\": 1}, 7]]",
  };
  i = 0;
  for (const char* j : puts) {
    auto v = parse_json(j);
    if (!v.is_ok()) fuzz::fail(std::string("seed JSON: ") + j);
    std::string enc;
    encode_value(enc, *v, false);
    write(dir + "/put/" + std::to_string(i++) + ".bin", enc);
  }
  {
    std::string enc;  // a vector given as f32 bytes and one as f16, a timestamp
    Value doc = Value::object();
    doc.append("v", Value::vector({1, 2}));
    doc.append("h", Value::vector({1, 2}));
    doc.append("at", Value::timestamp(1700000000000));
    encode_value(enc, Value::list({Value::list({std::move(doc)})}), false);
    write(dir + "/put/typed.bin", enc);
  }
  // Where clauses (tests/fuzz/fuzz_where.cpp): a clause, a newline, documents.
  const char* wheres[] = {
      "n = 3 or s ~ $2\n[{n: 3}, {s: \"Kent\"}, {n: 4, x: 1}]",
      "not (x < 1 and j in $3) or at > \"2023-01-01\"\n[{x: 0.5, j: \"a\"}, {x: 2, j: [1]}, {at: 0}]",
      "j = 2 and b is null or l = [1] or n in [3, 9007199254740992.0]\n[{j: 2.0}, {l: [1]}, {n: 9007199254740992}]",
      "s < $1 or raw != $4 or v is not null or id >= 9\n[{s: \"x\"}, {v: [0, 0]}, {raw: \"AA==\"}]",
  };
  i = 0;
  for (const char* w : wheres) write(dir + "/where/" + std::to_string(i++) + ".txt", w);
  std::string vec;
  encode_value(vec, Value::vector({1, 2, 3}), false);
  write(dir + "/codec/vector.bin", vec);
  std::string half;
  encode_value(half, Value::vector({1, 2, 3}), true);
  write(dir + "/codec/vector_f16.bin", half);
  std::string ts;
  encode_value(ts, Value::timestamp(1700000000000), false);
  write(dir + "/codec/timestamp.bin", ts);
  return 0;
}
