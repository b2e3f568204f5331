//===- cmask-preprocess-run.cpp - Run an artifact's preprocess on a batch -===//
//
//   cmask-preprocess-run ARTIFACT_DIR METADATA.json [--repeat N]
//
// Uploads every batch of the metadata file (docs/metadata-json.md), runs the
// preprocess on the GPU and prints, per batch, the interval table and the
// tile descriptor of every tile shape in the format of `cmask-translate
// --cmask-to-descriptor-json`, so that the tests compare the GPU with the
// CPU twin (including the check phase's error flags; it runs in checked
// mode). --repeat N reruns each batch N times and checks the results are
// bitwise identical.
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/Json.h"
#include "cmask_runtime/Runtime.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace cmask::rt;

/// FNV-1a over int32 values (as cmask-translate --descriptor-digest).
static uint64_t fnv1a(uint64_t h, const int32_t *p, size_t n) {
  for (size_t k = 0; k < n; ++k)
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (static_cast<uint32_t>(p[k]) >> (8 * byte)) & 0xff;
      h *= 1099511628211ull;
    }
  return h;
}

static int fail(const std::string &message) {
  std::cerr << "cmask-preprocess-run: " << message << "\n";
  return 1;
}

#define CHECK(expr)                                                            \
  do {                                                                         \
    Status st_ = (expr);                                                       \
    if (!st_)                                                                  \
      return fail(st_.message);                                                \
  } while (0)

namespace {
struct Upload {
  std::vector<DeviceBuffer> buffers;
  Status put(const std::vector<int32_t> &host, CUdeviceptr &out) {
    buffers.emplace_back();
    DeviceBuffer &b = buffers.back();
    if (Status s = b.allocate(host.size()); !s)
      return s;
    if (!host.empty()) {
      CUresult r = cuMemcpyHtoD(b.get(), host.data(), host.size() * 4);
      if (r != CUDA_SUCCESS)
        return Status::error("cuMemcpyHtoD failed");
    }
    out = b.get();
    return Status::success();
  }
};
} // namespace

int main(int argc, char **argv) {
  if (argc < 3)
    return fail("usage: cmask-preprocess-run ARTIFACT_DIR METADATA.json "
                "[--repeat N] [--digest]");
  int repeat = 1;
  bool digest = false;
  for (int k = 3; k < argc; ++k) {
    std::string arg = argv[k];
    if (arg == "--repeat" && k + 1 < argc)
      repeat = std::max(1, std::atoi(argv[++k]));
    else if (arg == "--digest")
      digest = true;
    else
      return fail("unknown option " + arg);
  }
  std::unique_ptr<Artifact> artifact;
  CHECK(Artifact::load(argv[1], 0, artifact));

  std::ifstream in(argv[2]);
  if (!in)
    return fail(std::string("cannot read ") + argv[2]);
  std::stringstream ss;
  ss << in.rdbuf();
  json::Value doc;
  std::string error;
  if (!json::parse(ss.str(), doc, error))
    return fail(std::string(argv[2]) + ": " + error);
  std::vector<json::Value> batches =
      doc.isArray() ? doc.array : std::vector<json::Value>{doc};

  std::ostringstream out;
  out << "[";
  for (size_t n = 0; n < batches.size(); ++n) {
    const json::Value &batch = batches[n];
    const json::Value *seqs = batch.get("sequences");
    const json::Value *meta = batch.get("metadata");
    if (!seqs || !seqs->isArray())
      return fail("batch " + std::to_string(n) + ": no sequences");
    std::vector<int32_t> cuQ = {0}, cuK = {0};
    int64_t maxK = 0;
    for (const json::Value &s : seqs->array) {
      int64_t q = s.get("q_len")->integer, k = s.get("k_len")->integer;
      cuQ.push_back(static_cast<int32_t>(cuQ.back() + q));
      cuK.push_back(static_cast<int32_t>(cuK.back() + k));
      maxK = std::max(maxK, k);
    }
    int32_t numSeqs = static_cast<int32_t>(seqs->array.size());
    Upload up;
    CUdeviceptr dq = 0, dk = 0;
    CHECK(up.put(cuQ, dq));
    CHECK(up.put(cuK, dk));
    std::vector<MetadataArg> args;
    for (const auto &[name, role] : artifact->getMetadata()) {
      const json::Value *v = meta ? meta->get(name) : nullptr;
      if (!v)
        return fail("batch " + std::to_string(n) + ": missing metadata " + name);
      MetadataArg a;
      if (role == MetadataRole::Scalar) {
        a.scalar = static_cast<int32_t>(v->integer);
      } else if (role == MetadataRole::PerSequence) {
        std::vector<int32_t> values;
        for (const json::Value &x : v->array)
          values.push_back(static_cast<int32_t>(x.integer));
        a.numValues = values.size();
        CHECK(up.put(values, a.values));
      } else {
        std::vector<int32_t> values, starts = {0};
        for (const json::Value &list : v->array) {
          for (const json::Value &x : list.array)
            values.push_back(static_cast<int32_t>(x.integer));
          starts.push_back(static_cast<int32_t>(values.size()));
        }
        a.numValues = values.size();
        CHECK(up.put(values, a.values));
        CHECK(up.put(starts, a.starts));
      }
      args.push_back(a);
    }
    Descriptor d;
    CHECK(artifact->createDescriptor({numSeqs, cuQ.back(), maxK}, d));

    std::string first;
    for (int r = 0; r < repeat; ++r) {
      CHECK(artifact->preprocess(d, numSeqs, cuQ.back(), dq, dk, args, nullptr,
                                 /*checked=*/true));
      if (cuCtxSynchronize() != CUDA_SUCCESS)
        return fail("batch " + std::to_string(n) + ": the preprocess faulted");
      int32_t flags = 0;
      CHECK(artifact->readErrorFlags(d, nullptr, flags));
      std::ostringstream b;
      std::vector<int32_t> table;
      CHECK(d.intervals.download(table));
      int64_t K = artifact->getNumSlots();
      if (digest) {
        // The same ranges, order and hash as cmask-translate
        // --descriptor-digest.
        uint64_t h = fnv1a(14695981039346656037ull, table.data(),
                           static_cast<size_t>(cuQ.back()) * K * 2);
        for (size_t t = 0; t < artifact->getShapes().size(); ++t) {
          TileBuffers &tb = d.tiles[t];
          std::vector<int32_t> counts, qTileSeq, state, offsets, entries, order;
          CHECK(tb.counts.download(counts));
          CHECK(tb.qTileSeq.download(qTileSeq));
          CHECK(tb.tileState.download(state));
          CHECK(tb.tileOffsets.download(offsets));
          CHECK(tb.tileEntries.download(entries));
          CHECK(tb.tileOrder.download(order));
          int32_t nqt = counts[0];
          h = fnv1a(h, &nqt, 1);
          h = fnv1a(h, qTileSeq.data(), nqt);
          h = fnv1a(h, state.data(), static_cast<size_t>(nqt) * tb.nktWords);
          h = fnv1a(h, offsets.data(), nqt + 1);
          h = fnv1a(h, entries.data(), nqt ? offsets[nqt] : 0);
          h = fnv1a(h, order.data(), nqt);
        }
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
        b << "{\"digest\":\"" << hex << "\",\"error\":" << flags << "}";
        if (r == 0)
          first = b.str();
        else if (b.str() != first)
          return fail("batch " + std::to_string(n) + ": rerun differs");
        continue;
      }
      b << "{\"sequences\":[";
      int64_t row = 0;
      for (size_t s = 0; s < seqs->array.size(); ++s) {
        b << (s ? "," : "") << "{\"rows\":[";
        int64_t q = seqs->array[s].get("q_len")->integer;
        for (int64_t i = 0; i < q; ++i, ++row) {
          b << (i ? "," : "") << "{\"slots\":[";
          for (int64_t k = 0; k < K; ++k)
            b << (k ? "," : "") << "[" << table[(row * K + k) * 2] << ","
              << table[(row * K + k) * 2 + 1] << "]";
          b << "]}";
        }
        b << "]}";
      }
      b << "],\"error\":" << flags << ",\"tiles\":{";
      for (size_t t = 0; t < artifact->getShapes().size(); ++t) {
        const auto &shape = artifact->getShapes()[t];
        TileBuffers &tb = d.tiles[t];
        std::vector<int32_t> counts, qTileSeq, state, offsets, entries, order;
        CHECK(tb.counts.download(counts));
        CHECK(tb.qTileSeq.download(qTileSeq));
        CHECK(tb.tileState.download(state));
        CHECK(tb.tileOffsets.download(offsets));
        CHECK(tb.tileEntries.download(entries));
        CHECK(tb.tileOrder.download(order));
        int64_t nqt = counts[0];
        b << (t ? "," : "") << "\"" << shape.name << "\":{\"num_q_tiles\":" << nqt
          << ",\"q_tile_seq\":[";
        for (int64_t g = 0; g < nqt; ++g)
          b << (g ? "," : "") << qTileSeq[g];
        b << "],\"states\":[";
        for (int64_t g = 0; g < nqt; ++g) {
          int64_t kLen = cuK[qTileSeq[g] + 1] - cuK[qTileSeq[g]];
          int64_t nkt = (kLen + shape.k - 1) / shape.k;
          b << (g ? "," : "") << "\"";
          for (int64_t kt = 0; kt < nkt; ++kt) {
            uint32_t word = static_cast<uint32_t>(state[g * tb.nktWords + kt / 16]);
            b << ((word >> (2 * (kt % 16))) & 3);
          }
          b << "\"";
        }
        b << "],\"offsets\":[";
        for (int64_t g = 0; g <= nqt; ++g)
          b << (g ? "," : "") << offsets[g];
        b << "],\"entries\":[";
        for (int64_t e = 0; e < (nqt ? offsets[nqt] : 0); ++e) {
          int32_t w = entries[e];
          b << (e ? "," : "") << "[" << (w & 0xffff) << "," << ((w >> 16) & 3)
            << "," << ((w >> 18) & 0x7f) << "," << ((w >> 25) & 0x7f) << "]";
        }
        b << "],\"order\":[";
        for (int64_t g = 0; g < nqt; ++g)
          b << (g ? "," : "") << order[g];
        b << "]}";
      }
      b << "}}";
      if (r == 0)
        first = b.str();
      else if (b.str() != first)
        return fail("batch " + std::to_string(n) + ": rerun " + std::to_string(r) +
                    " differs from the first run");
    }
    out << (n ? "," : "") << first;
  }
  out << "]\n";
  std::cout << out.str();
  return 0;
}
