//===- cmask-preprocess-run.cpp - Run an artifact's preprocess on a batch -===//
//
//   cmask-preprocess-run ARTIFACT_DIR METADATA.json [--repeat N] [--digest]
//
// Uploads every batch of the metadata file (docs/metadata-json.md, not
// validated), runs the preprocess on the GPU in checked mode and prints, per
// batch, the interval table, the error flags and the tile descriptor of
// every tile shape in the format of `cmask-translate
// --cmask-to-descriptor-json` (with --digest: only the digest and the
// flags, as `--descriptor-digest`), so that the tests compare the GPU with
// the CPU twin. --repeat N reruns each batch N times and checks the results
// are bitwise identical.
//
//===----------------------------------------------------------------------===//

#include "BatchUpload.h"

#include "cmask_runtime/Digest.h"

#include <iostream>

using namespace cmask::rt;

static constexpr const char *kTool = "cmask-preprocess-run";
#define CHECK CMASK_TOOL_CHECK
#define CHECK_CU CMASK_TOOL_CHECK_CU

static int fail(const std::string &message) { return toolFail(kTool, message); }

namespace {
/// Host copies of one tile shape's descriptor buffers.
struct TileCopy {
  std::vector<int32_t> counts, qTileSeq, state, offsets, entries, order;
  Status download(const TileBuffers &t) {
    for (auto [buffer, host] :
         {std::pair<const DeviceBuffer *, std::vector<int32_t> *>{&t.counts, &counts},
          {&t.qTileSeq, &qTileSeq},
          {&t.tileState, &state},
          {&t.tileOffsets, &offsets},
          {&t.tileEntries, &entries},
          {&t.tileOrder, &order}})
      if (Status s = buffer->download(*host); !s)
        return s;
    return Status::success();
  }
};

/// The batch's descriptor as JSON (the CPU twin's format).
void printDescriptor(std::ostream &b, const Artifact &artifact,
                     const DeviceBatch &batch, const std::vector<int32_t> &table,
                     int32_t flags, const std::vector<TileCopy> &tiles,
                     const Descriptor &d) {
  int64_t K = artifact.getNumSlots();
  b << "{\"sequences\":[";
  int64_t row = 0;
  for (int32_t s = 0; s < batch.numSeqs; ++s) {
    b << (s ? "," : "") << "{\"rows\":[";
    int64_t q = batch.cuQ[s + 1] - batch.cuQ[s];
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
  for (size_t t = 0; t < tiles.size(); ++t) {
    const Artifact::Shape &shape = artifact.getShapes()[t];
    const TileCopy &c = tiles[t];
    int64_t nqt = c.counts[0];
    b << (t ? "," : "") << "\"" << shape.name << "\":{\"num_q_tiles\":" << nqt
      << ",\"q_tile_seq\":[";
    for (int64_t g = 0; g < nqt; ++g)
      b << (g ? "," : "") << c.qTileSeq[g];
    b << "],\"states\":[";
    for (int64_t g = 0; g < nqt; ++g) {
      int32_t seq = c.qTileSeq[g];
      int64_t nkt = (batch.cuK[seq + 1] - batch.cuK[seq] + shape.k - 1) / shape.k;
      b << (g ? "," : "") << "\"";
      for (int64_t kt = 0; kt < nkt; ++kt) {
        auto word = static_cast<uint32_t>(c.state[g * d.tiles[t].nktWords + kt / 16]);
        b << ((word >> (2 * (kt % 16))) & 3);
      }
      b << "\"";
    }
    b << "],\"offsets\":[";
    for (int64_t g = 0; g <= nqt; ++g)
      b << (g ? "," : "") << c.offsets[g];
    b << "],\"entries\":[";
    for (int64_t e = 0; e < (nqt ? c.offsets[nqt] : 0); ++e) {
      int32_t w = c.entries[e];
      b << (e ? "," : "") << "[" << (w & 0xffff) << "," << ((w >> 16) & 3) << ","
        << ((w >> 18) & 0x7f) << "," << ((w >> 25) & 0x7f) << "]";
    }
    b << "],\"order\":[";
    for (int64_t g = 0; g < nqt; ++g)
      b << (g ? "," : "") << c.order[g];
    b << "]}";
  }
  b << "}}";
}
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
  CHECK(usePrimaryContext(0));
  std::unique_ptr<Artifact> artifact;
  CHECK(Artifact::load(argv[1], 0, artifact));
  std::vector<json::Value> batches;
  CHECK(readBatches(argv[2], batches));

  std::cout << "[";
  for (size_t n = 0; n < batches.size(); ++n) {
    std::string where = "batch " + std::to_string(n) + ": ";
    DeviceBatch batch;
    if (Status s = batch.load(batches[n], *artifact); !s)
      return fail(where + s.message);
    Descriptor d;
    CHECK(artifact->createDescriptor({batch.numSeqs, batch.totalQ(), batch.maxK}, d));
    std::string first;
    for (int r = 0; r < repeat; ++r) {
      CHECK(artifact->preprocess(d, batch.numSeqs, batch.totalQ(), batch.cuQDevice,
                                 batch.cuKDevice, batch.args, nullptr,
                                 /*checked=*/true));
      if (cuCtxSynchronize() != CUDA_SUCCESS)
        return fail(where + "the preprocess faulted");
      int32_t flags = 0;
      CHECK(artifact->readErrorFlags(d, nullptr, flags));
      std::vector<int32_t> table;
      CHECK(d.intervals.download(table));
      std::vector<TileCopy> tiles(d.tiles.size());
      for (size_t t = 0; t < tiles.size(); ++t)
        CHECK(tiles[t].download(d.tiles[t]));
      std::ostringstream b;
      if (digest) {
        DescriptorDigest h;
        h.intervals(table.data(),
                    static_cast<size_t>(batch.totalQ()) * artifact->getNumSlots() * 2);
        for (size_t t = 0; t < tiles.size(); ++t)
          h.tiles(tiles[t].counts[0], d.tiles[t].nktWords, tiles[t].qTileSeq.data(),
                  tiles[t].state.data(), tiles[t].offsets.data(),
                  tiles[t].entries.data(), tiles[t].entries.size(),
                  tiles[t].order.data());
        b << "{\"digest\":\"" << h.hex() << "\",\"error\":" << flags << "}";
      } else {
        printDescriptor(b, *artifact, batch, table, flags, tiles, d);
      }
      if (r == 0)
        first = b.str();
      else if (b.str() != first)
        return fail(where + "rerun " + std::to_string(r) + " differs from the first run");
    }
    std::cout << (n ? "," : "") << first;
  }
  std::cout << "]\n";
  return 0;
}
