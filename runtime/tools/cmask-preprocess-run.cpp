//===- cmask-preprocess-run.cpp - Run an artifact's preprocess on a batch -===//
//
//   cmask-preprocess-run ARTIFACT_DIR METADATA.json [--repeat N] [--digest]
//
// Uploads every batch of the metadata file (docs/metadata-json.md, not
// validated), runs the preprocess on the GPU in checked mode and prints, per
// batch, the interval table, the error flags and the tile descriptor of
// every tile shape, and the same for the column direction when the
// artifact has one, in the format of `cmask-translate
// --cmask-to-descriptor-json` (with --digest: only the digest and the
// flags, as `--descriptor-digest`), so that the tests compare the GPU with
// the CPU twin. --repeat N reruns each batch N times and checks the results
// are bitwise identical. Equal cu_seqlens for q and k go in one buffer
// (as self-attention passes them) unless --separate-cu-seqlens.
//
//===----------------------------------------------------------------------===//

#include "BatchUpload.h"

#include "cmask_runtime/DescriptorLayout.h"
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
  std::vector<int32_t> counts, qTileSeq, state, offsets, entries, order,
      windows, partials;
  Status download(const TileBuffers &t) {
    for (auto [buffer, host] :
         {std::pair<const DeviceBuffer *, std::vector<int32_t> *>{&t.counts,
                                                                  &counts},
          {&t.qTileSeq, &qTileSeq},
          {&t.tileState, &state},
          {&t.tileOffsets, &offsets},
          {&t.tileEntries, &entries},
          {&t.tileOrder, &order},
          {&t.tileWindows, &windows},
          {&t.partialCounts, &partials}})
      if (Status s = buffer->download(*host); !s)
        return s;
    return Status::success();
  }
};

/// Host copies of one direction of a descriptor.
struct DirectionCopy {
  std::vector<int32_t> table;
  std::vector<TileCopy> tiles;
  Status download(const DirectionBuffers &d) {
    if (Status s = d.intervals.download(table); !s)
      return s;
    tiles.resize(d.tiles.size());
    for (size_t t = 0; t < tiles.size(); ++t)
      if (Status s = tiles[t].download(d.tiles[t]); !s)
        return s;
    return Status::success();
  }
  void digest(DescriptorDigest &h, const DirectionBuffers &d, int64_t totalRows,
              int64_t numSlots) const {
    h.intervals(table.data(), static_cast<size_t>(totalRows) * numSlots * 2);
    for (size_t t = 0; t < tiles.size(); ++t)
      h.tiles(tiles[t].counts[0], d.tiles[t].nktWords, tiles[t].qTileSeq.data(),
              tiles[t].state.data(), tiles[t].offsets.data(),
              tiles[t].entries.data(), tiles[t].entries.size(),
              tiles[t].order.data());
  }
};

/// One direction as JSON (the CPU twin's format): `"sequences":[...],` then
/// `"tiles":{...}`, with `rows`/`cols` the cu_seqlens of its rows and
/// columns, and `between` printed between the two.
void printDirection(std::ostream &b, const Artifact::Direction &dir,
                    const DirectionBuffers &d, const DirectionCopy &c,
                    int32_t numSeqs, const std::vector<int32_t> &rows,
                    const std::vector<int32_t> &cols,
                    const std::string &between) {
  int64_t K = dir.numSlots;
  b << "\"sequences\":[";
  int64_t row = 0;
  for (int32_t s = 0; s < numSeqs; ++s) {
    b << (s ? "," : "") << "{\"rows\":[";
    int64_t q = rows[s + 1] - rows[s];
    for (int64_t i = 0; i < q; ++i, ++row) {
      b << (i ? "," : "") << "{\"slots\":[";
      for (int64_t k = 0; k < K; ++k)
        b << (k ? "," : "") << "[" << c.table[(row * K + k) * 2] << ","
          << c.table[(row * K + k) * 2 + 1] << "]";
      b << "]}";
    }
    b << "]}";
  }
  b << "]," << between << "\"tiles\":{";
  for (size_t t = 0; t < c.tiles.size(); ++t) {
    const Artifact::Shape &shape = dir.shapes[t];
    const TileCopy &tc = c.tiles[t];
    int64_t nqt = tc.counts[0];
    b << (t ? "," : "") << "\"" << shape.name << "\":{\"num_q_tiles\":" << nqt
      << ",\"q_tile_seq\":[";
    for (int64_t g = 0; g < nqt; ++g)
      b << (g ? "," : "") << tc.qTileSeq[g];
    b << "],\"states\":[";
    for (int64_t g = 0; g < nqt; ++g) {
      int32_t seq = tc.qTileSeq[g];
      int64_t nkt = (cols[seq + 1] - cols[seq] + shape.k - 1) / shape.k;
      b << (g ? "," : "") << "\"";
      for (int64_t kt = 0; kt < nkt; ++kt)
        b << cmask::abi::tileState(&tc.state[g * d.tiles[t].nktWords], kt);
      b << "\"";
    }
    b << "],\"offsets\":[";
    for (int64_t g = 0; g <= nqt; ++g)
      b << (g ? "," : "") << tc.offsets[g];
    b << "],\"entries\":[";
    for (int64_t e = 0; e < (nqt ? tc.offsets[nqt] : 0); ++e) {
      cmask::abi::TileEntry w =
          cmask::abi::decodeTileEntry(static_cast<uint32_t>(tc.entries[e]));
      b << (e ? "," : "") << "[" << w.tile << "," << w.state << ","
        << w.firstSlot << "," << w.slotCount << "]";
    }
    b << "],\"windows\":[";
    for (int64_t e = 0; e < (nqt ? tc.offsets[nqt] : 0); ++e) {
      b << (e ? "," : "") << "[";
      for (int64_t w = 0; w < cmask::abi::kWindowGroups; ++w) {
        cmask::abi::TileWindow win = cmask::abi::decodeTileWindow(
            static_cast<uint32_t>(tc.windows[e]), w);
        b << (w ? "," : "") << win.lo << "," << win.hi;
      }
      b << "]";
    }
    b << "],\"partials\":[";
    for (int64_t g = 0; g < nqt; ++g)
      b << (g ? "," : "") << tc.partials[g];
    b << "],\"order\":[";
    for (int64_t g = 0; g < nqt; ++g)
      b << (g ? "," : "") << tc.order[g];
    b << "]}";
  }
  b << "}";
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 3)
    return fail("usage: cmask-preprocess-run ARTIFACT_DIR METADATA.json "
                "[--repeat N] [--digest] [--separate-cu-seqlens]");
  int repeat = 1;
  bool digest = false, separate = false;
  for (int k = 3; k < argc; ++k) {
    std::string arg = argv[k];
    if (arg == "--repeat" && k + 1 < argc)
      repeat = std::max(1, std::atoi(argv[++k]));
    else if (arg == "--digest")
      digest = true;
    else if (arg == "--separate-cu-seqlens")
      separate = true;
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
    batch.shareCuSeqlens = !separate;
    if (Status s = batch.load(batches[n], *artifact); !s)
      return fail(where + s.message);
    Descriptor d;
    bool columns = artifact->getColumns() != nullptr;
    CHECK(artifact->createDescriptor(batch.bounds(columns), d));
    std::string first;
    for (int r = 0; r < repeat; ++r) {
      CHECK(artifact->preprocess(
          d, batch.numSeqs, batch.totalQ(), batch.totalK(), batch.cuQDevice,
          batch.cuKDevice, batch.args, nullptr, /*checked=*/true));
      if (cuCtxSynchronize() != CUDA_SUCCESS)
        return fail(where + "the preprocess faulted");
      int32_t flags = 0;
      CHECK(artifact->readErrorFlags(d, nullptr, flags));
      DirectionCopy rows, cols;
      CHECK(rows.download(d.rows));
      if (columns)
        CHECK(cols.download(d.columns));
      std::ostringstream b;
      if (digest) {
        DescriptorDigest h;
        rows.digest(h, d.rows, batch.totalQ(), artifact->getRows().numSlots);
        if (columns)
          cols.digest(h, d.columns, batch.totalK(),
                      artifact->getColumns()->numSlots);
        b << "{\"digest\":\"" << h.hex() << "\",\"error\":" << flags << "}";
      } else {
        b << "{";
        printDirection(b, artifact->getRows(), d.rows, rows, batch.numSeqs,
                       batch.cuQ, batch.cuK,
                       "\"error\":" + std::to_string(flags) + ",");
        b << ",\"columns\":{\"mode\":\"" << artifact->getColumnMode() << "\"";
        if (columns) {
          b << ",\"num_slots\":" << artifact->getColumns()->numSlots << ",";
          printDirection(b, *artifact->getColumns(), d.columns, cols,
                         batch.numSeqs, batch.cuK, batch.cuQ, "");
        }
        b << "}}";
      }
      if (r == 0)
        first = b.str();
      else if (b.str() != first)
        return fail(where + "rerun " + std::to_string(r) +
                    " differs from the first run");
    }
    std::cout << (n ? "," : "") << first;
  }
  std::cout << "]\n";
  return 0;
}
