//===- KernelABITest.cpp - The kernel ABI and descriptor layout -----------===//
//
// The argument lists and their naming, the mismatch messages the runtime
// refuses an artifact with, the tile-entry codec, the buffer sizes and the
// phases' item counts (runtime/include/cmask_runtime).
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/KernelABI.h"
#include "cmask_runtime/DescriptorLayout.h"
#include "cmask_runtime/Json.h"
#include "cmask_runtime/ManifestABI.h"
#include "cmask_runtime/Schedule.h"

#include <gtest/gtest.h>

// Inside cmask: at global scope `abi` also names the C++ runtime's
// __cxxabiv1 (cxxabi.h).
namespace cmask {
namespace {

TEST(KernelABITest, SignaturesIndexTheirLists) {
  using namespace abi;
  EXPECT_EQ(forward::kNumArgs, 26);
  EXPECT_STREQ(forward::kArgs[forward::Out].name, "out");
  EXPECT_EQ(forward::kArgs[forward::TmK].kind, ArgKind::TensorMap);
  EXPECT_EQ(forward::kArgs[forward::ScaleLog2].kind, ArgKind::F32);
  // The two main backward kernels share their head.
  for (int k = 0; k <= backward::Intervals; ++k) {
    EXPECT_STREQ(backward::kArgs[k].name, backward_rows::kArgs[k].name);
    EXPECT_EQ(backward::kArgs[k].kind, backward_rows::kArgs[k].kind);
  }
  EXPECT_EQ(backward::kNumArgs, 28);
  EXPECT_EQ(backward::kArgs[backward::DQUnits].kind, ArgKind::Pointer);
  EXPECT_EQ(backward_rows::kNumArgs, 26);
  EXPECT_EQ(backward_dq::kNumArgs, 11);
  // A dQ warp's staging is one accumulator unit (its word's count).
  EXPECT_TRUE(backward::firstStore(128));
  EXPECT_FALSE(backward::firstStore(64));
  EXPECT_TRUE(backward::firstStoreFor(128, 32, 32, 1024));
  EXPECT_TRUE(backward::firstStoreFor(128, 32, 32, 4096));
  // Measured slower: grouped heads, and query sequences past 4K tokens.
  EXPECT_FALSE(backward::firstStoreFor(128, 32, 8, 1024));
  EXPECT_FALSE(backward::firstStoreFor(128, 32, 32, 4097));
  EXPECT_FALSE(backward::firstStoreFor(128, 32, 32, 32768));
  EXPECT_FALSE(backward::firstStoreFor(64, 32, 32, 1024));
  EXPECT_EQ(tile_group::kNumArgs, 20);
}

TEST(KernelABITest, ParameterLayout) {
  using abi::ArgKind;
  EXPECT_EQ(abi::sizeOf(ArgKind::TensorMap), 128u);
  EXPECT_EQ(abi::alignOf(ArgKind::TensorMap), 64u);
  EXPECT_EQ(abi::sizeOf(ArgKind::Buffer), 40u);
  EXPECT_EQ(abi::sizeOf(ArgKind::I32), 4u);
  for (abi::ArgKind kind :
       {ArgKind::Pointer, ArgKind::TensorMap, ArgKind::I32, ArgKind::I64,
        ArgKind::F32, ArgKind::Index, ArgKind::Buffer})
    EXPECT_EQ(abi::parseArgKind(abi::stringify(kind)), kind);
  EXPECT_FALSE(abi::parseArgKind("u8"));
}

TEST(KernelABITest, StageKernelArguments) {
  using abi::MetadataRole;
  std::vector<std::pair<std::string, MetadataRole>> metadata = {
      {"context", MetadataRole::Scalar}, {"docs", MetadataRole::Offsets}};
  // A stage with the rows of both directions, then a stage with a tile
  // phase of the columns' shape 1.
  std::vector<abi::Stage> stages = {
      {{abi::Phase::Rows, 0, -1}, {abi::Phase::Rows, 1, -1}},
      {{abi::Phase::Tiles, 1, 1}}};
  std::vector<abi::NamedArg> args = abi::stageKernelArgs(stages, metadata);
  // 3 counts, 2 row groups of 3 + 3 metadata + 3, one tile group, sync.
  ASSERT_EQ(args.size(), 3u + 2 * 9 + abi::tile_group::kNumArgs + 1);
  EXPECT_EQ(args[0].name, "items.s0.rows.d0");
  EXPECT_EQ(args[2].name, "items.s1.tiles.d1.s1");
  EXPECT_EQ(args[2].kind, abi::ArgKind::Index);
  EXPECT_EQ(args[3].name, "d0.num_seqs");
  EXPECT_EQ(args[6].name, "d0.metadata.context");
  EXPECT_EQ(args[6].kind, abi::ArgKind::I32);
  EXPECT_EQ(args[8].name, "d0.metadata.docs.starts");
  EXPECT_EQ(args[11].name, "d0.error");
  EXPECT_EQ(args[12].name, "d1.num_seqs");
  EXPECT_EQ(args[21].name, "d1.s1.num_seqs");
  EXPECT_EQ(args[args.size() - 2].name, "d1.s1.error");
  EXPECT_EQ(args.back().name, "sync");
  EXPECT_EQ(args.back().kind, abi::ArgKind::Buffer);
}

TEST(KernelABITest, StageBlocks) {
  // One block at least per stage (the next stage waits on its count).
  EXPECT_EQ(abi::stageBlocks(0, 128), 1);
  EXPECT_EQ(abi::stageBlocks(1, 128), 1);
  EXPECT_EQ(abi::stageBlocks(128, 128), 1);
  EXPECT_EQ(abi::stageBlocks(129, 128), 2);
  EXPECT_EQ(abi::syncWords(7), 8);
}

TEST(KernelABITest, PrePassCoversItsRowsAndTheAccumulator) {
  using abi::backward_pre::kZeroFloat4sPerThread;
  using abi::backward_pre::threadsFor;
  // D / 8 threads per (row, head), or enough to zero the accumulator's
  // float4s (rows padded per sequence: always more float4s than the rows'
  // D / 4), whichever is more.
  EXPECT_EQ(threadsFor(1024, 32, 128, 0), 1024 * 32 * 16);
  int64_t float4s = (1024 + 16 + 64) * 32 * 128 / 4;
  EXPECT_EQ(threadsFor(1024, 32, 128, float4s),
            float4s / kZeroFloat4sPerThread);
  EXPECT_EQ(threadsFor(1, 1, 64, 3), 8);
  EXPECT_EQ(threadsFor(1, 1, 64, 2 * 8 * kZeroFloat4sPerThread + 1), 2 * 8 + 1);
}

TEST(KernelABITest, MismatchNamesTheFirstDifference) {
  std::vector<abi::NamedArg> runtime = abi::toList(abi::forward::kSignature);
  EXPECT_EQ(abi::describeMismatch("k", runtime, runtime), "");
  std::vector<abi::NamedArg> swapped = runtime;
  std::swap(swapped[3], swapped[4]);
  EXPECT_EQ(abi::describeMismatch("k", swapped, runtime),
            "kernel k: argument 3 is 'lse' (pointer) in the artifact and "
            "'out' (pointer) in this runtime");
  std::vector<abi::NamedArg> shorter(runtime.begin(), runtime.end() - 1);
  EXPECT_EQ(abi::describeMismatch("k", shorter, runtime),
            "kernel k: argument 25: this runtime passes 'scale_log2' (f32), "
            "which the artifact's kernel does not take");
  std::vector<abi::NamedArg> longer = runtime;
  longer.push_back({"window", abi::ArgKind::I32});
  EXPECT_EQ(abi::describeMismatch("k", longer, runtime),
            "kernel k: argument 26: the artifact's kernel takes 'window' "
            "(i32), which this runtime does not pass");
}

/// A manifest whose kernel_abi holds kernel "f" with `args`.
std::string manifest(const std::string &args, int version = abi::kVersion) {
  return "{\"kernel_abi\": {\"version\": " + std::to_string(version) +
         ", \"kernels\": {\"f\": " + args + "}}}";
}

TEST(ManifestABITest, ReadsAndChecks) {
  rt::json::Value m;
  std::string error;
  ASSERT_TRUE(rt::json::parse(
      manifest("[[\"a\", \"pointer\"], [\"n\", \"i32\"]]"), m, error));
  rt::ManifestABI abi;
  ASSERT_TRUE(abi.read(m, "manifest.json", error)) << error;
  EXPECT_EQ(
      abi.check("f", {{"a", abi::ArgKind::Pointer}, {"n", abi::ArgKind::I32}}),
      "");
  std::string why =
      abi.check("f", {{"a", abi::ArgKind::Pointer}, {"n", abi::ArgKind::I64}});
  EXPECT_NE(why.find("argument 1 is 'n' (i32) in the artifact and 'n' (i64) "
                     "in this runtime"),
            std::string::npos)
      << why;
  EXPECT_NE(abi.check("g", {}).find("kernel_abi lists no kernel g"),
            std::string::npos);
}

TEST(ManifestABITest, RefusesWhatItCannotRead) {
  rt::ManifestABI abi;
  std::string error;
  rt::json::Value m;
  ASSERT_TRUE(rt::json::parse("{}", m, error));
  EXPECT_FALSE(abi.read(m, "m", error));
  EXPECT_EQ(error, "m: kernel_abi: missing (rebuild the artifact with this "
                   "version's cmask-translate)");
  ASSERT_TRUE(rt::json::parse(manifest("[]", abi::kVersion + 1), m, error));
  EXPECT_FALSE(abi.read(m, "m", error));
  EXPECT_NE(error.find("this runtime reads version"), std::string::npos);
  ASSERT_TRUE(rt::json::parse(manifest("[[\"a\", \"u8\"]]"), m, error));
  EXPECT_FALSE(abi.read(m, "m", error));
  EXPECT_NE(error.find("argument 0 is not [name, kind] with a known kind"),
            std::string::npos);
}

TEST(DescriptorLayoutTest, TileEntryCodec) {
  abi::TileEntry e{65535, 2, 126, 127};
  uint32_t word = abi::encodeTileEntry(e);
  EXPECT_EQ(word, 65535u | 2u << 16 | 126u << 18 | 127u << 25);
  abi::TileEntry back = abi::decodeTileEntry(word);
  EXPECT_EQ(back.tile, 65535u);
  EXPECT_EQ(back.state, 2u);
  EXPECT_EQ(back.firstSlot, 126u);
  EXPECT_EQ(back.slotCount, 127u);
  static_assert(
      abi::decodeTileEntry(5 | 1 << 16 | 3 << 18 | 2 << 25).slotCount == 2,
      "decodes at compile time");
  EXPECT_EQ(abi::kMaxKeyTiles, 65536);
  EXPECT_EQ(abi::kMaxSlots, 127);
  int32_t states[2] = {int32_t(2u << 30 | 1u << 2), 1};
  EXPECT_EQ(abi::tileState(states, 1), 1u);
  EXPECT_EQ(abi::tileState(states, 15), 2u);
  EXPECT_EQ(abi::tileState(states, 16), 1u);
}

TEST(DescriptorLayoutTest, BufferSizesAndItems) {
  // 3 sequences, 1000 rows in all, at most 700 columns, tiles 128 x 64.
  auto t = abi::TileLayout::of(3, 1000, 700, 128, 64);
  EXPECT_EQ(t.maxQTiles, 8 + 3);
  EXPECT_EQ(t.keyTiles, 11);
  EXPECT_EQ(t.nktWords, 1);
  EXPECT_EQ(t.stride, 16);
  namespace g = abi::tile_group;
  EXPECT_EQ(t.elements(g::QTileBase, 3, 2, 128), 4);
  EXPECT_EQ(t.elements(g::TileEntries, 3, 2, 128), 11 * 16);
  EXPECT_EQ(t.elements(g::TileWindows, 3, 2, 128), 11 * 16);
  EXPECT_EQ(t.elements(g::TileWindowInfo, 3, 2, 128), 11 * 16);
  EXPECT_EQ(t.elements(g::PartialCounts, 3, 2, 128), 11);
  EXPECT_EQ(t.elements(g::Envelopes, 3, 2, 128), 11 * 2 * (8 + 8 * 8));
  EXPECT_EQ(t.elements(g::NumSeqs, 3, 2, 128), -1);
  abi::PhaseSizes sizes{3, 1000, 2, 128, t};
  EXPECT_EQ(abi::phaseItems(abi::Phase::Rows, sizes), 1000);
  EXPECT_EQ(abi::phaseItems(abi::Phase::Env, sizes), 11 * 2 * 8);
  EXPECT_EQ(abi::phaseItems(abi::Phase::Fill, sizes), 11 * 16);
  EXPECT_EQ(abi::phaseItems(abi::Phase::Scan, sizes), 12);
}

TEST(DescriptorLayoutTest, TileWindowWords) {
  // Group 0: columns [0, 80); group 1: [48, 128) (CLEAR's radius-16 band
  // in a 128 x 128 tile of one grid row against another).
  uint32_t w = abi::encodeTileWindow({0, 80}, {48, 128});
  EXPECT_EQ(w, 0u | 80u << 8 | 48u << 16 | 128u << 24);
  EXPECT_EQ(abi::decodeTileWindow(w, 0).lo, 0u);
  EXPECT_EQ(abi::decodeTileWindow(w, 0).hi, 80u);
  EXPECT_EQ(abi::decodeTileWindow(w, 1).lo, 48u);
  EXPECT_EQ(abi::decodeTileWindow(w, 1).hi, 128u);
  EXPECT_EQ(abi::windowShift(1), 16u);
  // A bound of the widest tile with windows fits its bits.
  EXPECT_LT(abi::kMaxWindowColumns, int64_t(1) << abi::kWindowBoundBits);
}

TEST(DescriptorLayoutTest, BatchQTilesCoverTheBatchNotTheBounds) {
  // A descriptor grown to 16384 rows (129 tiles of 128) holding one
  // sequence of 8704: 68 tiles, exactly.
  auto t = abi::TileLayout::of(1, 16384, 16384, 128, 128);
  EXPECT_EQ(abi::batchQTiles(t.maxQTiles, 8704, 1, 128), 68);
  // Three sequences of 129, 1 and 256 rows: 2 + 1 + 2 tiles, within the
  // bound (386 + 3 * 127) / 128 = 5.
  EXPECT_EQ(abi::batchQTiles(t.maxQTiles, 386, 3, 128), 5);
  // Never past the buffers, nothing for an empty batch.
  EXPECT_EQ(abi::batchQTiles(11, 1000, 30, 128), 11);
  EXPECT_EQ(abi::batchQTiles(t.maxQTiles, 0, 1, 128), 0);
  EXPECT_EQ(abi::batchQTiles(t.maxQTiles, 100, 0, 128), 0);
  // Against brute force: every split of up to 600 rows into 3 sequences.
  for (int64_t a = 0; a <= 300; a += 7)
    for (int64_t b = 0; b <= 300; b += 11) {
      int64_t c = 600 - a - b;
      if (c < 0)
        continue;
      int64_t tiles = (a + 63) / 64 + (b + 63) / 64 + (c + 63) / 64;
      int64_t bound = abi::TileLayout::of(3, 600, 600, 64, 64).maxQTiles;
      int64_t got = abi::batchQTiles(bound, 600, 3, 64);
      EXPECT_GE(got, tiles) << a << " " << b << " " << c;
      EXPECT_LE(got, tiles + 2) << a << " " << b << " " << c;
    }
}

TEST(ScheduleTest, PersistentForManyShortItems) {
  using rt::choosePersistent;
  constexpr int64_t sms = 132, heads = 32;
  // 8 x 4K and 16 x 2K (32 query tiles of 128 per 4K sequence).
  EXPECT_TRUE(choosePersistent(8 * 32 * heads, sms, 8 * 4096, 8));
  EXPECT_TRUE(choosePersistent(16 * 16 * heads, sms, 16 * 2048, 16));
  // Packed documents: 30 of 32K tokens, the bound's tiles.
  EXPECT_TRUE(choosePersistent((256 + 30) * heads, sms, 32768, 30));
  // One sequence of 2K, 4K or 8K (32 heads); not one of 1K (8 x 32 items:
  // less than 2 waves).
  EXPECT_TRUE(choosePersistent(16 * heads, sms, 2048, 1));
  EXPECT_TRUE(choosePersistent(32 * heads, sms, 4096, 1));
  EXPECT_TRUE(choosePersistent(64 * heads, sms, 8192, 1));
  EXPECT_FALSE(choosePersistent(8 * heads, sms, 1024, 1));
  // 4 x 6K; not a batch of 8K sequences (2, 4 or 8 of them), nor 16K keys
  // per sequence on average (one of 16K, 2 x 16K) nor longer.
  EXPECT_TRUE(choosePersistent(4 * 48 * heads, sms, 4 * 6144, 4));
  EXPECT_TRUE(choosePersistent(4 * 64 * heads, sms, 4 * 8192 - 1, 4));
  EXPECT_FALSE(choosePersistent(2 * 64 * heads, sms, 2 * 8192, 2));
  EXPECT_FALSE(choosePersistent(4 * 64 * heads, sms, 4 * 8192, 4));
  EXPECT_FALSE(choosePersistent(8 * 64 * heads, sms, 8 * 8192, 8));
  EXPECT_FALSE(choosePersistent(128 * heads, sms, 16384, 1));
  EXPECT_FALSE(choosePersistent(2 * 128 * heads, sms, 2 * 16384, 2));
  EXPECT_FALSE(choosePersistent(256 * heads, sms, 32768, 1));
  // Degenerate launches.
  EXPECT_FALSE(choosePersistent(8192, 0, 4096, 1));
  EXPECT_FALSE(choosePersistent(8192, sms, 0, 0));
}

TEST(ScheduleTest, SectionsHoldWhatL2Serves) {
  using rt::sectionHeads;
  // One sequence, 32 heads, D = 128, bf16: a KV head's keys and values are
  // 512 bytes per key, so 64 MiB covers 128K keys of KV heads.
  EXPECT_EQ(sectionHeads(32, 32, 4096, 4096, 132, 128, 2), 32);
  EXPECT_EQ(sectionHeads(32, 32, 8192, 8192, 132, 128, 2), 16);
  EXPECT_EQ(sectionHeads(32, 32, 16384, 16384, 132, 128, 2), 8);
  EXPECT_EQ(sectionHeads(32, 32, 32768, 32768, 132, 128, 2), 4);
  EXPECT_EQ(sectionHeads(32, 32, 131072, 131072, 132, 128, 2), 1);
  // Never below one KV head's query heads, even past 64 MiB.
  EXPECT_EQ(sectionHeads(32, 32, 1 << 20, 1 << 20, 132, 128, 2), 1);
  EXPECT_EQ(sectionHeads(32, 8, 1 << 20, 1 << 20, 132, 128, 2), 4);
  // GQA 32/8: whole KV heads' query heads; all heads when they fit.
  EXPECT_EQ(sectionHeads(32, 8, 16384, 16384, 132, 128, 2), 32);
  EXPECT_EQ(sectionHeads(32, 8, 65536, 65536, 132, 128, 2), 8);
  // D = 64 halves the bytes; no keys: one section of all heads.
  EXPECT_EQ(sectionHeads(32, 32, 32768, 32768, 132, 64, 2), 8);
  EXPECT_EQ(sectionHeads(6, 6, 0, 0, 132, 128, 2), 6);
  // A section size that does not divide the heads (the kernel's last
  // section is then smaller).
  EXPECT_EQ(sectionHeads(6, 6, 32768, 32768, 132, 128, 2), 4);
}

TEST(ScheduleTest, SectionsGiveEachStreamReaders) {
  using rt::sectionHeads;
  // 132 SMs over batches of 8 sequences: 4 readers a stream at 4 KV heads
  // (132 items over 4 x 8 streams), where the bytes allow that many.
  EXPECT_EQ(sectionHeads(32, 32, 8 * 1024, 1024, 132, 128, 2), 4);
  EXPECT_EQ(sectionHeads(32, 32, 4 * 1024, 512, 132, 128, 2), 4);
  // Batches of more keys: a batch's bytes bound, 16 MiB (1 KV head at 32K
  // keys; one sequence of 32K keys takes 4).
  EXPECT_EQ(sectionHeads(32, 32, 8 * 2048, 2048, 132, 128, 2), 2);
  EXPECT_EQ(sectionHeads(32, 32, 8 * 4096, 4096, 132, 128, 2), 1);
  EXPECT_EQ(sectionHeads(32, 32, 16 * 2048, 2048, 132, 128, 2), 1);
  EXPECT_EQ(sectionHeads(32, 32, 32768, 32768, 132, 128, 2), 4);
  // More sequences than a KV head's streams can have readers: one KV head.
  EXPECT_EQ(sectionHeads(32, 32, 16 * 512, 512, 132, 128, 2), 2);
  EXPECT_EQ(sectionHeads(32, 32, 64 * 128, 128, 132, 128, 2), 1);
  // GQA 32/8: in KV heads, so 4 of them and their 16 query heads.
  EXPECT_EQ(sectionHeads(32, 8, 8 * 1024, 1024, 132, 128, 2), 16);
  // Packed documents: the longest one counts (8K tokens, at most 512: the
  // bytes bound alone gives 4), at most the tokens.
  EXPECT_EQ(sectionHeads(32, 32, 8192, 512, 132, 128, 2), 2);
  EXPECT_EQ(sectionHeads(32, 32, 1024, 4096, 132, 128, 2), 32);
  // One sequence: the bytes bound up to 33 KV heads.
  EXPECT_EQ(sectionHeads(64, 64, 512, 512, 132, 128, 2), 33);
  // Unknown bound: one sequence's bytes bound; unknown SMs: the bytes
  // bound alone (a batch's).
  EXPECT_EQ(sectionHeads(32, 32, 4 * 4096, 0, 132, 128, 2), 8);
  EXPECT_EQ(sectionHeads(32, 32, 4 * 4096, 4096, 0, 128, 2), 2);
}

TEST(ScheduleTest, LaunchSectionHeads) {
  using rt::launchSectionHeads;
  // A call's own section, at most all heads (the kernel's section x query
  // tiles stays within 32 bits); 0 or less: the runtime's.
  EXPECT_EQ(launchSectionHeads(3, 32, 32, 8192, 1024, 132, 128, 2), 3);
  EXPECT_EQ(launchSectionHeads(64, 32, 32, 8192, 1024, 132, 128, 2), 32);
  EXPECT_EQ(launchSectionHeads(252645136, 32, 8, 8192, 1024, 132, 128, 2), 32);
  EXPECT_EQ(launchSectionHeads(0, 32, 32, 8192, 1024, 132, 128, 2), 4);
  EXPECT_EQ(launchSectionHeads(-1, 32, 32, 8192, 1024, 132, 128, 2), 4);
}

TEST(ScheduleTest, GqaPackingForPowerOfTwoGroups) {
  using rt::GqaPacking;
  using rt::gqaPackShift;
  // Groups of 2..64 pack (a 64-row box holds 64 / G whole positions).
  EXPECT_EQ(gqaPackShift(GqaPacking::Auto, 32, 8), 2);
  EXPECT_EQ(gqaPackShift(GqaPacking::Auto, 8, 4), 1);
  EXPECT_EQ(gqaPackShift(GqaPacking::Auto, 64, 1), 6);
  EXPECT_EQ(gqaPackShift(GqaPacking::On, 16, 1), 4);
  // No GQA, groups that are not powers of two or exceed 64: Auto does not
  // pack, On is refused (-1).
  EXPECT_EQ(gqaPackShift(GqaPacking::Auto, 32, 32), 0);
  EXPECT_EQ(gqaPackShift(GqaPacking::Auto, 12, 4), 0);
  EXPECT_EQ(gqaPackShift(GqaPacking::Auto, 128, 1), 0);
  EXPECT_EQ(gqaPackShift(GqaPacking::On, 32, 32), -1);
  EXPECT_EQ(gqaPackShift(GqaPacking::On, 12, 4), -1);
  EXPECT_EQ(gqaPackShift(GqaPacking::On, 128, 1), -1);
  // Off never packs.
  EXPECT_EQ(gqaPackShift(GqaPacking::Off, 32, 8), 0);
}

TEST(ScheduleTest, SquareTilesOnShortSequencesOfNarrowDefaults) {
  using rt::chooseSquareTiles;
  // A 128x64 default: 128x128 up to 24K keys per sequence on average.
  EXPECT_TRUE(chooseSquareTiles(64, true, 8192, 1));
  EXPECT_TRUE(chooseSquareTiles(64, true, 16384 + 512, 1));
  EXPECT_TRUE(chooseSquareTiles(64, true, 32768 + 512, 1));
  EXPECT_TRUE(chooseSquareTiles(64, true, 65536, 1));
  EXPECT_TRUE(chooseSquareTiles(64, true, 30 * 1000, 30));
  EXPECT_FALSE(chooseSquareTiles(64, true, 65537, 1));
  EXPECT_FALSE(chooseSquareTiles(64, true, 2 * 70000, 2));
  // No 128x128 kernels, a 128x128 default, no sequences.
  EXPECT_FALSE(chooseSquareTiles(64, false, 8192, 1));
  EXPECT_FALSE(chooseSquareTiles(128, true, 8192, 1));
  EXPECT_FALSE(chooseSquareTiles(64, true, 0, 0));
}

} // namespace
} // namespace cmask
