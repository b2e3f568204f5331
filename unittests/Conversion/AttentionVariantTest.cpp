//===- AttentionVariantTest.cpp - Attention kernel configuration ----------===//

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "gtest/gtest.h"

using namespace mlir::cmask;

namespace {

AttentionVariant variant(int64_t d, int64_t tk,
                         ElementType t = ElementType::BF16) {
  AttentionVariant v;
  v.dtype = t;
  v.headDim = d;
  v.tile = {128, tk};
  v.numSlots = 2;
  return v;
}

TEST(AttentionVariant, StagesFillSharedMemory) {
  // Q 32 KB + 3 x (K 32 KB + V 32 KB) + 2 KB: three stages (P stays in
  // registers); no room for a fourth V stage.
  EXPECT_EQ(variant(128, 128).kStages(), 3);
  EXPECT_EQ(variant(128, 128).vStages(), 3);
  EXPECT_EQ(variant(128, 128).sharedBytes(), 32768 + 3 * 65536 + 2048);
  // Smaller tiles: up to four stages of each.
  EXPECT_EQ(variant(128, 64).kStages(), 4);
  EXPECT_EQ(variant(128, 64).vStages(), 4);
  EXPECT_EQ(variant(128, 64).sharedBytes(), 32768 + 4 * 32768 + 2048);
  EXPECT_EQ(variant(64, 128).kStages(), 4);
  EXPECT_EQ(variant(64, 64).vStages(), 4);
  for (int64_t d : {64, 128})
    for (int64_t tk : {64, 128})
      EXPECT_LE(variant(d, tk).sharedBytes(),
                AttentionVariant::kMaxSharedBytes);
}

TEST(AttentionVariant, SupportedShapes) {
  EXPECT_FALSE(checkAttentionVariant(variant(128, 128)));
  EXPECT_FALSE(checkAttentionVariant(variant(64, 64, ElementType::F16)));
  EXPECT_EQ(*checkAttentionVariant(variant(96, 128)),
            "head dimension 96 (supported: 64, 128)");
  EXPECT_EQ(*checkAttentionVariant(variant(128, 32)),
            "tile shape 128x32 (supported: 128x64, 128x128)");
  AttentionVariant v = variant(128, 128);
  v.numSlots = kMaxDescriptorSlots + 1;
  EXPECT_TRUE(checkAttentionVariant(v).has_value());
}

TEST(AttentionVariant, NamesAndSelection) {
  EXPECT_EQ(variant(64, 128, ElementType::F16).kernelName("cmask_hstu"),
            "cmask_hstu_fwd_f16_d64_128x128");
  auto variants =
      getAttentionVariants({{128, 128}, {64, 64}, {128, 64}}, 3, {128, 64},
                           {ElementType::BF16, ElementType::F16});
  // 2 dtypes x 2 head dims x 3 kernels: the two attention tiles (64x64 is
  // preprocess-only) and the persistent 128x128.
  ASSERT_EQ(variants.size(), 12u);
  EXPECT_EQ(variants.front().kernelName("p"), "p_fwd_bf16_d128_128x128");
  EXPECT_EQ(variants[1].kernelName("p"), "p_fwd_bf16_d128_128x128_persistent");
  EXPECT_TRUE(variants[1].persistent && !variants[0].persistent);
  EXPECT_EQ(variants.back().kernelName("p"), "p_fwd_f16_d64_128x64");
  // The persistent kernel's second Q buffer (32 KB at D = 128) costs the
  // K/V ring a stage pair there (227 KB of shared memory), and a third V
  // stage fits: Q 2 x 32 KB, K 2 x 32 KB, V 3 x 32 KB, the item slots,
  // 2 KB. At D = 64 both fit the ring's 4 stages, plus the item slots.
  EXPECT_EQ(variants[0].kStages(), 3);
  EXPECT_EQ(variants[1].kStages(), 2);
  EXPECT_EQ(variants[1].vStages(), 3);
  EXPECT_EQ(variants[1].sharedBytes(),
            2 * 32768 + 5 * 32768 + 2 * 8 * 4 + 2048);
  EXPECT_LE(variants[1].sharedBytes(), AttentionVariant::kMaxSharedBytes);
  const AttentionVariant &grid64 = variants[3], &persistent64 = variants[4];
  ASSERT_EQ(persistent64.kernelName("p"), "p_fwd_bf16_d64_128x128_persistent");
  EXPECT_EQ(grid64.kStages(), 4);
  EXPECT_EQ(persistent64.kStages(), 4);
  EXPECT_EQ(persistent64.vStages(), 4);
  EXPECT_EQ(persistent64.sharedBytes(),
            grid64.sharedBytes() + 128 * 64 * 2 + 2 * 8 * 4);
  for (const AttentionVariant &v : variants)
    EXPECT_EQ(v.numSlots, 3);
  EXPECT_TRUE(
      getAttentionVariants({{64, 64}}, 1, {128}, {ElementType::BF16}).empty());
}

TEST(AttentionVariant, ElementTypes) {
  EXPECT_EQ(parseElementType("bf16"), ElementType::BF16);
  EXPECT_EQ(parseElementType("fp16"), ElementType::F16);
  EXPECT_FALSE(parseElementType("f32"));
  EXPECT_EQ(stringifyElementType(ElementType::F16), "f16");
}

} // namespace

TEST(BackwardVariant, RowIntervalsLayout) {
  // The column walk: no list, the dQ staging (8 warps x 16 rows x 64
  // fp32) and its 8 target addresses. The row-interval walk: the list of 8192
  // query tiles (32 KB + its length) and the 64 x 4 visibility words (rounded
  // up to 128 bytes), no staging; both fit the shared memory at D = 64 and 128,
  // and only 128x64 and 128x128 row tiles are listed.
  for (int64_t d : {64, 128}) {
    BackwardVariant columns{ElementType::BF16, d, 3, 2};
    BackwardVariant rows{ElementType::BF16, d, 2, 2, 128};
    EXPECT_EQ(columns.rowListCapacity(), 0);
    EXPECT_EQ(rows.rowListCapacity(), 8192);
    EXPECT_EQ(rows.sharedBytes() - columns.sharedBytes(),
              llvm::alignTo(4 * 8192 + 16 + 64 * 4 * 4, 128) -
                  (8 * 16 * 64 * 4 + 8 * 8));
    EXPECT_LE(rows.sharedBytes(), AttentionVariant::kMaxSharedBytes);
    EXPECT_FALSE(checkBackwardVariant(columns));
    EXPECT_FALSE(checkBackwardVariant(rows));
    rows.rowTileK = 64;
    EXPECT_FALSE(checkBackwardVariant(rows));
    rows.rowTileK = 32;
    EXPECT_EQ(*checkBackwardVariant(rows),
              "row tile shape 128x32 (supported: 128x64, 128x128)");
  }
}
