//===- BackwardRowwise.cpp - The backward's per-row kernels ---------------===//
//
// Two small kernels around the tile kernels, one thread group per
// (query row, head):
//   <name>_pre  D / 8 threads per (query row, head): delta = rowsum(dO * O),
//               mlse = -LSE * log2(e) (both fp32 [heads, ld_stride]); and
//               the dQ accumulator or its units' words zeroed (two float4s
//               per thread).
//   <name>_dq   dQ = scale * dQacc in the element type, four float4s of the
//               blocked accumulator (AttentionBackward.cpp) per thread.
// The runtime launches the main kernel and _dq as programmatic dependents
// of the kernel before them (docs/attention.md, Backward): _pre lets the
// main kernel start early, _dq waits for it before reading anything.
//
//===----------------------------------------------------------------------===//

#include "BackwardKernels.h"
#include "HopperEmitter.h"

#include "cmask_runtime/KernelABI.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cmask;
namespace bwd_pre = ::cmask::abi::backward_pre;
namespace bwd_dq = ::cmask::abi::backward_dq;
namespace bwd = ::cmask::abi::backward;

namespace {

class RowwiseKernel : public HopperEmitter {
public:
  RowwiseKernel(OpBuilder &b, Location loc, const BackwardVariant &v)
      : HopperEmitter(b, loc, v.dtype), v(v) {}
  void buildPre(gpu::GPUFuncOp func);
  void buildConvert(gpu::GPUFuncOp func);

private:
  /// The global thread index of a 1-D launch.
  Value globalThread() {
    Value bid =
        fromIndex(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x), i64);
    Value dim =
        fromIndex(gpu::BlockDimOp::create(b, loc, gpu::Dimension::x), i64);
    Value tid =
        fromIndex(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x), i64);
    return add(mul(bid, dim), tid);
  }

  const BackwardVariant &v;
};

} // namespace

void RowwiseKernel::buildPre(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  // The main kernel, launched as this one's programmatic dependent, may
  // start its CTAs (their prologue and fixed tile) under this one's last
  // wave; it waits for this grid before it reads mlse, delta or the dQ
  // accumulator (BackwardWalk::buildWalk).
  launchDependents();
  // (O, dO, LSE, mlse, delta, total_q i64, heads i32, ld_stride i64,
  //  o_token, o_head, do_token, do_head i64, zero, zero_float4s i64); mlse and
  //  delta are [heads, ld_stride] (ld_stride >= total_q, a multiple of 4 for
  //  TMA).
  // D / 8 consecutive threads per (row, head), 16 bytes of O and dO each
  // (coalesced), summed with butterfly shuffles.
  Value gO = global(arg(bwd_pre::O)), gdO = global(arg(bwd_pre::DO)),
        gLSE = global(arg(bwd_pre::Lse));
  Value gMlse = global(arg(bwd_pre::Mlse)),
        gDelta = global(arg(bwd_pre::Delta));
  Value total = arg(bwd_pre::TotalQ), heads = zext64(arg(bwd_pre::NumHeads)),
        ldStride = arg(bwd_pre::LdStride);
  int64_t lanes = v.headDim / 8;
  Value x = globalThread();
  // The dQ accumulator or its units' words zeroed (the runtime's choice:
  // abi::backward::firstStoreFor), kZeroFloat4sPerThread consecutive float4s
  // per thread (zero_float4s is a multiple of it: a thread's are all
  // inside or all outside).
  constexpr int64_t zeroPer = bwd_pre::kZeroFloat4sPerThread;
  static_assert(16 % zeroPer == 0, "a thread's float4s inside or outside");
  Value firstZero = mul(x, c64(zeroPer));
  ifThen(cmp(arith::CmpIPredicate::slt, firstZero, arg(bwd_pre::ZeroFloat4s)),
         [&] {
           Value gAcc = global(arg(bwd_pre::Zero));
           Value zeros = arith::ConstantOp::create(
               b, loc, DenseElementsAttr::get(VectorType::get({4}, f32), 0.0f));
           for (int64_t i = 0; i < zeroPer; ++i)
             LLVM::StoreOp::create(
                 b, loc, zeros,
                 gep(gAcc, mul(add(firstZero, c64(i)), c64(4)), f32), 16);
         });
  Value count = mul(total, heads);
  Value pairIndex = divu(x, c64(lanes));
  Value part = arith::RemUIOp::create(b, loc, x, c64(lanes));
  // Threads past the end read the last row (every lane takes part in the
  // shuffles) and store nothing.
  Value clamped = mins(pairIndex, sub(count, c64(1)));
  Value row = divu(clamped, heads);
  Value head = arith::RemUIOp::create(b, loc, clamped, heads);
  auto chunk = [&](Value base, Value tokenStride, Value headStride) {
    Value p = gep(base,
                  add(add(mul(row, tokenStride), mul(head, headStride)),
                      mul(part, c64(8))),
                  elt);
    return arith::ExtFOp::create(b, loc, VectorType::get({8}, f32),
                                 load(VectorType::get({8}, elt), p, 16));
  };
  Value o = chunk(gO, arg(bwd_pre::OTokenStride), arg(bwd_pre::OHeadStride)),
        g = chunk(gdO, arg(bwd_pre::DOTokenStride), arg(bwd_pre::DOHeadStride));
  Value sum = cF32(0.0);
  for (int64_t k = 0; k < 8; ++k)
    sum = fma(vector::ExtractOp::create(b, loc, o, ArrayRef<int64_t>{k}),
              vector::ExtractOp::create(b, loc, g, ArrayRef<int64_t>{k}), sum);
  for (int64_t offset = 1; offset < lanes; offset *= 2)
    sum = addf(sum, gpu::ShuffleOp::create(b, loc, sum, c32(offset), c32(32),
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult());
  Value first = cmp(arith::CmpIPredicate::eq, part, c64(0));
  Value inside = cmp(arith::CmpIPredicate::slt, pairIndex, count);
  ifThen(arith::AndIOp::create(b, loc, first, inside), [&] {
    Value at = add(mul(head, ldStride), row);
    store(sum, gep(gDelta, at, f32));
    Value lse = load(f32, gep(gLSE, add(mul(head, total), row), f32),
                     4); // [heads, total_q]
    store(mulf(lse, cF32(-M_LOG2E)), gep(gMlse, at, f32));
  });
  gpu::ReturnOp::create(b, loc);
}

void RowwiseKernel::buildConvert(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  // Launched as the main kernel's programmatic dependent: nothing is read
  // before that grid (which waited for the pre-pass's) has completed.
  gridDependencyWait();
  // (dQacc, dQ, cu_q, num_seqs i32, search_steps i32 (bit width of
  //  num_seqs), float4s i64 (of dQacc), heads i32, dq_token, dq_head i64,
  //  scale f32): kFloat4sPerThread consecutive float4s of the blocked
  //  accumulator (file comment) per thread: float4 i holds rows R and R + 8,
  //  columns c + 2i and c + 2i + 1. They lie in one 16-row group of one
  //  head, so the decode and the search of the sequence are done once for
  //  them (done per float4, they were the kernel's cost at 8 sequences and
  //  more: 1.4x the time of one sequence's).
  constexpr int64_t per = bwd_dq::kFloat4sPerThread;
  static_assert(4 % per == 0, "a thread's float4s in one row, 8 columns");
  static_assert(bwd::kUnitBytes % (16 * per) == 0,
                "a thread's float4s in one unit");
  Value gAcc = global(arg(bwd_dq::DQAccumulator)),
        gdQ = global(arg(bwd_dq::DQ)), cuQ = global(arg(bwd_dq::CuSeqlensQ));
  Value numSeqs = arg(bwd_dq::NumSeqs), heads = zext64(arg(bwd_dq::NumHeads)),
        scaleArg = arg(bwd_dq::Scale);
  Value x = mul(globalThread(), c64(per));
  // float4s is a multiple of 4 D (whole groups): a thread's are all inside.
  ifThen(cmp(arith::CmpIPredicate::slt, x, arg(bwd_dq::Float4s)), [&] {
    // With dq_units: a unit whose word is 0 saw no contribution, and its
    // accumulator was never written (abi::backward::firstStore): zeros.
    Type v4 = VectorType::get({4}, f32);
    Value units = global(arg(bwd_dq::DQUnits));
    Value hasUnits = nonNull(units);
    Value written = ifElse(
        hasUnits, TypeRange{b.getI1Type()},
        [&] {
          Value unit = divu(x, c64(bwd::kUnitBytes / 16));
          return SmallVector<Value>{
              cmp(arith::CmpIPredicate::ne, loadI32(units, unit), c32(0))};
        },
        [&] { return SmallVector<Value>{cBool(true)}; })[0];
    SmallVector<Value> fours = ifElse(
        written, SmallVector<Type>(per, v4),
        [&] {
          SmallVector<Value> read;
          for (int64_t i = 0; i < per; ++i)
            read.push_back(
                load(v4, gep(gAcc, mul(add(x, c64(i)), c64(4)), f32), 16));
          return read;
        },
        [&] {
          return SmallVector<Value>(
              per,
              arith::ConstantOp::create(
                  b, loc, DenseElementsAttr::get(cast<VectorType>(v4), 0.0f)));
        });
    // In the group's 4 D float4s: 32 per 8 columns, 4 per row (R % 8), one
    // per column pair (AttentionBackward.cpp); the thread's share a row.
    Value within = arith::RemUIOp::create(b, loc, x, c64(4 * v.headDim));
    Value lr = arith::RemUIOp::create(b, loc, divu(within, c64(4)), c64(8));
    Value pairIndex = add(mul(divu(within, c64(32)), c64(4)),
                          arith::RemUIOp::create(b, loc, within, c64(4)));
    Value gh = divu(x, c64(4 * v.headDim));
    Value head = arith::RemUIOp::create(b, loc, gh, heads);
    Value groupRow = mul(divu(gh, heads), c64(16));
    // The sequence whose padded rows hold the group: the last s with
    // base(s) <= its first row (bases are multiples of 16).
    auto base = [&](Value s) {
      Value start = sext64(loadI32(cuQ, s));
      return add(bitAnd(add(start, c64(15)), c64(~int64_t(15))),
                 mul(sext64(s), c64(16)));
    };
    SmallVector<Value> range =
        loop(c64(0), sext64(arg(bwd_dq::SearchSteps)), {c32(0), numSeqs},
             [&](Value, SmallVector<Value> lh) {
               Value lo = lh[0], hi = lh[1];
               Value active =
                   cmp(arith::CmpIPredicate::sgt, sub(hi, lo), c32(1));
               Value mid = divu(add(lo, hi), c32(2));
               Value below = arith::AndIOp::create(
                   b, loc, active,
                   cmp(arith::CmpIPredicate::sle, base(mid), groupRow));
               Value above = arith::AndIOp::create(
                   b, loc, active,
                   arith::XOrIOp::create(b, loc, below, cBool(true)));
               return SmallVector<Value>{select(below, mid, lo),
                                         select(above, mid, hi)};
             });
    Value seq = range[0];
    Value start = loadI32(cuQ, seq);
    Value len = sext64(sub(loadI32(cuQ, add(seq, c32(1))), start));
    Value local = add(sub(groupRow, base(seq)), lr);
    Value column =
        add(mul(head, arg(bwd_dq::DQHeadStride)), mul(pairIndex, c64(2)));
    // Per row: the 2 per columns as one 16-byte store (per = 4) where the
    // strides and base allow, else pairs of 4 bytes.
    Value vectorOk = sixteenByteAligned(
        gdQ, {arg(bwd_dq::DQTokenStride), arg(bwd_dq::DQHeadStride)});
    for (int64_t h = 0; h < 2; ++h) {
      Value r = add(local, c64(8 * h));
      ifThen(cmp(arith::CmpIPredicate::slt, r, len), [&] {
        Value row = add(sext64(start), r);
        Value out =
            gep(gdQ, add(mul(row, arg(bwd_dq::DQTokenStride)), column), elt);
        SmallVector<Value> pairs;
        for (int64_t i = 0; i < per; ++i) {
          auto scaled = [&](int64_t e) {
            return mulf(vector::ExtractOp::create(b, loc, fours[i],
                                                  ArrayRef<int64_t>{e}),
                        scaleArg);
          };
          pairs.push_back(packPair(scaled(2 * h), scaled(2 * h + 1), elt));
        }
        ifThen(vectorOk, [&] {
          LLVM::StoreOp::create(b, loc,
                                vector::FromElementsOp::create(
                                    b, loc, VectorType::get({per}, i32), pairs),
                                out, 4 * per);
        });
        ifThen(arith::XOrIOp::create(b, loc, vectorOk, cBool(true)), [&] {
          for (int64_t i = 0; i < per; ++i)
            store(pairs[i], gep(out, c64(2 * i), elt));
        });
      });
    }
  });
  gpu::ReturnOp::create(b, loc);
}

//===----------------------------------------------------------------------===//
// Main kernel.
//===----------------------------------------------------------------------===//

void mlir::cmask::buildBackwardPre(OpBuilder &b, Location loc,
                                   const BackwardVariant &v,
                                   gpu::GPUFuncOp func) {
  RowwiseKernel(b, loc, v).buildPre(func);
}

void mlir::cmask::buildBackwardConvert(OpBuilder &b, Location loc,
                                       const BackwardVariant &v,
                                       gpu::GPUFuncOp func) {
  RowwiseKernel(b, loc, v).buildConvert(func);
}
